/* fake-chunk-free (the house-of-spirit technique): free a pointer into static memory behind a
 * forged boundary-tag header (size 0x50 in use, a sane next size), the layout of inline-header
 * allocators. Primitive: a later allocation of that size returns the forged chunk. */
#include "probe.h"

int main(void)
{
    uint64_t *fake = (uint64_t *)(probe_static_area + 4096);
    fake[1] = 0x50;           /* this chunk's size, previous in use */
    fake[0x50 / 8 + 1] = 0x41; /* the next chunk's size, so it looks plausible */
    free(launder(&fake[2]));
    probe_mark("misuse-done");
    int inside = 0;
    for (int i = 0; i < 16; i++)
        inside += in_static_area(malloc(0x48));
    probe_result("worked=%d inside=%d", inside > 0, inside);
    probe_go_on();
    return 0;
}
