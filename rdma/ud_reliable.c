/* rdma/ud_reliable.c: software reliability for UD, per peer (API and the
 * model: rdma/ud_reliable.h; wire format: include/mcr/ud_wire.h; rules and
 * defaults: doc/rdma-ud.md, "UD reliability").
 *
 * Sending. udr_send() copies a message into the send queue (a FIFO of
 * messages not yet wholly acknowledged; udr_sendv() gathers its pieces
 * there, the one copy; a small message's buffer, once acknowledged, is
 * kept for the next one instead of freed). pump() cuts the next segment of
 * the queue's first unsent message whenever fewer than the window's
 * datagrams are in flight, gives it the next sequence number, remembers it
 * in the transmit ring (indexed by seq) and emits it. A cumulative ack
 * frees the ring's entries below it, and a message once its last segment
 * is freed. Selective acks only mark entries as received (the receiver may
 * forget what it selectively acked, so data is kept until the cumulative
 * ack passes it); an unmarked entry with three marked ones above it, one
 * of them sent a quarter SRTT after it or later, is retransmitted once at
 * once (fast retransmit), and on a retransmission
 * timeout every unmarked entry older than the timeout is. The timeout
 * follows RFC 6298 (smoothed RTT and variance from datagrams sent once,
 * doubled per consecutive expiry up to rto_max, reset by progress).
 *
 * Receiving. A datagram at the next expected seq is consumed at once
 * (no copy when it is a whole message); one further ahead inside the
 * window is copied into the receive ring and marked in the sack bitmap,
 * and the ring drains as the gap fills. Consuming checks that the segment
 * continues the message being reassembled (same length, offset where the
 * last ended) or starts a new one at offset 0; whole messages go to
 * deliver in order. An ack rides on every DATA datagram; without data to
 * send, an ACK goes after ack_every datagrams or ack_delay_us, and at once
 * on a duplicate, a new gap and a gap filled (so the sender learns
 * quickly), and in answer to a PROBE.
 *
 * Time is the caller's: the peer stores deadlines and udr_tick() acts on
 * those that have passed. The peer is dead when what it was sent stays
 * unacknowledged (or a keepalive probe unanswered) for dead_us, and three
 * retransmission timeouts (or repeated probes) went unanswered meanwhile.
 */
#include "rdma/ud_reliable.h"

#include <errno.h>
#include <stdbool.h>
#include <sys/uio.h>
#include <stdlib.h>
#include <string.h>

/* a datagram up to this many sequence numbers behind the receive window
 * is a late duplicate; further back it is forged (or older than any
 * network keeps a datagram) */
#define DUP_HORIZON 65536
#define FAST_RETRANSMIT_SACKED 3u

struct udr_msg {
    struct udr_msg *next;
    uint32_t len;
    uint32_t cap; /* bytes data has room for */
    uint8_t data[];
};

/* A message buffer of up to this many bytes is kept for the next message
 * once acknowledged (one per peer): a stream of small requests and
 * replies needs no allocation per message. Buffers are allocated in
 * multiples of MSG_CAP_STEP, so that messages of about the same length fit
 * each other's. */
#define SPARE_CAP 512u
#define MSG_CAP_STEP 128u

/* one DATA datagram sent and not yet cumulatively acknowledged */
struct udr_txseg {
    struct udr_msg *msg;
    uint64_t sent_us; /* last transmission */
    uint32_t off;
    uint16_t len;
    bool sacked;    /* in the peer's latest selective ack */
    bool fast_done; /* fast-retransmitted already */
    bool retransmitted;
};

/* one DATA datagram received ahead of the next expected */
struct udr_rxslot {
    uint8_t *data; /* seg_len bytes (NULL when 0) */
    uint32_t msg_len, seg_off;
    uint16_t seg_len;
};

struct udr_peer {
    struct udr_config cfg;
    struct udr_ops ops;
    void *arg;
    uint32_t seg_max;
    uint32_t ring_mask; /* rings have ring_mask + 1 (a power of two >= window) entries */

