/* resilience.c: dispatch of key operations to the active scheme, the
 * servers of a key, replication (synchronous and asynchronous), results
 * shared by both schemes and mget (see resilience.h). */
#include "resilience.h"

#include <stdlib.h>
#include <string.h>

#include "erasure.h"
#include "io.h"
#include "ops.h"

/* Replicated writes: sync completes when all copies did, async when the
 * first copy is stored (the others are stragglers that own their value). */
struct replicated_write {
    struct lmr_group g;
    bool async;
    enum lmr_op_kind kind;
};

/* Replicated reads: one copy at a time, in placement order, until one has
 * the value. The key is kept, since later copies are asked after the call
 * that issued the read returned. */
struct replicated_read {
    struct lmr_group g;
    uint32_t servers[LMR_EC_MAX_CHUNKS];
    uint32_t issued;
    memcached_return_t answer;  /* NOTFOUND from a live copy */
    memcached_return_t failure; /* the first server failure */
    struct lmr_op_args args;
    char key[MEMCACHED_MAX_KEY];
};

static memcached_return_t done_with(memcached_request_st *req, memcached_return_t rc)
{
    req->rc = rc;
    req->state = LMR_STATE_DONE;
    return rc;
}

memcached_return_t lmr_resilience_combine(const struct lmr_group *g, uint32_t quorum,
                                          enum lmr_op_kind kind)
{
    uint32_t stored = 0, failed = 0;
    memcached_return_t first_failure = MEMCACHED_SUCCESS, first_answer = MEMCACHED_SUCCESS;
    for (uint32_t i = 0; i < g->child_count; i++) {
        memcached_return_t rc = g->children[i]->rc;
        if (rc == MEMCACHED_SUCCESS) {
            stored++;
        } else if (lmr_group_is_failure(rc)) {
            failed++;
            if (first_failure == MEMCACHED_SUCCESS)
                first_failure = rc;
        } else if (first_answer == MEMCACHED_SUCCESS) {
            first_answer = rc;
        }
    }
    if (failed > 0)
        return stored >= quorum ? MEMCACHED_SOME_ERRORS : first_failure;
    if (kind == LMR_OP_STORE)
        return stored == g->child_count ? MEMCACHED_SUCCESS : first_answer;
    return stored > 0 ? MEMCACHED_SUCCESS : first_answer;
}

char *lmr_resilience_value_destination(memcached_request_st *parent, size_t length,
                                       memcached_return_t *rc)
{
    parent->got_value = true;
    parent->value_length = length;
    *rc = MEMCACHED_SUCCESS;
    if (parent->sink == LMR_SINK_USER) {
        if (length > parent->user_capacity) {
            *rc = MEMCACHED_E2BIG;
            return NULL;
        }
        return parent->user_buffer;
    }
    if (parent->lib_capacity < length + 1) {
        char *grown = realloc(parent->lib_buffer, length + 1);
        if (grown == NULL) {
            *rc = MEMCACHED_MEMORY_ALLOCATION_FAILURE;
            return NULL;
        }
        parent->lib_buffer = grown;
        parent->lib_capacity = length + 1;
    }
    parent->lib_buffer[length] = '\0';
    return parent->lib_buffer;
}

/* Before an async write completes, its copies still sending from the
 * caller's value take a copy of it (over RDMA they copied when issued, as
 * the server may read the value from the client's memory later). False
 * on ENOMEM: the write then completes with all its copies. */
static bool own_values(struct lmr_group *g)
{
    for (uint32_t i = 1; i < g->child_count; i++) {
        memcached_request_st *copy = g->children[i];
        if (copy->state == LMR_STATE_QUEUED && copy->body_length > 0 && copy->body_copy == NULL &&
            copy->sent < lmr_request_wire_length(copy) && !lmr_request_copy_body(copy))
            return false;
    }
    return true;
}

