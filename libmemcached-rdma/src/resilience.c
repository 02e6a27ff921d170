/* resilience.c: dispatch of key operations to the active scheme, the
 * servers of a key, replication (synchronous and asynchronous), results
 * shared by both schemes and mget (see resilience.h). */
#include "resilience.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "erasure.h"
#include "io.h"
#include "ops.h"

/* Replicated writes: sync completes when all copies did, async when one
 * copy is stored (the others are stragglers that own their value).
 * Stored copies carry a chunk header (erasure.h) as whole copies 0..F-1. */
struct replicated_write {
    struct lmr_group g;
    bool async;
    enum lmr_op_kind kind;
    /* not cleared (lmr_group_create): written before they are read */
    char headers[LMR_EC_MAX_CHUNKS][LMR_EC_HEADER_LENGTH];
    char *value_copy; /* one copy of the value all copies send from, or NULL */
};

/* Replicated reads: one copy at a time, in placement order, until one has
 * a good copy (its header and checksum agree); the next copy is also asked
 * when the server of one in flight has completed nothing for the hedge
 * timeout, and the first good copy wins. The first copy whose header
 * arrives is received straight into the parent's value (replicated_place),
 * others into library memory. The key is kept, since later copies are
 * asked after the call that issued the read returned. */
struct replicated_read {
    struct lmr_group g;
    bool examined[LMR_EC_MAX_CHUNKS]; /* its answer was looked at */
    uint32_t issued;
    /* the copy whose payload is received in the parent's value, and where
     * (placed_copy and placed are set with `placing`) */
    bool placing;
    uint32_t placed_copy;
    char *placed;
    memcached_return_t answer;  /* NOTFOUND from a live copy */
    memcached_return_t failure; /* the first server failure */
    /* not cleared (lmr_group_create): set with the read */
    uint32_t servers[LMR_EC_MAX_CHUNKS];
    struct lmr_op_args args;
    char key[MEMCACHED_MAX_KEY];
};

uint64_t lmr_resilience_next_stamp(struct lmr_client *c)
{
    while (c->stamp_next == 0) /* a random start: stamps of two clients differ */
        if (getrandom(&c->stamp_next, sizeof(c->stamp_next), 0) != sizeof(c->stamp_next))
            c->stamp_next = (uint64_t)(uintptr_t)c ^ 0x5bd1e995u;
    return c->stamp_next++;
}

void lmr_resilience_copy_headers(struct lmr_client *c, char (*headers)[LMR_EC_HEADER_LENGTH],
                                 uint32_t copies, const struct lmr_op_args *args)
{
    struct lmr_ec_header h = {
        .k = 1,
        .m = copies - 1,
        .value_length = args->value_length,
        .stamp = lmr_resilience_next_stamp(c),
        .flags = args->flags,
    };
    struct lmr_ec_payload_sum sum;
    lmr_ec_payload_sum(args->value, args->value_length, &sum);
    for (uint32_t i = 0; i < copies; i++) {
        h.index = i;
        lmr_ec_header_write_summed(headers[i], &h, &sum);
    }
}

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
    return lmr_resilience_value_room(parent, length, rc);
}

char *lmr_resilience_place(memcached_request_st *parent, const struct lmr_ec_header *h, size_t at,
                           size_t payload)
{
    memcached_return_t rc;
    char *room = payload == 0 ? NULL : lmr_resilience_value_room(parent, h->value_length, &rc);
    return room == NULL || at + payload > h->value_length ? NULL : room + at;
}

char *lmr_resilience_value_room(memcached_request_st *parent, size_t length, memcached_return_t *rc)
{
    *rc = MEMCACHED_SUCCESS;
    if (parent->sink == LMR_SINK_USER) {
        if (length > parent->user_capacity) {
            *rc = MEMCACHED_E2BIG;
            return NULL;
        }
        return parent->user_buffer;
    }
    if (!lmr_request_reserve_value(parent, length)) {
        *rc = MEMCACHED_MEMORY_ALLOCATION_FAILURE;
        return NULL;
    }
    return parent->lib_buffer;
}

bool lmr_resilience_own_values(struct lmr_group *g)
{
    for (uint32_t i = 0; i < g->child_count; i++) {
        memcached_request_st *copy = g->children[i];
        if (copy->state == LMR_STATE_QUEUED && copy->body_length > 0 && copy->body_copy == NULL &&
            copy->sent < lmr_request_wire_length(copy) && !lmr_request_copy_body(copy))
            return false;
    }
    return true;
}

