/* compile driver: the kernel build of seed 001 in small. Runs `gcc -O2 -c` over the first N of
 * the given C files (N = scale * FULL_N, at least 1) one after the other, as a build would,
 * via posix_spawn with our environment (so LD_PRELOAD reaches gcc, cc1 and as), then hashes
 * the object files. gcc's objects are deterministic for a fixed source path and random seed.
 *
 * usage: compile-driver SCALE FULL_N GCC SRCDIR [-- EXTRA_CFLAGS... --] FILE...
 * Files are relative to SRCDIR (the driver runs gcc there, so the objects record the same
 * names whatever the checkout path); objects go to a fresh directory under $TMPDIR. */
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include "wl_common.h"

extern char **environ;

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: %s SCALE FULL_N GCC SRCDIR [-- CFLAGS... --] FILE...\n",
                argv[0]);
        return 2;
    }
    double scale = wl_scale(argc, argv);
    long full_n = strtol(argv[2], NULL, 10);
    const char *gcc = argv[3], *srcdir = argv[4], *tmp = getenv("TMPDIR");
    char outdir[4096];
    char **extra = NULL;
    int nextra = 0, first = 5;

    if (strcmp(argv[first], "--") == 0) {
        extra = argv + first + 1;
        while (first + 1 + nextra < argc && strcmp(extra[nextra], "--") != 0)
            nextra++;
        first += nextra + 2;
    }
    long nfiles = argc - first, n = wl_scaled(scale, full_n);
    if (n > nfiles) {
        fprintf(stderr, "compile-driver: scale asks for %ld files, only %ld given\n", n, nfiles);
        return 2;
    }
    snprintf(outdir, sizeof outdir, "%s/heapcost-cc-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(outdir) == NULL) {
        perror(outdir);
        return 1;
    }
    if (chdir(srcdir) != 0) {
        perror(srcdir);
        return 1;
    }

    uint64_t h = wl_fnv_u64(WL_FNV_INIT, (uint64_t)n);
    for (long i = 0; i < n; i++) {
        const char *src = argv[first + i];
        char obj[4200];
        snprintf(obj, sizeof obj, "%s/%ld.o", outdir, i);
        char *args[64];
        int k = 0;
        args[k++] = (char *)gcc;
        args[k++] = "-O2";
        args[k++] = "-c";
        args[k++] = "-frandom-seed=heapcost";
        args[k++] = "-pipe";    /* as kbuild does: cc1 and as talk through a pipe */
        for (int e = 0; e < nextra && k < 56; e++)
            args[k++] = extra[e];
        args[k++] = (char *)src;
        args[k++] = "-o";
        args[k++] = obj;
        args[k] = NULL;

        pid_t pid;
        int status, err = posix_spawn(&pid, gcc, NULL, NULL, args, environ);
        if (err != 0) {
            fprintf(stderr, "compile-driver: cannot spawn %s: %s\n", gcc, strerror(err));
            rmdir(outdir);
            return 1;
        }
        if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "compile-driver: gcc failed on %s\n", src);
            unlink(obj);
            rmdir(outdir);
            return 1;
        }
        h = wl_fnv_bytes(h, src, strlen(src) + 1);
        h = wl_fnv_file(h, obj);
        unlink(obj);
    }
    rmdir(outdir);
    wl_print_checksum(h);
    return 0;
}
