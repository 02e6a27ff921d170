/*
 * items.c: the item lifecycle behind items.h (allocation, with eviction
 * when memory is full, is item_alloc.c's): linking into the hash table
 * and LRU, lookups with lazy expiry and flush_all, the store operations,
 * delete, arithmetic and touch, and reference counting.
 *
 * Concurrency: every operation on a key holds that key's striped item lock
 * (assoc.h) while it looks at or changes the key's items, so there is no
 * global lock on the get path. Each class has four LRU lists (HOT, WARM,
 * COLD, TEMP; lru.h); a read never takes a list lock in segmented mode (it
 * sets flag bits, and an active COLD item is queued for the LRU
 * maintainer), and in flat mode moves an item to its list head at most
 * once per BUMP_INTERVAL seconds. Tail pulls (eviction, the maintainer's
 * moves) hold one list lock and only *tries* item locks, keeping the lock
 * order item -> LRU list -> slab deadlock-free; no code holds two list
 * locks at once. An item with outside references is never
 * evicted; a referenced item that gets deleted or replaced stays intact
 * until its last reference is released.
 *
 * This file does not format stats or run threads.
 */
#include "items.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "assoc.h"
#include "crawler.h"
#include "flash.h"
#include "lru.h"
#include "slabs.h"
#include "storage_internal.h"

#define ARITH_MAX_DIGITS 20

static atomic_uint_fast64_t cas_counter;
static _Atomic rel_time_t oldest_live;  /* flush_all boundary, 0 = none */
static atomic_uint_fast64_t oldest_cas; /* items with cas <= this are flushed */

void items_init(void)
{
    atomic_store(&cas_counter, 0);
    atomic_store(&oldest_live, 0);
    atomic_store(&oldest_cas, 0);
}

/* ---- sizes ---------------------------------------------------------------- */
size_t chunk_count(size_t nbytes)
{
    return (nbytes + storage_rt.chunk_max - 1) / storage_rt.chunk_max;
}

/* Bytes of the slab chunk holding the item header (for chunked items: the
 * header, key, flags and chunk table). */
static size_t header_alloc_size(const struct item *it)
{
    if (item_is_flash(it))
        return chunk_table_offset(it->nkey, item_flags_size(it)) + sizeof(struct item_flash_loc);
    if (item_flags_load(it) & ITEM_CHUNKED)
        return chunk_table_offset(it->nkey, item_flags_size(it)) +
               chunk_count(it->nbytes) * sizeof(char *);
    return ITEM_HEADER_SIZE + it->nkey + item_flags_size(it) + it->nbytes;
}

/* The class of the chunk holding the item header: the smallest that fits,
 * or for a borrowed chunk the class recorded right after the item. */
unsigned item_chunk_class(const struct item *it)
{
    size_t size = header_alloc_size(it);
    if (item_flags_load(it) & ITEM_BORROWED)
        return *((const uint8_t *)it + size);
    return slabs_clsid(size);
}

/* The item's size as the "bytes" stat counts it. */
size_t item_ntotal(const struct item *it)
{
    if (item_has_value_chunks(it))
        return header_alloc_size(it) + it->nbytes;
    return header_alloc_size(it);
}

/* The class whose LRU holds the item. Chunked items live in the largest
 * class's LRU, whose chunks their values use, so evicting there frees the
 * kind of memory large items need. */
unsigned item_lru_class(const struct item *it)
{
    if (item_has_value_chunks(it))
        return storage_rt.largest_class;
    return item_chunk_class(it);
}

unsigned item_class(const item *it)
{
    return item_lru_class(it);
}

static void (*_Atomic eviction_observer)(const struct item_eviction *ev);

void storage_on_eviction(void (*fn)(const struct item_eviction *ev))
{
    atomic_store(&eviction_observer, fn);
}

