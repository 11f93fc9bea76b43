/* overlap-after-double-free: a is freed, 32 other blocks of its size are freed, then a again (a
 * delayed double free, past any quarantine of recent frees), with live neighbours of the size.
 * Primitive: two live blocks share memory, searched over 100,000 allocations. */
#include "probe.h"

#define OTHERS 32

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 64);
    static void *others[OTHERS];
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    char *a = xmalloc(size);
    for (int i = 0; i < OTHERS; i++)
        others[i] = xmalloc(size);
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    probe_mark("setup-done");
    pfree(a);
    for (int i = 0; i < OTHERS; i++)
        pfree(others[i]);
    pfree(launder(a));
    probe_mark("misuse-done");
    probe_finish_duplicate(size, a);
    return 0;
}
