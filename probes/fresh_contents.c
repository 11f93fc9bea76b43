/* fresh-contents: fill 32 blocks of the size with a secret, free them, allocate 32 again. Primitive:
 * a new block still shows the secret (in at least half of its bytes past the first 16, where free
 * lists keep their links; all of a block under 32 bytes). No misuse: reading fresh memory. */
#include "probe.h"

#define N 32

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 256);
    size_t skip = size >= 32 ? 16 : 0;
    static void *b[N];
    for (int i = 0; i < N; i++) {
        b[i] = xmalloc(size);
        fill_bytes(b[i], 0, size, 'S');
    }
    probe_mark("setup-done");
    for (int i = 0; i < N; i++)
        pfree(b[i]);
    probe_mark("misuse-done");
    int leaked = 0, first = 0;
    for (int i = 0; i < N; i++) {
        b[i] = pmalloc(size);
        if (b[i] && count_bytes(b[i], skip, size, 'S') * 2 >= size - skip && !leaked++) {
            first = i + 1;
            probe_mark("primitive");
        }
    }
    probe_result("worked=%d size=%zu step=%d leaking_blocks=%d of=%d", leaked > 0, size, first, leaked, N);
    probe_go_on();
    return 0;
}
