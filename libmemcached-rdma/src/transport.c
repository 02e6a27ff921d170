/* transport.c: what is common to the transports: which one reaches a
 * server of a given kind, reading a transport's numeric settings from the
 * environment, and recording why a connection failed (conn->why). The
 * transports themselves live in transport_sock.c, transport_tls.c,
 * transport_rdma.c and transport_ud.c. */
#include "transport.h"

#include "config.h"
#include "transport_rdma.h"
#include "transport_rdma_move.h"
#include "transport_ud.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef HAVE_RDMA
/* rdma://host:port follows the server's choice: RC, or UD on the same port
 * when the server refuses RC (its RC connections are at -o rdma_rc_max, or
 * it serves UD only: rdma_reject, or no RC listener). A server that does
 * not answer (ETIMEDOUT) is not asked again over UD. Each connect asks for
 * RC first, so a client reconnecting after RC slots freed gets RC; the
 * server may move it between the two later (transport_rdma_move.h). */
static memcached_return_t rdma_follow_open(struct lmr_conn *conn, const struct lmr_endpoint *ep,
                                           int *sys_errno)
{
    return lmr_rdma_follow_open(conn, ep, false, sys_errno);
}

/* Only open: it installs the table of the transport it connected with
 * (conn->ops), which the pipeline uses from then on. */
static const struct lmr_transport_ops transport_rdma_follow = {.name = "rdma",
                                                               .open = rdma_follow_open};
#endif

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
        return &transport_rdma_follow;
    case MEMCACHED_CONNECTION_RDMA_RC:
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

void lmr_conn_note_why(struct lmr_conn *conn, const char *fmt, ...)
{
    if (conn->why[0] != '\0')
        return; /* the first cause stands: what follows is its consequence */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(conn->why, sizeof(conn->why), fmt, ap);
    va_end(ap);
}
