/* uaf-read: read a freed block through the pointer kept after free, on a heap with live neighbours
 * of its size. Primitive: the stale pointer reads data it must not see, either the block's old
 * contents right after the free (bytes past the first 16, where free lists keep their links; all of
 * a block under 32 bytes) or, failing that, the data of the block's next owner when the allocator
 * hands the memory out again within 100,000 allocations (step = that allocation). */
#include "probe.h"

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 64);
    size_t skip = size >= 32 ? 16 : 0;
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    unsigned char *p = xmalloc(size);
    fill_bytes(p, 0, size, 'S');
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    probe_target(p + skip, p + size);
    probe_mark("setup-done");
    pfree(p);
    size_t old = count_bytes(launder(p), skip, size, 'S'); /* the misuse: a read after free */
    probe_mark("misuse-done");
    int worked = old > 0 && old * 2 >= size - skip;
    struct probe_hunt h = {0};
    size_t seen = 0;
    if (worked) {
        probe_mark("primitive");
    } else {
        h.size = size;
        h.window = PROBE_WINDOW;
        h.watch = p;
        h.watch_len = size;
        h.stop_on_watch = 1;
        probe_hunt(&h);
        if (h.why == PROBE_HUNT_WATCH) {
            /* The new owner writes its data; the stale pointer reads it where the two overlap. */
            unsigned char *q = (unsigned char *)h.hit;
            fill_bytes(q, 0, size, 'N');
            uintptr_t lo = (uintptr_t)q > (uintptr_t)p ? (uintptr_t)q : (uintptr_t)p;
            uintptr_t hi = (uintptr_t)q + size < (uintptr_t)p + size ? (uintptr_t)q + size : (uintptr_t)p + size;
            seen = count_bytes(launder(p), lo - (uintptr_t)p, hi - (uintptr_t)p, 'N');
        }
        worked = seen > 0 || h.why == PROBE_HUNT_OVERLAP;
        if (worked)
            probe_mark("primitive");
    }
    probe_result("worked=%d size=%zu step=%lu old_bytes=%zu of=%zu new_owner_bytes=%zu made=%lu", worked, size,
                 worked ? h.step : 0ul, old, size - skip, seen, h.made);
    probe_go_on();
    return 0;
}