static void replicated_write_step(struct lmr_group *g)
{
    struct replicated_write *w = (struct replicated_write *)g;
    const memcached_request_st *primary = g->children[0];
    if (w->async && primary->state == LMR_STATE_DONE && primary->rc == MEMCACHED_SUCCESS &&
        own_values(g)) {
        lmr_group_finish(g, MEMCACHED_SUCCESS);
        return;
    }
    if (g->outstanding == 0)
        lmr_group_finish(g, lmr_resilience_combine(g, 1, w->kind));
}

static const struct lmr_group_ops replicated_write_ops = {.step = replicated_write_step};

/* Takes the copy's value as the parent's: the parent's sink was the copy's
 * (the caller's buffer), or the copy's library buffer changes hands. */
static void take_copy(memcached_request_st *parent, memcached_request_st *copy)
{
    parent->got_value = copy->got_value;
    parent->value_length = copy->value_length;
    parent->flags = copy->flags;
    parent->cas = copy->cas;
    if (parent->sink == LMR_SINK_LIBRARY) {
        char *buffer = parent->lib_buffer;
        size_t capacity = parent->lib_capacity;
        parent->lib_buffer = copy->lib_buffer;
        parent->lib_capacity = copy->lib_capacity;
        copy->lib_buffer = buffer;
        copy->lib_capacity = capacity;
    }
}

static void replicated_read_step(struct lmr_group *g)
{
    struct replicated_read *r = (struct replicated_read *)g;
    while (g->parent != NULL && g->outstanding == 0) {
        if (r->issued > 0) {
            memcached_request_st *copy = g->children[r->issued - 1];
            memcached_return_t rc = copy->rc;
            if (rc == MEMCACHED_SUCCESS || rc == MEMCACHED_E2BIG) {
                take_copy(g->parent, copy);
                lmr_group_finish(g, rc);
                return;
            }
            if (lmr_group_is_failure(rc)) {
                if (r->failure == MEMCACHED_SUCCESS)
                    r->failure = rc;
            } else {
                r->answer = rc;
            }
        }
        if (r->issued == g->child_count) {
            lmr_group_finish(g, r->answer != MEMCACHED_SUCCESS ? r->answer : r->failure);
            return;
        }
        uint32_t i = r->issued++;
        lmr_group_issue(g, i, g->client->servers[r->servers[i]], g->parent->kind, &r->args);
    }
}

static const struct lmr_group_ops replicated_read_ops = {.step = replicated_read_step};

static memcached_return_t replicated_issue(struct lmr_client *c, memcached_request_st *req,
                                           enum lmr_op_kind kind, const uint32_t *servers,
                                           uint32_t copies, const struct lmr_op_args *args)
{
    if (kind == LMR_OP_GET || kind == LMR_OP_EXIST) {
        struct replicated_read *r = (struct replicated_read *)lmr_group_create(
            c, req, &replicated_read_ops, sizeof(*r), copies);
        if (r == NULL)
            return done_with(req, MEMCACHED_MEMORY_ALLOCATION_FAILURE);
        memcpy(r->servers, servers, copies * sizeof(*servers));
        memcpy(r->key, args->key, args->key_length);
        r->args = *args;
        r->args.key = r->key;
        if (kind == LMR_OP_EXIST)
            r->args.sink = LMR_SINK_LIBRARY;
        r->g.ops->step(&r->g); /* asks the first copy, into the parent's sink */
        return MEMCACHED_SUCCESS;
    }
    struct replicated_write *w = (struct replicated_write *)lmr_group_create(
        c, req, &replicated_write_ops, sizeof(*w), copies);
    if (w == NULL)
        return done_with(req, MEMCACHED_MEMORY_ALLOCATION_FAILURE);
    w->async = c->behaviors.replication_async;
    w->kind = kind;
    w->g.count_failures = true;
    for (uint32_t i = 0; i < copies; i++) {
        struct lmr_op_args copy = *args;
        /* an asynchronous copy may outlive the call: over RDMA it owns its
         * value from the start, elsewhere from when the call completes if
         * it is still sending then (own_values) */
        memcached_instance_st *srv = c->servers[servers[i]];
        if (w->async && i > 0 && srv->type == MEMCACHED_CONNECTION_RDMA)
            copy.copy_value = true;
        lmr_group_issue(&w->g, i, srv, kind, &copy);
    }
    return MEMCACHED_SUCCESS;
}