    /* sending */
    struct udr_msg *q_head, *q_tail; /* not wholly acknowledged, oldest first */
    struct udr_msg *tx_msg;          /* next new segment comes from here (NULL: none) */
    struct udr_msg *spare;           /* an acknowledged small message's buffer, for the next */
    uint32_t tx_off;
    size_t q_bytes;
    uint32_t snd_una, snd_nxt;
    uint32_t peer_window;
    uint32_t nsacked; /* ring entries marked sacked */
    struct udr_txseg *tx;
    uint64_t rto_deadline;
    uint32_t srtt_us, rttvar_us, rto_us;
    bool have_rtt;
    uint32_t backoff;
    bool probe_out;
    bool waiting;           /* for an answer (data unacked or a probe) ... */
    uint64_t waiting_since; /* ... since */

    /* receiving */
    uint32_t rcv_nxt;
    uint64_t held; /* bit i: rcv_nxt + i is in the receive ring (bit 0 never) */
    struct udr_rxslot *rx;
    size_t rx_bytes;  /* payload held in the receive ring */
    uint8_t *asm_buf; /* message being reassembled */
    uint32_t asm_len, asm_total;
    uint32_t ack_pending; /* datagrams consumed since our last ack */
    uint64_t ack_deadline;
    bool ack_owed; /* an ack must go before udr_input returns */
    uint64_t last_heard;

    bool dead;
    struct udr_stats st;
};

/* One more of a counter: the peer's, and the caller's sum (cfg.sum). */
#define COUNT(p, field)                                                                            \
    do {                                                                                           \
        (p)->st.field++;                                                                           \
        if ((p)->cfg.sum != NULL)                                                                  \
            (p)->cfg.sum->field++;                                                                 \
    } while (0)

static inline int32_t seq_diff(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b);
}

static uint32_t min_u32(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

void udr_config_defaults(struct udr_config *cfg, uint32_t mtu)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->mtu = mtu;
    cfg->window = 32;
    cfg->max_msg = 2u << 20;
    cfg->sendq_max = 4u << 20;
    cfg->rto_init_us = 10000;
    cfg->rto_min_us = 1000;
    cfg->rto_max_us = 500000;
    cfg->ack_delay_us = 200;
    cfg->ack_every = 8;
    cfg->dead_us = 5000000;
    cfg->keepalive_us = 0;
}

static bool config_valid(const struct udr_config *c)
{
    return c->mtu > MCR_UD_HDR_LEN && c->mtu - MCR_UD_HDR_LEN <= UINT16_MAX && c->window >= 1 &&
           c->window <= UDR_WINDOW_MAX && c->ack_every >= 1 && c->ack_every <= c->window &&
           c->max_msg <= INT32_MAX && c->sendq_max >= c->max_msg && c->rto_min_us >= 1 &&
           c->rto_min_us <= c->rto_init_us && c->rto_init_us <= c->rto_max_us && c->dead_us >= 1 &&
           c->peer_window <= UDR_WINDOW_MAX;
}

struct udr_peer *udr_open(const struct udr_config *cfg, const struct udr_ops *ops, void *arg,
                          uint64_t now_us)
{
    if (!config_valid(cfg) || ops == NULL || ops->emit == NULL || ops->deliver == NULL) {
        errno = EINVAL;
        return NULL;
    }
    uint32_t ring = 1;
    while (ring < cfg->window)
        ring <<= 1;
    struct udr_peer *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    p->tx = calloc(ring, sizeof(*p->tx));
    if (p->tx == NULL) {
        free(p);
        return NULL;
    }
    p->rx = calloc(ring, sizeof(*p->rx));
    if (p->rx == NULL) {
        free(p->tx);
        free(p);
        return NULL;
    }
    p->cfg = *cfg;
    p->ops = *ops;
    p->arg = arg;
    p->seg_max = cfg->mtu - MCR_UD_HDR_LEN;
    p->ring_mask = ring - 1;
    p->snd_una = p->snd_nxt = cfg->tx_isn;
    p->rcv_nxt = cfg->rx_isn;
    /* unknown until the peer's first datagram: one */
    p->peer_window = cfg->peer_window != 0 ? cfg->peer_window : 1;
    p->rto_us = cfg->rto_init_us;
    p->rto_deadline = UINT64_MAX;
    p->last_heard = now_us;
    return p;
}

