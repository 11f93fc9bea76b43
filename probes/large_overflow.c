/* large-overflow: write one byte just past the usable end of a lone block (default 256 KiB), where a
 * guard page would stop it with a fault at the write. Primitive: the write lands silently. */
#include "probe.h"

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 256 * 1024);
    unsigned char *p = (unsigned char *)xmalloc(size);
    size_t usable = usable_size(p, size, size < 1024 ? 64 : 16384);
    volatile unsigned char *v = (volatile unsigned char *)launder(p);
    probe_target(p + usable, p + usable + 1);
    probe_mark("setup-done");
    v[usable] = 'A';
    probe_mark("misuse-done");
    probe_mark("primitive");
    probe_result("worked=1 size=%zu usable=%zu", size, usable);
    pfree(p);
    probe_go_on();
    return 0;
}
