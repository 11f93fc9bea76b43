/* Shared runtime of the heap-misuse probes: the reporting protocol, the fault recorder, and the
 * checking helpers. probes/README.md describes the protocol; analysis/probe_verdict.py reads it.
 *
 * Protocol:
 *   argv    probe <size> [extra...]: the block size the misuse works on (each probe has a default);
 *   stderr  "heapcost-probe: stage=<name>" as each stage is reached, in this order where it applies:
 *           setup-done, misuse-done, primitive (only when achieved), checked, done; and before
 *           setup-done, "stage=legal-request what=<request>" then "stage=legal-request-done" around a
 *           legal request the misuse needs that a strict allocator may refuse (probe_legal_malloc);
 *   stderr  "heapcost-probe: target lo=<hex> hi=<hex>" before setup-done: memory [lo, hi) that the
 *           misusing access itself touches (a fault there, before misuse-done, is a fault at the misuse);
 *   stderr  "heapcost-probe: signal sig=<n> code=<si_code> addr=<hex|-> pc=<hex> object=<path|->
 *           stage=<last stage|-> call=<allocator entry point in progress|-> sym=<symbol|->" from the fault
 *           recorder (SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGFPE, SIGABRT, and SIGALRM from the hang
 *           watchdog, whose record ends " hang=stall" when one allocator call stopped returning or
 *           " hang=deadline" when the probe outlived PROBE_ALARM_SECONDS), after which the signal is
 *           re-raised with its default action;
 *   stderr  "heapcost-probe: setup-failed <why>" and exit 99 when the probe could not set itself up;
 *   stdout  "result worked=0|1 size=<bytes> [step=<n>] key=value..." once the primitive has been tried,
 *           or "result worked=0 applicable=0 size=<bytes> reason=<word>" where the misuse means nothing
 *           at this size (exit 0).
 * Markers go to stderr, the allocator's own channel, so a report the allocator prints can be placed
 * between them. Everything is written with write(2) from static buffers: no stdio buffering that a
 * crash could lose.
 *
 * THE NO-ALLOCATION RULE: once setup-done is printed, nothing in this file and nothing in a probe's
 * checking code may allocate, except the allocations that are the probe's subject (the misuse, the
 * hunt's allocations, and probe_go_on after "checked"). The heap may be corrupt by then, and an
 * allocation of our own could crash or be the thing that "finds" the primitive. So: static buffers,
 * our own sort (no qsort: glibc's allocates for larger arrays), byte loops through volatile pointers
 * instead of memset/memcpy/memcmp on heap memory (they live in libc, which under glibc is also the
 * allocator's object, and a fault in them would be blamed on the allocator), and snprintf only with
 * integer and string conversions (neither glibc's nor musl's allocates for those).
 */
#ifndef HEAPCOST_PROBE_H
#define HEAPCOST_PROBE_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>

#define PROBE_SETUP_FAILED 99
#define PROBE_UNUSED __attribute__((unused))

/* A memory cap on the probe itself. The sandbox's address-space limit must stay loose, because
 * hardened allocators reserve hundreds of GiB of inaccessible address space up front; RLIMIT_DATA
 * counts only writable private memory, which is what a runaway probe would use. */
#define PROBE_DATA_LIMIT ((rlim_t)2 << 30)
/* The hang watchdog ticks every PROBE_TICK_MS. A probe is hung when one allocator call has been in
 * progress for PROBE_STALL_TICKS ticks (an allocator looping on a corrupt free list: found in about a
 * second), or when it is still running after PROBE_ALARM_SECONDS however busy it is (the runner's
 * timeout must be longer; HEAPCOST_PROBE_ALARM=<seconds>, 1 to 600, overrides it). Telling a stuck call
 * from a slow probe matters: under efence and duma a 100,000-allocation hunt takes seconds, each call
 * returning in microseconds, and a plain deadline would call that slowness a hang. */
#define PROBE_TICK_MS 250
#define PROBE_STALL_TICKS 6
#define PROBE_ALARM_SECONDS 20

