/* heapcost-lockstep: run two workload processes (A and B) in lockstep on one CPU and report both.
 *
 * Each vCPU of the machine this was made for switches between two speed regimes (~1.7x apart, lasting
 * ~0.5-1 s) independently of the other: two trials run one after the other, or side by side on two
 * CPUs, see different regimes. Here A and B are alive at once, pinned to the same CPU, and take turns
 * of about --chunk-us of their own work under a token passed directly between them through two pipes
 * (workloads/wl_common.h, wl_turn()): both see the same regime, and each counts its own active time.
 * This driver only starts, pins and reaps them; it is not on the token's path.
 *
 * usage: heapcost-lockstep [--cpu N] [--first a|b] [--chunk-us U] [--timeout S] [--no-aslr 1]
 *          [--a-stdout F] [--a-stderr F] [--a-cwd D] [--a-env K=V ...]   (same for --b-*)
 *          -- A_PROG ARGS... -- B_PROG ARGS...
 * Each process gets exactly its --x-env variables plus HEAPCOST_LOCKSTEP_{IN,OUT,READY,CHUNK_US}.
 * The first token is handed out once both processes are loaded and waiting (the READY pipe), so
 * neither's start-up falls into the other's turn. --no-aslr 1 starts both without address-space
 * randomization (personality ADDR_NO_RANDOMIZE), for the bench's layout part only: a fixed layout
 * biases a comparison (bench/README.md). Output: one line of JSON (docs/design.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "child_io.h"

struct proc {
    struct side_io io; /* where it writes, in what it runs (child_io.h) */
    char **argv;
    pid_t pid;
    int status, reaped, exec_errno, errpipe;
    double wall;
    struct rusage ru;
    double active;
    long turns;
};

static struct proc P[2];
static volatile sig_atomic_t timed_out;

static void on_alarm(int sig)
{
    (void)sig;
    timed_out = 1;
    for (int i = 0; i < 2; i++)
        if (P[i].pid > 0 && !P[i].reaped)
            kill(-P[i].pid, SIGKILL);
}

static void usage(void)
{
    fprintf(stderr, "usage: heapcost-lockstep [--cpu N] [--first a|b] [--chunk-us U] [--timeout S] [--no-aslr 1]\n"
                    "         [--a-stdout F] [--a-stderr F] [--a-cwd D] [--a-env K=V ...] (and --b-*)\n"
                    "         -- A_PROG ARGS... -- B_PROG ARGS...\n");
    exit(64);
}

static char *fmt(const char *name, long value)
{
    char *s;
    if (asprintf(&s, "%s=%ld", name, value) < 0)
        exit(70);
    return s;
}

static int no_aslr;

/* The child: pinned, redirected, with only its own end of each pipe open, then exec. */
static void child(struct proc *p, int cpu, int in, int out, int ready, long chunk_us, int errpipe)
{
    int e = no_aslr && personality(ADDR_NO_RANDOMIZE) == -1 ? errno : 0;
    if (!e)
        e = child_setup(cpu, p->io.cwd, p->io.out, p->io.err, 0);
    if (!e) {
        p->io.env[p->io.n_env++] = fmt("HEAPCOST_LOCKSTEP_IN", in);
        p->io.env[p->io.n_env++] = fmt("HEAPCOST_LOCKSTEP_OUT", out);
        p->io.env[p->io.n_env++] = fmt("HEAPCOST_LOCKSTEP_READY", ready);
        p->io.env[p->io.n_env++] = fmt("HEAPCOST_LOCKSTEP_CHUNK_US", chunk_us);
        e = child_exec(p->argv, p->io.env, p->io.n_env);
    }
    ssize_t unused = write(errpipe, &e, sizeof e);
    (void)unused;
    _exit(127);
}

/* The `lockstep active_s=... turns=...` line the workload printed last on its stderr. */
static void read_active(struct proc *p)
{
    p->active = -1;
    p->turns = -1;
    FILE *f = fopen(p->io.err, "r");
    if (!f)
        return;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        double a;
        long t;
        if (sscanf(line, "lockstep active_s=%lf turns=%ld", &a, &t) == 2) {
            p->active = a;
            p->turns = t;
        }
    }
    fclose(f);
}

