/* rdma/ud_ep.c: the UD endpoint (rdma/ud_ep.h): the context's verbs objects
 * and its one UD queue pair, the peer table and its timers, the datagram
 * path (posting, sorting and checking arrivals) and driving
 * rdma/ud_reliable.c per peer. Peers are set up through the RDMA CM in
 * rdma/ud_connect.c. */
#include "rdma/ud_ep_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "mcr/ud_wire.h"

#define UDEP_SEND_FLAG (1ull << 63)
#define UDEP_QUIET_TIMER_POLLS 256
#define UDEP_NO_TIMER UINT32_MAX
#define UDEP_POLL_MAX_DEFAULT 64
/* One send in this many asks for a completion (and one whenever fewer
 * send buffers than this are free): a completion frees the buffers of
 * every send before it (a queue pair's sends complete in order), and a
 * request and its reply cost no completion event for the send. */
#define UDEP_SIGNAL_EVERY 16

/* Testing: MCR_UD_TEST_NETWORK="DROP,DUP,DELAY" (receives in a million)
 * sets the lossy-network knobs of every context opened with the defaults,
 * so the server and the client library can be tested on a lossy network
 * (tc netem cannot reach the guest's loopback RDMA traffic). Anything else
 * than three numbers up to a million leaves them off. */
static void opts_test_network_from_env(struct mcr_udep_opts *opts)
{
    const char *spec = getenv("MCR_UD_TEST_NETWORK");
    unsigned drop, dup, delay;
    char extra;
    if (spec == NULL || sscanf(spec, "%u,%u,%u%c", &drop, &dup, &delay, &extra) != 3 ||
        drop > 1000000u || dup > 1000000u || delay > 1000000u)
        return;
    opts->test_drop_ppm = drop;
    opts->test_dup_ppm = dup;
    opts->test_delay_ppm = delay;
}

void mcr_udep_opts_default(struct mcr_udep_opts *opts)
{
    const char *addr = opts->addr;
    memset(opts, 0, sizeof(*opts));
    opts->addr = addr;
    opts->recv_bufs = 512;
    opts->send_bufs = 256;
    opts->max_peers = 4096;
    opts->poll_max = UDEP_POLL_MAX_DEFAULT;
    opts_test_network_from_env(opts);
}

size_t mcr_udep_peer_struct_bytes(void)
{
    return sizeof(struct mcr_udep_peer);
}

/* The source GID from the 40 bytes before a datagram: an IPv6 header (IB,
 * RoCE v1, RoCE v2 over IPv6) or, in its last 20 bytes, an IPv4 header
 * (RoCE v2 over IPv4). */
static int gid_of_grh(const uint8_t *grh, uint8_t gid[16])
{
    if ((grh[0] >> 4) == 6) {
        memcpy(gid, grh + 8, 16);
        return 0;
    }
    if (grh[20] == 0x45) {
        memset(gid, 0, 10);
        gid[10] = gid[11] = 0xff;
        memcpy(gid + 12, grh + 20 + 12, 4);
        return 0;
    }
    return -EPROTO;
}

/* ---- verbs posting ---------------------------------------------------- */

/* Posts the consumed receive buffers again, in one call; 0 or -1. */
static int flush_reposts(struct mcr_udep_ctx *ctx)
{
    uint32_t n = ctx->nrepost;
    if (n == 0)
        return 0;
    struct ibv_sge sge[UDEP_REPOST_BATCH];
    struct ibv_recv_wr wr[UDEP_REPOST_BATCH], *bad;
    for (uint32_t i = 0; i < n; i++) {
        sge[i] =
            (struct ibv_sge){.addr = (uintptr_t)mcr_rdma_pool_buf(&ctx->recv_pool, ctx->repost[i]),
                             .length = ctx->recv_buf_size,
                             .lkey = mcr_rdma_pool_lkey(&ctx->recv_pool, ctx->repost[i])};
        wr[i] = (struct ibv_recv_wr){.wr_id = ctx->repost[i],
                                     .sg_list = &sge[i],
                                     .num_sge = 1,
                                     .next = i + 1 < n ? &wr[i + 1] : NULL};
    }
    ctx->nrepost = 0;
    ctx->st.recv_wrs += n;
    ctx->st.post_recv_calls++;
    return ibv_post_recv(ctx->qp, wr, &bad) == 0 ? 0 : -1;
}

/* A consumed receive buffer goes back to the queue with the next
 * repost_batch - 1 (at most that many fewer than recv_bufs are posted:
 * a datagram a full queue finds no room for is as if lost). 0 or -1. */
