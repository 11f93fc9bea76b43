/* heapcost-cpu-load: other work, on purpose, for the bench's interference part (harness/bench/interference.py).
 *
 *   heapcost-cpu-load --cpu N --duty D [--period-ms P] [--mib M]
 *
 * Pinned to CPU N, it works for D x P ms, then sleeps (1 - D) x P ms, until it is killed. Its work is what
 * other work on a developer's machine looks like to an allocator benchmark: allocation churn over a working
 * set of M MiB (default 16: more than the L2 here), each block written as it is allocated, so it competes
 * for the caches and memory as well as for the CPU. The bench stops and continues it (SIGSTOP, SIGCONT)
 * around the lockstep pairs of its condition.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int usage(const char *why)
{
    fprintf(stderr, "heapcost-cpu-load: %s\nusage: heapcost-cpu-load --cpu N --duty D [--period-ms P] [--mib M]\n",
            why);
    return 2;
}

int main(int argc, char **argv)
{
    int cpu = -1;
    double duty = -1, period_ms = 20, mib = 16;
    for (int i = 1; i + 1 < argc; i += 2) {
        char *end;
        double v = strtod(argv[i + 1], &end);
        if (*end || end == argv[i + 1])
            return usage("a number is needed after each option");
        if (!strcmp(argv[i], "--cpu"))
            cpu = (int)v;
        else if (!strcmp(argv[i], "--duty"))
            duty = v;
        else if (!strcmp(argv[i], "--period-ms"))
            period_ms = v;
        else if (!strcmp(argv[i], "--mib"))
            mib = v;
        else
            return usage("unknown option");
    }
    if (argc % 2 == 0 || cpu < 0 || duty <= 0 || duty > 1 || period_ms <= 0 || mib <= 0)
        return usage("--cpu (>= 0) and --duty (in (0, 1]) are required; --period-ms and --mib are positive");
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        fprintf(stderr, "heapcost-cpu-load: cannot pin to CPU %d: %s\n", cpu, strerror(errno));
        return 1;
    }
    size_t slots = (size_t)(mib * 1024 * 1024 / 512);
    char **live = calloc(slots, sizeof *live);
    if (!live)
        return 1;
    uint64_t x = 0x9E3779B97F4A7C15u;
    double on_s = duty * period_ms / 1000, off_s = (1 - duty) * period_ms / 1000;
    for (;;) {
        double until = now_s() + on_s;
        while (now_s() < until) {
            for (int k = 0; k < 256; k++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                size_t i = x % slots, size = 16 + (x >> 40) % 1009;
                free(live[i]);
                live[i] = malloc(size);
                if (live[i])
                    memset(live[i], (int)k, size);
            }
        }
        if (off_s > 0) {
            struct timespec ts = {(time_t)off_s, (long)((off_s - (time_t)off_s) * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
}
