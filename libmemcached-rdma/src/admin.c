/* admin.c: calls addressed to every server rather than to a key: flush,
 * version, verbosity, stats (memcached_stat, memcached_stat_execute). Each
 * issues one request per server, then waits for all of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmemcached/memcached.h>

#include "io.h"
#include "ops.h"
#include "stats.h"

/* Runs `kind` on every server; SUCCESS, the common failure, or SOME_ERRORS. */
static memcached_return_t on_all(struct lmr_client *c, enum lmr_op_kind kind,
                                 const struct lmr_op_args *args, bool noreply,
                                 struct lmr_stat_sink *sinks)
{
    if (c->server_count == 0)
        return MEMCACHED_NO_SERVERS;
    c->query_id++;
    memcached_request_st *reqs = calloc(c->server_count, sizeof(*reqs));
    if (reqs == NULL)
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    for (uint32_t i = 0; i < c->server_count; i++) {
        struct lmr_op_args a = *args;
        a.stats = sinks != NULL ? &sinks[i] : NULL;
        (void)lmr_op_issue_to(c->servers[i], &reqs[i], kind, &a, noreply);
    }
    uint32_t failed = 0;
    memcached_return_t failure = MEMCACHED_SUCCESS;
    for (uint32_t i = 0; i < c->server_count; i++) {
        memcached_return_t rc = lmr_io_wait(c, &reqs[i]);
        if (rc != MEMCACHED_SUCCESS) {
            failed++;
            failure = rc;
        }
        lmr_request_release(&reqs[i]);
    }
    free(reqs);
    if (noreply)
        lmr_io_push_all(c);
    if (failed == 0)
        return MEMCACHED_SUCCESS;
    (void)failure;
    return MEMCACHED_SOME_ERRORS; /* as libmemcached, even for a single server */
}

memcached_return_t memcached_flush(memcached_st *ptr, time_t expiration)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    struct lmr_op_args args = {.expiration = expiration};
    return lmr_client_result(c, on_all(c, LMR_OP_FLUSH, &args, c->behaviors.noreply, NULL), NULL);
}

memcached_return_t memcached_version(memcached_st *ptr)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    struct lmr_op_args args = {0};
    return lmr_client_result(c, on_all(c, LMR_OP_VERSION, &args, false, NULL), NULL);
}

memcached_return_t memcached_verbosity(memcached_st *ptr, uint32_t verbosity)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    if (c->behaviors.binary_protocol) {
        /* memcached has no binary verbosity command: like libmemcached, use
         * the text command, on connections of their own */
        memcached_st *text = memcached_clone(NULL, ptr);
        if (text == NULL)
            return lmr_client_result(c, MEMCACHED_MEMORY_ALLOCATION_FAILURE, NULL);
        memcached_behavior_set(text, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 0);
        memcached_return_t rc = memcached_verbosity(text, verbosity);
        memcached_free(text);
        return lmr_client_result(c, rc, NULL);
    }
    struct lmr_op_args args = {.number = verbosity};
    return lmr_client_result(c, on_all(c, LMR_OP_VERBOSITY, &args, false, NULL), NULL);
}

memcached_stat_st *memcached_stat(memcached_st *ptr, char *args, memcached_return_t *error)
{
    memcached_return_t unused;
    if (error == NULL)
        error = &unused;
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL) {
        *error = MEMCACHED_INVALID_ARGUMENTS;
        return NULL;
    }
    if (c->server_count == 0) {
        *error = lmr_client_result(c, MEMCACHED_NO_SERVERS, NULL);
        return NULL;
    }
    /* one extra zeroed entry (root == NULL) marks the end for memcached_stat_free */
    memcached_stat_st *stats = calloc(c->server_count + 1, sizeof(*stats));
    struct lmr_stat_sink *sinks = calloc(c->server_count, sizeof(*sinks));
    if (stats == NULL || sinks == NULL) {
        free(sinks);
        free(stats);
        *error = lmr_client_result(c, MEMCACHED_MEMORY_ALLOCATION_FAILURE, NULL);
        return NULL;
    }
    for (uint32_t i = 0; i < c->server_count; i++) {
        stats[i].root = ptr;
        sinks[i].stat = &stats[i];
        sinks[i].server = c->servers[i];
    }
    struct lmr_op_args a = {.stat_args = args};
    *error = lmr_client_result(c, on_all(c, LMR_OP_STATS, &a, false, sinks), NULL);
    free(sinks);
    return stats;
}

