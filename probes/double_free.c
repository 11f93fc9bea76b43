/* double-free: free(a); free(a). Primitive: the next two allocations both return a. */
#include "probe.h"

int main(void)
{
    char *a = xmalloc(48);
    free(a);
    free(launder(a));
    probe_mark("misuse-done");
    char *x = malloc(48), *y = malloc(48);
    probe_result("worked=%d same_block_twice=%d", x && x == y, x && x == y);
    probe_go_on();
    return 0;
}
