/* heapcost-run: run one trial as a child of a tiny process and report the child's own resources.
 *
 * Python's fork carries the parent's peak RSS into the child's rusage (the kernel keeps the larger of
 * the old and new mm high-water marks across exec), so a small child forked from a big interpreter
 * reports the interpreter's size. This launcher is a few hundred KB, so what it carries is negligible.
 * Output: one line of JSON on stdout (see docs/design.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "child_io.h"

static volatile sig_atomic_t timed_out;
static pid_t child_pid;

/* A dependent chain of integer operations: its duration tracks the core's clock rate. */
static uint64_t spin(uint64_t iters)
{
    volatile uint64_t sink;
    uint64_t x = 88172645463325252ULL;
    for (uint64_t i = 0; i < iters; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    sink = x;
    return sink;
}

static double time_spin(uint64_t iters)
{
    double t0 = now();
    spin(iters);
    return now() - t0;
}

static void on_alarm(int sig)
{
    (void)sig;
    timed_out = 1;
    if (child_pid > 0)
        kill(-child_pid, SIGKILL);
}

static int in_server;
static jmp_buf bad_request;

static void usage(void)
{
    if (in_server)
        longjmp(bad_request, 1);
    fprintf(stderr,
            "usage: heapcost-run [--stdout F] [--stderr F] [--stdin F] [--timeout S] [--probe-iters N]\n"
            "                    [--cpu-limit S] [--as-limit B] [--fsize-limit B] [--cwd D] [--cpu N[,M...]]\n"
            "                    [--clear-env] [--env K=V ...] -- PROG ARGS...\n"
            "       heapcost-run --calibrate SECONDS\n");
    exit(64);
}

static void json_str(const char *s)
{
    putchar('"');
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void set_limit(int resource, rlim_t value)
{
    struct rlimit rl = {value, value};
    if (setrlimit(resource, &rl) != 0)
        _exit(126);
}

static int fatal(const char *what)
{
    if (in_server) {
        printf("{\"status\": \"spawn-failed\", \"error\": \"%s: %s\"}\n", what, strerror(errno));
        fflush(stdout);
        return 0;
    }
    perror(what);
    return 70;
}

static int run_request(int argc, char **argv)
{
    const char *out = "/dev/null", *err = "/dev/null", *in = "/dev/null", *cwd = NULL;
    double timeout = 0, calibrate = 0;
    uint64_t probe_iters = 0;
    long long cpu_limit = 0, as_limit = 0, fsize_limit = 0;
    /* --cpu N or --cpu N,M,...: the child runs pinned to those CPUs (sched_setaffinity before exec) */
    cpu_set_t cpus;
    int cpu = -1;
    CPU_ZERO(&cpus);
    /* The child's environment comes as --env flags, so the launcher itself runs without the
     * allocator preloaded and its own footprint stays the same for every allocator. */
    char **child_env = calloc((size_t)argc + 1, sizeof *child_env);
    int n_env = 0, clear_env = 0;
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--"))
            break;
        if (!strcmp(a, "--clear-env")) {
            clear_env = 1;
            continue;
        }
        if (i + 1 >= argc)
            usage();
        const char *v = argv[++i];
        if (!strcmp(a, "--stdout")) out = v;
        else if (!strcmp(a, "--stderr")) err = v;
        else if (!strcmp(a, "--stdin")) in = v;
        else if (!strcmp(a, "--cwd")) cwd = v;
        else if (!strcmp(a, "--env")) child_env[n_env++] = (char *)v;
        else if (!strcmp(a, "--timeout")) timeout = atof(v);
        else if (!strcmp(a, "--probe-iters")) probe_iters = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--calibrate")) calibrate = atof(v);
        else if (!strcmp(a, "--cpu-limit")) cpu_limit = atoll(v);
        else if (!strcmp(a, "--as-limit")) as_limit = atoll(v);
        else if (!strcmp(a, "--fsize-limit")) fsize_limit = atoll(v);
        else if (!strcmp(a, "--cpu")) {
            for (const char *p = v; *p; p++) {
                char *end;
                long n = strtol(p, &end, 10);
                if (end == p || n < 0 || n >= CPU_SETSIZE)
                    usage();
                CPU_SET((int)n, &cpus);
                cpu = (int)n;
                p = end;
                if (!*p)
                    break;
                if (*p != ',')
                    usage();
            }
        }
        else usage();
    }
    if (calibrate > 0) {
        uint64_t n = 1000;
        time_spin(n);
        while (time_spin(n) < calibrate / 4)
            n *= 2;
        double best = 1e9;
        for (int k = 0; k < 5; k++) {
            double t = time_spin(n);
            if (t < best)
                best = t;
        }
        printf("%llu\n", (unsigned long long)(n * (calibrate / best)));
        return 0;
    }
    if (i >= argc - 1)
        usage();
    char **child_argv = argv + i + 1;
    timed_out = 0;
    child_pid = 0;

    struct rlimit nocore = {0, 0};
    setrlimit(RLIMIT_CORE, &nocore);

    /* A pipe that closes on a successful exec tells a failed exec (errno) from a child's exit 127. */
    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) != 0) {
        free(child_env);
        return fatal("pipe2");
    }
    /* --cpu: the launcher too runs on the trial's CPU for the request, so the clock probe times the
     * CPU the trial runs on (the launcher only sleeps in wait4 meanwhile); restored at the end. */
    cpu_set_t saved_cpus;
    int restore_cpus = cpu >= 0 && sched_getaffinity(0, sizeof saved_cpus, &saved_cpus) == 0;
    if (restore_cpus)
        sched_setaffinity(0, sizeof cpus, &cpus);
    double probe_before = probe_iters ? time_spin(probe_iters) : -1;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);

    double t0 = now();
    pid_t pid = fork();
    if (pid < 0) {
        close(errpipe[0]);
        close(errpipe[1]);
        free(child_env);
        if (restore_cpus)
            sched_setaffinity(0, sizeof saved_cpus, &saved_cpus);
        return fatal("fork");
    }
    if (pid == 0) {
        setpgid(0, 0);
        close(errpipe[0]);
        int e = 0;
        if (cpu >= 0 && sched_setaffinity(0, sizeof cpus, &cpus) != 0)
            e = errno;
        if (!e && cwd && chdir(cwd) != 0) e = errno;
        if (!e && redirect(in, 0, O_RDONLY) != 0) e = errno;
        if (!e && redirect(out, 1, O_WRONLY | O_CREAT | O_TRUNC) != 0) e = errno;
        if (!e && redirect(err, 2, O_WRONLY | O_CREAT | O_TRUNC) != 0) e = errno;
        if (!e) {
            if (cpu_limit > 0) set_limit(RLIMIT_CPU, (rlim_t)cpu_limit);
            if (as_limit > 0) set_limit(RLIMIT_AS, (rlim_t)as_limit);
            if (fsize_limit > 0) set_limit(RLIMIT_FSIZE, (rlim_t)fsize_limit);
            if (clear_env) {
                for (int k = 0; k < n_env; k++) /* look the program up in the trial's own PATH */
                    if (!strncmp(child_env[k], "PATH=", 5))
                        setenv("PATH", child_env[k] + 5, 1);
                execvpe(child_argv[0], child_argv, child_env);
            }
            else
                execvp(child_argv[0], child_argv);
            e = errno;
        }
        ssize_t unused = write(errpipe[1], &e, sizeof e);
        (void)unused;
        _exit(127);
    }
    child_pid = pid;
    setpgid(pid, pid); /* also here, so the timeout can kill the group before the child ran */
    close(errpipe[1]);
    if (timeout > 0) {
        struct itimerval it = {{0, 0}, {(time_t)timeout, (suseconds_t)((timeout - (time_t)timeout) * 1e6)}};
        setitimer(ITIMER_REAL, &it, NULL);
    }
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR)
        ;
    double wall = now() - t0;
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    kill(-pid, SIGKILL); /* nothing of the trial may outlive it */

    int exec_errno = 0;
    ssize_t got = read(errpipe[0], &exec_errno, sizeof exec_errno);
    double probe_after = probe_iters ? time_spin(probe_iters) : -1;
    if (restore_cpus)
        sched_setaffinity(0, sizeof saved_cpus, &saved_cpus);

    const char *st;
    if (got == (ssize_t)sizeof exec_errno)
        st = "spawn-failed";
    else if (timed_out)
        st = "timeout";
    else if (WIFSIGNALED(status))
        st = "signaled";
    else
        st = "exited";

    printf("{\"status\": \"%s\", ", st);
    if (WIFEXITED(status) && got != (ssize_t)sizeof exec_errno)
        printf("\"exit_code\": %d, ", WEXITSTATUS(status));
    else
        printf("\"exit_code\": null, ");
    if (WIFSIGNALED(status))
        printf("\"signal\": %d, ", WTERMSIG(status));
    else
        printf("\"signal\": null, ");
    printf("\"wall_s\": %.9f, \"user_s\": %.6f, \"sys_s\": %.6f, \"maxrss_kb\": %ld, \"minflt\": %ld, "
           "\"majflt\": %ld, \"nvcsw\": %ld, \"nivcsw\": %ld, ",
           wall, ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6, ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6,
           ru.ru_maxrss, ru.ru_minflt, ru.ru_majflt, ru.ru_nvcsw, ru.ru_nivcsw);
    if (probe_iters)
        printf("\"probe_before_s\": %.9f, \"probe_after_s\": %.9f, ", probe_before, probe_after);
    else
        printf("\"probe_before_s\": null, \"probe_after_s\": null, ");
    printf("\"error\": ");
    if (got == (ssize_t)sizeof exec_errno)
        json_str(strerror(exec_errno));
    else
        printf("null");
    printf("}\n");
    fflush(stdout);
    close(errpipe[0]);
    free(child_env);
    return 0;
}

/* --serve: requests on stdin, each the same arguments as a command line, NUL-terminated, closed by an
 * empty argument; one JSON line back per request. It saves the driver a process start per trial. */
static int serve(void)
{
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    in_server = 1;
    for (;;) {
        len = 0;
        int c, prev = -1;
        while ((c = getchar()) != EOF) {
            if (len + 1 >= cap)
                buf = realloc(buf, cap *= 2);
            buf[len++] = (char)c;
            if (c == 0 && prev == 0)
                break;
            prev = c;
        }
        if (c == EOF)
            return 0;
        int n = 1;
        for (size_t k = 0; k + 1 < len; k++)
            n += buf[k] == 0;
        char **args = calloc((size_t)n + 2, sizeof *args);
        int argc = 0;
        args[argc++] = "heapcost-run";
        for (size_t k = 0; k + 1 < len; k += strlen(buf + k) + 1)
            args[argc++] = buf + k;
        if (setjmp(bad_request) == 0)
            run_request(argc, args);
        else {
            printf("{\"status\": \"spawn-failed\", \"error\": \"malformed request\"}\n");
            fflush(stdout);
        }
        free(args);
    }
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--serve"))
        return serve();
    return run_request(argc, argv);
}