static int repost_recv(struct mcr_udep_ctx *ctx, uint32_t idx)
{
    ctx->repost[ctx->nrepost++] = idx;
    return ctx->nrepost >= ctx->repost_batch ? flush_reposts(ctx) : 0;
}

static int post_recv(struct mcr_udep_ctx *ctx, uint32_t idx)
{
    struct ibv_sge sge = {.addr = (uintptr_t)mcr_rdma_pool_buf(&ctx->recv_pool, idx),
                          .length = ctx->recv_buf_size,
                          .lkey = mcr_rdma_pool_lkey(&ctx->recv_pool, idx)};
    struct ibv_recv_wr wr = {.wr_id = idx, .sg_list = &sge, .num_sge = 1}, *bad;
    ctx->st.recv_wrs++;
    ctx->st.post_recv_calls++;
    return ibv_post_recv(ctx->qp, &wr, &bad);
}

/* Posts hdr_len bytes of hdr then len of payload to the peer; -EAGAIN when
 * it cannot (no address yet, no send buffer, too long). */
static int post_dgram(struct mcr_udep_peer *peer, const uint8_t *hdr, size_t hdr_len,
                      const uint8_t *payload, size_t len)
{
    struct mcr_udep_ctx *ctx = peer->ctx;
    if (peer->ah == NULL || hdr_len + len > ctx->mtu)
        return -EAGAIN;
    int64_t got = mcr_rdma_pool_get(&ctx->send_pool);
    if (got < 0)
        return -EAGAIN;
    uint32_t idx = (uint32_t)got;
    uint8_t *buf = mcr_rdma_pool_buf(&ctx->send_pool, idx);
    memcpy(buf, hdr, hdr_len);
    if (len > 0)
        memcpy(buf + hdr_len, payload, len);
    struct ibv_sge sge = {.addr = (uintptr_t)buf,
                          .length = (uint32_t)(hdr_len + len),
                          .lkey = mcr_rdma_pool_lkey(&ctx->send_pool, idx)};
    bool signaled =
        ++ctx->unsignaled >= UDEP_SIGNAL_EVERY || ctx->send_pool.free_count < UDEP_SIGNAL_EVERY;
    struct ibv_send_wr wr = {.wr_id = UDEP_SEND_FLAG | idx,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = signaled ? IBV_SEND_SIGNALED : 0},
                       *bad;
    wr.wr.ud.ah = peer->ah;
    wr.wr.ud.remote_qpn = peer->remote_qpn;
    wr.wr.ud.remote_qkey = RDMA_UDP_QKEY;
    ctx->st.send_wrs++;
    ctx->st.post_send_calls++;
    if (ibv_post_send(ctx->qp, &wr, &bad) != 0) {
        mcr_rdma_pool_put(&ctx->send_pool, idx);
        return -EAGAIN;
    }
    ctx->posted[(ctx->posted_head + ctx->nposted++) % ctx->opts.send_bufs] = idx;
    if (signaled)
        ctx->unsignaled = 0;
    return 0;
}

/* A signaled send completed: its buffer and those of the sends before it
 * are free. */
static void sends_done(struct mcr_udep_ctx *ctx, uint32_t idx)
{
    while (ctx->nposted > 0) {
        uint32_t done = ctx->posted[ctx->posted_head];
        ctx->posted_head = (ctx->posted_head + 1) % ctx->opts.send_bufs;
        ctx->nposted--;
        mcr_rdma_pool_put(&ctx->send_pool, done);
        if (done == idx)
            break;
    }
}

static void udep_emit(void *arg, const uint8_t *hdr, const uint8_t *payload, size_t len)
{
    struct mcr_udep_peer *peer = arg;
    if (post_dgram(peer, hdr, MCR_UD_HDR_LEN, payload, len) != 0)
        peer->ctx->st.send_drops++; /* the layer sends it again */
}

int mcr_udep_send_raw(struct mcr_udep_peer *peer, const void *dgram, size_t len)
{
    return post_dgram(peer, dgram, len, NULL, 0);
}

uint32_t mcr_udep_peer_remote_id(const struct mcr_udep_peer *peer)
{
    return peer->remote_conn_id;
}

void mcr_udep_peer_seqs(const struct mcr_udep_peer *peer, uint32_t *next_send, uint32_t *next_recv)
{
    udr_seqs(peer->udr, next_send, next_recv);
}

const char *mcr_udep_peer_name(const struct mcr_udep_peer *peer)
{
    return peer->name;
}

