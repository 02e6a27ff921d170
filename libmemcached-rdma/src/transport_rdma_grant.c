/* transport_rdma_grant.c: regions of the client's memory open to its
 * server for one transfer each (see transport_rdma_grant.h). */
#include "transport_rdma_grant.h"

#ifdef HAVE_RDMA

#include <errno.h>

int lmr_grant_open(struct lmr_grant *g, struct mcr_rdma_ep *ep, struct ibv_pd *pd,
                   struct ibv_mr *window_mr, void *addr, uint32_t len, unsigned access)
{
    if (!lmr_grant_idle(g) || ep == NULL)
        return -EINVAL;
    if (window_mr == NULL) {
        int rc = mcr_rdma_region_register(pd, addr, len, access, &g->reg);
        if (rc != 0)
            return rc;
        g->rkey = g->reg.mr->rkey;
        g->open = true;
        return 0;
    }
    if (g->mw == NULL && (g->mw = mcr_rdma_window_alloc(pd)) == NULL)
        return errno ? -errno : -ENOMEM;
    int rc = mcr_rdma_ep_bind_window(ep, g->mw, window_mr, addr, len, access, &g->rkey, NULL);
    if (rc != 0)
        return rc;
    g->open = true;
    return 0;
}

void lmr_grant_close(struct lmr_grant *g, struct mcr_rdma_ep *ep)
{
    if (!g->open)
        return;
    g->open = false;
    if (g->reg.mr != NULL) {
        mcr_rdma_region_deregister(&g->reg);
        return;
    }
    if (ep != NULL && mcr_rdma_ep_invalidate_window(ep, g->rkey, g) == 0) {
        g->closing = true;
        return;
    }
    /* a connection that cannot take the invalidation is failing (its QP
     * takes no remote access): the window goes now, so that the
     * registration it lies in can go too */
    mcr_rdma_window_free(g->mw);
    g->mw = NULL;
}

void lmr_grant_closed(struct lmr_grant *g)
{
    g->closing = false;
}

void lmr_grant_drop(struct lmr_grant *g)
{
    mcr_rdma_window_free(g->mw); /* before the registration it lies in */
    g->mw = NULL;
    mcr_rdma_region_deregister(&g->reg);
    g->open = g->closing = false;
}

#endif
