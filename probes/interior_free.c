/* interior-free: free a pointer into the middle of a live block (at half its size, rounded down to
 * 16 bytes; 8 bytes in for blocks under 32). Primitive: a later allocation (of the bytes from that
 * point to the end) is placed inside the still-live block; searched over 100,000 allocations. */
#include "probe.h"

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 128);
    if (size < 16)
        probe_not_applicable(size, "block-too-small-for-an-interior-pointer");
    size_t off = size >= 32 ? (size / 2) & ~(size_t)15 : 8;
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    char *p = (char *)xmalloc(size);
    fill_bytes(p, 0, size, 'P');
    probe_live_add(p, size);
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    probe_mark("setup-done");
    pfree(launder(p + off));
    probe_mark("misuse-done");
    struct probe_hunt h = {0};
    h.size = size - off;
    h.window = PROBE_WINDOW;
    probe_hunt(&h);
    int worked = h.why == PROBE_HUNT_OVERLAP;
    if (worked)
        probe_mark("primitive");
    probe_result("worked=%d size=%zu step=%lu offset=%zu inside_victim=%d made=%lu", worked, size,
                 worked ? h.step : 0ul, off, worked && h.hit_other == p, h.made);
    probe_go_on();
    return 0;
}