/* Tells the observer, if any, about it (its locks held). */
void item_report_eviction(const struct item *it, unsigned cls, rel_time_t now)
{
    void (*fn)(const struct item_eviction *) = atomic_load(&eviction_observer);
    if (!fn)
        return;
    rel_time_t exp = item_time_load(&it->exptime), last = item_time_load(&it->time);
    struct item_eviction ev = {
        .key = it->data,
        .nkey = it->nkey,
        .fetched = (item_flags_load(it) & ITEM_FETCHED) != 0,
        .ttl = exp == 0 ? -1 : (long long)exp - (long long)now,
        .idle = now >= last ? now - last : 0,
        .clsid = cls,
        .nbytes = it->nbytes,
    };
    fn(&ev);
}

/* An item's cas can change in place while others hold it (in-place incr,
 * md I), so it is read and written atomically. */
static uint64_t reported_cas(const struct item *it)
{
    return storage_rt.cfg.use_cas ? __atomic_load_n(&it->cas, __ATOMIC_RELAXED) : 0;
}

/* The class of value chunk i of n of a chunked item: the largest, but
 * for the last (its class in the tail-class byte). */
unsigned value_chunk_class(const struct item *it, size_t i, size_t n)
{
    return i + 1 == n ? *item_tail_class(it) : storage_rt.largest_class;
}

/* ---- freeing and references ------------------------------------------------ */
void item_free(struct item *it)
{
    unsigned header_cls = item_chunk_class(it);
    if (item_is_flash(it)) {
        struct item_flash_loc loc;
        memcpy(&loc, item_chunk_table(it), sizeof(loc));
        flash_forget(&loc);
    } else if (item_has_value_chunks(it)) {
        char **table = item_chunk_table(it);
        size_t n = chunk_count(it->nbytes);
        for (size_t i = n; i-- > 0;)
            slabs_free_value(table[i], value_chunk_class(it, i, n));
    }
    /* A free chunk never looks linked to the slab mover. */
    __atomic_store_n(&it->it_flags, 0, __ATOMIC_RELAXED);
    slabs_free(it, header_cls);
}

void item_ref(struct item *it)
{
    __atomic_add_fetch(&it->refcount, 1, __ATOMIC_RELAXED);
}

void item_release(item *it)
{
    if (__atomic_sub_fetch(&it->refcount, 1, __ATOMIC_ACQ_REL) == 0)
        item_free(it);
}

/* ---- expiry and flush ---------------------------------------------------- */
static bool item_is_flushed(const struct item *it, rel_time_t now)
{
    rel_time_t oldest = atomic_load_explicit(&oldest_live, memory_order_relaxed);
    if (oldest == 0 || oldest > now)
        return false;
    return item_time_load(&it->time) <= oldest ||
           (storage_rt.cfg.use_cas &&
            it->cas <= atomic_load_explicit(&oldest_cas, memory_order_relaxed));
}

static bool item_is_expired(const struct item *it, rel_time_t now)
{
    rel_time_t exp = item_time_load(&it->exptime);
    return exp != 0 && exp <= now;
}

bool item_is_dead(const struct item *it, rel_time_t now)
{
    return item_is_expired(it, now) || item_is_flushed(it, now);
}

rel_time_t items_oldest_live(void)
{
    return atomic_load(&oldest_live);
}

uint64_t items_cas_now(void)
{
    return atomic_load(&cas_counter);
}

void items_set_oldest_live(rel_time_t when)
{
    rel_time_t now = clock_now();
    rel_time_t boundary = (when == 0 || when <= now) ? now : when;
    /* as memcached: with CAS, items stored in the flush's own second are
     * told apart by their CAS (older ones are flushed); under -C every item
     * of that second counts as flushed, even one stored just after */
    rel_time_t oldest = storage_rt.cfg.use_cas ? boundary - 1 : boundary;
    if (storage_rt.cfg.use_cas && oldest <= now)
        atomic_store(&oldest_cas, atomic_load(&cas_counter));
    atomic_store(&oldest_live, oldest == 0 ? 1 : oldest);
}

void storage_flush_all(rel_time_t when)
{
    items_set_oldest_live(when);
    crawler_visit_all_at(when > clock_now() ? when : clock_now());
}

