/* placement-entropy: the addresses of 256 consecutive 64-byte allocations in one process; the Python
 * side measures how predictable each next address is from the previous one. */
#include "probe.h"

#define N 256

int main(void)
{
    static uintptr_t addr[N];
    for (int i = 0; i < N; i++)
        addr[i] = (uintptr_t)xmalloc(64);
    probe_mark("misuse-done");
    static char list[N * 20];
    size_t off = 0;
    for (int i = 0; i < N; i++)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%lx", i ? "," : "", (unsigned long)addr[i]);
    probe_result("worked=- addrs=%s", list);
    probe_go_on();
    return 0;
}
