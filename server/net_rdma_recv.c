/*
 * net_rdma_recv.c: the receive path of the daemon's RDMA connections.
 *
 * Messages in, bytes out (rdma/stream.h): the payloads of received
 * messages, in order, form the connection's input stream (memcached
 * protocol bytes), so conn.c and the protocol engines serve RDMA
 * connections unchanged. Received payloads are copied out of the receive
 * buffer (which goes back to the shared receive queue) into a
 * per-connection input buffer; when that holds more than RDMA_INPUT_HIGH
 * bytes the endpoint is paused, so the peer stops at its credits.
 *
 * Rendezvous for input: an RNDV_READ message advertises the next bytes of
 * the client's request stream; the endpoint is paused (later messages wait
 * in their receive buffers, keeping the order) and the region is pulled as
 * conn.c asks for bytes: straight into the buffer it offers when that is
 * registered slab memory (an item's value), else through a local-only
 * staging buffer into the input. Once all of it was pulled, an EAGER
 * message with READ_DONE frees the client's region: the first message of
 * output that follows in the same pass (usually the set's reply) carries
 * it, else one of its own goes when the connection has been served
 * (doc/rdma-design.md). Landing buffers and value buffers the client advertises
 * are noted here for the send path.
 */
#include "net_rdma_conn.h"

#ifdef HAVE_RDMA

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "net_rdma_mem.h"
#include "net_rdma_move.h"

/* Input buffered per connection before the endpoint is paused. */
#define RDMA_INPUT_HIGH (256 * 1024)

/* Largest landing buffer a client may advertise for RDMA WRITEs. */
#define RDMA_LAND_MAX (16u * 1024 * 1024)

/* Staging buffer for region bytes that do not go straight into a value. */
#define RDMA_RSTAGE_SIZE (1024u * 1024)

/* The first staged READ of a region: enough for a request's header,
 * extras and key, so that a value behind them goes straight to its item. */
#define RDMA_RPEEK 1024u

/* Region bytes not yet asked for. */
static bool rsrc_unread(const struct rdma_conn *rc)
{
    return rc->rsrc_active && rc->rsrc_off < rc->rsrc.len;
}

/* A recv now would return bytes or start pulling some. */
bool rconn_input_ready(const struct rdma_conn *rc)
{
    return rc->in.len > 0 || rc->zr.ready ||
           (rsrc_unread(rc) && !rc->read_inflight && !rc->zr.inflight);
}

/* The endpoint holds the client's later messages while the input is full,
 * while a region is pulled, and until the pulled region's READ_DONE has
 * gone (so the next region cannot end before it, and one READ_DONE is
 * owed at a time). */
bool rconn_messages_held(const struct rdma_conn *rc)
{
    return rc->paused || rc->rsrc_active || rc->rdone_owed;
}

/* Delivers the held messages once none of those reasons is left. */
void rconn_resume_if_free(struct rdma_conn *rc)
{
    if (!rconn_messages_held(rc) && rc->ep && !rc->peer_gone)
        mcr_rdma_ep_resume(rc->ep); /* held messages land in rc->in */
}

static void append_input(struct rdma_conn *rc, const void *data, uint32_t len);

/* After the client's END (a move): once conn.c has read and answered
 * everything before it (no input left, no region being pulled or owed,
 * no transfer or RNDV_DONE of output outstanding, nothing parsed and
 * unanswered), our END goes after those replies. Retried from rdma_want
 * and after completions. */
void rconn_try_end(struct rdma_conn *rc)
{
    struct conn *c = rc->conn;
    if (!c || !rc->end_in || rc->end_out || !rc->ep || rc->peer_gone || rc->in.len > 0 ||
        rc->rsrc_active || rc->rdone_owed || rc->done_pending || rc->write_inflight ||
        rc->zw.pieces > 0 || rc->zr.inflight || rc->zr.ready)
        return;
    if (c->state != CONN_PARSE || c->rlen > 0 || c->resp_head || c->write_blocked)
        return;
    unsigned char end = MCR_RDMA_CTL_END;
    int r = rconn_send_control(rc, &end, 1);
    rc->end_pending = r == -EAGAIN;
    if (r == -EAGAIN) {
        rconn_writer_waits(rc);
        return;
    }
    if (r != 0) {
        rconn_fail(rc, "cannot end the stream for a move");
        return;
    }
    rc->end_out = true;
    rdma_move_done(false);
}

/* A control record from the client: HELLO (it follows the server), or
 * END after our MOVE. */
static void on_control(struct rdma_conn *rc, const unsigned char *rec, uint32_t len)
{
    if (rec[0] == MCR_RDMA_CTL_HELLO && len == 1 && !rc->movable) {
        rc->movable = true;
        return;
    }
    if (rec[0] == MCR_RDMA_CTL_END && len == 1 && rc->move_sent && !rc->end_in) {
        rc->end_in = true;
        rconn_try_end(rc);
        return;
    }
    rconn_fail(rc, "unexpected control message");
}

static void start_read(struct rdma_conn *rc, const struct mcr_rdma_msg *msg,
                       const struct mcr_rdma_stream_in *in);

