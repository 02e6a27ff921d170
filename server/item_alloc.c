/*
 * item_alloc.c: where an item's memory comes from: the chunks of its
 * header and value taken from the slabs, a chunk borrowed from a larger
 * class before eviction, eviction from the COLD tail when memory is full,
 * and the hooks through which the slab mover takes items (or their value
 * chunks) out of a page it empties. The item lifecycle is items.c's.
 */
#include <sched.h>
#include <string.h>
#include <time.h>

#include "assoc.h"
#include "clock.h"
#include "flash.h"
#include "lru.h"
#include "slabs.h"
#include "storage_internal.h"

#define EVICT_TRIES 10 /* tail pulls before an allocation gives up */
/* An allocation's wait for the flash writer to free a chunk of its class
 * before it evicts: in steps of FLASH_ROOM_STEP_US, ending once the I/O
 * thread showed no activity for FLASH_ROOM_QUIET_US, or after
 * FLASH_ROOM_WAIT_US in all. */
#define FLASH_ROOM_STEP_US 50
#define FLASH_ROOM_QUIET_US 250
#define FLASH_ROOM_WAIT_US 1000
/* The longest a set parks (item_alloc_parkable) for the same reason: its
 * worker serves its other connections meanwhile. */
#define FLASH_ROOM_PARK_US 5000

static unsigned room_quiet_us = FLASH_ROOM_QUIET_US, room_wait_us = FLASH_ROOM_WAIT_US,
                room_park_us = FLASH_ROOM_PARK_US;
/* Set by item_alloc_parkable for its allocation: an allocation that would
 * wait for the writer returns NULL instead and sets parked. */
static __thread struct alloc_wait *parking;
static __thread bool parked;
/* The writer's activity (flash_room_mark) when a wait last ended for want
 * of it: until the I/O thread does something, allocations do not wait. */
static uint64_t room_idle_activity = UINT64_MAX;

/* Records `owner` as the owner of it's value chunks (see slabs.h). */
static void value_chunks_owned_by(const struct item *it, struct item *owner)
{
    char **table = item_chunk_table(it);
    size_t n = chunk_count(it->nbytes);
    for (size_t i = 0; i < n; i++)
        slabs_value_set_owner(table[i], value_chunk_class(it, i, n), owner);
}

/* ---- allocation -------------------------------------------------------------- */
/* ---- slab mover hooks ---------------------------------------------------- */

/* Copies live item `it` (item and LRU locks held) into spare, a free chunk
 * of its chunk class, which takes its place in the table and (at the head
 * of) its LRU list: same class, same size, so nothing linked is counted
 * again. */
static void rescue_into(struct item *it, void *spare, struct lru_list *l, uint64_t hv)
{
    struct item *copy = spare;
    memcpy(copy, it, slabs_class_size(item_chunk_class(it)));
    if (item_has_value_chunks(copy))
        value_chunks_owned_by(copy, copy);
    assoc_replace(it, copy, hv);
    item_list_del(l, it);
    item_list_add(l, copy);
    item_flags_clear(it, ITEM_LINKED);
}

/* For the slab mover: takes it's item lock (only trying) when it is linked
 * and nobody else references it; false otherwise. *hv: its hash. */
static bool lock_unshared(struct item *it, uint64_t *hv)
{
    if (!(__atomic_load_n(&it->it_flags, __ATOMIC_ACQUIRE) & ITEM_LINKED))
        return false;
    *hv = assoc_hash(it->data, it->nkey);
    if (!assoc_trylock(*hv))
        return false;
    if ((item_flags_load(it) & ITEM_LINKED) &&
        __atomic_load_n(&it->refcount, __ATOMIC_ACQUIRE) == 1)
        return true;
    assoc_unlock(*hv);
    return false;
}

struct item *item_take_for_move(void *chunk, enum move_take *how, void *(*spare)(void *),
                                void *spare_arg)
{
    struct item *it = chunk;
    *how = MOVE_BUSY;
    /* The chunk cannot be freed meanwhile (the mover holds its slab class
     * lock); a linked item's key is set before it is linked. */
    uint64_t hv;
    if (!lock_unshared(it, &hv))
        return NULL;
    struct item *taken = NULL;
    struct lru_list *l = item_list(it);
    if (lru_trylock(l)) {
        *how = item_is_dead(it, clock_now()) ? MOVE_DEAD : MOVE_LIVE;
        void *room = *how == MOVE_LIVE && spare ? spare(spare_arg) : NULL;
        if (room) {
            rescue_into(it, room, l, hv);
            *how = MOVE_RESCUED;
        } else {
            unlink_common(it, l, hv);
        }
        lru_unlock(l);
        __atomic_store_n(&it->refcount, 0, __ATOMIC_RELEASE);
        taken = it;
    }
    assoc_unlock(hv);
    return taken;
}

