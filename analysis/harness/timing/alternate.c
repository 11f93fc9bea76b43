/* heapcost-alternate: two programs that cannot take turns themselves (a brought program, under allocators A
 * and B) made to take turns from outside, on one CPU, for a fixed window of time.
 *
 * Both processes are alive at once and pinned to the same CPU; this driver (on another CPU) continues one
 * process group and stops the other every --slice-us microseconds (SIGCONT / SIGSTOP), so both run in the
 * same speed regimes of the CPU, slice after slice. When a process ends it is started again at once, in the
 * same place of the alternation, until the window closes; then both are killed and their unfinished runs are
 * not counted. Each side's CPU time (user + system, from wait4) per completed run is what the harness
 * compares: its ratio is free of the regimes, as the built-in workloads' own turns are (lockstep.c).
 *
 * usage: heapcost-alternate [--cpu N] [--driver-cpu N] [--first a|b] [--slice-us U] [--window-s S]
 *          [--max-runs N] [--a-stdout F] [--a-stderr F] [--a-cwd D] [--a-env K=V ...]   (same for --b-*)
 *          -- A_PROG ARGS... -- B_PROG ARGS...
 *        heapcost-alternate --fit 1 [--timeout S] [--a-stdout F] [--a-stderr F] [--a-cwd D] [--a-env K=V ...]
 *          -- PROG ARGS...
 * --fit runs one program once, unpinned, and reports what decides whether it can take turns from outside:
 * its wall time from the exec to its exit, the whole process's CPU time (wait4), and its main thread's time on
 * the CPU and waiting for it in the run queue (/proc/PID/schedstat, read while it is a zombie).
 * Each process gets exactly its --x-env variables. --x-stdout holds the output of the side's last run that ended
 * (the run the window cut short is left out), --x-stderr every run's. --max-runs stops the window early once each side has that
 * many completed runs (0: the window alone decides). A run that ends with a non-zero status or a signal ends
 * the window: the harness reports it instead of comparing. Output: one line of JSON (docs/design.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "child_io.h"

#define MAX_RUNS 100000

struct run {
    double cpu_s, user_s, sys_s, wall_s;
    long maxrss_kb, minflt;
};

/* what the child sends just before its exec: the time by its own clock, and its scheduler account so far */
struct stamp {
    double t;
    long long run_ns, queued_ns;
};

struct side {
    struct side_io io;  /* where it writes, in what it runs (child_io.h) */
    long long run0_ns, queued0_ns; /* the current run's scheduler account at its exec */
    char *out_running;  /* where the current run writes its stdout, renamed to io.out when it ends */
    char **argv;
    pid_t pid;          /* the running process (and its group), 0 when none */
    double started;
    int exec_errno, status, failed;
    long runs_done, stops, conts;
    double cpu_all;     /* CPU time of every run started, the one the window cut short included */
    struct run *runs;
};

static struct side S[2];

static void usage(void)
{
    fprintf(stderr, "usage: heapcost-alternate [--cpu N] [--driver-cpu N] [--first a|b] [--slice-us U] "
                    "[--window-s S] [--max-runs N]\n"
                    "         [--a-stdout F] [--a-stderr F] [--a-cwd D] [--a-env K=V ...] (and --b-*)\n"
                    "         -- A_PROG ARGS... -- B_PROG ARGS...\n"
                    "       heapcost-alternate --fit 1 [--timeout S] [--a-...] -- PROG ARGS...\n");
    exit(64);
}

static double cpu_of(const struct rusage *ru, double *user, double *sys)
{
    *user = ru->ru_utime.tv_sec + ru->ru_utime.tv_usec * 1e-6;
    *sys = ru->ru_stime.tv_sec + ru->ru_stime.tv_usec * 1e-6;
    return *user + *sys;
}

/* Start one run of a side: forked, in its own process group, pinned, redirected; stopped once its exec went
 * through unless it is the side whose slice it is. */
