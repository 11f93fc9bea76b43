/* invalid-free-far: free a pointer 16 bytes into a zeroed anonymous mapping far from any heap (near
 * 0x100000000000, 16 TiB), which malloc never returned. Primitive: a later allocation of the size
 * returns memory in that mapping; searched over 100,000 allocations. */
#include "probe.h"
#include <sys/mman.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 48);
    probe_neighbours(size, PROBE_NEIGHBOURS);
    size_t len = (size + 64 + 4095) & ~(size_t)4095;
    unsigned char *far = NULL;
    for (uintptr_t hint = 0x100000000000ul; hint <= 0x700000000000ul && !far; hint += 0x100000000000ul) {
        void *m = mmap((void *)hint, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                       -1, 0);
        if (m == MAP_FAILED)
            continue;
        if ((uintptr_t)m != hint) { /* a kernel without MAP_FIXED_NOREPLACE placed it elsewhere */
            munmap(m, len);
            continue;
        }
        far = (unsigned char *)m;
    }
    if (!far)
        probe_setup_failed("no free address range near 0x100000000000 for %zu bytes", len);
    probe_mark("setup-done");
    pfree(launder(far + 16));
    probe_mark("misuse-done");
    struct probe_hunt h = {0};
    h.size = size;
    h.window = PROBE_WINDOW;
    h.stop_outside_heap = 1;
    h.extra = far;
    h.extra_len = len;
    probe_hunt(&h);
    int worked = h.why == PROBE_HUNT_OUTSIDE || h.why == PROBE_HUNT_OVERLAP;
    if (worked)
        probe_mark("primitive");
    probe_result("worked=%d size=%zu step=%lu in_mapping=%d mapping=%#lx made=%lu", worked, size,
                 worked ? h.step : 0ul, worked && ranges_overlap(h.hit, size, far, len), (unsigned long)far, h.made);
    probe_go_on();
    return 0;
}
