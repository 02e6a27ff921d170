/* io.c: the request pipeline's engine (see io.h). One server = one
 * connection and one FIFO of requests: [head, send_next) are on the wire
 * awaiting replies, [send_next, tail] are waiting to be sent. Replies come in
 * issue order, so the parser always completes the head. A window caps the
 * reply-expecting requests on the wire per server. A request issued while
 * others on its server await replies is held at send_next until the next
 * pump, so a burst of requests costs one send. Waiting is a poll() loop
 * over every server with work; no progress for POLL_TIMEOUT fails the
 * servers still owing replies with MEMCACHED_TIMEOUT.
 * This file queues, connects, completes and fails; io_send.c sends,
 * io_recv.c receives and places values, io_wait.c polls and waits. */
#include "io_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "group.h"
#include "sasl.h"

/* A request issued while earlier ones on its server await replies waits
 * (at send_next) for the next flush: any test, wait or blocking call, or
 * this many deferred bytes, or the window filling up. */
#define LMR_DEFER_BYTES_MAX 65536

int64_t lmr_io_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static time_t now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

/* A connect failed: reads take the server as an erasure (group.c). */
static void note_connect_failed(memcached_instance_st *srv)
{
    srv->connect_failed = true;
    srv->connect_failed_ms = lmr_io_now_ms();
}

/* A connect, or its handshake, returned to the caller: the time it took
 * (up to CONNECT_TIMEOUT where it blocks: RDMA's connect, TLS's handshake,
 * SASL) is not silence of the servers (run_until). */
static void note_connect_returned(memcached_instance_st *srv)
{
    srv->client->connect_returned_ms = lmr_io_now_ms();
}

static void unlink_request(memcached_instance_st *srv, memcached_request_st *req)
{
    if (srv->send_next == req)
        srv->send_next = req->next;
    if (req->prev != NULL)
        req->prev->next = req->next;
    else
        srv->head = req->next;
    if (req->next != NULL)
        req->next->prev = req->prev;
    else
        srv->tail = req->prev;
    req->prev = req->next = NULL;
    srv->queued--;
    if (req->counted) {
        srv->in_window--;
        req->counted = false;
    }
}

void lmr_io_complete(memcached_instance_st *srv, memcached_request_st *req, memcached_return_t rc)
{
    if (req->value_offered && srv->conn.ops != NULL)
        srv->conn.ops->release_value_buffer(&srv->conn, req->opaque);
    req->value_offered = false;
    unlink_request(srv, req);
    srv->progress++;
    req->server = NULL;
    req->rc = rc;
    req->state = LMR_STATE_DONE;
    if (req->kind == LMR_OP_MGET && req->client->fetch.pending_requests > 0)
        req->client->fetch.pending_requests--;
    if (req->group != NULL) { /* a child: its group decides, later */
        lmr_group_child_done(req);
        return;
    }
    if (req->detached) {
        lmr_request_release(req);
        free(req);
    }
}

void lmr_io_complete_head(memcached_instance_st *srv, memcached_return_t rc)
{
    if (srv->head != NULL)
        lmr_io_complete(srv, srv->head, rc);
}

static void reset_receive(memcached_instance_st *srv)
{
    srv->rstart = srv->rend = 0;
    if (srv->body.fetched != NULL)
        lmr_fetched_free(srv->body.fetched);
    memset(&srv->body, 0, sizeof(srv->body));
}

void lmr_io_close(memcached_instance_st *srv)
{
    if (srv->conn.ops != NULL)
        srv->conn.ops->close(&srv->conn);
    srv->conn.ops = NULL;
    srv->conn.fd = -1;
    srv->connecting = false;
    srv->deferred = 0;
    srv->deferred_bytes = 0;
    srv->send_backlog = false;
    reset_receive(srv);
}

/* A failure takes the server out of service for RETRY_TIMEOUT and counts
 * towards SERVER_FAILURE_LIMIT. A timeout or a failed connect (`timed_out`)
 * does so only once SERVER_TIMEOUT_LIMIT of them came in a row (no reply in
 * between); before that the next request simply reconnects. */
static void note_failure(memcached_instance_st *srv, bool timed_out)
{
    const struct lmr_behaviors *b = &srv->client->behaviors;
    if (timed_out && ++srv->timeout_count < b->server_timeout_limit)
        return;
    srv->failure_count++;
    srv->next_retry = now_seconds() + (time_t)b->retry_timeout_s;
    if (b->remove_failed_servers && srv->failure_count >= b->server_failure_limit &&
        !srv->ejected) {
        srv->ejected = true;
        if (b->dead_timeout_s > 0)
            srv->next_retry = now_seconds() + (time_t)b->dead_timeout_s;
        lmr_client_redistribute(srv->client);
    }
}

/* Why the transport says the connection failed (transport.h: why), else
 * `otherwise` (errno's text, the end of the stream). */
const char *lmr_io_transport_why(const memcached_instance_st *srv, const char *otherwise)
{
    return srv->conn.why[0] != '\0' ? srv->conn.why : otherwise;
}

