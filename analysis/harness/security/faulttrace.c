/* faulttrace: runs a statically linked technique program (analysis/harness/security/techniques.py: how2heap's programs built
 * against musl) under ptrace and records where a fault or a trap was raised, as the preloaded faultwhere.c does for
 * a dynamically linked one (no LD_PRELOAD reaches a static program). Usage: faulttrace PROGRAM [ARGS...].
 *
 * When the program is about to receive SIGSEGV, SIGBUS, SIGILL, SIGTRAP or SIGFPE, one line goes to stderr (the
 * program's own stderr), faultwhere's line with the first bytes of the faulting instruction added:
 *
 *   heapcost-technique: signal sig=<n> code=<si_code> addr=<hex> pc=<hex> object=<path or -> insn=<hex bytes>
 *
 * (object: the file mapped at pc, from /proc/<pid>/maps; insn: 8 bytes at pc, so that musl's deliberate crash,
 * a_crash's privileged `hlt` (f4), is told from a fault at a bad address). The signal is then delivered, and
 * faulttrace ends as the program did: the same exit status, or the same signal raised on itself (no core: the
 * launcher's RLIMIT_CORE is 0). Only the program's first thread is traced (how2heap's programs have one).
 * When ptrace is refused, it says so on stderr in a line of its own and exits with status 126 without running
 * the program.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#define REFUSED 126

static int is_fault(int sig)
{
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGTRAP || sig == SIGFPE;
}

/* the path of the file mapped at `pc` in the process, or "-" */
static void object_at(pid_t pid, uintptr_t pc, char *out, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    snprintf(out, size, "-");
    FILE *maps = fopen(path, "r");
    if (!maps)
        return;
    char line[4096];
    while (fgets(line, sizeof line, maps)) {
        unsigned long lo, hi;
        int name_at = 0;
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &name_at) < 2 || pc < lo || pc >= hi)
            continue;
        char *name = line + name_at;
        name[strcspn(name, "\n")] = 0;
        if (name_at && *name)
            snprintf(out, size, "%s", name);
        break;
    }
    fclose(maps);
}

static void record(pid_t pid, int sig)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    ptrace(PTRACE_GETSIGINFO, pid, 0, &si);
    uintptr_t pc = 0;
#if defined(__x86_64__)
    struct user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, pid, 0, &regs) == 0)
        pc = (uintptr_t)regs.rip;
#endif
    char object[4096];
    object_at(pid, pc, object, sizeof object);
    char insn[17] = "-";
    if (pc) {
        errno = 0;
        long word = ptrace(PTRACE_PEEKTEXT, pid, (void *)pc, 0);
        if (errno == 0) {
            unsigned char bytes[sizeof word];
            memcpy(bytes, &word, sizeof word);
            for (size_t i = 0; i < sizeof word; i++)
                snprintf(insn + 2 * i, 3, "%02x", bytes[i]);
        }
    }
    fprintf(stderr, "\nheapcost-technique: signal sig=%d code=%d addr=0x%lx pc=0x%lx object=%s insn=%s\n", sig,
            si.si_code, (unsigned long)(uintptr_t)si.si_addr, (unsigned long)pc, object, insn);
    fflush(stderr);
}

static void end_as(int status)
{
    if (WIFEXITED(status))
        exit(WEXITSTATUS(status));
    int sig = WTERMSIG(status);
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    exit(128 + sig);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: faulttrace PROGRAM [ARGS...]\n");
        return 2;
    }
    int ready[2];
    if (pipe(ready) != 0) {
        perror("faulttrace: pipe");
        return REFUSED;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("faulttrace: fork");
        return REFUSED;
    }
    if (pid == 0) {
        close(ready[0]);
        if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0) {
            char c = 1;
            ssize_t w = write(ready[1], &c, 1);
            (void)w;
            _exit(REFUSED);
        }
        close(ready[1]);
        execv(argv[1], argv + 1);
        fprintf(stderr, "heapcost-technique: faulttrace: cannot run %s: %s\n", argv[1], strerror(errno));
        _exit(127);
    }
    close(ready[1]);
    char c;
    if (read(ready[0], &c, 1) == 1) { /* the child could not be traced */
        int status;
        waitpid(pid, &status, 0);
        fprintf(stderr, "heapcost-technique: faulttrace: ptrace refused: a fault in a statically linked program "
                        "cannot be located here\n");
        return REFUSED;
    }
    close(ready[0]);
    int execed = 0;
    for (;;) {
        int status;
        if (waitpid(pid, &status, 0) < 0) {
            if (errno == EINTR)
                continue;
            perror("faulttrace: waitpid");
            return REFUSED;
        }
        if (WIFEXITED(status) || WIFSIGNALED(status))
            end_as(status);
        if (!WIFSTOPPED(status))
            continue;
        int sig = WSTOPSIG(status);
        if (sig == SIGTRAP && !execed) { /* the stop after execve */
            execed = 1;
            ptrace(PTRACE_SETOPTIONS, pid, 0, (void *)(long)PTRACE_O_EXITKILL);
            sig = 0;
        } else if (is_fault(sig)) {
            record(pid, sig);
        }
        ptrace(PTRACE_CONT, pid, 0, (void *)(long)sig);
    }
}
