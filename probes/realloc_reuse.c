/* realloc-reuse: grow a block with realloc (live neighbours of its size make it move) and go on using
 * the old pointer. Primitive: the old block's memory is handed to a new owner (within 100,000
 * allocations of its size) and a write through the old pointer changes the new owner's data. If the
 * block grew in place at every try, the old pointer is still valid: not applicable. */
#include "probe.h"

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 64);
    size_t skip = size >= 32 ? 16 : 0;
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    unsigned char *p = (unsigned char *)xmalloc(size);
    fill_bytes(p, 0, size, 'O');
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    unsigned char *q = p;
    size_t grown = size;
    for (size_t factor = 2; factor <= 64 && q == p; factor *= 4) {
        grown = size * factor;
        unsigned char *r = (unsigned char *)prealloc(q, grown);
        if (!r)
            probe_setup_failed("realloc to %zu bytes returned NULL", grown);
        q = r;
    }
    if (q == p)
        probe_not_applicable(size, "realloc-grew-in-place");
    probe_live_add(q, grown);
    probe_target(p + skip, p + size);
    probe_mark("setup-done");
    size_t old = count_bytes(launder(p), skip, size, 'O'); /* the misuse: the old pointer read ... */
    probe_mark("misuse-done");
    struct probe_hunt h = {0};
    h.size = size;
    h.window = PROBE_WINDOW;
    h.watch = p;
    h.watch_len = size;
    h.stop_on_watch = 1;
    probe_hunt(&h);
    size_t reached = 0;
    if (h.why == PROBE_HUNT_WATCH) {
        unsigned char *n = (unsigned char *)h.hit;
        fill_bytes(n, 0, size, 'N');
        uintptr_t lo = (uintptr_t)n > (uintptr_t)p ? (uintptr_t)n : (uintptr_t)p;
        uintptr_t hi = (uintptr_t)n + size < (uintptr_t)p + size ? (uintptr_t)n + size : (uintptr_t)p + size;
        fill_bytes(launder(p), lo - (uintptr_t)p, hi - (uintptr_t)p, 'X'); /* ... and written */
        reached = count_bytes(n, 0, size, 'X');
    }
    int worked = reached > 0 || h.why == PROBE_HUNT_OVERLAP;
    if (worked)
        probe_mark("primitive");
    probe_result("worked=%d size=%zu step=%lu grown_to=%zu old_bytes=%zu of=%zu new_owner_bytes_written=%zu made=%lu",
                 worked, size, worked ? h.step : 0ul, grown, old, size - skip, reached, h.made);
    probe_go_on();
    return 0;
}
