/* transport_rdma_grant.h: one region of the client's memory opened to its
 * server for one transfer, and closed when that transfer ends (the RDMA
 * transport's landing buffer, request buffer and iget buffers). The rule it
 * serves: a client exposes memory to a server only for the transfer it
 * advertised.
 *
 * With memory windows (the device binds type 2 windows): the memory is
 * registered without remote access (MCR_RDMA_ACCESS_WINDOW), and a window
 * is bound over exactly the advertised range, for this connection's QP
 * only, under a new rkey; closing posts its invalidation, and the grant is
 * idle once that completed. Without: a registration with remote access is
 * made when the grant opens and dropped when it closes (idle at once).
 * Either way an rkey a server learned reaches nothing after its transfer. */
#ifndef LMR_TRANSPORT_RDMA_GRANT_H
#define LMR_TRANSPORT_RDMA_GRANT_H

#include "config.h"

#ifdef HAVE_RDMA

#include <stdbool.h>
#include <stdint.h>

#include "rdma/endpoint.h"
#include "rdma/mr.h"

struct lmr_grant {
    struct ibv_mw *mw;          /* with windows: allocated at first use */
    struct mcr_rdma_region reg; /* without: the transfer's registration */
    uint32_t rkey;
    bool open;    /* the rkey reaches memory (or will, once the bind is posted) */
    bool closing; /* its invalidation is posted and has not completed */
};

/* Opens [addr, addr+len) with `access` (MCR_RDMA_ACCESS_REMOTE_*): with
 * windows (window_mr: a registration covering it made with
 * MCR_RDMA_ACCESS_WINDOW) through ep, in order with its sends; without
 * (window_mr NULL) by registering it with the protection domain pd. The
 * rkey is g->rkey. The grant must be idle. 0 or a negative errno. */
int lmr_grant_open(struct lmr_grant *g, struct mcr_rdma_ep *ep, struct ibv_pd *pd,
                   struct ibv_mr *window_mr, void *addr, uint32_t len, unsigned access);
/* Ends the grant's rkey: a window's invalidation is posted (the grant
 * stays `closing` until lmr_grant_closed; on a connection that cannot take
 * it any more, failing, the window is freed instead), a registration is
 * dropped now. Nothing when it is not open. */
void lmr_grant_close(struct lmr_grant *g, struct mcr_rdma_ep *ep);
/* on_rdma_done of an invalidation: cookie is the grant. */
void lmr_grant_closed(struct lmr_grant *g);
static inline bool lmr_grant_idle(const struct lmr_grant *g)
{
    return !g->open && !g->closing;
}
/* The connection is gone (its QP takes no remote access any more): frees
 * the window and the registration; the grant is idle. */
void lmr_grant_drop(struct lmr_grant *g);

#endif
#endif
