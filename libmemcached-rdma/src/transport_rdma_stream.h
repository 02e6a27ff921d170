/* transport_rdma_stream.h: the state of one connection of the RDMA
 * transport (struct rdma_stream), shared by transport_rdma.c (the byte
 * stream, the landing and request buffers, the transport table),
 * transport_rdma_send.c (the sending half) and transport_rdma_value.c
 * (callers' buffers advertised for values). Private to those files. */
#ifndef LMR_TRANSPORT_RDMA_STREAM_H
#define LMR_TRANSPORT_RDMA_STREAM_H

#include "config.h"

#ifdef HAVE_RDMA

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdma/ctx.h"
#include "rdma/endpoint.h"
#include "rdma/mr.h"
#include "rdma/stream.h"
#include "transport.h"
#include "transport_rdma_ctx.h"
#include "transport_rdma_grant.h"
#include "transport_rdma_move.h"

/* The landing buffer advertised to the server for large replies. */
#define RDMA_LAND_SIZE (1024u * 1024)

/* Caller buffers for values: ones smaller than one message's payload are
 * not offered (their values come in one message anyway), larger ones are
 * advertised for their first RDMA_VALUE_MAX bytes (the substrate's
 * rendezvous limit); at most RDMA_VALUE_BUFS are outstanding (the server
 * keeps as many). */
#define RDMA_VALUE_MAX (64u * 1024 * 1024)
#define RDMA_VALUE_BUFS 64

/* How long closing an iget buffer may wait for its window's invalidation
 * before the connection is ended instead (its QP then takes no remote
 * access). */
#define RDMA_CLOSE_GRANT_MS 1000

/* A caller's buffer advertised for one GET's value. */
struct value_buf {
    uint32_t opaque;
    char *buf;
    uint32_t len;
    struct ibv_mr *mr; /* with windows: the registration its window lies in */
    unsigned grant;    /* its value_grants slot */
    bool advertised;   /* told to the server (it rides on the next request message) */
    bool written;      /* the server wrote the value into it */
};

/* Input bytes that lie in a caller's buffer, not in `in`: the stream's
 * bytes [at, at+len) are at ptr, written for the request `opaque`. */
struct value_seg {
    uint64_t at;
    const char *ptr;
    size_t len;
    uint32_t opaque;
};

struct rdma_stream {
    /* the client's context this connection shares (transport_rdma_ctx.h)
     * and its substrate context; ctx_next: the next connection on it */
    struct lmr_rdma_shared_ctx *shared;
    struct mcr_rdma_ctx *ctx;
    struct rdma_stream *ctx_next;
    struct mcr_rdma_ep *ep; /* NULL once the substrate freed it */
    struct lmr_conn *conn;  /* the pipeline's connection: why it failed goes to conn->why */
    int epfd, evfd;
    bool signaled, connected, closed;
    int close_reason;         /* on_closed's reason (-EXDEV: reached through another device) */
    unsigned event_polls;     /* rdma_poll_events calls */
    struct mcr_rdma_bytes in; /* received, not yet read */
    /* Stream offsets: bytes received so far and read so far, counting
     * those of value segments (which `in` does not hold). */
    uint64_t in_received, in_read;
    struct value_seg segs[RDMA_VALUE_BUFS]; /* a ring, oldest at seg_first */
    unsigned seg_first, nsegs;
    struct value_buf vbufs[RDMA_VALUE_BUFS];
    unsigned nvbufs;
    struct lmr_grant value_grants[RDMA_VALUE_BUFS];
    bool value_grant_taken[RDMA_VALUE_BUFS];
    struct mcr_rdma_regcache *regcache;
    /* memory windows (else registrations per transfer) */
    bool windows;
    struct mcr_rdma_bytes out; /* accepted, not yet handed to the endpoint */
    /* Rendezvous for replies: a buffer opened for remote write only
     * (land_grant), advertised with RNDV_WRITE (land_id); the server
     * RDMA-WRITEs reply bytes into it and sends RNDV_DONE with their count,
     * then the buffer is closed, copied into the input and, once closed,
     * opened and advertised again. land_reg: with windows, its registration
     * (no remote access). */
    char *land;
    struct mcr_rdma_region land_reg;
    struct lmr_grant land_grant;
    uint32_t land_id;
    bool land_out, land_need;
    /* Rendezvous for requests: request bytes beyond one message are copied
     * into this buffer, opened for remote read (exactly those bytes:
     * src_grant) and advertised with RNDV_READ (src_id), the request's head
     * riding on that message; the server pulls them with an RDMA READ and
     * ends the region with READ_DONE (on its reply, or alone), which closes
     * it; once closed the buffer may be reused. src_reg: with windows, its
     * registration (no remote access). */
    char *src;
    struct mcr_rdma_region src_reg;
    struct lmr_grant src_grant;
    uint32_t src_id;
    bool src_busy;
    /* A push that waited a whole timeout for credits and got none: later
     * pushes do not wait again until messages move again (stall_moved:
     * the endpoint's messages sent and received at the stall). */
    bool push_stalled;
    uint64_t stall_moved;
    /* rdma:// (move.movable): HELLO went first; the server may ask it to
     * move to UD (control records, include/mcr/rdma_wire.h) */
    struct lmr_rdma_move move;
};

/* transport_rdma.c */
int64_t lmr_rdma_now_ms(void);
/* The eventfd is readable exactly while input waits or the stream ended. */
void lmr_rdma_sync_signal(struct rdma_stream *s);
/* Ends the connection at once because of `why` (words for the pipeline's
 * report: transport.h, why); the reader sees the end of the stream. */
void lmr_rdma_abort(struct rdma_stream *s, const char *why);

/* transport_rdma_send.c: the sending half (each described there) */
int lmr_rdma_land_open(struct rdma_stream *s);
ssize_t lmr_rdma_push_iov(struct rdma_stream *s, const struct iovec *iov, int iovcnt);
bool lmr_rdma_flush_out(struct rdma_stream *s);
void lmr_rdma_advertise(struct rdma_stream *s);

/* transport_rdma_value.c: callers' buffers advertised for one GET's value */
/* The RNDV_WRITE that advertises vb, the buffer opened for it (once: a
 * message that could not go keeps its rkey for the next try). 0 or a
 * negative errno. */
int lmr_rdma_value_ad(struct rdma_stream *s, struct value_buf *vb, struct mcr_rdma_rndv *r,
                      struct mcr_rdma_send *m);
/* The value buffer whose advertisement may ride on the next message: the
 * one not yet advertised, when it is the only one. */
struct value_buf *lmr_rdma_value_ad_to_carry(struct rdma_stream *s);
/* Advertises the value buffers not yet advertised, except `carried`, in
 * messages of their own. 1: done; 0: no send buffer free; -1: the
 * connection failed. */
int lmr_rdma_send_value_ads(struct rdma_stream *s, const struct value_buf *carried);
/* The transport table's offer_value_buffer and release_value_buffer. */
bool lmr_rdma_offer_value_buffer(struct lmr_conn *conn, uint32_t opaque, char *buf, size_t len);
void lmr_rdma_release_value_buffer(struct lmr_conn *conn, uint32_t opaque);

#endif
#endif
