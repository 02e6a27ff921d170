/*
 * crawler.c: walks the LRUs and reclaims dead (expired or flushed) items.
 *
 * A pass over one class walks each of its segment lists (HOT, WARM, COLD,
 * TEMP) in turn. A walk of one list puts a marker item (one with no key) at the tail
 * and moves it one step towards the head at a time, examining the item it
 * passes. The marker keeps the crawler's place while the LRU lock is given
 * up between batches, so workers are never blocked for long; other LRU
 * walkers skip markers. Item locks are only tried (the LRU lock is held),
 * never waited for. The same marker walk, resumable (storage_walk_*: the
 * marker stays in the list between steps), hands live items to metadump and
 * cachedump, with no lock held during each call. This file does
 * not allocate or evict.
 */
#include "crawler.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "bg_thread.h"
#include "assoc.h"
#include "lru.h"
#include "storage_internal.h"

#define CRAWL_BATCH 256       /* items examined per LRU lock hold */
#define INTERVAL_MAX 600      /* seconds between passes over a class, at most */
#define WALK_BUSY_RETRIES 100 /* an item walk skips an item whose lock stays busy */

/* Background schedule per class: a class whose last pass found nothing to
 * reclaim is visited half as often next time (up to INTERVAL_MAX); one
 * where a tenth or more of the items were dead is visited twice as often
 * (down to the base interval). */
static rel_time_t class_interval[SLAB_CLASSES_MAX];
static atomic_uint_fast64_t passes_started;
static atomic_bool pass_running;
/* A requested pass not yet finished: counted as running from the request
 * on, as memcached reports a crawl it has accepted, so a client that waits
 * for lru_crawler_running to drop does not see it drop before the pass. */
static atomic_bool pass_pending;
static rel_time_t class_due[SLAB_CLASSES_MAX];

static pthread_mutex_t pass_lock = PTHREAD_MUTEX_INITIALIZER; /* one pass at a time */
static struct bg_thread crawler = BG_THREAD_INIT;
static bool all_requested; /* crawl every class at the next wake (crawler's lock) */

/* One pass over list l; adds the items checked and reclaimed. */
static void crawl_list(struct lru_list *l, struct item *marker, uint64_t *checked,
                       uint64_t *reclaimed)
{
    uint64_t start = *checked;
    lru_lock(l);
    if (!l->tail) {
        lru_unlock(l);
        return;
    }
    /* Marker goes after the tail. */
    marker->next = NULL;
    marker->prev = l->tail;
    l->tail->next = marker;
    l->tail = marker;

    unsigned batch = 0;
    unsigned limit = __atomic_load_n(&storage_rt.crawler_tocrawl, __ATOMIC_RELAXED);
    for (;;) {
        struct item *it = marker->prev;
        if (!it || (limit && *checked - start >= limit))
            break;
        lru_remove(l, marker);
        lru_insert_before(l, it, marker);
        if (item_is_marker(it))
            continue;
        l->n.crawler_items_checked++;
        (*checked)++;
        uint64_t hv = assoc_hash(it->data, it->nkey);
        if (assoc_trylock(hv)) {
            if (item_is_dead(it, clock_now())) {
                l->n.crawler_reclaimed++;
                (*reclaimed)++;
                item_unlink_lru_locked(it, l, hv);
            }
            assoc_unlock(hv);
        }
        if (++batch == CRAWL_BATCH) {
            batch = 0;
            lru_unlock(l);
            unsigned pause = __atomic_load_n(&storage_rt.crawler_sleep_us, __ATOMIC_RELAXED);
            if (pause)
                usleep(pause);
            lru_lock(l);
        }
    }
    lru_remove(l, marker);
    lru_unlock(l);
}

/* One pass over class cls (every segment); returns items checked and
 * reclaimed. */
static void crawl_class(unsigned cls, struct item *marker, uint64_t *checked, uint64_t *reclaimed)
{
    *checked = *reclaimed = 0;
    for (unsigned seg = 0; seg < LRU_SEGMENTS; seg++)
        crawl_list(lru_of(cls, seg), marker, checked, reclaimed);
}

/* ---- resumable item walks (metadump, cachedump) -------------------------------- */
/* A walk visits the lists of the selected classes one after another (each
 * class's segments in order, or only its COLD list), keeping its place with
 * a marker item linked in the list being walked. Items the LRU maintainer
 * moves between segments meanwhile may be seen twice or not at all, as in
 * memcached's own dumps. */
struct storage_walk {
    struct item *marker; /* linked in list `pos` while that list is under way */
    bool classes[SLAB_CLASSES_MAX];
    unsigned pos; /* class * LRU_SEGMENTS + segment being walked or last walked */
    bool cold_only;
    bool linked;
    bool newest_first;
    bool done;
};

/* Walks whose marker is linked in one of a class's lists. */
static atomic_uint walks_in_class[SLAB_CLASSES_MAX];