struct item *item_take_value_chunk(void *chunk, void *owner, enum move_take *how,
                                   void *(*spare)(void *, void *), void *spare_arg)
{
    struct item *it = owner;
    *how = MOVE_BUSY;
    if (owner == SLABS_OWNER_UNKNOWN)
        return NULL; /* its item is being built */
    /* The owner recorded is the header whose table holds the chunk (its
     * chunks are freed before it, and a moved header records its copy), so
     * its key is readable; the checks under its lock confirm it. */
    uint64_t hv;
    if (!lock_unshared(it, &hv))
        return NULL;
    struct item *taken = NULL;
    if (item_has_value_chunks(it)) {
        char **table = item_chunk_table(it);
        size_t n = chunk_count(it->nbytes), i = 0;
        while (i < n && table[i] != chunk)
            i++;
        void *room = NULL;
        bool live = i < n && !item_is_dead(it, clock_now());
        if (live && (room = spare(spare_arg, it)) != NULL) {
            /* nobody reads the value (one reference: the table's) and
             * nobody can take one without the item lock */
            memcpy(room, chunk, slabs_class_size(value_chunk_class(it, i, n)));
            table[i] = room;
            *how = MOVE_CHUNK_RESCUED;
        } else if (i < n) {
            struct lru_list *l = item_list(it);
            if (lru_trylock(l)) {
                *how = live ? MOVE_LIVE : MOVE_DEAD;
                unlink_common(it, l, hv);
                lru_unlock(l);
                __atomic_store_n(&it->refcount, 0, __ATOMIC_RELEASE);
                taken = it;
            }
        }
    }
    assoc_unlock(hv);
    return taken;
}

struct item *item_ref_if_live(struct item *it)
{
    if (!(item_flags_load(it) & ITEM_LINKED) || item_is_dead(it, clock_now()))
        return NULL;
    item_ref(it);
    return it;
}

unsigned item_slab_class(const item *it)
{
    return item_lru_class(it);
}

void item_free_taken(struct item *it, enum move_take how)
{
    if (how != MOVE_RESCUED) {
        item_free(it);
        return;
    }
    /* its value chunks or flash record now belong to the copy */
    unsigned cls = item_chunk_class(it);
    __atomic_store_n(&it->it_flags, 0, __ATOMIC_RELAXED);
    slabs_free(it, cls);
}

/* A spare chunk of a larger class already holding pages, at most twice
 * the size needed: when class cls is full and memory is at its limit, a
 * chunk idle in a nearby class keeps an item that eviction would lose
 * (with one page per class under a small -m, items near the top of a full
 * class find room one or two classes up). */
static void *borrow_chunk(unsigned cls, bool value, unsigned *got)
{
    size_t most = 2 * slabs_class_size(cls);
    for (unsigned c = cls + 1; c <= storage_rt.largest_class && slabs_class_size(c) <= most; c++) {
        void *p = slabs_alloc_spare(c, value);
        if (p) {
            *got = c;
            return p;
        }
    }
    return NULL;
}

/* Whether class cls's LRU holds items an allocation could not free now:
 * tail items referenced (a flash write copying them, a parked read, a
 * queued bump) or locked by another thread, rather than none at all. */
static bool tail_busy(unsigned cls)
{
    if (!storage_rt.cfg.evict_to_free)
        return false; /* -M: nothing is ever evicted, busy or not */
    uint64_t held = 0;
    for (enum lru_segment seg = LRU_HOT; seg <= LRU_COLD; seg++) {
        struct lru_list *l = lru_of(cls, seg);
        lru_lock(l);
        held += l->n.curr_items;
        lru_unlock(l);
    }
    return held > 0;
}

/* Between tries on busy tails: give the CPU to whoever holds them (on a
 * loaded host the flash writer may be preempted while it copies a batch),
 * first by yielding, then by short sleeps (at most a few ms in all). */
static void wait_for_tail(int tries)
{
    if (tries < 3) {
        sched_yield();
        return;
    }
    struct timespec nap = {0, 100000L * (tries - 2)};
    nanosleep(&nap, NULL);
}

