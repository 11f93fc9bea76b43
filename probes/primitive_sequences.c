/* primitive-sequences: ArcHeap-style search for exploitation primitives. Each sequence is a seeded random
 * run of heap actions (allocations of mixed sizes, frees) with exactly one injected bug of a class, followed
 * by what an attacker who knows allocators does next: exhaust a quarantine (free `flush` other blocks of the
 * victim's size; a random variant per sequence: some before the bug, so a LIFO cache holds others behind
 * the victim, the rest after it or never) and spray (allocate up to `spray` blocks of that size, kept live). After every action
 * the driver checks for the primitives:
 *   overlap          a new block overlaps a live block (two live blocks share memory);
 *   chosen-address   a block is returned inside the attacker's target area (static memory the bug named);
 *   neighbour-write  the bug's write landed inside another live block;
 *   metadata-write   the bug's write landed outside every live block (allocator metadata or free memory)
 *                    and the sequence then ran to its end without being stopped;
 *   allocator-write  the allocator itself wrote into the target area (an arbitrary write).
 * Bug classes: overflow (n bytes past the usable end, n in 1, 8, 16, 32, 64), write-after-free (the
 * freed block's first words), double-free (free again after 0-3 frees of other blocks), invalid-free (a
 * forged chunk in static memory without a leak; an interior pointer of a live block with a heap leak).
 * Attacker capability: none (links written as raw addresses) or heap-leak (links written the way glibc
 * 2.32+ protects them, (pos >> 12) ^ target, which only an attacker who knows pos can do).
 *
 * Each sequence runs in its own forked child, so a crash is an outcome. The parent prints one line per
 * sequence on stdout:  seq=<i> end=exit:<code>|signal:<sig>:<si_code>:<alloc|misuse|driver>|hang
 * prim=<mask> attempts=<spray allocations before the first primitive, 0: none>
 * and a last line "result sequences=<n> class=<c> capability=<k> seed=<s>". mask bits: 1 overlap,
 * 2 chosen-address, 4 neighbour-write, 8 metadata-write, 16 allocator-write.
 *
 * argv: primitive_sequences <class> <capability> <first> <count> [seed [flush [spray]]]
 * Defaults: seed 1, flush 256, spray 128. The sequence with index i is the same actions for every
 * allocator (the random stream depends on seed and i only), whatever batch it runs in. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

enum { OVERFLOW, WRITE_AFTER_FREE, DOUBLE_FREE, INVALID_FREE, CONTROL };
/* control: the same sequences without a bug; any primitive there is a false positive of the checks */
static const char *const CLASSES[] = {"overflow", "write-after-free", "double-free", "invalid-free", "control"};
enum { P_OVERLAP = 1, P_CHOSEN = 2, P_NEIGHBOUR = 4, P_METADATA = 8, P_ALLOCATOR_WRITE = 16 };
enum { WHERE_DRIVER, WHERE_ALLOC, WHERE_MISUSE };
static const char *const WHERE[] = {"driver", "alloc", "misuse"};

#define SLOTS 32
#define SPRAY_MAX 1024
#define SEQ_ALARM_S 5

/* What the child tells the parent, in memory shared across the fork: it survives the child's crash. */
struct report {
    volatile int prim, attempts, sig, code, where;
};
static struct report *rep;
static volatile int where_now = WHERE_DRIVER;

/* The attacker's target: static memory no allocator handed out. A forged chunk header sits before it. */
static unsigned char arena[16384] __attribute__((aligned(4096)));
#define TARGET (arena + 8192)
static unsigned char arena_before[sizeof arena];

static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void *amalloc(size_t n)
{
    where_now = WHERE_ALLOC;
    void *p = malloc(n);
    where_now = WHERE_DRIVER;
    return p;
}
static void afree(void *p)
{
    where_now = WHERE_ALLOC;
    free(p);
    where_now = WHERE_DRIVER;
}

static int usable_own = 1; /* malloc_usable_size belongs to the allocator (see probes/README.md) */
/* The usable size, so that an overflow starts past the slot's slack: size classes are up to a quarter
 * apart in jemalloc, scudo and hardened_malloc, so a value up to half the request above it is believed. */
static size_t usable(void *p, size_t req)
{
    if (!usable_own)
        return req;
    size_t u = malloc_usable_size(p);
    return u >= req && u <= req + req / 2 + 64 ? u : req;
}

/* Did the bug's write change a byte? Rewriting a byte with its own value (a NUL over a canary's leading
 * zero byte) corrupts nothing, so it is no stray write. Set by write_word. */
