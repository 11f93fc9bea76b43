/* calls-<class>-<pattern>: what one malloc+free pair costs, for one size class and one way of reusing memory
 * (analysis/harness/workloads.py registers one workload per class and pattern, each built from this file with
 * -DCALL_CLASS=<bytes> -DCALL_PATTERN=<0 lifo, 1 fifo, 2 random, 3 pages> -DCALL_PAIRS=<pairs at scale 1>
 * -DCALL_SLOTS=<live blocks>; processes: -DCALL_CHILD_PAIRS=<pairs in each child>; -DCALL_SAME_SIZE=1: every block
 * of CALL_CLASS bytes; 5 grow, -DCALL_GROW_STEP=<bytes>).
 *
 * Sizes are drawn (a fixed seed) from the class: CALL_CLASS/2+1 .. CALL_CLASS bytes, the profile's size class
 * (analysis/contract/profile_schema.py); with CALL_SAME_SIZE, every block asks for CALL_CLASS bytes, as a program
 * asking again and again for one buffer of one size does (a free list of one size then hands back the block just
 * freed, where a drawn size sends glibc above its tcache through its sorted bins). A working set of SLOTS blocks is kept live; each step frees one and
 * allocates one, so every step is one malloc and one free:
 * - lifo: the block freed is the one allocated last (a stack: SLOTS blocks allocated, then freed in reverse);
 *   memory is taken again at once, the allocator's hottest path;
 * - fifo: the oldest block is freed (a ring of SLOTS): a freed block is asked for again SLOTS steps later;
 * - random: a random live block is freed (a slot drawn with a fixed seed): freed memory comes back in no
 *   order;
 * - pages: one block of CALL_CLASS bytes at a time, every page of it written, then freed: the cost of
 *   fresh pages (an allocator that maps and unmaps such blocks pays the system calls and the page faults);
 * - grow: one block at a time grown by realloc from GROW_STEP bytes to CALL_CLASS in steps of GROW_STEP, each
 *   step's new bytes written (a page at a time, as a program appending to a buffer touches them), then freed: a
 *   step is one growing realloc of a large block, which glibc extends or remaps where it lies and an allocator
 *   that moves the block pays a copy and fresh pages for;
 * - processes: one short process at a time, this program started again (posix_spawn, as make and the compiler
 *   drivers start theirs) with the argument "child", waited for: each child makes CHILD_PAIRS small malloc+free
 *   pairs and exits, so a step is what a process of a build pays for its allocator beyond its calls: loading
 *   and starting it, the pages its first calls touch, and its exit. The child inherits the environment (the
 *   preloaded allocator with it) but for the lockstep's variables, so it never takes the parent's turns.
 * Each block's first and last whole words are written and read back (a block is at least 16 bytes), so a
 * block is touched as a program touches it (pages: every page). CALL_PAIRS steps at scale 1; the harness
 * divides a process's time by the steps of its scale (wl_scaled(scale, CALL_PAIRS): CallWorkload.pairs_at). */
#include "wl_common.h"

#include <spawn.h>
#include <sys/wait.h>

extern char **environ;

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
#ifndef CALL_SAME_SIZE
#define CALL_SAME_SIZE 0
#endif
#ifndef CALL_GROW_STEP
#define CALL_GROW_STEP 65536
#endif
#ifndef CALL_CHILD_PAIRS
#define CALL_CHILD_PAIRS 64
#endif
#define CHILD_PAIRS CALL_CHILD_PAIRS

static size_t draw_size(uint64_t *rng)
{
    size_t low = CALL_CLASS / 2 + 1, span = CALL_CLASS - CALL_CLASS / 2;
    if (CALL_CLASS <= 1 || CALL_SAME_SIZE)
        return CALL_CLASS;
    return low + (size_t)wl_below(rng, span);
}

__attribute__((unused)) static uint64_t *take(uint64_t *rng, uint64_t tag, size_t *size)
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

__attribute__((unused)) static uint64_t give_back(uint64_t *p, size_t n)
{
    uint64_t v = p[0] + p[n / 8 - 1];
    free(p);
    return v;
}

#if CALL_PATTERN == 4
/* A process of a build in miniature: CHILD_PAIRS pairs of 16..1024 bytes, the last allocated freed first. */
static int child(void)
{
    uint64_t rng = 0xc41dULL, sum = 0;
    void *live[CHILD_PAIRS];
    for (int i = 0; i < CHILD_PAIRS; i++) {
        size_t n = 16 + (size_t)wl_below(&rng, 1009);
        unsigned char *b = wl_malloc(n);
        b[0] = (unsigned char)i;
        b[n - 1] = (unsigned char)(i ^ 0x55);
        live[i] = b;
        sum += b[0] + b[n - 1];
    }
    for (int i = CHILD_PAIRS - 1; i >= 0; i--)
        free(live[i]);
    return sum == 0; /* 0: never, the sum is positive */
}

/* The environment without the lockstep's variables (HEAPCOST_LOCKSTEP_*): the child runs, never takes turns. */
static char **child_environment(void)
{
    size_t n = 0, k = 0;
    char **env;
    while (environ[n])
        n++;
    env = wl_malloc((n + 1) * sizeof *env);
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "HEAPCOST_LOCKSTEP_", 18) != 0)
            env[k++] = environ[i];
    env[k] = NULL;
    return env;
}

static uint64_t start_one(char **env)
{
    static char self[] = "/proc/self/exe", arg[] = "child";
    char *child_argv[] = {self, arg, NULL};
    pid_t pid;
    int status, err = posix_spawn(&pid, self, NULL, NULL, child_argv, env);
    if (err != 0) {
        fprintf(stderr, "calls: posix_spawn: %s\n", strerror(err));
        exit(1);
    }
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            perror("calls: waitpid");
            exit(1);
        }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "calls: a child process failed (status %d)\n", status);
        exit(1);
    }
    return 1;
}
#endif

int main(int argc, char **argv)
{
#if CALL_PATTERN == 4
    if (argc == 2 && strcmp(argv[1], "child") == 0)
        return child();
#endif
    long pairs = wl_scaled(wl_scale(argc, argv), CALL_PAIRS);
    uint64_t rng = 0x5eedca11ULL + CALL_CLASS * 4 + CALL_PATTERN, sum = 0;
    uint64_t *live[SLOTS];
    size_t size[SLOTS];
    long done = 0;

#if CALL_PATTERN == 4
    char **env = child_environment();
    (void)live;
    (void)size;
    (void)rng;
    for (; done < pairs; done++) {
        sum += start_one(env);
        wl_turn();
    }
    free(env);
#elif CALL_PATTERN == 5
    (void)live;
    (void)size;
    (void)rng;
    while (done < pairs) {
        unsigned char *p = NULL;
        for (size_t n = CALL_GROW_STEP; n <= CALL_CLASS && done < pairs; n += CALL_GROW_STEP, done++) {
            unsigned char *q = realloc(p, n);
            if (!q) {
                fprintf(stderr, "calls: realloc to %zu bytes failed\n", n);
                exit(1);
            }
            p = q;
            for (size_t off = n - CALL_GROW_STEP; off < n; off += PAGE)
                p[off] = (unsigned char)(done + off / PAGE);
            sum += p[n - CALL_GROW_STEP] + p[0];
        }
        free(p);
        wl_turn();
    }
#elif CALL_PATTERN == 3
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
