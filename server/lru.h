/*
 * lru.h: one LRU list per slab class, with that class's item counters.
 * The list is doubly linked through the items' next/prev (head = most
 * recently stored or bumped). Each class has its own mutex; callers that
 * walk or change a list hold it. Eviction and reclaim policy lives in
 * items.c and crawler.c; this file only keeps the lists and the numbers.
 * Lock order: item lock, then LRU lock, then slab lock.
 */
#ifndef MCR_LRU_H
#define MCR_LRU_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "clock.h"
#include "slabs.h"

struct item;

/* Counters kept per class under the class's LRU lock. The "reset" ones
 * are zeroed by "stats reset"; curr_items and bytes are not. */
struct lru_counters {
    uint64_t curr_items;
    uint64_t bytes; /* sum of linked items' sizes (the "bytes" stat) */
    /* reset by stats reset: */
    uint64_t total_items;
    uint64_t evicted;
    uint64_t evicted_nonzero;
    uint64_t evicted_unfetched;
    uint64_t evicted_active;
    rel_time_t evicted_time; /* age of the last evicted item */
    uint64_t reclaimed;
    uint64_t expired_unfetched;
    uint64_t outofmemory;
    uint64_t crawler_reclaimed;
    uint64_t crawler_items_checked;
    uint64_t lrutail_reflocked;
    uint64_t moves_within_lru; /* read items given a second chance */
    uint64_t direct_reclaims;
};

struct lru_list {
    pthread_mutex_t lock;
    struct item *head;
    struct item *tail;
    struct lru_counters n;
};

void lru_init(void);
void lru_shutdown(void);

struct lru_list *lru_of(unsigned cls);
void lru_lock(unsigned cls);
bool lru_trylock(unsigned cls);
void lru_unlock(unsigned cls);

/* With the class's LRU lock held: */
void lru_push_head(struct lru_list *l, struct item *it);
void lru_remove(struct lru_list *l, struct item *it);
/* Puts it just before `before` (towards the head); used by the crawler to
 * step its marker. */
void lru_insert_before(struct lru_list *l, struct item *before, struct item *it);
/* Puts it just after `after` (towards the tail). */
void lru_insert_after(struct lru_list *l, struct item *after, struct item *it);

/* Copies one class's counters (takes the lock). */
void lru_counters_get(unsigned cls, struct lru_counters *out, rel_time_t *tail_time);
void lru_counters_reset(void);

#endif
