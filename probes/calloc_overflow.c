/* calloc-overflow: calloc(n, size) whose product wraps around to a small number must give NULL;
 * otherwise the caller gets a tiny block it believes is huge. */
#include "probe.h"

int main(void)
{
    probe_mark("misuse-done");
    int nonnull = 0;
    nonnull += calloc(launder_size(((size_t)1 << 60) + 1), 16) != NULL;  /* wraps to 16 */
    nonnull += calloc(launder_size(((size_t)1 << 32) + 1), (size_t)1 << 32) != NULL;  /* wraps to 2^32 */
    probe_result("worked=%d non_null=%d of=2", nonnull > 0, nonnull);
    probe_go_on();
    return 0;
}
