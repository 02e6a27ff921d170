/* transport_rdma_move.c: opening an rdma:// connection over RC or UD as
 * the server chooses, and moving it to the other transport once both END
 * marks passed (transport_rdma_move.h). */
#include "transport_rdma_move.h"

#ifdef HAVE_RDMA

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mcr/rdma_wire.h"
#include "transport_rdma.h"
#include "transport_ud.h"

void lmr_rdma_move_init(struct lmr_rdma_move *m, const struct lmr_endpoint *ep)
{
    memset(m, 0, sizeof(*m));
    m->movable = ep->movable;
    m->ep = *ep;
    snprintf(m->host, sizeof(m->host), "%s", ep->hostname);
    m->ep.hostname = m->host;
}

memcached_return_t lmr_rdma_follow_open(struct lmr_conn *conn, const struct lmr_endpoint *ep,
                                        bool ud_first, int *sys_errno)
{
    struct lmr_endpoint follow = *ep;
    follow.movable = true;
    if (ud_first)
        return lmr_transport_ud.open(conn, &follow, sys_errno);
    memcached_return_t rc = lmr_transport_rdma.open(conn, &follow, sys_errno);
    if (rc == MEMCACHED_CONNECTION_FAILURE && *sys_errno == ECONNREFUSED)
        rc = lmr_transport_ud.open(conn, &follow, sys_errno);
    return rc;
}

ssize_t lmr_rdma_move_finish(struct lmr_conn *conn, const struct lmr_rdma_move *m)
{
    struct lmr_rdma_move move = *m; /* the old transport's state goes with close */
    move.ep.hostname = move.host;
    conn->ops->close(conn);
    int sys_errno = 0;
    memcached_return_t rc =
        lmr_rdma_follow_open(conn, &move.ep, move.to == MCR_RDMA_MOVE_TO_UD, &sys_errno);
    /* the server serves UD (it moved us from or to it): an RC connect that
     * failed otherwise than by a refusal (timed out) goes there too */
    if (rc != MEMCACHED_SUCCESS && move.to == MCR_RDMA_MOVE_TO_RC && sys_errno != ECONNREFUSED)
        rc = lmr_rdma_follow_open(conn, &move.ep, true, &sys_errno);
    if (rc != MEMCACHED_SUCCESS) {
        errno = sys_errno != 0 ? sys_errno : ECONNRESET;
        return -1;
    }
    errno = EAGAIN;
    return -1;
}

#endif
