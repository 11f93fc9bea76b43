/* freelist-poison: free two 64-byte blocks, then overwrite their first two words (where intrusive
 * free lists keep their links) with a chosen address in static memory. Primitive: one of the next
 * eight allocations returns memory at the chosen address. */
#include "probe.h"

#define SIZE 64

int main(void)
{
    void *keep = xmalloc(SIZE);
    uintptr_t *a = xmalloc(SIZE), *b = xmalloc(SIZE);
    free(a);
    free(b);
    uintptr_t target = (uintptr_t)(probe_static_area + 4096);
    volatile uintptr_t *va = launder(a), *vb = launder(b);
    va[0] = va[1] = target;
    vb[0] = vb[1] = target;
    probe_mark("misuse-done");
    int inside = 0;
    for (int i = 0; i < 8; i++)
        inside += in_static_area(malloc(SIZE));
    probe_result("worked=%d inside=%d", inside > 0, inside);
    free(keep);
    probe_go_on();
    return 0;
}
