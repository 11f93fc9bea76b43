// sized-delete: release a <size>-byte block, followed by live neighbours, with sized delete claiming
// 4 * <size> + 4096 bytes. Primitive: a later allocation of the claimed size overlaps a live block
// (typically: it starts at the small block and runs into its neighbours, an overflow waiting to
// happen); searched over 100,000 allocations, or 4 GiB of claimed-size requests if fewer (probe.h). A
// claimed-size block at the same address that overlaps nothing live (the allocator ignored the size and
// merged the block with free space) is no primitive.
extern "C" {
#include "probe.h"
}
#include <new>

static void *pnew(size_t n)
{
    probe_call_begin(PC_NEW);
    void *p = ::operator new(n);
    probe_call_end();
    return p;
}

static void pdelete(void *p)
{
    probe_call_begin(PC_DELETE);
    ::operator delete(p);
    probe_call_end();
}

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 32);
    size_t claimed = 4 * size + 4096;
    for (int i = 0; i < PROBE_NEIGHBOURS / 2; i++)
        probe_live_add(pnew(size), size);
    void *p = pnew(size);
    for (int i = 0; i < PROBE_NEIGHBOURS / 2; i++)
        probe_live_add(pnew(size), size);
    probe_mark("setup-done");
    probe_call_begin(PC_DELETE);
    ::operator delete(launder(p), static_cast<std::size_t>(launder_size(claimed)));
    probe_call_end();
    probe_mark("misuse-done");
    struct probe_hunt h = {};
    h.size = claimed;
    h.window = probe_window_for(claimed);
    h.alloc = pnew;
    h.release = pdelete;
    h.watch = p;
    h.watch_len = size;
    probe_hunt(&h);
    int worked = h.why == PROBE_HUNT_OVERLAP;
    if (worked)
        probe_mark("primitive");
    probe_result("worked=%d size=%zu step=%lu claimed=%zu same_start=%d first_at_block=%lu made=%lu", worked, size,
                 worked ? h.step : 0ul, claimed, worked && h.hit == p, h.watched_at, h.made);
    probe_go_on();
    return 0;
}
