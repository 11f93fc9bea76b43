/* calls-<class>-<pattern>: what one malloc+free pair costs, for one size class and one way of reusing memory
 * (analysis/harness/workloads.py registers one workload per class and pattern, each built from this file with
 * -DCALL_CLASS=<bytes> -DCALL_PATTERN=<0 lifo, 1 fifo, 2 random, 3 pages> -DCALL_PAIRS=<pairs at scale 1>
 * -DCALL_SLOTS=<live blocks>).
 *
 * Sizes are drawn (a fixed seed) from the class: CALL_CLASS/2+1 .. CALL_CLASS bytes, the profile's size class
 * (analysis/contract/profile_schema.py). A working set of SLOTS blocks is kept live; each step frees one and
 * allocates one, so every step is one malloc and one free:
 * - lifo: the block freed is the one allocated last (a stack: SLOTS blocks allocated, then freed in reverse);
 *   memory is taken again at once, the allocator's hottest path;
 * - fifo: the oldest block is freed (a ring of SLOTS): a freed block is asked for again SLOTS steps later;
 * - random: a random live block is freed (a slot drawn with a fixed seed): freed memory comes back in no
 *   order;
 * - pages: one block of CALL_CLASS bytes at a time, every page of it written, then freed: the cost of
 *   fresh pages (an allocator that maps and unmaps such blocks pays the system calls and the page faults).
 * Each block's first and last whole words are written and read back (a block is at least 16 bytes), so a
 * block is touched as a program touches it (pages: every page). CALL_PAIRS steps at scale 1; the harness
 * divides a process's time by the steps of its scale (wl_scaled(scale, CALL_PAIRS): CallWorkload.pairs_at). */
#include "wl_common.h"

#ifndef CALL_CLASS
#define CALL_CLASS 64
#endif
#ifndef CALL_PATTERN
#define CALL_PATTERN 0
#endif
#ifndef CALL_PAIRS
#define CALL_PAIRS 1000000L
#endif
#ifndef CALL_SLOTS
#define CALL_SLOTS 256
#endif
#define SLOTS CALL_SLOTS
#define PAGE 4096

static size_t draw_size(uint64_t *rng)
{
    size_t low = CALL_CLASS / 2 + 1, span = CALL_CLASS - CALL_CLASS / 2;
    if (CALL_CLASS <= 1)
        return CALL_CLASS;
    return low + (size_t)wl_below(rng, span);
}

static uint64_t *take(uint64_t *rng, uint64_t tag, size_t *size)
{
    size_t n = draw_size(rng);
    uint64_t *p;
    n = n < 16 ? 16 : n; /* room for the two words */
    p = wl_malloc(n);
    p[0] = tag;
    p[n / 8 - 1] = tag ^ 0x5555555555555555ULL;
    *size = n;
    return p;
}

static uint64_t give_back(uint64_t *p, size_t n)
{
    uint64_t v = p[0] + p[n / 8 - 1];
    free(p);
    return v;
}

int main(int argc, char **argv)
{
    long pairs = wl_scaled(wl_scale(argc, argv), CALL_PAIRS);
    uint64_t rng = 0x5eedca11ULL + CALL_CLASS * 4 + CALL_PATTERN, sum = 0;
    uint64_t *live[SLOTS];
    size_t size[SLOTS];
    long done = 0;

#if CALL_PATTERN == 3
    for (; done < pairs; done++) {
        unsigned char *p = wl_malloc(CALL_CLASS);
        for (size_t off = 0; off < CALL_CLASS; off += PAGE)
            p[off] = (unsigned char)(done + off / PAGE);
        for (size_t off = 0; off < CALL_CLASS; off += PAGE)
            sum += p[off];
        free(p);
        wl_turn();
    }
#else
    for (int i = 0; i < SLOTS; i++)
        live[i] = take(&rng, (uint64_t)i, &size[i]);
#if CALL_PATTERN == 0
    while (done < pairs) {
        for (int i = SLOTS - 1; i >= 0 && done < pairs; i--, done++) {
            sum += give_back(live[i], size[i]);
            live[i] = take(&rng, (uint64_t)done, &size[i]);
        }
        wl_turn();
    }
#elif CALL_PATTERN == 1
    for (int i = 0; done < pairs; done++) {
        sum += give_back(live[i], size[i]);
        live[i] = take(&rng, (uint64_t)done, &size[i]);
        if (++i == SLOTS) {
            i = 0;
            wl_turn();
        }
    }
#else
    for (; done < pairs; done++) {
        int i = (int)wl_below(&rng, SLOTS);
        sum += give_back(live[i], size[i]);
        live[i] = take(&rng, (uint64_t)done, &size[i]);
        if ((done & 255) == 255)
            wl_turn();
    }
#endif
    for (int i = 0; i < SLOTS; i++)
        sum += give_back(live[i], size[i]);
#endif
    wl_print_checksum(wl_fnv_u64(wl_fnv_u64(WL_FNV_INIT, (uint64_t)pairs), sum));
    return 0;
}
