/* Shared reporting for the heap-misuse probes.
 *
 * Protocol (read by analysis/probe.py):
 *   stderr  "heapcost-probe: misuse-done"  right after the misuse itself;
 *   stdout  "result worked=0|1 key=value..." once the primitive has been tried;
 *   stderr  "heapcost-probe: used"         before the probe goes on with unrelated heap work;
 *   stderr  "heapcost-probe: done"         at a normal end.
 * Markers go to stderr, the allocator's own channel, so a report the allocator prints can be placed
 * before or after them.  Everything is written with write(2) from static buffers: no stdio buffering
 * that a crash could lose, and no malloc of our own while the heap may be corrupt.
 */
#ifndef HEAPCOST_PROBE_H
#define HEAPCOST_PROBE_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define PROBE_SETUP_FAILED 99

/* A memory cap on the probe itself. The sandbox's address-space limit must stay loose, because
 * hardened allocators reserve hundreds of GiB of inaccessible address space up front; RLIMIT_DATA
 * counts only writable private memory, which is what a runaway probe would use. */
#define PROBE_DATA_LIMIT ((rlim_t)2 << 30)

__attribute__((constructor)) static void probe_limit_data(void)
{
    struct rlimit r = {PROBE_DATA_LIMIT, PROBE_DATA_LIMIT};
    setrlimit(RLIMIT_DATA, &r);
}

static char probe_line[1 << 16];

static void probe_write(int fd, const char *fmt, va_list ap)
{
    int n = vsnprintf(probe_line, sizeof probe_line - 1, fmt, ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof probe_line - 2)
        n = sizeof probe_line - 2;
    probe_line[n++] = '\n';
    size_t off = 0;
    while (off < (size_t)n) {
        ssize_t w = write(fd, probe_line + off, (size_t)n - off);
        if (w <= 0)
            return;
        off += (size_t)w;
    }
}

static void probe_mark(const char *stage)
{
    const char *pre = "heapcost-probe: ";
    (void)!write(2, pre, strlen(pre));
    (void)!write(2, stage, strlen(stage));
    (void)!write(2, "\n", 1);
}

__attribute__((format(printf, 1, 2))) static void probe_result(const char *fmt, ...)
{
    static char fmt2[512];
    snprintf(fmt2, sizeof fmt2, "result %s", fmt);
    va_list ap;
    va_start(ap, fmt);
    probe_write(1, fmt2, ap);
    va_end(ap);
}

__attribute__((noreturn, format(printf, 1, 2))) static void probe_setup_failed(const char *fmt, ...)
{
    static char fmt2[512];
    snprintf(fmt2, sizeof fmt2, "heapcost-probe: setup-failed %s", fmt);
    va_list ap;
    va_start(ap, fmt);
    probe_write(2, fmt2, ap);
    va_end(ap);
    _exit(PROBE_SETUP_FAILED);
}

/* Hide a pointer's origin from the compiler, so no misuse is folded away or rewritten. */
static inline void *launder(void *p)
{
    __asm__ volatile("" : "+r"(p));
    return p;
}

static inline size_t launder_size(size_t n)
{
    __asm__ volatile("" : "+r"(n));
    return n;
}

__attribute__((unused)) static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p)
        probe_setup_failed("malloc(%zu) returned NULL", n);
    return p;
}

/* The usable size of a block of `requested` bytes. An allocator that does not define
 * malloc_usable_size leaves glibc's, which reads a header the block does not have: a value outside
 * [requested, requested + slack] is not believed, and the requested size is used instead. */
__attribute__((unused)) static size_t usable_size(void *p, size_t requested, size_t slack)
{
    size_t u = malloc_usable_size(p);
    return u >= requested && u <= requested + slack ? u : requested;
}

/* Memory no allocator handed out: the target of wild frees and poisoned links. */
static unsigned char probe_static_area[3 * 4096] __attribute__((aligned(4096)));

__attribute__((unused)) static int in_static_area(const void *p)
{
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)probe_static_area;
    return a >= lo && a < lo + sizeof probe_static_area;
}

/* Count bytes of p[from, to) equal to c, reading through volatile so a freed block is read as is. */
__attribute__((unused)) static size_t count_bytes(const void *p, size_t from, size_t to, unsigned char c)
{
    const volatile unsigned char *b = (const volatile unsigned char *)p;
    size_t n = 0;
    for (size_t i = from; i < to; i++)
        n += b[i] == c;
    return n;
}

/* Do any two of n live blocks [ptr, ptr+size) share memory? Returns the number of overlapping pairs
 * between neighbours in address order (duplicates included). */
static int cmp_uintptr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

__attribute__((unused)) static size_t count_overlaps(void **blocks, const size_t *sizes, size_t n)
{
    static uintptr_t pairs[2 * 4096];
    if (n > 4096)
        n = 4096;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!blocks[i])
            continue;
        pairs[2 * m] = (uintptr_t)blocks[i];
        pairs[2 * m + 1] = sizes[i];
        m++;
    }
    qsort(pairs, m, 2 * sizeof(uintptr_t), cmp_uintptr);
    size_t overlaps = 0;
    for (size_t i = 0; i + 1 < m; i++)
        overlaps += pairs[2 * i] + pairs[2 * i + 1] > pairs[2 * (i + 1)];
    return overlaps;
}

/* After the primitive has been tried: ordinary heap work, so damage that surfaces only later shows
 * up as a crash after the "used" marker (a late crash) rather than being mistaken for detection. */
static void probe_go_on(void)
{
    probe_mark("used");
    static void *slots[64];
    unsigned x = 12345u;
    for (int i = 0; i < 4000; i++) {
        x = x * 1103515245u + 12345u;
        unsigned k = (x >> 16) % 64;
        free(slots[k]);
        size_t sz = 8 + (x >> 4) % 700;
        slots[k] = malloc(sz);
        if (slots[k])
            memset(slots[k], 0x5a, sz);
    }
    for (int k = 0; k < 64; k++)
        free(slots[k]);
    probe_mark("done");
}

#endif
