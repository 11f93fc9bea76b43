/* overflow-N / underflow-N: write N bytes of 'A' just past the end of a live block (as far as
 * malloc_usable_size reports, so there is no slack; see usable_size) or, for negative N, just before its start.
 * Its neighbours are live blocks of the same size. The allocator may notice when the blocks are
 * freed. Primitive: a neighbour's contents changed, or the corruption of metadata makes later
 * allocations overlap. */
#include "probe.h"

#define COUNT 64
#define SIZE 40

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1;
    static void *b[COUNT];
    static size_t usable[COUNT];
    for (int i = 0; i < COUNT; i++) {
        b[i] = xmalloc(SIZE);
        usable[i] = usable_size(b[i], SIZE, 64);
        memset(b[i], 0x80 + i, usable[i]);
    }
    int k = COUNT / 2;
    volatile unsigned char *v = launder(b[k]);
    if (n > 0)
        for (int j = 0; j < n; j++)
            v[usable[k] + j] = 'A';
    else
        for (int j = 1; j <= -n; j++)
            v[-j] = 'A';
    probe_mark("misuse-done");
    int neighbour = 0;
    for (int i = 0; i < COUNT; i++)
        if (i != k && count_bytes(b[i], 0, usable[i], 0x80 + i) != usable[i])
            neighbour++;
    for (int i = 0; i < COUNT; i++)
        free(b[i]);
    /* Reallocate at the block's size and at larger ones, where a grown size field would lead. */
    enum { R = 3 * COUNT };
    static void *got[R];
    static size_t sizes[R];
    for (int i = 0; i < R; i++) {
        sizes[i] = SIZE + (i % 3) * 16;
        got[i] = malloc(sizes[i]);
    }
    size_t overlaps = count_overlaps(got, sizes, R);
    probe_result("worked=%d neighbours_changed=%d overlaps=%zu usable=%zu", neighbour > 0 || overlaps > 0,
                 neighbour, overlaps, usable[k]);
    probe_go_on();
    return 0;
}