/* ------------------------------------------------------------------------------ async-signal-safe text */
struct probe_text {
    char buf[1024];
    size_t n;
};

static void pt_str(struct probe_text *t, const char *s)
{
    if (!s)
        s = "-";
    while (*s && t->n < sizeof t->buf - 2)
        t->buf[t->n++] = *s++;
}

static void pt_hex(struct probe_text *t, uintptr_t v)
{
    char tmp[2 + 2 * sizeof v];
    size_t k = 0;
    do {
        tmp[k++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    pt_str(t, "0x");
    while (k && t->n < sizeof t->buf - 2)
        t->buf[t->n++] = tmp[--k];
}

static void pt_dec(struct probe_text *t, long v)
{
    char tmp[24];
    size_t k = 0;
    unsigned long u = v < 0 ? 0ul - (unsigned long)v : (unsigned long)v;
    do {
        tmp[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        pt_str(t, "-");
    while (k && t->n < sizeof t->buf - 2)
        t->buf[t->n++] = tmp[--k];
}

static void pt_flush(struct probe_text *t, int fd)
{
    t->buf[t->n++] = '\n';
    size_t off = 0;
    while (off < t->n) {
        ssize_t w = write(fd, t->buf + off, t->n - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    t->n = 0;
}

/* ------------------------------------------------------------------------------ stages and calls */
/* The last stage reached and the allocator entry point in progress, read by the fault recorder. */
static const char *volatile probe_stage_now = "-";
static volatile sig_atomic_t probe_call_now = 0;
/* Allocator calls begun so far: the hang watchdog's sign of progress. */
static volatile sig_atomic_t probe_call_seq = 0;

enum { PC_NONE, PC_MALLOC, PC_FREE, PC_CALLOC, PC_REALLOC, PC_NEW, PC_DELETE, PC_COUNT };

PROBE_UNUSED static inline void probe_call_begin(int call)
{
    probe_call_seq = probe_call_seq + 1;
    probe_call_now = call;
}

PROBE_UNUSED static inline void probe_call_end(void)
{
    probe_call_now = PC_NONE;
}
static const char *const probe_call_names[PC_COUNT] = {"-", "malloc", "free", "calloc", "realloc",
                                                       "operator-new", "operator-delete"};
/* The object holding each entry point, resolved before main (dlsym of the name the probe links to). */
static char probe_call_object[PC_COUNT][512];
static char probe_exe[512] = "-";

/* "heapcost-probe: stage=<stage>[ what=<what>]" (what: one word, no spaces). */
static void probe_mark_what(const char *stage, const char *what)
{
    static struct probe_text t;
    probe_stage_now = stage;
    t.n = 0;
    pt_str(&t, "heapcost-probe: stage=");
    pt_str(&t, stage);
    if (what) {
        pt_str(&t, " what=");
        pt_str(&t, what);
    }
    pt_flush(&t, 2);
}

static void probe_mark(const char *stage)
{
    probe_mark_what(stage, NULL);
}

/* Declare memory the misusing access touches: a fault there before misuse-done is a fault at the misuse. */
PROBE_UNUSED static void probe_target(const void *lo, const void *hi)
{
    static struct probe_text t;
    t.n = 0;
    pt_str(&t, "heapcost-probe: target lo=");
    pt_hex(&t, (uintptr_t)lo);
    pt_str(&t, " hi=");
    pt_hex(&t, (uintptr_t)hi);
    pt_flush(&t, 2);
}

/* ------------------------------------------------------------------------------ the fault recorder */
static char probe_altstack[1 << 16] __attribute__((aligned(16)));

static const char *probe_object_of(uintptr_t pc, const char **sym)
{
    extern char __executable_start[] __attribute__((weak));
    extern char etext[] __attribute__((weak));
    Dl_info info;
    *sym = "-";
    /* dladdr is not on the async-signal-safe list (it takes the loader's lock). The process is dying
     * anyway: the worst case is that this line is lost, and the exit status still tells the signal. */
    if (pc && dladdr((void *)pc, &info) && info.dli_fname) {
        if (info.dli_sname && info.dli_sname[0])
            *sym = info.dli_sname;
        if (info.dli_fname[0])
            return info.dli_fname;
        return probe_exe; /* glibc names the main program "" */
    }
    /* A static binary (the musl variant): dladdr knows nothing, but the text bounds are linker symbols. */
    if (__executable_start && etext && pc >= (uintptr_t)__executable_start && pc < (uintptr_t)etext)
        return probe_exe;
    return "-";
}

static const char *volatile probe_hang_kind = "-"; /* stall | deadline, on the SIGALRM record */

static void probe_on_signal(int sig, siginfo_t *si, void *ctx)
{
    static struct probe_text t;
    uintptr_t pc = 0;
    ucontext_t *uc = (ucontext_t *)ctx;
#if defined(__x86_64__)
    pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    pc = (uintptr_t)uc->uc_mcontext.pc;
#else
    (void)uc;
#endif
    int call = probe_call_now;
    const char *sym = "-", *object;
    if (sig == SIGABRT) {
        /* The pc is in libc's raise: record the object of abort's caller instead, which is the
         * allocator entry point the probe was inside, if any ("-" when the probe was in its own code). */
        object = call > PC_NONE && call < PC_COUNT && probe_call_object[call][0] ? probe_call_object[call] : "-";
    } else {
        object = probe_object_of(pc, &sym);
    }
    t.n = 0;
    pt_str(&t, "heapcost-probe: signal sig=");
    pt_dec(&t, sig);
    pt_str(&t, " code=");
    pt_dec(&t, si ? si->si_code : 0);
    pt_str(&t, " addr=");
    if (sig == SIGABRT || !si)
        pt_str(&t, "-");
    else
        pt_hex(&t, (uintptr_t)si->si_addr);
    pt_str(&t, " pc=");
    pt_hex(&t, pc);
    pt_str(&t, " object=");
    pt_str(&t, object);
    pt_str(&t, " stage=");
    pt_str(&t, probe_stage_now);
    pt_str(&t, " call=");
    pt_str(&t, call >= 0 && call < PC_COUNT ? probe_call_names[call] : "-");
    pt_str(&t, " sym=");
    pt_str(&t, sym);
    if (sig == SIGALRM) {
        pt_str(&t, " hang=");
        pt_str(&t, probe_hang_kind);
    }
    pt_flush(&t, 2);
    /* Die of the same signal, so the exit status stays the signal. */
    static struct sigaction dfl; /* zeroed, and no libc string function in the handler */
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

static unsigned probe_deadline_ticks = PROBE_ALARM_SECONDS * 1000 / PROBE_TICK_MS;

static void probe_on_tick(int sig, siginfo_t *si, void *ctx)
{
    static unsigned ticks, still;
    static sig_atomic_t last_seq = -1;
    sig_atomic_t seq = probe_call_seq;
    ticks++;
    still = probe_call_now != PC_NONE && seq == last_seq ? still + 1 : 0;
    last_seq = seq;
    if (still >= PROBE_STALL_TICKS || ticks >= probe_deadline_ticks) {
        probe_hang_kind = still >= PROBE_STALL_TICKS ? "stall" : "deadline";
        struct itimerval off;
        memset(&off, 0, sizeof off);
        setitimer(ITIMER_REAL, &off, NULL);
        probe_on_signal(sig, si, ctx);
    }
}

static void probe_resolve_call(int call, const char *name)
{
    void *f = dlsym(RTLD_DEFAULT, name);
    Dl_info info;
    const char *obj = "";
    if (f && dladdr(f, &info) && info.dli_fname)
        obj = info.dli_fname[0] ? info.dli_fname : probe_exe;
    else if (!f)
        obj = probe_exe; /* static binary: the allocator is linked into the executable */
    /* operator new/delete from the C++ runtime only forward to malloc/free: name the allocator's object. */
    if ((call == PC_NEW || call == PC_DELETE) && strstr(obj, "libstdc++"))
        obj = probe_call_object[call == PC_NEW ? PC_MALLOC : PC_FREE];
    snprintf(probe_call_object[call], sizeof probe_call_object[call], "%s", obj);
}

/* Does malloc_usable_size belong to the allocator? Only when it resolves into the object that holds
 * malloc. dlsym(RTLD_DEFAULT) finds the definitions the probe's calls bind to (a preloaded library's,
 * else libc's); the address of the function itself could be the executable's PLT entry. In a static
 * binary (the musl variant) dlsym and dladdr know nothing: musl defines both, so it is asked. */
static int probe_usable_size_own = 1;

static void probe_resolve_usable_size(void)
{
    void *m = dlsym(RTLD_DEFAULT, "malloc"), *u = dlsym(RTLD_DEFAULT, "malloc_usable_size");
    Dl_info mi, ui;
    if (m && u && dladdr(m, &mi) && dladdr(u, &ui))
        probe_usable_size_own = mi.dli_fbase == ui.dli_fbase;
}

__attribute__((constructor)) static void probe_init(void)
{
    struct rlimit r = {PROBE_DATA_LIMIT, PROBE_DATA_LIMIT};
    setrlimit(RLIMIT_DATA, &r);
    ssize_t n = readlink("/proc/self/exe", probe_exe, sizeof probe_exe - 1);
    probe_exe[n > 0 ? n : 0] = 0;
    if (n <= 0)
        strcpy(probe_exe, "-");
    probe_resolve_call(PC_MALLOC, "malloc");
    probe_resolve_call(PC_FREE, "free");
    probe_resolve_call(PC_CALLOC, "calloc");
    probe_resolve_call(PC_REALLOC, "realloc");
    probe_resolve_call(PC_NEW, "_Znwm");
    probe_resolve_call(PC_DELETE, "_ZdlPv");
    probe_resolve_usable_size();
    stack_t ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_sp = probe_altstack;
    ss.ss_size = sizeof probe_altstack;
    sigaltstack(&ss, NULL);
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGFPE, SIGABRT, SIGALRM};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = sigs[i] == SIGALRM ? probe_on_tick : probe_on_signal;
        /* the ticks must not cut short the probe's own system calls */
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | (sigs[i] == SIGALRM ? SA_RESTART : 0);
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
    /* A hang (an allocator looping on a corrupt free list) ends in SIGALRM with the stage and the
     * entry point it hung in, before the runner's own timeout kills the process without a word. */
    unsigned seconds = PROBE_ALARM_SECONDS;
    const char *env = getenv("HEAPCOST_PROBE_ALARM");  /* getenv reads environ: no allocation */
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == 0 && v >= 1 && v <= 600)
            seconds = (unsigned)v;
    }
    probe_deadline_ticks = seconds * 1000 / PROBE_TICK_MS;
    struct itimerval tick;
    tick.it_interval.tv_sec = 0;
    tick.it_interval.tv_usec = PROBE_TICK_MS * 1000;
    tick.it_value = tick.it_interval;
    setitimer(ITIMER_REAL, &tick, NULL);
}

/* ------------------------------------------------------------------------------ allocator calls */
/* Every call into the allocator goes through these, so a fault can name the entry point in progress. */
PROBE_UNUSED static void *pmalloc(size_t n)
{
    probe_call_begin(PC_MALLOC);
    void *p = malloc(n);
    probe_call_end();
    return p;
}

PROBE_UNUSED static void pfree(void *p)
{
    probe_call_begin(PC_FREE);
    free(p);
    probe_call_end();
}

PROBE_UNUSED static void *pcalloc(size_t n, size_t size)
{
    probe_call_begin(PC_CALLOC);
    void *p = calloc(n, size);
    probe_call_end();
    return p;
}

PROBE_UNUSED static void *prealloc(void *p, size_t n)
{
    probe_call_begin(PC_REALLOC);
    void *q = realloc(p, n);
    probe_call_end();
    return q;
}

/* ------------------------------------------------------------------------------ reporting */
static char probe_line[1 << 16];

static void probe_write(int fd, const char *fmt, va_list ap)
{
    int n = vsnprintf(probe_line, sizeof probe_line - 1, fmt, ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof probe_line - 2)
        n = sizeof probe_line - 2;
    probe_line[n++] = '\n';
    size_t off = 0;
    while (off < (size_t)n) {
        ssize_t w = write(fd, probe_line + off, (size_t)n - off);
        if (w <= 0)
            return;
        off += (size_t)w;
    }
}

/* The result line (stdout), then the "checked" marker. */
__attribute__((format(printf, 1, 2))) static void probe_result(const char *fmt, ...)
{
    static char fmt2[512];
    snprintf(fmt2, sizeof fmt2, "result %s", fmt);
    va_list ap;
    va_start(ap, fmt);
    probe_write(1, fmt2, ap);
    va_end(ap);
    probe_mark("checked");
}

__attribute__((noreturn, format(printf, 1, 2))) static void probe_setup_failed(const char *fmt, ...)
{
    static char fmt2[512];
    snprintf(fmt2, sizeof fmt2, "heapcost-probe: setup-failed %s", fmt);
    va_list ap;
    va_start(ap, fmt);
    probe_write(2, fmt2, ap);
    va_end(ap);
    _exit(PROBE_SETUP_FAILED);
}

/* The misuse means nothing at this size: say so and end normally. `reason` must be one word. */
__attribute__((noreturn)) PROBE_UNUSED static void probe_not_applicable(size_t size, const char *reason)
{
    probe_result("worked=0 applicable=0 size=%zu reason=%s", size, reason);
    probe_mark("done");
    _exit(0);
}

/* The block size from argv[1] (or the default), within [1, 64 MiB]. */
PROBE_UNUSED static size_t probe_size(int argc, char **argv, size_t dflt)
{
    if (argc < 2)
        return dflt;
    char *end = NULL;
    unsigned long long v = strtoull(argv[1], &end, 0);
    if (!end || *end || v < 1 || v > (64ull << 20))
        probe_setup_failed("size %s: expected a number of bytes in [1, 67108864]", argv[1]);
    return (size_t)v;
}

/* Hide a pointer's origin from the compiler, so no misuse is folded away or rewritten. */
static inline void *launder(void *p)
{
    __asm__ volatile("" : "+r"(p));
    return p;
}

static inline size_t launder_size(size_t n)
{
    __asm__ volatile("" : "+r"(n));
    return n;
}

PROBE_UNUSED static void *xmalloc(size_t n)
{
    void *p = pmalloc(n);
    if (!p)
        probe_setup_failed("malloc(%zu) returned NULL", n);
    return p;
}

/* The usable size of a block of `requested` bytes. malloc_usable_size is asked only when it belongs to
 * the allocator (probe_usable_size_own): an allocator that does not define it (efence, duma, dmalloc)
 * leaves glibc's, which reads a chunk header the block does not have, and faults where the block
 * starts at a page boundary after an inaccessible page (efence and duma at 256 KiB); the requested
 * size is used instead. A value outside [requested, requested + slack] is not believed either. */
PROBE_UNUSED static size_t usable_size(void *p, size_t requested, size_t slack)
{
    if (!probe_usable_size_own)
        return requested;
    size_t u = malloc_usable_size(p);
    return u >= requested && u <= requested + slack ? u : requested;
}

/* A legal request the misuse needs, made between "legal-request what=<what>" and "legal-request-done":
 * a strict allocator may refuse it as a likely bug (efence aborts on malloc(0)). A refusal is then told
 * from a failure to start: the allocator stopped the misuse before it could be committed. */
PROBE_UNUSED static void *probe_legal_malloc(size_t n, const char *what)
{
    probe_mark_what("legal-request", what);
    void *p = pmalloc(n);
    probe_mark("legal-request-done");
    return p;
}

/* Memory no allocator handed out: the target of wild frees, forged chunks and poisoned links.
 * Large enough to hold a forged chunk of the largest size the runner uses (256 KiB) twice. */
#define PROBE_STATIC_AREA (1u << 20)
static unsigned char probe_static_area[PROBE_STATIC_AREA] __attribute__((aligned(4096)));

PROBE_UNUSED static int in_static_area(const void *p)
{
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)probe_static_area;
    return a >= lo && a < lo + sizeof probe_static_area;
}

PROBE_UNUSED static int ranges_overlap(const void *a, size_t na, const void *b, size_t nb)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + nb && y < x + na;
}

/* Byte loops through volatile pointers: a freed block is read and written as is, and no libc
 * string function runs on heap memory (see the rule above). */
PROBE_UNUSED static size_t count_bytes(const void *p, size_t from, size_t to, unsigned char c)
{
    const volatile unsigned char *b = (const volatile unsigned char *)p;
    size_t n = 0;
    for (size_t i = from; i < to; i++)
        n += b[i] == c;
    return n;
}

PROBE_UNUSED static void fill_bytes(void *p, size_t from, size_t to, unsigned char c)
{
    volatile unsigned char *b = (volatile unsigned char *)p;
    for (size_t i = from; i < to; i++)
        b[i] = c;
}

/* ------------------------------------------------------------------------------ overlaps, own sort */
/* Shellsort of (address, size) pairs by address, in place: no allocation (qsort may allocate). */
static void probe_sort_pairs(uintptr_t *pairs, size_t m)
{
    static const size_t gaps[] = {701, 301, 132, 57, 23, 10, 4, 1};
    for (size_t g = 0; g < sizeof gaps / sizeof gaps[0]; g++) {
        size_t gap = gaps[g];
        for (size_t i = gap; i < m; i++) {
            uintptr_t a = pairs[2 * i], s = pairs[2 * i + 1];
            size_t j = i;
            for (; j >= gap && pairs[2 * (j - gap)] > a; j -= gap) {
                pairs[2 * j] = pairs[2 * (j - gap)];
                pairs[2 * j + 1] = pairs[2 * (j - gap) + 1];
            }
            pairs[2 * j] = a;
            pairs[2 * j + 1] = s;
        }
    }
}

/* Do any two of n live blocks [ptr, ptr+size) share memory? Returns the number of overlapping pairs
 * between neighbours in address order (duplicates included). Allocates nothing. */
PROBE_UNUSED static size_t count_overlaps(void **blocks, const size_t *sizes, size_t n)
{
    static uintptr_t pairs[2 * 4096];
    if (n > 4096)
        n = 4096;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!blocks[i])
            continue;
        pairs[2 * m] = (uintptr_t)blocks[i];
        pairs[2 * m + 1] = sizes[i];
        m++;
    }
    probe_sort_pairs(pairs, m);
    size_t overlaps = 0;
    for (size_t i = 0; i + 1 < m; i++)
        overlaps += pairs[2 * i] + pairs[2 * i + 1] > pairs[2 * (i + 1)];
    return overlaps;
}

