/* large-overflow: write one byte just past the usable end of a 256 KiB block. A guard page stops it
 * with SIGSEGV at the write. Primitive: the write lands silently. */
#include "probe.h"

int main(void)
{
    size_t n = 256 * 1024;
    unsigned char *p = xmalloc(n);
    size_t usable = usable_size(p, n, 16384);
    volatile unsigned char *v = launder(p);
    v[usable] = 'A';
    probe_mark("misuse-done");
    free(p);
    probe_result("worked=1 usable=%zu", usable);
    probe_go_on();
    return 0;
}
