/* double-free-interleaved: free(a); free(b); free(a), which defeats a check of the last freed block
 * only; live neighbours of the size around them. Primitive: a is handed out twice (two live blocks
 * share memory), searched over 100,000 allocations. */
#include "probe.h"

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 48);
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    char *a = xmalloc(size), *b = xmalloc(size);
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    probe_mark("setup-done");
    pfree(a);
    pfree(b);
    pfree(launder(a));
    probe_mark("misuse-done");
    probe_finish_duplicate(size, a);
    return 0;
}
