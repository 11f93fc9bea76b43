/* linux build driver: seed 001's kernel rpmbuild, a part of it, with the kernel's own build system (kbuild).
 * From the current (empty, scratch) directory it configures and builds out of tree into ./linux-out:
 *     make -C TREE O=<scratch>/linux-out MAKE-VAR... CONFIG-TARGET        (e.g. tinyconfig)
 *     make -jJOBS -C TREE O=<scratch>/linux-out MAKE-VAR... TARGET...     (e.g. kernel/ mm/ ...)
 * so the source tree stays untouched and every process of the build (make, sh, gcc, cc1, as, ld, and the
 * kernel's host tools: fixdep, conf, objtool, flex, bison, bc) starts under the allocator being measured
 * (they inherit LD_PRELOAD). Then it hashes the kernel's objects, removes ./linux-out and prints
 *   metric tree_peak_rss_kb=<peak of the summed resident memory of make's process tree>
 *   metric tree_peak_anon_kb=<the same of its anonymous resident memory (the heap's pages live there)>
 *   checksum=<hex>
 *
 * usage: linux-build-driver SCALE JOBS MAKE TREE CONFIG-TARGET -- MAKE-VAR... -- TARGET...
 *        linux-build-driver --tree-rss PROGRAM ARG...   (runs one program under the same sampler: the tests)
 * SCALE 1 builds every TARGET; a smaller scale builds the first SCALE x (number of TARGETs), at least one; the
 * configuration step is the same at every scale.
 *
 * The process tree's memory is sampled every SAMPLE_MS from /proc while make runs: make and every
 * descendant, found from make through /proc/PID/task/PID/children (the children of each process's main
 * thread: make, sh and the compiler start their children from it), each process's resident and shared pages
 * from /proc/PID/statm. statm reads the kernel's counters and does not walk the mappings (smaps would, at a
 * cost growing with an allocator's mappings), so the sampler costs the same whatever the allocator. Summed
 * resident memory counts the pages processes share (a program's text, libc) in every process that has them;
 * anonymous memory (resident minus file-backed and shared) is each process's own. The peak is over the samples: a process that lives
 * less than SAMPLE_MS may be missed. On stderr the driver reports how often it sampled and the CPU time
 * the sampling took (it is part of the trial's CPU time).
 *
 * The build is made deterministic: KBUILD_BUILD_TIMESTAMP, KBUILD_BUILD_USER, KBUILD_BUILD_HOST and
 * KBUILD_BUILD_VERSION are fixed (they enter init/version.o), kbuild maps the source tree's path out of
 * __FILE__ and the objects are written relative to the output folder. No -frandom-seed is added: gcc draws
 * on its random seed for LTO and coverage names, which this build has none of (the checksum agrees run after
 * run and under every allocator tried). The checksum hashes .config and every
 * .o under ./linux-out except those of tools/ (objtool, built with its absolute output path), in path
 * order: it depends on the scale only (and on the source and compiler), never on the allocator. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "wl_common.h"

extern char **environ;

#define OUT_DIR "linux-out"
#define SAMPLE_MS 10
#define MAX_PROCS 4096
#define MAX_ARGS 256

/* ---- the process tree's memory ------------------------------------------------------------------ */

struct tree_peak {
    long rss_kb, anon_kb; /* the largest sums seen */
    long samples, procs;
    double cpu_s; /* CPU time the sampling itself took */
};

static long page_kb;

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The open /proc files of the processes seen in the last sample: re-read with pread (the kernel makes the text
 * anew on every read), so a process living over many samples costs two reads a sample, not two opens and
 * closes. An entry whose process is no longer in the tree is closed at the end of the sample that missed it,
 * long before its pid could be given to another process. */
struct proc_files {
    pid_t pid;
    int statm, children;
    long seen;
};
static struct proc_files files[MAX_PROCS];
static int nfiles;

static struct proc_files *files_of(pid_t pid, long now)
{
    char path[64];
    for (int i = 0; i < nfiles; i++)
        if (files[i].pid == pid) {
            files[i].seen = now;
            return &files[i];
        }
    if (nfiles == MAX_PROCS)
        return NULL;
    struct proc_files *f = &files[nfiles];
    snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
    f->statm = open(path, O_RDONLY | O_CLOEXEC);
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
    f->children = open(path, O_RDONLY | O_CLOEXEC);
    if (f->statm < 0 || f->children < 0) { /* gone already */
        if (f->statm >= 0)
            close(f->statm);
        if (f->children >= 0)
            close(f->children);
        return NULL;
    }
    f->pid = pid;
    f->seen = now;
    nfiles++;
    return f;
}

static void forget_unseen(long now)
{
    for (int i = 0; i < nfiles;)
        if (files[i].seen != now) {
            close(files[i].statm);
            close(files[i].children);
            files[i] = files[--nfiles];
        } else {
            i++;
        }
}