void lmr_io_fail_server(memcached_instance_st *srv, memcached_return_t rc, const char *why)
{
    bool timed_out = rc == MEMCACHED_TIMEOUT || srv->connecting;
    if (srv->connecting && rc != MEMCACHED_SUCCESS)
        note_connect_failed(srv);
    lmr_io_close(srv);
    snprintf(srv->error_message, sizeof(srv->error_message), "%.120s:%u: %.127s", srv->hostname,
             (unsigned)srv->port, why);
    if (rc != MEMCACHED_SUCCESS) {
        srv->error_rc = rc;
        srv->client->last_disconnected = srv;
        /* also the client's last error, as libmemcached records a server's:
         * requests waited for without a call of their own (memcached_wait,
         * memcached_wait_all) have no other place to say why they failed */
        lmr_client_result(srv->client, rc, srv->error_message);
    }
    /* every queued request completes exactly once, in issue order */
    while (srv->head != NULL)
        lmr_io_complete(srv, srv->head, rc);
    if (rc != MEMCACHED_SUCCESS)
        note_failure(srv, timed_out);
}

/* A connection whose SASL exchange failed: closed, and the server noted as
 * failing with the exchange's code. */
static void fail_authentication(memcached_instance_st *srv, memcached_return_t rc)
{
    lmr_io_close(srv);
    snprintf(srv->error_message, sizeof(srv->error_message), "%.120s:%u: SASL: %.100s",
             srv->hostname, (unsigned)srv->port, memcached_strerror(NULL, rc));
    srv->error_rc = rc;
    srv->client->last_disconnected = srv;
}

bool lmr_io_connect_allowed(const memcached_instance_st *srv)
{
    return srv->next_retry == 0 || now_seconds() >= srv->next_retry;
}

bool lmr_io_connects_in_background(const memcached_instance_st *srv)
{
    const struct lmr_transport_ops *transport = lmr_transport_for(srv->type);
    return transport != NULL && transport->finish_open != NULL;
}

static memcached_return_t ensure_connected(memcached_instance_st *srv)
{
    if (srv->conn.ops != NULL)
        return MEMCACHED_SUCCESS;
    if (!lmr_io_connect_allowed(srv))
        return srv->ejected ? MEMCACHED_SERVER_MARKED_DEAD : MEMCACHED_SERVER_TEMPORARILY_DISABLED;
    const struct lmr_behaviors *b = &srv->client->behaviors;
    struct lmr_endpoint ep = {
        .hostname = srv->hostname,
        .port = srv->port,
        .unix_socket = srv->type == MEMCACHED_CONNECTION_UNIX_SOCKET,
        .connect_timeout_ms = b->connect_timeout_ms,
        .tcp_nodelay = b->tcp_nodelay,
        .tcp_keepalive = b->tcp_keepalive,
        .send_buffer_size = (int)b->socket_send_size,
        .recv_buffer_size = (int)b->socket_recv_size,
        .snd_timeout_us = b->snd_timeout_us,
        .rcv_timeout_us = b->rcv_timeout_us,
        .shared = &srv->client->rdma_shared,
    };
    for (uint32_t i = 0; i < srv->client->server_count; i++)
        if (srv->client->servers[i]->type == srv->type)
            ep.shared_peers++;
    int sys_errno = 0;
    srv->conn.fd = -1;
    srv->conn.why[0] = '\0';
    const struct lmr_transport_ops *transport = lmr_transport_for(srv->type);
    if (transport == NULL)
        return MEMCACHED_NOT_SUPPORTED;
    memcached_return_t rc = transport->open(&srv->conn, &ep, &sys_errno);
    note_connect_returned(srv);
    if (rc == MEMCACHED_IN_PROGRESS && transport->finish_open != NULL) {
        /* finished by lmr_io_finish_connecting() from the poll loop */
        srv->connecting = true;
        srv->connect_deadline_ms = lmr_io_now_ms() + b->connect_timeout_ms;
        reset_receive(srv);
        return MEMCACHED_SUCCESS;
    }
    if (rc == MEMCACHED_IN_PROGRESS) { /* not allowed without finish_open */
        transport->close(&srv->conn);
        rc = MEMCACHED_CONNECTION_FAILURE;
    }
    if (rc != MEMCACHED_SUCCESS) {
        snprintf(srv->error_message, sizeof(srv->error_message), "%.120s:%u: connect: %.118s",
                 srv->hostname, (unsigned)srv->port,
                 lmr_io_transport_why(srv, sys_errno ? strerror(sys_errno) : "failed"));
        srv->client->last_errno = sys_errno;
        srv->error_rc = rc;
        srv->client->last_disconnected = srv;
        note_connect_failed(srv);
        note_failure(srv, true);
        return rc;
    }
    srv->next_retry = 0;
    srv->connect_failed = false;
    reset_receive(srv);
    if (lmr_sasl_wanted(srv->client)) {
        rc = lmr_sasl_authenticate(srv);
        note_connect_returned(srv);
        if (rc != MEMCACHED_SUCCESS) {
            fail_authentication(srv, rc);
            return rc;
        }
    }
    return MEMCACHED_SUCCESS;
}