void item_alloc_flash_wait_limits(unsigned quiet_us, unsigned wait_us, unsigned park_us)
{
    __atomic_store_n(&room_quiet_us, quiet_us ? quiet_us : FLASH_ROOM_QUIET_US, __ATOMIC_RELAXED);
    __atomic_store_n(&room_wait_us, wait_us ? wait_us : FLASH_ROOM_WAIT_US, __ATOMIC_RELAXED);
    __atomic_store_n(&room_park_us, park_us ? park_us : FLASH_ROOM_PARK_US, __ATOMIC_RELAXED);
}

/* Whether a parkable allocation of class cls should park (see
 * item_alloc_parkable): COLD holds values the writer may move, and w's
 * wait began less than room_park_us ago and has not seen the writer pass
 * twice without moving anything. */
static bool room_parkable(unsigned cls, struct alloc_wait *w)
{
    struct lru_list *cold = lru_of(cls, LRU_COLD);
    lru_lock(cold);
    uint64_t movable = cold->n.curr_items;
    lru_unlock(cold);
    if (movable == 0)
        return false;
    struct flash_room_mark mark;
    if (!w->started) {
        flash_room_mark(&mark);
        *w = (struct alloc_wait){.started = true,
                                 .cls = cls,
                                 .began_us = clock_monotonic_us(),
                                 .writer_passes = mark.passes,
                                 .values_moved = mark.moved};
        return true;
    }
    mark = (struct flash_room_mark){.passes = w->writer_passes, .moved = w->values_moved};
    return clock_monotonic_us() - w->began_us < __atomic_load_n(&room_park_us, __ATOMIC_RELAXED) &&
           !flash_room_stalled(&mark);
}

/* A segmented LRU keeps new items in HOT until the maintainer moves them
 * on, and the flash writer takes values from COLD only: a burst of sets
 * into a fresh class finds COLD empty (or the writer emptied it while a
 * set was parked), so the set would not park (nothing for the writer to
 * move) but evict, the eviction below pulling HOT's tail into COLD first.
 * When COLD is empty, a parkable allocation moves HOT's tail into COLD
 * now instead (as that pull would), and parks while the writer takes
 * those values to flash. */
static void cold_fed_from_hot(unsigned cls)
{
    struct lru_list *cold = lru_of(cls, LRU_COLD);
    lru_lock(cold);
    bool empty = cold->n.curr_items == 0;
    lru_unlock(cold);
    if (empty)
        item_pull_tail(cls, LRU_HOT, 0, 0, 0);
}

/* Class cls has no free chunk and its values go to flash: the writer
 * (woken by flash_room_wanted) frees chunks by moving COLD's tail there.
 * With three pages' worth of chunks kept free, a class of large chunks
 * has few (18 of 161,720 bytes for 128 KiB values), and a burst of sets
 * or flash reads uses them up before the I/O thread's next pass;
 * memcached evicts there and loses values flash would have kept. The
 * allocation waits for the writer instead, but only while the I/O thread
 * is seen at work: it ends once the writer neither moved a value nor
 * ended a pass for room_quiet_us (the I/O thread sleeps or waits for a
 * CPU: the worker's other connections must not wait on it), and after
 * room_wait_us in all. After a wait that found the I/O thread idle, no
 * allocation waits until it shows activity again. No wait when COLD holds
 * nothing, or once the writer passes without moving anything. */
static void *wait_for_flash_room(unsigned cls, bool value)
{
    struct lru_list *cold = lru_of(cls, LRU_COLD);
    struct flash_room_mark start, now;
    flash_room_mark(&start);
    if (start.activity == __atomic_load_n(&room_idle_activity, __ATOMIC_RELAXED))
        return NULL;
    unsigned quiet_us = __atomic_load_n(&room_quiet_us, __ATOMIC_RELAXED);
    unsigned wait_us = __atomic_load_n(&room_wait_us, __ATOMIC_RELAXED);
    uint64_t began = clock_monotonic_us(), active_at = began, activity = start.activity;
    for (;;) {
        lru_lock(cold);
        uint64_t movable = cold->n.curr_items;
        lru_unlock(cold);
        if (movable == 0 || flash_room_stalled(&start) || !flash_room_wanted(slabs_class_size(cls)))
            return NULL;
        struct timespec nap = {0, FLASH_ROOM_STEP_US * 1000L};
        nanosleep(&nap, NULL);
        void *p = value ? slabs_alloc_value(cls) : slabs_alloc(cls);
        if (p)
            return p;
        uint64_t t = clock_monotonic_us();
        flash_room_mark(&now);
        if (now.activity != activity) {
            activity = now.activity;
            active_at = t;
        } else if (t - active_at >= quiet_us) {
            __atomic_store_n(&room_idle_activity, activity, __ATOMIC_RELAXED);
            return NULL;
        }
        if (t - began >= wait_us)
            return NULL;
    }
}