static ssize_t reread(int fd, char *buf, size_t size)
{
    ssize_t n = pread(fd, buf, size - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    return n;
}

/* One sample: the summed resident and anonymous memory of `root` and its descendants. A process that exits
 * between the listing and the read counts as nothing in this sample (its memory is gone). */
static void sample(pid_t root, struct tree_peak *peak)
{
    static pid_t procs[MAX_PROCS];
    char buf[8192];
    long rss = 0, anon = 0, now = peak->samples + 1;
    int n = 1;
    double t0 = thread_cpu_s();
    procs[0] = root;
    for (int i = 0; i < n; i++) {
        long size, resident, shared;
        struct proc_files *f = files_of(procs[i], now);
        if (f == NULL)
            continue;
        if (reread(f->statm, buf, sizeof buf) > 0 && sscanf(buf, "%ld %ld %ld", &size, &resident, &shared) == 3) {
            rss += resident;
            anon += resident - shared;
        }
        if (reread(f->children, buf, sizeof buf) <= 0)
            continue;
        for (char *p = buf, *end; n < MAX_PROCS; p = end) {
            long child = strtol(p, &end, 10);
            if (end == p)
                break;
            procs[n++] = (pid_t)child;
        }
    }
    forget_unseen(now);
    if (rss * page_kb > peak->rss_kb)
        peak->rss_kb = rss * page_kb;
    if (anon * page_kb > peak->anon_kb)
        peak->anon_kb = anon * page_kb;
    peak->samples++;
    peak->procs += n;
    peak->cpu_s += thread_cpu_s() - t0;
}

/* Spawns argv (stdout sent to stderr when quiet: the driver's stdout carries its metrics and checksum alone),
 * samples its process tree every SAMPLE_MS until it exits; returns its wait status, or -1. */
static int run_sampled(char **argv, int quiet, struct tree_peak *peak)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (quiet)
        posix_spawn_file_actions_adddup2(&fa, 2, 1);
    pid_t pid;
    int err = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (err != 0) {
        fprintf(stderr, "linux-build-driver: cannot run %s: %s\n", argv[0], strerror(err));
        return -1;
    }
    /* a pidfd wakes the driver the moment the child exits, so the sampling adds no wait to the build's end */
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (;;) {
        sample(pid, peak);
        next.tv_nsec += SAMPLE_MS * 1000000L;
        if (next.tv_nsec >= 1000000000L) {
            next.tv_sec++;
            next.tv_nsec -= 1000000000L;
        }
        struct timespec now, wait = {0, 0};
        clock_gettime(CLOCK_MONOTONIC, &now);
        long long left = (long long)(next.tv_sec - now.tv_sec) * 1000000000LL + (next.tv_nsec - now.tv_nsec);
        if (left > 0) {
            wait.tv_sec = (time_t)(left / 1000000000LL);
            wait.tv_nsec = (long)(left % 1000000000LL);
        } else {
            next = now; /* behind (the machine was busy): the next sample one interval from now */
        }
        if (pidfd >= 0) {
            struct pollfd p = {.fd = pidfd, .events = POLLIN};
            if (ppoll(&p, 1, &wait, NULL) > 0)
                break;
        } else {
            int status;
            pid_t r = waitpid(pid, &status, WNOHANG);
            if (r == pid) {
                forget_unseen(-1);
                return status;
            }
            nanosleep(&wait, NULL);
        }
    }
    if (pidfd >= 0)
        close(pidfd);
    forget_unseen(-1);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return status;
}

static void print_peak(const struct tree_peak *peak)
{
    printf("metric tree_peak_rss_kb=%ld\n", peak->rss_kb);
    printf("metric tree_peak_anon_kb=%ld\n", peak->anon_kb);
    fprintf(stderr, "linux-build-driver: %ld samples of the process tree (%.1f processes on average), every %d ms; "
            "sampling took %.3f s CPU\n", peak->samples, peak->samples ? (double)peak->procs / peak->samples : 0.0,
            SAMPLE_MS, peak->cpu_s);
}

/* ---- the objects' checksum and the clean-up ------------------------------------------------------- */

static char **hashed;
static size_t nhashed, cap;
static size_t out_prefix;

static int want(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    const char *rel = path + out_prefix;
    size_t len = strlen(rel);
    if (type == FTW_F && strncmp(rel, "tools/", 6) != 0 &&
        ((len > 2 && strcmp(rel + len - 2, ".o") == 0) || strcmp(rel, ".config") == 0)) {
        if (nhashed == cap) {
            cap = cap ? 2 * cap : 1024;
            hashed = wl_realloc(hashed, cap * sizeof *hashed);
        }
        hashed[nhashed++] = strdup(rel);
    }
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    remove(path);
    return 0;
}

static void clean(void)
{
    nftw(OUT_DIR, remove_one, 64, FTW_DEPTH | FTW_PHYS);
}

