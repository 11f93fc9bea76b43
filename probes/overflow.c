/* overflow-N / underflow-N: write N bytes of 'A' just past the end of a live block (as far as
 * malloc_usable_size reports, so there is no slack; see usable_size) or, for negative N, just before
 * its start. Its neighbours are 63 live blocks of the same size. Run as `overflow <size> <N>`.
 * Primitive: a neighbour's contents changed, or the corrupted metadata makes later allocations (at
 * the size and at larger ones, where a grown size field would lead) overlap. */
#include "probe.h"

#define COUNT 64

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 40);
    long n = argc > 2 ? atol(argv[2]) : 1;
    if (n == 0 || n > 4096 || n < -4096)
        probe_setup_failed("N %ld: expected 1..4096 or -4096..-1", n);
    size_t slack = size < 1024 ? 64 : 16384;
    static unsigned char *b[COUNT];
    static size_t usable[COUNT];
    for (int i = 0; i < COUNT; i++) {
        b[i] = (unsigned char *)xmalloc(size);
        usable[i] = usable_size(b[i], size, slack);
        fill_bytes(b[i], 0, usable[i], (unsigned char)(0x80 + i));
    }
    int k = COUNT / 2;
    unsigned char *v = (unsigned char *)launder(b[k]);
    if (n > 0)
        probe_target(v + usable[k], v + usable[k] + n);
    else
        probe_target(v + n, v);
    probe_mark("setup-done");
    if (n > 0)
        fill_bytes(v, usable[k], usable[k] + (size_t)n, 'A');
    else
        fill_bytes(v + n, 0, (size_t)-n, 'A');
    probe_mark("misuse-done");
    int neighbour = 0;
    for (int i = 0; i < COUNT; i++)
        if (i != k && count_bytes(b[i], 0, usable[i], (unsigned char)(0x80 + i)) != usable[i])
            neighbour++;
    if (neighbour)
        probe_mark("primitive");
    for (int i = 0; i < COUNT; i++)
        pfree(b[i]);
    enum { R = 3 * COUNT };
    static void *got[R];
    static size_t sizes[R];
    for (int i = 0; i < R; i++) {
        sizes[i] = size + (size_t)(i % 3) * 16;
        got[i] = pmalloc(sizes[i]);
    }
    size_t overlaps = count_overlaps(got, sizes, R);
    if (overlaps && !neighbour)
        probe_mark("primitive");
    probe_result("worked=%d size=%zu n=%ld neighbours_changed=%d overlaps=%zu usable=%zu",
                 neighbour > 0 || overlaps > 0, size, n, neighbour, overlaps, usable[k]);
    probe_go_on();
    return 0;
}