memcached_return_t lmr_resilience_issue(struct lmr_client *c, memcached_request_st *req,
                                        enum lmr_op_kind kind, const char *group_key,
                                        size_t group_key_length, const struct lmr_op_args *args)
{
    lmr_request_prepare(req, c, kind);
    req->sink = args->sink;
    req->user_buffer = args->user_buffer;
    req->user_capacity = args->user_capacity;
    if (kind == LMR_OP_ARITH || (kind == LMR_OP_STORE && args->verb != LMR_SET &&
                                 args->verb != LMR_ADD && args->verb != LMR_REPLACE))
        return done_with(req, MEMCACHED_NOT_SUPPORTED);
    const struct lmr_behaviors *b = &c->behaviors;
    bool coded = b->ec_data_chunks > 0;
    uint32_t wanted = coded ? b->ec_data_chunks + b->ec_parity_chunks : b->replication_copies;
    if (c->server_count == 0)
        return done_with(req, MEMCACHED_NO_SERVERS);
    if (!coded && wanted > c->server_count)
        wanted = c->server_count; /* as NUMBER_OF_REPLICAS: no more copies than servers */
    if (wanted > c->server_count)
        return done_with(req, MEMCACHED_INVALID_ARGUMENTS); /* K + M servers needed */
    uint32_t servers[LMR_EC_MAX_CHUNKS];
    if (!lmr_client_pick_servers(c, group_key, group_key_length, wanted, servers))
        return done_with(req, MEMCACHED_MEMORY_ALLOCATION_FAILURE);
    memcached_return_t rc = coded ? lmr_ec_issue(c, req, kind, servers, args)
                                  : replicated_issue(c, req, kind, servers, wanted, args);
    if (rc != MEMCACHED_SUCCESS)
        return rc;
    lmr_group_run_pending(c); /* children that failed at once */
    return req->state == LMR_STATE_DONE ? req->rc : MEMCACHED_SUCCESS;
}

memcached_return_t lmr_resilience_mget(struct lmr_client *c, const char *group_key,
                                       size_t group_key_length, const char *const *keys,
                                       const size_t *key_lengths, size_t key_count)
{
    memcached_request_st *reqs = calloc(key_count, sizeof(*reqs));
    if (reqs == NULL)
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    for (size_t i = 0; i < key_count; i++) {
        struct lmr_op_args args = {
            .key = keys[i], .key_length = key_lengths[i], .sink = LMR_SINK_LIBRARY};
        lmr_request_init(&reqs[i]);
        (void)lmr_op_issue(c, &reqs[i], LMR_OP_GET, group_key, group_key_length, &args, false);
    }
    size_t failed = 0;
    memcached_return_t failure = MEMCACHED_SUCCESS;
    for (size_t i = 0; i < key_count; i++) {
        memcached_return_t rc = lmr_io_wait(c, &reqs[i]);
        if (rc == MEMCACHED_SUCCESS) {
            struct lmr_fetched *f = lmr_fetched_new(keys[i], key_lengths[i], reqs[i].value_length);
            if (f != NULL) {
                if (reqs[i].value_length > 0)
                    memcpy(f->value, reqs[i].lib_buffer, reqs[i].value_length);
                f->flags = reqs[i].flags;
                f->cas = reqs[i].cas;
                lmr_fetch_push(&c->fetch, f);
            }
        } else if (lmr_group_is_failure(rc)) {
            failed++;
            failure = rc;
        }
    }
    for (size_t i = key_count; i > 0; i--)
        lmr_request_release(&reqs[i - 1]);
    free(reqs);
    if (failed == 0)
        return MEMCACHED_SUCCESS;
    return failed == key_count ? failure : MEMCACHED_SOME_ERRORS;
}