/* ------------------------------------------------------------------------------ live blocks and the hunt */
/* Blocks the probe holds live (neighbours, the victim still in use): a later allocation overlapping
 * one of them is the primitive "two live blocks share memory". */
#define PROBE_LIVE_MAX 256
static void *probe_live_ptr[PROBE_LIVE_MAX];
static size_t probe_live_size[PROBE_LIVE_MAX];
static size_t probe_live_n;

PROBE_UNUSED static void probe_live_add(void *p, size_t size)
{
    if (p && probe_live_n < PROBE_LIVE_MAX) {
        probe_live_ptr[probe_live_n] = p;
        probe_live_size[probe_live_n++] = size;
    }
}

/* Allocate `n` live neighbours of `size` (the busy heap a real program has) and keep them. */
#define PROBE_NEIGHBOURS 32
PROBE_UNUSED static void probe_neighbours(size_t size, int n)
{
    for (int i = 0; i < n; i++)
        probe_live_add(xmalloc(size), size);
}

#define PROBE_WINDOW 100000ul /* allocations a hunt makes at most */
/* The size-mismatch hunts request blocks several times the misused size: at 256 KiB a 100,000-allocation
 * hunt moves 100 GiB through the allocator, 10-20 s a process under duma or dmalloc. Their window is
 * bounded by bytes as well, never below PROBE_WINDOW_MIN allocations. */