/* How long a write waits for a server that makes no progress before it
 * completes without it: four hedge timeouts, or an eighth of the poll
 * timeout when that is longer. Longer than a read's hedge, since a write
 * left behind says SOME_ERRORS, and a loaded machine can keep a live
 * server off the processor for a hedge timeout. */
static int write_delay_ms(const struct lmr_client *c)
{
    int delay = 4 * c->behaviors.hedge_timeout_ms;
    int poll = c->behaviors.poll_timeout_ms;
    return poll > 0 && poll / 8 > delay ? poll / 8 : delay;
}

/* Whether child i, in flight, may be left behind by its parent: its
 * server made no progress since the write was issued (found by this
 * step's timer, `woke`, which fires the write delay after the write was
 * issued) or since the timer last looked, or it was marked earlier and
 * has been quiet for the write delay. What it sent is the transport's
 * (sockets, and the RDMA transport, which copies every byte it accepts
 * into its registered buffers); what it has left to send it copies
 * (lmr_resilience_own_values). */
static bool may_leave(struct lmr_group *g, uint32_t i, bool woke, int64_t *now)
{
    int delay = write_delay_ms(g->client);
    if (woke) {
        if (lmr_group_child_stalled(g, i, delay))
            return true;
        /* it made progress: from now on, stalled means none since this look */
        if (g->children[i]->server != NULL)
            g->progress_marks[i] = g->children[i]->server->progress;
    }
    if (!lmr_group_child_hung(g, i))
        return false;
    if (*now < 0)
        *now = lmr_io_now_ms();
    return *now - g->children[i]->server->stalled_since_ms >= delay;
}

bool lmr_resilience_leave_hung(struct lmr_group *g, uint32_t quorum)
{
    bool woke = g->woke;
    g->woke = false;
    uint32_t stored = 0;
    bool leave = true;
    int64_t now = -1;
    for (uint32_t i = 0; i < g->child_count; i++) {
        const memcached_request_st *child = g->children[i];
        if (child->state == LMR_STATE_DONE)
            stored += child->rc == MEMCACHED_SUCCESS;
        else if (!may_leave(g, i, woke, &now))
            leave = false; /* no break: the timer marks every stalled server */
    }
    if (leave && stored >= quorum && lmr_resilience_own_values(g)) {
        lmr_group_finish(g, MEMCACHED_SOME_ERRORS);
        return true;
    }
    /* a server still answering, or too few stored: look again a write
     * delay later, so that no progress means none for that long (a hedge
     * timeout later, a live server off the processor for that long read
     * as a hung one and the write said SOME_ERRORS) */
    if (woke)
        lmr_group_wake_after(g, write_delay_ms(g->client));
    return false;
}

void lmr_resilience_arm_write(struct lmr_group *g)
{
    if (g->client->behaviors.hedge_timeout_ms > 0)
        lmr_group_wake_after(g, write_delay_ms(g->client));
}

static void replicated_write_step(struct lmr_group *g)
{
    struct replicated_write *w = (struct replicated_write *)g;
    bool one_stored = false; /* async: whichever copy is first, a hung server holds none */
    for (uint32_t i = 0; w->async && i < g->child_count; i++)
        one_stored = one_stored || (g->children[i]->state == LMR_STATE_DONE &&
                                    g->children[i]->rc == MEMCACHED_SUCCESS);
    if (one_stored && lmr_resilience_own_values(g)) {
        lmr_group_finish(g, MEMCACHED_SUCCESS);
        return;
    }
    if (g->outstanding == 0)
        lmr_group_finish(g, lmr_resilience_combine(g, 1, w->kind));
    else
        lmr_resilience_leave_hung(g, 1);
}

static void replicated_write_release(struct lmr_group *g)
{
    free(((struct replicated_write *)g)->value_copy);
}

static const struct lmr_group_ops replicated_write_ops = {
    .step = replicated_write_step,
    .release = replicated_write_release,
};

/* Whether a parsed header is that of a whole copy of a value for `copies`
 * copies, written for copy position `i`. */
static bool copy_header_fits(const struct lmr_ec_header *h, uint32_t i, uint32_t copies)
{
    return h->k == 1 && h->index == i && h->m == copies - 1;
}

/* Where copy i's payload is: in the parent's value when it was placed
 * there, else after the header in the child's buffer. */