void rconn_on_message(struct mcr_rdma_ep *ep, const struct mcr_rdma_msg *msg, void *user)
{
    (void)ep;
    struct rdma_conn *rc = user;
    if (!rc->conn)
        return; /* closing: input no longer read */
    struct mcr_rdma_stream_in in;
    rc->msgs++;
    switch (mcr_rdma_stream_classify(msg, &in)) {
    case MCR_RDMA_IN_CONTROL:
        on_control(rc, in.bytes, in.len);
        return;
    case MCR_RDMA_IN_VALUE_REGION: {
        /* a caller's buffer for the value of the reply to request_id */
        struct rdma_vbuf vb = {.opaque = msg->request_id,
                               .addr = msg->rndv.addr,
                               .rkey = msg->rndv.rkey,
                               .len = msg->rndv.len};
        rdma_vbufs_add(&rc->vbufs, &vb);
        break;
    }
    case MCR_RDMA_IN_LANDING:
        /* a landing buffer for our output; the substrate checked the
         * descriptor's shape, the bounds are ours */
        if (rc->land_valid || msg->rndv.len < 4096 || msg->rndv.len > RDMA_LAND_MAX) {
            rconn_fail(rc, "bad rendezvous landing buffer");
            return;
        }
        rc->land = msg->rndv;
        rc->land_id = msg->request_id;
        rc->land_valid = rc->land_ever = true;
        if (rc->want_write) {
            rc->send_blocked = false;
            rconn_poke(rc);
        }
        break;
    case MCR_RDMA_IN_READ_REGION:
        CTR_ADD(rc->rw, eager_msgs, 1);
        start_read(rc, msg, &in);
        return;
    case MCR_RDMA_IN_BYTES:
        break;
    default:
        rconn_fail(rc, "unexpected RNDV_DONE or READ_DONE");
        return;
    }
    CTR_ADD(rc->rw, eager_msgs, 1);
    if (in.len > 0)
        append_input(rc, in.bytes, in.len);
}

/* Appends received stream bytes to the connection's input. */
static void append_input(struct rdma_conn *rc, const void *data, uint32_t len)
{
    if (!mcr_rdma_bytes_append(&rc->in, data, len)) {
        log_msg(LOG_WARN, "<rdma %s: out of memory for input, closing", rc->conn->peer_addr);
        rc->peer_gone = true;
        mcr_rdma_ep_abort(rc->ep);
        rconn_poke(rc);
        return;
    }
    CTR_ADD(rc->rw, bytes_read, len);
    if (rc->in.len >= RDMA_INPUT_HIGH && !rc->paused) {
        if (!rconn_messages_held(rc))
            mcr_rdma_ep_pause(rc->ep);
        rc->paused = true;
        rconn_input_held(rc);
    }
    if (rc->want_read)
        rconn_poke(rc);
}

/* Large input: the client advertises the next bytes of its stream with
 * RNDV_READ (payload, if any, first). The endpoint is paused (later
 * messages wait in their receive buffers) until the region has been pulled,
 * piece by piece as conn.c asks for bytes (pull_region); then READ_DONE
 * tells the client its region is free (region_check_done). */
static void start_read(struct rdma_conn *rc, const struct mcr_rdma_msg *msg,
                       const struct mcr_rdma_stream_in *in)
{
    if (rc->rsrc_active || msg->rndv.len > RDMA_LAND_MAX) {
        rconn_fail(rc, "bad rendezvous read region");
        return;
    }
    if (in->len > 0)
        append_input(rc, in->bytes, in->len);
    if (!rc->ep || rc->peer_gone)
        return;
    if (!rconn_messages_held(rc))
        mcr_rdma_ep_pause(rc->ep);
    rc->rsrc = msg->rndv;
    rc->rsrc_id = msg->request_id;
    rc->rsrc_off = 0;
    rc->rsrc_active = true;
    rc->rsrc_peeked = false;
    rconn_input_held(rc);
    if (rc->want_read)
        rconn_poke(rc);
}

/* READ_DONE on a message of its own for the client's RNDV_READ region;

 * retried after completions while no send buffer is free. */
void rconn_send_read_done(struct rdma_conn *rc)
{
    if (rc->rdone_owed && rconn_client_gone(rc)) {
        rc->rdone_owed = rc->rdone_pending = false; /* nobody to tell */
        rconn_resume_if_free(rc);
        return;
    }
    if (!rc->ep || rc->peer_gone)
        return;
    struct mcr_rdma_send s = {
        .type = MCR_RDMA_MSG_EAGER,
        .flags = MCR_RDMA_F_READ_DONE,
        .request_id = rc->rdone_id,
    };
    int r = mcr_rdma_ep_send(rc->ep, &s);
    rc->rdone_pending = r == -EAGAIN;
    if (rc->rdone_pending)
        rconn_writer_waits(rc);
    if (r == 0) {
        rc->rdone_owed = false;
        CTR_ADD(rc->rw, eager_msgs, 1);
        rconn_resume_if_free(rc);
    } else if (r != -EAGAIN) {
        rconn_fail(rc, "cannot end a rendezvous read");
    }
}