/* ---- linking ---------------------------------------------------------------- */
/* An item about to enter the table: its store time, a new CAS, and the
 * linked mark. */
static void stamp_linked(struct item *it)
{
    item_time_store(&it->time, clock_now());
    it->cas = atomic_fetch_add(&cas_counter, 1) + 1;
    /* Release: the slab mover reads the key of items it sees linked. */
    __atomic_fetch_or(&it->it_flags, ITEM_LINKED, __ATOMIC_RELEASE);
}

/* An item entering (added) or leaving the table is counted: curr_items
 * and bytes (lru_linked_change), and the size histogram. These and
 * count_replaced() are the only places curr_items changes. */
static void count_linked(const struct item *it, bool added)
{
    size_t total = item_ntotal(it);
    lru_linked_change(item_lru_class(it), added ? 1 : -1, added ? (int64_t)total : -(int64_t)total);
    tstat_size_change(it->cas, total, added);
}

/* new_it took old's place in the table (old_total: old's item_ntotal). */
static void count_replaced(const struct item *old, size_t old_total, const struct item *new_it)
{
    size_t new_total = item_ntotal(new_it);
    lru_linked_replace(item_lru_class(old), old_total, item_lru_class(new_it), new_total);
    tstat_size_change(old->cas, old_total, false);
    tstat_size_change(new_it->cas, new_total, true);
}

static void link_item(struct item *it, uint64_t hv)
{
    stamp_linked(it);
    assoc_insert(it, hv);
    item_ref(it);
    item_enter_lru(it);
    count_linked(it, true);
}

void unlink_common(struct item *it, struct lru_list *l, uint64_t hv)
{
    item_flags_clear(it, ITEM_LINKED);
    assoc_delete(it->data, it->nkey, hv);
    item_list_del(l, it);
    count_linked(it, false);
}

void item_unlink_lru_locked(struct item *it, struct lru_list *l, uint64_t hv)
{
    unlink_common(it, l, hv);
    item_release(it);
}

/* Unlinks with the item lock held (no LRU lock). */
void unlink_item(struct item *it, uint64_t hv)
{
    if (!(item_flags_load(it) & ITEM_LINKED))
        return;
    struct lru_list *l = item_list(it);
    lru_lock(l);
    unlink_common(it, l, hv);
    lru_unlock(l);
    item_release(it);
}

/* With the item lock held. The new item takes the old one's place in its
 * hash chain, so no lookup ever misses the key; the old one leaves its
 * list and the new one enters HOT (or TEMP, or COLD when flat). If the old
 * one is not in the table it is an unlink and a link. */
void replace_item(struct item *old, struct item *new_it, uint64_t hv)
{
    if (item_flags_load(old) & ITEM_LINKED) {
        size_t old_total = item_ntotal(old);
        stamp_linked(new_it);
        if (assoc_replace(old, new_it, hv)) {
            item_ref(new_it);
            struct lru_list *l = item_list(old);
            lru_lock(l);
            item_flags_clear(old, ITEM_LINKED);
            item_list_del(l, old);
            lru_unlock(l);
            item_enter_lru(new_it);
            count_replaced(old, old_total, new_it);
            item_release(old);
            return;
        }
        item_flags_clear(new_it, ITEM_LINKED);
    }
    unlink_item(old, hv);
    link_item(new_it, hv);
}

/* ---- lookups ------------------------------------------------------------------ */
/* The live item under key (item lock held); unlinks a dead one found and
 * counts it, whatever the lookup is for (as memcached counts get_flushed
 * for a set over a flushed item). */
static struct item *find_live(const char *key, size_t nkey, uint64_t hv)
{
    struct item *it = assoc_find(key, nkey, hv);
    if (!it)
        return NULL;
    rel_time_t now = clock_now();
    if (item_is_expired(it, now)) {
        unlink_item(it, hv);
        tstat_incr(TC_GET_EXPIRED);
        return NULL;
    }
    if (item_is_flushed(it, now)) {
        unlink_item(it, hv);
        tstat_incr(TC_GET_FLUSHED);
        return NULL;
    }
    return it;
}