static int changed;

struct block { unsigned char *p; size_t req, use; };
static struct block live[SLOTS];
static unsigned char *sprayed[SPRAY_MAX];
static size_t nsprayed, sprayed_size; /* every sprayed block has the victim's request size */

static int overlaps(const void *a, size_t na, const void *b, size_t nb)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + nb && y < x + na;
}

/* Is [p, p+n) inside a live block other than `except`? */
static int in_live(const void *p, size_t n, const void *except)
{
    for (int i = 0; i < SLOTS; i++)
        if (live[i].p && live[i].p != except && overlaps(p, n, live[i].p, live[i].use))
            return 1;
    for (size_t i = 0; i < nsprayed; i++)
        if (sprayed[i] && sprayed[i] != except && overlaps(p, n, sprayed[i], sprayed_size))
            return 1;
    return 0;
}

static size_t random_size(void)
{
    uint64_t r = rnd() % 100;
    if (r < 70)
        return 16 + rnd() % 241;
    if (r < 95)
        return 257 + rnd() % 3840;
    return 4097 + rnd() % 65536;
}

static void fill(unsigned char *p, size_t n, unsigned char c)
{
    volatile unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        b[i] = c;
}

/* A fresh block: checked against every live one (the primitives), then filled with its tag. */
static void check_new(const unsigned char *q, size_t n)
{
    if (!q)
        return;
    if (in_live(q, n, NULL))
        rep->prim |= P_OVERLAP;
    if (overlaps(q, n, arena, sizeof arena))
        rep->prim |= P_CHOSEN;
}

static void alloc_slot(int i)
{
    size_t n = random_size();
    unsigned char *p = amalloc(n);
    check_new(p, n);
    if (!p || overlaps(p, n, arena, sizeof arena))
        return;
    live[i] = (struct block){p, n, usable(p, n)};
    fill(p, n, (unsigned char)(0x10 + i));
}

static void random_action(void)
{
    int i = (int)(rnd() % SLOTS);
    if (live[i].p && rnd() % 3 == 0) {
        afree(live[i].p);
        live[i].p = NULL;
    } else if (!live[i].p) {
        alloc_slot(i);
    }
}

/* The link an attacker writes at `pos` to name the target: raw, or encoded as glibc's PROTECT_PTR. */
static uintptr_t link_at(const void *pos, int heap_leak)
{
    uintptr_t t = (uintptr_t)TARGET;
    return heap_leak ? ((uintptr_t)pos >> 12) ^ t : t;
}

static void write_word(unsigned char *at, uintptr_t w, size_t n)
{
    volatile unsigned char *b = at;
    for (size_t i = 0; i < n && i < sizeof w; i++) {
        unsigned char v = (unsigned char)(w >> (8 * i));
        changed |= b[i] != v;
        b[i] = v;
    }
}

/* glibc's chunk size for a request (the forged headers' size word: in range, PREV_INUSE set). */
static uintptr_t chunk_size(size_t req)
{
    size_t c = (req + 8 + 15) & ~(size_t)15;
    return c < 32 ? 32 : c;
}

static void forge_target(size_t req)
{
    uintptr_t c = chunk_size(req);
    write_word(TARGET - 8, c | 1, 8);
    write_word(TARGET - 8 + c, 0x21 | 1, 8); /* next chunk's size, so a freed forged chunk passes */
    memcpy(arena_before, arena, sizeof arena);
}

