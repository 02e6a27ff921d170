/* transport.c: what is common to the transports: which one reaches a
 * server of a given kind, and reading a transport's numeric settings from
 * the environment. The transports themselves live in transport_sock.c,
 * transport_tls.c, transport_rdma.c and transport_ud.c. */
#include "transport.h"

#include "config.h"
#include "transport_rdma.h"
#include "transport_ud.h"

#include <stdlib.h>

const struct lmr_transport_ops *lmr_transport_for(memcached_connection_t type)
{
    switch (type) {
    case MEMCACHED_CONNECTION_TCP:
    case MEMCACHED_CONNECTION_UNIX_SOCKET:
        return &lmr_transport_socket;
    case MEMCACHED_CONNECTION_TLS:
        return &lmr_transport_tls;
#ifdef HAVE_RDMA
    case MEMCACHED_CONNECTION_RDMA:
        return &lmr_transport_rdma;
    case MEMCACHED_CONNECTION_RDMA_UD:
        return &lmr_transport_ud;
#endif
    default:
        return NULL;
    }
}

unsigned lmr_env_unsigned(const char *env_name, unsigned max, unsigned default_value)
{
    const char *v = getenv(env_name);
    if (v == NULL || *v == '\0')
        return default_value;
    char *end;
    unsigned long n = strtoul(v, &end, 10);
    return *end == '\0' && n <= max ? (unsigned)n : default_value;
}