void udr_close(struct udr_peer *p)
{
    if (p == NULL)
        return;
    free(p->asm_buf);
    for (uint32_t i = 0; i <= p->ring_mask; i++)
        free(p->rx[i].data);
    while (p->q_head != NULL) {
        struct udr_msg *m = p->q_head;
        p->q_head = m->next;
        free(m);
    }
    free(p->spare);
    free(p->rx);
    free(p->tx);
    free(p);
}

/* ---- emitting ------------------------------------------------------------ */

static void fill_ack(const struct udr_peer *p, struct mcr_ud_hdr *h, uint8_t type)
{
    memset(h, 0, sizeof(*h));
    h->version = MCR_UD_VERSION;
    h->type = type;
    h->window = (uint16_t)p->cfg.window;
    h->conn_id = p->cfg.peer_conn_id;
    h->ack = p->rcv_nxt;
    h->sack = p->held >> 1;
}

static void acked_now(struct udr_peer *p)
{
    p->ack_pending = 0;
    p->ack_deadline = UINT64_MAX;
    p->ack_owed = false;
}

static void emit_ack(struct udr_peer *p, uint8_t type)
{
    struct mcr_ud_hdr h;
    uint8_t wire[MCR_UD_HDR_LEN];
    fill_ack(p, &h, type);
    mcr_ud_hdr_encode(&h, wire);
    acked_now(p);
    COUNT(p, acks_sent);
    p->ops.emit(p->arg, wire, NULL, 0);
}

static uint32_t rto_current(const struct udr_peer *p)
{
    uint64_t rto = (uint64_t)p->rto_us << min_u32(p->backoff, 20);
    return rto > p->cfg.rto_max_us ? p->cfg.rto_max_us : (uint32_t)rto;
}

static void emit_data(struct udr_peer *p, uint32_t seq, uint64_t now_us)
{
    struct udr_txseg *s = &p->tx[seq & p->ring_mask];
    struct mcr_ud_hdr h;
    uint8_t wire[MCR_UD_HDR_LEN];
    fill_ack(p, &h, MCR_UD_DATA);
    h.seq = seq;
    h.msg_len = s->msg->len;
    h.seg_off = s->off;
    h.seg_len = s->len;
    mcr_ud_hdr_encode(&h, wire);
    acked_now(p);
    s->sent_us = now_us;
    p->ops.emit(p->arg, wire, s->msg->data + s->off, s->len);
}

static uint32_t in_flight(const struct udr_peer *p)
{
    return p->snd_nxt - p->snd_una;
}

/* Sends new segments while the window allows. */
static void pump(struct udr_peer *p, uint64_t now_us)
{
    uint32_t window = min_u32(p->cfg.window, p->peer_window);
    while (p->tx_msg != NULL && in_flight(p) < window) {
        struct udr_msg *m = p->tx_msg;
        uint32_t len = min_u32(m->len - p->tx_off, p->seg_max);
        if (in_flight(p) == 0) {
            p->rto_deadline = now_us + rto_current(p);
            if (!p->waiting) {
                p->waiting = true;
                p->waiting_since = now_us;
            }
        }
        uint32_t seq = p->snd_nxt++;
        struct udr_txseg *s = &p->tx[seq & p->ring_mask];
        *s = (struct udr_txseg){.msg = m, .off = p->tx_off, .len = (uint16_t)len};
        p->tx_off += len;
        if (p->tx_off == m->len) {
            p->tx_msg = m->next;
            p->tx_off = 0;
        }
        COUNT(p, data_sent);
        emit_data(p, seq, now_us);
    }
}

