/* group.c: parent requests and their children (see group.h). */
#include "group.h"

#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "ops.h"
#include "server.h"

/* Requests a server marked stalled may hold before more children to it
 * fail at once (each may hold a copy of a value). */
#define LMR_STALLED_QUEUE_MAX 64
/* Over a transport whose connect blocks the caller, reads try a server
 * whose connect failed again this many CONNECT_TIMEOUTs after the failure
 * at the earliest (and as RETRY_TIMEOUT allows), so one that does not
 * accept costs reads at most about a tenth of their time. */
#define LMR_BLOCKING_READ_CONNECT_SPACING 10

bool lmr_group_is_failure(memcached_return_t rc)
{
    switch (rc) {
    case MEMCACHED_SUCCESS:
    case MEMCACHED_NOTFOUND:
    case MEMCACHED_NOTSTORED:
    case MEMCACHED_DATA_EXISTS:
    case MEMCACHED_E2BIG:
    case MEMCACHED_END:
        return false;
    default:
        return true;
    }
}

/* A group's block: the policy struct (the group first), its children's
 * pointers and progress marks, then the children themselves (they live
 * exactly as long as the group). */
static size_t round_up16(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

static size_t block_bytes(size_t size, uint32_t child_count)
{
    return round_up16(size) +
           round_up16(child_count * (sizeof(memcached_request_st *) + sizeof(uint64_t))) +
           child_count * sizeof(memcached_request_st);
}

/* A spare block of at least `need` bytes (its size in *capacity), or a
 * new one; NULL on ENOMEM. */
static struct lmr_group *take_block(struct lmr_client *c, size_t need, size_t *capacity)
{
    struct lmr_group *g = lmr_spare_pool_take(&c->spare_groups, need, capacity);
    if (g != NULL)
        return g;
    *capacity = need;
    return malloc(need);
}

static void group_free(struct lmr_group *g)
{
    struct lmr_client *c = g->client;
    if (g->ops->release != NULL)
        g->ops->release(g);
    for (uint32_t i = g->set_up; i > 0; i--) {
        memcached_request_st *child = g->children[i - 1];
        if (child->lib_buffer != NULL &&
            lmr_spare_pool_put(&c->spare_buffers, child->lib_buffer, child->lib_capacity)) {
            child->lib_buffer = NULL;
            child->lib_capacity = 0;
        }
        lmr_request_release(child);
    }
    if (!lmr_spare_pool_put(&c->spare_groups, g, g->block_size))
        free(g);
}

struct lmr_group *lmr_group_create(struct lmr_client *c, memcached_request_st *parent,
                                   const struct lmr_group_ops *ops, size_t size, size_t zeroed,
                                   uint32_t child_count)
{
    size_t capacity;
    struct lmr_group *g = take_block(c, block_bytes(size, child_count), &capacity);
    if (g == NULL)
        return NULL;
    memset(g, 0, zeroed);
    g->block_size = capacity;
    g->client = c;
    g->ops = ops;
    char *after = (char *)g + round_up16(size);
    g->children = (memcached_request_st **)after;
    g->progress_marks = (uint64_t *)(after + child_count * sizeof(memcached_request_st *));
    memcached_request_st *kids =
        (memcached_request_st *)(after + round_up16(child_count * (sizeof(memcached_request_st *) +
                                                                   sizeof(uint64_t))));
    g->child_count = child_count;
    g->set_up = 0;
    for (uint32_t i = 0; i < child_count; i++)
        g->children[i] = &kids[i];
    g->parent = parent;
    parent->group = g;
    parent->state = LMR_STATE_QUEUED;
    parent->rc = MEMCACHED_IN_PROGRESS;
    return g;
}

/* Sets up the children up to child i (see lmr_group_create) and returns
 * child i. */
static memcached_request_st *child_set_up(struct lmr_group *g, uint32_t i)
{
    struct lmr_client *c = g->client;
    for (; g->set_up <= i; g->set_up++) {
        /* ready to be issued (lmr_op_issue_to prepares it) or failed
         * without a request: idle, owning nothing */
        memcached_request_st *child = g->children[g->set_up];
        lmr_request_init(child);
        child->head = child->head_inline;
        child->client = c;
        child->kind = LMR_OP_GET;
        child->expects_reply = true;
        /* a spare buffer, of any size (prepare keeps it) */
        child->lib_buffer = lmr_spare_pool_take(&c->spare_buffers, 0, &child->lib_capacity);
        child->group = g;
        child->child_index = g->set_up;
    }
    return g->children[i];
}

static void mark_pending(struct lmr_group *g)
{
    if (g->pending)
        return;
    g->pending = true;
    g->next_pending = g->client->pending_groups;
    g->client->pending_groups = g;
}

void lmr_group_issue(struct lmr_group *g, uint32_t i, memcached_instance_st *srv,
                     enum lmr_op_kind kind, const struct lmr_op_args *args)
{
    memcached_request_st *child = child_set_up(g, i);
    g->outstanding++;
    g->progress_marks[i] = srv->progress;
    if (srv->stalled && srv->stalled_mark == srv->progress &&
        srv->queued >= LMR_STALLED_QUEUE_MAX) {
        /* the server stopped answering and enough wait on it already: an
         * erasure at once, rather than one more request (and its copy of
         * a value) piling up behind those it does not answer */
        child->rc = MEMCACHED_TIMEOUT;
        child->state = LMR_STATE_DONE;
        lmr_group_child_done(child);
        return;
    }
    /* a failure code means it was never queued (a request that was queued
     * and failed completed through the engine, which told the group) */
    if (lmr_op_issue_to(srv, child, kind, args, false) != MEMCACHED_SUCCESS)
        lmr_group_child_done(child);
}

/* Whether a read may try to connect to srv, whose last connect failed and
 * which has no connection: RETRY_TIMEOUT allows it and, for a connect
 * that blocks the caller, the failed one is a while ago. */
static bool read_may_connect(const memcached_instance_st *srv)
{
    if (!lmr_io_connect_allowed(srv))
        return false;
    if (lmr_io_connects_in_background(srv))
        return true;
    int64_t spacing =
        (int64_t)LMR_BLOCKING_READ_CONNECT_SPACING * srv->client->behaviors.connect_timeout_ms;
    return lmr_io_now_ms() - srv->connect_failed_ms >= spacing;
}

void lmr_group_issue_read(struct lmr_group *g, uint32_t i, memcached_instance_st *srv,
                          const struct lmr_op_args *args)
{
    if (!srv->connect_failed || (srv->conn.ops != NULL && !srv->connecting) ||
        (srv->conn.ops == NULL && read_may_connect(srv))) {
        /* after a failed connect, a connect in the background: the read
         * does not wait for it (lmr_group_child_doubtful) */
        lmr_group_issue(g, i, srv, LMR_OP_GET, args);
        return;
    }
    memcached_request_st *child = child_set_up(g, i);
    g->outstanding++;
    g->avoided |= UINT32_C(1) << i;
    child->rc =
        srv->error_rc != MEMCACHED_SUCCESS ? srv->error_rc : MEMCACHED_SERVER_TEMPORARILY_DISABLED;
    child->state = LMR_STATE_DONE;
    lmr_group_child_done(child);
}

uint32_t lmr_group_ask_avoided(struct lmr_group *g, const uint32_t *servers,
                               const struct lmr_op_args *args)
{
    uint32_t asked = g->avoided;
    g->avoided = 0;
    for (uint32_t i = 0; i < g->child_count; i++)
        if (asked & (UINT32_C(1) << i))
            lmr_group_issue(g, i, g->client->servers[servers[i]], LMR_OP_GET, args);
    return asked;
}

static void unlink_timed(struct lmr_group *g)
{
    if (!g->timed)
        return;
    struct lmr_group **at = &g->client->timed_groups;
    while (*at != g)
        at = &(*at)->next_timed;
    *at = g->next_timed;
    g->next_timed = NULL;
    g->timed = false;
}

void lmr_group_wake_after(struct lmr_group *g, int delay_ms)
{
    g->wake_at_ms = lmr_io_now_ms() + delay_ms;
    if (g->timed)
        return;
    g->timed = true;
    g->next_timed = g->client->timed_groups;
    g->client->timed_groups = g;
}

void lmr_group_run_timers(struct lmr_client *c)
{
    if (c->timed_groups == NULL)
        return;
    int64_t now = lmr_io_now_ms();
    struct lmr_group **at = &c->timed_groups;
    while (*at != NULL) {
        struct lmr_group *g = *at;
        if (g->wake_at_ms > now) {
            at = &g->next_timed;
            continue;
        }
        *at = g->next_timed;
        g->next_timed = NULL;
        g->timed = false;
        g->woke = true;
        mark_pending(g);
    }
}

int64_t lmr_group_next_wake_ms(const struct lmr_client *c)
{
    int64_t earliest = -1;
    for (const struct lmr_group *g = c->timed_groups; g != NULL; g = g->next_timed)
        if (earliest < 0 || g->wake_at_ms < earliest)
            earliest = g->wake_at_ms;
    return earliest;
}

bool lmr_group_child_stalled(const struct lmr_group *g, uint32_t i, int quiet_ms)
{
    const memcached_request_st *child = g->children[i];
    memcached_instance_st *srv = child->server;
    /* a connect under way has a deadline of its own (CONNECT_TIMEOUT) */
    if (child->state != LMR_STATE_QUEUED || srv == NULL || srv->connecting ||
        srv->progress != g->progress_marks[i])
        return false;
    if (!srv->stalled || srv->stalled_mark != srv->progress) {
        srv->stalled = true;
        srv->stalled_mark = srv->progress;
        srv->stalled_since_ms = lmr_io_now_ms() - quiet_ms;
    }
    return true;
}

bool lmr_group_child_hung(const struct lmr_group *g, uint32_t i)
{
    const memcached_request_st *child = g->children[i];
    const memcached_instance_st *srv = child->server;
    return child->state == LMR_STATE_QUEUED && srv != NULL && srv->stalled &&
           srv->stalled_mark == srv->progress;
}

bool lmr_group_child_doubtful(const struct lmr_group *g, uint32_t i)
{
    const memcached_request_st *child = g->children[i];
    const memcached_instance_st *srv = child->server;
    return lmr_group_child_hung(g, i) || (child->state == LMR_STATE_QUEUED && srv != NULL &&
                                          srv->connecting && srv->connect_failed);
}

size_t lmr_group_child_prefix(const memcached_request_st *child, size_t value_length)
{
    const struct lmr_group *g = child->group;
    return g->parent != NULL && g->ops->place != NULL && value_length > g->ops->prefix_length
               ? g->ops->prefix_length
               : 0;
}

char *lmr_group_place_payload(memcached_request_st *child, const char *prefix, size_t value_length)
{
    struct lmr_group *g = child->group;
    if (g == NULL || g->parent == NULL || g->ops->place == NULL)
        return NULL;
    return g->ops->place(g, child->child_index, prefix, value_length);
}

void lmr_group_finish(struct lmr_group *g, memcached_return_t rc)
{
    memcached_request_st *parent = g->parent;
    if (parent == NULL)
        return;
    for (uint32_t i = 0; g->ops->place != NULL && i < g->set_up; i++)
        if (g->children[i]->state == LMR_STATE_QUEUED)
            lmr_io_unplace(g->children[i]); /* stragglers: never into the parent's value */
    unlink_timed(g);
    parent->rc = rc;
    parent->state = LMR_STATE_DONE;
    parent->group = NULL;
    g->parent = NULL;
}

void lmr_group_child_done(memcached_request_st *child)
{
    struct lmr_group *g = child->group;
    g->outstanding--;
    if (g->count_failures && lmr_group_is_failure(child->rc))
        g->client->resilience_failures++;
    if (g->parent != NULL) {
        mark_pending(g);
        return;
    }
    if (g->outstanding == 0 && !g->pending)
        group_free(g); /* the last straggler */
}

void lmr_group_run_pending(struct lmr_client *c)
{
    while (c->pending_groups != NULL) {
        struct lmr_group *g = c->pending_groups;
        c->pending_groups = g->next_pending;
        g->pending = false;
        g->next_pending = NULL;
        if (g->parent != NULL)
            g->ops->step(g);
        if (g->parent == NULL && g->outstanding == 0 && !g->pending)
            group_free(g);
    }
}