/* A held request waits for the next flush, so a small one takes a copy of
 * its borrowed value and tail (into its inline head): a caller that reuses
 * the value's buffer right after issuing still sends what it passed, as when
 * every request went out at once. Larger values stay zero-copy. */
static void copy_small_body(memcached_request_st *req)
{
    size_t total = lmr_request_wire_length(req);
    if (req->body_length == 0 || req->body_copy != NULL || req->head != req->head_inline ||
        total > LMR_HEAD_INLINE)
        return;
    memcpy(req->head + req->head_length, req->body, req->body_length);
    if (req->tail_length > 0)
        memcpy(req->head + req->head_length + req->body_length, req->tail, req->tail_length);
    req->head_length = total;
    req->body = req->tail = NULL;
    req->body_length = req->tail_length = 0;
}

memcached_return_t lmr_io_issue(memcached_instance_st *srv, memcached_request_st *req)
{
    memcached_return_t rc = ensure_connected(srv);
    if (rc != MEMCACHED_SUCCESS) {
        req->rc = rc;
        req->state = LMR_STATE_DONE;
        if (req->detached) {
            lmr_request_release(req);
            free(req);
        }
        return rc;
    }
    req->server = srv;
    req->state = LMR_STATE_QUEUED;
    req->sent = 0;
    req->counted = false;
    req->next = NULL;
    req->prev = srv->tail;
    if (srv->tail != NULL)
        srv->tail->next = req;
    else
        srv->head = req;
    srv->tail = req;
    if (srv->send_next == NULL)
        srv->send_next = req;
    srv->queued++;
    if (req->kind == LMR_OP_MGET)
        srv->client->fetch.pending_requests++;
    if (srv->client->behaviors.buffer_requests)
        return MEMCACHED_SUCCESS;
    /* with replies outstanding, the next wait reads anyway: hold the request
     * so that many go out in one send (see LMR_DEFER_BYTES_MAX) */
    if (lmr_io_awaiting_reply(srv)) {
        copy_small_body(req);
        srv->deferred++;
        srv->deferred_bytes += lmr_request_wire_length(req);
        if (srv->deferred_bytes < LMR_DEFER_BYTES_MAX &&
            srv->in_window + srv->deferred < srv->client->behaviors.request_window)
            return MEMCACHED_SUCCESS;
    }
    /* send now; read replies only if sending is held up (a full window or
     * socket), so a blocking call reads once, when it waits */
    lmr_io_pump(srv, false);
    return MEMCACHED_SUCCESS;
}

/* Completes a connect under way, if it can. Returns true once connected;
 * fails the server when the connect fails or CONNECT_TIMEOUT passes. */
bool lmr_io_finish_connecting(memcached_instance_st *srv)
{
    if (!srv->connecting)
        return true;
    /* a socket's connect turns it writable, the RDMA connection manager's
     * answers readable */
    struct pollfd pfd = {.fd = srv->conn.ops->poll_fd(&srv->conn), .events = POLLOUT | POLLIN};
    memcached_return_t rc = MEMCACHED_IN_PROGRESS;
    int sys_errno = 0;
    if (poll(&pfd, 1, 0) > 0) {
        rc = srv->conn.ops->finish_open(&srv->conn, &sys_errno);
        if (rc != MEMCACHED_IN_PROGRESS)
            note_connect_returned(srv);
    }
    if (rc == MEMCACHED_SUCCESS) {
        srv->connecting = false;
        srv->connect_failed = false;
        if (lmr_sasl_wanted(srv->client)) {
            rc = lmr_sasl_authenticate(srv);
            note_connect_returned(srv);
            if (rc != MEMCACHED_SUCCESS) {
                lmr_io_fail_server(srv, rc, "SASL authentication failed");
                return false;
            }
        }
        return true;
    }
    if (rc == MEMCACHED_IN_PROGRESS && lmr_io_now_ms() < srv->connect_deadline_ms)
        return false;
    if (rc == MEMCACHED_IN_PROGRESS) {
        rc = MEMCACHED_TIMEOUT;
        sys_errno = ETIMEDOUT;
    }
    srv->client->last_errno = sys_errno;
    char why[128];
    snprintf(why, sizeof(why), "connect: %.100s", strerror(sys_errno));
    lmr_io_fail_server(srv, rc, why);
    return false;
}

bool lmr_io_authenticate_anew(memcached_instance_st *srv)
{
    if (!lmr_sasl_wanted(srv->client))
        return true;
    memcached_return_t rc = lmr_sasl_authenticate(srv);
    if (rc != MEMCACHED_SUCCESS) {
        lmr_io_fail_server(srv, rc, "SASL authentication failed");
        return false;
    }
    return true;
}