static int start(struct side *s, int cpu, int running)
{
    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC))
        return errno;
    pid_t pid = fork();
    if (pid < 0)
        return errno;
    if (pid == 0) {
        close(errpipe[0]);
        /* the stdout of the last run that ended is kept (a checksum line is read from it): each run writes its
         * own file, renamed when it ends; stderr gathers every run's */
        int e = child_setup(cpu, s->io.cwd, s->out_running, s->io.err, 1);
        if (!e) {
            /* the run starts here, by the child's own clock: a parent the machine is slow to schedule cannot
             * move it */
            struct stamp st = {now(), -1, -1};
            FILE *f = fopen("/proc/self/schedstat", "r");
            if (f) {
                if (fscanf(f, "%lld %lld", &st.run_ns, &st.queued_ns) != 2)
                    st.run_ns = st.queued_ns = -1;
                fclose(f);
            }
            ssize_t w = write(errpipe[1], &st, sizeof st);
            (void)w;
            e = child_exec(s->argv, s->io.env, s->io.n_env);
        }
        ssize_t unused = write(errpipe[1], &e, sizeof e);
        (void)unused;
        _exit(127);
    }
    setpgid(pid, pid);
    close(errpipe[1]);
    /* wait for the exec to go through (the pipe closes on exec) or fail (the child wrote its errno): the new
     * process runs alone for that moment, which its CPU time counts like any other */
    struct stamp st = {now(), -1, -1};
    int e = 0;
    ssize_t r;
    do
        r = read(errpipe[0], &st, sizeof st);
    while (r < 0 && errno == EINTR);
    if (r == (ssize_t)sizeof st) {
        do
            r = read(errpipe[0], &e, sizeof e);
        while (r < 0 && errno == EINTR);
    } else
        r = 0, e = 0;
    close(errpipe[0]);
    if (r == (ssize_t)sizeof e && e) {
        s->exec_errno = e;
        waitpid(pid, NULL, 0);
        return e;
    }
    if (!running) {
        kill(-pid, SIGSTOP);
        s->stops++;
    }
    s->pid = pid;
    s->started = st.t;
    s->run0_ns = st.run_ns;
    s->queued0_ns = st.queued_ns;
    return 0;
}

static volatile sig_atomic_t fit_timed_out;
static pid_t fit_pid;

static void fit_alarm(int sig)
{
    (void)sig;
    fit_timed_out = 1;
    if (fit_pid > 0)
        kill(-fit_pid, SIGKILL);
}

/* --fit: one run, read from the kernel's accounts at its exit (before it is reaped). */
static int fit(struct side *s, double timeout)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fit_alarm;
    sigaction(SIGALRM, &sa, NULL);
    if (start(s, -1, 1)) {
        printf("{\"status\": \"spawn-failed\", \"error\": \"%s\"}\n", strerror(s->exec_errno));
        return 0;
    }
    fit_pid = s->pid;
    /* woken at once when the program ends, however busy the machine (root; otherwise as it comes) */
    struct sched_param fifo = {.sched_priority = 1};
    sched_setscheduler(0, SCHED_FIFO, &fifo);
    if (timeout > 0) {
        struct itimerval it = {{0, 0}, {(time_t)timeout, (suseconds_t)((timeout - (time_t)timeout) * 1e6)}};
        setitimer(ITIMER_REAL, &it, NULL);
    }
    siginfo_t info;
    while (waitid(P_PID, s->pid, &info, WEXITED | WNOWAIT) < 0 && errno == EINTR)
        ;
    double wall = now() - s->started;
    long long run_ns = -1, queued_ns = -1;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/schedstat", (int)s->pid);
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%lld %lld", &run_ns, &queued_ns) != 2)
            run_ns = queued_ns = -1;
        fclose(f);
    }
    int status;
    struct rusage ru;
    while (wait4(s->pid, &status, 0, &ru) < 0 && errno == EINTR)
        ;
    kill(-s->pid, SIGKILL);
    double user, sys, cpu = cpu_of(&ru, &user, &sys);
    printf("{\"status\": \"%s\", \"exit_code\": ", fit_timed_out ? "timeout" : WIFSIGNALED(status) ? "signaled" : "exited");
    if (WIFEXITED(status)) printf("%d", WEXITSTATUS(status)); else printf("null");
    printf(", \"wall_s\": %.6f, \"cpu_s\": %.6f, \"user_s\": %.6f, \"sys_s\": %.6f, ", wall, cpu, user, sys);
    if (run_ns >= 0 && s->run0_ns >= 0) /* from the exec on, as the wall time */
        printf("\"main_run_s\": %.6f, \"main_queued_s\": %.6f}\n", (run_ns - s->run0_ns) * 1e-9,
               (queued_ns - s->queued0_ns) * 1e-9);
    else
        printf("\"main_run_s\": null, \"main_queued_s\": null}\n");
    fflush(stdout);
    return 0;
}