memcached_return_t memcached_stat_execute(memcached_st *memc, const char *args,
                                          memcached_stat_fn func, void *context)
{
    struct lmr_client *c = lmr_client_of(memc);
    if (c == NULL || func == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    if (c->server_count == 0)
        return lmr_client_result(c, MEMCACHED_NO_SERVERS, NULL);
    struct lmr_stat_sink *sinks = calloc(c->server_count, sizeof(*sinks));
    if (sinks == NULL)
        return lmr_client_result(c, MEMCACHED_MEMORY_ALLOCATION_FAILURE, NULL);
    for (uint32_t i = 0; i < c->server_count; i++) {
        sinks[i].callback = func;
        sinks[i].context = context;
        sinks[i].server = c->servers[i];
    }
    struct lmr_op_args a = {.stat_args = args};
    memcached_return_t rc = on_all(c, LMR_OP_STATS, &a, false, sinks);
    free(sinks);
    return lmr_client_result(c, rc, NULL);
}

/* One "stats ARGS" request to one server, its replies into sink, and that
 * server's own answer. */
static memcached_return_t stats_of(memcached_instance_st *srv, const char *args,
                                   struct lmr_stat_sink *sink)
{
    struct lmr_op_args a = {.stat_args = args, .stats = sink};
    memcached_request_st req;
    lmr_request_init(&req);
    memcached_return_t rc = lmr_op_issue_to(srv, &req, LMR_OP_STATS, &a, false);
    if (rc == MEMCACHED_SUCCESS)
        rc = lmr_io_wait(srv->client, &req);
    lmr_request_release(&req);
    return rc;
}

memcached_return_t memcached_stat_servername(memcached_stat_st *memc_stat, char *args,
                                             const char *hostname, in_port_t port)
{
    if (memc_stat == NULL || hostname == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    memset(memc_stat, 0, sizeof(*memc_stat));
    memcached_st *one = memcached_create(NULL);
    if (one == NULL)
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    memcached_return_t rc = memcached_server_add(one, hostname, port);
    if (rc == MEMCACHED_SUCCESS) {
        /* this one server's own answer (memcached_stat would fold a
         * failure into SOME_ERRORS) */
        memcached_instance_st *srv = lmr_client_of(one)->servers[0];
        struct lmr_stat_sink sink = {.stat = memc_stat, .server = srv};
        rc = stats_of(srv, args, &sink);
    }
    /* the fields stay; the pair list would outlive the handle it names */
    lmr_stat_pairs_free(memc_stat);
    memcached_free(one);
    return rc;
}

/* Slab classes memcached has had since 1.4.23 (ids 0..63); a class with no
 * items answers END. */
#define DUMP_CLASSES 64

memcached_return_t memcached_dump(memcached_st *ptr, memcached_dump_fn *callback, void *context,
                                  uint32_t number_of_callbacks)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL || (callback == NULL && number_of_callbacks > 0))
        return MEMCACHED_INVALID_ARGUMENTS;
    if (c->server_count == 0)
        return lmr_client_result(c, MEMCACHED_NO_SERVERS, NULL);
    if (c->behaviors.binary_protocol)
        return lmr_client_result(c, MEMCACHED_NOT_SUPPORTED,
                                 "memcached_dump needs the text protocol");
    bool callback_failed = false;
    for (unsigned cls = 0; cls < DUMP_CLASSES; cls++) {
        char args[32];
        snprintf(args, sizeof(args), "cachedump %u 0", cls);
        for (uint32_t i = 0; i < c->server_count; i++) {
            struct lmr_stat_sink sink = {.server = c->servers[i],
                                         .context = context,
                                         .dumping = true,
                                         .dump = callback,
                                         .dump_count = number_of_callbacks,
                                         .root = ptr};
            memcached_return_t rc = stats_of(c->servers[i], args, &sink);
            if (rc != MEMCACHED_SUCCESS) /* a server that refuses dumps (-X), or is gone */
                return lmr_client_result(c, rc, memcached_server_error(c->servers[i]));
            callback_failed |= sink.rc != MEMCACHED_SUCCESS;
        }
    }
    return lmr_client_result(c, callback_failed ? MEMCACHED_SOME_ERRORS : MEMCACHED_SUCCESS,
                             callback_failed ? "a dump callback failed" : NULL);
}