static int fail(const char *what)
{
    fprintf(stderr, "linux-build-driver: %s\n", what);
    clean();
    return 1;
}

static int next_sep(int argc, char **argv, int from)
{
    while (from < argc && strcmp(argv[from], "--") != 0)
        from++;
    return from;
}

int main(int argc, char **argv)
{
    page_kb = sysconf(_SC_PAGESIZE) / 1024;
    if (argc >= 3 && strcmp(argv[1], "--tree-rss") == 0) {
        struct tree_peak peak = {0};
        int status = run_sampled(argv + 2, 0, &peak);
        print_peak(&peak);
        return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    if (argc < 9) {
        fprintf(stderr, "usage: %s SCALE JOBS MAKE TREE CONFIG-TARGET -- MAKE-VAR... -- TARGET...\n", argv[0]);
        return 2;
    }
    double scale = wl_scale(argc, argv);
    const char *jobs = argv[2], *make = argv[3], *tree = argv[4], *config = argv[5];
    int v0 = 7, v1 = next_sep(argc, argv, v0), t0 = v1 + 1;
    if (strcmp(argv[6], "--") != 0 || v1 >= argc || t0 >= argc) {
        fprintf(stderr, "linux-build-driver: expected -- MAKE-VARS -- TARGETS\n");
        return 2;
    }
    if (scale > 1.0) {
        fprintf(stderr, "linux-build-driver: scale %g is more than one whole build (use at most 1)\n", scale);
        return 2;
    }
    char makefile[4096];
    snprintf(makefile, sizeof makefile, "%s/Makefile", tree);
    if (access(makefile, R_OK) != 0) {
        fprintf(stderr, "linux-build-driver: no kernel source at %s (no readable Makefile)\n", tree);
        return 2;
    }
    long ntargets = argc - t0, n = wl_scaled(scale, ntargets);
    if (n > ntargets)
        n = ntargets;

    char cwd[4096], out[4200], out_arg[4300], jflag[64];
    if (getcwd(cwd, sizeof cwd) == NULL) {
        perror("getcwd");
        return 1;
    }
    snprintf(out, sizeof out, "%s/" OUT_DIR, cwd);
    snprintf(out_arg, sizeof out_arg, "O=%s", out);
    snprintf(jflag, sizeof jflag, "-j%s", jobs);
    clean(); /* what an interrupted earlier build left: every build starts from an empty folder */
    if (mkdir(OUT_DIR, 0777) != 0)
        return fail("cannot create the output folder " OUT_DIR);

    /* what kbuild writes into init/version.o and the kernel's version string: fixed */
    setenv("KBUILD_BUILD_TIMESTAMP", "Thu Jan  1 00:00:00 UTC 1970", 1);
    setenv("KBUILD_BUILD_USER", "heapcost", 1);
    setenv("KBUILD_BUILD_HOST", "heapcost", 1);
    setenv("KBUILD_BUILD_VERSION", "1", 1);
    setenv("SOURCE_DATE_EPOCH", "0", 1);

    char *args[MAX_ARGS];
    int k = 0;
    args[k++] = (char *)make;
    args[k++] = "-s";
    args[k++] = "-C";
    args[k++] = (char *)tree;
    args[k++] = out_arg;
    for (int i = v0; i < v1 && k < MAX_ARGS - 2; i++)
        args[k++] = argv[i];
    int vars_end = k;
    args[k++] = (char *)config;
    args[k] = NULL;

    struct tree_peak peak = {0};
    int status = run_sampled(args, 1, &peak);
    if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return fail("make of the configuration failed");

    k = vars_end;
    args[k++] = jflag;
    for (long i = 0; i < n && k < MAX_ARGS - 1; i++)
        args[k++] = argv[t0 + i];
    args[k] = NULL;
    status = run_sampled(args, 1, &peak);
    if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return fail("make of the targets failed");

    out_prefix = strlen(OUT_DIR) + 1;
    nftw(OUT_DIR, want, 64, FTW_PHYS);
    qsort(hashed, nhashed, sizeof *hashed, by_name);
    uint64_t h = wl_fnv_u64(WL_FNV_INIT, (uint64_t)n);
    long objects = 0;
    for (size_t i = 0; i < nhashed; i++) {
        char path[4200];
        snprintf(path, sizeof path, OUT_DIR "/%s", hashed[i]);
        h = wl_fnv_bytes(h, hashed[i], strlen(hashed[i]) + 1);
        h = wl_fnv_file(h, path);
        objects += strcmp(hashed[i], ".config") != 0;
    }
    clean();
    if (objects == 0) {
        fprintf(stderr, "linux-build-driver: the build made no object file\n");
        return 1;
    }
    fprintf(stderr, "linux-build-driver: %ld of %ld targets, %ld object files\n", n, ntargets, objects);
    print_peak(&peak);
    wl_print_checksum(h);
    return 0;
}