static const char *copy_payload(const struct replicated_read *r, uint32_t i)
{
    const memcached_request_st *copy = r->g.children[i];
    if (r->placing && r->placed_copy == i)
        return r->placed;
    return copy->lib_buffer == NULL ? NULL : copy->lib_buffer + LMR_EC_HEADER_LENGTH;
}

/* Whether the copy that copy position `i` answered is a whole copy of a
 * value for `copies` copies, written for that position, with its checksum. */
static bool good_copy(const struct replicated_read *r, uint32_t i, struct lmr_ec_header *h)
{
    const memcached_request_st *copy = r->g.children[i];
    return lmr_ec_header_read_split(copy->lib_buffer, copy_payload(r, i), copy->value_length, h) &&
           copy_header_fits(h, i, r->g.child_count);
}

/* Where copy i's payload goes once its header (`prefix`) arrived: the
 * parent's value, for the first copy whose header is that of a whole copy
 * for this position (another one once that copy was found bad), so that a
 * get copies nothing; else NULL, the child's own buffer (the group's
 * placement hook, group.h). */
static char *replicated_place(struct lmr_group *g, uint32_t i, const char *prefix,
                              size_t value_length)
{
    struct replicated_read *r = (struct replicated_read *)g;
    struct lmr_ec_header h;
    if (g->parent->kind != LMR_OP_GET || (r->placing && !r->examined[r->placed_copy]) ||
        !lmr_ec_header_parse(prefix, value_length, &h) || !copy_header_fits(&h, i, g->child_count))
        return NULL;
    char *room = lmr_resilience_place(g->parent, &h, 0, value_length - LMR_EC_HEADER_LENGTH);
    if (room == NULL)
        return NULL;
    r->placing = true;
    r->placed_copy = i;
    r->placed = room;
    return room;
}

/* Completes the parent with good copy i's value. */
static void deliver_copy(struct replicated_read *r, uint32_t i, const struct lmr_ec_header *h)
{
    struct lmr_group *g = &r->g;
    memcached_request_st *parent = g->parent;
    parent->flags = h->flags;
    parent->cas = g->children[i]->cas;
    if (parent->kind == LMR_OP_EXIST) {
        lmr_group_finish(g, MEMCACHED_SUCCESS);
        return;
    }
    memcached_return_t rc;
    char *dest = lmr_resilience_value_destination(parent, (size_t)h->value_length, &rc);
    const char *payload = copy_payload(r, i);
    if (dest != NULL && h->value_length > 0 && payload != dest) /* unless it arrived there */
        memcpy(dest, payload, (size_t)h->value_length);
    lmr_group_finish(g, rc);
}

/* The hedge timer fired: whether a copy in flight is on a server that
 * completed nothing since it was asked (else the timer is set again). */
static bool copy_stalled(struct replicated_read *r)
{
    struct lmr_group *g = &r->g;
    if (!g->woke)
        return false;
    g->woke = false;
    bool stalled = false;
    for (uint32_t i = 0; i < r->issued; i++) /* every stalled server is marked */
        if (!r->examined[i] && lmr_group_child_stalled(g, i, g->client->behaviors.hedge_timeout_ms))
            stalled = true;
    if (!stalled && r->issued < g->child_count && g->outstanding > 0)
        lmr_group_wake_after(g, g->client->behaviors.hedge_timeout_ms);
    return stalled;
}

/* Whether a copy asked for is in flight on a server worth waiting for
 * (not hung, not connecting again after a failed connect). */
static bool copy_worth_waiting_for(const struct replicated_read *r)
{
    for (uint32_t i = 0; i < r->issued; i++)
        if (!r->examined[i] && r->g.children[i]->state == LMR_STATE_QUEUED &&
            !lmr_group_child_doubtful(&r->g, i))
            return true;
    return false;
}

