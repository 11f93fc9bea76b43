/* allocprofile: a program's allocation profile, preloaded for one run under the system glibc (python -m
 * analysis profile). Every call is passed on to the next definition (glibc's malloc); on the way it counts:
 *
 * - calls per entry point (malloc, calloc, realloc, reallocarray, free, posix_memalign, aligned_alloc,
 *   memalign, valloc, pvalloc) and per size class. A size class is a power of two, named by its upper bound:
 *   class 1 holds 1 byte, class 2 holds 2 bytes, class 2^k holds the sizes 2^(k-1)+1 .. 2^k, class 0 holds
 *   0 bytes. An allocation's class is that of the size asked for (calloc: n * size; realloc: the new size); a
 *   free's, that of the size asked for when the block was allocated (a table of the live blocks keeps it);
 * - realloc: whether each one grows, shrinks or keeps the block's requested size, whether the block moved
 *   and the bytes the move copied (the smaller of the old and the new size), and the growth factor in
 *   buckets (at most x2, x4, x8, more); the growing ones, of them those that moved and those whose new size
 *   needs more 4 KiB pages than the old, per class of the new size;
 * - reuse: a free is reused when one of the next REUSE_WINDOW allocations of the same thread (malloc, calloc,
 *   the aligned ones, realloc of NULL) asks for the same size class. Each allocation takes at most one free,
 *   the oldest of its class still within the window (this pairs as many frees as any order could); of those,
 *   the allocations asking for exactly the size of the latest free of their class in that thread (the block a
 *   free list of one size hands back first: glibc's bins above its tcache sort a block of another size);
 * - the threads that allocated, the requested bytes live at the process's peak.
 *
 * Each process appends its report to $HEAPCOST_PROFILE in one write when it exits, by exit() or returning
 * from main (after the program's atexit handlers and destructors) or by _exit() (dash ends so): lines
 * "quantity size_class value", size_class "-" for a total. A process killed by a signal reports nothing. A
 * process forked without exec reports its own calls only (the counters restart in the child); a vfork()
 * child, which shares its parent's memory, reports nothing. Frees of blocks the table does not know (allocated before
 * the shim resolved glibc's functions) are counted apart, without a class.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define REUSE_WINDOW 8
#define N_CLASSES 65 /* 0, then 2^0 .. 2^63 */
#define N_SLOTS 16   /* more than REUSE_WINDOW + 1 allocation indices: an older one is expired */

enum entry { E_MALLOC, E_CALLOC, E_REALLOC, E_REALLOCARRAY, E_FREE, E_POSIX_MEMALIGN, E_ALIGNED_ALLOC,
             E_MEMALIGN, E_VALLOC, E_PVALLOC, N_ENTRY };
static const char *const ENTRY_NAME[N_ENTRY] = {"malloc", "calloc", "realloc", "reallocarray", "free",
                                                "posix_memalign", "aligned_alloc", "memalign", "valloc",
                                                "pvalloc"};

enum counter { C_FREE_NULL, C_FREE_UNTRACKED, C_REALLOC_GROW, C_REALLOC_SHRINK, C_REALLOC_SAME,
               C_REALLOC_FROM_NULL, C_REALLOC_TO_ZERO, C_REALLOC_UNTRACKED, C_REALLOC_FAILED, C_REALLOC_MOVED,
               C_REALLOC_MOVED_BYTES, C_GROW_LE2, C_GROW_LE4, C_GROW_LE8, C_GROW_GT8, C_ALLOC_FAILED,
               N_COUNTER };
static const char *const COUNTER_NAME[N_COUNTER] = {
    "free_null_calls", "free_untracked_calls", "realloc_grow", "realloc_shrink", "realloc_same",
    "realloc_from_null", "realloc_to_zero", "realloc_untracked", "realloc_failed", "realloc_moved",
    "realloc_moved_bytes", "realloc_grow_factor_le2", "realloc_grow_factor_le4", "realloc_grow_factor_le8",
    "realloc_grow_factor_gt8", "alloc_failed"};