static void sleep_until(double t)
{
    struct timespec ts;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static void report(const char *name, struct side *s)
{
    double cpu = 0, user = 0, sys = 0;
    for (long k = 0; k < s->runs_done; k++)
        cpu += s->runs[k].cpu_s, user += s->runs[k].user_s, sys += s->runs[k].sys_s;
    printf("\"%s\": {\"runs\": %ld, \"cpu_s\": %.6f, \"user_s\": %.6f, \"sys_s\": %.6f, \"cpu_all_s\": %.6f, "
           "\"stops\": %ld, \"conts\": %ld, ", name, s->runs_done, cpu, user, sys, s->cpu_all, s->stops, s->conts);
    if (s->failed) {
        if (WIFEXITED(s->status))
            printf("\"failed\": {\"exit_code\": %d, \"signal\": null}, ", WEXITSTATUS(s->status));
        else
            printf("\"failed\": {\"exit_code\": null, \"signal\": %d}, ", WIFSIGNALED(s->status) ? WTERMSIG(s->status) : 0);
    } else
        printf("\"failed\": null, ");
    printf("\"error\": ");
    if (s->exec_errno)
        printf("\"%s\", ", strerror(s->exec_errno)); /* strerror texts need no escaping */
    else
        printf("null, ");
    printf("\"each\": [");
    for (long k = 0; k < s->runs_done; k++)
        printf("%s[%.6f, %.6f, %ld, %ld]", k ? ", " : "", s->runs[k].cpu_s, s->runs[k].wall_s,
               s->runs[k].maxrss_kb, s->runs[k].minflt);
    printf("]}");
}

int main(int argc, char **argv)
{
    int cpu = -1, driver_cpu = -1, first = 0, fit_only = 0;
    long slice_us = 1000, max_runs = 0;
    double window = 10, timeout = 0;
    for (int k = 0; k < 2; k++) {
        S[k].runs = calloc(MAX_RUNS, sizeof(struct run));
        if (side_init(&S[k].io, argc, 0) != 0 || !S[k].runs)
            return 70;
    }
    int i;
    for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
        const char *a = argv[i];
        if (i + 1 >= argc)
            usage();
        const char *v = argv[++i];
        if (!strcmp(a, "--cpu")) cpu = atoi(v);
        else if (!strcmp(a, "--driver-cpu")) driver_cpu = atoi(v);
        else if (!strcmp(a, "--first")) first = !strcmp(v, "b");
        else if (!strcmp(a, "--slice-us")) slice_us = atol(v);
        else if (!strcmp(a, "--window-s")) window = atof(v);
        else if (!strcmp(a, "--max-runs")) max_runs = atol(v);
        else if (!strcmp(a, "--fit")) fit_only = atoi(v) != 0;
        else if (!strcmp(a, "--timeout")) timeout = atof(v);
        else if (side_option(&S[0].io, &S[1].io, a, v) != 1)
            usage();
    }
    if (slice_us < 100 || window <= 0 || max_runs < 0 || max_runs > MAX_RUNS)
        usage();
    if (fit_only) { /* -- A ARGS...: one command */
        if (i >= argc - 1)
            usage();
        S[0].argv = argv + i + 1;
        if (asprintf(&S[0].out_running, "%s", S[0].io.out) < 0)
            return 70;
        signal(SIGPIPE, SIG_IGN);
        return fit(&S[0], timeout);
    }
    if (two_commands(argc, argv, i, &S[0].argv, &S[1].argv) != 0) /* -- A ARGS... -- B ARGS... */
        usage();
    for (int k = 0; k < 2; k++) { /* stderr gathers every run's: start from an empty file */
        if (asprintf(&S[k].out_running, "%s.running", S[k].io.out) < 0)
            return 70;
        if (!strcmp(S[k].io.out, "/dev/null"))
            S[k].out_running = "/dev/null";
        int f = open(S[k].io.out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (f >= 0) close(f);
        f = open(S[k].io.err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (f >= 0) close(f);
    }
    if (driver_cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(driver_cpu, &set);
        sched_setaffinity(0, sizeof set, &set);
    }
    signal(SIGPIPE, SIG_IGN);

    int current = first;          /* the side whose slice it is */
    long slices = 0;
    double t0 = now();
    for (int k = 0; k < 2; k++)
        if (start(&S[k], cpu, k == current))
            goto done;
    double end = t0 + window, next = t0 + slice_us * 1e-6;
    int stop = 0;
    while (!stop) {
        sleep_until(next);
        next += slice_us * 1e-6;
        /* reap whatever ended during the slice, and start it again in its place of the alternation */
        for (;;) {
            int status;
            struct rusage ru;
            pid_t pid = wait4(-1, &status, WNOHANG | WUNTRACED | WCONTINUED, &ru);
            if (pid <= 0)
                break;
            if (WIFSTOPPED(status) || WIFCONTINUED(status))
                continue;
            for (int k = 0; k < 2; k++) {
                struct side *s = &S[k];
                if (pid != s->pid)
                    continue;
                kill(-pid, SIGKILL); /* nothing of a run may outlive it */
                s->pid = 0;
                double u, y;
                s->cpu_all += cpu_of(&ru, &u, &y);
                if (strcmp(s->out_running, "/dev/null"))
                    rename(s->out_running, s->io.out);
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                    s->failed = 1;
                    s->status = status;
                    stop = 1;
                    break;
                }
                struct run *r = &s->runs[s->runs_done++];
                r->cpu_s = cpu_of(&ru, &r->user_s, &r->sys_s);
                r->wall_s = now() - s->started;
                r->maxrss_kb = ru.ru_maxrss;
                r->minflt = ru.ru_minflt;
                if (s->runs_done >= MAX_RUNS)
                    stop = 1;
            }
        }
        double t = now();
        if (t >= end || (max_runs && S[0].runs_done >= max_runs && S[1].runs_done >= max_runs))
            stop = 1;
        if (stop)
            break;
        for (int k = 0; k < 2; k++)
            if (!S[k].pid && start(&S[k], cpu, k == current))
                stop = 1;
        if (stop)
            break;
        /* the turn passes: the other side runs for the next slice */
        S[current].stops++;
        kill(-S[current].pid, SIGSTOP);
        current = 1 - current;
        S[current].conts++;
        kill(-S[current].pid, SIGCONT);
        slices++;
    }
done:
    for (int k = 0; k < 2; k++)
        if (S[k].pid > 0) {
            kill(-S[k].pid, SIGKILL);
            kill(-S[k].pid, SIGCONT);
            struct rusage ru;
            double u, y;
            if (wait4(S[k].pid, NULL, 0, &ru) > 0)
                S[k].cpu_all += cpu_of(&ru, &u, &y);
            if (strcmp(S[k].out_running, "/dev/null"))
                unlink(S[k].out_running); /* the run the window cut short */
        }
    struct rusage self;
    getrusage(RUSAGE_SELF, &self);
    double su, ss;
    printf("{\"first\": \"%s\", \"cpu\": %d, \"slice_us\": %ld, \"window_s\": %.3f, \"wall_s\": %.6f, "
           "\"slices\": %ld, \"driver_cpu_s\": %.6f, ", first ? "b" : "a", cpu, slice_us, window, now() - t0, slices,
           cpu_of(&self, &su, &ss));
    report("a", &S[0]);
    printf(", ");
    report("b", &S[1]);
    printf("}\n");
    fflush(stdout);
    return 0;
}