static void replicated_read_step(struct lmr_group *g)
{
    struct replicated_read *r = (struct replicated_read *)g;
    bool hedge = copy_stalled(r);
    for (;;) {
        for (uint32_t i = 0; i < r->issued; i++) {
            memcached_request_st *copy = g->children[i];
            if (r->examined[i] || copy->state != LMR_STATE_DONE)
                continue;
            r->examined[i] = true;
            struct lmr_ec_header h;
            if (copy->rc == MEMCACHED_SUCCESS && good_copy(r, i, &h)) {
                deliver_copy(r, i, &h);
                return;
            }
            if (lmr_group_is_failure(copy->rc)) {
                if (r->failure == MEMCACHED_SUCCESS)
                    r->failure = copy->rc;
            } else {
                r->answer = MEMCACHED_NOTFOUND; /* a miss, or bytes that are no copy */
            }
        }
        if (r->issued == g->child_count) {
            if (g->outstanding > 0) /* a stopped server may hold the only copy: wait */
                return;
            /* copies on servers taken as erasures because their connect
             * failed: asked for real before the read fails */
            uint32_t again = lmr_group_ask_avoided(g, r->servers, &r->args);
            for (uint32_t j = 0; j < r->issued; j++)
                if (again & (UINT32_C(1) << j))
                    r->examined[j] = false;
            if (again == 0)
                lmr_group_finish(g, r->answer != MEMCACHED_SUCCESS ? r->answer : r->failure);
            return;
        }
        if (!hedge && copy_worth_waiting_for(r))
            return; /* a copy in flight, its server answering */
        uint32_t i = r->issued++;
        lmr_group_issue_read(g, i, g->client->servers[r->servers[i]], &r->args);
        if (g->client->behaviors.hedge_timeout_ms > 0)
            lmr_group_wake_after(g, g->client->behaviors.hedge_timeout_ms);
        /* a server known to have stopped answering: the next copy now */
        hedge = lmr_group_child_doubtful(g, i);
    }
}

static const struct lmr_group_ops replicated_read_ops = {
    .step = replicated_read_step,
    .place = replicated_place,
    .prefix_length = LMR_EC_HEADER_LENGTH,
};

static memcached_return_t replicated_issue(struct lmr_client *c, memcached_request_st *req,
                                           enum lmr_op_kind kind, const uint32_t *servers,
                                           uint32_t copies, const struct lmr_op_args *args)
{
    if (kind == LMR_OP_GET || kind == LMR_OP_EXIST) {
        struct replicated_read *r = (struct replicated_read *)lmr_group_create(
            c, req, &replicated_read_ops, sizeof(*r), offsetof(struct replicated_read, servers),
            copies);
        if (r == NULL)
            return done_with(req, MEMCACHED_MEMORY_ALLOCATION_FAILURE);
        memcpy(r->servers, servers, copies * sizeof(*servers));
        memcpy(r->key, args->key, args->key_length);
        r->args = (struct lmr_op_args){
            .key = r->key, .key_length = args->key_length, .sink = LMR_SINK_LIBRARY};
        r->g.ops->step(&r->g); /* asks the first copy */
        return MEMCACHED_SUCCESS;
    }
    /* the value is copied once for all copies when the caller asked so
     * (bset), or when an asynchronous copy goes over RDMA: it may outlive
     * the call and the server may read the value from the client's memory
     * later; other asynchronous copies still sending when the call
     * completes take a copy then (own_values) */
    bool async = c->behaviors.replication_async, over_rdma = false;
    for (uint32_t i = 0; i < copies; i++)
        over_rdma = over_rdma || c->servers[servers[i]]->type == MEMCACHED_CONNECTION_RDMA ||
                    c->servers[servers[i]]->type == MEMCACHED_CONNECTION_RDMA_RC;
    struct lmr_op_args value = *args;
    value.copy_value = false;
    char *value_copy = NULL;
    if (kind == LMR_OP_STORE && args->value_length > 0 &&
        (args->copy_value || (async && over_rdma))) {
        value_copy = malloc(args->value_length);
        if (value_copy == NULL)
            return done_with(req, MEMCACHED_MEMORY_ALLOCATION_FAILURE);
        memcpy(value_copy, args->value, args->value_length);
        value.value = value_copy;
    }
    struct replicated_write *w = (struct replicated_write *)lmr_group_create(
        c, req, &replicated_write_ops, sizeof(*w), offsetof(struct replicated_write, headers),
        copies);
    if (w == NULL) {
        free(value_copy);
        return done_with(req, MEMCACHED_MEMORY_ALLOCATION_FAILURE);
    }
    w->async = async;
    w->kind = kind;
    w->g.count_failures = true;
    w->value_copy = value_copy;
    if (kind == LMR_OP_STORE)
        lmr_resilience_copy_headers(c, w->headers, copies, &value);
    for (uint32_t i = 0; i < copies; i++) {
        struct lmr_op_args copy = value;
        if (kind == LMR_OP_STORE) {
            copy.value_prefix = w->headers[i];
            copy.value_prefix_length = LMR_EC_HEADER_LENGTH;
        }
        lmr_group_issue(&w->g, i, c->servers[servers[i]], kind, &copy);
    }
    lmr_resilience_arm_write(&w->g);
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
