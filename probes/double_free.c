/* double-free: free(a); free(a), with live neighbours of a's size allocated before and after it.
 * Primitive: the allocator hands a out twice, so two live blocks share memory. The search runs over
 * 100,000 allocations of the size and records the allocation number (step) of the second copy. */
#include "probe.h"

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 48);
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    char *a = xmalloc(size);
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    probe_mark("setup-done");
    pfree(a);
    pfree(launder(a));
    probe_mark("misuse-done");
    probe_finish_duplicate(size, a);
    return 0;
}
