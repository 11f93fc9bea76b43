/* uaf-write: write into a freed 64-byte block (away from the first 16 bytes, where free-list links
 * live), then allocate 64 blocks of the size, where a checking allocator would notice. Primitive:
 * the write goes unnoticed and a new owner receives the block with the attacker's bytes in it. */
#include "probe.h"

#define SIZE 64
#define N 64

int main(void)
{
    unsigned char *p = xmalloc(SIZE);
    free(p);
    volatile unsigned char *v = launder(p);
    for (int i = 16; i < SIZE; i++)
        v[i] = 'W';
    probe_mark("misuse-done");
    static void *got[N];
    int seen = 0, returned = 0;
    for (int i = 0; i < N; i++) {
        got[i] = malloc(SIZE);
        if (got[i] == (void *)p)
            returned = 1;
        if (got[i] && count_bytes(got[i], 16, SIZE, 'W') * 2 >= SIZE - 16)
            seen = 1;
    }
    for (int i = 0; i < N; i++)
        free(got[i]);
    probe_result("worked=%d block_returned=%d", seen, returned);
    probe_go_on();
    return 0;
}