#define PROBE_WINDOW_BYTES (4ul << 30)
#define PROBE_WINDOW_MIN 4096ul

PROBE_UNUSED static unsigned long probe_window_for(size_t request)
{
    unsigned long by_bytes = PROBE_WINDOW_BYTES / (request ? request : 1);
    return by_bytes >= PROBE_WINDOW ? PROBE_WINDOW : by_bytes <= PROBE_WINDOW_MIN ? PROBE_WINDOW_MIN : by_bytes;
}
#define PROBE_RING 64         /* blocks a hunt keeps live at once (the oldest is freed for the next) */
#define PROBE_PINNED 64

struct probe_hunt {
    size_t size;                 /* request size of each allocation */
    unsigned long window;        /* allocations to make at most */
    void *(*alloc)(size_t);      /* default pmalloc */
    void (*release)(void *);     /* default pfree */
    const void *watch;           /* a block overlapping [watch, watch + watch_len) is pinned: kept live */
    size_t watch_len;
    int stop_on_watch;           /* return at the first block overlapping the watched range */
    int stop_outside_heap;       /* return at the first block inside probe_static_area or [extra, +len) */
    const void *extra;
    size_t extra_len;
    /* results */
    unsigned long made;          /* allocations made */
    unsigned long step;          /* allocation number of the block that ended the hunt (0: none did) */
    void *hit;                   /* that block */
    const void *hit_other;       /* the live block it overlaps, if it ended on an overlap */
    int why;                     /* PROBE_HUNT_NONE, _OVERLAP, _WATCH, _OUTSIDE */
    unsigned long watched_at;    /* allocation number of the first block overlapping the watched range */
};
enum { PROBE_HUNT_NONE, PROBE_HUNT_OVERLAP, PROBE_HUNT_WATCH, PROBE_HUNT_OUTSIDE };

