/* interior-free: free a pointer 64 bytes inside a live 128-byte block. Primitive: a later allocation
 * is placed inside the still-live block. */
#include "probe.h"

int main(void)
{
    char *p = xmalloc(128);
    memset(p, 'P', 128);
    free(launder(p + 64));
    probe_mark("misuse-done");
    int inside = 0;
    for (int i = 0; i < 16; i++) {
        char *q = malloc(48);
        if (q && (uintptr_t)q + 48 > (uintptr_t)p && (uintptr_t)q < (uintptr_t)p + 128)
            inside++;
    }
    probe_result("worked=%d inside=%d", inside > 0, inside);
    probe_go_on();
    return 0;
}
