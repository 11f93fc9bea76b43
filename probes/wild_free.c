/* wild-free: free a pointer into static memory that malloc never returned (zeroed, no forged header).
 * Primitive: a later allocation of the size returns memory in that static area; searched over
 * 100,000 allocations. */
#include "probe.h"

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 48);
    probe_neighbours(size, PROBE_NEIGHBOURS);
    probe_mark("setup-done");
    pfree(launder(probe_static_area + 4096));
    probe_mark("misuse-done");
    struct probe_hunt h;
    int worked = probe_hunt_returned(&h, size);
    probe_result("worked=%d size=%zu step=%lu inside_static=%d made=%lu", worked, size, worked ? h.step : 0ul,
                 h.why == PROBE_HUNT_OUTSIDE, h.made);
    probe_go_on();
    return 0;
}