/* Allocate up to h->window blocks of h->size, keeping them in a ring of PROBE_RING live blocks (the
 * oldest is freed to make room: memory stays bounded and the heap stays busy), and check each new
 * block against every live one: the probe's registered blocks, the ring, and the pinned blocks
 * (those that overlapped the watched range: a block handed out twice stays live both times, whatever
 * the gap between the two). The hunt never writes into the blocks: a block still on a free list
 * (handed out twice) would have its link overwritten with our bytes, and the allocator would crash
 * before the second copy appears. Allocates nothing else. Returns h->why. */
PROBE_UNUSED static int probe_hunt(struct probe_hunt *h)
{
    static void *ring[PROBE_RING];
    static void *pinned[PROBE_PINNED];
    size_t npinned = 0;
    void *(*alloc)(size_t) = h->alloc ? h->alloc : pmalloc;
    void (*release)(void *) = h->release ? h->release : pfree;
    for (int i = 0; i < PROBE_RING; i++)
        ring[i] = NULL;
    h->why = PROBE_HUNT_NONE;
    h->step = h->watched_at = h->made = 0;
    h->hit = NULL;
    h->hit_other = NULL;
    size_t n = h->size;
    for (unsigned long k = 1; k <= h->window; k++) {
        int slot = (int)(k % PROBE_RING);
        if (ring[slot]) {
            release(ring[slot]);
            ring[slot] = NULL;
        }
        void *q = alloc(n);
        h->made = k;
        if (!q)
            continue;
        const void *other = NULL;
        for (size_t i = 0; i < probe_live_n && !other; i++)
            if (ranges_overlap(q, n, probe_live_ptr[i], probe_live_size[i]))
                other = probe_live_ptr[i];
        for (int i = 0; i < PROBE_RING && !other; i++)
            if (ring[i] && ranges_overlap(q, n, ring[i], n))
                other = ring[i];
        for (size_t i = 0; i < npinned && !other; i++)
            if (ranges_overlap(q, n, pinned[i], n))
                other = pinned[i];
        if (other) {
            h->why = PROBE_HUNT_OVERLAP;
            h->step = k;
            h->hit = q;
            h->hit_other = other;
            return h->why;
        }
        if (h->stop_outside_heap &&
            (ranges_overlap(q, n, probe_static_area, sizeof probe_static_area) ||
             (h->extra && ranges_overlap(q, n, h->extra, h->extra_len)))) {
            h->why = PROBE_HUNT_OUTSIDE;
            h->step = k;
            h->hit = q;
            return h->why;
        }
        if (h->watch && ranges_overlap(q, n, h->watch, h->watch_len)) {
            if (!h->watched_at)
                h->watched_at = k;
            if (h->stop_on_watch) {
                h->why = PROBE_HUNT_WATCH;
                h->step = k;
                h->hit = q;
                return h->why;
            }
            if (npinned < PROBE_PINNED) {
                pinned[npinned++] = q;
                continue;
            }
        }
        ring[slot] = q;
    }
    /* Nothing found: give the ring back (the pinned blocks stay: they may be one block twice). */
    for (int i = 0; i < PROBE_RING; i++)
        if (ring[i]) {
            release(ring[i]);
            ring[i] = NULL;
        }
    return h->why;
}

