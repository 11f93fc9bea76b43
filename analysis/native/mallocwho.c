/* mallocwho: preloaded last, it interposes nothing; its constructor records which shared object each
 * process's malloc and free resolved to (and Perl_malloced_size, which only a perl built with its own
 * malloc defines), so a trial whose LD_PRELOAD silently failed (the
 * loader only warns) is caught instead of being measured as glibc.
 * Appends one line per process to $HEAPCOST_WHO; uses no malloc of its own.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct order_query {
    const char *name;
    int index, found;
};

static int find_index(struct dl_phdr_info *info, size_t size, void *data)
{
    struct order_query *q = data;
    (void)size;
    if (!q->found && info->dlpi_name && !strcmp(info->dlpi_name, q->name)) {
        q->found = 1;
        return 1;
    }
    q->index++;
    return 0;
}

static int load_order(const char *name)
{
    struct order_query q = {name, 0, 0};
    dl_iterate_phdr(find_index, &q);
    return q.found ? q.index : 1 << 30;
}

/* Programs bind malloc@GLIBC_2.2.5 (x86_64's base version) to the first object in search order that
 * defines it: libc_malloc_debug.so defines only that non-default version, which plain dlsym skips, while
 * jemalloc & co. define it unversioned, which dlvsym skips. Take both and keep the earlier object. */
static const char *where(const char *sym)
{
    Dl_info a, b;
    void *pa = dlsym(RTLD_DEFAULT, sym);
    void *pb = dlvsym(RTLD_DEFAULT, sym, "GLIBC_2.2.5");
    int ha = pa && dladdr(pa, &a) && a.dli_fname;
    int hb = pb && dladdr(pb, &b) && b.dli_fname;
    if (!ha && !hb)
        return "-";
    const char *name = ha ? a.dli_fname : b.dli_fname;
    if (ha && hb && load_order(b.dli_fname) < load_order(a.dli_fname))
        name = b.dli_fname;
    return name[0] ? name : "(main program)";
}

__attribute__((constructor)) static void mallocwho_report(void)
{
    const char *path = getenv("HEAPCOST_WHO");
    if (!path || !path[0])
        return;
    char exe[1024];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    char line[4096];
    int len = snprintf(line, sizeof line, "%d\t%s\tmalloc=%s\tfree=%s\tPerl_malloced_size=%s\n", (int)getpid(), exe,
                       where("malloc"), where("free"), where("Perl_malloced_size"));
    if (len <= 0)
        return;
    if (len >= (int)sizeof line)
        len = sizeof line - 1;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    ssize_t unused = write(fd, line, (size_t)len);
    (void)unused;
    close(fd);
}
