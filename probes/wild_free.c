/* wild-free: free a pointer into static memory that malloc never returned. Primitive: a later
 * allocation returns memory in that static area. */
#include "probe.h"

int main(void)
{
    free(launder(probe_static_area + 4096));
    probe_mark("misuse-done");
    int inside = 0;
    for (int i = 0; i < 16; i++)
        inside += in_static_area(malloc(48));
    probe_result("worked=%d inside=%d", inside > 0, inside);
    probe_go_on();
    return 0;
}