/* A chunk of class cls (or, see borrow_chunk(), of a larger class: *got
 * receives the class), making room in cls's LRU when needed as memcached
 * does: flat, reclaim at COLD's tail, then evict there; segmented, evict
 * at COLD's tail and, when COLD has nothing to give, push HOT's (then
 * WARM's) tail down to COLD and try again, EVICT_TRIES times. When
 * nothing could be freed only because the tail items are momentarily
 * referenced or locked, the tries wait for them (memcached's flash writer
 * holds one item at a time; ours copies a batch) instead of failing. */
static void *alloc_chunk(unsigned cls, bool value, unsigned *got)
{
    *got = cls;
    /* flat, as memcached does before each allocation: memory of an expired
     * or flushed item at COLD's tail is used again first (stats "reclaimed";
     * segmented, the LRU maintainer reclaims tails) */
    if (!lru_is_segmented())
        item_pull_tail(cls, LRU_COLD, 0, 0, 0);
    void *p = value ? slabs_alloc_value(cls) : slabs_alloc(cls);
    if (p)
        return p;
    p = borrow_chunk(cls, value, got);
    if (p)
        return p;
    /* its values go to flash before more are evicted */
    if (flash_room_wanted(slabs_class_size(cls))) {
        if (parking && lru_is_segmented())
            cold_fed_from_hot(cls);
        if (parking && room_parkable(cls, parking)) {
            parked = true;
            return NULL;
        }
        p = parking ? NULL : wait_for_flash_room(cls, value);
        if (p)
            return p;
    }
    if (parking && parking->started && parking->cls == cls)
        parking->gave_up = true; /* its wait is over: room is made here */
    struct lru_list *cold = lru_of(cls, LRU_COLD);
    for (int tries = 0; tries < EVICT_TRIES && !p; tries++) {
        bool segmented = lru_is_segmented();
        if (!segmented && item_pull_tail(cls, LRU_COLD, 0, 0, 0) > 0) {
            p = value ? slabs_alloc_value(cls) : slabs_alloc(cls);
            if (p)
                break;
        }
        if (item_pull_tail(cls, LRU_COLD, 0, PULL_EVICT, 0) > 0) {
            lru_lock(cold);
            cold->n.direct_reclaims++;
            lru_unlock(cold);
        } else if (!segmented || (item_pull_tail(cls, LRU_HOT, 0, 0, 0) == 0 &&
                                  item_pull_tail(cls, LRU_WARM, 0, 0, 0) == 0)) {
            /* Nothing freed or moved. (memcached leaves WARM to its
             * maintainer; pulling it here only matters when the thread
             * has not caught up, and turns an out-of-memory into an
             * eviction.) With no item left, or none that may be evicted,
             * this is memcached's out of memory. */
            p = value ? slabs_alloc_value(cls) : slabs_alloc(cls);
            if (p || !tail_busy(cls))
                break;
            wait_for_tail(tries);
        }
        p = value ? slabs_alloc_value(cls) : slabs_alloc(cls);
    }
    if (!p) /* the evictions freed chunks only on a page being emptied */
        p = slabs_alloc_draining(cls, value);
    if (!p)
        p = borrow_chunk(cls, value, got); /* freed meanwhile */
    if (!p) {
        struct lru_list *hot = lru_of(cls, LRU_HOT); /* memcached counts it in HOT */
        lru_lock(hot);
        hot->n.outofmemory++;
        lru_unlock(hot);
    }
    return p;
}

size_t memcached_item_size(size_t nkey, uint32_t flags, size_t nbytes)
{
    /* memcached's own item overhead, used only so that the -I limit rejects
     * exactly the items memcached rejects: its header, CAS, key + NUL,
     * "\r\n" after the value, flags when non-zero */
    return MEMCACHED_ITEM_HEADER_SIZE + (storage_rt.cfg.use_cas ? 8 : 0) + nkey + 1 + nbytes + 2 +
           (flags ? sizeof(uint32_t) : 0);
}

