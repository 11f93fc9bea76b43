/* uaf-write: write into a freed block through the pointer kept after free (past the first 16 bytes,
 * where free-list links live; all of a block under 32 bytes), on a heap with live neighbours of its
 * size, then allocate up to 100,000 blocks of the size, where a checking allocator would notice.
 * Primitive: the write goes unnoticed and the block's next owner receives it with the attacker's
 * bytes in it (step = the allocation that returned it). */
#include "probe.h"

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 64);
    size_t skip = size >= 32 ? 16 : 0;
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    unsigned char *p = xmalloc(size);
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    probe_target(p + skip, p + size);
    probe_mark("setup-done");
    pfree(p);
    fill_bytes(launder(p), skip, size, 'W'); /* the misuse: a write after free */
    probe_mark("misuse-done");
    struct probe_hunt h = {0};
    h.size = size;
    h.window = PROBE_WINDOW;
    h.watch = p;
    h.watch_len = size;
    h.stop_on_watch = 1;
    probe_hunt(&h);
    size_t carried = 0, span = 0;
    if (h.why == PROBE_HUNT_WATCH) {
        uintptr_t q = (uintptr_t)h.hit, a = (uintptr_t)p + skip, b = (uintptr_t)p + size;
        uintptr_t lo = q > a ? q : a, hi = q + size < b ? q + size : b;
        if (hi > lo) {
            span = hi - lo;
            carried = count_bytes((void *)lo, 0, span, 'W');
        }
    }
    int worked = h.why == PROBE_HUNT_OVERLAP || (span > 0 && carried * 2 >= span);
    if (worked)
        probe_mark("primitive");
    probe_result("worked=%d size=%zu step=%lu reused_at=%lu carried=%zu of=%zu made=%lu", worked, size,
                 worked ? h.step : 0ul, h.step, carried, span, h.made);
    probe_go_on();
    return 0;
}
