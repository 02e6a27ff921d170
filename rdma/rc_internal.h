/* rdma/rc_internal.h: the RC endpoint and listener structures shared by
 * rc_cm.c (connection management) and rc_data.c (data path). Private to the
 * RC implementation. */
#ifndef MCR_RDMA_RC_INTERNAL_H
#define MCR_RDMA_RC_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "rdma/ctx_internal.h"
#include "rdma/rc.h"

/* Work requests one endpoint collects in a batch before it posts them. */
#define RC_BATCH_MAX 16

enum rc_state {
    RC_RESOLVING,  /* client: address / route resolution */
    RC_CONNECTING, /* connect sent, or accept sent */
    RC_ESTABLISHED,
    RC_CLOSING, /* flushing work requests; freed when none is left */
};

struct rc_ep {
    struct mcr_rdma_ep base; /* first: endpoint.h view */
    struct mcr_rdma_ep_link link;
    struct mcr_rdma_cm_owner cm_owner;
    enum rc_state state;
    struct rdma_cm_id *cm_id;
    struct ibv_qp *qp;
    bool connected_once;  /* on_connected was called */
    bool closed_notified; /* on_closed was called */
    bool silent;          /* context teardown: no callbacks any more */
    bool attached;        /* known to its context (list, QP lookup) */
    /* server side: the listener and the accept parameters, kept until the
     * accepting context's thread accepts */
    struct mcr_rdma_listener *listener;
    struct rdma_conn_param accept_param;
    unsigned char accept_pdata[MCR_RDMA_CONN_DATA_SIZE];
    int close_reason;
    char close_why[96];
    /* closed locally while work requests were still waiting or in flight:
     * they still go (no new ones are taken) until linger_until_ms
     * (MCR_RDMA_LINGER_MS after the close) */
    bool lingering;
    uint64_t linger_until_ms;
    /* the peer disconnected while this paused endpoint held messages of
     * its: they are still delivered as the owner resumes (a socket's reader
     * gets the data before the end of stream), then the endpoint closes;
     * nothing is sent any more. Bounded by linger_until_ms, which each
     * resume that delivers something moves on. */
    bool peer_left;

    /* credits */
    uint16_t peer_credits;     /* credits the peer granted us at connect */
    uint32_t peer_max_payload; /* eager payload the peer's buffers hold */
    uint16_t send_credits;     /* of those, currently usable */
    uint16_t granted;          /* credits we granted the peer */
    uint16_t to_return;        /* receives consumed and reposted, not returned */
    uint16_t peer_unreturned;  /* peer messages we have not returned credit for */
    uint16_t credit_threshold;
    /* CREDIT messages have a buffer of their own, so credits can always be
     * returned even when every shared send buffer waits for credit (both
     * peers stuck that way would otherwise deadlock). One in flight. Where
     * the device takes the header inline (max_inline), it goes from
     * credit_hdr with credit_op, and the endpoint holds no send-pool buffer;
     * else credit_buf is a send-pool buffer of its own. */
    uint32_t credit_buf;
    bool credit_busy;
    struct mcr_rdma_op credit_op;
    unsigned char credit_hdr[MCR_RDMA_HDR_BASE];

    /* send queue */
    uint32_t sq_depth;
    uint32_t max_inline; /* sends up to this long go inline (copied into the work request) */
    /* Work requests are numbered as they are built (collected or posted):
     * sq_seq is the last one's number, sq_done_seq the last one a
     * completion told finished (the send queue completes in order, so
     * every one before it finished too): the difference is the send queue's
     * places in use (rc_sq_used). sq_signaled: posted ones asking for a
     * completion that has not come (every one of them gets one, a flush
     * included). unsignaled_run: built without a completion since the last
     * one with (at most unsignaled_max; 0: every one asks for one). */
    uint32_t sq_seq, sq_done_seq;
    uint32_t sq_signaled;
    uint32_t unsignaled_run, unsignaled_max;
    struct mcr_rdma_op *wait_head, *wait_tail; /* waiting for credit / SQ room */
    uint32_t sends_waiting;                    /* SEND ops among them */
    uint32_t rdma_outstanding;                 /* queued or posted */
    uint32_t rdma_posted;
    /* work requests collected while the context batches, posted together
     * (a chain: one doorbell); numbered in sq_seq */
    struct ibv_send_wr batch_wr[RC_BATCH_MAX];
    struct ibv_sge batch_sge[RC_BATCH_MAX];
    struct mcr_rdma_op *batch_op[RC_BATCH_MAX];
    uint32_t batch_len;

