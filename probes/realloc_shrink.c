/* realloc-shrink: shrink a block to a quarter of its size with realloc, let the program allocate a
 * few blocks that fit in the freed remainder (half of it, and all of it less a 16-byte header; each
 * filled with its own data), then write to the block as if it still had its old size. Primitive: the
 * write changes another live block (step = the allocation number of the first victim changed). */
#include "probe.h"

#define VICTIMS 16

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 64);
    size_t small = size / 4 ? size / 4 : 1;
    size_t rest = (size - small) / 2 ? (size - small) / 2 : 1;
    size_t whole = size - small > 16 ? size - small - 16 : rest;
    static size_t vlen[VICTIMS];
    static unsigned char *v[VICTIMS];
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    unsigned char *p = (unsigned char *)xmalloc(size);
    fill_bytes(p, 0, size, 'O');
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    unsigned char *q = (unsigned char *)prealloc(p, small);
    if (!q)
        probe_setup_failed("realloc to %zu bytes returned NULL", small);
    for (int i = 0; i < VICTIMS; i++) {
        vlen[i] = i % 2 ? whole : rest;
        v[i] = (unsigned char *)xmalloc(vlen[i]);
        fill_bytes(v[i], 0, vlen[i], (unsigned char)('a' + i));
    }
    probe_target(q + small, q + size);
    probe_mark("setup-done");
    fill_bytes(launder(q), small, size, 'A');
    probe_mark("misuse-done");
    int changed = 0, first = 0;
    for (int i = 0; i < VICTIMS; i++)
        if (count_bytes(v[i], 0, vlen[i], (unsigned char)('a' + i)) != vlen[i] && !changed++)
            first = i + 1;
    if (changed)
        probe_mark("primitive");
    probe_result("worked=%d size=%zu step=%d shrunk_to=%zu moved=%d victims_changed=%d victim_sizes=%zu,%zu",
                 changed > 0, size, first, small, q != p, changed, rest, whole);
    probe_go_on();
    return 0;
}
