/* calloc-overflow: calloc(n, size) whose product wraps around to a small number must give NULL;
 * otherwise the caller gets a tiny block it believes is huge. Two calls: (n, size) and (size, n) with
 * n = SIZE_MAX / size + 2, so n * size wraps to less than 2 * size. Primitive: a call returns a block
 * ("primitive" is marked as soon as the first one does, before the second call). */
#include "probe.h"

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 16);
    size_t n = SIZE_MAX / size + 2;
    size_t wrapped = n * size;
    probe_mark("setup-done");
    void *first = pcalloc(launder_size(n), size);
    probe_mark("misuse-done");
    if (first)
        probe_mark("primitive");
    void *second = pcalloc(size, launder_size(n));
    if (second && !first)
        probe_mark("primitive");
    int nonnull = (first != NULL) + (second != NULL);
    probe_result("worked=%d size=%zu non_null=%d of=2 wrapped_to=%zu", nonnull > 0, size, nonnull, wrapped);
    probe_go_on();
    return 0;
}
