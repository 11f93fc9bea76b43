/* placement: a small allocator of heapcost's own, preloaded to measure how much a program's speed depends on
 * where its blocks lie (python -m analysis profile). It has two modes, chosen by $HEAPCOST_PLACEMENT:
 *
 * - "ordered": each size class carves its slabs in address order and hands back the block freed last, as
 *   size-segregated allocators do (jemalloc, mimalloc, hardened_malloc's light build): blocks allocated one
 *   after another lie side by side, so a program that walks them in allocation order walks memory in order;
 * - "shuffled": the same slabs and classes, but each allocation takes a slot drawn at random among the free
 *   slots of its class nearest the slab being carved (SHUFFLE_WINDOW of them), as an allocator that randomizes
 *   slot choice does (hardened_malloc's default, scudo): blocks allocated together lie scattered.
 *
 * The two modes run the same code for every call and differ only in which free slot an allocation takes, so the
 * program's CPU time under shuffled over its time under ordered is what scattering its blocks costs it (caches,
 * the hardware prefetcher, the TLB), and its time under ordered over its time under glibc what laying them side
 * by side gains or loses against glibc's own placement; allocation-call costs of its own are small (a lock, a
 * table lookup) next to glibc's.
 *
 * Small blocks (up to MAX_SMALL bytes) live in one reserved region, in slabs of SLAB bytes (or more for the
 * largest classes) of one class each; a table gives each SLAB unit of the region its class. Larger blocks and
 * those with alignments above 16 are mapped alone, with a header before them. Nothing is ever given back to the
 * system: the profile's runs are short. One lock serializes every call. A block the allocator did not make
 * (none should exist: every entry point is here) is ignored by free.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define REGION_BYTES (64ULL << 30) /* reserved, never committed beyond what is touched */
#define SLAB (64 * 1024)
#define MAX_SMALL (32 * 1024)
#define MIN_SLOTS 8
#define SHUFFLE_WINDOW 256
#define N_UNITS (REGION_BYTES / SLAB)
#define LARGE_MAGIC 0x706c6163656d6e74ULL
#define MAX_CLASSES 64

static unsigned class_size[MAX_CLASSES];
static unsigned n_classes;
static unsigned char *region;   /* the small blocks' region */
static size_t region_used;      /* bytes of it carved into slabs */
static unsigned char *unit_class; /* per SLAB unit: its class + 1, 0 when not a slab */
static int shuffled;
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int ready;

struct pool {        /* a class's free slots: a stack, the next block handed out on top */
    void **slot;
    size_t n, cap;
};
static struct pool pools[MAX_CLASSES];

struct large { uint64_t magic; void *base; size_t map_len; size_t size; size_t align; };

static uint64_t next_random(void) {
    uint64_t x = rng_state;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    return rng_state = x;
}

static void *map(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void init(void) {
    /* classes: every 16 bytes to 256, then four a doubling to MAX_SMALL */
    for (unsigned s = 16; s <= 256; s += 16) class_size[n_classes++] = s;
    for (unsigned base = 256; base < MAX_SMALL; base *= 2)
        for (unsigned q = 1; q <= 4; q++) class_size[n_classes++] = base + q * (base / 4);
    const char *mode = getenv("HEAPCOST_PLACEMENT");
    shuffled = mode && strcmp(mode, "shuffled") == 0;
    region = map(REGION_BYTES);
    unit_class = map(N_UNITS);
    if (!region || !unit_class) abort();
    ready = 1;
}

static int class_of(size_t size) {
    if (size <= 256) return size ? (int)((size + 15) / 16) - 1 : 0;
    for (unsigned c = 16; c < n_classes; c++)
        if (size <= class_size[c]) return (int)c;
    return -1;
}

static int push(struct pool *p, void *slot) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 1024;
        void **grown = map(cap * sizeof *grown);
        if (!grown) return -1;
        if (p->slot) { memcpy(grown, p->slot, p->n * sizeof *grown); munmap(p->slot, p->cap * sizeof *grown); }
        p->slot = grown;
        p->cap = cap;
    }
    p->slot[p->n++] = slot;
    return 0;
}

static int carve(int c) {
    size_t size = class_size[c];
    size_t bytes = size * MIN_SLOTS > SLAB ? ((size * MIN_SLOTS + SLAB - 1) / SLAB) * SLAB : SLAB;
    if (region_used + bytes > REGION_BYTES) return -1;
    unsigned char *slab = region + region_used;
    for (size_t u = region_used / SLAB; u < (region_used + bytes) / SLAB; u++) unit_class[u] = (unsigned char)(c + 1);
    region_used += bytes;
    /* pushed from the top, so that the lowest address is handed out first */
    size_t n = bytes / size;
    for (size_t i = n; i-- > 0;)
        if (push(&pools[c], slab + i * size) < 0) return -1;
    return 0;
}

static void *small_alloc(int c) {
    struct pool *p = &pools[c];
    if (p->n == 0 && carve(c) < 0) return NULL;
    size_t take = p->n - 1;
    if (shuffled) {
        size_t window = p->n < SHUFFLE_WINDOW ? p->n : SHUFFLE_WINDOW;
        take = p->n - 1 - (size_t)(next_random() % window);
    }
    void *slot = p->slot[take];
    p->slot[take] = p->slot[p->n - 1];
    p->n--;
    return slot;
}

