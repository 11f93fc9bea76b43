// sized-delete: release a 32-byte block with sized delete claiming 4096 bytes. Primitive: a later
// 4096-byte allocation returns the 32-byte block (an overflow waiting to happen).
extern "C" {
#include "probe.h"
}
#include <new>

int main()
{
    void *p = ::operator new(32);
    ::operator delete(launder(p), static_cast<std::size_t>(launder_size(4096)));
    probe_mark("misuse-done");
    int same = 0;
    for (int i = 0; i < 16; i++)
        same += ::operator new(4096) == p;
    probe_result("worked=%d", same > 0);
    probe_go_on();
    return 0;
}
