/*
 * storage_internal.h: what the storage engine's files share with each
 * other and nobody else: the effective settings, the item lifecycle hooks
 * the crawler needs, and the per-thread hit counters.
 */
#ifndef MCR_STORAGE_INTERNAL_H
#define MCR_STORAGE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "item_layout.h"
#include "items.h"
#include "lru.h"

/* Effective settings (defaults filled in) and derived sizes. */
struct storage_runtime {
    struct storage_config cfg;
    size_t chunk_max; /* size of the largest slab class */
    unsigned largest_class;
    unsigned lock_power;
    unsigned crawler_sleep_us;   /* pause between crawl batches */
    unsigned crawler_tocrawl;    /* items per LRU list per pass, 0 = all */
    unsigned crawler_interval_s; /* between background passes */
    /* Segmented LRU switches, read with __atomic loads: "lru mode" and
     * "lru temp_ttl" change them at run time. */
    bool lru_segmented;
    bool temp_lru;
    int temporary_ttl;
};
extern struct storage_runtime storage_rt;

/* ---- items.c ------------------------------------------------------------ */
void items_init(void);
/* Expired or flushed at `now` (item lock held, or item referenced). */
bool item_is_dead(const struct item *it, rel_time_t now);
/* Unlinks a linked item; the caller holds its item lock and the lock of
 * l, the list holding it. May free the item. */
void item_unlink_lru_locked(struct item *it, struct lru_list *l, uint64_t hv);
/* With the item lock held: unlinks it if linked (and drops the table's
 * reference); puts new_it in old's place (a new CAS, HOT). */
void unlink_item(struct item *it, uint64_t hv);
void replace_item(struct item *old, struct item *new_it, uint64_t hv);
/* The item's size as the "bytes" stat counts it. */
size_t item_ntotal(const struct item *it);
/* One more reference (the item's lock held, or a reference already held). */
void item_ref(struct item *it);
/* Tells the eviction observer, if any, about it (its locks held). */
void item_report_eviction(const struct item *it, unsigned cls, rel_time_t now);
/* Value chunks of a chunked value of nbytes. */
size_t chunk_count(size_t nbytes);
/* The class of the chunk holding the item's header; the class whose LRU
 * holds the item; the class of value chunk i of n. */
unsigned item_chunk_class(const struct item *it);
unsigned item_lru_class(const struct item *it);
unsigned value_chunk_class(const struct item *it, size_t i, size_t n);
/* Frees the item's chunks (or its flash record) and header. */
void item_free(struct item *it);
/* Unlinks a linked item from the table and from l (both locks held). */
void unlink_common(struct item *it, struct lru_list *l, uint64_t hv);

/* ---- item_alloc.c ---------------------------------------------------------- */
/* memcached's size of such an item, against which -I is checked. */
size_t memcached_item_size(size_t nkey, uint32_t flags, size_t nbytes);
/* The chunk holding an item's header (header bytes of it), filled with
 * key, flags, exptime and length; *cls is the class it came from. */
struct item *alloc_header(const char *key, size_t nkey, uint32_t flags, rel_time_t exptime,
                          size_t nbytes, size_t header, bool chunked, unsigned *cls);
/* A new unlinked item (header and value chunks), evicting when memory is
 * full; NULL with *why set when it cannot be had. */
struct item *alloc_item(const char *key, size_t nkey, uint32_t flags, rel_time_t exptime,
                        size_t nbytes, enum alloc_result *why);

/* ---- item_lru.c ------------------------------------------------------------ */
/* Whether new items enter HOT (segmented) or COLD (flat). */
bool lru_is_segmented(void);
/* The list holding a linked item (its item lock held: the segment is
 * stable). */
struct lru_list *item_list(const struct item *it);
/* With l's lock held: it enters at l's head / leaves l, counted. */
void item_list_add(struct lru_list *l, struct item *it);
void item_list_del(struct lru_list *l, struct item *it);
/* A newly linked item enters HOT, TEMP or (flat) COLD (item lock held). */
void item_enter_lru(struct item *it);
/* memcached's do_item_update (item lock held). */
void item_update(struct item *it, rel_time_t now);
/* Marks a read, as memcached's do_item_bump (item lock held). */
void item_mark_fetched(struct item *it, uint64_t hv);
/* Looks at up to 5 items at the tail of one list of class cls, as
 * memcached's lru_pull_tail: dead items are reclaimed from any segment;
 * HOT and WARM tails move on (active ones to WARM, others to COLD) while
 * the segment holds more than its share of total_bytes or its tail is
 * older than max_age; COLD's tail is evicted with PULL_EVICT, otherwise
 * moved to WARM when active. Returns how many items were reclaimed,
 * evicted or moved. */
