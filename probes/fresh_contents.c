/* fresh-contents: fill 32 blocks of 256 bytes with a secret, free them, allocate 32 again. Primitive:
 * a new block still shows the secret (bytes past the first 16). No misuse: reading fresh memory. */
#include "probe.h"

#define N 32
#define SIZE 256

int main(void)
{
    static void *b[N];
    for (int i = 0; i < N; i++) {
        b[i] = xmalloc(SIZE);
        memset(b[i], 'S', SIZE);
    }
    for (int i = 0; i < N; i++)
        free(b[i]);
    probe_mark("misuse-done");
    int leaked = 0;
    for (int i = 0; i < N; i++) {
        b[i] = malloc(SIZE);
        if (b[i] && count_bytes(b[i], 16, SIZE, 'S') * 2 >= SIZE - 16)
            leaked++;
    }
    probe_result("worked=%d leaking_blocks=%d of=%d", leaked > 0, leaked, N);
    probe_go_on();
    return 0;
}