/* What the item looked like just before the latest lookup this thread
 * made for a caller (item_get, item_get_touch): memcached answers mg's h
 * and l from the item before the lookup's own fetch and bump. Matched by
 * address and unique, so a chunk reused for another item never matches;
 * every other handle reports the item as it is now. */
struct prior_state {
    const struct item *it;
    uint64_t cas;
    rel_time_t time;
    bool fetched;
};
static _Thread_local struct prior_state prior;

static const struct prior_state *prior_of(const struct item *it)
{
    return prior.it == it && prior.cas == it->cas ? &prior : NULL;
}

void items_forget_prior(void)
{
    prior.it = NULL;
}

/* A caller's lookup: remembers the state before it, then marks the read. */
static void note_fetch(struct item *it, uint64_t hv)
{
    prior.it = it;
    prior.cas = it->cas;
    prior.time = item_time_load(&it->time);
    prior.fetched = (item_flags_load(it) & ITEM_FETCHED) != 0;
    item_mark_fetched(it, hv);
}

item *item_get(const char *key, size_t nkey)
{
    uint64_t hv = assoc_hash(key, nkey);
    assoc_lock(hv);
    struct item *it = find_live(key, nkey, hv);
    if (it) {
        item_ref(it);
        /* as memcached, a get hit (not a touch) is also counted by the
         * segment holding the item (hits_to_hot, ...) */
        tstat_get_hit(item_lru_class(it), item_segment(it));
        note_fetch(it, hv);
    }
    assoc_unlock(hv);
    return it;
}

item *item_peek(const char *key, size_t nkey)
{
    uint64_t hv = assoc_hash(key, nkey);
    assoc_lock(hv);
    struct item *it = find_live(key, nkey, hv);
    if (it)
        item_ref(it);
    assoc_unlock(hv);
    items_forget_prior();
    return it;
}

item *item_get_touch(const char *key, size_t nkey, rel_time_t exptime)
{
    uint64_t hv = assoc_hash(key, nkey);
    assoc_lock(hv);
    struct item *it = find_live(key, nkey, hv);
    if (it) {
        item_ref(it);
        item_time_store(&it->exptime, exptime);
        /* memcached counts a get-and-touch hit as a touch hit only. */
        tstat_class_incr(item_lru_class(it), CC_TOUCH_HITS);
        note_fetch(it, hv);
    }
    assoc_unlock(hv);
    return it;
}

bool item_touch(const char *key, size_t nkey, rel_time_t exptime)
{
    uint64_t hv = assoc_hash(key, nkey);
    assoc_lock(hv);
    struct item *it = find_live(key, nkey, hv);
    if (it) {
        item_time_store(&it->exptime, exptime);
        tstat_class_incr(item_lru_class(it), CC_TOUCH_HITS);
        item_mark_fetched(it, hv); /* memcached's touch fetches the item */
    }
    assoc_unlock(hv);
    return it != NULL;
}

/* With the item's lock held: a new cas, as in an in-place rewrite. */
static void restamp_cas(struct item *it)
{
    uint64_t old_cas = it->cas, new_cas = atomic_fetch_add(&cas_counter, 1) + 1;
    tstat_size_change(old_cas, item_ntotal(it), false);
    __atomic_store_n(&it->cas, new_cas, __ATOMIC_RELAXED);
    tstat_size_change(new_cas, item_ntotal(it), true);
}

enum store_result item_invalidate(const char *key, size_t nkey, bool has_cas, uint64_t cas,
                                  bool set_exptime, rel_time_t exptime, uint64_t *new_cas,
                                  item_recas_fn recas)
{
    uint64_t hv = assoc_hash(key, nkey);
    enum store_result res = STORE_STORED;
    assoc_lock(hv);
    struct item *it = find_live(key, nkey, hv);
    if (!it) {
        res = STORE_NOT_FOUND;
    } else if (has_cas && cas != reported_cas(it)) {
        res = STORE_EXISTS;
    } else {
        uint64_t old_cas = reported_cas(it);
        if (set_exptime)
            item_time_store(&it->exptime, exptime);
        restamp_cas(it);
        uint64_t now_cas = reported_cas(it);
        if (new_cas)
            *new_cas = now_cas;
        if (recas)
            recas(key, nkey, old_cas, now_cas);
    }
    assoc_unlock(hv);
    return res;
}