static void udep_deliver(void *arg, const uint8_t *msg, size_t len)
{
    struct mcr_udep_peer *peer = arg;
    if (peer->close_pending)
        return;
    if (peer->ctx->cb.on_message)
        peer->ctx->cb.on_message(peer, msg, len, peer->ctx->user);
}

static const struct udr_ops udep_udr_ops = {.emit = udep_emit, .deliver = udep_deliver};

/* ---- the timer heap: peers by the deadline of their layer -------------- */

static void timer_place(struct mcr_udep_ctx *ctx, uint32_t pos, struct mcr_udep_peer *peer)
{
    ctx->timers[pos] = peer;
    peer->timer_pos = pos;
}

static void timer_sift_up(struct mcr_udep_ctx *ctx, uint32_t pos)
{
    struct mcr_udep_peer *peer = ctx->timers[pos];
    while (pos > 0) {
        uint32_t parent = (pos - 1) / 2;
        if (ctx->timers[parent]->deadline <= peer->deadline)
            break;
        timer_place(ctx, pos, ctx->timers[parent]);
        pos = parent;
    }
    timer_place(ctx, pos, peer);
}

static void timer_sift_down(struct mcr_udep_ctx *ctx, uint32_t pos)
{
    struct mcr_udep_peer *peer = ctx->timers[pos];
    for (;;) {
        uint32_t child = 2 * pos + 1;
        if (child >= ctx->ntimers)
            break;
        if (child + 1 < ctx->ntimers &&
            ctx->timers[child + 1]->deadline < ctx->timers[child]->deadline)
            child++;
        if (peer->deadline <= ctx->timers[child]->deadline)
            break;
        timer_place(ctx, pos, ctx->timers[child]);
        pos = child;
    }
    timer_place(ctx, pos, peer);
}

static void timer_remove(struct mcr_udep_peer *peer)
{
    struct mcr_udep_ctx *ctx = peer->ctx;
    uint32_t pos = peer->timer_pos;
    if (pos == UDEP_NO_TIMER)
        return;
    peer->timer_pos = UDEP_NO_TIMER;
    struct mcr_udep_peer *last = ctx->timers[--ctx->ntimers];
    if (last == peer)
        return;
    timer_place(ctx, pos, last);
    if (pos > 0 && ctx->timers[(pos - 1) / 2]->deadline > last->deadline)
        timer_sift_up(ctx, pos);
    else
        timer_sift_down(ctx, pos);
}

/* After every call that may move the peer's deadline (udr_open, udr_send,
 * udr_input, udr_tick): its place in the heap. */
static void peer_reschedule(struct mcr_udep_peer *peer)
{
    struct mcr_udep_ctx *ctx = peer->ctx;
    uint64_t d = udr_next_deadline(peer->udr);
    if (peer->timer_pos == UDEP_NO_TIMER) {
        if (d == UINT64_MAX)
            return;
        peer->deadline = d;
        timer_place(ctx, ctx->ntimers++, peer);
        timer_sift_up(ctx, peer->timer_pos);
        return;
    }
    if (d == peer->deadline)
        return;
    if (d == UINT64_MAX) {
        timer_remove(peer);
        return;
    }
    bool earlier = d < peer->deadline;
    peer->deadline = d;
    if (earlier)
        timer_sift_up(ctx, peer->timer_pos);
    else
        timer_sift_down(ctx, peer->timer_pos);
}

/* The earliest deadline of any peer (UINT64_MAX: none). */
static uint64_t next_deadline(const struct mcr_udep_ctx *ctx)
{
    return ctx->ntimers > 0 ? ctx->timers[0]->deadline : UINT64_MAX;
}

/* ---- peers ------------------------------------------------------------ */

uint32_t udep_free_slot(const struct mcr_udep_ctx *ctx)
{
    uint32_t slot;
    for (slot = 0; slot < ctx->opts.max_peers; slot++)
        if (ctx->peers[slot] == NULL)
            break;
    return slot;
}

