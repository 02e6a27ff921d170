/* rdma/ud_connect.c: setting UD peers up through the RDMA CM
 * (RDMA_PS_UDP, SIDR): the private data both sides exchange, the server's
 * answer to a connect request, and the client's connect with its own
 * resends of an unanswered request (rdma/ud_ep.h: mcr_udep_connect). */
#include "rdma/ud_ep_internal.h"

#include <errno.h>
#include <string.h>

#include "mcr/ud_wire.h"

/* Private data of the RDMA CM exchange, both ways, little-endian:
 * magic(2) version(1) reserved(1) qpn(4) conn_id(4) window(2) mtu(2) isn(4) */
#define UDEP_PD_MAGIC 0x5544u
#define UDEP_PD_VERSION 1u
#define UDEP_PD_LEN 20u

static void pd_encode(const struct udep_pd *pd, uint8_t *out)
{
    mcr_ud_put16(out, UDEP_PD_MAGIC);
    out[2] = UDEP_PD_VERSION;
    out[3] = 0;
    mcr_ud_put32(out + 4, pd->qpn);
    mcr_ud_put32(out + 8, pd->conn_id);
    mcr_ud_put16(out + 12, pd->window);
    mcr_ud_put16(out + 14, pd->mtu);
    mcr_ud_put32(out + 16, pd->isn);
}

static int pd_decode(const void *data, size_t len, struct udep_pd *pd)
{
    const uint8_t *p = data;
    if (p == NULL || len < UDEP_PD_LEN || mcr_ud_get16(p) != UDEP_PD_MAGIC ||
        p[2] != UDEP_PD_VERSION)
        return -EPROTO;
    pd->qpn = mcr_ud_get32(p + 4) & 0xffffffu;
    pd->conn_id = mcr_ud_get32(p + 8);
    pd->window = mcr_ud_get16(p + 12);
    pd->mtu = mcr_ud_get16(p + 14);
    pd->isn = mcr_ud_get32(p + 16);
    if (pd->window < 1 || pd->window > UDR_WINDOW_MAX || pd->mtu < 256 || pd->mtu > 4096)
        return -EPROTO;
    return 0;
}

