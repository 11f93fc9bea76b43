/* cross-thread-double-free: a second thread frees a (into its own thread cache, where there is one),
 * then the main thread frees a again while that thread is still alive, so a per-thread check of the
 * main thread's cache cannot see the first free. Primitive: a is handed out twice (two live blocks
 * share memory), searched over 100,000 allocations in the main thread. */
#include "probe.h"
#include <pthread.h>

static int to_worker[2], to_main[2];
static void *victim;

static void *worker(void *arg)
{
    (void)arg;
    char c;
    while (read(to_worker[0], &c, 1) == 1) {
        if (c == 'f')
            pfree(victim);
        if (write(to_main[1], &c, 1) != 1 || c == 'q')
            break;
    }
    return NULL;
}

static void ask(char c)
{
    char ack;
    if (write(to_worker[1], &c, 1) != 1 || read(to_main[0], &ack, 1) != 1)
        probe_setup_failed("lost the worker thread");
}

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 48);
    if (pipe(to_worker) || pipe(to_main))
        probe_setup_failed("pipe failed");
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL))
        probe_setup_failed("pthread_create failed");
    ask('w'); /* the worker runs (and has its own cache, if the allocator keeps them) */
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    victim = xmalloc(size);
    probe_neighbours(size, PROBE_NEIGHBOURS / 2);
    probe_mark("setup-done");
    ask('f');
    pfree(launder(victim));
    probe_mark("misuse-done");
    struct probe_hunt h = {0};
    h.size = size;
    h.window = PROBE_WINDOW;
    h.watch = victim;
    h.watch_len = size;
    probe_hunt(&h);
    int worked = h.why == PROBE_HUNT_OVERLAP;
    if (worked)
        probe_mark("primitive");
    probe_result("worked=%d size=%zu step=%lu first_return=%lu made=%lu", worked, size, worked ? h.step : 0ul,
                 h.watched_at, h.made);
    ask('q');
    pthread_join(t, NULL);
    probe_go_on();
    return 0;
}