/* conn_id names slot in its low 16 bits, the rest random. */
struct mcr_udep_peer *udep_peer_new(struct mcr_udep_ctx *ctx, uint32_t conn_id, uint32_t isn,
                                    const struct udep_pd *remote, const uint8_t gid[16])
{
    uint32_t slot = conn_id & 0xffffu;
    if (slot >= ctx->opts.max_peers || ctx->peers[slot] != NULL)
        return NULL;
    struct mcr_udep_peer *peer = calloc(1, sizeof(*peer));
    if (peer == NULL)
        return NULL;
    peer->ctx = ctx;
    peer->slot = slot;
    peer->local_conn_id = conn_id;
    peer->remote_qpn = remote->qpn;
    peer->remote_conn_id = remote->conn_id;
    memcpy(peer->gid, gid, 16);
    struct udr_config cfg;
    udr_config_defaults(&cfg, remote->mtu < ctx->mtu ? remote->mtu : ctx->mtu);
    if (ctx->opts.window)
        cfg.window = ctx->opts.window;
    if (ctx->opts.dead_ms)
        cfg.dead_us = ctx->opts.dead_ms * 1000u;
    if (ctx->opts.max_msg)
        cfg.max_msg = ctx->opts.max_msg;
    if (ctx->opts.keepalive_ms)
        cfg.keepalive_us = ctx->opts.keepalive_ms * 1000u;
    cfg.local_conn_id = conn_id;
    cfg.peer_conn_id = remote->conn_id;
    cfg.peer_window = remote->window;
    cfg.tx_isn = isn;
    cfg.rx_isn = remote->isn;
    cfg.sum = &ctx->sum;
    peer->udr = udr_open(&cfg, &udep_udr_ops, peer, udep_now_us());
    if (peer->udr == NULL) {
        free(peer);
        return NULL;
    }
    ctx->peers[slot] = peer;
    ctx->npeers++;
    peer->timer_pos = UDEP_NO_TIMER;
    peer_reschedule(peer);
    return peer;
}

void udep_peer_free(struct mcr_udep_peer *peer)
{
    struct mcr_udep_ctx *ctx = peer->ctx;
    timer_remove(peer);
    udr_close(peer->udr);
    if (peer->ah)
        ibv_destroy_ah(peer->ah);
    ctx->peers[peer->slot] = NULL;
    ctx->npeers--;
    free(peer);
}

void mcr_udep_peer_close(struct mcr_udep_peer *peer)
{
    if (peer->in_input)
        peer->close_pending = true;
    else
        udep_peer_free(peer);
}

int mcr_udep_send(struct mcr_udep_peer *peer, const void *msg, size_t len)
{
    struct iovec one = {.iov_base = (void *)msg, .iov_len = len};
    return mcr_udep_sendv(peer, &one, 1);
}

int mcr_udep_sendv(struct mcr_udep_peer *peer, const struct iovec *iov, int iovcnt)
{
    if (peer->close_pending)
        return -EPIPE;
    int rc = udr_sendv(peer->udr, iov, iovcnt, udep_now_us());
    peer_reschedule(peer);
    return rc;
}

int mcr_udep_peer_idle(const struct mcr_udep_peer *peer)
{
    return udr_is_idle(peer->udr);
}

int mcr_udep_peer_sent_all(const struct mcr_udep_peer *peer)
{
    return udr_sent_all(peer->udr);
}

const struct udr_stats *mcr_udep_peer_stats(const struct mcr_udep_peer *peer)
{
    return udr_stats(peer->udr);
}

void mcr_udep_peer_set_user(struct mcr_udep_peer *peer, void *user)
{
    peer->user = user;
}

void *mcr_udep_peer_user(const struct mcr_udep_peer *peer)
{
    return peer->user;
}

/* ---- context ---------------------------------------------------------- */

static uint32_t mtu_bytes(enum ibv_mtu m)
{
    return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128u << m : 1024u;
}

