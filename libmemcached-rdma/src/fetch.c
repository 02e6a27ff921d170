/* fetch.c: the mget result queue (see fetch.h). */
#include "fetch.h"

#include <stdlib.h>
#include <string.h>

struct lmr_fetched *lmr_fetched_new(const char *key, size_t key_length, size_t value_length)
{
    if (key_length >= MEMCACHED_MAX_KEY)
        return NULL;
    struct lmr_fetched *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    f->value = malloc(value_length + 1);
    if (f->value == NULL) {
        free(f);
        return NULL;
    }
    f->value[value_length] = '\0';
    memcpy(f->key, key, key_length);
    f->key[key_length] = '\0';
    f->key_length = key_length;
    f->value_length = value_length;
    return f;
}

void lmr_fetched_free(struct lmr_fetched *f)
{
    if (f == NULL)
        return;
    free(f->value);
    free(f);
}

void lmr_fetch_push(struct lmr_fetch_queue *q, struct lmr_fetched *f)
{
    f->next = NULL;
    if (q->tail != NULL)
        q->tail->next = f;
    else
        q->head = f;
    q->tail = f;
}

struct lmr_fetched *lmr_fetch_pop(struct lmr_fetch_queue *q)
{
    struct lmr_fetched *f = q->head;
    if (f == NULL)
        return NULL;
    q->head = f->next;
    if (q->head == NULL)
        q->tail = NULL;
    f->next = NULL;
    return f;
}

void lmr_fetch_clear(struct lmr_fetch_queue *q)
{
    struct lmr_fetched *f;
    while ((f = lmr_fetch_pop(q)) != NULL)
        lmr_fetched_free(f);
    q->fetched_count = 0;
}