bool item_set_exptime(const char *key, size_t nkey, rel_time_t exptime)
{
    uint64_t hv = assoc_hash(key, nkey);
    assoc_lock(hv);
    struct item *it = find_live(key, nkey, hv);
    if (it)
        item_time_store(&it->exptime, exptime);
    assoc_unlock(hv);
    return it != NULL;
}

/* ---- handle accessors ---------------------------------------------------------- */
const char *item_key(const item *it)
{
    return it->data;
}

size_t item_nkey(const item *it)
{
    return it->nkey;
}

uint32_t item_flags(const item *it)
{
    uint32_t flags = 0;
    if (item_flags_load(it) & ITEM_HAS_FLAGS)
        memcpy(&flags, it->data + it->nkey, sizeof(flags));
    return flags;
}

size_t item_nbytes(const item *it)
{
    return it->nbytes;
}

uint64_t item_cas(const item *it)
{
    return reported_cas(it);
}

rel_time_t item_exptime(const item *it)
{
    return item_time_load(&it->exptime);
}

rel_time_t item_last_access(const item *it)
{
    const struct prior_state *p = prior_of(it);
    return p ? p->time : item_time_load(&it->time);
}

bool item_was_fetched(const item *it)
{
    const struct prior_state *p = prior_of(it);
    return p ? p->fetched : (item_flags_load(it) & ITEM_FETCHED) != 0;
}

size_t item_memcached_size(const item *it)
{
    return memcached_item_size(it->nkey, item_flags(it), it->nbytes);
}

unsigned item_value_nseg(const item *it)
{
    if (item_is_flash(it))
        return 0;
    if (item_flags_load(it) & ITEM_CHUNKED)
        return (unsigned)chunk_count(it->nbytes);
    return 1;
}

struct iovec item_value_seg(const item *it, unsigned i)
{
    struct iovec v;
    if (!(item_flags_load(it) & ITEM_CHUNKED)) {
        v.iov_base = item_payload(it);
        v.iov_len = it->nbytes;
        return v;
    }
    size_t n = chunk_count(it->nbytes);
    v.iov_base = item_chunk_table(it)[i];
    v.iov_len = (i + 1 == n) ? it->nbytes - (n - 1) * storage_rt.chunk_max : storage_rt.chunk_max;
    return v;
}

void item_value_write(item *it, const void *src, size_t len)
{
    const char *from = src;
    size_t done = 0;
    for (unsigned i = 0, n = item_value_nseg(it); i < n && done < len; i++) {
        struct iovec seg = item_value_seg(it, i);
        size_t part = seg.iov_len < len - done ? seg.iov_len : len - done;
        memcpy(seg.iov_base, from + done, part);
        done += part;
    }
}

bool item_on_flash(const item *it)
{
    return item_is_flash(it);
}

uint64_t item_unique(const item *it)
{
    return it->cas;
}

