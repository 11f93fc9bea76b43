/* double-free-cache-full: the interleaved double free (a, b, a) after 16 frees of the same size have
 * filled any per-thread cache, so the frees reach the allocator's deeper free lists (the fastbin-dup
 * technique). Primitive: two of the following allocations are the same block. */
#include "probe.h"

#define FILL 16
#define SIZE 48

int main(void)
{
    void *fill[FILL];
    for (int i = 0; i < FILL; i++)
        fill[i] = xmalloc(SIZE);
    char *a = xmalloc(SIZE), *b = xmalloc(SIZE);
    for (int i = 0; i < FILL; i++)
        free(fill[i]);
    free(a);
    free(b);
    free(launder(a));
    probe_mark("misuse-done");
    enum { N = FILL + 3 };
    void *got[N];
    size_t sizes[N];
    for (int i = 0; i < N; i++) {
        got[i] = malloc(SIZE);
        sizes[i] = SIZE;
    }
    size_t overlaps = count_overlaps(got, sizes, N);
    probe_result("worked=%d overlaps=%zu", overlaps > 0, overlaps);
    probe_go_on();
    return 0;
}
