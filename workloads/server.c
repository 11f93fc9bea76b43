/* server: the classic producer/consumer allocator stressor. Producer threads allocate messages
 * of varying size and fill them; consumer threads read and free them, so nearly every free is
 * a cross-thread free. Queues are bounded ring buffers. The checksum is a sum of per-message
 * hashes, which does not depend on which consumer got which message or in what order. */
#include <pthread.h>
#include "wl_common.h"

#define PRODUCERS 2
#define CONSUMERS 2
#define QCAP 256
#define BATCH 16    /* messages moved per lock, as a server drains its socket buffers */

struct msg {
    uint64_t id;
    size_t len;
    unsigned char body[];
};

struct queue {
    pthread_mutex_t lock;
    pthread_cond_t not_empty, not_full;
    struct msg *slot[QCAP];
    size_t head, count;
    int producers_left;
};

static struct queue q = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .not_empty = PTHREAD_COND_INITIALIZER,
    .not_full = PTHREAD_COND_INITIALIZER,
    .producers_left = PRODUCERS,
};
static long per_producer;

/* the filled head, the length and the last byte: cheap, so the allocator dominates */
static uint64_t msg_hash(const struct msg *m)
{
    size_t head = m->len < 64 ? m->len : 64;
    uint64_t h = wl_fnv_bytes(wl_fnv_u64(WL_FNV_INIT, m->id), m->body, head);
    return wl_fnv_u64(h, m->len) + m->body[m->len - 1];
}

static size_t msg_size(uint64_t *rng)
{
    uint64_t r = wl_below(rng, 1000);
    if (r < 700)
        return 16 + (size_t)wl_below(rng, 240);       /* small headers and requests */
    if (r < 990)
        return 256 + (size_t)wl_below(rng, 3840);     /* typical payloads */
    return 4096 + (size_t)wl_below(rng, 60000);       /* occasional large bodies */
}

static void *producer(void *arg)
{
    uint64_t p = (uint64_t)(uintptr_t)arg, rng = 1000 + p;
    struct msg *batch[BATCH];
    long made = 0;

    while (made < per_producer) {
        int n = 0;
        for (; n < BATCH && made < per_producer; n++, made++) {
            size_t len = msg_size(&rng);
            struct msg *m = wl_malloc(sizeof *m + len);
            m->id = p << 40 | (uint64_t)made;
            m->len = len;
            size_t fill = len < 64 ? len : 64;
            for (size_t i = 0; i < fill; i++)
                m->body[i] = (unsigned char)(m->id + i);
            memset(m->body + fill, 0x5a, len - fill);
            batch[n] = m;
        }
        pthread_mutex_lock(&q.lock);
        for (int i = 0; i < n; i++) {
            while (q.count == QCAP)
                pthread_cond_wait(&q.not_full, &q.lock);
            q.slot[(q.head + q.count) % QCAP] = batch[i];
            q.count++;
        }
        pthread_cond_broadcast(&q.not_empty);
        pthread_mutex_unlock(&q.lock);
    }
    pthread_mutex_lock(&q.lock);
    q.producers_left--;
    pthread_cond_broadcast(&q.not_empty);
    pthread_mutex_unlock(&q.lock);
    return NULL;
}

struct consumer_result {
    uint64_t sum, count;
};

static void *consumer(void *arg)
{
    struct consumer_result *res = arg;
    struct msg *batch[BATCH];

    for (;;) {
        int n = 0;
        pthread_mutex_lock(&q.lock);
        while (q.count == 0 && q.producers_left > 0)
            pthread_cond_wait(&q.not_empty, &q.lock);
        while (n < BATCH && q.count > 0) {
            batch[n++] = q.slot[q.head];
            q.head = (q.head + 1) % QCAP;
            q.count--;
        }
        pthread_cond_broadcast(&q.not_full);
        pthread_mutex_unlock(&q.lock);
        if (n == 0)
            return NULL;  /* queue empty and no producer left */
        for (int i = 0; i < n; i++) {
            /* a reply is built and dropped on this thread: same-thread churn too */
            char *reply = wl_malloc(32 + batch[i]->len / 8);
            reply[0] = (char)batch[i]->body[0];
            res->sum += msg_hash(batch[i]) + (unsigned char)reply[0];
            res->count++;
            free(reply);
            free(batch[i]);
        }
    }
}

int main(int argc, char **argv)
{
    pthread_t prod[PRODUCERS], cons[CONSUMERS];
    struct consumer_result res[CONSUMERS] = {{0}};
    uint64_t sum = 0, count = 0;

    per_producer = wl_scaled(wl_scale(argc, argv), 400000);
    for (int i = 0; i < CONSUMERS; i++)
        if (pthread_create(&cons[i], NULL, consumer, &res[i]) != 0)
            return 4;
    for (int i = 0; i < PRODUCERS; i++)
        if (pthread_create(&prod[i], NULL, producer, (void *)(uintptr_t)i) != 0)
            return 4;
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(prod[i], NULL);
    for (int i = 0; i < CONSUMERS; i++) {
        pthread_join(cons[i], NULL);
        sum += res[i].sum;
        count += res[i].count;
    }
    if (count != (uint64_t)per_producer * PRODUCERS) {
        fprintf(stderr, "server: %llu messages consumed, expected %llu\n",
                (unsigned long long)count, (unsigned long long)per_producer * PRODUCERS);
        return 1;
    }
    wl_print_checksum(wl_fnv_u64(wl_fnv_u64(WL_FNV_INIT, count), sum));
    return 0;
}
