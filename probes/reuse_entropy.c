/* reuse-entropy: which freed block the next malloc of the size returns. No misuse; a measurement.
 *
 * The heap is busy: M candidate blocks of the size (default 64 bytes, M = 65536) are allocated
 * interleaved with M live neighbours of the same size, which stay live to the end. One repetition:
 * the M candidates are freed in ascending address order, then one block of the size is allocated, and
 * its index among the freed blocks is the pick (0: the lowest address, freed first; M-1: the highest,
 * freed last), or "-" when it is none of them (a block the probe never freed). A LIFO free list picks
 * M-1 every time, a FIFO one 0, a lowest-address-first bitmap 0; a randomizing allocator spreads them.
 *
 * Repetitions: after a pick the returned block is kept and M-1 more blocks of the size are allocated;
 * these M blocks are the next repetition's candidates, sorted by address and freed again from scratch in
 * that order. Every repetition so starts the same way (the same live neighbours, M blocks freshly freed,
 * in the same canonical order): the probe carries nothing of one pick into the next, so a deterministic
 * allocator picks the same index every time and a randomizing one draws again. Where the allocator does
 * not reuse what was freed, each repetition's candidates are new blocks (memory grows; a NULL ends the
 * repetitions, and the picks made so far are reported).
 *
 * argv: reuse_entropy [size [reps [candidates]]] (defaults 64, 512, 65536). Time budgets keep a slow
 * allocator's run short and still give it several picks: a repetition costs about what the setup did
 * (2M allocator calls), so the setup stops adding candidates after an eighth of
 * REPS_BUDGET (M is then smaller, and reported), and no repetition starts when the last one would not
 * fit in REPS_BUDGET. With a 1 s setup, efence, duma, dmalloc and tcmalloc-debug made one pick a
 * process in about 4 s, which says nothing about reuse (run 20261130T172723Z-probe-security).
 * HEAPCOST_PROBE_REPS_BUDGET_MS=<milliseconds>, 1 to 600000, overrides REPS_BUDGET (the setup's budget
 * follows it): a test gives a budget that every repetition fits, so how many picks it sees does not
 * depend on the host's speed.
 *
 * stdout: result worked=- size=<bytes> candidates=<M> reps=<picks made> reused=<picks among the freed>
 *         picks=<index|->,...
 * The checking code allocates nothing: static arrays, our own radix sort and binary search.
 */
#include "probe.h"
#include <time.h>

#define MAX_CANDIDATES 65536
#define MIN_CANDIDATES 256
#define MAX_REPS 2048
#define DEFAULT_REPS 512
#define REPS_BUDGET 0.5  /* seconds: an allocator's 20 processes take about 5 s of a run with two workers */

static void *live[MAX_CANDIDATES];
static uintptr_t cand[MAX_CANDIDATES], scratch[MAX_CANDIDATES];
static long picks[MAX_REPS];
static char list[MAX_REPS * 8 + 16];

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* REPS_BUDGET, or HEAPCOST_PROBE_REPS_BUDGET_MS when set to a valid value (getenv and strtol allocate
 * nothing). */
static double reps_budget(void)
{
    const char *env = getenv("HEAPCOST_PROBE_REPS_BUDGET_MS");
    if (env && *env) {
        char *end;
        long ms = strtol(env, &end, 10);
        if (*end == 0 && ms >= 1 && ms <= 600000)
            return (double)ms / 1000.0;
    }
    return REPS_BUDGET;
}

static long arg_long(int argc, char **argv, int i, long dflt, long lo, long hi, const char *what)
{
    if (argc <= i)
        return dflt;
    char *end = NULL;
    long v = strtol(argv[i], &end, 0);
    if (!end || *end || v < lo || v > hi)
        probe_setup_failed("%s %s: expected a number in [%ld, %ld]", what, argv[i], lo, hi);
    return v;
}

/* LSD radix sort of n addresses, a byte at a time, skipping the bytes in which all of them agree. */
static void sort_addresses(uintptr_t *a, uintptr_t *t, size_t n)
{
    static size_t count[256];
    uintptr_t differ = 0;
    for (size_t i = 1; i < n; i++)
        differ |= a[i] ^ a[0];
    uintptr_t *src = a, *dst = t;
    for (unsigned shift = 0; shift < 8 * sizeof(uintptr_t); shift += 8) {
        if (!((differ >> shift) & 0xff))
            continue;
        for (int d = 0; d < 256; d++)
            count[d] = 0;
        for (size_t i = 0; i < n; i++)
            count[(src[i] >> shift) & 0xff]++;
        size_t sum = 0;
        for (int d = 0; d < 256; d++) {
            size_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            dst[count[(src[i] >> shift) & 0xff]++] = src[i];
        uintptr_t *x = src;
        src = dst;
        dst = x;
    }
    if (src != a)
        for (size_t i = 0; i < n; i++)
            a[i] = src[i];
}

/* The index of the sorted candidate whose block [cand, cand + size) holds q, or -1. */
static long index_of(uintptr_t q, size_t size, size_t m)
{
    size_t lo = 0, hi = m; /* the first candidate above q */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cand[mid] <= q)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && q < cand[lo - 1] + size ? (long)(lo - 1) : -1;
}

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 64);
    long reps = arg_long(argc, argv, 2, DEFAULT_REPS, 1, MAX_REPS, "reps");
    size_t want = (size_t)arg_long(argc, argv, 3, MAX_CANDIDATES, MIN_CANDIDATES, MAX_CANDIDATES, "candidates");

    double budget = reps_budget(), setup_budget = budget / 8;
    double started = now();
    size_t m = 0;
    while (m < want) {
        void *l = pmalloc(size), *c = pmalloc(size);
        if (!l || !c) {
            pfree(l);
            pfree(c);
            break;
        }
        live[m] = l;
        cand[m++] = (uintptr_t)c;
        if ((m & 63) == 0 && now() - started > setup_budget)
            break;
    }
    if (m < MIN_CANDIDATES)
        probe_setup_failed("only %zu candidate blocks of %zu bytes (need %d)", m, size, MIN_CANDIDATES);
    double last = now() - started; /* a repetition costs about what the setup did: 2M calls */
    probe_mark("setup-done");

    long done = 0, reused = 0;
    double t0 = now();
    while (done < reps && (done == 0 || now() - t0 + last <= budget)) {
        double t = now();
        sort_addresses(cand, scratch, m);
        for (size_t i = 0; i < m; i++)
            pfree((void *)cand[i]);
        void *q = pmalloc(size);
        if (!q)
            break;
        long k = index_of((uintptr_t)q, size, m);
        picks[done++] = k;
        reused += k >= 0;
        cand[0] = (uintptr_t)q;
        size_t got = 1;
        for (; got < m; got++) {
            void *p = pmalloc(size);
            if (!p)
                break;
            cand[got] = (uintptr_t)p;
        }
        if (got < m)
            break; /* out of memory: the picks so far stand, all made among M candidates */
        last = now() - t;
    }
    if (done == 0)
        probe_setup_failed("malloc(%zu) returned NULL after %zu blocks were freed", size, m);
    probe_mark("misuse-done");

    size_t off = 0;
    for (long i = 0; i < done; i++) {
        if (picks[i] < 0)
            off += (size_t)snprintf(list + off, sizeof list - off, "%s-", i ? "," : "");
        else
            off += (size_t)snprintf(list + off, sizeof list - off, "%s%ld", i ? "," : "", picks[i]);
    }
    probe_result("worked=- size=%zu candidates=%zu reps=%ld reused=%ld picks=%s", size, m, done, reused, list);
    probe_go_on();
    return 0;
}