static unsigned long calls[N_ENTRY][N_CLASSES];
static unsigned long reused[N_CLASSES], reused_same_size[N_CLASSES];
static unsigned long grown[N_CLASSES], grown_moved[N_CLASSES]; /* growing reallocs, by the new size's class */
static unsigned long grown_pages[N_CLASSES]; /* of those, the ones whose new size needs more 4 KiB pages than the old */
/* of those, the ones the block did not move for, and the pages they added: how far a block grows a step */
static unsigned long grown_in_place[N_CLASSES], grown_in_place_pages[N_CLASSES];
static unsigned long counters[N_COUNTER];
static unsigned long n_threads;
static long live_bytes, peak_live_bytes;
static long live_blocks[N_CLASSES], peak_live_blocks[N_CLASSES]; /* by the class of the size asked for */
static char report_path[4096];
static pid_t owner; /* the process whose counters these are: a vfork() child is another */
static int reported;
static void (*real_exit)(int);

static void bump(unsigned long *c, unsigned long by)
{
    __atomic_fetch_add(c, by, __ATOMIC_RELAXED);
}

static int size_class(size_t n)
{
    if (n == 0)
        return 0;
    int log = n == 1 ? 0 : 64 - __builtin_clzl(n - 1); /* ceil(log2 n) */
    return log > 63 ? 64 : log + 1;
}

/* ---- the next definitions, and an arena for dlsym's own allocations before they are known ---- */

static void *(*real_malloc)(size_t);
static void (*real_free)(void *);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void *(*real_reallocarray)(void *, size_t, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);
static void *(*real_valloc)(size_t);
static void *(*real_pvalloc)(size_t);

static _Alignas(64) char boot[1 << 16];
static size_t boot_used;
static int resolving;

static int in_boot(const void *p)
{
    return (const char *)p >= boot && (const char *)p < boot + sizeof boot;
}

static void *boot_alloc(size_t n)
{
    n = (n + 63) & ~(size_t)63;
    if (boot_used + n > sizeof boot)
        return NULL;
    void *p = boot + boot_used;
    boot_used += n;
    return p;
}