static int make_qp(struct mcr_udep_ctx *ctx, char *err, size_t errlen)
{
    struct ibv_port_attr pa;
    if (ibv_query_port(ctx->dev.verbs, ctx->dev.port_num, &pa) != 0) {
        mcr_rdma_set_err(err, errlen, "%s: ibv_query_port: %s", ctx->dev.name, strerror(errno));
        return -1;
    }
    ctx->mtu = mtu_bytes(pa.active_mtu);
    ctx->roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
    ctx->sgid_index = -1;
    ctx->recv_buf_size = ctx->mtu + MCR_UD_GRH_LEN;
    if (mcr_rdma_device_open(&ctx->dev, (int)(ctx->opts.recv_bufs + ctx->opts.send_bufs), NULL, err,
                             errlen) != 0)
        return -1;
    struct ibv_qp_init_attr qa = {.send_cq = ctx->dev.cq,
                                  .recv_cq = ctx->dev.cq,
                                  .cap = {.max_send_wr = ctx->opts.send_bufs,
                                          .max_recv_wr = ctx->opts.recv_bufs,
                                          .max_send_sge = 1,
                                          .max_recv_sge = 1},
                                  .qp_type = IBV_QPT_UD,
                                  .sq_sig_all = 0};
    if ((ctx->qp = ibv_create_qp(ctx->dev.pd, &qa)) == NULL) {
        mcr_rdma_set_err(err, errlen, "%s: ibv_create_qp (UD): %s", ctx->dev.name, strerror(errno));
        return -1;
    }
    struct ibv_qp_attr at = {.qp_state = IBV_QPS_INIT,
                             .pkey_index = 0,
                             .port_num = ctx->dev.port_num,
                             .qkey = RDMA_UDP_QKEY};
    int rc =
        ibv_modify_qp(ctx->qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
    if (rc == 0) {
        at.qp_state = IBV_QPS_RTR;
        rc = ibv_modify_qp(ctx->qp, &at, IBV_QP_STATE);
    }
    if (rc == 0) {
        at.qp_state = IBV_QPS_RTS;
        at.sq_psn = 0;
        rc = ibv_modify_qp(ctx->qp, &at, IBV_QP_STATE | IBV_QP_SQ_PSN);
    }
    if (rc != 0) {
        mcr_rdma_set_err(err, errlen, "%s: UD queue pair to RTS: %s", ctx->dev.name, strerror(rc));
        return -1;
    }
    fcntl(ctx->dev.comp_channel->fd, F_SETFL,
          fcntl(ctx->dev.comp_channel->fd, F_GETFL) | O_NONBLOCK);
    ctx->peers = calloc(ctx->opts.max_peers, sizeof(*ctx->peers));
    ctx->timers = calloc(ctx->opts.max_peers, sizeof(*ctx->timers));
    ctx->posted = calloc(ctx->opts.send_bufs, sizeof(*ctx->posted));
    ctx->held_mem = malloc((size_t)UDEP_HELD_MAX * ctx->recv_buf_size);
    if (!ctx->peers || !ctx->timers || !ctx->posted || !ctx->held_mem) {
        mcr_rdma_set_err(err, errlen, "out of memory");
        return -1;
    }
    int prc =
        mcr_rdma_pool_init(&ctx->recv_pool, ctx->dev.pd, ctx->opts.recv_bufs, ctx->recv_buf_size);
    if (prc == 0)
        prc = mcr_rdma_pool_init(&ctx->send_pool, ctx->dev.pd, ctx->opts.send_bufs, ctx->mtu);
    if (prc != 0) {
        mcr_rdma_set_err(err, errlen, "%s: registering buffer pools: %s", ctx->dev.name,
                         strerror(-prc));
        return -1;
    }
    ctx->st.registered_bytes =
        (size_t)ctx->opts.recv_bufs * ctx->recv_buf_size + (size_t)ctx->opts.send_bufs * ctx->mtu;
    for (uint32_t i = 0; i < UDEP_HELD_MAX; i++)
        ctx->held[i].buf = ctx->held_mem + (size_t)i * ctx->recv_buf_size;
    for (uint32_t i = 0; i < ctx->opts.recv_bufs; i++)
        if (post_recv(ctx, i) != 0) {
            mcr_rdma_set_err(err, errlen, "%s: posting receives: %s", ctx->dev.name,
                             strerror(errno));
            return -1;
        }
    return 0;
}

struct mcr_udep_ctx *mcr_udep_open(const struct mcr_udep_opts *opts,
                                   const struct mcr_udep_callbacks *cb, void *user, char *err,
                                   size_t errlen)
{
    if (opts->addr == NULL || opts->recv_bufs == 0 || opts->send_bufs == 0 ||
        opts->max_peers == 0 || opts->max_peers > 65536) {
        mcr_rdma_set_err(err, errlen, "bad UD endpoint options");
        return NULL;
    }
    struct mcr_udep_ctx *ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL) {
        mcr_rdma_set_err(err, errlen, "out of memory");
        return NULL;
    }
    ctx->opts = *opts;
    if (ctx->opts.poll_max == 0)
        ctx->opts.poll_max = UDEP_POLL_MAX_DEFAULT;
    /* an eighth of the receives at most wait to be posted again */
    ctx->repost_batch = ctx->opts.recv_bufs / 8;
    if (ctx->repost_batch > UDEP_REPOST_BATCH)
        ctx->repost_batch = UDEP_REPOST_BATCH;
    if (ctx->repost_batch == 0)
        ctx->repost_batch = 1;
    if (cb)
        ctx->cb = *cb;
    ctx->user = user;
    if (getrandom(&ctx->rng, sizeof(ctx->rng), 0) != sizeof(ctx->rng) || ctx->rng == 0)
        ctx->rng = udep_now_us() | 1;
    if ((ctx->ch = rdma_create_event_channel()) == NULL) {
        mcr_rdma_set_err(err, errlen, "RDMA CM: %s", strerror(errno));
        goto fail;
    }
    fcntl(ctx->ch->fd, F_SETFL, fcntl(ctx->ch->fd, F_GETFL) | O_NONBLOCK);
    /* a server binds addr:port and listens there; a client resolves addr */
    if (mcr_rdma_device_find(&ctx->dev, ctx->ch, RDMA_PS_UDP, ctx, opts->addr, opts->port,
                             opts->port != 0 ? MCR_RDMA_FIND_BIND : MCR_RDMA_FIND_RESOLVE, 2000,
                             err, errlen) != 0)
        goto fail;
    if (opts->port != 0 && rdma_listen(ctx->dev.id, 128) != 0) {
        mcr_rdma_set_err(err, errlen, "listening on %s:%u: %s", opts->addr, opts->port,
                         strerror(errno));
        goto fail;
    }
    if (make_qp(ctx, err, errlen) != 0)
        goto fail;
    ctx->st.mtu = ctx->mtu;
    return ctx;
fail:
    mcr_udep_close(ctx);
    return NULL;
}