static void run_sequence(int klass, int heap_leak, uint64_t seed, unsigned long idx, int flush, int spray)
{
    rng_state = seed * 0x100000001B3ull + idx * 0x9E3779B97F4A7C15ull;
    int prefix = 8 + (int)(rnd() % 40);
    for (int k = 0; k < prefix; k++)
        random_action();
    int v = (int)(rnd() % SLOTS);
    if (!live[v].p)
        alloc_slot(v);
    if (!live[v].p)
        return;
    struct block victim = live[v];
    forge_target(victim.req);
    /* Grooming, a random variant per sequence: blocks of the victim's size freed before the bug (so a
     * LIFO cache holds others behind the victim) and after it (a quarantine or delayed-free queue pushed
     * past the victim before the spray). */
    static unsigned char *groomed[4096];
    int ngroom = flush < 4096 ? flush : 4096;
    static const int before_choices[] = {0, 1, 3, -1};
    int before = before_choices[rnd() % 4], after = rnd() % 2;
    if (before < 0)
        before = ngroom / 2;
    for (int k = 0; k < ngroom; k++) {
        groomed[k] = amalloc(victim.req);
        check_new(groomed[k], victim.req);
    }
    for (int k = 0; k < before && k < ngroom; k++)
        afree(groomed[k]);
    changed = 0;                        /* forge_target and grooming wrote nothing of the bug's */
    const unsigned char *wrote = NULL;  /* the bug's write: [wrote, wrote + wrote_n) */
    size_t wrote_n = 0;
    int wrote_in_live = 0;
    unsigned char *stale = NULL;        /* double free: the block freed twice, until it comes back */
    switch (klass) {
    case OVERFLOW: {
        static const size_t ns[] = {1, 8, 16, 32, 64};
        size_t n = ns[rnd() % 5];
        unsigned char *end = victim.p + victim.use;
        uintptr_t size_word = rnd() % 2 ? (chunk_size(victim.req) * 2) | 1 : 0;
        wrote_in_live = in_live(end, n, victim.p);
        where_now = WHERE_MISUSE;
        for (size_t off = 0; off < n; off += 8) {
            uintptr_t w = (off / 8) % 2 == 0 ? size_word : link_at(end + off, heap_leak);
            write_word(end + off, w, n - off);
        }
        where_now = WHERE_DRIVER;
        wrote = end, wrote_n = n;
        break;
    }
    case WRITE_AFTER_FREE:
        afree(victim.p);
        live[v].p = NULL;
        where_now = WHERE_MISUSE;
        write_word(victim.p, link_at(victim.p, heap_leak), victim.use);
        if (victim.use >= 16)
            write_word(victim.p + 8, (uintptr_t)TARGET, victim.use - 8);
        where_now = WHERE_DRIVER;
        wrote = victim.p, wrote_n = victim.use < 16 ? victim.use : 16;
        wrote_in_live = in_live(wrote, wrote_n, NULL);
        break;
    case DOUBLE_FREE: {
        afree(victim.p);
        live[v].p = NULL;
        /* Other blocks freed in between (free a, b, a), never an allocation: one could hand the victim out
         * again, and freeing it then would be the free of a live block, which no allocator can tell apart. */
        int between = (int)(rnd() % 4);
        for (int k = 0, i = (int)(rnd() % SLOTS); k < between; k++, i = (i + 1) % SLOTS)
            if (live[i].p) {
                afree(live[i].p);
                live[i].p = NULL;
            }
        afree(victim.p);
        stale = victim.p;
        break;
    }
    case INVALID_FREE:
        if (heap_leak && victim.use >= 48) {
            /* an interior pointer, with a chunk header forged in the block's own data before it */
            unsigned char *inner = victim.p + 32;
            write_word(inner - 8, chunk_size(victim.use - 32) | 1, 8);
            afree(inner);
        } else {
            afree(TARGET);
        }
        break;
    case CONTROL:
        break;
    }
    if (wrote_in_live)
        rep->prim |= P_NEIGHBOUR;
    /* The attacker adapts: the rest of the groomed blocks freed after the bug (or kept), then a spray. */
    for (int k = before; k < ngroom; k++)
        if (after)
            afree(groomed[k]);
    nsprayed = 0;
    sprayed_size = victim.req;
    int first = 0;
    for (int k = 1; k <= spray && nsprayed < SPRAY_MAX; k++) {
        unsigned char *q = amalloc(victim.req);
        int before = rep->prim;
        check_new(q, victim.req);
        if (q && q == stale) {
            /* The first copy back of a block freed twice: the attacker writes its link (the block may
             * still be on a free list), then keeps spraying. */
            write_word(q, link_at(q, heap_leak), victim.req);
            stale = NULL;
        }
        if (rep->prim != before && !first)
            first = k;
        if (q && !overlaps(q, victim.req, arena, sizeof arena) && !in_live(q, victim.req, NULL))
            sprayed[nsprayed++] = q;
    }
    rep->attempts = first;
    if (memcmp(arena_before, arena, sizeof arena) != 0)
        rep->prim |= P_ALLOCATOR_WRITE;
    /* The program goes on and gives its memory back: checks made on free (canaries, quarantines) run. */
    for (int k = 0; k < 16; k++)
        random_action();
    for (size_t k = 0; k < nsprayed; k++)
        afree(sprayed[k]);
    for (int k = before; k < ngroom; k++)
        if (!after && groomed[k] && !overlaps(groomed[k], victim.req, arena, sizeof arena))
            afree(groomed[k]);
    for (int i = 0; i < SLOTS; i++)
        if (live[i].p && !(klass == INVALID_FREE && heap_leak && live[i].p == victim.p)) {
            afree(live[i].p);
            live[i].p = NULL;
        }
    if (wrote && changed && !wrote_in_live)
        rep->prim |= P_METADATA;
}