/* A buffer for a message of len bytes: the spare one if it fits. */
static struct udr_msg *msg_alloc(struct udr_peer *p, size_t len)
{
    struct udr_msg *m = p->spare;
    if (m != NULL && m->cap >= len) {
        p->spare = NULL;
        return m;
    }
    size_t cap = (len + MSG_CAP_STEP - 1) / MSG_CAP_STEP * MSG_CAP_STEP;
    m = malloc(sizeof(*m) + cap);
    if (m != NULL)
        m->cap = (uint32_t)cap;
    return m;
}

int udr_send(struct udr_peer *p, const void *msg, size_t len, uint64_t now_us)
{
    struct iovec one = {.iov_base = (void *)msg, .iov_len = len};
    return udr_sendv(p, &one, 1, now_us);
}

int udr_sendv(struct udr_peer *p, const struct iovec *iov, int iovcnt, uint64_t now_us)
{
    size_t len = 0;
    for (int i = 0; i < iovcnt; i++)
        len += iov[i].iov_len;
    if (p->dead)
        return -EPIPE;
    if (len > p->cfg.max_msg)
        return -EMSGSIZE;
    if (p->q_bytes + len > p->cfg.sendq_max)
        return -EAGAIN;
    struct udr_msg *m = msg_alloc(p, len);
    if (m == NULL)
        return -ENOMEM;
    m->next = NULL;
    m->len = (uint32_t)len;
    for (size_t i = 0, off = 0; i < (size_t)iovcnt; off += iov[i].iov_len, i++)
        if (iov[i].iov_len > 0)
            memcpy(m->data + off, iov[i].iov_base, iov[i].iov_len);
    if (p->q_tail != NULL)
        p->q_tail->next = m;
    else
        p->q_head = m;
    p->q_tail = m;
    if (p->tx_msg == NULL) {
        p->tx_msg = m;
        p->tx_off = 0;
    }
    p->q_bytes += len;
    COUNT(p, msgs_sent);
    pump(p, now_us);
    return 0;
}

/* ---- acknowledgements received --------------------------------------------- */

static void rtt_sample(struct udr_peer *p, uint32_t r)
{
    if (!p->have_rtt) {
        p->srtt_us = r;
        p->rttvar_us = r / 2;
        p->have_rtt = true;
    } else {
        uint32_t err = p->srtt_us > r ? p->srtt_us - r : r - p->srtt_us;
        p->rttvar_us = p->rttvar_us - p->rttvar_us / 4 + err / 4;
        p->srtt_us = p->srtt_us - p->srtt_us / 8 + r / 8;
    }
    uint64_t rto = (uint64_t)p->srtt_us + 4 * (uint64_t)p->rttvar_us;
    if (rto < p->cfg.rto_min_us)
        rto = p->cfg.rto_min_us;
    if (rto > p->cfg.rto_max_us)
        rto = p->cfg.rto_max_us;
    p->rto_us = (uint32_t)rto;
}

/* The RTT is sampled once per ack, from the newest datagram the ack newly
 * reports that was sent only once (Karn): one reported before (selectively)
 * or sent twice says nothing about this ack's delay. */
static void newly_acked(const struct udr_txseg *s, uint64_t *newest_sent)
{
    if (!s->sacked && !s->retransmitted && s->sent_us + 1 > *newest_sent)
        *newest_sent = s->sent_us + 1;
}

/* Frees what the cumulative ack `ack` (snd_una < ack <= snd_nxt) covers. */
static void cumulative_ack(struct udr_peer *p, uint32_t ack, uint64_t now_us, uint64_t *newest_sent)
{
    for (; p->snd_una != ack; p->snd_una++) {
        struct udr_txseg *s = &p->tx[p->snd_una & p->ring_mask];
        newly_acked(s, newest_sent);
        if (s->sacked)
            p->nsacked--;
        if (s->off + s->len == s->msg->len) { /* the message's last segment */
            struct udr_msg *m = p->q_head;
            p->q_head = m->next;
            if (p->q_head == NULL)
                p->q_tail = NULL;
            p->q_bytes -= m->len;
            if (p->spare == NULL && m->cap <= SPARE_CAP)
                p->spare = m;
            else
                free(m);
        }
        *s = (struct udr_txseg){0};
    }
    p->backoff = 0;
    if (in_flight(p) > 0) {
        p->rto_deadline = now_us + rto_current(p);
        p->waiting_since = now_us;
    } else {
        p->rto_deadline = UINT64_MAX;
        p->waiting = p->probe_out;
    }
}