/* The GID of an address as RoCE names it (IPv4 mapped into IPv6). */
static int gid_of_sockaddr(const struct sockaddr *sa, uint8_t gid[16])
{
    if (sa->sa_family == AF_INET) {
        memset(gid, 0, 10);
        gid[10] = gid[11] = 0xff;
        memcpy(gid + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        memcpy(gid, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return 0;
    }
    return -EAFNOSUPPORT;
}

static void local_pd(struct mcr_udep_ctx *ctx, uint32_t conn_id, uint32_t isn, uint8_t *out)
{
    struct udep_pd pd = {.qpn = ctx->qp->qp_num,
                         .conn_id = conn_id,
                         .isn = isn,
                         .window = (uint16_t)(ctx->opts.window ? ctx->opts.window : 32),
                         .mtu = (uint16_t)ctx->mtu};
    pd_encode(&pd, out);
}

/* The GID table index of our address `gid` on the port, RoCE v2 preferred
 * (what the RDMA CM uses by default); -1 when it is not in the table. Kept
 * for the next request: a listener has one address. */
static int local_gid_index(struct mcr_udep_ctx *ctx, const uint8_t gid[16])
{
    if (ctx->sgid_index >= 0 && memcmp(ctx->sgid, gid, 16) == 0)
        return ctx->sgid_index;
    struct ibv_port_attr pa;
    if (ibv_query_port(ctx->dev.verbs, ctx->dev.port_num, &pa) != 0)
        return -1;
    int found = -1;
    for (int i = 0; i < pa.gid_tbl_len; i++) {
        struct ibv_gid_entry e;
        if (ibv_query_gid_ex(ctx->dev.verbs, ctx->dev.port_num, (uint32_t)i, &e, 0) != 0 ||
            memcmp(e.gid.raw, gid, 16) != 0)
            continue;
        if (found < 0 || e.gid_type == IBV_GID_TYPE_ROCE_V2)
            found = i;
        if (e.gid_type == IBV_GID_TYPE_ROCE_V2)
            break;
    }
    if (found >= 0) {
        ctx->sgid_index = found;
        memcpy(ctx->sgid, gid, 16);
    }
    return found;
}

/* Server, RoCE: the way back to a client from the GIDs of its request (the
 * request carries no address handle), so the server can reach a client
 * that has not sent anything yet (its keepalive probes would otherwise go
 * nowhere and the client be found dead). NULL when it cannot be made: the
 * client's first datagram gives one then. */
static struct ibv_ah *ah_of_request(struct mcr_udep_ctx *ctx, struct rdma_cm_id *id,
                                    const uint8_t peer_gid[16])
{
    uint8_t local[16];
    if (!ctx->roce || gid_of_sockaddr(rdma_get_local_addr(id), local) != 0)
        return NULL;
    int idx = local_gid_index(ctx, local);
    if (idx < 0)
        return NULL;
    struct ibv_ah_attr aa = {.is_global = 1,
                             .port_num = ctx->dev.port_num,
                             .grh = {.sgid_index = (uint8_t)idx, .hop_limit = 64}};
    memcpy(aa.grh.dgid.raw, peer_gid, 16);
    return ibv_create_ah(ctx->dev.pd, &aa);
}

/* Server: a client's request. Refused when the server does not admit it,
 * without valid private data, or without room. */
static void on_connect_request(struct mcr_udep_ctx *ctx, struct rdma_cm_event *ev)
{
    struct rdma_cm_id *id = ev->id;
    struct udep_pd remote;
    uint8_t gid[16];
    struct mcr_udep_peer *peer = NULL;
    if (ctx->cb.admit != NULL && !ctx->cb.admit(ctx->user)) {
        rdma_reject(id, NULL, 0);
        rdma_destroy_id(id);
        return;
    }
    uint32_t conn_id = (udep_rng_next(ctx) << 16) | udep_free_slot(ctx), isn = udep_rng_next(ctx);
    if (pd_decode(ev->param.ud.private_data, ev->param.ud.private_data_len, &remote) != 0 ||
        gid_of_sockaddr(rdma_get_peer_addr(id), gid) != 0 ||
        (peer = udep_peer_new(ctx, conn_id, isn, &remote, gid)) == NULL) {
        rdma_reject(id, NULL, 0);
        rdma_destroy_id(id);
        return;
    }
    if (mcr_rdma_addr_name(rdma_get_peer_addr(id), peer->name, sizeof(peer->name)) != 0)
        peer->name[0] = '\0';
    peer->ah = ah_of_request(ctx, id, gid);
    uint8_t priv[UDEP_PD_LEN];
    local_pd(ctx, conn_id, isn, priv);
    struct rdma_conn_param param = {
        .private_data = priv, .private_data_len = UDEP_PD_LEN, .qp_num = ctx->qp->qp_num};
    if (rdma_accept(id, &param) != 0) {
        udep_peer_free(peer);
        rdma_destroy_id(id);
        return;
    }
    rdma_destroy_id(id);
    if (ctx->cb.on_peer)
        ctx->cb.on_peer(peer, ctx->user);
}

void udep_handle_cm_event(struct mcr_udep_ctx *ctx, struct rdma_cm_event *ev)
{
    if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
        struct rdma_cm_event copy = *ev;
        /* the request's id is ours to destroy once the event is acked */
        uint8_t priv[256];
        size_t plen = ev->param.ud.private_data_len;
        if (plen > sizeof(priv))
            plen = sizeof(priv);
        if (plen)
            memcpy(priv, ev->param.ud.private_data, plen);
        copy.param.ud.private_data = priv;
        copy.param.ud.private_data_len = (uint8_t)plen;
        rdma_ack_cm_event(ev);
        on_connect_request(ctx, &copy);
        return;
    }
    rdma_ack_cm_event(ev);
}

/* Whether an answer to a connect request says the kernel's CM gave up on
 * its own resends (UNREACHABLE with status ETIMEDOUT, negative in current
 * kernels): a loss, worth sending again. UNREACHABLE with the status of the
 * server's reply (1: nothing listens on the port, 2: rejected, ...) is a
 * refusal, final at once: sending it again only delays the failure to the
 * connect timeout (a killed server then cost every connect its whole
 * timeout). */
static bool cm_gave_up(const struct rdma_cm_event *ev)
{
    return ev->event == RDMA_CM_EVENT_UNREACHABLE &&
           (ev->status == -ETIMEDOUT || ev->status == ETIMEDOUT);
}

/* One connect request (SIDR) on a fresh CM id, answered within wait_ms.
 * Returns the peer, or NULL with *retry set when no answer came in time
 * (the request or its answer may have been lost: worth sending again). */
static struct mcr_udep_peer *connect_attempt(struct mcr_udep_ctx *ctx, const char *host,
                                             uint16_t port, int wait_ms, bool *retry, char *err,
                                             size_t errlen)
{
    struct rdma_cm_id *id;
    struct mcr_udep_peer *peer = NULL;
    *retry = false;
    if (rdma_create_id(ctx->ch, &id, ctx, RDMA_PS_UDP) != 0) {
        mcr_rdma_set_err(err, errlen, "RDMA CM: %s", strerror(errno));
        return NULL;
    }
    uint64_t deadline = udep_now_us() + (uint64_t)wait_ms * 1000u;
    if (mcr_rdma_resolve(ctx->ch, id, host, port, wait_ms, true, err, errlen) != 0)
        goto out;
    if (id->verbs != ctx->dev.verbs) {
        mcr_rdma_set_err(err, errlen, "%s is reached through another device", host);
        goto out;
    }
    /* the peer's slot and id are chosen first, its layer opened on answer;
     * each attempt takes a new id, so datagrams of a peer the server made
     * from an earlier, unanswered attempt are dropped as an unknown peer's */
    uint32_t conn_id = (udep_rng_next(ctx) << 16) | udep_free_slot(ctx), isn = udep_rng_next(ctx);
    uint8_t priv[UDEP_PD_LEN];
    local_pd(ctx, conn_id, isn, priv);
    struct rdma_conn_param param = {
        .private_data = priv, .private_data_len = UDEP_PD_LEN, .qp_num = ctx->qp->qp_num};
    if (rdma_connect(id, &param) != 0) {
        mcr_rdma_set_err(err, errlen, "rdma_connect: %s", strerror(errno));
        goto out;
    }
    for (;;) {
        struct rdma_cm_event *ev;
        uint64_t now = udep_now_us();
        if (now >= deadline ||
            mcr_rdma_wait_cm_event(ctx->ch, (int)((deadline - now) / 1000u), &ev) != 0) {
            mcr_rdma_set_err(err, errlen, "%s:%u: no answer", host, port);
            *retry = true;
            goto out;
        }
        if (ev->id != id) {
            udep_handle_cm_event(ctx, ev);
            continue;
        }
        if (ev->event != RDMA_CM_EVENT_ESTABLISHED) {
            *retry = cm_gave_up(ev);
            bool refused = ev->event == RDMA_CM_EVENT_UNREACHABLE && !*retry;
            mcr_rdma_set_err(err, errlen, "%s:%u: %s%s (status %d)", host, port,
                             refused ? "refused by the server: " : "", rdma_event_str(ev->event),
                             ev->status);
            rdma_ack_cm_event(ev);
            goto out;
        }
        struct udep_pd remote;
        const struct ibv_ah_attr *aa = &ev->param.ud.ah_attr;
        if (pd_decode(ev->param.ud.private_data, ev->param.ud.private_data_len, &remote) != 0 ||
            ev->param.ud.qkey != RDMA_UDP_QKEY) {
            mcr_rdma_set_err(err, errlen, "%s:%u: not a UD endpoint of ours", host, port);
            rdma_ack_cm_event(ev);
            goto out;
        }
        remote.qpn = ev->param.ud.qp_num;
        peer = udep_peer_new(ctx, conn_id, isn, &remote, aa->grh.dgid.raw);
        if (peer != NULL &&
            (peer->ah = ibv_create_ah(ctx->dev.pd, (struct ibv_ah_attr *)aa)) == NULL) {
            udep_peer_free(peer);
            peer = NULL;
        }
        rdma_ack_cm_event(ev);
        if (peer == NULL)
            mcr_rdma_set_err(err, errlen, "%s:%u: cannot set up the peer: %s", host, port,
                             strerror(errno));
        break;
    }
out:
    rdma_destroy_id(id);
    return peer;
}

/* The kernel's CM sends a UD connect request again only after about 4 s,
 * as long as a whole default connect timeout: on a network that loses a
 * datagram the request is sent again here, on a fresh id, every second
 * (four tries in the default 4 s) until timeout_ms is used up; the last
 * try waits for all that is left. */
#define UDEP_CONNECT_RESEND_MS 1000

struct mcr_udep_peer *mcr_udep_connect(struct mcr_udep_ctx *ctx, const char *host, uint16_t port,
                                       int timeout_ms, char *err, size_t errlen)
{
    uint64_t deadline = udep_now_us() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000u;
    const int wait_ms = UDEP_CONNECT_RESEND_MS;
    for (;;) {
        uint64_t now = udep_now_us();
        int left = now < deadline ? (int)((deadline - now) / 1000u) : 0;
        /* the last attempt takes all that is left rather than a sliver */
        int this_wait = left < 2 * wait_ms ? left : wait_ms;
        if (this_wait <= 0) {
            mcr_rdma_set_err(err, errlen, "%s:%u: no answer", host, port);
            return NULL;
        }
        bool retry;
        struct mcr_udep_peer *peer =
            connect_attempt(ctx, host, port, this_wait, &retry, err, errlen);
        if (peer != NULL || !retry)
            return peer;
        ctx->st.connect_resends++;
    }
}
