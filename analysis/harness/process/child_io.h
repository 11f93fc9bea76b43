/* What the drivers that start a measured child (launcher.c, lockstep.c, alternate.c) share: the monotonic
 * clock, a standard stream redirected to a file, and a forked child's set-up and exec; and what the two
 * drivers of two commands (lockstep.c, alternate.c) share: each side's options and the two commands on their
 * command line. Needs _GNU_SOURCE (sched_setaffinity, execvpe) defined before the first include. */
#ifndef HEAPCOST_CHILD_IO_H
#define HEAPCOST_CHILD_IO_H
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline int redirect(const char *path, int fd, int flags)
{
    int f = open(path, flags, 0644);
    if (f < 0)
        return -1;
    if (f != fd) {
        dup2(f, fd);
        close(f);
    }
    return 0;
}

/* In a forked child, before its exec: a process group of its own, pinned to `cpu` (when >= 0), in `cwd` (when
 * not NULL), stdin from /dev/null, stdout to `out` (truncated), stderr to `err` (appended when `err_append`,
 * else truncated), no core files. 0, or the errno of the first step that failed. */
static inline int child_setup(int cpu, const char *cwd, const char *out, const char *err, int err_append)
{
    setpgid(0, 0);
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0)
            return errno;
    }
    if (cwd && chdir(cwd) != 0)
        return errno;
    if (redirect("/dev/null", 0, O_RDONLY) != 0)
        return errno;
    if (redirect(out, 1, O_WRONLY | O_CREAT | O_TRUNC) != 0)
        return errno;
    if (redirect(err, 2, O_WRONLY | O_CREAT | (err_append ? O_APPEND : O_TRUNC)) != 0)
        return errno;
    struct rlimit nocore = {0, 0};
    setrlimit(RLIMIT_CORE, &nocore);
    return 0;
}

/* Exec `argv` with exactly the `n_env` variables of `env` (NULL-terminated here: env has room for one more),
 * the program looked up in that environment's own PATH. Returns only on failure, with its errno. */
static inline int child_exec(char **argv, char **env, int n_env)
{
    env[n_env] = NULL;
    for (int k = 0; k < n_env; k++)
        if (!strncmp(env[k], "PATH=", 5))
            setenv("PATH", env[k] + 5, 1);
    execvpe(argv[0], argv, env);
    return errno;
}

/* Where a side's child writes and in what it runs, as a driver of two commands takes them: --a-stdout FILE,
 * --a-stderr FILE, --a-cwd DIR and --a-env NAME=VALUE (repeatable), and the same with --b-. */
struct side_io {
    const char *out, *err, *cwd;
    char **env;  /* room for every --env the command line can give, `spare` more and the closing NULL */
    int n_env;
};

/* A side's defaults: output to /dev/null, no variable yet, room for `spare` variables of the driver's own.
 * 0, or -1 when memory runs out. */
static inline int side_init(struct side_io *io, int argc, int spare)
{
    io->out = io->err = "/dev/null";
    io->cwd = NULL;
    io->n_env = 0;
    io->env = calloc((size_t)argc + (size_t)spare + 1, sizeof(char *));
    return io->env ? 0 : -1;
}

/* Option `opt` with its value `v`: 1 when it is a side's option (kept in side a's or b's io), 0 when it names
 * no side, -1 when it names a side (--a-..., --b-...) but no option a side has. */
static inline int side_option(struct side_io *a, struct side_io *b, const char *opt, const char *v)
{
    if (strncmp(opt, "--a-", 4) && strncmp(opt, "--b-", 4))
        return 0;
    struct side_io *s = opt[2] == 'b' ? b : a;
    if (!strcmp(opt + 4, "stdout")) s->out = v;
    else if (!strcmp(opt + 4, "stderr")) s->err = v;
    else if (!strcmp(opt + 4, "cwd")) s->cwd = v;
    else if (!strcmp(opt + 4, "env")) s->env[s->n_env++] = (char *)v;
    else return -1;
    return 1;
}

/* The two commands of `-- A ARGS... -- B ARGS...`, argv[i] being the first "--": A's and B's argv, each
 * NULL-terminated in place (the second "--" becomes A's end). 0, or -1 when either command is missing. */
static inline int two_commands(int argc, char **argv, int i, char ***a, char ***b)
{
    if (i >= argc - 1)
        return -1;
    int j;
    for (j = i + 1; j < argc && strcmp(argv[j], "--"); j++)
        ;
    if (j == i + 1 || j >= argc - 1)
        return -1;
    argv[j] = NULL;
    *a = argv + i + 1;
    *b = argv + j + 1;
    return 0;
}

#endif