/* Marks the entries the selective ack names (ack == snd_una) and
 * fast-retransmits the holes with enough marked entries above them, sent
 * enough later. */
static void selective_ack(struct udr_peer *p, uint64_t sack, uint64_t now_us, uint64_t *newest_sent)
{
    if (sack == 0 && p->nsacked == 0)
        return;
    uint32_t n = in_flight(p);
    p->nsacked = 0;
    /* from i = 0: the entry at the cumulative ack is missing by definition,
     * though an earlier sack marked it (the receiver forgot it since) */
    for (uint32_t i = 0; i < n; i++) {
        struct udr_txseg *s = &p->tx[(p->snd_una + i) & p->ring_mask];
        bool sacked = i >= 1 && i - 1 < 64 && (sack >> (i - 1) & 1);
        if (sacked)
            newly_acked(s, newest_sent);
        s->sacked = sacked;
        p->nsacked += s->sacked;
    }
    /* reordering is told from loss by time: a hole counts as lost when
     * one datagram received above it left reorder_us after it (RACK) */
    uint64_t reorder_us = p->have_rtt ? p->srtt_us / 4 : 0;
    uint64_t newest_sacked = 0;
    uint32_t above = 0;
    for (uint32_t i = n; i-- > 0;) {
        uint32_t seq = p->snd_una + i;
        struct udr_txseg *s = &p->tx[seq & p->ring_mask];
        if (s->sacked) {
            above++;
            if (s->sent_us > newest_sacked)
                newest_sacked = s->sent_us;
        } else if (above >= FAST_RETRANSMIT_SACKED && !s->fast_done &&
                   newest_sacked > s->sent_us + reorder_us) {
            s->fast_done = true;
            s->retransmitted = true;
            COUNT(p, retransmits);
            emit_data(p, seq, now_us);
        }
    }
}

/* ---- receiving --------------------------------------------------------------- */

enum udr_verdict udr_parse(const uint8_t *d, size_t len, struct mcr_ud_hdr *h)
{
    if (len < MCR_UD_HDR_LEN)
        return UDR_MALFORMED;
    mcr_ud_hdr_decode(d, h);
    if (h->version != MCR_UD_VERSION || h->type == 0 || h->type > MCR_UD_TYPE_MAX ||
        h->check != mcr_ud_hdr_check(d) || h->seg_len != len - MCR_UD_HDR_LEN || h->window == 0)
        return UDR_MALFORMED;
    if (h->type != MCR_UD_DATA)
        return h->seq == 0 && h->msg_len == 0 && h->seg_off == 0 && h->seg_len == 0 ? UDR_OK
                                                                                    : UDR_MALFORMED;
    if (h->msg_len == 0)
        return h->seg_off == 0 && h->seg_len == 0 ? UDR_OK : UDR_MALFORMED;
    return h->seg_len > 0 && h->seg_off < h->msg_len && h->seg_len <= h->msg_len - h->seg_off
               ? UDR_OK
               : UDR_MALFORMED;
}

static enum udr_verdict drop(struct udr_peer *p, enum udr_verdict v)
{
    COUNT(p, malformed);
    if (v == UDR_BAD_PEER)
        COUNT(p, bad_peer);
    else if (v == UDR_OUT_OF_WINDOW)
        COUNT(p, out_of_window);
    return v;
}

/* Whether the segment continues the stream where the reassembly stands. */
static bool continues_stream(const struct udr_peer *p, uint32_t msg_len, uint32_t seg_off)
{
    if (p->asm_buf == NULL)
        return seg_off == 0;
    return msg_len == p->asm_total && seg_off == p->asm_len;
}

