/* small-loop: re-creates the micro-benchmark of seed 004 (the glibc tcache hardening thread):
 * ten 0x20-byte blocks are allocated, then all ten freed, over and over. It measures the
 * allocator's fast path (thread cache / size-class freelist) and nothing else. */
#include "wl_common.h"

#define SLOTS 10
#define BLOCK 0x20

int main(int argc, char **argv)
{
    long rounds = wl_scaled(wl_scale(argc, argv), 4000000);
    uint64_t *p[SLOTS];
    uint64_t sum = 0;

    for (long i = 0; i < rounds; i++) {
        for (int j = 0; j < SLOTS; j++) {
            p[j] = wl_malloc(BLOCK);
            p[j][0] = (uint64_t)i * SLOTS + (uint64_t)j;
        }
        for (int j = 0; j < SLOTS; j++) {
            sum += p[j][0] ^ (uint64_t)j;
            free(p[j]);
        }
        wl_turn();
    }
    wl_print_checksum(wl_fnv_u64(wl_fnv_u64(WL_FNV_INIT, (uint64_t)rounds), sum));
    return 0;
}
