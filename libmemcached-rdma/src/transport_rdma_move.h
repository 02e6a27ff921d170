/* transport_rdma_move.h: an rdma:// connection follows the server's
 * choice between RC and UD: it opens RC, or UD when the server refuses RC,
 * and moves between them when the server asks (rdma_transport=hybrid:
 * include/mcr/rdma_wire.h has the MOVE and END marks, doc/rdma-hybrid.md
 * "Promotion and demotion"). The transports keep a struct lmr_rdma_move
 * per connection and call lmr_rdma_move_finish when the old stream ended
 * with the server's END. */
#ifndef LMR_TRANSPORT_RDMA_MOVE_H
#define LMR_TRANSPORT_RDMA_MOVE_H

#include "config.h"

#include <stdbool.h>
#include <stdint.h>

#include <libmemcached/memcached.h>

#include "transport.h"

#ifdef HAVE_RDMA

struct lmr_rdma_move {
    bool movable;           /* follows the server (the endpoint's movable) */
    uint8_t to;             /* enum mcr_rdma_move_to the server asked for; 0: none */
    bool end_sent;          /* our END went: nothing more on this transport */
    bool server_end;        /* the server's END came: after the bytes in hand, the end */
    struct lmr_endpoint ep; /* to open the other transport with */
    char host[MEMCACHED_NI_MAXHOST];
};

/* Notes the endpoint (a copy) for a later move. */
void lmr_rdma_move_init(struct lmr_rdma_move *m, const struct lmr_endpoint *ep);
/* Opens rdma://: RC first, UD when the server refuses RC (ECONNREFUSED),
 * or UD only when ud_first. */
memcached_return_t lmr_rdma_follow_open(struct lmr_conn *conn, const struct lmr_endpoint *ep,
                                        bool ud_first, int *sys_errno);
/* recv of a transport whose old stream ended with the server's END, all
 * of its bytes read: closes it and opens the one the server named. Returns
 * recv's answer: -1 with EAGAIN (moved: the pipeline sends the held
 * requests next) or another errno (the new transport could not be opened;
 * the server fails as on a lost connection). */
ssize_t lmr_rdma_move_finish(struct lmr_conn *conn, const struct lmr_rdma_move *m);

#endif
#endif
