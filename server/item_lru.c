/*
 * item_lru.c: where items sit in their class's LRU segments and how they
 * move between them, as memcached 1.6's segmented LRU (doc/storage.md):
 * the segment a new item enters, the marks a read leaves (FETCHED, then
 * ACTIVE, a COLD item's read queued for the maintainer), memcached's
 * do_item_update, the tail pulls that reclaim, move and evict (for the
 * allocator and the LRU maintainer), and the COLD tail a flash writer
 * takes items from. The item lifecycle itself (linking, lookups, stores)
 * is items.c's.
 */
#include <stdatomic.h>

#include "assoc.h"
#include "lru.h"
#include "lru_maintainer.h"
#include "storage_internal.h"

#define BUMP_INTERVAL 60 /* flat mode: seconds between LRU moves of one item */
#define TAIL_SEARCH 5    /* items examined per tail pull */
/* An evicting pull steps past up to this many referenced tail items
 * without counting them against TAIL_SEARCH: a flash writer holds a batch
 * of COLD's tail while it copies their values (flash.c), and an
 * allocation must still find the evictable items behind them. */
#define EVICT_SKIP_REFERENCED 128

bool lru_is_segmented(void)
{
    return __atomic_load_n(&storage_rt.lru_segmented, __ATOMIC_RELAXED);
}

/* The list holding a linked item (its item lock held: the segment is
 * stable). */
struct lru_list *item_list(const struct item *it)
{
    return lru_of(item_class(it), item_segment(it));
}

/* With l's lock held: it enters at l's head / leaves l, counted. */
void item_list_add(struct lru_list *l, struct item *it)
{
    lru_push_head(l, it);
    l->n.curr_items++;
    l->n.bytes += item_ntotal(it);
}

void item_list_del(struct lru_list *l, struct item *it)
{
    lru_remove(l, it);
    l->n.curr_items--;
    l->n.bytes -= item_ntotal(it);
}

/* Puts an item that is in no list at the head of segment seg's list (its
 * item lock held). */
static struct lru_list *relink_to(struct item *it, enum lru_segment seg)
{
    struct lru_list *l = lru_of(item_class(it), seg);
    item_set_segment(it, seg);
    lru_lock(l);
    item_list_add(l, it);
    lru_unlock(l);
    return l;
}

/* The segment a newly stored item enters, as memcached chooses it: TEMP
 * for a TTL of at most temporary_ttl (when on), else HOT, or COLD when the
 * LRU is flat. */
static enum lru_segment entry_segment(const struct item *it)
{
    if (__atomic_load_n(&storage_rt.temp_lru, __ATOMIC_RELAXED)) {
        rel_time_t exp = item_time_load(&it->exptime);
        unsigned ttl = (unsigned)__atomic_load_n(&storage_rt.temporary_ttl, __ATOMIC_RELAXED);
        if (exp != 0 && exp - clock_now() <= ttl) /* unsigned, as memcached's */
            return LRU_TEMP;
    }
    return lru_is_segmented() ? LRU_HOT : LRU_COLD;
}

/* A newly linked item enters its LRU (item lock held). */
void item_enter_lru(struct item *it)
{
    enum lru_segment seg = entry_segment(it);
    struct lru_list *l = lru_of(item_class(it), seg);
    item_set_segment(it, seg);
    lru_lock(l);
    item_list_add(l, it);
    l->n.total_items++;
    lru_unlock(l);
}

/* memcached's do_item_update, item lock held: segmented, the item's time
 * is refreshed and an active COLD item moves to WARM; flat, the item moves
 * to its list's head when it has not moved for BUMP_INTERVAL seconds. */
void item_update(struct item *it, rel_time_t now)
{
    if (!(item_flags_load(it) & ITEM_LINKED))
        return;
    if (lru_is_segmented()) {
        item_time_store(&it->time, now);
        if (item_segment(it) != LRU_COLD || !(item_flags_load(it) & ITEM_ACTIVE))
            return;
        item_flags_clear(it, ITEM_ACTIVE);
        struct lru_list *l = item_list(it);
        lru_lock(l);
        item_list_del(l, it);
        lru_unlock(l);
        struct lru_list *warm = relink_to(it, LRU_WARM);
        lru_lock(warm);
        warm->n.moves_to_warm++;
        lru_unlock(warm);
        return;
    }
    if (item_time_load(&it->time) + BUMP_INTERVAL >= now)
        return;
    struct lru_list *l = item_list(it);
    lru_lock(l);
    lru_remove(l, it);
    lru_push_head(l, it);
    item_time_store(&it->time, now);
    lru_unlock(l);
}

void item_bump_apply(struct item *it, uint64_t hv)
{
    assoc_lock(hv);
    item_update(it, clock_now());
    assoc_unlock(hv);
    item_release(it);
}

/* Marks a read, as memcached's do_item_bump (item lock held). Segmented:
 * the first read sets FETCHED, the next ACTIVE; an item becoming active
 * in HOT or WARM only gets its time refreshed, one in COLD is queued for
 * the maintainer to move to WARM (no LRU lock here). Flat: FETCHED and
 * item_update(). */
