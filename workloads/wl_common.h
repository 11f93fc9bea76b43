/* Shared helpers of heapcost's C workloads: scale parsing, a seeded PRNG, FNV-1a checksums.
 * Everything here is deterministic and independent of addresses, so a workload's checksum
 * depends only on its scale, never on the allocator or the libc it was linked with. */
#ifndef WL_COMMON_H
#define WL_COMMON_H

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* FNV-1a over a file's bytes (the drivers hash the objects a compiler wrote); exits if it cannot be read. */
static inline uint64_t wl_fnv_file(uint64_t h, const char *path)
{
    unsigned char buf[65536];
    size_t n;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        exit(1);
    }
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        h = wl_fnv_bytes(h, buf, n);
    fclose(f);
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

/* Lockstep interleaving (analysis/harness/timing/lockstep.c): two workload processes, pinned to one
 * CPU, take turns under a token passed through two pipes, so both run in the same speed regime of that
 * CPU. With HEAPCOST_LOCKSTEP_IN / HEAPCOST_LOCKSTEP_OUT naming pipe fds, the process waits for the
 * token before main, and wl_turn() (called from the main loops) passes it on once about
 * HEAPCOST_LOCKSTEP_CHUNK_US (default 1000) of its own work has passed, then waits for it again.
 * It counts its own active time (from getting the token to passing it) and prints at exit, on stderr,
 *   lockstep active_s=<seconds> turns=<n>
 * Without the variables nothing changes: wl_turn() is one predictable branch. The clock is read every
 * `every` calls, `every` doubled until a check costs well under the chunk. Single-threaded workloads
 * only. When the peer exits its end of the pipe closes: the survivor runs on alone (solo). An exiting
 * process does not pass the token: the peer sees the pipe close once the exit has torn down the
 * process's memory, so that teardown does not fall into the peer's turn. */
struct wl_lockstep {
    int on, in, out;
    long count, every, turns;
    double chunk_s, got, last_check, active;
};
static struct wl_lockstep wl_ls;

static inline double wl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long wl_env_long(const char *name, long fallback)
{
    const char *v = getenv(name);
    char *end;
    long n;
    if (v == NULL || *v == '\0')
        return fallback;
    n = strtol(v, &end, 10);
    return (*end == '\0' && n >= 0) ? n : fallback;
}

/* Block until the token arrives (1) or the peer is gone (0). */
static int wl_wait_token(void)
{
    char c;
    ssize_t r;
    while ((r = read(wl_ls.in, &c, 1)) < 0 && errno == EINTR)
        ;
    return r == 1;
}

static void wl_lockstep_exit(void)
{
    double t = wl_now();
    if (wl_ls.in < 0)
        return;
    wl_ls.active += t - wl_ls.got;
    fprintf(stderr, "lockstep active_s=%.9f turns=%ld\n", wl_ls.active, wl_ls.turns);
    fflush(stderr);
}

__attribute__((constructor)) static void wl_lockstep_init(void)
{
    long in = wl_env_long("HEAPCOST_LOCKSTEP_IN", -1), out = wl_env_long("HEAPCOST_LOCKSTEP_OUT", -1);
    long ready = wl_env_long("HEAPCOST_LOCKSTEP_READY", -1);
    wl_ls.in = -1;
    if (in < 0 || out < 0)
        return;
    signal(SIGPIPE, SIG_IGN); /* a write to an exited peer fails with EPIPE: then run solo */
    wl_ls.in = (int)in;
    wl_ls.out = (int)out;
    wl_ls.chunk_s = (double)wl_env_long("HEAPCOST_LOCKSTEP_CHUNK_US", 1000) * 1e-6;
    wl_ls.every = 1;
    if (ready >= 0) { /* started and loaded: the driver hands out the first token once both are */
        ssize_t unused = write((int)ready, "r", 1);
        (void)unused;
        close((int)ready);
    }
    wl_ls.on = wl_wait_token();
    wl_ls.got = wl_ls.last_check = wl_now();
    atexit(wl_lockstep_exit);
}

__attribute__((noinline, unused)) static void wl_turn_slow(void)
{
    double t = wl_now();
    wl_ls.count = 0;
    if (t - wl_ls.last_check < wl_ls.chunk_s / 16 && wl_ls.every < (1L << 30))
        wl_ls.every *= 2;
    else if (t - wl_ls.last_check > wl_ls.chunk_s / 2 && wl_ls.every > 1)
        wl_ls.every /= 2;
    wl_ls.last_check = t;
    if (t - wl_ls.got < wl_ls.chunk_s)
        return;
    wl_ls.active += t - wl_ls.got;
    wl_ls.got = t;
    if (write(wl_ls.out, "t", 1) != 1) {
        wl_ls.on = 0; /* the peer has exited */
        return;
    }
    wl_ls.turns++;
    wl_ls.on = wl_wait_token();
    wl_ls.got = wl_ls.last_check = wl_now();
}

static inline void wl_turn(void)
{
    if (__builtin_expect(!wl_ls.on, 1))
        return;
    if (++wl_ls.count >= wl_ls.every)
        wl_turn_slow();
}

#endif