static void *large_alloc(size_t size, size_t align) {
    if (align < 64) align = 64;
    size_t page = 4096;
    if (size > SIZE_MAX - align - page) return NULL;
    size_t len = ((size + align + sizeof(struct large) + page - 1) / page) * page;
    unsigned char *base = map(len);
    if (!base) return NULL;
    uintptr_t at = ((uintptr_t)base + sizeof(struct large) + align - 1) & ~(uintptr_t)(align - 1);
    struct large *h = (struct large *)at - 1;
    h->magic = LARGE_MAGIC; h->base = base; h->map_len = len; h->size = size; h->align = align;
    return (void *)at;
}

static int in_region(const void *p) {
    return region && (const unsigned char *)p >= region && (const unsigned char *)p < region + region_used;
}

static size_t usable(const void *p) {
    if (in_region(p)) {
        unsigned c = unit_class[((const unsigned char *)p - region) / SLAB];
        return c ? class_size[c - 1] : 0;
    }
    const struct large *h = (const struct large *)p - 1;
    return h->magic == LARGE_MAGIC ? h->size : 0;
}

static void *alloc_locked(size_t size, size_t align) {
    if (!ready) init();
    if (align <= 16) {
        int c = class_of(size);
        if (c >= 0) return small_alloc(c);
    }
    return large_alloc(size, align);
}

static void free_locked(void *p) {
    if (in_region(p)) {
        unsigned c = unit_class[((unsigned char *)p - region) / SLAB];
        if (c) push(&pools[c - 1], p);
        return;
    }
    struct large *h = (struct large *)p - 1;
    if (h->magic == LARGE_MAGIC) { h->magic = 0; munmap(h->base, h->map_len); }
}

static void *alloc(size_t size, size_t align) {
    pthread_mutex_lock(&lock);
    void *p = alloc_locked(size, align);
    pthread_mutex_unlock(&lock);
    if (!p) errno = ENOMEM;
    return p;
}

void *malloc(size_t size) { return alloc(size, 16); }

void free(void *p) {
    if (!p) return;
    pthread_mutex_lock(&lock);
    free_locked(p);
    pthread_mutex_unlock(&lock);
}

void *calloc(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) { errno = ENOMEM; return NULL; }
    void *p = alloc(n * size, 16);
    if (p) memset(p, 0, n * size);
    return p;
}

void *realloc(void *old, size_t size) {
    if (!old) return malloc(size);
    if (size == 0) { free(old); return NULL; }
    pthread_mutex_lock(&lock);
    size_t have = usable(old);
    pthread_mutex_unlock(&lock);
    if (have >= size && (in_region(old) || have - size < 4096)) return old;
    if (!in_region(old) && size > MAX_SMALL) {  /* a large block grows or shrinks where the kernel can move it */
        struct large *h = (struct large *)old - 1;
        if (h->magic == LARGE_MAGIC && h->align <= 4096) {
            size_t offset = (unsigned char *)old - (unsigned char *)h->base;
            size_t len = ((offset + size + 4095) / 4096) * 4096;
            unsigned char *base = mremap(h->base, h->map_len, len, MREMAP_MAYMOVE);
            if (base == MAP_FAILED) { errno = ENOMEM; return NULL; }
            h = (struct large *)(base + offset) - 1;
            h->base = base; h->map_len = len; h->size = size;
            return base + offset;
        }
    }
    void *p = malloc(size);
    if (!p) return NULL;
    memcpy(p, old, have < size ? have : size);
    free(old);
    return p;
}

void *reallocarray(void *old, size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) { errno = ENOMEM; return NULL; }
    return realloc(old, n * size);
}

int posix_memalign(void **out, size_t align, size_t size) {
    if (align < sizeof(void *) || (align & (align - 1))) return EINVAL;
    void *p = alloc(size, align);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t size) {
    if (align == 0 || (align & (align - 1))) { errno = EINVAL; return NULL; }
    return alloc(size, align);
}

void *memalign(size_t align, size_t size) { return aligned_alloc(align < 16 ? 16 : align, size); }
void *valloc(size_t size) { return alloc(size, 4096); }
void *pvalloc(size_t size) { return alloc((size + 4095) & ~(size_t)4095, 4096); }

size_t malloc_usable_size(void *p) {
    if (!p) return 0;
    pthread_mutex_lock(&lock);
    size_t n = usable(p);
    pthread_mutex_unlock(&lock);
    return n;
}

/* a forked child takes the lock's state of the moment: hold it across fork so that it is free in both */
static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork(void) { pthread_mutex_unlock(&lock); }
static void child_after_fork(void) { pthread_mutex_init(&lock, NULL); }
__attribute__((constructor)) static void placement_start(void) {
    pthread_mutex_lock(&lock);
    if (!ready) init();
    pthread_mutex_unlock(&lock);
    pthread_atfork(before_fork, after_fork, child_after_fork);
}
