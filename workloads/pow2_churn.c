/* pow2-churn: re-creates the allocation profile behind seed 003 (OpenBSD malloc's randomized
 * chunk selection and delayed free): big batches of small power-of-two requests, 1 to 128
 * bytes, freed in a strided order that differs from the allocation order, so a size class's
 * free list is refilled out of order and randomized/delayed reuse has real work to do. */
#include "wl_common.h"

#define BATCH 8192  /* a power of two, so any odd stride visits every slot once */

int main(int argc, char **argv)
{
    long rounds = wl_scaled(wl_scale(argc, argv), 2000);
    unsigned char **p = wl_malloc(BATCH * sizeof *p);
    uint64_t seed = 3, sum = 0;

    for (long r = 0; r < rounds; r++) {
        size_t stride = (size_t)(2 * wl_below(&seed, BATCH / 2) + 1);
        for (size_t i = 0; i < BATCH; i++) {
            size_t size = (size_t)1 << ((i + (size_t)r) % 8);
            p[i] = wl_malloc(size);
            p[i][0] = (unsigned char)(i + (size_t)r);
            p[i][size - 1] = (unsigned char)size;
            wl_turn();
        }
        size_t k = 0;
        for (size_t n = 0; n < BATCH; n++) {
            size_t size = (size_t)1 << ((k + (size_t)r) % 8);
            sum = sum * 31 + p[k][0] + p[k][size - 1];
            free(p[k]);
            k = (k + stride) & (BATCH - 1);
            wl_turn();
        }
    }
    free(p);
    wl_print_checksum(wl_fnv_u64(wl_fnv_u64(WL_FNV_INIT, (uint64_t)rounds), sum));
    return 0;
}
