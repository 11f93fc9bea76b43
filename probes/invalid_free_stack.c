/* invalid-free-stack: free a pointer into a zeroed buffer on the stack (16 bytes in, aligned, no
 * forged header). Primitive: a later allocation of the size returns stack memory; searched over
 * 100,000 allocations while the buffer's frame is live. */
#include "probe.h"

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 48);
    if (size > (1u << 20))
        probe_not_applicable(size, "larger-than-a-stack-buffer-of-1-MiB");
    probe_neighbours(size, PROBE_NEIGHBOURS);
    size_t len = size + 64;
    unsigned char buf[len] __attribute__((aligned(16)));
    fill_bytes(buf, 0, len, 0);
    probe_mark("setup-done");
    pfree(launder(buf + 16));
    probe_mark("misuse-done");
    struct probe_hunt h = {0};
    h.size = size;
    h.window = PROBE_WINDOW;
    h.stop_outside_heap = 1;
    h.extra = buf;
    h.extra_len = len;
    probe_hunt(&h);
    int worked = h.why == PROBE_HUNT_OUTSIDE || h.why == PROBE_HUNT_OVERLAP;
    if (worked)
        probe_mark("primitive");
    probe_result("worked=%d size=%zu step=%lu on_stack=%d made=%lu", worked, size, worked ? h.step : 0ul,
                 worked && ranges_overlap(h.hit, size, buf, len), h.made);
    probe_go_on();
    return 0;
}