void mcr_udep_close(struct mcr_udep_ctx *ctx)
{
    if (ctx == NULL)
        return;
    for (uint32_t i = 0; ctx->peers && i < ctx->opts.max_peers; i++)
        if (ctx->peers[i])
            udep_peer_free(ctx->peers[i]);
    mcr_rdma_pool_destroy(&ctx->send_pool);
    mcr_rdma_pool_destroy(&ctx->recv_pool);
    free(ctx->held_mem);
    free(ctx->posted);
    free(ctx->timers);
    free(ctx->peers);
    if (ctx->qp)
        ibv_destroy_qp(ctx->qp);
    mcr_rdma_device_close(&ctx->dev);
    if (ctx->ch)
        rdma_destroy_event_channel(ctx->ch);
    free(ctx);
}

/* ---- arrivals, timers, polling ---------------------------------------- */

/* One received datagram (GRH included): checked, sorted to its peer, given
 * to its layer. Nothing of it is used before the check that guards it. */
static void handle_dgram(struct mcr_udep_ctx *ctx, const uint8_t *buf, uint32_t len,
                         const struct ibv_wc *wc, uint64_t now)
{
    uint8_t gid[16];
    struct mcr_ud_hdr hdr;
    if (!(wc->wc_flags & IBV_WC_GRH) || len < MCR_UD_GRH_LEN) {
        ctx->st.bad_grh++;
        return;
    }
    if (len < MCR_UD_GRH_LEN + MCR_UD_HDR_LEN || len > ctx->recv_buf_size) {
        ctx->st.bad_length++;
        return;
    }
    if (gid_of_grh(buf, gid) != 0) {
        ctx->st.bad_grh++;
        return;
    }
    const uint8_t *dgram = buf + MCR_UD_GRH_LEN;
    if (udr_parse(dgram, len - MCR_UD_GRH_LEN, &hdr) != UDR_OK) {
        ctx->st.bad_header++;
        return;
    }
    uint32_t slot = hdr.conn_id & 0xffffu;
    struct mcr_udep_peer *peer = slot < ctx->opts.max_peers ? ctx->peers[slot] : NULL;
    if (peer == NULL || peer->local_conn_id != hdr.conn_id || peer->close_pending) {
        ctx->st.unknown_peer++;
        return;
    }
    if (wc->src_qp != peer->remote_qpn || memcmp(gid, peer->gid, 16) != 0) {
        ctx->st.bad_source++;
        return;
    }
    if (peer->ah == NULL) {
        /* the server's way back to the client when its request gave none:
         * from its first good datagram */
        peer->ah = ibv_create_ah_from_wc(ctx->dev.pd, (struct ibv_wc *)wc, (struct ibv_grh *)buf,
                                         ctx->dev.port_num);
    }
    peer->in_input++;
    udr_input(peer->udr, &hdr, dgram + MCR_UD_HDR_LEN, now);
    peer->in_input--;
    if (peer->close_pending)
        udep_peer_free(peer);
    else
        peer_reschedule(peer);
}

/* Testing: the network's loss, duplication and reordering, on arrival. */
static bool test_chance(struct mcr_udep_ctx *ctx, uint32_t ppm)
{
    return ppm != 0 && udep_rng_next(ctx) % 1000000u < ppm;
}

static void release_held(struct mcr_udep_ctx *ctx, uint64_t now)
{
    uint32_t n = ctx->nheld;
    ctx->nheld = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct udep_held h = ctx->held[i];
        handle_dgram(ctx, h.buf, h.len, &h.wc, now);
    }
}