/* The hunt after a misuse that may make malloc hand out memory it does not own (a forged, static or chosen
 * address) or a block twice: the attacker's primitive is either. Marks "primitive" when it was achieved. */
PROBE_UNUSED static int probe_hunt_returned(struct probe_hunt *h, size_t size)
{
    memset(h, 0, sizeof *h);
    h->size = size;
    h->window = PROBE_WINDOW;
    h->stop_outside_heap = 1;
    probe_hunt(h);
    int worked = h->why == PROBE_HUNT_OUTSIDE || h->why == PROBE_HUNT_OVERLAP;
    if (worked)
        probe_mark("primitive");
    return worked;
}

/* After the result line: ordinary heap work, so damage that surfaces only later shows up as a crash
 * after "checked" (a late crash) rather than being mistaken for detection; then "done". */
static void probe_go_on(void)
{
    static void *slots[64];
    unsigned x = 12345u;
    for (int i = 0; i < 4000; i++) {
        x = x * 1103515245u + 12345u;
        unsigned k = (x >> 16) % 64;
        pfree(slots[k]);
        size_t sz = 8 + (x >> 4) % 700;
        slots[k] = pmalloc(sz);
        if (slots[k])
            fill_bytes(slots[k], 0, sz, 0x5a);
    }
    for (int k = 0; k < 64; k++)
        pfree(slots[k]);
    probe_mark("done");
}

/* The end of the double-free probes: look for the second copy of `a` over PROBE_WINDOW allocations
 * of its size (every copy that overlaps a is kept live), then report. Primitive: a new block overlaps
 * a live one (usually: a handed out twice). */
PROBE_UNUSED static void probe_finish_duplicate(size_t size, void *a)
{
    struct probe_hunt h = {0};
    h.size = size;
    h.window = PROBE_WINDOW;
    h.watch = a;
    h.watch_len = size;
    probe_hunt(&h);
    int worked = h.why == PROBE_HUNT_OVERLAP;
    if (worked)
        probe_mark("primitive");
    probe_result("worked=%d size=%zu step=%lu first_return=%lu made=%lu same_start=%d", worked, size,
                 worked ? h.step : 0ul, h.watched_at, h.made, worked && h.hit == h.hit_other);
    probe_go_on();
}

#endif
