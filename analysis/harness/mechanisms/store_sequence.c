/* heapcost-store-sequence: how long each store sequence a poisoning free can execute takes on this CPU, alone.
 *
 * A poisoning free writes a constant byte (mozjemalloc's 0xe5) over n bytes of the freed block. The compilers
 * lower that memset differently: gcc inlines a bounded one (the first 256 bytes) as `rep stosq` with an 8-byte
 * store at each end (the disassembly of the gcc build), clang calls memset. This program times, for each size n:
 *
 *   none           the walk over the destinations alone (the loop, the next block's address): subtract it
 *   rep-stosb      `rep stosb` of n bytes (inline asm)
 *   rep-stosq-gcc  gcc's lowering as the gcc build of mozjemalloc has it: an 8-byte store at the start and one
 *                  at the end, then `rep stosq` from the first 8-aligned address past the start to the end
 *   memset-call    a call to libc's memset through the PLT, as the clang build's free makes it (this file is
 *                  built with -fno-builtin: the compiler cannot inline it)
 *   stores-16      a plain loop of aligned 16-byte SSE2 stores (built with -fno-tree-loop-distribute-patterns,
 *                  so the loop is not turned into a memset call)
 *
 * on two working sets: `hot`, one block stored over and over (in L1: the cheapest case), and `heap`, blocks of
 * n bytes packed in a region of --heap-kib KiB (2 MiB by default), visited in a fixed random order as frees of a
 * busy heap would reach them (lines in L2 or beyond). Blocks are 16-byte aligned, as an allocator's are.
 *
 * Design: cells are (working set, size, sequence). Block 0 is a warm-up that also calibrates each cell's
 * repetitions to about --target-us microseconds (unless --repetitions fixes them); then --blocks measured blocks.
 * In every block the groups (working set, size) come in a fresh random order and, inside a group, its sequences
 * in a fresh random order, back to back: the sequences compared at one size are measured within a few
 * milliseconds of each other, so the machine's speed drift falls on all of them alike.
 *
 * Output (stdout): a comment line, a header line, then one tab-separated row per measurement:
 *   block  warmup  working_set  sequence  bytes  repetitions  elapsed_ns
 * and a last line `# done <rows>`. A bad argument prints one line to stderr and exits 2. */
#define _GNU_SOURCE
#include <emmintrin.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POISON 0xe5
#define MAX_SIZES 64
#define MAX_SIZE (64u << 10)

enum { SEQ_NONE, SEQ_REP_STOSB, SEQ_REP_STOSQ_GCC, SEQ_MEMSET_CALL, SEQ_STORES_16, NSEQ };
static const char *const SEQ_NAMES[NSEQ] = {"none", "rep-stosb", "rep-stosq-gcc", "memset-call", "stores-16"};
enum { WS_HOT, WS_HEAP, NWS };
static const char *const WS_NAMES[NWS] = {"hot", "heap"};

struct walk {
    unsigned char *base;
    uint32_t *order; /* byte offsets of the blocks, in the order they are visited */
    size_t count, next;
};