static void on_recv(struct mcr_udep_ctx *ctx, const struct ibv_wc *wc, uint64_t now)
{
    const uint8_t *buf = mcr_rdma_pool_buf(&ctx->recv_pool, (uint32_t)wc->wr_id);
    uint32_t len = wc->byte_len;
    if (test_chance(ctx, ctx->opts.test_drop_ppm)) {
        ctx->st.test_dropped++;
        return;
    }
    if (ctx->nheld < UDEP_HELD_MAX && len <= ctx->recv_buf_size &&
        test_chance(ctx, ctx->opts.test_delay_ppm)) {
        struct udep_held *h = &ctx->held[ctx->nheld++];
        memcpy(h->buf, buf, len);
        h->len = len;
        h->wc = *wc;
        ctx->st.test_delayed++;
        return;
    }
    handle_dgram(ctx, buf, len, wc, now);
    if (test_chance(ctx, ctx->opts.test_dup_ppm)) {
        ctx->st.test_duplicated++;
        handle_dgram(ctx, buf, len, wc, now);
    }
}

/* The completions one poll found; 0 or -EIO. Never inlined: its
 * instructions are the work of a poll that found something, apart from
 * the idle polls (benchmarks/rdma-instructions counts them by this name). */
__attribute__((noinline)) static int udep_handle_wcs(struct mcr_udep_ctx *ctx,
                                                     const struct ibv_wc *wcs, int n)
{
    uint64_t now = udep_now_us(); /* once something came (a clock read may be a system call) */
    ctx->polled_us = now;
    for (int i = 0; i < n; i++) {
        const struct ibv_wc *wc = &wcs[i];
        if (wc->wr_id & UDEP_SEND_FLAG) {
            sends_done(ctx, (uint32_t)(wc->wr_id & ~UDEP_SEND_FLAG));
            continue;
        }
        if (wc->status == IBV_WC_SUCCESS)
            on_recv(ctx, wc, now);
        else if (wc->status != IBV_WC_WR_FLUSH_ERR)
            ctx->st.bad_length++;
        if (wc->status != IBV_WC_WR_FLUSH_ERR && repost_recv(ctx, (uint32_t)wc->wr_id) != 0)
            return -EIO;
    }
    return 0;
}

/* Handles at most opts.poll_max completions (one call of mcr_udep_poll,
 * mcr_udep_poll_cq or mcr_udep_arm never handles more: a stream of
 * arrivals cannot keep its caller from the rest of its work). */
static int poll_cq(struct mcr_udep_ctx *ctx)
{
    struct ibv_wc wcs[32];
    int total = 0, n = 0, max = (int)ctx->opts.poll_max;
    while (total < max &&
           (n = ibv_poll_cq(ctx->dev.cq, max - total < 32 ? max - total : 32, wcs)) > 0) {
        if (udep_handle_wcs(ctx, wcs, n) != 0)
            return -EIO;
        total += n;
        if (n < 32 && total < max)
            break;
    }
    if (n < 0)
        return -EIO;
    return total;
}

/* Ticks the peers whose deadline has come (each at most once: a tick
 * moves its deadline past now); returns the next deadline. */
static uint64_t run_timers(struct mcr_udep_ctx *ctx, uint64_t now)
{
    for (uint32_t budget = ctx->ntimers; budget > 0 && next_deadline(ctx) <= now; budget--) {
        struct mcr_udep_peer *peer = ctx->timers[0];
        peer->in_input++;
        int rc = udr_tick(peer->udr, now);
        peer->in_input--;
        if (peer->close_pending) {
            udep_peer_free(peer);
            continue;
        }
        if (rc == -EPIPE) {
            ctx->st.dead_peers++;
            peer->in_input++; /* a close from the callback waits for us */
            if (ctx->cb.on_dead)
                ctx->cb.on_dead(peer, -ETIMEDOUT, ctx->user);
            udep_peer_free(peer);
            continue;
        }
        peer_reschedule(peer);
    }
    return next_deadline(ctx);
}

uint64_t mcr_udep_next_deadline(const struct mcr_udep_ctx *ctx)
{
    return next_deadline(ctx);
}

uint64_t mcr_udep_now_us(void)
{
    return udep_now_us();
}

void mcr_udep_fds(const struct mcr_udep_ctx *ctx, int fds[2])
{
    fds[0] = ctx->dev.comp_channel->fd;
    fds[1] = ctx->ch->fd;
}

