/* invalid-free-unaligned: free(p + 1) for a live block p. Primitive: a later allocation of the size
 * overlaps the still-live p; searched over 100,000 allocations. */
#include "probe.h"

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 48);
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    char *p = (char *)xmalloc(size);
    fill_bytes(p, 0, size, 'P');
    probe_live_add(p, size);
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    probe_mark("setup-done");
    pfree(launder(p + 1));
    probe_mark("misuse-done");
    struct probe_hunt h = {0};
    h.size = size;
    h.window = PROBE_WINDOW;
    probe_hunt(&h);
    int worked = h.why == PROBE_HUNT_OVERLAP;
    if (worked)
        probe_mark("primitive");
    probe_result("worked=%d size=%zu step=%lu inside_victim=%d made=%lu", worked, size, worked ? h.step : 0ul,
                 worked && h.hit_other == p, h.made);
    probe_go_on();
    return 0;
}
