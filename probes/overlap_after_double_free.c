/* overlap-after-double-free: a is freed, 32 other blocks of its size are freed, then a again (a
 * delayed double free, past any quarantine of recent frees). Primitive: among the next 256
 * allocations two live blocks share memory, seen by address and by writing distinct contents. */
#include "probe.h"

#define OTHERS 32
#define N 256
#define SIZE 64

int main(void)
{
    char *a = xmalloc(SIZE);
    void *others[OTHERS];
    for (int i = 0; i < OTHERS; i++)
        others[i] = xmalloc(SIZE);
    free(a);
    for (int i = 0; i < OTHERS; i++)
        free(others[i]);
    free(launder(a));
    probe_mark("misuse-done");
    static void *got[N];
    static size_t sizes[N];
    for (int i = 0; i < N; i++) {
        got[i] = malloc(SIZE);
        sizes[i] = SIZE;
        if (got[i])
            memset(got[i], i & 0xff, SIZE);
    }
    size_t clobbered = 0;
    for (int i = 0; i < N; i++)
        if (got[i] && count_bytes(got[i], 0, SIZE, i & 0xff) != SIZE)
            clobbered++;
    size_t overlaps = count_overlaps(got, sizes, N);
    probe_result("worked=%d overlaps=%zu clobbered=%zu", overlaps > 0 || clobbered > 0, overlaps, clobbered);
    probe_go_on();
    return 0;
}
