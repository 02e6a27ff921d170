/*
 * lru.c: the per-class, per-segment LRU lists and their counters (see
 * lru.h). Pure list and counter bookkeeping; it never locks items, frees
 * memory or decides what to move or evict.
 */
#include "lru.h"

#include <string.h>

#include "item_layout.h"

static struct lru_list lists[SLAB_CLASSES_MAX][LRU_SEGMENTS];

/* Linked items and bytes (lru_linked_change), changed with atomic adds of
 * two's complement deltas; one cache line per class. */
struct linked_count {
    uint64_t items;
    uint64_t bytes;
} __attribute__((aligned(64)));
static struct linked_count linked[SLAB_CLASSES_MAX];
static struct linked_count linked_all;

static void linked_add(struct linked_count *c, int64_t items, int64_t bytes)
{
    if (items != 0)
        __atomic_add_fetch(&c->items, (uint64_t)items, __ATOMIC_RELAXED);
    if (bytes != 0)
        __atomic_add_fetch(&c->bytes, (uint64_t)bytes, __ATOMIC_RELAXED);
}

void lru_linked_change(unsigned cls, int64_t items, int64_t bytes)
{
    linked_add(&linked[cls], items, bytes);
    linked_add(&linked_all, items, bytes);
}

void lru_linked_replace(unsigned old_cls, uint64_t old_bytes, unsigned new_cls, uint64_t new_bytes)
{
    linked_add(&linked[new_cls], 1, (int64_t)new_bytes);
    linked_add(&linked[old_cls], -1, -(int64_t)old_bytes);
    linked_add(&linked_all, 0, (int64_t)new_bytes - (int64_t)old_bytes);
}

void lru_linked_totals(uint64_t *items, uint64_t *bytes)
{
    *items = __atomic_load_n(&linked_all.items, __ATOMIC_RELAXED);
    *bytes = __atomic_load_n(&linked_all.bytes, __ATOMIC_RELAXED);
}

void lru_init(void)
{
    for (unsigned c = 0; c < SLAB_CLASSES_MAX; c++) {
        for (unsigned s = 0; s < LRU_SEGMENTS; s++) {
            struct lru_list *l = &lists[c][s];
            pthread_mutex_init(&l->lock, NULL);
            l->head = l->tail = NULL;
            memset(&l->n, 0, sizeof(l->n));
        }
        memset(&linked[c], 0, sizeof(linked[c]));
    }
    memset(&linked_all, 0, sizeof(linked_all));
}

void lru_shutdown(void)
{
    for (unsigned c = SLAB_CLASSES_MAX; c-- > 0;)
        for (unsigned s = LRU_SEGMENTS; s-- > 0;)
            pthread_mutex_destroy(&lists[c][s].lock);
}

struct lru_list *lru_of(unsigned cls, enum lru_segment seg)
{
    return &lists[cls][seg];
}

void lru_lock(struct lru_list *l)
{
    pthread_mutex_lock(&l->lock);
}

bool lru_trylock(struct lru_list *l)
{
    return pthread_mutex_trylock(&l->lock) == 0;
}

void lru_unlock(struct lru_list *l)
{
    pthread_mutex_unlock(&l->lock);
}

void lru_push_head(struct lru_list *l, struct item *it)
{
    it->prev = NULL;
    it->next = l->head;
    if (l->head)
        l->head->prev = it;
    l->head = it;
    if (!l->tail)
        l->tail = it;
}

void lru_remove(struct lru_list *l, struct item *it)
{
    if (it->prev)
        it->prev->next = it->next;
    else
        l->head = it->next;
    if (it->next)
        it->next->prev = it->prev;
    else
        l->tail = it->prev;
    it->next = it->prev = NULL;
}

void lru_insert_before(struct lru_list *l, struct item *before, struct item *it)
{
    it->next = before;
    it->prev = before->prev;
    if (before->prev)
        before->prev->next = it;
    else
        l->head = it;
    before->prev = it;
}

void lru_insert_after(struct lru_list *l, struct item *after, struct item *it)
{
    it->prev = after;
    it->next = after->next;
    if (after->next)
        after->next->prev = it;
    else
        l->tail = it;
    after->next = it;
}

struct item *lru_tail_item(const struct lru_list *l)
{
    for (struct item *it = l->tail; it; it = it->prev)
        if (!item_is_marker(it))
            return it;
    return NULL;
}

static void add_counters(struct lru_counters *to, const struct lru_counters *n)
{
    to->total_items += n->total_items;
    to->evicted += n->evicted;
    to->evicted_nonzero += n->evicted_nonzero;
    to->evicted_unfetched += n->evicted_unfetched;
    to->evicted_active += n->evicted_active;
    to->reclaimed += n->reclaimed;
    to->expired_unfetched += n->expired_unfetched;
    to->outofmemory += n->outofmemory;
    to->crawler_reclaimed += n->crawler_reclaimed;
    to->crawler_items_checked += n->crawler_items_checked;
    to->lrutail_reflocked += n->lrutail_reflocked;
    to->moves_to_cold += n->moves_to_cold;
    to->moves_to_warm += n->moves_to_warm;
    to->moves_within_lru += n->moves_within_lru;
    to->direct_reclaims += n->direct_reclaims;
}

void lru_class_stats_get(unsigned cls, struct lru_class_stats *out)
{
    memset(out, 0, sizeof(*out));
    for (unsigned s = 0; s < LRU_SEGMENTS; s++) {
        struct lru_list *l = &lists[cls][s];
        pthread_mutex_lock(&l->lock);
        add_counters(&out->sum, &l->n);
        if (s == LRU_COLD)
            out->sum.evicted_time = l->n.evicted_time;
        out->items[s] = l->n.curr_items;
        out->bytes[s] = l->n.bytes;
        struct item *tail = lru_tail_item(l);
        if (tail) {
            out->tail_time[s] = item_time_load(&tail->time);
            out->has_tail[s] = true;
        }
        pthread_mutex_unlock(&l->lock);
    }
    out->sum.curr_items = __atomic_load_n(&linked[cls].items, __ATOMIC_RELAXED);
    out->sum.bytes = __atomic_load_n(&linked[cls].bytes, __ATOMIC_RELAXED);
}

rel_time_t lru_class_age(const struct lru_class_stats *st, rel_time_t now)
{
    rel_time_t oldest = now;
    for (unsigned s = 0; s < LRU_SEGMENTS; s++)
        if (st->has_tail[s] && st->tail_time[s] < oldest)
            oldest = st->tail_time[s];
    return now - oldest;
}

void lru_counters_reset(void)
{
    for (unsigned c = 0; c < SLAB_CLASSES_MAX; c++) {
        for (unsigned s = 0; s < LRU_SEGMENTS; s++) {
            struct lru_list *l = &lists[c][s];
            pthread_mutex_lock(&l->lock);
            uint64_t curr = l->n.curr_items, bytes = l->n.bytes;
            memset(&l->n, 0, sizeof(l->n));
            l->n.curr_items = curr;
            l->n.bytes = bytes;
            pthread_mutex_unlock(&l->lock);
        }
    }
}
