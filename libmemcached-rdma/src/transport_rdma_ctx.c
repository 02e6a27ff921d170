/* transport_rdma_ctx.c: the substrate contexts a client shares among its
 * RDMA connections (transport_rdma_ctx.h): finding one with room or
 * creating one, attaching and detaching connections, and destroying a
 * context with its last connection. */
#include "transport_rdma_ctx.h"

#ifdef HAVE_RDMA

#include <stdio.h>
#include <stdlib.h>

#include "transport_rdma_stream.h"

static struct lmr_rdma_shared_ctx *create(const char *host, unsigned peers, int timeout_ms,
                                          char *err, size_t errlen)
{
    struct lmr_rdma_shared_ctx *sc = calloc(1, sizeof(*sc));
    if (sc == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    sc->capacity = peers < 1 ? 1 : peers > LMR_RDMA_CTX_CONNS_MAX ? LMR_RDMA_CTX_CONNS_MAX : peers;
    struct mcr_rdma_ctx_opts opts;
    mcr_rdma_ctx_opts_default(&opts);
    opts.addr = host;
    opts.addr_is_peer = true; /* the device our route to the server leaves through */
    /* each connection's credits, and one connection's worth for receives
     * waiting to be posted again and for sends waiting for credit */
    opts.recv_bufs = opts.send_bufs = LMR_RDMA_BUFS_PER_CONN * (sc->capacity + 1);
    opts.credits = LMR_RDMA_BUFS_PER_CONN;
    /* a server that returns no credits keeps at most this many send
     * buffers waiting; its further bytes wait in its stream */
    opts.ep_sends_waiting_max = LMR_RDMA_BUFS_PER_CONN;
    opts.resolve_timeout_ms = timeout_ms;
    /* 0: the RDMA CM's (rdma/ctx.h, ack_timeout) */
    opts.ack_timeout = (uint8_t)lmr_env_unsigned("LIBMEMCACHED_RDMA_ACK_TIMEOUT", 31, 0);
    sc->ctx = mcr_rdma_ctx_create(&opts, err, errlen);
    if (sc->ctx == NULL) {
        free(sc);
        return NULL;
    }
    return sc;
}

struct lmr_rdma_shared_ctx *lmr_rdma_ctx_acquire(void **slot, const char *host, unsigned peers,
                                                 int timeout_ms, bool fresh, struct rdma_stream *s,
                                                 char *err, size_t errlen)
{
    struct lmr_rdma_shared_ctx **tail = (struct lmr_rdma_shared_ctx **)slot;
    struct lmr_rdma_shared_ctx *sc = NULL;
    for (; *tail != NULL; tail = &(*tail)->next)
        if (!fresh && sc == NULL && (*tail)->users < (*tail)->capacity)
            sc = *tail;
    if (sc == NULL) {
        sc = create(host, peers, timeout_ms, err, errlen);
        if (sc == NULL)
            return NULL;
        sc->slot = slot;
        *tail = sc;
    }
    sc->users++;
    s->ctx_next = sc->streams;
    sc->streams = s;
    return sc;
}

void lmr_rdma_ctx_release(struct lmr_rdma_shared_ctx *sc, struct rdma_stream *s)
{
    for (struct rdma_stream **p = &sc->streams; *p != NULL; p = &(*p)->ctx_next)
        if (*p == s) {
            *p = s->ctx_next;
            break;
        }
    s->ctx_next = NULL;
    if (--sc->users > 0)
        return;
    for (struct lmr_rdma_shared_ctx **p = (struct lmr_rdma_shared_ctx **)sc->slot; *p != NULL;
         p = &(*p)->next)
        if (*p == sc) {
            *p = sc->next;
            break;
        }
    mcr_rdma_ctx_destroy(sc->ctx);
    free(sc);
}

#endif
