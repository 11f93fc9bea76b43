/* pow2-ladder: the allocation pattern of the test program posted in seed 003's thread (OpenBSD, Dec 2009),
 * written anew. Eight size classes of 1, 2, 4, ..., 128 bytes with 16,384 slots each. A round climbs the
 * ladder: at step c every slot of class c is filled, then every eighth slot, starting at slot c, is emptied
 * in class c and in every smaller class; whatever is still held is released when the round ends. Each
 * step leaves a sparse, strided pattern of holes in the classes below it, so chunk reuse and the
 * allocator's randomized choices run on partly filled pages all the time. */
#include "wl_common.h"

#define CLASSES 8
#define SLOTS 16384

static unsigned char *slot[CLASSES][SLOTS];

int main(int argc, char **argv)
{
    long rounds = wl_scaled(wl_scale(argc, argv), 128);
    uint64_t sum = 0;

    for (long r = 0; r < rounds; r++) {
        for (int c = 0; c < CLASSES; c++) {
            size_t size = (size_t)1 << c;
            for (int s = 0; s < SLOTS; s++) {
                slot[c][s] = wl_malloc(size);
                slot[c][s][0] = (unsigned char)(s + c);
                slot[c][s][size - 1] = (unsigned char)(r + c);
                wl_turn();
            }
            for (int below = c; below >= 0; below--) {
                size_t below_size = (size_t)1 << below;
                for (int s = c; s < SLOTS; s += CLASSES) {
                    if (slot[below][s] == NULL)
                        continue;
                    sum = sum * 31 + slot[below][s][0] + slot[below][s][below_size - 1];
                    free(slot[below][s]);
                    slot[below][s] = NULL;
                }
                wl_turn();
            }
        }
        for (int c = 0; c < CLASSES; c++)
            for (int s = 0; s < SLOTS; s++) {
                free(slot[c][s]);
                slot[c][s] = NULL;
            }
    }
    wl_print_checksum(wl_fnv_u64(wl_fnv_u64(WL_FNV_INIT, (uint64_t)rounds), sum));
    return 0;
}
