/* faultwhere: preloaded into a brought technique program (analysis/harness/security/techniques.py), it interposes
 * nothing; its constructor installs a handler for the fatal signals a fault or a trap raises (SIGSEGV, SIGBUS,
 * SIGILL, SIGTRAP, SIGFPE) that writes one line to stderr naming the object the faulting instruction is in:
 *
 *   heapcost-technique: signal sig=<n> code=<si_code> addr=<hex> pc=<hex> object=<path or ->
 *
 * and then dies of the same signal, so the exit status stays the signal. An allocator that stops a program by
 * faulting on purpose without a message (mozjemalloc's release assertions write to address 0) is told from a
 * crash in the program's own code by that object. SIGABRT is not recorded: its pc is in libc's raise, and the
 * allocators that abort print their message first. Uses no malloc of its own.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

static char altstack[1 << 16] __attribute__((aligned(16)));
static char line[1024];
static size_t used;

static void put(const char *s)
{
    while (*s && used < sizeof line - 2)
        line[used++] = *s++;
}

static void put_dec(long v)
{
    char buf[24];
    int n = 0;
    unsigned long u = v < 0 ? (unsigned long)(-v) : (unsigned long)v;
    if (v < 0)
        put("-");
    do {
        buf[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u && n < (int)sizeof buf);
    while (n)
        line[used < sizeof line - 2 ? used++ : used] = buf[--n];
}

static void put_hex(uintptr_t v)
{
    char buf[20];
    int n = 0;
    put("0x");
    do {
        buf[n++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v && n < (int)sizeof buf);
    while (n)
        line[used < sizeof line - 2 ? used++ : used] = buf[--n];
}

static void on_fault(int sig, siginfo_t *si, void *ctx)
{
    uintptr_t pc = 0;
    ucontext_t *uc = (ucontext_t *)ctx;
#if defined(__x86_64__)
    pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    pc = (uintptr_t)uc->uc_mcontext.pc;
#else
    (void)uc;
#endif
    const char *object = "-";
    Dl_info info;
    /* dladdr is not async-signal-safe (the loader's lock); the process is dying: at worst the line is lost */
    if (pc && dladdr((void *)pc, &info) && info.dli_fname)
        object = info.dli_fname[0] ? info.dli_fname : "(main program)";
    used = 0;
    put("\nheapcost-technique: signal sig=");
    put_dec(sig);
    put(" code=");
    put_dec(si ? si->si_code : 0);
    put(" addr=");
    put_hex(si ? (uintptr_t)si->si_addr : 0);
    put(" pc=");
    put_hex(pc);
    put(" object=");
    put(object);
    line[used++] = '\n';
    ssize_t w = write(2, line, used);
    (void)w;
    static struct sigaction dfl; /* zeroed */
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    _exit(128 + sig);
}

__attribute__((constructor)) static void faultwhere_init(void)
{
    stack_t ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_sp = altstack;
    ss.ss_size = sizeof altstack;
    sigaltstack(&ss, NULL);
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGFPE};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fault;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}
