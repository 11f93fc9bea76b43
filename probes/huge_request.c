/* huge-request: sizes no machine can satisfy must give NULL (not a small block, not a crash): four
 * mallocs near SIZE_MAX and PTRDIFF_MAX, then realloc of a live <size>-byte block to SIZE_MAX - 15.
 * Primitive: one of them returns a pointer. */
#include "probe.h"
#include <errno.h>

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 16);
    size_t sizes[] = {SIZE_MAX, SIZE_MAX - 4095, (size_t)PTRDIFF_MAX + 1, (size_t)1 << 62};
    int nonnull = 0;
    void *small = xmalloc(size);
    probe_mark("setup-done");
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        nonnull += pmalloc(launder_size(sizes[i])) != NULL;
    void *r = prealloc(small, launder_size(SIZE_MAX - 15));
    nonnull += r != NULL;
    probe_mark("misuse-done");
    if (nonnull)
        probe_mark("primitive");
    if (!r)
        pfree(small);
    probe_result("worked=%d size=%zu non_null=%d of=5", nonnull > 0, size, nonnull);
    probe_go_on();
    return 0;
}
