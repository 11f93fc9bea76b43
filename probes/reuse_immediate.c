/* reuse-immediate: after free(p), does the next malloc of the same size return p? The first try in a
 * fresh process (with live neighbours of the size) is the result; 100 more tries in the process are
 * reported alongside. No misuse: it says how soon a dangling pointer meets a new owner. */
#include "probe.h"

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 64);
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    void *p = xmalloc(size);
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    uintptr_t was = (uintptr_t)p;
    probe_mark("setup-done");
    pfree(p);
    probe_mark("misuse-done");
    void *q = pmalloc(size);
    int first = (uintptr_t)q == was;
    if (first)
        probe_mark("primitive");
    pfree(q);
    int again = 0;
    for (int i = 0; i < 100; i++) {
        void *r = xmalloc(size);
        uintptr_t a = (uintptr_t)r;
        pfree(r);
        void *s = pmalloc(size);
        again += (uintptr_t)s == a;
        pfree(s);
    }
    probe_result("worked=%d size=%zu step=%d in_process=%d of=100", first, size, first, again);
    probe_go_on();
    return 0;
}