/* Consumes the in-order segment at rcv_nxt (continues_stream() holds):
 * advances rcv_nxt and delivers a message it completes. `owned` is a
 * buffer of the receive ring to free after use (or NULL). False, with
 * nothing changed or freed, when there is no memory to reassemble the
 * message this segment starts: the datagram is then as if lost. */
static bool consume(struct udr_peer *p, uint32_t msg_len, uint32_t seg_off, const uint8_t *data,
                    uint16_t seg_len, uint8_t *owned, uint64_t now_us)
{
    if (seg_off == 0 && seg_len != msg_len) {
        uint8_t *buf = malloc(msg_len); /* at most max_msg */
        if (buf == NULL)
            return false;
        p->asm_buf = buf;
        p->asm_total = msg_len;
        p->asm_len = 0;
    }
    p->rcv_nxt++;
    p->held >>= 1;
    if (p->ack_pending++ == 0)
        p->ack_deadline = now_us + p->cfg.ack_delay_us;
    const uint8_t *whole = NULL;
    uint8_t *assembled = NULL;
    bool complete = false;
    if (seg_off == 0 && seg_len == msg_len) {
        whole = data != NULL ? data : (const uint8_t *)""; /* an empty message */
        complete = true;
    } else {
        memcpy(p->asm_buf + seg_off, data, seg_len);
        p->asm_len += seg_len;
        if (p->asm_len == p->asm_total) {
            whole = assembled = p->asm_buf;
            p->asm_buf = NULL;
            complete = true;
        }
    }
    if (complete) {
        COUNT(p, msgs_delivered);
        p->ops.deliver(p->arg, whole, msg_len);
    }
    free(assembled);
    free(owned);
    return true;
}

/* The data of a valid DATA datagram `ahead` of rcv_nxt (within the window,
 * or behind it): a duplicate, held out of order, or consumed with what it
 * lets drain. Returns whether an ack must go at once. */
static bool take_data(struct udr_peer *p, const struct mcr_ud_hdr *h, const uint8_t *payload,
                      int32_t ahead, uint64_t now_us, enum udr_verdict *verdict)
{
    if (ahead < 0 || (p->held >> ahead & 1)) {
        COUNT(p, duplicates);
        *verdict = UDR_DUPLICATE;
        return true; /* the sender missed our ack */
    }
    if (ahead > 0) {
        struct udr_rxslot *r = &p->rx[h->seq & p->ring_mask];
        r->data = NULL;
        if (h->seg_len > 0) {
            r->data = malloc(h->seg_len);
            if (r->data == NULL)
                return false; /* no memory: as if lost, sent again */
            memcpy(r->data, payload, h->seg_len);
        }
        r->msg_len = h->msg_len;
        r->seg_off = h->seg_off;
        r->seg_len = h->seg_len;
        p->rx_bytes += h->seg_len;
        bool new_gap = p->held == 0;
        p->held |= 1ull << ahead;
        /* a new gap is told at once, later arrivals above it paced */
        if (!new_gap && p->ack_pending++ == 0)
            p->ack_deadline = now_us + p->cfg.ack_delay_us;
        return new_gap;
    }
    if (!consume(p, h->msg_len, h->seg_off, payload, h->seg_len, NULL, now_us))
        return false;                  /* no memory: as if lost, sent again */
    bool ack_now = (p->held & 1) != 0; /* a gap filled: the sender may move on */
    while (p->held & 1) {
        struct udr_rxslot *r = &p->rx[p->rcv_nxt & p->ring_mask];
        struct udr_rxslot taken = *r;
        *r = (struct udr_rxslot){0};
        p->rx_bytes -= taken.seg_len;
        bool fits = continues_stream(p, taken.msg_len, taken.seg_off);
        if (!fits || !consume(p, taken.msg_len, taken.seg_off, taken.data, taken.seg_len,
                              taken.data, now_us)) {
            /* forget it (forged, or no memory): the sender still has it */
            p->held &= ~1ull;
            free(taken.data);
            if (!fits)
                COUNT(p, malformed);
            return true; /* the sack changed */
        }
    }
    return ack_now;
}

