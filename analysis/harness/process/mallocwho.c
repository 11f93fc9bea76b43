/* mallocwho: preloaded first, it interposes nothing; its constructor records which shared object each
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

#define MAX_OBJECTS 512

struct object_list {
    const char *names[MAX_OBJECTS];
    int n;
};

static int collect(struct dl_phdr_info *info, size_t size, void *data)
{
    struct object_list *list = data;
    (void)size;
    if (list->n < MAX_OBJECTS)
        list->names[list->n++] = info->dlpi_name;
    return 0;
}

static int defines(void *handle, const char *sym, const char *name)
{
    /* Programs bind malloc@GLIBC_2.2.5, x86_64's base version: libc_malloc_debug.so defines only that
     * (non-default) version, which plain dlsym skips; jemalloc & co. define it unversioned, which
     * dlvsym skips. An object defines the symbol if either lookup lands inside it. */
    void *candidates[2] = {dlsym(handle, sym), dlvsym(handle, sym, "GLIBC_2.2.5")};
    for (int k = 0; k < 2; k++) {
        Dl_info info;
        if (candidates[k] && dladdr(candidates[k], &info) && info.dli_fname && !strcmp(info.dli_fname, name))
            return 1;
    }
    return 0;
}

/* The first object in the global search order that itself defines `sym`: the one every reference
 * binds to. For malloc the main program is skipped: a non-PIE executable that takes malloc's address
 * carries a canonical PLT entry that dlsym reports as a definition, though calls land in a library. */
static const char *where(const char *sym, int include_main)
{
    struct object_list list = {{0}, 0};
    dl_iterate_phdr(collect, &list);
    if (include_main) { /* a symbol nothing imports (Perl_malloced_size): the plain lookup is right */
        void *p = dlsym(RTLD_DEFAULT, sym);
        Dl_info info;
        if (p && dladdr(p, &info) && info.dli_fname)
            return info.dli_fname[0] ? info.dli_fname : "(main program)";
        return "-";
    }
    for (int i = 1; i < list.n; i++) {
        const char *name = list.names[i];
        if (!name || !name[0])
            continue;
        void *h = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
        if (!h)
            continue;
        int own = defines(h, sym, name);
        dlclose(h);
        if (own)
            return name;
    }
    return "-";
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
                       where("malloc", 0), where("free", 0), where("Perl_malloced_size", 1));
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
