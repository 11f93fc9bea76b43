/* Shared helpers of heapcost's C workloads: scale parsing, a seeded PRNG, FNV-1a checksums.
 * Everything here is deterministic and independent of addresses, so a workload's checksum
 * depends only on its scale, never on the allocator or the libc it was linked with. */
#ifndef WL_COMMON_H
#define WL_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline double wl_scale(int argc, char **argv)
{
    char *end;
    double s;
    if (argc < 2) {
        fprintf(stderr, "usage: %s SCALE\n", argv[0]);
        exit(2);
    }
    s = strtod(argv[1], &end);
    if (*end != '\0' || !(s > 0.0) || s > 1e6) {
        fprintf(stderr, "%s: bad scale %s\n", argv[0], argv[1]);
        exit(2);
    }
    return s;
}

/* full * scale rounded, at least 1: the amount of work at this scale. */
static inline long wl_scaled(double scale, long full)
{
    double v = (double)full * scale + 0.5;
    return v < 1.0 ? 1 : (long)v;
}

/* splitmix64: tiny, fast, and identical everywhere. */
static inline uint64_t wl_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* uniform in [0, n) (n > 0); the modulo bias is irrelevant here. */
static inline uint64_t wl_below(uint64_t *state, uint64_t n)
{
    return wl_rand(state) % n;
}

#define WL_FNV_INIT 0xcbf29ce484222325ULL

static inline uint64_t wl_fnv_bytes(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static inline uint64_t wl_fnv_u64(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ULL;
    }
    return h;
}

static inline void *wl_malloc(size_t n)
{
    void *p = malloc(n);
    if (p == NULL) {
        fprintf(stderr, "out of memory (%zu bytes)\n", n);
        exit(3);
    }
    return p;
}

static inline void *wl_realloc(void *old, size_t n)
{
    void *p = realloc(old, n);
    if (p == NULL) {
        fprintf(stderr, "out of memory (realloc %zu bytes)\n", n);
        exit(3);
    }
    return p;
}

static inline void wl_print_checksum(uint64_t h)
{
    printf("checksum=%016llx\n", (unsigned long long)h);
    fflush(stdout);
}

#endif
