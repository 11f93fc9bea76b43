/* address-entropy: the addresses of a small, a medium and a large first allocation; the Python side
 * estimates their entropy across fresh processes. No misuse. */
#include "probe.h"

int main(void)
{
    void *small = xmalloc(64), *medium = xmalloc(16384), *large = xmalloc(1 << 20);
    probe_mark("setup-done");
    probe_mark("misuse-done");
    probe_result("worked=- small=%#lx medium=%#lx large=%#lx", (unsigned long)small, (unsigned long)medium,
                 (unsigned long)large);
    probe_go_on();
    return 0;
}
