/*
 * lru.h: the LRU lists of each slab class, one per segment (HOT, WARM,
 * COLD, TEMP), with each list's item counters. A list is doubly linked
 * through the items' next/prev (head = most recently linked or moved).
 * Every list has its own mutex; callers that walk or change a list hold
 * it, and never hold two list locks at once. Which segment an item enters
 * and when it moves is decided in items.c and lru_maintainer.c; this file
 * only keeps the lists and the numbers.
 * Lock order: item lock, then one LRU list lock, then slab lock.
 */
#ifndef MCR_LRU_H
#define MCR_LRU_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "clock.h"
#include "slabs.h"

struct item;

/* memcached's segments. A flat LRU (lru_segmented off) keeps everything
 * in COLD, as memcached's flat mode does. */
enum lru_segment { LRU_HOT, LRU_WARM, LRU_COLD, LRU_TEMP, LRU_SEGMENTS };

/* Counters kept per list under the list's lock. The "reset" ones are
 * zeroed by "stats reset"; curr_items and bytes are not. A list's
 * curr_items and bytes follow the items moving between segments; what the
 * table holds is counted apart (lru_linked_*), so that a move never shows
 * in it. */
struct lru_counters {
    uint64_t curr_items;
    uint64_t bytes; /* sum of the items' sizes (item_ntotal) */
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
    uint64_t moves_to_cold;    /* HOT or WARM tail -> COLD */
    uint64_t moves_to_warm;    /* active HOT tail or active COLD item -> WARM */
    uint64_t moves_within_lru; /* active WARM tail -> WARM head */
    uint64_t direct_reclaims;
};

struct lru_list {
    pthread_mutex_t lock;
    struct item *head;
    struct item *tail;
    struct lru_counters n;
};

/* One class's lists summed, and what each segment holds. */
struct lru_class_stats {
    struct lru_counters sum;            /* evicted_time: COLD's; curr_items
                                           and bytes: the class's linked
                                           items (lru_linked_change) */
    uint64_t items[LRU_SEGMENTS];       /* curr_items per segment */
    uint64_t bytes[LRU_SEGMENTS];       /* bytes per segment */
    rel_time_t tail_time[LRU_SEGMENTS]; /* of its tail item, when it has */
    bool has_tail[LRU_SEGMENTS];        /* one */
};

void lru_init(void);
void lru_shutdown(void);

struct lru_list *lru_of(unsigned cls, enum lru_segment seg);
void lru_lock(struct lru_list *l);
bool lru_trylock(struct lru_list *l);
void lru_unlock(struct lru_list *l);

/* With the list's lock held: */
void lru_push_head(struct lru_list *l, struct item *it);
void lru_remove(struct lru_list *l, struct item *it);
/* Puts it just before `before` (towards the head); used by the crawler to
 * step its marker. */
void lru_insert_before(struct lru_list *l, struct item *before, struct item *it);
/* The last real (non-marker) item, or NULL. */
struct item *lru_tail_item(const struct lru_list *l);
/* Puts it just after `after` (towards the tail). */
void lru_insert_after(struct lru_list *l, struct item *after, struct item *it);

/* Items in the table, per class and in all (curr_items and the "bytes"
 * stat, as memcached's counters changed at do_item_link and
 * do_item_unlink): changed only where an item is linked (+1, its size) or
 * unlinked (-1, minus its size), never by moves between segments. */
void lru_linked_change(unsigned cls, int64_t items, int64_t bytes);
/* One item replacing another in the table at once (a store over a key, a
 * value moving to flash): each class changes, the totals only by the
 * difference in size, so no reader sees the key counted twice or not at
 * all. */
void lru_linked_replace(unsigned old_cls, uint64_t old_bytes, unsigned new_cls, uint64_t new_bytes);
void lru_linked_totals(uint64_t *items, uint64_t *bytes);

/* Copies one class's counters (takes each list's lock in turn). */
void lru_class_stats_get(unsigned cls, struct lru_class_stats *out);
/* Seconds since the class's least recently used item (over all segments)
 * was stored or bumped; 0 when it holds none. */
rel_time_t lru_class_age(const struct lru_class_stats *st, rel_time_t now);
void lru_counters_reset(void);

#endif
