/* io_send.c: the request pipeline's sending (see io.c): a server's queued
 * requests go to its transport in batches, within the window, small ones
 * copied into one send; and the transports' push and drain. */
#include "io_internal.h"

#include <errno.h>
#include <string.h>

#include "mcr/iov_gather.h"

#define LMR_IOV_BATCH 256
/* Requests whose pieces (head, value, tail) add up to at most this many bytes
 * are copied into one buffer and sent with a single plain send (unless the
 * transport copies them anyway: copies_on_send). */
#define LMR_COALESCE_MAX 4608

static int poll_timeout_ms(const struct lmr_client *c)
{
    int timeout = c->behaviors.poll_timeout_ms; /* negative: no limit */
    return timeout < 0 ? INT32_MAX : timeout;
}

void lmr_io_drain_all(struct lmr_client *c)
{
    int64_t deadline = lmr_io_now_ms() + poll_timeout_ms(c);
    for (uint32_t i = 0; i < c->server_count; i++) {
        memcached_instance_st *srv = c->servers[i];
        if (srv->conn.ops == NULL || srv->conn.ops->drain == NULL || srv->connecting)
            continue;
        int64_t left = deadline - lmr_io_now_ms();
        srv->conn.ops->drain(&srv->conn, left < 0 ? 0 : (int)left);
    }
}

void lmr_io_push_all(struct lmr_client *c)
{
    int64_t deadline = -1; /* set by the first transport that waits */
    for (uint32_t i = 0; i < c->server_count; i++) {
        memcached_instance_st *srv = c->servers[i];
        if (srv->conn.ops == NULL || srv->conn.ops->push == NULL || srv->connecting)
            continue;
        srv->conn.ops->push(&srv->conn, &deadline, poll_timeout_ms(c));
    }
}

static int add_piece(struct iovec *iov, int n, const char *base, size_t len, size_t *skip)
{
    if (len == 0)
        return n;
    if (*skip >= len) {
        *skip -= len;
        return n;
    }
    iov[n].iov_base = (void *)(base + *skip);
    iov[n].iov_len = len - *skip;
    *skip = 0;
    return n + 1;
}

/* Writes queued bytes until the socket would block or the window is full.
 * Returns false if the server failed. */
bool lmr_io_send_some(memcached_instance_st *srv)
{
    srv->deferred = 0; /* everything queued is offered now */
    srv->deferred_bytes = 0;
    while (srv->send_next != NULL && srv->conn.ops != NULL) {
        /* between two whole requests, a transport that moves holds them */
        if (srv->send_next->sent == 0 && srv->conn.ops->hold_sends != NULL &&
            srv->conn.ops->hold_sends(&srv->conn))
            return true;
        /* nothing awaited: a transport may open a new server connection,
         * which logs in before the request goes */
        if (srv->send_next->sent == 0 && srv->send_next == srv->head &&
            srv->conn.ops->renew != NULL && srv->conn.ops->renew(&srv->conn) &&
            !lmr_io_authenticate_anew(srv))
            return false;
        struct iovec iov[LMR_IOV_BATCH];
        int n = 0;
        uint32_t starting = 0;
        for (memcached_request_st *r = srv->send_next; r != NULL && n <= LMR_IOV_BATCH - 3;
             r = r->next) {
            if (!lmr_io_window_allows(srv, r, starting))
                break;
            if (r->sent == 0 && r->expects_reply)
                starting++;
            /* a value buffer is named by the request's binary opaque */
            if (r->sent == 0 && r->kind == LMR_OP_GET && r->sink == LMR_SINK_USER &&
                !r->value_offered && srv->conn.ops->offer_value_buffer != NULL &&
                srv->client->behaviors.binary_protocol)
                r->value_offered = srv->conn.ops->offer_value_buffer(
                    &srv->conn, r->opaque, r->user_buffer, r->user_capacity);
            size_t skip = r->sent;
            n = add_piece(iov, n, r->head, r->head_length, &skip);
            n = add_piece(iov, n, r->body, r->body_length, &skip);
            n = add_piece(iov, n, r->tail, r->tail_length, &skip);
        }
        if (n == 0)
            return true;
        char stage[LMR_COALESCE_MAX];
        if (n > 1 && !srv->conn.ops->copies_on_send) {
            size_t total = mcr_iov_bytes_upto(iov, n, sizeof(stage));
            if (total <= sizeof(stage)) {
                mcr_iov_gather(iov, n, stage, total);
                iov[0].iov_base = stage;
                iov[0].iov_len = total;
                n = 1;
            }
        }
        ssize_t written = srv->conn.ops->send(&srv->conn, iov, n);
        if (written < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                srv->send_backlog = true;
                return true;
            }
            lmr_io_fail_server(srv, MEMCACHED_WRITE_FAILURE,
                               lmr_io_transport_why(srv, strerror(errno)));
            return false;
        }
        if (written > 0 && srv->send_backlog)
            srv->progress++; /* the server drains what its socket had refused */
        size_t offered = 0;
        for (int i = 0; i < n; i++)
            offered += iov[i].iov_len;
        srv->send_backlog = (size_t)written < offered;
        size_t left = (size_t)written;
        while (left > 0 && srv->send_next != NULL) {
            memcached_request_st *r = srv->send_next;
            if (r->sent == 0 && r->expects_reply) {
                r->counted = true;
                srv->in_window++;
            }
            size_t remaining = lmr_request_wire_length(r) - r->sent;
            size_t take = left < remaining ? left : remaining;
            r->sent += take;
            left -= take;
            if (r->sent < lmr_request_wire_length(r))
                break;
            srv->send_next = r->next;
            if (!r->expects_reply)
                lmr_io_complete(srv, r, MEMCACHED_SUCCESS);
        }
    }
    return true;
}
