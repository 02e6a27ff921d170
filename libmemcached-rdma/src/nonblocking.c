/* nonblocking.c: the non-blocking API: request objects, iset/bset/iget/
 * bget (issue and return), test/wait/wait_all (completion), and the result
 * accessors. Every call is a thin layer over the same pipeline the blocking
 * calls use (ops.c, io.c), so ordering per server is shared with them. */
#include <stdlib.h>

#include <libmemcached/memcached.h>

#include "io.h"
#include "ops.h"

memcached_request_st *memcached_request_create(memcached_st *memc)
{
    struct lmr_client *c = lmr_client_of(memc);
    if (c == NULL)
        return NULL;
    memcached_request_st *req = calloc(1, sizeof(*req));
    if (req == NULL)
        return NULL;
    lmr_request_prepare(req, c, LMR_OP_GET);
    req->rc = MEMCACHED_INVALID_ARGUMENTS; /* nothing issued yet */
    return req;
}

void memcached_request_free(memcached_request_st *req)
{
    if (req == NULL)
        return;
    if (req->state == LMR_STATE_QUEUED)
        (void)lmr_io_wait(req->client, req);
    lmr_request_release(req);
    free(req);
}

/* Common checks; the request must belong to memc and not be in flight. */
static memcached_return_t usable(memcached_st *memc, memcached_request_st *req,
                                 struct lmr_client **out)
{
    struct lmr_client *c = lmr_client_of(memc);
    if (c == NULL || req == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    if (req->state == LMR_STATE_QUEUED)
        return MEMCACHED_IN_PROGRESS;
    req->client = c;
    *out = c;
    return MEMCACHED_SUCCESS;
}

static memcached_return_t issue_store(memcached_st *memc, const char *key, size_t key_length,
                                      const char *value, size_t value_length, time_t expiration,
                                      uint32_t flags, memcached_request_st *req, bool copy)
{
    struct lmr_client *c;
    memcached_return_t rc = usable(memc, req, &c);
    if (rc != MEMCACHED_SUCCESS)
        return rc;
    if (value == NULL && value_length > 0)
        return MEMCACHED_INVALID_ARGUMENTS;
    struct lmr_op_args args = {
        .key = key,
        .key_length = key_length,
        .value = value,
        .value_length = value_length,
        .expiration = expiration,
        .flags = flags,
        .verb = LMR_SET,
        .copy_value = copy,
    };
    return lmr_op_issue(c, req, LMR_OP_STORE, NULL, 0, &args, false);
}

memcached_return_t memcached_iset(memcached_st *memc, const char *key, size_t key_length,
                                  const char *value, size_t value_length, time_t expiration,
                                  uint32_t flags, memcached_request_st *req)
{
    return issue_store(memc, key, key_length, value, value_length, expiration, flags, req, false);
}

memcached_return_t memcached_bset(memcached_st *memc, const char *key, size_t key_length,
                                  const char *value, size_t value_length, time_t expiration,
                                  uint32_t flags, memcached_request_st *req)
{
    return issue_store(memc, key, key_length, value, value_length, expiration, flags, req, true);
}

static memcached_return_t issue_get(memcached_st *memc, const char *key, size_t key_length,
                                    enum lmr_sink sink, char *buffer, size_t buffer_length,
                                    memcached_request_st *req)
{
    struct lmr_client *c;
    memcached_return_t rc = usable(memc, req, &c);
    if (rc != MEMCACHED_SUCCESS)
        return rc;
    if (sink == LMR_SINK_USER && buffer == NULL && buffer_length > 0)
        return MEMCACHED_INVALID_ARGUMENTS;
    struct lmr_op_args args = {
        .key = key,
        .key_length = key_length,
        .sink = sink,
        .user_buffer = buffer,
        .user_capacity = buffer_length,
        .want_cas = true, /* memcached_request_cas reports it */
    };
    return lmr_op_issue(c, req, LMR_OP_GET, NULL, 0, &args, false);
}

memcached_return_t memcached_iget(memcached_st *memc, const char *key, size_t key_length,
                                  char *buffer, size_t buffer_length, memcached_request_st *req)
{
    return issue_get(memc, key, key_length, LMR_SINK_USER, buffer, buffer_length, req);
}

memcached_return_t memcached_bget(memcached_st *memc, const char *key, size_t key_length,
                                  memcached_request_st *req)
{
    return issue_get(memc, key, key_length, LMR_SINK_LIBRARY, NULL, 0, req);
}

memcached_return_t memcached_test(memcached_st *memc, memcached_request_st *req)
{
    struct lmr_client *c = lmr_client_of(memc);
    if (c == NULL || req == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    if (req->state == LMR_STATE_QUEUED)
        lmr_io_poll_once(c);
    if (req->state == LMR_STATE_QUEUED)
        lmr_io_poll_events(c);
    return req->state == LMR_STATE_QUEUED ? MEMCACHED_IN_PROGRESS : req->rc;
}

memcached_return_t memcached_wait(memcached_st *memc, memcached_request_st *req)
{
    struct lmr_client *c = lmr_client_of(memc);
    if (c == NULL || req == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    if (req->state != LMR_STATE_QUEUED)
        return req->rc;
    return lmr_io_wait(c, req);
}

memcached_return_t memcached_wait_all(memcached_st *memc)
{
    struct lmr_client *c = lmr_client_of(memc);
    if (c == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    return lmr_io_wait_all(c);
}

memcached_return_t memcached_request_return(const memcached_request_st *req)
{
    if (req == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    return req->state == LMR_STATE_QUEUED ? MEMCACHED_IN_PROGRESS : req->rc;
}

const char *memcached_request_value(const memcached_request_st *req, size_t *value_length)
{
    if (value_length != NULL)
        *value_length = 0;
    if (req == NULL || req->state != LMR_STATE_DONE || req->kind != LMR_OP_GET || !req->got_value)
        return NULL;
    if (value_length != NULL)
        *value_length = req->value_length; /* the full length, also for E2BIG */
    if (req->rc != MEMCACHED_SUCCESS)
        return NULL;
    return req->sink == LMR_SINK_USER ? req->user_buffer : req->lib_buffer;
}

uint32_t memcached_request_flags(const memcached_request_st *req)
{
    return req != NULL && req->state == LMR_STATE_DONE ? req->flags : 0;
}

uint64_t memcached_request_cas(const memcached_request_st *req)
{
    return req != NULL && req->state == LMR_STATE_DONE ? req->cas : 0;
}
