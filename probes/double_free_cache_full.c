/* double-free-cache-full: the interleaved double free (a, b, a) after 16 frees of the same size have
 * filled any per-thread cache, so the frees reach the allocator's deeper free lists (the fastbin-dup
 * technique). Primitive: a is handed out twice (two live blocks share memory), searched over 100,000
 * allocations. */
#include "probe.h"

#define FILL 16

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 48);
    static void *fill[FILL];
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    for (int i = 0; i < FILL; i++)
        fill[i] = xmalloc(size);
    char *a = xmalloc(size), *b = xmalloc(size);
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    for (int i = 0; i < FILL; i++)
        pfree(fill[i]);
    probe_mark("setup-done");
    pfree(a);
    pfree(b);
    pfree(launder(a));
    probe_mark("misuse-done");
    probe_finish_duplicate(size, a);
    return 0;
}