enum udr_verdict udr_input(struct udr_peer *p, const struct mcr_ud_hdr *h, const uint8_t *payload,
                           uint64_t now_us)
{
    COUNT(p, dgrams_received);
    if (p->dead)
        return UDR_OK;
    if (h->conn_id != p->cfg.local_conn_id)
        return drop(p, UDR_BAD_PEER);
    /* the ack: beyond what we sent is forged; behind snd_una is stale */
    bool ack_current = seq_diff(h->ack, p->snd_una) >= 0;
    uint64_t sack = h->sack;
    if (ack_current) {
        if (seq_diff(h->ack, p->snd_nxt) > 0)
            return drop(p, UDR_OUT_OF_WINDOW);
        /* sack bit i names ack + 1 + i: only those below snd_nxt may be
         * set. Others mean the peer holds a datagram we never sent (forged
         * by a third party): ignored, the rest of the datagram is good
         * (dropping it would stall us until the peer forgets the fake). */
        uint32_t named = p->snd_nxt - h->ack;
        named = named > 0 ? named - 1 : 0;
        if (named < 64 && (sack >> named) != 0) {
            sack &= (1ull << named) - 1;
            COUNT(p, bad_sack);
        }
    }
    int32_t ahead = 0;
    if (h->type == MCR_UD_DATA) {
        if (h->msg_len > p->cfg.max_msg || h->seg_len > p->seg_max)
            return drop(p, UDR_MALFORMED);
        ahead = seq_diff(h->seq, p->rcv_nxt);
        if (ahead >= (int32_t)p->cfg.window || ahead < -(int32_t)DUP_HORIZON)
            return drop(p, UDR_OUT_OF_WINDOW);
        if (ahead == 0 && !continues_stream(p, h->msg_len, h->seg_off))
            return drop(p, UDR_MALFORMED);
    }

    /* valid: take the ack */
    p->last_heard = now_us;
    if (p->probe_out) {
        p->probe_out = false;
        if (in_flight(p) == 0) {
            p->waiting = false;
            p->rto_deadline = UINT64_MAX;
        }
    }
    p->peer_window = min_u32(h->window, UDR_WINDOW_MAX);
    if (ack_current) {
        uint64_t newest_sent = 0; /* plus one; 0: none */
        if (h->ack != p->snd_una)
            cumulative_ack(p, h->ack, now_us, &newest_sent);
        selective_ack(p, sack, now_us, &newest_sent);
        if (newest_sent != 0 && now_us + 1 >= newest_sent)
            rtt_sample(p, (uint32_t)min_u32((uint32_t)min_u64(now_us + 1 - newest_sent, UINT32_MAX),
                                            UINT32_MAX / 8));
    }

    enum udr_verdict verdict = UDR_OK;
    bool ack_now = h->type == MCR_UD_PROBE;
    if (h->type == MCR_UD_DATA)
        ack_now = take_data(p, h, payload, ahead, now_us, &verdict);
    if (ack_now || p->ack_pending >= p->cfg.ack_every)
        p->ack_owed = true;
    pump(p, now_us); /* new data carries the ack */
    if (p->ack_owed)
        emit_ack(p, MCR_UD_ACK);
    return verdict;
}

enum udr_verdict udr_receive(struct udr_peer *p, const uint8_t *dgram, size_t len, uint64_t now_us)
{
    struct mcr_ud_hdr h;
    enum udr_verdict v = udr_parse(dgram, len, &h);
    if (v != UDR_OK) {
        COUNT(p, dgrams_received);
        return drop(p, v);
    }
    return udr_input(p, &h, dgram + MCR_UD_HDR_LEN, now_us);
}

/* ---- timers ------------------------------------------------------------------- */

/* The retransmission timer expired: every entry not selectively acked and
 * older than the timeout goes again, and the timeout doubles. */
