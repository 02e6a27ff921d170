/*
 * lru.c: per-class LRU lists and counters (see lru.h). Pure list and
 * counter bookkeeping; it never locks items, frees memory or decides what
 * to evict.
 */
#include "lru.h"

#include <string.h>

#include "item_layout.h"

static struct lru_list lists[SLAB_CLASSES_MAX];

void lru_init(void)
{
    for (unsigned c = 0; c < SLAB_CLASSES_MAX; c++) {
        pthread_mutex_init(&lists[c].lock, NULL);
        lists[c].head = lists[c].tail = NULL;
        memset(&lists[c].n, 0, sizeof(lists[c].n));
    }
}

void lru_shutdown(void)
{
    for (unsigned c = SLAB_CLASSES_MAX; c-- > 0;)
        pthread_mutex_destroy(&lists[c].lock);
}

struct lru_list *lru_of(unsigned cls)
{
    return &lists[cls];
}

void lru_lock(unsigned cls)
{
    pthread_mutex_lock(&lists[cls].lock);
}

bool lru_trylock(unsigned cls)
{
    return pthread_mutex_trylock(&lists[cls].lock) == 0;
}

void lru_unlock(unsigned cls)
{
    pthread_mutex_unlock(&lists[cls].lock);
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

void lru_counters_get(unsigned cls, struct lru_counters *out, rel_time_t *tail_time)
{
    struct lru_list *l = &lists[cls];
    pthread_mutex_lock(&l->lock);
    *out = l->n;
    *tail_time = 0;
    for (struct item *it = l->tail; it; it = it->prev) {
        if (!item_is_marker(it)) {
            *tail_time = item_time_load(&it->time);
            break;
        }
    }
    pthread_mutex_unlock(&l->lock);
}

void lru_counters_reset(void)
{
    for (unsigned c = 0; c < SLAB_CLASSES_MAX; c++) {
        struct lru_list *l = &lists[c];
        pthread_mutex_lock(&l->lock);
        uint64_t curr = l->n.curr_items, bytes = l->n.bytes;
        memset(&l->n, 0, sizeof(l->n));
        l->n.curr_items = curr;
        l->n.bytes = bytes;
        pthread_mutex_unlock(&l->lock);
    }
}
