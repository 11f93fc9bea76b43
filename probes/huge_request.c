/* huge-request: sizes no machine can satisfy must give NULL (not a small block, not a crash). */
#include "probe.h"
#include <errno.h>

int main(void)
{
    size_t sizes[] = {SIZE_MAX, SIZE_MAX - 4095, (size_t)PTRDIFF_MAX + 1, (size_t)1 << 62};
    int nonnull = 0;
    probe_mark("misuse-done");
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = malloc(launder_size(sizes[i]));
        nonnull += p != NULL;
    }
    void *small = xmalloc(16);
    void *r = realloc(small, launder_size(SIZE_MAX - 15));
    nonnull += r != NULL;
    if (!r)
        free(small);
    probe_result("worked=%d non_null=%d of=5", nonnull > 0, nonnull);
    probe_go_on();
    return 0;
}
