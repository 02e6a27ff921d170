/*
 * item_flash.c: what compaction and re-caching do to an item whose value
 * is on flash (items.h: "values on flash"): reading its place under the
 * key's lock, holding it while its record is rewritten, pointing it at the
 * new place, unlinking it when its record is gone, and putting a value read
 * back into RAM in its place. Moving a value to flash and the item
 * lifecycle are items.c's.
 */
#include <string.h>

#include "assoc.h"
#include "lru.h"
#include "storage_internal.h"

/* Compaction may repoint a header while others read it: under its lock. */
void item_flash_where(const item *it, struct item_flash_loc *loc)
{
    uint64_t hv = assoc_hash(it->data, it->nkey);
    assoc_lock(hv);
    memcpy(loc, item_chunk_table(it), sizeof(*loc));
    assoc_unlock(hv);
}

static bool same_record(const struct item_flash_loc *a, const struct item_flash_loc *b)
{
    return a->page == b->page && a->version == b->version && a->offset == b->offset;
}

enum flash_hold item_flash_hold(const char *key, size_t nkey, const struct item_flash_loc *at,
                                bool skip_unread, item **out)
{
    uint64_t hv = assoc_hash(key, nkey);
    enum flash_hold how = FLASH_HOLD_GONE;
    assoc_lock(hv);
    struct item *it = assoc_find(key, nkey, hv);
    if (it && item_is_flash(it) && !item_is_dead(it, clock_now())) {
        struct item_flash_loc loc;
        memcpy(&loc, item_chunk_table(it), sizeof(loc));
        if (same_record(&loc, at)) {
            if (skip_unread && item_segment(it) == LRU_COLD &&
                !(item_flags_load(it) & ITEM_ACTIVE)) {
                how = FLASH_HOLD_UNREAD;
            } else {
                item_ref(it);
                *out = it;
                how = FLASH_HOLD_TAKEN;
            }
        }
    }
    assoc_unlock(hv);
    return how;
}

bool item_flash_repoint(item *h, uint64_t cas, const struct item_flash_loc *from,
                        const struct item_flash_loc *to)
{
    uint64_t hv = assoc_hash(h->data, h->nkey);
    bool done = false;
    assoc_lock(hv);
    struct item_flash_loc loc;
    memcpy(&loc, item_chunk_table(h), sizeof(loc));
    if ((item_flags_load(h) & ITEM_LINKED) && h->cas == cas && same_record(&loc, from)) {
        memcpy(item_chunk_table(h), to, sizeof(*to));
        done = true;
    }
    assoc_unlock(hv);
    return done;
}

void item_flash_drop(item *h, const struct item_flash_loc *at)
{
    uint64_t hv = assoc_hash(h->data, h->nkey);
    assoc_lock(hv);
    struct item_flash_loc loc;
    memcpy(&loc, item_chunk_table(h), sizeof(loc));
    if (same_record(&loc, at) && assoc_find(h->data, h->nkey, hv) == h)
        unlink_item(h, hv);
    assoc_unlock(hv);
}

bool item_flash_recache(item *h, item *fresh, rel_time_t within, unsigned *counter, unsigned rate)
{
    const uint8_t read_twice = ITEM_LINKED | ITEM_FETCHED | ITEM_ACTIVE;
    uint64_t hv = assoc_hash(h->data, h->nkey);
    if (!assoc_trylock(hv)) /* as memcached: never wait for it */
        return false;
    rel_time_t now = clock_now(), last = item_time_load(&h->time);
    bool done = false;
    if ((item_flags_load(h) & read_twice) == read_twice && last + within >= now &&
        !item_is_dead(h, now) && assoc_find(h->data, h->nkey, hv) == h &&
        (*counter)++ % rate == 0) {
        fresh->exptime = item_exptime(h);
        item_flags_set(fresh, ITEM_FETCHED);
        replace_item(h, fresh, hv);
        done = true;
    }
    assoc_unlock(hv);
    return done;
}
