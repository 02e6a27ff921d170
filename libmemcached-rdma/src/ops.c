/* ops.c: the common path of key operations (see ops.h). */
#include "ops.h"

#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "proto.h"
#include "resilience.h"

/* Encodes with the namespace in front of every key (the wire form). */
static memcached_return_t encode_with_namespace(struct lmr_client *c, memcached_request_st *req,
                                                const struct lmr_op_args *args, bool noreply)
{
    const struct lmr_proto *proto = lmr_proto_of(c);
    size_t ns = c->namespace_length;
    struct lmr_op_args prefixed = *args;
    if (args->key_count == 0) {
        char full[MEMCACHED_MAX_NAMESPACE + MEMCACHED_MAX_KEY];
        if (args->key == NULL)
            return proto->encode(req, args, noreply);
        memcpy(full, c->namespace_prefix, ns);
        memcpy(full + ns, args->key, args->key_length);
        prefixed.key = full;
        prefixed.key_length = ns + args->key_length;
        return proto->encode(req, &prefixed, noreply);
    }
    size_t n = args->key_count;
    char *text = malloc(n * (ns + MEMCACHED_MAX_KEY));
    const char **keys = malloc(n * sizeof(*keys));
    size_t *lengths = malloc(n * sizeof(*lengths));
    memcached_return_t rc = MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    if (text != NULL && keys != NULL && lengths != NULL) {
        for (size_t i = 0; i < n; i++) {
            char *k = text + i * (ns + MEMCACHED_MAX_KEY);
            memcpy(k, c->namespace_prefix, ns);
            memcpy(k + ns, args->keys[i], args->key_lengths[i]);
            keys[i] = k;
            lengths[i] = ns + args->key_lengths[i];
        }
        prefixed.keys = keys;
        prefixed.key_lengths = lengths;
        rc = proto->encode(req, &prefixed, noreply);
    }
    free(lengths);
    free(keys);
    free(text);
    return rc;
}

memcached_return_t lmr_op_issue_to(memcached_instance_st *srv, memcached_request_st *req,
                                   enum lmr_op_kind kind, const struct lmr_op_args *args,
                                   bool noreply)
{
    struct lmr_client *c = srv->client;
    lmr_request_prepare(req, c, kind);
    req->sink = kind == LMR_OP_MGET ? LMR_SINK_RESULTS : args->sink;
    req->user_buffer = args->user_buffer;
    req->user_capacity = args->user_capacity;
    req->stats = args->stats;
    struct lmr_op_args whole = *args; /* with a prefix, the length covers both */
    size_t prefix = kind == LMR_OP_STORE ? args->value_prefix_length : 0;
    whole.value_length += prefix;
    memcached_return_t rc = c->namespace_length > 0 && kind != LMR_OP_STATS
                                ? encode_with_namespace(c, req, &whole, noreply)
                                : lmr_proto_of(c)->encode(req, &whole, noreply);
    if (rc == MEMCACHED_SUCCESS && prefix > 0) {
        /* the encoder framed prefix + value with the value as body: the
         * prefix goes at the end of the head, the body is the value alone */
        req->body_length -= prefix;
        if (!lmr_request_append_head(req, args->value_prefix, prefix))
            rc = MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    }
    if (rc == MEMCACHED_SUCCESS && (req->detached || args->copy_value) &&
        !lmr_request_copy_body(req))
        rc = MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    if (rc != MEMCACHED_SUCCESS) {
        req->rc = rc;
        req->state = LMR_STATE_DONE;
        if (req->detached) {
            lmr_request_release(req);
            free(req);
        }
        return rc;
    }
    return lmr_io_issue(srv, req);
}

static memcached_return_t fail_early(memcached_request_st *req, memcached_return_t rc)
{
    req->rc = rc;
    req->state = LMR_STATE_DONE;
    if (req->detached) {
        lmr_request_release(req);
        free(req);
    }
    return rc;
}

