/* build driver: seed 001's rpmbuild in small. Runs one `make -jJOBS` of a real C project's own Makefile
 * from the current (empty, scratch) directory, the Makefile reading the source folder through VPATH, so
 * make, gcc, cc1, as, ar and ld all start under the allocator being measured; then hashes the object
 * files the build wrote (in the order given) and removes what it made (nothing that was there before).
 *
 * usage: build-driver SCALE JOBS MAKE MAKEFILE -- MAKE-ARGS... -- OBJECT... -- PRODUCT...
 * SCALE 1 builds every target of MAKE-ARGS (the objects and the PRODUCTs); a smaller scale builds only the
 * first SCALE x (number of OBJECTs) objects, at least one, and links nothing. */
#include <dirent.h>
#include <spawn.h>
#include <sys/wait.h>
#include "wl_common.h"

extern char **environ;

/* The names in the scratch directory before the build: the harness keeps its own files there (the trial's
 * stdout and stderr), and only what the build made is removed afterwards. */
static char *before[64];
static int nbefore;

static void remember(void)
{
    DIR *d = opendir(".");
    struct dirent *e;
    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL && nbefore < 64)
        before[nbefore++] = strdup(e->d_name);
    closedir(d);
}

static int was_there(const char *name)
{
    for (int i = 0; i < nbefore; i++)
        if (strcmp(before[i], name) == 0)
            return 1;
    return 0;
}

static void clean(void)
{
    DIR *d = opendir(".");
    struct dirent *e;
    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL)
        if (!was_there(e->d_name))
            unlink(e->d_name);
    closedir(d);
}

static int next_sep(int argc, char **argv, int from)
{
    while (from < argc && strcmp(argv[from], "--") != 0)
        from++;
    return from;
}

int main(int argc, char **argv)
{
    if (argc < 8) {
        fprintf(stderr, "usage: %s SCALE JOBS MAKE MAKEFILE -- MAKE-ARGS... -- OBJECT... -- PRODUCT...\n", argv[0]);
        return 2;
    }
    double scale = wl_scale(argc, argv);
    const char *jobs = argv[2], *make = argv[3], *makefile = argv[4];
    int a0 = 6, a1 = next_sep(argc, argv, a0), o0 = a1 + 1, o1 = next_sep(argc, argv, o0), p0 = o1 + 1;
    if (strcmp(argv[5], "--") != 0 || a1 >= argc || o1 >= argc || o1 == o0) {
        fprintf(stderr, "build-driver: expected -- MAKE-ARGS -- OBJECTS -- PRODUCTS\n");
        return 2;
    }
    long nobj = o1 - o0, n = scale >= 1.0 ? nobj : wl_scaled(scale, nobj);
    if (n > nobj)
        n = nobj;

    char jflag[64];
    snprintf(jflag, sizeof jflag, "-j%s", jobs);
    char *args[256];
    int k = 0;
    args[k++] = (char *)make;
    args[k++] = "-s";
    args[k++] = jflag;
    args[k++] = "-f";
    args[k++] = (char *)makefile;
    for (int i = a0; i < a1 && k < 200; i++)
        if (scale >= 1.0 || strchr(argv[i], '=') != NULL)  /* below one build: variables, not targets */
            args[k++] = argv[i];
    if (scale < 1.0)
        for (long i = 0; i < n && k < 254; i++)
            args[k++] = argv[o0 + i];
    args[k] = NULL;

    remember();
    pid_t pid;
    int status, err = posix_spawn(&pid, make, NULL, NULL, args, environ);
    if (err != 0) {
        fprintf(stderr, "build-driver: cannot spawn %s: %s\n", make, strerror(err));
        return 1;
    }
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "build-driver: make failed\n");
        clean();
        return 1;
    }
    uint64_t h = wl_fnv_u64(WL_FNV_INIT, (uint64_t)n);
    for (long i = 0; i < n; i++) {
        h = wl_fnv_bytes(h, argv[o0 + i], strlen(argv[o0 + i]) + 1);
        h = wl_fnv_file(h, argv[o0 + i]);
    }
    if (scale >= 1.0)
        for (int i = p0; i < argc; i++)
            if (access(argv[i], F_OK) != 0) {
                fprintf(stderr, "build-driver: the build made no %s\n", argv[i]);
                clean();
                return 1;
            }
    clean();
    wl_print_checksum(h);
    return 0;
}