bool item_move_to_flash(item *it, uint64_t cas, const struct item_flash_loc *loc)
{
    size_t header = chunk_table_offset(it->nkey, item_flags_size(it)) + sizeof(*loc);
    unsigned cls;
    struct item *h = alloc_header(it->data, it->nkey, item_flags(it), item_exptime(it), it->nbytes,
                                  header, true, &cls);
    if (!h)
        return false;
    *item_tail_class(h) = ITEM_FLASH_TAIL;
    memcpy(item_chunk_table(h), loc, sizeof(*loc));
    uint64_t hv = assoc_hash(it->data, it->nkey);
    bool moved = false;
    assoc_lock(hv);
    uint8_t f = item_flags_load(it);
    if ((f & ITEM_LINKED) && !(f & ITEM_ACTIVE) && it->cas == cas && !item_is_flash(it)) {
        h->cas = it->cas;
        h->exptime = item_exptime(it);
        item_time_store(&h->time, item_time_load(&it->time));
        item_flags_set(h, (uint8_t)(f & ITEM_FETCHED));
        __atomic_fetch_or(&h->it_flags, ITEM_LINKED, __ATOMIC_RELEASE);
        if (assoc_replace(it, h, hv)) {
            size_t old_total = item_ntotal(it);
            item_ref(h);
            struct lru_list *l = item_list(it);
            lru_lock(l);
            item_flags_clear(it, ITEM_LINKED);
            item_list_del(l, it);
            lru_unlock(l);
            /* a header stays where the value left: COLD's head */
            item_set_segment(h, LRU_COLD);
            l = lru_of(item_lru_class(h), LRU_COLD);
            lru_lock(l);
            item_list_add(l, h);
            lru_unlock(l);
            count_replaced(it, old_total, h);
            item_release(it); /* the table's reference */
            moved = true;
        } else {
            item_flags_clear(h, ITEM_LINKED);
        }
    }
    assoc_unlock(hv);
    item_release(h); /* ours; the table holds its own when moved */
    return moved;
}

/* Copies src's value into dst's value starting at byte offset `at`. */
static void copy_value(struct item *dst, size_t at, const struct item *src)
{
    unsigned dn = item_value_nseg(dst), di = 0;
    struct iovec d = item_value_seg(dst, 0);
    size_t doff = 0;
    while (at >= d.iov_len && di + 1 < dn) { /* find the segment holding `at` */
        at -= d.iov_len;
        d = item_value_seg(dst, ++di);
    }
    doff = at;
    unsigned sn = item_value_nseg(src);
    for (unsigned si = 0; si < sn; si++) {
        struct iovec s = item_value_seg(src, si);
        size_t soff = 0;
        while (soff < s.iov_len) {
            if (doff == d.iov_len) {
                d = item_value_seg(dst, ++di);
                doff = 0;
            }
            size_t n = s.iov_len - soff;
            if (n > d.iov_len - doff)
                n = d.iov_len - doff;
            memcpy((char *)d.iov_base + doff, (char *)s.iov_base + soff, n);
            soff += n;
            doff += n;
        }
    }
}

/* ---- storing -------------------------------------------------------------------- */
static void maybe_expand(void)
{
    if (!storage_rt.cfg.no_hashexpand && assoc_wants_expand())
        assoc_request_expand();
}

/* append/prepend: a new item holding old's and it's values joined. */
static enum store_result join_values(struct item *old, struct item *it, bool append, uint64_t hv,
                                     uint64_t *new_cas)
{
    enum alloc_result why;
    struct item *joined = alloc_item(old->data, old->nkey, item_flags(old),
                                     item_time_load(&old->exptime), old->nbytes + it->nbytes, &why);
    if (!joined) /* memcached answers NOT_STORED when the join is too large */
        return why == ALLOC_TOO_LARGE ? STORE_NOT_STORED : STORE_NO_MEMORY;
    if (append) {
        copy_value(joined, 0, old);
        copy_value(joined, old->nbytes, it);
    } else {
        copy_value(joined, 0, it);
        copy_value(joined, it->nbytes, old);
    }
    replace_item(old, joined, hv);
    *new_cas = reported_cas(joined);
    item_release(joined);
    return STORE_STORED;
}