/* Once the whole region is in: READ_DONE is owed (the connection is served
 * next, and its reply carries it); later messages flow again once it has
 * gone (rconn_messages_held). */
static void region_check_done(struct rdma_conn *rc)
{
    if (!rc->rsrc_active || rc->rsrc_off < rc->rsrc.len || rc->read_inflight || rc->zr.inflight)
        return;
    rc->rsrc_active = false;
    rc->rdone_owed = true;
    rc->rdone_id = rc->rsrc_id;
    rconn_poke(rc);
}

/* The local-only staging buffer for region bytes bound for the input. */
static bool rstage_ready(struct rdma_conn *rc)
{
    if (rc->rstage)
        return true;
    rc->rstage = malloc(RDMA_RSTAGE_SIZE);
    if (rc->rstage &&
        mcr_rdma_region_register(mcr_rdma_ctx_pd(rc->rw->ctx), rc->rstage, RDMA_RSTAGE_SIZE,
                                 MCR_RDMA_ACCESS_LOCAL, &rc->rstage_reg) == 0)
        return true;
    free(rc->rstage);
    rc->rstage = NULL;
    return false;
}

/* conn.c asks for len bytes into buf while the input is empty: pulls the
 * next bytes of the region with one RDMA READ, straight into buf when it
 * is registered slab memory (a value; recv returns them once in rdma_place),
 * else into the staging buffer (appended to the input once in). */
static void pull_region(struct rdma_conn *rc, char *buf, size_t len)
{
    uint32_t n = rc->rsrc.len - rc->rsrc_off;
    if (len < n)
        n = (uint32_t)len;
    struct ibv_mr *mr = rdma_mem_lookup(rc->rw->mem_slot, buf, n);
    int r;
    if (mr) {
        rc->zr.buf = buf;
        rc->zr.len = n;
        rc->zr.inflight = true;
        r = mcr_rdma_ep_rdma_read(rc->ep, &rc->rsrc, rc->rsrc_off, buf, mr, n, &rc->zr);
        if (r != 0)
            rc->zr.inflight = false;
        else
            CTR_ADD(rc->rw, zero_copy_reads, 1);
    } else {
        if (!rc->rsrc_peeked && n > RDMA_RPEEK)
            n = RDMA_RPEEK;
        if (n > RDMA_RSTAGE_SIZE)
            n = RDMA_RSTAGE_SIZE;
        if (!rstage_ready(rc)) {
            rconn_fail(rc, "out of memory for a rendezvous read");
            return;
        }
        rc->rsrc_peeked = true;
        rc->rstage_len = n;
        rc->read_inflight = true;
        r = mcr_rdma_ep_rdma_read(rc->ep, &rc->rsrc, rc->rsrc_off, rc->rstage, rc->rstage_reg.mr, n,
                                  &rc->rstage_reg);
        if (r != 0)
            rc->read_inflight = false;
    }
    if (r != 0) {
        rconn_fail(rc, "rendezvous read refused");
        return;
    }
    rc->rsrc_off += n;
    CTR_ADD(rc->rw, rendezvous_reads, 1);
}

/* A staged READ (into rstage) or a direct one (into conn.c's buffer)
 * ended. A failed one closes the connection: a value it was filling is
 * never stored (conn.c reads end of stream and drops it). */
void rconn_read_done(struct rdma_conn *rc, bool direct, int status)
{
    if (direct) {
        rc->zr.inflight = false;
        rconn_release_held(rc);
    } else {
        rc->read_inflight = false;
    }
    if (status != 0) {
        if (rc->conn && !rc->peer_gone)
            rconn_fail(rc, "rendezvous read failed");
        return;
    }
    if (!rc->conn || rc->peer_gone)
        return;
    if (direct) {
        rc->zr.ready = true;
        CTR_ADD(rc->rw, bytes_read, rc->zr.len);
    } else {
        append_input(rc, rc->rstage, rc->rstage_len);
    }
    region_check_done(rc);
    if (rc->want_read)
        rconn_poke(rc);
}

ssize_t rconn_recv(struct conn *c, void *buf, size_t len)
{
    struct rdma_conn *rc = c->tp_data;
    if (rc->zr.ready) {
        /* a direct READ put them in place: conn.c asks again for the same
         * buffer (it consumed nothing meanwhile) */
        rc->zr.ready = false;
        if (buf != rc->zr.buf || len < rc->zr.len) {
            rconn_fail(rc, "input asked for out of order");
            return 0;
        }
        return (ssize_t)rc->zr.len;
    }
    if (rc->in.len == 0) {
        if (rc->peer_gone || !rc->ep)
            return 0;
        if (rsrc_unread(rc) && !rc->read_inflight && !rc->zr.inflight)
            pull_region(rc, buf, len);
        if (rc->peer_gone)
            return 0;
        errno = EAGAIN;
        return -1;
    }
    size_t n = mcr_rdma_bytes_take(&rc->in, buf, len);
    if (rc->paused && rc->in.len < RDMA_INPUT_HIGH / 2 && rc->ep && !rc->peer_gone) {
        rc->paused = false;
        rconn_resume_if_free(rc);
    }
    return (ssize_t)n;
}

#endif