    /* receive side pause: held receive buffers, oldest first (at most
     * `granted`: the peer cannot send more without credits back) */
    bool paused;
    bool delivering; /* inside resume's delivery loop */
    uint32_t *held_index, *held_len;
    uint32_t held_head, held_count;

    struct mcr_rdma_ep_stats stats;
};

struct mcr_rdma_listener {
    struct mcr_rdma_listener_link link; /* first */
    struct mcr_rdma_cm_owner cm_owner;
    struct mcr_rdma_ctx *ctx;
    struct rdma_cm_id *cm_id;
    mcr_rdma_accept_fn on_accept;
    void *user;
    mcr_rdma_place_fn place;
    void *place_user;
    mcr_rdma_refused_fn refused;
    void *refused_user;
    struct rc_ep *pending; /* to hand over once the request is acknowledged */
};

static inline struct rc_ep *rc_from_ep(struct mcr_rdma_ep *ep)
{
    return (struct rc_ep *)ep;
}

/* Places of the send queue in use: work requests collected or posted that
 * no completion has told finished yet. */
static inline uint32_t rc_sq_used(const struct rc_ep *rc)
{
    return rc->sq_seq - rc->sq_done_seq;
}

extern const struct mcr_rdma_ep_ops mcr_rdma_rc_ops;
extern const struct mcr_rdma_ep_impl mcr_rdma_rc_impl;

/* rc_data.c */
void rc_on_recv(struct mcr_rdma_ep *ep, uint32_t buf_index, const struct ibv_wc *wc);
void rc_recv_reposted(struct mcr_rdma_ep *ep, bool ok);
void rc_on_send_wc(struct mcr_rdma_ep *ep, struct mcr_rdma_op *op, const struct ibv_wc *wc);
void rc_on_unsignaled_wc(struct mcr_rdma_ep *ep, const struct ibv_wc *wc);
/* Posts waiting work requests while credits and queue room allow, then an
 * explicit credit message when enough credits are owed to the peer. */
void rc_pump(struct rc_ep *rc);
/* Drops waiting (never posted) work requests: buffers back to the pool,
 * RDMA operations reported failed. */
void rc_drop_waiting(struct rc_ep *rc, int status);
/* Posts the work requests collected in a batch (the table's post_batch);
 * a failed post closes the endpoint. */
void rc_post_batch(struct mcr_rdma_ep *ep);
/* Drops the collected work requests, as rc_drop_waiting does. */
void rc_drop_batch(struct rc_ep *rc, int status);

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t rc_now_ms(void);
/* Gives held receive buffers back to the shared receive queue. */
void rc_release_held(struct rc_ep *rc);
/* The peer disconnected: closes, unless held messages are still to be
 * delivered (then peer_left until they are, or until the deadline). */
void rc_peer_disconnected(struct rc_ep *rc);
void rc_pause(struct mcr_rdma_ep *ep);
void rc_resume(struct mcr_rdma_ep *ep);

/* Takes the peer's connection parameters; false when they are unusable. */
bool rc_set_peer_params(struct rc_ep *rc, const void *private_data, unsigned len);

/* rc_cm.c */
/* Starts closing with a reason (negative errno, 0 for a local close). */
void rc_fail(struct rc_ep *rc, int reason, const char *why);
/* The endpoint table's close. */
void rc_close(struct mcr_rdma_ep *ep);
void rc_abort(struct mcr_rdma_ep *ep);
/* A message arrived while still CONNECTING: become ESTABLISHED if the
 * connection's parameters are known. Returns true when established. */
bool rc_establish_on_first_message(struct rc_ep *rc);
/* The peer's address from the connection's RDMA CM id (endpoint op). */
int rc_peer_name(const struct mcr_rdma_ep *ep, char *buf, size_t len);

#endif