static void report(const char *name, struct proc *p)
{
    const char *st = p->exec_errno ? "spawn-failed" : timed_out ? "timeout"
                     : WIFSIGNALED(p->status) ? "signaled" : "exited";
    printf("\"%s\": {\"status\": \"%s\", ", name, st);
    if (WIFEXITED(p->status) && !p->exec_errno)
        printf("\"exit_code\": %d, ", WEXITSTATUS(p->status));
    else
        printf("\"exit_code\": null, ");
    if (WIFSIGNALED(p->status))
        printf("\"signal\": %d, ", WTERMSIG(p->status));
    else
        printf("\"signal\": null, ");
    printf("\"wall_s\": %.9f, \"user_s\": %.6f, \"sys_s\": %.6f, \"maxrss_kb\": %ld, \"minflt\": %ld, "
           "\"majflt\": %ld, \"nvcsw\": %ld, \"nivcsw\": %ld, ",
           p->wall, p->ru.ru_utime.tv_sec + p->ru.ru_utime.tv_usec * 1e-6,
           p->ru.ru_stime.tv_sec + p->ru.ru_stime.tv_usec * 1e-6, p->ru.ru_maxrss, p->ru.ru_minflt,
           p->ru.ru_majflt, p->ru.ru_nvcsw, p->ru.ru_nivcsw);
    if (p->active >= 0)
        printf("\"active_s\": %.9f, \"turns\": %ld, ", p->active, p->turns);
    else
        printf("\"active_s\": null, \"turns\": null, ");
    if (p->exec_errno)
        printf("\"error\": \"%s\"}", strerror(p->exec_errno)); /* strerror texts need no escaping */
    else
        printf("\"error\": null}");
}

int main(int argc, char **argv)
{
    int cpu = -1, first = 0;
    long chunk_us = 1000;
    double timeout = 0;
    for (int k = 0; k < 2; k++) {
        if (side_init(&P[k].io, argc, 4) != 0) /* room for the four HEAPCOST_LOCKSTEP_* it adds */
            return 70;
    }
    int i;
    for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
        const char *a = argv[i];
        if (i + 1 >= argc)
            usage();
        const char *v = argv[++i];
        if (!strcmp(a, "--cpu")) cpu = atoi(v);
        else if (!strcmp(a, "--first")) first = !strcmp(v, "b");
        else if (!strcmp(a, "--chunk-us")) chunk_us = atol(v);
        else if (!strcmp(a, "--timeout")) timeout = atof(v);
        else if (!strcmp(a, "--no-aslr")) no_aslr = atoi(v) != 0;
        else if (side_option(&P[0].io, &P[1].io, a, v) != 1)
            usage();
    }
    /* -- A ARGS... -- B ARGS... */
    if (two_commands(argc, argv, i, &P[0].argv, &P[1].argv) != 0)
        usage();

    signal(SIGPIPE, SIG_IGN);
    int tok[2][2], ready[2];
    if (pipe(tok[0]) || pipe(tok[1]) || pipe(ready)) {
        perror("pipe");
        return 70;
    }
    double t0 = now();
    for (int k = 0; k < 2; k++) {
        int errpipe[2];
        if (pipe2(errpipe, O_CLOEXEC)) {
            perror("pipe2");
            return 70;
        }
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 70;
        }
        if (pid == 0) {
            close(errpipe[0]);
            close(tok[k][1]);      /* keep: my token's read end, the peer's write end */
            close(tok[1 - k][0]);
            close(ready[0]);
            child(&P[k], cpu, tok[k][0], tok[1 - k][1], ready[1], chunk_us, errpipe[1]);
        }
        setpgid(pid, pid);
        close(errpipe[1]);
        P[k].pid = pid;
        P[k].errpipe = errpipe[0];
    }
    close(tok[0][0]);
    close(tok[1][0]);
    close(ready[1]);
    if (timeout > 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_alarm;
        sigaction(SIGALRM, &sa, NULL);
        struct itimerval it = {{0, 0}, {(time_t)timeout, (suseconds_t)((timeout - (time_t)timeout) * 1e6)}};
        setitimer(ITIMER_REAL, &it, NULL);
    }
    /* both loaded and waiting (or gone): hand the first token out, then leave the pipes to them */
    char buf[2];
    int got = 0;
    while (got < 2) {
        ssize_t r = read(ready[0], buf, 2 - got);
        if (r > 0) got += (int)r;
        else if (r == 0 || errno != EINTR) break;
    }
    close(ready[0]);
    ssize_t unused = write(tok[first][1], "t", 1);
    (void)unused;
    close(tok[0][1]);
    close(tok[1][1]);

    for (int left = 2; left > 0;) {
        int status;
        struct rusage ru;
        pid_t pid = wait4(-1, &status, 0, &ru);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (int k = 0; k < 2; k++)
            if (pid == P[k].pid && !P[k].reaped) {
                P[k].reaped = 1;
                P[k].status = status;
                P[k].ru = ru;
                P[k].wall = now() - t0;
                kill(-pid, SIGKILL); /* nothing of the trial may outlive it */
                left--;
            }
    }
    double wall = now() - t0;
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    for (int k = 0; k < 2; k++) {
        if (read(P[k].errpipe, &P[k].exec_errno, sizeof P[k].exec_errno) != (ssize_t)sizeof(int))
            P[k].exec_errno = 0;
        close(P[k].errpipe);
        read_active(&P[k]);
    }
    printf("{\"first\": \"%s\", \"cpu\": %d, \"chunk_us\": %ld, \"wall_s\": %.9f, ", first ? "b" : "a", cpu,
           chunk_us, wall);
    report("a", &P[0]);
    printf(", ");
    report("b", &P[1]);
    printf("}\n");
    fflush(stdout);
    return 0;
}