void item_mark_fetched(struct item *it, uint64_t hv)
{
    uint8_t f = item_flags_load(it);
    if (!lru_is_segmented()) {
        if (!(f & ITEM_FETCHED))
            item_flags_set(it, ITEM_FETCHED);
        item_update(it, clock_now());
        return;
    }
    if (f & ITEM_ACTIVE)
        return;
    if (!(f & ITEM_FETCHED)) {
        item_flags_set(it, ITEM_FETCHED);
        return;
    }
    item_flags_set(it, ITEM_ACTIVE);
    if (item_segment(it) != LRU_COLD) {
        item_time_store(&it->time, clock_now());
        return;
    }
    item_ref(it); /* the queue's reference, dropped by item_bump_apply() */
    if (!lru_bump_enqueue(it, hv)) {
        item_flags_clear(it, ITEM_ACTIVE);
        item_release(it);
        tstat_incr(TC_BUMPS_DROPPED);
    }
}

/* A tail item leaves list l for another segment: counted, out of l (both
 * locks held by the caller). */
static void leave_for(struct lru_list *l, struct item *it, uint64_t *counter)
{
    (*counter)++;
    item_list_del(l, it);
}

int item_pull_tail(unsigned cls, enum lru_segment seg, uint64_t total_bytes, unsigned flags,
                   rel_time_t max_age)
{
    struct lru_list *l = lru_of(cls, seg);
    rel_time_t now = clock_now();
    unsigned pct = 0;
    if (seg == LRU_HOT || seg == LRU_WARM)
        lru_maintainer_shares(seg, &pct);
    uint64_t limit = total_bytes * pct / 100;
    struct item *moving = NULL;
    uint64_t moving_hv = 0;
    enum lru_segment to = seg;
    int removed = 0, budget = TAIL_SEARCH;
    unsigned skips_left = (flags & PULL_EVICT) ? EVICT_SKIP_REFERENCED : 0;
    lru_lock(l);
    for (struct item *it = l->tail, *prev; it && budget > 0; it = prev) {
        prev = it->prev;
        if (item_is_marker(it))
            continue;
        budget--;
        uint64_t hv = assoc_hash(it->data, it->nkey);
        if (!assoc_trylock(hv))
            continue;
        if (__atomic_load_n(&it->refcount, __ATOMIC_ACQUIRE) > 1) {
            l->n.lrutail_reflocked++;
            assoc_unlock(hv);
            if (skips_left > 0) {
                skips_left--;
                budget++;
            }
            continue;
        }
        uint8_t f = item_flags_load(it);
        if (item_is_dead(it, now)) { /* reclaimed from any segment; keep looking */
            l->n.reclaimed++;
            if (!(f & ITEM_FETCHED))
                l->n.expired_unfetched++;
            item_unlink_lru_locked(it, l, hv);
            assoc_unlock(hv);
            removed++;
            continue;
        }
        bool go_on = false;
        rel_time_t t = item_time_load(&it->time);
        switch (seg) {
        case LRU_HOT:
        case LRU_WARM:
            if (f & ITEM_ACTIVE) {
                item_flags_clear(it, ITEM_ACTIVE);
                removed++;
                if (seg == LRU_WARM) { /* stays in WARM, at the head */
                    l->n.moves_within_lru++;
                    lru_remove(l, it);
                    lru_push_head(l, it);
                    go_on = true;
                } else {
                    leave_for(l, it, &l->n.moves_to_warm);
                    moving = it;
                    to = LRU_WARM;
                }
            } else if (l->n.bytes > limit || (t < now && now - t > max_age)) {
                leave_for(l, it, &l->n.moves_to_cold);
                moving = it;
                to = LRU_COLD;
                removed++;
            }
            break;
        case LRU_COLD:
            if (flags & PULL_EVICT) {
                if (!storage_rt.cfg.evict_to_free)
                    break;
                l->n.evicted++;
                l->n.evicted_time = now - t;
                if (item_time_load(&it->exptime) != 0)
                    l->n.evicted_nonzero++;
                if (!(f & ITEM_FETCHED))
                    l->n.evicted_unfetched++;
                if (f & ITEM_ACTIVE)
                    l->n.evicted_active++;
                item_report_eviction(it, cls, now);
                item_unlink_lru_locked(it, l, hv);
                removed++;
            } else if ((f & ITEM_ACTIVE) && lru_is_segmented()) {
                item_flags_clear(it, ITEM_ACTIVE);
                leave_for(l, it, &l->n.moves_to_warm);
                moving = it;
                to = LRU_WARM;
                removed++;
            }
            break;
        default: /* TEMP: only reclaims */
            break;
        }
        if (moving) { /* keeps its item lock until relinked */
            moving_hv = hv;
            break;
        }
        assoc_unlock(hv);
        if (!go_on)
            break;
    }
    lru_unlock(l);
    if (moving) {
        relink_to(moving, to);
        assoc_unlock(moving_hv);
    }
    return removed;
}

unsigned storage_cold_select(unsigned cls, unsigned max, item **out)
{
    if (cls == 0 || cls > storage_rt.largest_class)
        return 0;
    struct lru_list *l = lru_of(cls, LRU_COLD);
    unsigned n = 0;
    lru_lock(l);
    unsigned looked = 0;
    for (struct item *it = l->tail; it && n < max && looked < 16 * max; it = it->prev) {
        looked++;
        if (item_is_marker(it) || item_is_flash(it)) /* values already on flash */
            continue;
        uint64_t hv = assoc_hash(it->data, it->nkey);
        if (!assoc_trylock(hv))
            continue;
        if (__atomic_load_n(&it->refcount, __ATOMIC_ACQUIRE) == 1 && item_ref_if_live(it))
            out[n++] = it;
        assoc_unlock(hv);
    }
    lru_unlock(l);
    return n;
}
