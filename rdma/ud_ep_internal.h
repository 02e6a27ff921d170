/* rdma/ud_ep_internal.h: what the UD endpoint's two halves share: the
 * context and peer structures, the clock and random numbers, and the peer
 * table's calls. rdma/ud_ep.c owns the context, its verbs objects and the
 * datagram path; rdma/ud_connect.c sets peers up through the RDMA CM.
 * Not for use outside rdma/ud_*.c. */
#ifndef MCR_RDMA_UD_EP_INTERNAL_H
#define MCR_RDMA_UD_EP_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "rdma/device.h"
#include "rdma/pool.h"
#include "rdma/ud_ep.h"
#include "rdma/ud_reliable.h"

#define UDEP_HELD_MAX 8      /* testing: datagrams held back to arrive late */
#define UDEP_REPOST_BATCH 16 /* receive buffers posted again at once, at most */

/* What one side of the CM exchange says of itself (its private data). */
struct udep_pd {
    uint32_t qpn, conn_id, isn;
    uint16_t window, mtu;
};

struct udep_held {
    uint8_t *buf;
    uint32_t len;
    struct ibv_wc wc;
};

struct mcr_udep_peer {
    struct mcr_udep_ctx *ctx;
    uint32_t slot;
    uint32_t local_conn_id;
    struct udr_peer *udr;
    struct ibv_ah *ah; /* client: from the CM; server: from the first datagram */
    uint32_t remote_qpn, remote_conn_id;
    uint8_t gid[16]; /* the peer's GID: its datagrams must come from it */
    char name[56];   /* server: the client's address and port from its CM request */
    void *user;
    uint64_t deadline;  /* udr_next_deadline() when last looked at */
    uint32_t timer_pos; /* index in ctx->timers, or UDEP_NO_TIMER */
    int in_input;       /* inside udr_input/udr_tick: closing waits */
    bool close_pending;
};

struct mcr_udep_ctx {
    struct mcr_udep_opts opts;
    struct mcr_udep_callbacks cb;
    void *user;
    struct rdma_event_channel *ch;
    /* id: the listener, or the client's resolved id; its protection
     * domain, completion channel and completion queue */
    struct mcr_rdma_device dev;
    struct ibv_qp *qp;
    uint32_t mtu, recv_buf_size;
    bool roce;      /* the port is Ethernet: an address handle is made from GIDs */
    int sgid_index; /* server: the GID table entry of sgid (-1: not found yet) */
    uint8_t sgid[16];
    struct mcr_rdma_pool recv_pool, send_pool; /* registered datagram buffers */
    /* send buffers posted and not yet completed, oldest first (a ring of
     * send_bufs entries) */
    uint32_t *posted;
    uint32_t posted_head, nposted;
    uint32_t unsignaled; /* sends posted since the last signaled one */
    struct mcr_udep_peer **peers;
    uint32_t npeers;
    /* the peers with a deadline: a binary min-heap on it, so finding the
     * due ones and the next wake-up costs no visit of the other peers */
    struct mcr_udep_peer **timers;
    uint32_t ntimers;
    uint64_t rng;
    struct udr_stats sum; /* of every peer, live and freed (their layers add to it) */
    struct mcr_udep_stats st;
    bool armed;           /* mcr_udep_arm requested a completion event */
    unsigned quiet_polls; /* mcr_udep_poll_cq calls */
    uint64_t polled_us;   /* the clock when the last poll found something */
    /* receive buffers consumed and not yet posted again: they go back
     * repost_batch at a time, in one ibv_post_recv call */
    uint32_t repost[UDEP_REPOST_BATCH];
    uint32_t nrepost, repost_batch;
    struct udep_held held[UDEP_HELD_MAX];
    uint32_t nheld;
    uint8_t *held_mem;
};

static inline uint64_t udep_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static inline uint32_t udep_rng_next(struct mcr_udep_ctx *ctx)
{
    uint64_t x = ctx->rng; /* xorshift64 */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    ctx->rng = x;
    return (uint32_t)(x >> 16);
}

/* The peer table (rdma/ud_ep.c): a free slot, or max_peers when there is
 * none. */
uint32_t udep_free_slot(const struct mcr_udep_ctx *ctx);
/* A peer in the slot conn_id names (its low 16 bits), its layer opened;
 * NULL when the slot is taken or out of range, or on no memory. */
struct mcr_udep_peer *udep_peer_new(struct mcr_udep_ctx *ctx, uint32_t conn_id, uint32_t isn,
                                    const struct udep_pd *remote, const uint8_t gid[16]);
void udep_peer_free(struct mcr_udep_peer *peer);

/* One RDMA CM event of the context's channel, acked here
 * (rdma/ud_connect.c): a server's connect request; others are dropped. */
void udep_handle_cm_event(struct mcr_udep_ctx *ctx, struct rdma_cm_event *ev);

#endif
