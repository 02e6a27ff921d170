/*
 * lru_maintainer.c: the segmented LRU's background thread and the queues
 * that carry reads of COLD items to it (see lru_maintainer.h).
 *
 * Each pass (one "juggle") visits every class whose back-off has run out:
 * TEMP's tail is searched for expired items, then HOT's and WARM's tails
 * are pulled while they are over their share or age (item_pull_tail), and
 * COLD's tail gives active items back to WARM. A class where nothing moved
 * is visited less often (its wait grows by an eighth, up to a second); one
 * where items moved more often; one an item walk is under way in is left
 * alone (storage_walk_in_class). The thread sleeps for the shortest wait,
 * at most 1 ms while reads are queued, and at least 1 ms.
 *
 * Reads: a worker that reads an active COLD item pushes (item, hash) onto
 * its own bounded queue under that queue's mutex, which only the thread
 * draining it ever contends; a full queue drops the read
 * ("lru_bumps_dropped"). The thread takes each entry's item lock and moves
 * the item to WARM if it is still linked and in COLD.
 */
#include "lru_maintainer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "bg_thread.h"
#include "storage_internal.h"

#define SLEEP_MIN_US 1000
#define SLEEP_MAX_US 1000000
#define JUGGLE_PULLS 500 /* tail pulls per class per pass, at most */
#define BUMP_QUEUE_LEN 1024
#define BUMP_BATCH 128

/* ---- tunables ------------------------------------------------------------- */
static _Atomic unsigned hot_share = 20, warm_share = 40;
static pthread_mutex_t factors_lock = PTHREAD_MUTEX_INITIALIZER;
static double hot_age_factor = 0.2, warm_age_factor = 2.0;

void lru_maintainer_tune(unsigned hot_pct, unsigned warm_pct, double hot_factor, double warm_factor)
{
    atomic_store(&hot_share, hot_pct);
    atomic_store(&warm_share, warm_pct);
    pthread_mutex_lock(&factors_lock);
    hot_age_factor = hot_factor;
    warm_age_factor = warm_factor;
    pthread_mutex_unlock(&factors_lock);
}

void lru_maintainer_shares(enum lru_segment seg, unsigned *pct)
{
    *pct = atomic_load_explicit(seg == LRU_HOT ? &hot_share : &warm_share, memory_order_relaxed);
}

/* ---- read queues ------------------------------------------------------------ */
struct bump_entry {
    struct item *it;
    uint64_t hv;
};

struct bump_queue {
    pthread_mutex_t lock;
    struct bump_queue *next; /* registry */
    unsigned first, count;
    struct bump_entry ring[BUMP_QUEUE_LEN];
};

static pthread_mutex_t queues_lock = PTHREAD_MUTEX_INITIALIZER;
static struct bump_queue *queues;
static unsigned queues_generation; /* a shutdown retires every queue */
static _Thread_local struct bump_queue *my_queue;
static _Thread_local unsigned my_generation;

static struct bump_queue *own_queue(void)
{
    unsigned gen = __atomic_load_n(&queues_generation, __ATOMIC_ACQUIRE);
    if (my_queue && my_generation == gen)
        return my_queue;
    struct bump_queue *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    pthread_mutex_init(&q->lock, NULL);
    pthread_mutex_lock(&queues_lock);
    q->next = queues;
    queues = q;
    my_generation = queues_generation;
    pthread_mutex_unlock(&queues_lock);
    my_queue = q;
    return q;
}

bool lru_bump_enqueue(struct item *it, uint64_t hv)
{
    struct bump_queue *q = own_queue();
    if (!q)
        return false;
    bool queued = false;
    pthread_mutex_lock(&q->lock);
    if (q->count < BUMP_QUEUE_LEN) {
        q->ring[(q->first + q->count) % BUMP_QUEUE_LEN] = (struct bump_entry){it, hv};
        q->count++;
        queued = true;
    }
    pthread_mutex_unlock(&q->lock);
    return queued;
}

/* Takes up to BUMP_BATCH entries off q. */
static unsigned take_batch(struct bump_queue *q, struct bump_entry *out)
{
    pthread_mutex_lock(&q->lock);
    unsigned n = q->count < BUMP_BATCH ? q->count : BUMP_BATCH;
    for (unsigned i = 0; i < n; i++)
        out[i] = q->ring[(q->first + i) % BUMP_QUEUE_LEN];
    q->first = (q->first + n) % BUMP_QUEUE_LEN;
    q->count -= n;
    pthread_mutex_unlock(&q->lock);
    return n;
}

bool lru_bumps_drain(void)
{
    struct bump_entry batch[BUMP_BATCH];
    bool any = false;
    /* Queues are only ever added at the head (and freed at shutdown, with
     * the thread stopped), so the list is walked from a snapshot without
     * queues_lock: a worker may take that lock while holding an item
     * lock, which item_bump_apply() takes. */
    pthread_mutex_lock(&queues_lock);
    struct bump_queue *first = queues;
    pthread_mutex_unlock(&queues_lock);
    for (struct bump_queue *q = first; q; q = q->next) {
        unsigned n;
        while ((n = take_batch(q, batch)) > 0) {
            any = true;
            for (unsigned i = 0; i < n; i++)
                item_bump_apply(batch[i].it, batch[i].hv);
        }
    }
    return any;
}

