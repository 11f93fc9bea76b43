/* mallocwho: preloaded last, it interposes nothing; its constructor records which shared object each
 * process's malloc and free resolved to (and Perl_malloced_size, which only a perl built with its own
 * malloc defines), so a trial whose LD_PRELOAD silently failed (the
 * loader only warns) is caught instead of being measured as glibc.
 * Appends one line per process to $HEAPCOST_WHO; uses no malloc of its own.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *where(const char *sym)
{
    void *p = dlsym(RTLD_DEFAULT, sym);
    Dl_info info;
    if (!p)
        return "-";
    if (dladdr(p, &info) && info.dli_fname && info.dli_fname[0])
        return info.dli_fname;
    return "(main program)";
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