static void die(const char *msg, const char *arg)
{
    fprintf(stderr, "heapcost-store-sequence: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    exit(2);
}

static uint64_t rng_state;
static uint64_t rng(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void shuffle(int *a, int n)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rng() % (uint64_t)(i + 1));
        int t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One loop per sequence, so that nothing but the sequence differs between them. The walk's position carries
 * over from one measurement of a cell to its next. */
#define WALK(body)                                                                                            \
    do {                                                                                                      \
        unsigned char *const base = w->base;                                                                  \
        const uint32_t *const order = w->order;                                                               \
        const size_t count = w->count;                                                                        \
        size_t j = w->next;                                                                                   \
        for (uint64_t r = 0; r < reps; r++) {                                                                 \
            unsigned char *p = base + order[j];                                                               \
            body;                                                                                             \
            if (++j == count)                                                                                 \
                j = 0;                                                                                        \
        }                                                                                                     \
        w->next = j;                                                                                          \
    } while (0)

static __attribute__((noinline)) void seq_none(struct walk *w, size_t n, uint64_t reps)
{
    (void)n;
    WALK(__asm__ volatile("" : : "r"(p) : "memory"));
}

static __attribute__((noinline)) void seq_rep_stosb(struct walk *w, size_t n, uint64_t reps)
{
    WALK({
        void *d = p;
        size_t c = n;
        __asm__ volatile("rep stosb" : "+D"(d), "+c"(c) : "a"(POISON) : "memory");
    });
}

static __attribute__((noinline)) void seq_rep_stosq_gcc(struct walk *w, size_t n, uint64_t reps)
{
    const uint64_t v = 0x0101010101010101ULL * POISON;
    WALK({
        *(volatile uint64_t *)p = v;
        *(volatile uint64_t *)(p + n - 8) = v;
        unsigned char *d = (unsigned char *)(((uintptr_t)p + 8) & ~(uintptr_t)7);
        size_t c = (size_t)(p + n - d) >> 3;
        __asm__ volatile("rep stosq" : "+D"(d), "+c"(c) : "a"(v) : "memory");
    });
}

static __attribute__((noinline)) void seq_memset_call(struct walk *w, size_t n, uint64_t reps)
{
    WALK(memset(p, POISON, n));
}

static __attribute__((noinline)) void seq_stores_16(struct walk *w, size_t n, uint64_t reps)
{
    const __m128i v = _mm_set1_epi8((char)POISON);
    WALK({
        for (size_t k = 0; k < n; k += 16)
            _mm_store_si128((__m128i *)(p + k), v);
        __asm__ volatile("" : : "r"(p) : "memory");
    });
}

static void (*const SEQ_FN[NSEQ])(struct walk *, size_t, uint64_t) = {
    seq_none, seq_rep_stosb, seq_rep_stosq_gcc, seq_memset_call, seq_stores_16};

static uint64_t timed(int seq, struct walk *w, size_t n, uint64_t reps)
{
    uint64_t t0 = now_ns();
    SEQ_FN[seq](w, n, reps);
    uint64_t t1 = now_ns();
    return t1 - t0;
}

static unsigned long parse_ulong(const char *s, const char *what)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-')
        die(what, s);
    return v;
}

static int parse_names(const char *arg, const char *const *names, int nnames, int *out, const char *what)
{
    char *copy = strdup(arg), *save = NULL;
    int k = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int found = -1;
        for (int i = 0; i < nnames; i++)
            if (!strcmp(tok, names[i]))
                found = i;
        if (found < 0)
            die(what, tok);
        for (int i = 0; i < k; i++)
            if (out[i] == found)
                die("named twice", tok);
        out[k++] = found;
    }
    free(copy);
    if (!k)
        die(what, arg);
    return k;
}

