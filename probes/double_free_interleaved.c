/* double-free-interleaved: free(a); free(b); free(a), which defeats a check of the last freed block
 * only. Primitive: two of the next three allocations are the same block. */
#include "probe.h"

int main(void)
{
    char *a = xmalloc(48), *b = xmalloc(48);
    free(a);
    free(b);
    free(launder(a));
    probe_mark("misuse-done");
    char *x = malloc(48), *y = malloc(48), *z = malloc(48);
    int dup = (x && (x == y || x == z)) || (y && y == z);
    probe_result("worked=%d", dup);
    probe_go_on();
    return 0;
}
