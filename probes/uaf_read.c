/* uaf-read: read a freed 64-byte block. Primitive: its old contents are still there (bytes past the
 * first 16, where free lists keep their links, still hold the secret). */
#include "probe.h"

#define SIZE 64

int main(void)
{
    unsigned char *p = xmalloc(SIZE);
    memset(p, 'S', SIZE);
    free(p);
    size_t still = count_bytes(launder(p), 16, SIZE, 'S');
    probe_mark("misuse-done");
    probe_result("worked=%d old_bytes=%zu of=%d", still * 2 >= SIZE - 16, still, SIZE - 16);
    probe_go_on();
    return 0;
}
