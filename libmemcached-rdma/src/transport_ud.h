/* transport_ud.h: the RDMA UD transport table (transport_ud.c), present
 * when the library is built with rdma-core; servers given as
 * rdma+ud://host:port (MEMCACHED_CONNECTION_RDMA_UD) use it, and
 * rdma://host:port when the server refuses RC. */
#ifndef LMR_TRANSPORT_UD_H
#define LMR_TRANSPORT_UD_H

#include "config.h"

#include "transport.h"

struct lmr_client;

#ifdef HAVE_RDMA
extern const struct lmr_transport_ops lmr_transport_ud;
/* Frees the client's UD context, after its servers were closed. */
void lmr_transport_ud_release(struct lmr_client *c);
#else
static inline void lmr_transport_ud_release(struct lmr_client *c)
{
    (void)c;
}
#endif

#endif
