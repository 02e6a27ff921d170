/* transport_rdma.h: the RDMA transport table (transport_rdma.c), present
 * when the library is built with rdma-core; servers given as
 * rdma+rc://host:port (MEMCACHED_CONNECTION_RDMA_RC) and rdma://host:port
 * (MEMCACHED_CONNECTION_RDMA, unless the server refuses RC) use it. */
#ifndef LMR_TRANSPORT_RDMA_H
#define LMR_TRANSPORT_RDMA_H

#include "transport.h"

#ifdef HAVE_RDMA
extern const struct lmr_transport_ops lmr_transport_rdma;
#endif

#endif
