/* resilience.h: values that survive dead servers, on top of parent
 * requests (group.h). REPLICATION stores F copies of a value on the first F
 * distinct servers of its key (synchronous: the call completes when all
 * are stored; asynchronous: when the first is, the rest complete in the
 * background) and reads the first live copy. ERASURE_CODING stores K data
 * and M parity chunks on K + M distinct servers (resilience_ec.c). Both
 * place a key on every server, ejected or not: a dead server is an
 * erasure, never a reason to move keys. doc/resilience.md says more. */
#ifndef LMR_RESILIENCE_H
#define LMR_RESILIENCE_H

#include <stdbool.h>

#include "client.h"
#include "erasure.h"
#include "group.h"
#include "request.h"

/* Whether REPLICATION or ERASURE_CODING is on. */
static inline bool lmr_resilience_active(const struct lmr_client *c)
{
    return c->behaviors.replication_copies > 1 || c->behaviors.ec_data_chunks > 0;
}

/* Whether a request of this kind goes through resilience. */
static inline bool lmr_resilience_covers(const struct lmr_client *c, enum lmr_op_kind kind)
{
    return lmr_resilience_active(c) &&
           (kind == LMR_OP_STORE || kind == LMR_OP_GET || kind == LMR_OP_DELETE ||
            kind == LMR_OP_TOUCH || kind == LMR_OP_EXIST || kind == LMR_OP_ARITH);
}

/* Issues req (a parent) for a key operation under the active scheme.
 * MEMCACHED_SUCCESS once in progress; otherwise req is done with the
 * returned code. */
memcached_return_t lmr_resilience_issue(struct lmr_client *c, memcached_request_st *req,
                                        enum lmr_op_kind kind, const char *group_key,
                                        size_t group_key_length, const struct lmr_op_args *args);

/* memcached_mget under resilience: one parent get per key, results into the
 * fetch queue. */
memcached_return_t lmr_resilience_mget(struct lmr_client *c, const char *group_key,
                                       size_t group_key_length, const char *const *keys,
                                       const size_t *key_lengths, size_t key_count);

/* Shared with resilience_ec.c. */
/* The parent's result from write children that all completed: every one
 * stored (a delete or touch: one did, the others found nothing), SUCCESS;
 * only answers such as NOTSTORED, the first of them; servers that failed,
 * SOME_ERRORS if at least `quorum` stored, else the first failure. */
memcached_return_t lmr_resilience_combine(const struct lmr_group *g, uint32_t quorum,
                                          enum lmr_op_kind kind);
/* Before a parent completes with children still sending from the
 * caller's value, those take a copy of what they have left to send. False
 * on ENOMEM. */
bool lmr_resilience_own_values(struct lmr_group *g);
/* A write's children still in flight all wait on servers that made no
 * progress for the write delay (four hedge timeouts, or an eighth of the
 * poll timeout if longer; found by the write's timer, or marked by an
 * earlier parent): once at least `quorum` children stored, the parent
 * completes with SOME_ERRORS and leaves them behind as stragglers that own
 * their bytes (they complete when the server answers or fails). True if
 * it completed the parent; otherwise the timer is set again if it fired. */
bool lmr_resilience_leave_hung(struct lmr_group *g, uint32_t quorum);
/* Sets a write's timer (the write delay; none when the hedge timeout is 0). */
void lmr_resilience_arm_write(struct lmr_group *g);
/* A stamp for one write: a random start per client, then one more per
 * write, so writes of two clients differ. */
uint64_t lmr_resilience_next_stamp(struct lmr_client *c);
/* Headers of `copies` whole copies (K = 1, copy i at index i, M = copies -
 * 1) of one write of args' value, with one pass over the value. */
void lmr_resilience_copy_headers(struct lmr_client *c, char (*headers)[LMR_EC_HEADER_LENGTH],
                                 uint32_t copies, const struct lmr_op_args *args);
/* Where the parent's value of `length` bytes goes (its buffer or library
 * memory); NULL with *rc set (E2BIG, ENOMEM) when it cannot. */
char *lmr_resilience_value_destination(memcached_request_st *parent, size_t length,
                                       memcached_return_t *rc);
/* Where a payload of `payload` bytes of the write h describes goes in the
 * parent's value, `at` bytes in (its buffer, or its library buffer grown
 * for the value): a group's placement hook (group.h) receives it there.
 * NULL when it does not fit, is empty or there is no room. */
char *lmr_resilience_place(memcached_request_st *parent, const struct lmr_ec_header *h, size_t at,
                           size_t payload);
/* The same place without noting the value in the parent (a library
 * buffer is grown; it stays where it is for that length). */
char *lmr_resilience_value_room(memcached_request_st *parent, size_t length,
                                memcached_return_t *rc);
/* Erasure-coded operations (resilience_ec.c); servers[0..K+M) are the
 * key's distinct servers. */
memcached_return_t lmr_ec_issue(struct lmr_client *c, memcached_request_st *req,
                                enum lmr_op_kind kind, const uint32_t *servers,
                                const struct lmr_op_args *args);

#endif
