/* reuse-immediate: after free(p), does the next malloc of the same size return p? The first try in a
 * fresh process is the result; 100 more tries in the process are reported alongside. No misuse. */
#include "probe.h"

#define SIZE 64

int main(void)
{
    void *p = xmalloc(SIZE);
    uintptr_t was = (uintptr_t)p;
    free(p);
    probe_mark("misuse-done");
    void *q = malloc(SIZE);
    int first = (uintptr_t)q == was;
    free(q);
    int again = 0;
    for (int i = 0; i < 100; i++) {
        void *r = xmalloc(SIZE);
        uintptr_t a = (uintptr_t)r;
        free(r);
        void *s = malloc(SIZE);
        again += (uintptr_t)s == a;
        free(s);
    }
    probe_result("worked=%d in_process=%d of=100", first, again);
    probe_go_on();
    return 0;
}