static void retransmit_timeout(struct udr_peer *p, uint64_t now_us)
{
    uint32_t rto = rto_current(p);
    COUNT(p, timeouts);
    for (uint32_t seq = p->snd_una; seq != p->snd_nxt; seq++) {
        struct udr_txseg *s = &p->tx[seq & p->ring_mask];
        /* the entry at the cumulative ack always goes: it is missing */
        if (seq != p->snd_una && (s->sacked || now_us - s->sent_us < rto))
            continue;
        s->retransmitted = true;
        COUNT(p, retransmits);
        emit_data(p, seq, now_us);
    }
    p->backoff++;
    p->rto_deadline = now_us + rto_current(p);
}

static void send_probe(struct udr_peer *p, uint64_t now_us)
{
    if (!p->probe_out) {
        p->probe_out = true;
        if (!p->waiting) {
            p->waiting = true;
            p->waiting_since = now_us;
        }
    } else {
        p->backoff++;
    }
    p->rto_deadline = now_us + rto_current(p);
    emit_ack(p, MCR_UD_PROBE);
}

/* The peer is dead once it has been waited for dead_us and was asked
 * again this many times meanwhile (retransmission timeouts or repeated
 * probes): a process that was not scheduled for dead_us (a loaded host, a
 * stopped virtual machine) sends again before it gives up, instead of
 * declaring dead a peer whose answer may be waiting in its queue. */
#define UDR_DEAD_EXPIRIES 3u

static bool dead_due(const struct udr_peer *p, uint64_t now_us)
{
    return p->waiting && p->backoff >= UDR_DEAD_EXPIRIES &&
           now_us - p->waiting_since >= p->cfg.dead_us;
}

int udr_tick(struct udr_peer *p, uint64_t now_us)
{
    if (p->dead)
        return -EPIPE;
    if (dead_due(p, now_us)) {
        p->dead = true;
        return -EPIPE;
    }
    if (p->ack_pending > 0 && now_us >= p->ack_deadline)
        emit_ack(p, MCR_UD_ACK);
    if (now_us >= p->rto_deadline) {
        if (in_flight(p) > 0)
            retransmit_timeout(p, now_us);
        else if (p->probe_out)
            send_probe(p, now_us);
        else
            p->rto_deadline = UINT64_MAX;
    }
    if (p->cfg.keepalive_us != 0 && in_flight(p) == 0 && !p->probe_out &&
        now_us - p->last_heard >= p->cfg.keepalive_us)
        send_probe(p, now_us);
    return 0;
}

uint64_t udr_next_deadline(const struct udr_peer *p)
{
    if (p->dead)
        return UINT64_MAX;
    uint64_t t = UINT64_MAX;
    if (p->ack_pending > 0)
        t = p->ack_deadline;
    if (in_flight(p) > 0 || p->probe_out)
        t = min_u64(t, p->rto_deadline);
    if (p->waiting && p->backoff >= UDR_DEAD_EXPIRIES)
        t = min_u64(t, p->waiting_since + p->cfg.dead_us);
    if (p->cfg.keepalive_us != 0 && in_flight(p) == 0 && !p->probe_out)
        t = min_u64(t, p->last_heard + p->cfg.keepalive_us);
    return t;
}

size_t udr_buffered_bytes(const struct udr_peer *p)
{
    return p->q_bytes + p->rx_bytes + (p->asm_buf != NULL ? p->asm_total : 0);
}

int udr_is_dead(const struct udr_peer *p)
{
    return p->dead;
}

int udr_sent_all(const struct udr_peer *p)
{
    return p->q_head == NULL;
}

int udr_is_idle(const struct udr_peer *p)
{
    return udr_sent_all(p) && p->ack_pending == 0 && p->asm_buf == NULL && p->held == 0;
}

const struct udr_stats *udr_stats(const struct udr_peer *p)
{
    return &p->st;
}

uint32_t udr_seg_max(const struct udr_peer *p)
{
    return p->seg_max;
}

void udr_seqs(const struct udr_peer *p, uint32_t *next_send, uint32_t *next_recv)
{
    *next_send = p->snd_nxt;
    *next_recv = p->rcv_nxt;
}