enum store_result item_store(item *it, enum store_op op, uint64_t cas, uint64_t *cas_out)
{
    if (item_flags_load(it) & ITEM_LINKED) { /* already stored: a caller bug */
        if (cas_out)
            *cas_out = 0;
        return STORE_NOT_STORED;
    }
    uint64_t hv = assoc_hash(it->data, it->nkey);
    enum store_result res = STORE_NOT_STORED;
    uint64_t stored_cas = 0;
    assoc_lock(hv);
    struct item *old = find_live(it->data, it->nkey, hv);
    tstat_class_incr(item_lru_class(it), CC_CMD_SET);
    switch (op) {
    case STORE_SET:
        if (old)
            replace_item(old, it, hv);
        else
            link_item(it, hv);
        res = STORE_STORED;
        break;
    case STORE_ADD:
        if (old) {
            item_update(old, clock_now()); /* memcached refreshes it in the LRU */
            res = STORE_NOT_STORED;
        } else {
            link_item(it, hv);
            res = STORE_STORED;
        }
        break;
    case STORE_REPLACE:
        if (old) {
            replace_item(old, it, hv);
            res = STORE_STORED;
        }
        break;
    case STORE_APPEND:
    case STORE_PREPEND:
        /* As memcached: with -C the client's unique is never recorded, so
         * it counts as not given. */
        if (!old || item_is_flash(old)) /* memcached's extstore refuses these too */
            res = STORE_NOT_STORED;
        else if (storage_rt.cfg.use_cas && cas != 0 && cas != old->cas)
            res = STORE_EXISTS;
        else
            res = join_values(old, it, op == STORE_APPEND, hv, &stored_cas);
        break;
    case STORE_CAS:
        /* memcached compares the unique it recorded from the client: none
         * with -C, and 0 (never a live item's unique) matches nothing, so
         * such a cas on an existing key is always EXISTS. */
        if (!old) {
            res = STORE_NOT_FOUND;
        } else if (storage_rt.cfg.use_cas && cas != 0 && cas == old->cas) {
            tstat_class_incr(item_lru_class(old), CC_CAS_HITS);
            replace_item(old, it, hv);
            res = STORE_STORED;
        } else {
            tstat_class_incr(item_lru_class(old), CC_CAS_BADVAL);
            res = STORE_EXISTS;
        }
        break;
    }
    if (res == STORE_STORED && op != STORE_APPEND && op != STORE_PREPEND)
        stored_cas = reported_cas(it);
    assoc_unlock(hv);
    if (cas_out)
        *cas_out = res == STORE_STORED ? stored_cas : 0;
    if (res == STORE_STORED)
        maybe_expand();
    return res;
}

/* ---- warm restart ---------------------------------------------------------------- */
void storage_restart_state_get(struct storage_restart_state *out)
{
    struct assoc_stats as;
    assoc_stats(&as);
    out->cas_counter = atomic_load(&cas_counter);
    out->oldest_cas = atomic_load(&oldest_cas);
    out->oldest_live = atomic_load(&oldest_live);
    out->hash_power = as.hash_power;
}

void storage_restart_state_set(const struct storage_restart_state *in)
{
    atomic_store(&cas_counter, in->cas_counter);
    atomic_store(&oldest_cas, in->oldest_cas);
    atomic_store(&oldest_live, in->oldest_live);
}

bool item_restore(item *it, uint64_t unique, rel_time_t last_access, bool fetched)
{
    if (item_flags_load(it) & ITEM_LINKED)
        return false;
    uint64_t hv = assoc_hash(it->data, it->nkey);
    assoc_lock(hv);
    bool fresh = assoc_find(it->data, it->nkey, hv) == NULL;
    if (fresh) {
        item_time_store(&it->time, last_access);
        it->cas = unique;
        if (fetched)
            item_flags_set(it, ITEM_FETCHED);
        __atomic_fetch_or(&it->it_flags, ITEM_LINKED, __ATOMIC_RELEASE);
        assoc_insert(it, hv);
        item_ref(it);
        item_enter_lru(it);
        count_linked(it, true);
        uint_fast64_t seen = atomic_load(&cas_counter);
        while (seen < unique && !atomic_compare_exchange_weak(&cas_counter, &seen, unique))
            ;
    }
    assoc_unlock(hv);
    if (fresh)
        maybe_expand();
    return fresh;
}

