/* pareto: the classic synthetic allocator benchmark with heavy-tailed sizes and random
 * lifetimes. Sizes follow a Pareto law with shape 1 (P(size > x) = 16 / x, capped at 256 KiB:
 * mostly small objects, now and then a huge one, drawn with integer arithmetic only, so glibc
 * and musl builds draw the same sizes); each step frees the object in a random slot of a
 * sliding window of live objects and puts a new one there, so lifetimes are geometric. */
#include "wl_common.h"

#define WINDOW 8192
#define MIN_SIZE 16
#define MAX_SIZE (256 * 1024)

static size_t pareto_size(uint64_t *rng)
{
    uint64_t u = (wl_rand(rng) >> 32) + 1;               /* uniform in [1, 2^32] */
    uint64_t size = ((uint64_t)MIN_SIZE << 32) / u;      /* = MIN_SIZE / uniform(0, 1] */
    return size > MAX_SIZE ? MAX_SIZE : (size_t)size;
}

struct obj {
    size_t size;
    uint64_t tag;
};

int main(int argc, char **argv)
{
    long steps = wl_scaled(wl_scale(argc, argv), 10000000);
    struct obj **slot = calloc(WINDOW, sizeof *slot);
    uint64_t rng = 5, h = wl_fnv_u64(WL_FNV_INIT, (uint64_t)steps), sum = 0;

    if (slot == NULL)
        return 3;
    for (long s = 0; s < steps; s++) {
        size_t i = (size_t)wl_below(&rng, WINDOW);
        if (slot[i] != NULL) {
            struct obj *o = slot[i];
            sum = sum * 31 + o->tag + ((unsigned char *)o)[o->size - 1];
            free(o);
        }
        size_t size = pareto_size(&rng);
        struct obj *o = wl_malloc(size < sizeof *o ? sizeof *o : size);
        o->size = size < sizeof *o ? sizeof *o : size;
        o->tag = (uint64_t)s;
        ((unsigned char *)o)[o->size - 1] = (unsigned char)s;
        slot[i] = o;
        wl_turn();
    }
    for (size_t i = 0; i < WINDOW; i++)
        if (slot[i] != NULL) {
            sum = sum * 31 + slot[i]->tag;
            free(slot[i]);
        }
    free(slot);
    wl_print_checksum(wl_fnv_u64(h, sum));
    return 0;
}
