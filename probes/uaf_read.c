/* uaf-read: read a freed block through the pointer kept after free, on a heap with live neighbours of its
 * size. Two misuses, told apart because different defences stop them (argv[2]):
 *   stale (default): read the block right after the free. Primitive: its old contents are still there
 *     (bytes past the first 16, where free lists keep their links; all of a block under 32 bytes), an
 *     information leak of freed secrets and pointers. Poisoning or zeroing on free stops it.
 *   reused: let the allocator hand the memory out again (within 100,000 allocations, fewer at large sizes:
 *     step), the new owner writes its data, then read through the stale pointer. Primitive: the next owner's data read
 *     (or two live blocks overlapping). Only memory that is never handed out again while a stale pointer
 *     may read it (freed pages made inaccessible) stops it; poisoning does not. */
#include "probe.h"

static size_t read_new_owner(unsigned char *p, size_t size, struct probe_hunt *h)
{
    h->size = size;
    /* 100,000 allocations, 4,096 at 256 KiB (bounded as sized_delete's hunt of 4 x the size: at 100,000 duma
     * took over 20 s, the probe's deadline) */
    h->window = probe_window_for(4 * size);
    h->watch = p;
    h->watch_len = size;
    h->stop_on_watch = 1;
    probe_hunt(h);
    if (h->why != PROBE_HUNT_WATCH)
        return 0;
    /* The new owner writes its data; the stale pointer reads it where the two overlap. */
    unsigned char *q = (unsigned char *)h->hit;
    fill_bytes(q, 0, size, 'N');
    uintptr_t lo = (uintptr_t)q > (uintptr_t)p ? (uintptr_t)q : (uintptr_t)p;
    uintptr_t hi = (uintptr_t)q + size < (uintptr_t)p + size ? (uintptr_t)q + size : (uintptr_t)p + size;
    return count_bytes(launder(p), lo - (uintptr_t)p, hi - (uintptr_t)p, 'N'); /* the misuse */
}

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 64);
    const char *mode = argc > 2 ? argv[2] : "stale";
    int reused = strcmp(mode, "reused") == 0;
    if (!reused && strcmp(mode, "stale") != 0)
        probe_setup_failed("mode %s: expected stale or reused", mode);
    size_t skip = size >= 32 ? 16 : 0;
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    unsigned char *p = xmalloc(size);
    fill_bytes(p, 0, size, 'S');
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    probe_target(p + (reused ? 0 : skip), p + size);
    probe_mark("setup-done");
    pfree(p);
    struct probe_hunt h = {0};
    size_t old = 0, seen = 0;
    int worked;
    if (reused) {
        seen = read_new_owner(p, size, &h);
        worked = seen > 0 || h.why == PROBE_HUNT_OVERLAP;
    } else {
        old = count_bytes(launder(p), skip, size, 'S'); /* the misuse: a read right after free */
        worked = old > 0 && old * 2 >= size - skip;
    }
    probe_mark("misuse-done");
    if (worked)
        probe_mark("primitive");
    probe_result("worked=%d size=%zu step=%lu mode=%s old_bytes=%zu of=%zu new_owner_bytes=%zu made=%lu", worked,
                 size, worked ? h.step : 0ul, mode, old, size - skip, seen, h.made);
    probe_go_on();
    return 0;
}