static void on_signal(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    if (!rep->sig) {
        rep->sig = sig;
        rep->code = si->si_code;
        rep->where = where_now;
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void child_setup(void)
{
    static char altstack[1 << 15];
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack};
    sigaltstack(&ss, NULL);
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGFPE, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_signal;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigaction(sigs[i], &sa, NULL);
    }
    alarm(SEQ_ALARM_S);
}

static long arg(int argc, char **argv, int i, long dflt, long lo, long hi)
{
    if (argc <= i)
        return dflt;
    char *end;
    long v = strtol(argv[i], &end, 10);
    if (*end || v < lo || v > hi) {
        dprintf(2, "primitive-sequences: argument %d must be an integer in [%ld, %ld], got %s\n", i, lo, hi, argv[i]);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    struct rlimit r = {(rlim_t)2 << 30, (rlim_t)2 << 30};
    setrlimit(RLIMIT_DATA, &r);
    void *m = dlsym(RTLD_DEFAULT, "malloc"), *u = dlsym(RTLD_DEFAULT, "malloc_usable_size");
    Dl_info mi, ui;
    if (m && u && dladdr(m, &mi) && dladdr(u, &ui))
        usable_own = mi.dli_fbase == ui.dli_fbase;
    int klass = -1, heap_leak = -1;
    for (int i = 0; argc > 1 && i < 5; i++)
        if (strcmp(argv[1], CLASSES[i]) == 0)
            klass = i;
    if (argc > 2)
        heap_leak = strcmp(argv[2], "heap-leak") == 0 ? 1 : strcmp(argv[2], "none") == 0 ? 0 : -1;
    if (klass < 0 || heap_leak < 0 || argc < 5) {
        dprintf(2, "usage: primitive_sequences overflow|write-after-free|double-free|invalid-free|control none|heap-leak "
                   "<first> <count> [seed [flush [spray]]]\n");
        return 2;
    }
    long first = arg(argc, argv, 3, 0, 0, 1L << 40), count = arg(argc, argv, 4, 0, 1, 1000000);
    long seed = arg(argc, argv, 5, 1, 0, 1L << 40), flush = arg(argc, argv, 6, 256, 0, 4096);
    long spray = arg(argc, argv, 7, 128, 1, SPRAY_MAX);
    rep = mmap(NULL, sizeof *rep, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (rep == MAP_FAILED)
        return 99;
    char line[256];
    for (long i = first; i < first + count; i++) {
        memset((void *)rep, 0, sizeof *rep);
        pid_t pid = fork();
        if (pid < 0)
            return 99;
        if (pid == 0) {
            child_setup();
            run_sequence(klass, heap_leak, (uint64_t)seed, (unsigned long)i, (int)flush, (int)spray);
            _exit(0);
        }
        int status;
        while (waitpid(pid, &status, 0) < 0)
            ;
        int n;
        if (WIFEXITED(status))
            n = snprintf(line, sizeof line, "seq=%ld end=exit:%d", i, WEXITSTATUS(status));
        else if (WTERMSIG(status) == SIGALRM)
            n = snprintf(line, sizeof line, "seq=%ld end=hang", i);
        else if (rep->sig == WTERMSIG(status))
            n = snprintf(line, sizeof line, "seq=%ld end=signal:%d:%d:%s", i, rep->sig, rep->code, WHERE[rep->where]);
        else
            n = snprintf(line, sizeof line, "seq=%ld end=signal:%d:-:alloc", i, WTERMSIG(status));
        /* metadata-write needs the sequence to end unstopped */
        int prim = rep->prim & ~(WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : P_METADATA);
        n += snprintf(line + n, sizeof line - n, " prim=%d attempts=%d\n", prim, rep->attempts);
        if (write(1, line, (size_t)n) != n)
            return 99;
    }
    int n = snprintf(line, sizeof line, "result sequences=%ld class=%s capability=%s seed=%ld flush=%ld spray=%ld\n",
                     count, CLASSES[klass], heap_leak ? "heap-leak" : "none", seed, flush, spray);
    return write(1, line, (size_t)n) == n ? 0 : 99;
}
