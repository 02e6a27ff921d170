/* fetch.h: the queue of items an mget has received and the caller has not
 * fetched yet. Each entry owns its value. No I/O here. */
#ifndef LMR_FETCH_H
#define LMR_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include <libmemcached/constants.h>

struct lmr_fetched {
    struct lmr_fetched *next;
    char key[MEMCACHED_MAX_KEY];
    size_t key_length;
    char *value; /* value_length bytes plus a NUL */
    size_t value_length;
    uint32_t flags;
    uint64_t cas;
};

struct lmr_fetch_queue {
    struct lmr_fetched *head, *tail;
    uint32_t pending_requests; /* mget requests still in flight */
    uint32_t fetched_count;    /* hits memcached_fetch returned since the mget */
};

/* NULL on ENOMEM or a key longer than MEMCACHED_MAX_KEY - 1. */
struct lmr_fetched *lmr_fetched_new(const char *key, size_t key_length, size_t value_length);
void lmr_fetched_free(struct lmr_fetched *f);
void lmr_fetch_push(struct lmr_fetch_queue *q, struct lmr_fetched *f);
struct lmr_fetched *lmr_fetch_pop(struct lmr_fetch_queue *q);
void lmr_fetch_clear(struct lmr_fetch_queue *q);

#endif