int main(int argc, char **argv)
{
    size_t sizes[MAX_SIZES];
    int nsizes = 0, seqs[NSEQ], nseqs = 0, wss[NWS], nwss = 0, cpu = -1;
    unsigned long blocks = 40, target_us = 5000, heap_kib = 2048, fixed_reps = 0;
    rng_state = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            die("an option without its value", a);
        if (!strcmp(a, "--sizes")) {
            char *copy = strdup(v), *save = NULL;
            for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                unsigned long n = parse_ulong(tok, "not a size in bytes");
                if (n < 16 || n > MAX_SIZE || n % 16)
                    die("a size must be a multiple of 16 from 16 to 65536 bytes", tok);
                for (int k = 0; k < nsizes; k++)
                    if (sizes[k] == n)
                        die("a size named twice", tok);
                if (nsizes == MAX_SIZES)
                    die("too many sizes", v);
                sizes[nsizes++] = n;
            }
            free(copy);
        } else if (!strcmp(a, "--sequences")) {
            nseqs = parse_names(v, SEQ_NAMES, NSEQ, seqs, "unknown sequence");
        } else if (!strcmp(a, "--working-sets")) {
            nwss = parse_names(v, WS_NAMES, NWS, wss, "unknown working set");
        } else if (!strcmp(a, "--blocks")) {
            blocks = parse_ulong(v, "--blocks is not a whole number");
        } else if (!strcmp(a, "--target-us")) {
            target_us = parse_ulong(v, "--target-us is not a whole number");
        } else if (!strcmp(a, "--repetitions")) {
            fixed_reps = parse_ulong(v, "--repetitions is not a whole number");
        } else if (!strcmp(a, "--heap-kib")) {
            heap_kib = parse_ulong(v, "--heap-kib is not a whole number");
        } else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            rng_state = strtoull(v, &end, 10);
            if (errno || end == v || *end || v[0] == '-')
                die("--seed is not a whole number", v);
        } else if (!strcmp(a, "--cpu")) {
            cpu = (int)parse_ulong(v, "--cpu is not a CPU number");
        } else {
            die("unknown option", a);
        }
        i++;
    }
    if (!nsizes)
        die("no --sizes", NULL);
    if (!nseqs)
        for (nseqs = 0; nseqs < NSEQ; nseqs++)
            seqs[nseqs] = nseqs;
    if (!nwss)
        for (nwss = 0; nwss < NWS; nwss++)
            wss[nwss] = nwss;
    if (blocks < 1 || target_us < 1)
        die("--blocks and --target-us must be at least 1", NULL);
    size_t heap_bytes = (size_t)heap_kib << 10;
    for (int k = 0; k < nsizes; k++)
        if (heap_bytes < 16 * sizes[k] || heap_kib > (1ul << 20))
            die("--heap-kib must hold at least 16 blocks of every size (and be at most 1 GiB)", NULL);
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set))
            die("cannot pin to the CPU asked for", strerror(errno));
    }

    unsigned char *heap = aligned_alloc(4096, heap_bytes);
    unsigned char *hot = aligned_alloc(4096, MAX_SIZE);
    if (!heap || !hot)
        die("out of memory", NULL);
    memset(heap, 0, heap_bytes);
    memset(hot, 0, MAX_SIZE);

    /* every (working set, size) group walks its own order; the heap's visits each block once per round */
    int ngroups = nwss * nsizes;
    struct walk *walks = calloc((size_t)ngroups, sizeof *walks);
    static uint32_t hot_order[1] = {0};
    for (int g = 0; g < ngroups; g++) {
        int ws = wss[g / nsizes];
        size_t n = sizes[g % nsizes];
        struct walk *w = &walks[g];
        if (ws == WS_HOT) {
            *w = (struct walk){hot, hot_order, 1, 0};
            continue;
        }
        size_t count = heap_bytes / n;
        uint32_t *order = malloc(count * sizeof *order);
        if (!order)
            die("out of memory", NULL);
        for (size_t b = 0; b < count; b++)
            order[b] = (uint32_t)(b * n);
        for (size_t b = count - 1; b > 0; b--) {
            size_t c = (size_t)(rng() % (uint64_t)(b + 1));
            uint32_t t = order[b];
            order[b] = order[c];
            order[c] = t;
        }
        *w = (struct walk){heap, order, count, 0};
    }

    uint64_t *reps = calloc((size_t)ngroups * NSEQ, sizeof *reps);
    int *group_order = malloc((size_t)ngroups * sizeof *group_order), seq_order[NSEQ];
    if (!reps || !group_order)
        die("out of memory", NULL);
    printf("# heapcost-store-sequence 1 heap_kib=%lu target_us=%lu blocks=%lu repetitions=%lu cpu=%d\n", heap_kib,
           target_us, blocks, fixed_reps, cpu);
    printf("block\twarmup\tworking_set\tsequence\tbytes\trepetitions\telapsed_ns\n");
    unsigned long rows = 0;
    const uint64_t target_ns = (uint64_t)target_us * 1000u;
    for (unsigned long block = 0; block <= blocks; block++) {
        for (int g = 0; g < ngroups; g++)
            group_order[g] = g;
        shuffle(group_order, ngroups);
        for (int gi = 0; gi < ngroups; gi++) {
            int g = group_order[gi];
            size_t n = sizes[g % nsizes];
            for (int s = 0; s < nseqs; s++)
                seq_order[s] = seqs[s];
            shuffle(seq_order, nseqs);
            for (int si = 0; si < nseqs; si++) {
                int seq = seq_order[si];
                uint64_t *r = &reps[g * NSEQ + seq];
                if (block == 0) { /* the warm-up block calibrates: double until a sixteenth of the target */
                    if (fixed_reps) {
                        *r = fixed_reps;
                    } else {
                        uint64_t k = 1, t;
                        while ((t = timed(seq, &walks[g], n, k)) < target_ns / 16 && k < (1ull << 32))
                            k *= 2;
                        *r = t ? k * target_ns / t : k * 16;
                        if (*r < 1)
                            *r = 1;
                    }
                }
                uint64_t elapsed = timed(seq, &walks[g], n, *r);
                printf("%lu\t%d\t%s\t%s\t%zu\t%llu\t%llu\n", block, block == 0, WS_NAMES[wss[g / nsizes]],
                       SEQ_NAMES[seq], n, (unsigned long long)*r, (unsigned long long)elapsed);
                rows++;
            }
        }
        fflush(stdout);
    }
    printf("# done %lu\n", rows);
    return 0;
}
