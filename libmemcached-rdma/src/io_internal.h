/* io_internal.h: what the request pipeline's files (io.c, io_send.c,
 * io_recv.c, io_wait.c) share. Not included elsewhere. */
#ifndef LMR_IO_INTERNAL_H
#define LMR_IO_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "io.h"

static inline bool lmr_io_awaiting_reply(const memcached_instance_st *srv)
{
    return srv->head != NULL && srv->head != srv->send_next;
}

/* The transport moves the connection (transport.h: switching): the old
 * transport's last bytes and end are read even when no reply is awaited. */
static inline bool lmr_io_switching(const memcached_instance_st *srv)
{
    return srv->conn.ops != NULL && srv->conn.ops->switching != NULL &&
           srv->conn.ops->switching(&srv->conn);
}

static inline bool lmr_io_wants_input(const memcached_instance_st *srv)
{
    return lmr_io_awaiting_reply(srv) || lmr_io_switching(srv);
}

static inline bool lmr_io_window_allows(const memcached_instance_st *srv,
                                        const memcached_request_st *req, uint32_t extra)
{
    if (req->sent > 0 || !req->expects_reply)
        return true;
    return srv->in_window + extra < srv->client->behaviors.request_window;
}

/* io.c */
void lmr_io_complete(memcached_instance_st *srv, memcached_request_st *req, memcached_return_t rc);
const char *lmr_io_transport_why(const memcached_instance_st *srv, const char *otherwise);
bool lmr_io_finish_connecting(memcached_instance_st *srv);
/* The transport opened a new server connection under the same one (a
 * move, transport.h: switching; a renewal, renew): authenticated anew when
 * the client uses SASL. Returns false if the server failed. */
bool lmr_io_authenticate_anew(memcached_instance_st *srv);
/* io_send.c */
bool lmr_io_send_some(memcached_instance_st *srv);
/* io_recv.c */
bool lmr_io_receive_some(memcached_instance_st *srv);
/* io_wait.c */
void lmr_io_pump(memcached_instance_st *srv, bool receive);

#endif