bool storage_walk_in_class(unsigned cls)
{
    return cls < SLAB_CLASSES_MAX &&
           atomic_load_explicit(&walks_in_class[cls], memory_order_relaxed);
}

static struct lru_list *walk_list(const struct storage_walk *w)
{
    return lru_of(w->pos / LRU_SEGMENTS, (enum lru_segment)(w->pos % LRU_SEGMENTS));
}

struct storage_walk *storage_walk_open(const bool *classes, unsigned nclasses, bool newest_first,
                                       bool cold_only)
{
    struct storage_walk *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->marker = calloc(1, sizeof(*w->marker));
    if (!w->marker) {
        free(w);
        return NULL;
    }
    for (unsigned c = 1; c < SLAB_CLASSES_MAX && c < nclasses; c++)
        w->classes[c] = classes[0] || classes[c];
    w->newest_first = newest_first;
    w->cold_only = cold_only;
    w->pos = LRU_SEGMENTS - 1; /* the last list of class 0: the next is class 1's first */
    return w;
}

/* Links the marker at the start of the next selected list that holds
 * items; false when no list is left. */
static bool walk_enter_next_list(struct storage_walk *w)
{
    unsigned end = (storage_rt.largest_class + 1) * LRU_SEGMENTS;
    if (end > SLAB_CLASSES_MAX * LRU_SEGMENTS)
        end = SLAB_CLASSES_MAX * LRU_SEGMENTS;
    for (unsigned p = w->pos + 1; p < end; p++) {
        w->pos = p;
        if (!w->classes[p / LRU_SEGMENTS] || (w->cold_only && p % LRU_SEGMENTS != LRU_COLD))
            continue;
        struct lru_list *l = walk_list(w);
        lru_lock(l);
        if (!l->head) {
            lru_unlock(l);
            continue;
        }
        if (w->newest_first) {
            lru_insert_before(l, l->head, w->marker);
        } else {
            w->marker->next = NULL;
            w->marker->prev = l->tail;
            l->tail->next = w->marker;
            l->tail = w->marker;
        }
        w->linked = true;
        atomic_fetch_add(&walks_in_class[p / LRU_SEGMENTS], 1);
        lru_unlock(l);
        return true;
    }
    return false;
}

/* With list l's lock held: moves the marker past the next item and returns
 * that item (NULL at the end of the list). */
static struct item *walk_advance(struct storage_walk *w, struct lru_list *l)
{
    struct item *it = w->newest_first ? w->marker->next : w->marker->prev;
    if (!it)
        return NULL;
    lru_remove(l, w->marker);
    if (w->newest_first)
        lru_insert_after(l, it, w->marker);
    else
        lru_insert_before(l, it, w->marker);
    return it;
}

/* With the list's lock held: puts the marker back in front of it, the item
 * it was just moved past. */
static void walk_retreat(struct storage_walk *w, struct lru_list *l, struct item *it)
{
    lru_remove(l, w->marker);
    if (w->newest_first)
        lru_insert_before(l, it, w->marker);
    else
        lru_insert_after(l, it, w->marker);
}

unsigned storage_walk_step(struct storage_walk *w, unsigned max, storage_item_fn fn, void *ctx)
{
    unsigned visited = 0, busy = 0;
    while (!w->done && visited < max) {
        if (!w->linked && !walk_enter_next_list(w)) {
            w->done = true;
            break;
        }
        struct lru_list *l = walk_list(w);
        lru_lock(l);
        struct item *held = NULL;
        struct item *it;
        while (!held && (it = walk_advance(w, l)) != NULL) {
            if (item_is_marker(it))
                continue;
            uint64_t hv = assoc_hash(it->data, it->nkey);
            if (!assoc_trylock(hv)) {
                /* the item's lock is busy (the LRU lock comes after it, so
                 * no waiting here): try it again shortly, a few times */
                if (busy++ < WALK_BUSY_RETRIES) {
                    walk_retreat(w, l, it);
                    break;
                }
                busy = 0; /* skipped */
                continue;
            }
            busy = 0;
            held = item_ref_if_live(it);
            assoc_unlock(hv);
        }
        if (!held && it) { /* an item was busy: let its holder finish */
            lru_unlock(l);
            sched_yield();
            continue;
        }
        if (!held) { /* the list is done */
            lru_remove(l, w->marker);
            w->linked = false;
            atomic_fetch_sub(&walks_in_class[w->pos / LRU_SEGMENTS], 1);
            lru_unlock(l);
            continue;
        }
        lru_unlock(l);
        items_forget_prior();
        fn(ctx, held);
        item_release(held);
        visited++;
    }
    return visited;
}

bool storage_walk_done(const struct storage_walk *w)
{
    return w->done;
}

void storage_walk_close(struct storage_walk *w)
{
    if (!w)
        return;
    if (w->linked) {
        struct lru_list *l = walk_list(w);
        lru_lock(l);
        lru_remove(l, w->marker);
        atomic_fetch_sub(&walks_in_class[w->pos / LRU_SEGMENTS], 1);
        lru_unlock(l);
    }
    free(w->marker);
    free(w);
}

