/* group.h: parent requests that fan out to child requests on several
 * servers. A parent is an ordinary memcached_request_st the caller holds;
 * its group owns the children (heap requests queued on servers like any
 * other). The engine calls lmr_group_child_done when a child completes and
 * the group's step runs later, outside any reply parser, from the poll loop
 * (lmr_group_run_pending): it may issue more children and decides when the
 * parent completes. A child still in flight when its parent completed (a
 * straggler) only ever touches library memory and is reaped when it
 * completes; the group is freed with its last child. A step may also ask
 * to run again after a delay (lmr_group_wake_after): hedged reads use it
 * to ask more servers when one has stopped answering. */
#ifndef LMR_GROUP_H
#define LMR_GROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "client.h"
#include "request.h"

struct lmr_group;

struct lmr_group_ops {
    /* Children completed since the last step: look at them, issue more, or
     * complete the parent with lmr_group_finish. */
    void (*step)(struct lmr_group *g);
    /* Frees what the policy owns (not the group or its children). */
    void (*release)(struct lmr_group *g);
    /* Optional, reads: where the rest of child i's value goes once its
     * first prefix_length bytes (`prefix`) arrived, of value_length in
     * all: a place in the parent's value (received there, not copied
     * later), or NULL for the child's own buffer. Asked only while the
     * parent is in progress; when it completes, the rest of what children
     * are still receiving is dropped (lmr_io_unplace). A child that may
     * place its value has room for the prefix only until NULL is returned
     * (lmr_io_get_destination). */
    char *(*place)(struct lmr_group *g, uint32_t i, const char *prefix, size_t value_length);
    size_t prefix_length;
};

struct lmr_group {
    struct lmr_client *client;
    const struct lmr_group_ops *ops;
    memcached_request_st *parent;    /* NULL once the parent completed */
    memcached_request_st **children; /* in the group's block */
    uint64_t *progress_marks;        /* each child's server's `progress` when issued */
    size_t block_size;               /* bytes of the block (lmr_group_create) */
    uint32_t child_count;
    /* children [0, set_up) are initialised; the others are set up when
     * first issued, so a read that needs few of its children touches only
     * those (their requests' bytes are undefined until then) */
    uint32_t set_up;
    uint32_t outstanding; /* children issued and not completed */
    bool count_failures;  /* children's server failures count in the client */
    bool pending;         /* on the client's list of groups to step */
    struct lmr_group *next_pending;
    int64_t wake_at_ms; /* the timer, while on the client's timed list */
    bool timed;         /* on that list */
    bool woke;          /* the timer fired since the last step */
    /* read children failed at once by lmr_group_issue_read (bit i: child
     * i), to be asked for real if the read cannot complete without them */
    uint32_t avoided;
    struct lmr_group *next_timed;
};

/* Makes a group of `size` bytes (a policy struct whose first member is
 * the group) with room for child_count children, ties it to parent and puts
 * parent in progress. A child is set up (idle, with a spare buffer if
 * one is left) when it is first issued, together with those before it:
 * the policy reads no child it did not issue. Only the first `zeroed` bytes (the group and the
 * policy's fields that start at zero) are cleared: the policy writes the
 * rest before reading it. The group, its children and their pointers
 * are one block, taken from the client's spare blocks when one is large
 * enough (a get allocates nothing then). NULL on ENOMEM. */
struct lmr_group *lmr_group_create(struct lmr_client *c, memcached_request_st *parent,
                                   const struct lmr_group_ops *ops, size_t size, size_t zeroed,
                                   uint32_t child_count);
/* Issues child i to srv; a child that fails at once is noted as completed.
 * A server marked stalled that made no progress since and already holds
 * LMR_STALLED_QUEUE_MAX requests fails the child at once
 * (MEMCACHED_TIMEOUT). */
void lmr_group_issue(struct lmr_group *g, uint32_t i, memcached_instance_st *srv,
                     enum lmr_op_kind kind, const struct lmr_op_args *args);
/* Issues read child i (a get of a chunk or copy) to srv, except when
 * srv has no connection and its last connect failed: then the child fails
 * at once with the server's last failure (an erasure, noted in
 * g->avoided) and no connect is waited for, so a server that does not
 * accept connections (stopped, its machine frozen: a connect there waits
 * CONNECT_TIMEOUT) costs a read nothing while the other chunks or copies
 * answer. Once RETRY_TIMEOUT allows, a read does connect: in the
 * background where the transport can (the child is then doubtful, below,
 * and the read asks the others at once; later reads take the server as an
 * erasure while that connect is under way), else in the call, ten
 * CONNECT_TIMEOUTs after the failed connect at the earliest. Writes (lmr_group_issue) connect as
 * RETRY_TIMEOUT allows. A successful connect ends this. */
void lmr_group_issue_read(struct lmr_group *g, uint32_t i, memcached_instance_st *srv,
                          const struct lmr_op_args *args);
/* A read that cannot complete without its avoided children asks them now,
 * connecting (as RETRY_TIMEOUT allows): servers[i] is child i's server.
 * Returns the children asked again (bits), 0 when none was avoided. */
uint32_t lmr_group_ask_avoided(struct lmr_group *g, const uint32_t *servers,
                               const struct lmr_op_args *args);
/* Completes the parent with rc; the group lives on until its last child
 * completes. The step must not touch the group after this. */
void lmr_group_finish(struct lmr_group *g, memcached_return_t rc);
/* The engine: a child completed (from io.c's completion). */
void lmr_group_child_done(memcached_request_st *child);
/* Runs the steps of groups whose children completed (from the poll loop). */
void lmr_group_run_pending(struct lmr_client *c);
/* Steps the group again delay_ms from now (sets woke) unless it completes
 * before. */
void lmr_group_wake_after(struct lmr_group *g, int delay_ms);
/* Marks the groups whose timer is due as pending (from the poll loop). */
void lmr_group_run_timers(struct lmr_client *c);
/* The earliest timer (lmr_io_now_ms clock), -1 when none. */
int64_t lmr_group_next_wake_ms(const struct lmr_client *c);
/* Whether child i is in flight and its server made no progress (completed
 * no request, received no bytes) since the child was issued: it has
 * stopped answering, or is very slow (a connect under way is not: it
 * has CONNECT_TIMEOUT). Asked when a timer fired, quiet_ms
 * after the child was issued at least; a stalled server is marked so
 * (server.h), quiet since then. */
bool lmr_group_child_stalled(const struct lmr_group *g, uint32_t i, int quiet_ms);
/* Whether child i is in flight on a server marked stalled that has made
 * no progress since: later parents need not wait for it either. */
bool lmr_group_child_hung(const struct lmr_group *g, uint32_t i);
/* Whether a read need not wait for child i: it is hung (above), or waits
 * for a connect under way to a server whose last connect failed (it may
 * not answer before CONNECT_TIMEOUT). */
bool lmr_group_child_doubtful(const struct lmr_group *g, uint32_t i);
/* The bytes of child's value (value_length in all) to receive before its
 * group places the rest (struct lmr_group_ops: place), 0 when it does not. */
size_t lmr_group_child_prefix(const memcached_request_st *child, size_t value_length);
/* The group's place for the rest of child's value, or NULL (above). */
char *lmr_group_place_payload(memcached_request_st *child, const char *prefix, size_t value_length);
/* A code that says the server did not answer (as opposed to an answer such
 * as NOTFOUND or NOTSTORED). */
bool lmr_group_is_failure(memcached_return_t rc);

#endif