void lru_bumps_shutdown(void)
{
    lru_bumps_drain();
    pthread_mutex_lock(&queues_lock);
    while (queues) {
        struct bump_queue *q = queues;
        queues = q->next;
        pthread_mutex_destroy(&q->lock);
        free(q);
    }
    __atomic_add_fetch(&queues_generation, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&queues_lock);
}

/* ---- juggling ------------------------------------------------------------------ */
static atomic_uint_fast64_t juggles;

/* Bytes and tail age of one list (its lock taken briefly). */
static uint64_t list_bytes(unsigned cls, enum lru_segment seg, rel_time_t *age)
{
    struct lru_list *l = lru_of(cls, seg);
    rel_time_t now = clock_now();
    lru_lock(l);
    uint64_t bytes = l->n.bytes;
    struct item *tail = lru_tail_item(l);
    rel_time_t t = tail ? item_time_load(&tail->time) : now;
    lru_unlock(l);
    if (age)
        *age = t < now ? now - t : 0;
    return bytes;
}

/* One class's turn; returns how many rounds moved or reclaimed items. */
static int juggle(unsigned cls)
{
    int did = 0;
    if (storage_walk_in_class(cls))
        return 0; /* a dump is walking it: left as it is until the walk moves on */
    if (__atomic_load_n(&storage_rt.temp_lru, __ATOMIC_RELAXED)) {
        for (int i = 0; i < JUGGLE_PULLS && item_pull_tail(cls, LRU_TEMP, 0, 0, 0) > 0; i++)
            did++;
    }
    bool segmented = __atomic_load_n(&storage_rt.lru_segmented, __ATOMIC_RELAXED);
    uint64_t total = 0;
    rel_time_t hot_age = 0, warm_age = 0;
    if (segmented) { /* flat: limits of 0 drain HOT and WARM into COLD */
        rel_time_t cold_age;
        total = list_bytes(cls, LRU_COLD, &cold_age) + list_bytes(cls, LRU_HOT, NULL) +
                list_bytes(cls, LRU_WARM, NULL);
        pthread_mutex_lock(&factors_lock);
        hot_age = (rel_time_t)(cold_age * hot_age_factor);
        warm_age = (rel_time_t)(cold_age * warm_age_factor);
        pthread_mutex_unlock(&factors_lock);
    }
    for (int i = 0; i < JUGGLE_PULLS; i++) {
        int moved = 0;
        if (item_pull_tail(cls, LRU_HOT, total, 0, hot_age) > 0 ||
            item_pull_tail(cls, LRU_WARM, total, 0, warm_age) > 0)
            moved++;
        if (segmented)
            moved += item_pull_tail(cls, LRU_COLD, 0, 0, 0);
        if (moved == 0)
            break;
        did++;
    }
    return did;
}

/* ---- the thread ------------------------------------------------------------------ */
static struct bg_thread maintainer = BG_THREAD_INIT;

static void *maintainer_main(void *arg)
{
    (void)arg;
    static unsigned wait_left[SLAB_CLASSES_MAX], backoff[SLAB_CLASSES_MAX];
    for (unsigned c = 0; c < SLAB_CLASSES_MAX; c++)
        wait_left[c] = backoff[c] = 0;
    unsigned to_sleep = SLEEP_MIN_US;
    /* At least 1 ms between passes (memcached does not sleep when a class
     * is busy): with a steady trickle of sets the thread would otherwise
     * spin on a core the workers need, for a few moves per pass; 1,000
     * passes of up to 500 moves per class each are far more than the sets
     * that make the moves. The thread takes no requests, so it naps
     * without its lock: one system call per pass. */
    for (;;) {
        unsigned slept = to_sleep > SLEEP_MIN_US ? to_sleep : SLEEP_MIN_US;
        if (!bg_thread_nap_us(&maintainer, slept))
            break;
        /* (the time counted, as memcached counts a sleep of 0 as 1 ms) */
        to_sleep = SLEEP_MAX_US;
        atomic_fetch_add(&juggles, 1);
        for (unsigned c = 1; c <= storage_rt.largest_class; c++) {
            wait_left[c] = wait_left[c] > slept ? wait_left[c] - slept : 0;
            if (wait_left[c] == 0) {
                if (juggle(c) == 0) {
                    backoff[c] = backoff[c] ? backoff[c] + backoff[c] / 8 : SLEEP_MIN_US;
                    if (backoff[c] > SLEEP_MAX_US)
                        backoff[c] = SLEEP_MAX_US;
                } else {
                    backoff[c] /= 2;
                    if (backoff[c] < SLEEP_MIN_US)
                        backoff[c] = 0;
                }
                wait_left[c] = backoff[c];
            }
            if (wait_left[c] < to_sleep)
                to_sleep = wait_left[c];
        }
        if (lru_bumps_drain() && to_sleep > SLEEP_MIN_US)
            to_sleep = SLEEP_MIN_US;
    }
    return NULL;
}

int lru_maintainer_start(void)
{
    return bg_thread_start(&maintainer, maintainer_main);
}

void lru_maintainer_stop(void)
{
    bg_thread_stop(&maintainer);
}

bool lru_maintainer_running(void)
{
    return bg_thread_running(&maintainer);
}

uint64_t lru_maintainer_juggles(void)
{
    return atomic_load(&juggles);
}

void lru_maintainer_stats_reset(void)
{
    atomic_store(&juggles, 0);
}