/* ---- delete, arithmetic ------------------------------------------------------------ */
enum delete_result item_delete(const char *key, size_t nkey, uint64_t cas)
{
    uint64_t hv = assoc_hash(key, nkey);
    enum delete_result res = DELETE_NOT_FOUND;
    assoc_lock(hv);
    struct item *it = find_live(key, nkey, hv);
    if (it) {
        if (cas != 0 && cas != reported_cas(it)) {
            res = DELETE_EXISTS;
        } else {
            tstat_class_incr(item_lru_class(it), CC_DELETE_HITS);
            unlink_item(it, hv);
            res = DELETE_DELETED;
        }
    }
    assoc_unlock(hv);
    return res;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* Parses a stored counter as memcached reads one: optional leading white
 * space and '+', decimal digits whose value fits in 64 bits (so at most 20
 * significant digits; leading zeros do not count), then the end of the
 * value or white space (after which memcached looks no further). Anything
 * else (a sign '-', a letter after the digits, no digits) is not a number. */
static bool parse_counter(const struct item *it, uint64_t *out)
{
    if (it->nbytes == 0 || (item_flags_load(it) & ITEM_CHUNKED))
        return false;
    const char *p = item_payload(it), *end = p + it->nbytes;
    while (p < end && is_space(*p))
        p++;
    if (p < end && *p == '+')
        p++;
    const char *digits = p;
    uint64_t v = 0;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    if (p == digits || (p < end && !is_space(*p)))
        return false;
    *out = v;
    return true;
}

enum arith_result item_arith(const char *key, size_t nkey, bool incr, uint64_t delta, uint64_t cas,
                             uint64_t *value, uint64_t *cas_out, item_recas_fn carry)
{
    uint64_t hv = assoc_hash(key, nkey);
    enum arith_result res;
    uint64_t new_cas = 0;
    assoc_lock(hv);
    struct item *it = find_live(key, nkey, hv);
    uint64_t v = 0;
    if (!it) {
        res = ARITH_NOT_FOUND;
    } else if (it->nbytes == 0 || (item_flags_load(it) & ITEM_CHUNKED)) {
        res = ARITH_NON_NUMERIC; /* as memcached: before the cas is compared */
    } else if (cas != 0 && cas != reported_cas(it)) {
        res = ARITH_EXISTS;
    } else if (!parse_counter(it, &v)) {
        res = ARITH_NON_NUMERIC;
    } else {
        if (incr)
            v += delta; /* wraps at 2^64 */
        else
            v = delta > v ? 0 : v - delta;
        char buf[ARITH_MAX_DIGITS + 1];
        int len = snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
        tstat_class_incr(item_lru_class(it), incr ? CC_INCR_HITS : CC_DECR_HITS);
        uint64_t old_cas = reported_cas(it);
        /* memcached rewrites in place (padding a shorter number with
         * spaces) when nobody else holds the item; here only a number of
         * the same length is, but what belongs to the version carries over
         * in every case memcached's would */
        bool sole_holder = __atomic_load_n(&it->refcount, __ATOMIC_ACQUIRE) == 1;
        bool memcached_in_place = (size_t)len <= it->nbytes && sole_holder;
        if ((size_t)len == it->nbytes && sole_holder) {
            /* Nobody else holds it: rewrite in place. */
            memcpy(item_payload(it), buf, (size_t)len);
            restamp_cas(it);
            new_cas = reported_cas(it);
            res = ARITH_OK;
        } else {
            enum alloc_result why;
            struct item *fresh = alloc_item(key, nkey, item_flags(it), item_time_load(&it->exptime),
                                            (size_t)len, &why);
            if (!fresh) {
                res = ARITH_NO_MEMORY;
            } else {
                memcpy(item_payload(fresh), buf, (size_t)len);
                replace_item(it, fresh, hv);
                new_cas = reported_cas(fresh);
                item_release(fresh);
                res = ARITH_OK;
            }
        }
        if (res == ARITH_OK && memcached_in_place && carry)
            carry(key, nkey, old_cas, new_cas);
    }
    assoc_unlock(hv);
    if (value)
        *value = v;
    if (cas_out)
        *cas_out = new_cas;
    return res;
}