int mcr_udep_arm(struct mcr_udep_ctx *ctx, int *timeout_ms)
{
    if (!ctx->armed) {
        if (ibv_req_notify_cq(ctx->dev.cq, 0) != 0)
            return -EIO;
        ctx->armed = true;
    }
    uint64_t now = udep_now_us(), next = next_deadline(ctx);
    *timeout_ms = next == UINT64_MAX ? -1 : next <= now ? 0 : (int)((next - now + 999) / 1000);
    if (next <= now || ctx->nheld > 0)
        return 1;
    /* a completion that came before the arming raises no event: handle it */
    int rc = poll_cq(ctx);
    return rc < 0 ? rc : rc > 0;
}

/* After a poll that found completions: held datagrams and due timers, by
 * the clock of that poll (no second read; and a delayed ack that the
 * datagrams just made owed is not due before the reply that carries it
 * could go). Never inlined, as udep_handle_wcs. */
__attribute__((noinline)) static void udep_after_completions(struct mcr_udep_ctx *ctx)
{
    uint64_t now = ctx->polled_us;
    if (ctx->nheld > 0)
        release_held(ctx, now);
    run_timers(ctx, now);
}

int mcr_udep_poll_cq(struct mcr_udep_ctx *ctx)
{
    int rc = poll_cq(ctx);
    if (rc < 0)
        return rc;
    /* the clock (and the timers) only after completions, or every
     * UDEP_QUIET_TIMER_POLLS empty polls */
    if (rc > 0)
        udep_after_completions(ctx);
    else if (++ctx->quiet_polls % UDEP_QUIET_TIMER_POLLS == 0)
        run_timers(ctx, udep_now_us());
    return rc;
}

int mcr_udep_poll(struct mcr_udep_ctx *ctx, int timeout_ms)
{
    int handled = 0, rc;
    struct rdma_cm_event *ev;
    if (ctx->armed) { /* take the event mcr_udep_arm asked for, if it came */
        struct ibv_cq *cq;
        void *cqctx;
        ctx->armed = false;
        if (ibv_get_cq_event(ctx->dev.comp_channel, &cq, &cqctx) == 0)
            ibv_ack_cq_events(cq, 1);
    }
    while (rdma_get_cm_event(ctx->ch, &ev) == 0) {
        udep_handle_cm_event(ctx, ev);
        handled++;
    }
    if ((rc = poll_cq(ctx)) < 0)
        return rc;
    handled += rc;
    uint64_t now = udep_now_us();
    if (ctx->nheld > 0 && (handled > 0 || timeout_ms > 0))
        release_held(ctx, now);
    uint64_t next = run_timers(ctx, now);
    if (handled > 0 || timeout_ms == 0)
        return handled;
    /* sleep until a completion, a CM event, the next deadline or timeout */
    if (ibv_req_notify_cq(ctx->dev.cq, 0) != 0)
        return -EIO;
    if ((rc = poll_cq(ctx)) != 0)
        return rc;
    int wait_ms = timeout_ms;
    if (next != UINT64_MAX) {
        uint64_t left = next > now ? (next - now + 999) / 1000 : 0;
        if (wait_ms < 0 || left < (uint64_t)wait_ms)
            wait_ms = (int)left;
    }
    struct pollfd pfd[2] = {{.fd = ctx->dev.comp_channel->fd, .events = POLLIN},
                            {.fd = ctx->ch->fd, .events = POLLIN}};
    if (poll(pfd, 2, wait_ms) > 0 && (pfd[0].revents & POLLIN)) {
        struct ibv_cq *cq;
        void *cqctx;
        if (ibv_get_cq_event(ctx->dev.comp_channel, &cq, &cqctx) == 0)
            ibv_ack_cq_events(cq, 1);
    }
    while (rdma_get_cm_event(ctx->ch, &ev) == 0) {
        udep_handle_cm_event(ctx, ev);
        handled++;
    }
    if ((rc = poll_cq(ctx)) < 0)
        return rc;
    handled += rc;
    run_timers(ctx, udep_now_us());
    return handled;
}

void mcr_udep_stats(const struct mcr_udep_ctx *ctx, struct mcr_udep_stats *out)
{
    *out = ctx->st;
    const struct udr_stats sum = ctx->sum;
    out->peers = ctx->npeers;
    out->msgs_sent = sum.msgs_sent;
    out->msgs_delivered = sum.msgs_delivered;
    out->data_sent = sum.data_sent;
    out->retransmits = sum.retransmits;
    out->acks_sent = sum.acks_sent;
    out->duplicates = sum.duplicates;
    out->malformed = sum.malformed;
    out->timeouts = sum.timeouts;
}
