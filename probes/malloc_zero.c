/* malloc-zero: a program treats malloc(0) as a buffer of <size> bytes: it reads them, then writes
 * them, while live blocks of the smallest size class and of <size> sit around it. Primitive: the
 * read shows a neighbour's data or the write changes a neighbour. Meaningful for small sizes only
 * (<= 64 bytes); beyond that it is an ordinary large overflow (see overflow.c). An allocator that refuses
 * malloc(0) itself with a diagnostic (efence) stops the misuse before it starts: the request is made
 * between the legal-request stage markers, and probe_verdict calls that caught. */
#include "probe.h"

#define HALF 16

static unsigned char *nb[4 * HALF];
static size_t nb_len[4 * HALF];
static int nb_n;

static void neighbour(size_t request, size_t size)
{
    unsigned char *p = (unsigned char *)xmalloc(request);
    nb_len[nb_n] = usable_size(p, request, 64);
    if (nb_len[nb_n] > size)
        nb_len[nb_n] = size;
    fill_bytes(p, 0, nb_len[nb_n], 'N');
    nb[nb_n++] = p;
}

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 16);
    if (size > 64)
        probe_not_applicable(size, "beyond-64-bytes-this-is-a-plain-overflow");
    for (int i = 0; i < HALF; i++) {
        neighbour(1, size);
        neighbour(size, size);
    }
    /* Legal, but efence refuses it (aborts with "Allocating 0 bytes, probably a bug."): marked, so that
     * refusal is the allocator stopping the misuse, not a failure to start. */
    unsigned char *z = (unsigned char *)probe_legal_malloc(launder_size(0), "malloc(0)");
    for (int i = 0; i < HALF; i++) {
        neighbour(1, size);
        neighbour(size, size);
    }
    if (!z) {
        probe_mark("setup-done");
        probe_mark("misuse-done");
        probe_result("worked=0 size=%zu null=1", size);
        probe_go_on();
        return 0;
    }
    probe_target(z, z + size);
    probe_mark("setup-done");
    size_t leaked = count_bytes(launder(z), 0, size, 'N');
    fill_bytes(launder(z), 0, size, 'Z');
    probe_mark("misuse-done");
    int changed = 0;
    for (int i = 0; i < nb_n; i++)
        changed += count_bytes(nb[i], 0, nb_len[i], 'N') != nb_len[i];
    int worked = leaked > 0 || changed > 0;
    if (worked)
        probe_mark("primitive");
    probe_result("worked=%d size=%zu null=0 neighbour_bytes_read=%zu neighbours_changed=%d", worked, size, leaked,
                 changed);
    probe_go_on();
    return 0;
}