void storage_walk_items(unsigned cls, unsigned limit, storage_item_fn fn, void *ctx)
{
    bool classes[SLAB_CLASSES_MAX] = {false};
    if (cls >= SLAB_CLASSES_MAX)
        return;
    classes[cls] = true; /* 0: every class */
    struct storage_walk *w = storage_walk_open(classes, SLAB_CLASSES_MAX, false, false);
    if (!w)
        return;
    storage_walk_step(w, limit ? limit : UINT_MAX, fn, ctx);
    storage_walk_close(w);
}

void storage_walk_cold_items(unsigned cls, storage_item_fn fn, void *ctx)
{
    bool classes[SLAB_CLASSES_MAX] = {false};
    if (cls < 1 || cls >= SLAB_CLASSES_MAX)
        return;
    classes[cls] = true;
    struct storage_walk *w = storage_walk_open(classes, SLAB_CLASSES_MAX, false, true);
    if (!w)
        return;
    storage_walk_step(w, UINT_MAX, fn, ctx);
    storage_walk_close(w);
}

/* Crawls every class (all = true) or only those due by the schedule. */
static void crawl(bool all)
{
    struct item *marker = calloc(1, sizeof(*marker));
    if (!marker)
        return;
    pthread_mutex_lock(&pass_lock);
    atomic_fetch_add(&passes_started, 1);
    atomic_store(&pass_running, true);
    for (unsigned cls = 1; cls <= storage_rt.largest_class; cls++) {
        rel_time_t now = clock_now();
        if (!all && __atomic_load_n(&class_due[cls], __ATOMIC_RELAXED) > now)
            continue;
        uint64_t checked, reclaimed;
        crawl_class(cls, marker, &checked, &reclaimed);
        rel_time_t base = storage_rt.crawler_interval_s;
        rel_time_t iv = __atomic_load_n(&class_interval[cls], __ATOMIC_RELAXED);
        if (iv == 0)
            iv = base;
        if (reclaimed == 0)
            iv = iv * 2 > INTERVAL_MAX ? INTERVAL_MAX : iv * 2;
        else if (reclaimed * 10 >= checked)
            iv = iv / 2 < base ? base : iv / 2;
        __atomic_store_n(&class_interval[cls], iv, __ATOMIC_RELAXED);
        __atomic_store_n(&class_due[cls], clock_now() + iv, __ATOMIC_RELAXED);
    }
    atomic_store(&pass_running, false);
    pthread_mutex_unlock(&pass_lock);
    free(marker);
}

void crawler_stats(uint64_t *starts, bool *running_now)
{
    *starts = atomic_load(&passes_started);
    *running_now = atomic_load(&pass_running) || atomic_load(&pass_pending);
}

bool crawler_request_all(void)
{
    bg_thread_lock(&crawler);
    bool queued = crawler.running && !bg_thread_stopping(&crawler);
    if (queued) {
        atomic_store(&pass_pending, true);
        all_requested = true;
        bg_thread_wake(&crawler);
    }
    bg_thread_unlock(&crawler);
    return queued;
}

void crawler_run_once(void)
{
    crawl(true);
}

static void *crawler_main(void *arg)
{
    (void)arg;
    bg_thread_lock(&crawler);
    while (!bg_thread_stopping(&crawler)) {
        struct timespec until = bg_thread_deadline_us(1000000);
        while (!bg_thread_stopping(&crawler) && !all_requested &&
               bg_thread_wait_until(&crawler, &until)) {
        }
        if (bg_thread_stopping(&crawler))
            break;
        bool all = all_requested;
        all_requested = false;
        bg_thread_unlock(&crawler);
        crawl(all);
        bg_thread_lock(&crawler);
        if (all && !all_requested) /* no other request came meanwhile */
            atomic_store(&pass_pending, false);
    }
    atomic_store(&pass_pending, false);
    bg_thread_unlock(&crawler);
    return NULL;
}

void crawler_visit_all_at(rel_time_t when)
{
    rel_time_t at = when + 1;
    for (unsigned cls = 1; cls < SLAB_CLASSES_MAX; cls++) {
        if (__atomic_load_n(&class_due[cls], __ATOMIC_RELAXED) > at)
            __atomic_store_n(&class_due[cls], at, __ATOMIC_RELAXED);
        __atomic_store_n(&class_interval[cls], 0, __ATOMIC_RELAXED);
    }
}

int crawler_start(void)
{
    pthread_mutex_lock(&pass_lock);
    for (unsigned cls = 0; cls < SLAB_CLASSES_MAX; cls++) {
        __atomic_store_n(&class_interval[cls], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&class_due[cls], clock_now() + storage_rt.crawler_interval_s,
                         __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&pass_lock);
    return bg_thread_start(&crawler, crawler_main);
}

void crawler_stop(void)
{
    bg_thread_stop(&crawler);
}