memcached_return_t lmr_op_issue(struct lmr_client *c, memcached_request_st *req,
                                enum lmr_op_kind kind, const char *group_key,
                                size_t group_key_length, const struct lmr_op_args *args,
                                bool noreply)
{
    memcached_return_t rc = lmr_client_check_key(c, args->key, args->key_length);
    if (rc == MEMCACHED_SUCCESS && group_key != NULL)
        rc = lmr_client_check_key(c, group_key, group_key_length);
    if (rc != MEMCACHED_SUCCESS)
        return fail_early(req, rc);
    if (group_key == NULL) {
        group_key = args->key;
        group_key_length = args->key_length;
    }
    if (lmr_resilience_covers(c, kind))
        return lmr_resilience_issue(c, req, kind, group_key, group_key_length, args);
    memcached_instance_st *srv = lmr_client_pick(c, group_key, group_key_length, &rc);
    if (srv == NULL)
        return fail_early(req, rc);
    return lmr_op_issue_to(srv, req, kind, args, noreply);
}

static bool writes(enum lmr_op_kind kind)
{
    return kind == LMR_OP_STORE || kind == LMR_OP_DELETE;
}

/* Replica copies of a write go to the next servers after the primary, as
 * quiet requests the library owns. */
static void issue_replicas(struct lmr_client *c, const char *group_key, size_t gkl,
                           enum lmr_op_kind kind, const struct lmr_op_args *args)
{
    uint32_t replicas = c->behaviors.number_of_replicas;
    if (replicas == 0 || c->server_count < 2)
        return;
    if (replicas >= c->server_count)
        replicas = c->server_count - 1;
    uint32_t primary = lmr_client_pick_index(c, group_key, gkl);
    if (primary == UINT32_MAX)
        return;
    for (uint32_t i = 1; i <= replicas; i++) {
        memcached_instance_st *srv = c->servers[(primary + i) % c->server_count];
        memcached_request_st *rep = lmr_request_new_detached(c, kind);
        if (rep == NULL)
            return;
        (void)lmr_op_issue_to(srv, rep, kind, args, true);
    }
}

memcached_return_t lmr_op_blocking(memcached_st *ptr, memcached_request_st *req,
                                   enum lmr_op_kind kind, const char *group_key,
                                   size_t group_key_length, const struct lmr_op_args *args)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    const struct lmr_behaviors *b = &c->behaviors;
    c->query_id++;
    /* NOREPLY also quiets incr/decr (libmemcached's answer: SUCCESS, the
     * value unknown); BUFFER_REQUESTS and replicas are for writes only */
    bool resilient = lmr_resilience_covers(c, kind);
    bool noreply = b->noreply && (writes(kind) || kind == LMR_OP_ARITH) && !resilient;
    bool buffered = b->buffer_requests && writes(kind) && !resilient;
    memcached_return_t rc;
    if (buffered) {
        memcached_request_st *detached = lmr_request_new_detached(c, kind);
        if (detached == NULL)
            return lmr_client_result(c, MEMCACHED_MEMORY_ALLOCATION_FAILURE, NULL);
        rc = lmr_op_issue(c, detached, kind, group_key, group_key_length, args, noreply);
        if (rc == MEMCACHED_SUCCESS)
            rc = MEMCACHED_BUFFERED;
    } else {
        rc = lmr_op_issue(c, req, kind, group_key, group_key_length, args, noreply);
        if (rc == MEMCACHED_SUCCESS)
            rc = lmr_io_wait(c, req);
    }
    if (writes(kind) && !resilient && (rc == MEMCACHED_SUCCESS || rc == MEMCACHED_BUFFERED))
        issue_replicas(c, group_key ? group_key : args->key,
                       group_key ? group_key_length : args->key_length, kind, args);
    if (rc == MEMCACHED_SUCCESS &&
        (noreply || (writes(kind) && (b->number_of_replicas > 0 || resilient))))
        lmr_io_push_all(c); /* requests without replies: on their way before the call returns */
    if (noreply && b->binary_protocol)
        lmr_io_note_quiet(c);
    const char *why = NULL;
    if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_BUFFERED && rc != MEMCACHED_NOTFOUND &&
        rc != MEMCACHED_BAD_KEY_PROVIDED && rc != MEMCACHED_NO_SERVERS && !resilient) {
        uint32_t i = lmr_client_pick_index(c, group_key ? group_key : args->key,
                                           group_key ? group_key_length : args->key_length);
        if (i != UINT32_MAX)
            why = memcached_server_error(c->servers[i]);
    }
    return lmr_client_result(c, rc, why);
}
