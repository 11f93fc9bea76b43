/* placement-entropy: the addresses of 256 consecutive allocations of the size (default 64) in one
 * process; the Python side measures how predictable each next address is from the previous one. */
#include "probe.h"

#define N 256

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 64);
    static uintptr_t addr[N];
    for (int i = 0; i < N; i++)
        addr[i] = (uintptr_t)xmalloc(size);
    probe_mark("setup-done");
    probe_mark("misuse-done");
    static char list[N * 20];
    size_t off = 0;
    for (int i = 0; i < N; i++)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%lx", i ? "," : "", (unsigned long)addr[i]);
    probe_result("worked=- size=%zu addrs=%s", size, list);
    probe_go_on();
    return 0;
}