static void resolve(void)
{
    if (real_malloc || resolving)
        return;
    resolving = 1;
    real_calloc = dlsym(RTLD_NEXT, "calloc");
    real_free = dlsym(RTLD_NEXT, "free");
    real_realloc = dlsym(RTLD_NEXT, "realloc");
    real_reallocarray = dlsym(RTLD_NEXT, "reallocarray");
    real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
    real_memalign = dlsym(RTLD_NEXT, "memalign");
    real_valloc = dlsym(RTLD_NEXT, "valloc");
    real_pvalloc = dlsym(RTLD_NEXT, "pvalloc");
    __atomic_store_n(&real_malloc, (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc"), __ATOMIC_RELEASE);
    resolving = 0;
}

/* ---- the live blocks: pointer -> requested size, in shards of open-addressing tables mapped directly ---- */

#define SHARDS 64
#define EMPTY 0
#define TOMB 1

struct slot {
    uintptr_t key;
    size_t size;
};

static struct shard {
    int lock;
    size_t cap, used, tombs; /* used counts live keys */
    struct slot *tab;
} shards[SHARDS];

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static void lock(int *l)
{
    for (int spins = 0; __atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE); spins++)
        if (spins > 64)
            sched_yield();
}

static void unlock(int *l)
{
    __atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

static struct slot *find(struct shard *s, uintptr_t key, uint64_t h, int for_insert)
{
    size_t mask = s->cap - 1, i = (h >> 6) & mask;
    struct slot *tomb = NULL;
    for (;; i = (i + 1) & mask) {
        struct slot *e = &s->tab[i];
        if (e->key == key)
            return e;
        if (e->key == TOMB && !tomb)
            tomb = e;
        if (e->key == EMPTY)
            return for_insert ? (tomb ? tomb : e) : NULL;
    }
}

/* Room for one more key; 0 when no memory could be mapped (the block then goes untracked). */
static int make_room(struct shard *s)
{
    if (s->cap && (s->used + s->tombs + 1) * 10 <= s->cap * 7)
        return 1;
    size_t cap = s->cap ? s->cap : 1024;
    while ((s->used + 1) * 10 > cap * 4)
        cap *= 2;
    struct slot *tab = mmap(NULL, cap * sizeof *tab, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (tab == MAP_FAILED)
        return 0;
    struct slot *old = s->tab;
    size_t old_cap = s->cap;
    s->tab = tab;
    s->cap = cap;
    s->tombs = 0;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key > TOMB)
            *find(s, old[i].key, mix(old[i].key), 1) = old[i];
    if (old)
        munmap(old, old_cap * sizeof *old);
    return 1;
}

static void note_live(long delta)
{
    long now = __atomic_add_fetch(&live_bytes, delta, __ATOMIC_RELAXED);
    long peak = __atomic_load_n(&peak_live_bytes, __ATOMIC_RELAXED);
    while (now > peak && !__atomic_compare_exchange_n(&peak_live_bytes, &peak, now, 1, __ATOMIC_RELAXED,
                                                     __ATOMIC_RELAXED))
        ;
}

static void note_blocks(size_t size, long delta)
{
    int c = size_class(size);
    long now = __atomic_add_fetch(&live_blocks[c], delta, __ATOMIC_RELAXED);
    long peak = __atomic_load_n(&peak_live_blocks[c], __ATOMIC_RELAXED);
    while (now > peak && !__atomic_compare_exchange_n(&peak_live_blocks[c], &peak, now, 1, __ATOMIC_RELAXED,
                                                     __ATOMIC_RELAXED))
        ;
}

static void track(void *p, size_t size)
{
    uintptr_t key = (uintptr_t)p;
    uint64_t h = mix(key);
    struct shard *s = &shards[h & (SHARDS - 1)];
    lock(&s->lock);
    size_t was = SIZE_MAX; /* the size this key was tracked with, if it still was */
    int tracked = make_room(s);
    if (tracked) {
        struct slot *e = find(s, key, h, 1);
        if (e->key != key) {
            if (e->key == TOMB)
                s->tombs--;
            s->used++;
            e->key = key;
        } else {
            was = e->size;
        }
        e->size = size;
    }
    unlock(&s->lock);
    note_live((long)size);
    if (was != SIZE_MAX)
        note_blocks(was, -1);
    if (tracked)
        note_blocks(size, 1);
}

/* The block's requested size, and forget it; SIZE_MAX when unknown. */
static size_t untrack(void *p)
{
    uintptr_t key = (uintptr_t)p;
    uint64_t h = mix(key);
    struct shard *s = &shards[h & (SHARDS - 1)];
    size_t size = SIZE_MAX;
    lock(&s->lock);
    struct slot *e = s->cap ? find(s, key, h, 0) : NULL;
    if (e) {
        size = e->size;
        e->key = TOMB;
        s->used--;
        s->tombs++;
    }
    unlock(&s->lock);
    if (size != SIZE_MAX) {
        note_live(-(long)size);
        note_blocks(size, -1);
    }
    return size;
}

/* ---- each thread's recent frees, for reuse ---- */

struct thread_state {
    int counted;           /* this thread has allocated (counted in n_threads) */
    unsigned long n_alloc; /* its allocations so far */
    struct {
        unsigned long at[N_SLOTS];  /* n_alloc when the frees of this slot happened */
        unsigned int left[N_SLOTS]; /* of those, not yet taken by an allocation */
    } pending[N_CLASSES];
    size_t last_free[N_CLASSES]; /* the size asked for by the class's latest free (0: none yet) */
};
static __thread struct thread_state self __attribute__((tls_model("initial-exec")));

static void count_call(enum entry entry, int c)
{
    bump(&calls[entry][c], 1);
    if (!self.counted) {
        self.counted = 1;
        bump(&n_threads, 1);
    }
}

static void on_alloc(size_t size, enum entry entry, void *p)
{
    int c = size_class(size);
    count_call(entry, c);
    unsigned long now = ++self.n_alloc;
    int best = -1;
    for (int i = 0; i < N_SLOTS; i++) {
        unsigned long at = self.pending[c].at[i];
        if (self.pending[c].left[i] && at < now && now - at <= REUSE_WINDOW &&
            (best < 0 || at < self.pending[c].at[best]))
            best = i;
    }
    if (best >= 0) {
        self.pending[c].left[best]--;
        bump(&reused[c], 1);
        if (size && size == self.last_free[c])
            bump(&reused_same_size[c], 1);
    }
    if (p)
        track(p, size);
    else if (size)
        bump(&counters[C_ALLOC_FAILED], 1);
}

static void on_free(size_t size)
{
    int c = size_class(size);
    bump(&calls[E_FREE][c], 1);
    int i = self.n_alloc % N_SLOTS;
    if (self.pending[c].at[i] != self.n_alloc) {
        self.pending[c].at[i] = self.n_alloc;
        self.pending[c].left[i] = 0;
    }
    self.pending[c].left[i]++;
    self.last_free[c] = size;
}

/* ---- the entry points ---- */

void *malloc(size_t n)
{
    resolve();
    if (!real_malloc)
        return boot_alloc(n);
    void *p = real_malloc(n);
    on_alloc(n, E_MALLOC, p);
    return p;
}

void *calloc(size_t a, size_t b)
{
    resolve();
    size_t n;
    if (__builtin_mul_overflow(a, b, &n))
        n = SIZE_MAX;
    if (!real_calloc)
        return n == SIZE_MAX ? NULL : boot_alloc(n); /* the arena is zeroed static storage */
    void *p = real_calloc(a, b);
    on_alloc(n, E_CALLOC, p);
    return p;
}

void free(void *p)
{
    if (in_boot(p))
        return;
    resolve();
    if (!p) {
        bump(&counters[C_FREE_NULL], 1);
        return;
    }
    size_t size = untrack(p);
    if (size == SIZE_MAX)
        bump(&counters[C_FREE_UNTRACKED], 1);
    else
        on_free(size);
    real_free(p);
}

static void *resize(void *p, size_t n, enum entry entry, void *(*call)(void *, size_t, size_t), size_t a,
                    size_t b)
{
    if (!p) {
        bump(&counters[C_REALLOC_FROM_NULL], 1);
        void *q = call(NULL, a, b);
        on_alloc(n, entry, q);
        return q;
    }
    count_call(entry, size_class(n));
    /* forgotten before the call: once glibc has it back, another thread may be given the same address */
    size_t old = untrack(p);
    void *q = call(p, a, b);
    if (!q && n) {
        bump(&counters[C_REALLOC_FAILED], 1); /* p is still the program's */
        if (old != SIZE_MAX)
            track(p, old);
        return q;
    }
    if (q)
        track(q, n);
    if (!n) {
        bump(&counters[C_REALLOC_TO_ZERO], 1);
        return q;
    }
    if (old == SIZE_MAX) {
        bump(&counters[C_REALLOC_UNTRACKED], 1);
        return q;
    }
    if (n > old) {
        bump(&counters[C_REALLOC_GROW], 1);
        bump(&grown[size_class(n)], 1);
        if ((n + 4095) / 4096 > (old + 4095) / 4096) {
            bump(&grown_pages[size_class(n)], 1);
            if (q == p) {
                bump(&grown_in_place[size_class(n)], 1);
                bump(&grown_in_place_pages[size_class(n)], (n + 4095) / 4096 - (old + 4095) / 4096);
            }
        }
        if (q != p)
            bump(&grown_moved[size_class(n)], 1);
        /* the factor n / old in buckets; from 0 bytes, any growth is past x8 */
        enum counter bucket = !old ? C_GROW_GT8 : n <= 2 * old ? C_GROW_LE2 : n <= 4 * old ? C_GROW_LE4
                              : n <= 8 * old ? C_GROW_LE8 : C_GROW_GT8;
        bump(&counters[bucket], 1);
    } else {
        bump(&counters[n < old ? C_REALLOC_SHRINK : C_REALLOC_SAME], 1);
    }
    if (q != p) {
        bump(&counters[C_REALLOC_MOVED], 1);
        bump(&counters[C_REALLOC_MOVED_BYTES], n < old ? n : old);
    }
    return q;
}

static void *call_realloc(void *p, size_t n, size_t unused)
{
    (void)unused;
    return real_realloc(p, n);
}

static void *call_reallocarray(void *p, size_t a, size_t b)
{
    return real_reallocarray(p, a, b);
}

void *realloc(void *p, size_t n)
{
    resolve();
    if (in_boot(p)) {
        size_t room = (size_t)(boot + sizeof boot - (char *)p);
        void *q = malloc(n);
        if (q)
            memcpy(q, p, n < room ? n : room);
        return q;
    }
    if (!real_realloc)
        return boot_alloc(n);
    return resize(p, n, E_REALLOC, call_realloc, n, 0);
}

void *reallocarray(void *p, size_t a, size_t b)
{
    size_t n;
    if (__builtin_mul_overflow(a, b, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    resolve();
    if (in_boot(p) || !real_reallocarray)
        return realloc(p, n);
    return resize(p, n, E_REALLOCARRAY, call_reallocarray, a, b);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    resolve();
    int rc = real_posix_memalign(out, align, n);
    on_alloc(n, E_POSIX_MEMALIGN, rc == 0 ? *out : NULL);
    return rc;
}

void *aligned_alloc(size_t align, size_t n)
{
    resolve();
    void *p = real_aligned_alloc(align, n);
    on_alloc(n, E_ALIGNED_ALLOC, p);
    return p;
}

void *memalign(size_t align, size_t n)
{
    resolve();
    if (!real_memalign) {
        if (align > 64)
            return NULL;
        return boot_alloc(n);
    }
    void *p = real_memalign(align, n);
    on_alloc(n, E_MEMALIGN, p);
    return p;
}

void *valloc(size_t n)
{
    resolve();
    void *p = real_valloc(n);
    on_alloc(n, E_VALLOC, p);
    return p;
}

void *pvalloc(size_t n)
{
    resolve();
    void *p = real_pvalloc(n);
    on_alloc(n, E_PVALLOC, p);
    return p;
}

/* ---- fork and the report ---- */

static void before_fork(void)
{
    for (int i = 0; i < SHARDS; i++)
        lock(&shards[i].lock);
}

static void after_fork_parent(void)
{
    for (int i = 0; i < SHARDS; i++)
        unlock(&shards[i].lock);
}

/* The child reports its own calls: the counters restart; its live blocks are the parent's, still tracked. */
static void after_fork_child(void)
{
    memset(calls, 0, sizeof calls);
    memset(reused, 0, sizeof reused);
    memset(reused_same_size, 0, sizeof reused_same_size);
    memset(grown, 0, sizeof grown);
    memset(grown_moved, 0, sizeof grown_moved);
    memset(grown_pages, 0, sizeof grown_pages);
    memset(grown_in_place, 0, sizeof grown_in_place);
    memset(grown_in_place_pages, 0, sizeof grown_in_place_pages);
    memset(counters, 0, sizeof counters);
    n_threads = 0;
    self.counted = 0;
    peak_live_bytes = live_bytes;
    memcpy(peak_live_blocks, live_blocks, sizeof peak_live_blocks);
    owner = getpid();
    after_fork_parent();
}

__attribute__((constructor)) static void allocprofile_start(void)
{
    resolve();
    const char *path = getenv("HEAPCOST_PROFILE");
    if (path && strlen(path) < sizeof report_path)
        strcpy(report_path, path);
    owner = getpid();
    real_exit = (void (*)(int))dlsym(RTLD_NEXT, "_exit");
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

static char out[1 << 17];
static size_t out_len;

static void put(const char *quantity, int c, unsigned long value)
{
    if (out_len + 128 > sizeof out)
        return;
    if (c < 0)
        out_len += (size_t)snprintf(out + out_len, sizeof out - out_len, "%s - %lu\n", quantity, value);
    else
        out_len += (size_t)snprintf(out + out_len, sizeof out - out_len, "%s %lu %lu\n", quantity,
                                    c ? 1UL << (c - 1) : 0UL, value);
}

static void report(void)
{
    if (!report_path[0] || reported || getpid() != owner)
        return;
    reported = 1;
    out_len = 0;
    put("processes", -1, 1);
    put("reuse_window", -1, REUSE_WINDOW);
    put("threads", -1, __atomic_load_n(&n_threads, __ATOMIC_RELAXED));
    put("peak_live_bytes", -1, (unsigned long)__atomic_load_n(&peak_live_bytes, __ATOMIC_RELAXED));
    for (int e = 0; e < N_ENTRY; e++) {
        char name[64];
        snprintf(name, sizeof name, "%s_calls", ENTRY_NAME[e]);
        for (int c = 0; c < N_CLASSES; c++) {
            unsigned long v = __atomic_load_n(&calls[e][c], __ATOMIC_RELAXED);
            if (v)
                put(name, c, v);
        }
    }
    for (int c = 0; c < N_CLASSES; c++) {
        unsigned long v = __atomic_load_n(&reused[c], __ATOMIC_RELAXED);
        if (v)
            put("frees_reused", c, v);
        v = __atomic_load_n(&reused_same_size[c], __ATOMIC_RELAXED);
        if (v)
            put("frees_reused_same_size", c, v);
    }
    for (int c = 0; c < N_CLASSES; c++) {
        unsigned long g = __atomic_load_n(&grown[c], __ATOMIC_RELAXED);
        unsigned long m = __atomic_load_n(&grown_moved[c], __ATOMIC_RELAXED);
        unsigned long pg = __atomic_load_n(&grown_pages[c], __ATOMIC_RELAXED);
        if (pg)
            put("realloc_grown_pages", c, pg);
        if (g)
            put("realloc_grown", c, g);
        if (m)
            put("realloc_grown_moved", c, m);
        unsigned long k = __atomic_load_n(&grown_in_place[c], __ATOMIC_RELAXED);
        unsigned long kp = __atomic_load_n(&grown_in_place_pages[c], __ATOMIC_RELAXED);
        if (k)
            put("realloc_grown_in_place", c, k);
        if (kp)
            put("realloc_grown_in_place_pages", c, kp);
    }
    for (int c = 0; c < N_CLASSES; c++) {
        long v = __atomic_load_n(&peak_live_blocks[c], __ATOMIC_RELAXED);
        if (v > 0)
            put("peak_live_blocks", c, (unsigned long)v);
    }
    for (int k = 0; k < N_COUNTER; k++)
        put(COUNTER_NAME[k], -1, __atomic_load_n(&counters[k], __ATOMIC_RELAXED));
    int fd = open(report_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    ssize_t unused = write(fd, out, out_len);
    (void)unused;
    close(fd);
}

__attribute__((destructor)) static void allocprofile_end(void)
{
    report();
}

void _exit(int status)
{
    report();
    if (real_exit)
        real_exit(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

void _Exit(int status)
{
    _exit(status);
}
