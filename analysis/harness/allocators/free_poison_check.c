/* free-poison-check: which object malloc resolves to, and how much of a freed block reads as the poison
 * byte. Frees one 1024-byte block filled with 0x11 and counts the bytes equal to POISON (default 0xe5,
 * mozjemalloc's kAllocPoison) in [64, 256) (inside the first 256 bytes, past where an allocator might keep
 * a link) and in [512, 1024) (past the first 256). Reading freed memory is what a use-after-free does; the
 * block stays mapped here because small blocks live in runs that outlive one free.
 * Prints one line: `poison head H/192 tail T/512, malloc from <object path>`. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    unsigned poison = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : 0xe5;
    Dl_info info;
    void *(*volatile fn)(size_t) = malloc;
    if (!dladdr((void *)fn, &info) || !info.dli_fname) {
        fprintf(stderr, "free-poison-check: dladdr found no object for malloc\n");
        return 2;
    }
    volatile unsigned char *p = malloc(1024);
    if (!p)
        return 2;
    for (int i = 0; i < 1024; i++)
        p[i] = 0x11; /* volatile stores: not dropped as dead before free */
    free((void *)p);
    int head = 0, tail = 0;
    for (int i = 64; i < 256; i++)
        head += p[i] == poison;
    for (int i = 512; i < 1024; i++)
        tail += p[i] == poison;
    printf("poison head %d/192 tail %d/512, malloc from %s\n", head, tail, info.dli_fname);
    return 0;
}