/* The chunk holding an item's header (header bytes: the whole item, or
 * for chunked items and flash headers the part before the value), filled
 * with key, flags, exptime and length; *cls is the class it came from. */
struct item *alloc_header(const char *key, size_t nkey, uint32_t flags, rel_time_t exptime,
                          size_t nbytes, size_t header, bool chunked, unsigned *cls)
{
    *cls = slabs_clsid(header);
    struct item *it = *cls ? alloc_chunk(*cls, false, cls) : NULL;
    if (!it)
        return NULL;
    it->next = it->prev = it->h_next = NULL;
    it->cas = 0;
    it->time = clock_now();
    it->exptime = exptime;
    it->nbytes = (uint32_t)nbytes;
    it->refcount = 1;
    bool borrowed = *cls != slabs_clsid(header);
    __atomic_store_n(&it->it_flags,
                     (uint8_t)((chunked ? ITEM_CHUNKED : 0) | (flags ? ITEM_HAS_FLAGS : 0) |
                               (borrowed ? ITEM_BORROWED : 0)),
                     __ATOMIC_RELAXED);
    if (borrowed) /* a larger chunk always has room for this byte */
        *((uint8_t *)it + header) = (uint8_t)*cls;
    it->nkey = (uint8_t)nkey;
    memcpy(it->data, key, nkey);
    if (flags)
        memcpy(it->data + nkey, &flags, sizeof(flags));
    return it;
}

struct item *alloc_item(const char *key, size_t nkey, uint32_t flags, rel_time_t exptime,
                        size_t nbytes, enum alloc_result *why)
{
    *why = ALLOC_TOO_LARGE;
    if (nkey == 0 || nkey > KEY_MAX_LENGTH || nbytes > UINT32_MAX ||
        memcached_item_size(nkey, flags, nbytes) > storage_rt.cfg.item_size_max)
        return NULL;
    size_t flags_size = flags ? sizeof(uint32_t) : 0;
    size_t whole = ITEM_HEADER_SIZE + nkey + flags_size + nbytes;
    bool chunked = whole > storage_rt.chunk_max;
    size_t nchunks = chunked ? chunk_count(nbytes) : 0;
    size_t header =
        chunked ? chunk_table_offset(nkey, flags_size) + nchunks * sizeof(char *) : whole;
    unsigned header_cls = slabs_clsid(header);
    if (header_cls == 0)
        return NULL;

    *why = ALLOC_NO_MEMORY;
    struct item *it = alloc_header(key, nkey, flags, exptime, nbytes, header, chunked, &header_cls);
    if (!it)
        return NULL;

    if (chunked) {
        char **table = item_chunk_table(it);
        size_t tail = nbytes - (nchunks - 1) * storage_rt.chunk_max;
        unsigned tail_cls = slabs_clsid(tail);
        for (size_t i = 0; i < nchunks; i++) {
            unsigned cls = (i + 1 == nchunks) ? tail_cls : storage_rt.largest_class;
            char *chunk = alloc_chunk(cls, true, &cls);
            if (!chunk && cls != storage_rt.largest_class) {
                cls = storage_rt.largest_class;
                chunk = alloc_chunk(cls, true, &cls);
            }
            if (!chunk) {
                while (i-- > 0)
                    slabs_free_value(table[i], storage_rt.largest_class);
                __atomic_store_n(&it->it_flags, 0, __ATOMIC_RELAXED);
                slabs_free(it, header_cls);
                return NULL;
            }
            if (i + 1 == nchunks)
                *item_tail_class(it) = (uint8_t)cls;
            table[i] = chunk;
        }
        value_chunks_owned_by(it, it);
    }
    *why = ALLOC_OK;
    return it;
}

item *item_alloc(const char *key, size_t nkey, uint32_t flags, rel_time_t exptime, size_t nbytes,
                 enum alloc_result *why)
{
    enum alloc_result ignored;
    return alloc_item(key, nkey, flags, exptime, nbytes, why ? why : &ignored);
}

item *item_alloc_parkable(const char *key, size_t nkey, uint32_t flags, rel_time_t exptime,
                          size_t nbytes, struct alloc_wait *w, enum alloc_result *why)
{
    parking = w;
    parked = false;
    w->gave_up = false;
    item *it = alloc_item(key, nkey, flags, exptime, nbytes, why);
    if (!it && parked)
        *why = ALLOC_FLASH_WAIT;
    parking = NULL;
    parked = false;
    return it;
}