enum { PULL_EVICT = 1 };
int item_pull_tail(unsigned cls, enum lru_segment seg, uint64_t total_bytes, unsigned flags,
                   rel_time_t max_age);
/* Whether an item walk (metadump, cachedump) is under way in one of class
 * cls's lists: the LRU maintainer leaves such a class as it is meanwhile,
 * so that a streamed dump lists each item once (items it moved between
 * segments behind the walk's marker would be listed twice, or not at all). */
bool storage_walk_in_class(unsigned cls);
/* For the LRU maintainer: applies a queued read of an active COLD item
 * (moves it to WARM) and drops the queue's reference. */
void item_bump_apply(struct item *it, uint64_t hv);
void items_set_oldest_live(rel_time_t when);
/* Handles this thread is given from now on (item walks) report the item
 * as it is, not as it was before this thread's latest lookup. */
void items_forget_prior(void);
/* The flush_all boundary ("oldest" in stats settings), 0 = none. */
rel_time_t items_oldest_live(void);
/* The last CAS unique handed out. */
uint64_t items_cas_now(void);
/* For the slab mover, which holds the chunk's slab class lock: when chunk
 * is a linked item nobody else references, unlinks it (only trying locks)
 * and returns it, to be given to item_free_taken() once the class lock is
 * released; otherwise NULL. */
/* The slab mover, for an item in a page being emptied (its class lock
 * held): unlinks it when nobody references it (MOVE_LIVE or MOVE_DEAD),
 * or, when it is live and spare(spare_arg) gives a free chunk of its class
 * elsewhere, copies it there in its place (MOVE_RESCUED): the table and its
 * LRU then hold the copy. The item returned (NULL: MOVE_BUSY, in use) is
 * freed with item_free_taken after the class lock is released. */
enum move_take { MOVE_BUSY, MOVE_LIVE, MOVE_DEAD, MOVE_RESCUED, MOVE_CHUNK_RESCUED };
struct item *item_take_for_move(void *chunk, enum move_take *how, void *(*spare)(void *),
                                void *spare_arg);
void item_free_taken(struct item *it, enum move_take how);
/* The same for a value chunk in that page, `owner` the hint slabs.h keeps:
 * when the owner is linked and nobody else references it, either copies
 * the chunk into spare(spare_arg, owner), a free chunk of the class, and
 * points the owner's chunk table at it (MOVE_CHUNK_RESCUED: the old chunk
 * is then the caller's to free with slabs_free_value), or, with no spare
 * chunk, unlinks the owner (MOVE_LIVE or MOVE_DEAD) and returns it for
 * item_free_taken. MOVE_BUSY (NULL): try again later. */
struct item *item_take_value_chunk(void *chunk, void *owner, enum move_take *how,
                                   void *(*spare)(void *, void *), void *spare_arg);
/* With it's item lock held: takes a reference when it is linked, not
 * expired and not flushed; NULL otherwise. */
struct item *item_ref_if_live(struct item *it);

/* ---- storage_stats.c ------------------------------------------------------ */
enum class_counter {
    CC_GET_HITS,
    CC_CMD_SET,
    CC_DELETE_HITS,
    CC_INCR_HITS,
    CC_DECR_HITS,
    CC_CAS_HITS,
    CC_CAS_BADVAL,
    CC_TOUCH_HITS,
    CC_HITS_TO_HOT,  /* get hits by the segment holding the item, */
    CC_HITS_TO_WARM, /* in enum lru_segment's order */
    CC_HITS_TO_COLD,
    CC_HITS_TO_TEMP,
    CC_COUNT
};
enum thread_counter { TC_GET_EXPIRED, TC_GET_FLUSHED, TC_BUMPS_DROPPED, TC_COUNT };
void tstat_class_incr(unsigned cls, enum class_counter which);
/* A get hit: CC_GET_HITS and the hits_to_* counter of segment seg. */
void tstat_get_hit(unsigned cls, unsigned seg);
void tstat_incr(enum thread_counter which);
void tstats_init(void);
/* Item size histogram ("stats sizes"): called when an item with unique
 * cas and size ntotal is linked (added) or unlinked. */
void tstat_size_change(uint64_t cas, size_t ntotal, bool added);
void tstats_shutdown(void);

#endif
