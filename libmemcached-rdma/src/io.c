/* io.c: the request pipeline's engine (see io.h). One server = one
 * connection and one FIFO of requests: [head, send_next) are on the wire
 * awaiting replies, [send_next, tail] are waiting to be sent. Replies come in
 * issue order, so the parser always completes the head. A window caps the
 * reply-expecting requests on the wire per server. A request issued while
 * others on its server await replies is held at send_next until the next
 * pump, so a burst of requests costs one send. Waiting is a poll() loop
 * over every server with work; no progress for POLL_TIMEOUT fails the
 * servers still owing replies with MEMCACHED_TIMEOUT. */
#include "io.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcr/iov_gather.h"
#include "group.h"
#include "proto.h"
#include "sasl.h"

#define LMR_IOV_BATCH 256
#define LMR_RBUF_MIN 16384
#define LMR_DIRECT_RECV_MIN 8192
/* After a value of at least LMR_RBUF_MIN bytes, a read into an empty rbuf
 * while no value is arriving (or its prefix is not all in) takes at most
 * this many bytes: a reply's head (binary header, extras and key, or a text
 * VALUE line) and a group child's prefix, so that a large value's bytes go
 * straight to its destination (one read for the head, as one read of
 * LMR_RBUF_MIN was; the value's first bytes are not copied out of rbuf). */
#define LMR_HEAD_READ_MAX 512
/* A request issued while earlier ones on its server await replies waits
 * (at send_next) for the next flush: any test, wait or blocking call, or
 * this many deferred bytes, or the window filling up. */
#define LMR_DEFER_BYTES_MAX 65536
/* Requests whose pieces (head, value, tail) add up to at most this many bytes
 * are copied into one buffer and sent with a single plain send (unless the
 * transport copies them anyway: copies_on_send). */
#define LMR_COALESCE_MAX 4608
/* A client spinning for a reply makes no system call for this many rounds,
 * then reads the clock and yields every LMR_SPIN_CHECK_ROUNDS rounds. A
 * process that may run on one processor only checks from the first
 * LMR_SPIN_CHECK_ROUNDS: there a yield is how a server on the same machine
 * gets to run, and the scheduler ignores the yield of a thread that is owed
 * much time, which long spins build up. */
#define LMR_SPIN_QUIET_ROUNDS 4096
#define LMR_SPIN_CHECK_ROUNDS 256
/* Where a poll is itself a system call (sockets: a recv that does not
 * wait), 256 of them take a few hundred microseconds, past the whole
 * budget: the clock is read and the processor offered every this many
 * polls, from the first wait on. Without that a client spinning on a busy
 * machine kept a processor for milliseconds while the server thread that
 * would answer it (or another client's) waited for one. */
#define LMR_SPIN_SYSCALL_CHECK_ROUNDS 16

static void pump(memcached_instance_st *srv, bool receive);
static bool receive_some(memcached_instance_st *srv);

static bool awaiting_reply(const memcached_instance_st *srv)
{
    return srv->head != NULL && srv->head != srv->send_next;
}

/* The transport moves the connection (transport.h: switching): the old
 * transport's last bytes and end are read even when no reply is awaited. */
static bool switching(const memcached_instance_st *srv)
{
    return srv->conn.ops != NULL && srv->conn.ops->switching != NULL &&
           srv->conn.ops->switching(&srv->conn);
}

static bool wants_input(const memcached_instance_st *srv)
{
    return awaiting_reply(srv) || switching(srv);
}

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

static void complete(memcached_instance_st *srv, memcached_request_st *req, memcached_return_t rc)
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
        complete(srv, srv->head, rc);
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

void lmr_io_note_quiet(struct lmr_client *c)
{
    if (++c->quiet_unread < LMR_QUIET_READ_EVERY)
        return;
    c->quiet_unread = 0;
    for (uint32_t i = 0; i < c->server_count; i++) {
        memcached_instance_st *srv = c->servers[i];
        if (srv->conn.ops != NULL && !srv->connecting)
            (void)receive_some(srv); /* a failure is the server's, noted there */
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
static const char *transport_why(const memcached_instance_st *srv, const char *otherwise)
{
    return srv->conn.why[0] != '\0' ? srv->conn.why : otherwise;
}

/* A server that let the poll timeout pass without a reply: what its
 * transport knows of the silence (transport.h: stall_why), for the
 * server's error. */
static void fail_timed_out(memcached_instance_st *srv)
{
    char detail[128] = "", why[160];
    if (srv->conn.ops != NULL && srv->conn.ops->stall_why != NULL)
        srv->conn.ops->stall_why(&srv->conn, detail, sizeof(detail));
    bool known = detail[0] != '\0';
    snprintf(why, sizeof(why), "timed out waiting for server%s%s%s", known ? " (" : "", detail,
             known ? ")" : "");
    lmr_io_fail_server(srv, MEMCACHED_TIMEOUT, why);
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
        complete(srv, srv->head, rc);
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
        /* finished by finish_connecting() from the poll loop */
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
                 transport_why(srv, sys_errno ? strerror(sys_errno) : "failed"));
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
    if (awaiting_reply(srv)) {
        copy_small_body(req);
        srv->deferred++;
        srv->deferred_bytes += lmr_request_wire_length(req);
        if (srv->deferred_bytes < LMR_DEFER_BYTES_MAX &&
            srv->in_window + srv->deferred < srv->client->behaviors.request_window)
            return MEMCACHED_SUCCESS;
    }
    /* send now; read replies only if sending is held up (a full window or
     * socket), so a blocking call reads once, when it waits */
    pump(srv, false);
    return MEMCACHED_SUCCESS;
}

static bool window_allows(const memcached_instance_st *srv, const memcached_request_st *req,
                          uint32_t extra)
{
    if (req->sent > 0 || !req->expects_reply)
        return true;
    return srv->in_window + extra < srv->client->behaviors.request_window;
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
static bool send_some(memcached_instance_st *srv)
{
    srv->deferred = 0; /* everything queued is offered now */
    srv->deferred_bytes = 0;
    while (srv->send_next != NULL && srv->conn.ops != NULL) {
        /* between two whole requests, a transport that moves holds them */
        if (srv->send_next->sent == 0 && srv->conn.ops->hold_sends != NULL &&
            srv->conn.ops->hold_sends(&srv->conn))
            return true;
        struct iovec iov[LMR_IOV_BATCH];
        int n = 0;
        uint32_t starting = 0;
        for (memcached_request_st *r = srv->send_next; r != NULL && n <= LMR_IOV_BATCH - 3;
             r = r->next) {
            if (!window_allows(srv, r, starting))
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
            lmr_io_fail_server(srv, MEMCACHED_WRITE_FAILURE, transport_why(srv, strerror(errno)));
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
                complete(srv, r, MEMCACHED_SUCCESS);
        }
    }
    return true;
}

static bool grow_rbuf(memcached_instance_st *srv)
{
    if (srv->rstart > 0 && srv->rstart == srv->rend)
        srv->rstart = srv->rend = 0;
    if (srv->rcapacity - srv->rend >= 4096)
        return true;
    if (srv->rstart > 0) {
        memmove(srv->rbuf, srv->rbuf + srv->rstart, srv->rend - srv->rstart);
        srv->rend -= srv->rstart;
        srv->rstart = 0;
        if (srv->rcapacity - srv->rend >= 4096)
            return true;
    }
    size_t cap = srv->rcapacity ? srv->rcapacity * 2 : LMR_RBUF_MIN;
    char *nb = realloc(srv->rbuf, cap);
    if (nb == NULL)
        return false;
    srv->rbuf = nb;
    srv->rcapacity = cap;
    return true;
}

/* The transport moved the connection (transport.h: switching): a new
 * connection, authenticated anew when the client uses SASL. Returns false
 * if the server failed. */
static bool moved(memcached_instance_st *srv)
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

/* Where the body's next byte goes: dest, or past a placed value's prefix
 * its payload (lmr_group_place_payload). */
static char *body_target(const struct lmr_body *body)
{
    if (body->payload != NULL && body->received >= body->prefix_length)
        return body->payload + (body->received - body->prefix_length);
    return body->dest + body->received;
}

/* Reads what is available and parses it. Returns false if the server failed. */
static bool receive_some(memcached_instance_st *srv)
{
    const struct lmr_proto *proto = lmr_proto_of(srv->client);
    for (int round = 0; round < 64 && srv->conn.ops != NULL; round++) {
        struct lmr_body *body = &srv->body;
        bool was_switching = switching(srv);
        ssize_t got;
        if (body->active && body->dest != NULL && srv->rstart == srv->rend &&
            body->received >= body->prefix_length && body->received < body->value_length &&
            body->value_length - body->received >= LMR_DIRECT_RECV_MIN) {
            /* large value: straight into its destination */
            got = srv->conn.ops->recv(&srv->conn, body_target(body),
                                      body->value_length - body->received);
            if (got > 0)
                body->received += (size_t)got;
        } else {
            if (!grow_rbuf(srv)) {
                lmr_io_fail_server(srv, MEMCACHED_MEMORY_ALLOCATION_FAILURE, "out of memory");
                return false;
            }
            size_t room = srv->rcapacity - srv->rend;
            if (srv->large_values && srv->rstart == srv->rend &&
                (!body->active || body->received < body->prefix_length) && room > LMR_HEAD_READ_MAX)
                room = LMR_HEAD_READ_MAX;
            got = srv->conn.ops->recv(&srv->conn, srv->rbuf + srv->rend, room);
            if (got > 0)
                srv->rend += (size_t)got;
        }
        if (got > 0) {
            srv->timeout_count = 0; /* the server answers */
            srv->progress++;
        }
        if (got == 0) {
            lmr_io_fail_server(srv, MEMCACHED_CONNECTION_FAILURE,
                               transport_why(srv, "connection closed by server"));
            return false;
        }
        if (got < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return was_switching && !switching(srv) ? moved(srv) : true;
            lmr_io_fail_server(srv, MEMCACHED_READ_FAILURE, transport_why(srv, strerror(errno)));
            return false;
        }
        /* the parser decides about bytes nobody waits for (binary: errors
         * of quiet requests are skipped; anything else breaks the stream) */
        memcached_return_t rc = proto->parse(srv);
        if (rc != MEMCACHED_SUCCESS) {
            lmr_io_fail_server(srv, rc,
                               rc == MEMCACHED_MEMORY_ALLOCATION_FAILURE
                                   ? "no memory for the value a reply announced"
                                   : "malformed reply from server");
            return false;
        }
        if (!wants_input(srv))
            return true; /* every reply is in: no read that would only say EAGAIN */
    }
    return true;
}

/* Completes a connect under way, if it can. Returns true once connected;
 * fails the server when the connect fails or CONNECT_TIMEOUT passes. */
static bool finish_connecting(memcached_instance_st *srv)
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

/* Sends what can be sent; reads replies when receive is set or when requests
 * are still waiting to go out (replies free the window and the socket). */
static void pump(memcached_instance_st *srv, bool receive)
{
    if (srv->conn.ops == NULL || !finish_connecting(srv))
        return;
    if (!send_some(srv) || !wants_input(srv) || (!receive && srv->send_next == NULL))
        return;
    bool moving = switching(srv);
    if (receive_some(srv) && moving && srv->conn.ops != NULL && !switching(srv))
        send_some(srv); /* moved: the requests held go over the new transport */
}

/* When a server marked stalled (server.h) fails if it still made no
 * progress: POLL_TIMEOUT after it stopped answering. -1 when it is not
 * stalled (any more) or there is no poll timeout. */
static int64_t stalled_deadline_ms(memcached_instance_st *srv)
{
    if (!srv->stalled)
        return -1;
    if (srv->stalled_mark != srv->progress || srv->queued == 0 || srv->conn.ops == NULL) {
        srv->stalled = false; /* it answered, or has nothing left to answer */
        return -1;
    }
    int timeout = srv->client->behaviors.poll_timeout_ms;
    return timeout < 0 ? -1 : srv->stalled_since_ms + timeout;
}

/* Fails stalled servers whose deadline passed, even while other servers
 * keep the pipeline busy (run_until's own timeout needs silence on every
 * connection): requests left behind on them complete then. */
static void fail_stalled(struct lmr_client *c)
{
    int64_t now = -1;
    for (uint32_t i = 0; i < c->server_count; i++) {
        memcached_instance_st *srv = c->servers[i];
        int64_t deadline = stalled_deadline_ms(srv);
        if (deadline < 0)
            continue;
        if (now < 0)
            now = lmr_io_now_ms();
        if (now >= deadline) {
            srv->stalled = false;
            fail_timed_out(srv);
        }
    }
}

void lmr_io_poll_once(struct lmr_client *c)
{
    for (uint32_t i = 0; i < c->server_count; i++)
        if (c->servers[i]->queued > 0)
            pump(c->servers[i], true);
    fail_stalled(c);
    lmr_group_run_timers(c);  /* parents whose timer is due */
    lmr_group_run_pending(c); /* parents whose children completed */
}

void lmr_io_poll_events(struct lmr_client *c)
{
    bool any = false;
    for (uint32_t i = 0; i < c->server_count; i++) {
        memcached_instance_st *srv = c->servers[i];
        if (srv->queued > 0 && srv->conn.ops != NULL && !srv->connecting &&
            srv->conn.ops->poll_events != NULL) {
            srv->conn.ops->poll_events(&srv->conn);
            any = true;
        }
    }
    if (any)
        lmr_io_poll_once(c);
}

typedef bool (*lmr_done_fn)(struct lmr_client *c, const void *arg);

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Rounds before a spinning client's first check: LMR_SPIN_QUIET_ROUNDS, or
 * LMR_SPIN_CHECK_ROUNDS where the process may run on one processor only
 * (asked of the kernel once per process). */
static unsigned spin_quiet_rounds(void)
{
    static _Atomic unsigned known; /* 0 until asked */
    unsigned rounds = atomic_load_explicit(&known, memory_order_relaxed);
    if (rounds == 0) {
        cpu_set_t allowed;
        bool one_cpu =
            sched_getaffinity(0, sizeof(allowed), &allowed) == 0 && CPU_COUNT(&allowed) == 1;
        rounds = one_cpu ? LMR_SPIN_CHECK_ROUNDS : LMR_SPIN_QUIET_ROUNDS;
        atomic_store_explicit(&known, rounds, memory_order_relaxed);
    }
    return rounds;
}

/* Servers whose transport polls input without sleeping (RDMA: without a
 * system call; sockets: with a recv that does not wait) are polled for up
 * to their spin budget before the pipeline sleeps, then readied for
 * sleeping. True when one of them has input. */
static bool spin_for_input(struct lmr_client *c)
{
    unsigned budget = 0;
    bool pollers = false, syscall_polls = false;
    for (uint32_t i = 0; i < c->server_count; i++) {
        memcached_instance_st *srv = c->servers[i];
        if (srv->conn.ops != NULL && srv->conn.ops->poll_input != NULL && srv->queued > 0 &&
            !srv->connecting) {
            pollers = true;
            syscall_polls = syscall_polls || srv->conn.ops->poll_input_is_syscall;
            if (awaiting_reply(srv) && srv->conn.spin_us > budget &&
                (srv->conn.ops->peer_shares_cpu == NULL ||
                 !srv->conn.ops->peer_shares_cpu(&srv->conn)))
                budget = srv->conn.spin_us;
        }
    }
    if (!pollers)
        return false;
    /* Past spin_quiet_rounds(), and every LMR_SPIN_CHECK_ROUNDS after, the
     * processor is offered to other threads (software RDMA devices, rxe, do
     * part of their work in kernel threads that a spinning client would
     * starve) and the clock is read for the budget, which counts from the
     * first such point. Both are system calls. The first rounds make none:
     * a small request's reply comes within them, and on an emulated device
     * any system call between two doorbells makes the next one slower (a
     * clock read and a yield at round 256 cost a 1-byte get about 4 us in
     * the test guest; see doc/rdma-measurements.md). */
    int64_t until = 0;
    unsigned check_every = syscall_polls ? LMR_SPIN_SYSCALL_CHECK_ROUNDS : LMR_SPIN_CHECK_ROUNDS;
    unsigned next_check = syscall_polls ? check_every : spin_quiet_rounds();
    if (syscall_polls && budget > 0)
        until = now_us() + budget; /* the polls cost more than the clock */
    for (unsigned round = 1; budget > 0; round++) {
        if (round == next_check) {
            next_check += check_every;
            int64_t now = now_us();
            if (until == 0)
                until = now + budget;
            else if (now >= until)
                break;
            sched_yield();
        }
        for (uint32_t i = 0; i < c->server_count; i++) {
            memcached_instance_st *srv = c->servers[i];
            if (srv->conn.ops != NULL && srv->conn.ops->poll_input != NULL && wants_input(srv) &&
                srv->conn.ops->poll_input(&srv->conn))
                return true;
        }
    }
    bool ready = false;
    for (uint32_t i = 0; i < c->server_count; i++) {
        memcached_instance_st *srv = c->servers[i];
        if (srv->conn.ops != NULL && srv->conn.ops->prepare_sleep != NULL && srv->queued > 0 &&
            !srv->connecting && srv->conn.ops->prepare_sleep(&srv->conn))
            ready = true;
    }
    return ready;
}

static void run_until(struct lmr_client *c, lmr_done_fn done, const void *arg)
{
    struct pollfd stack_fds[16];
    struct pollfd *fds = stack_fds;
    int64_t last_progress = -1; /* read the clock only once the pipeline sleeps */
    for (;;) {
        lmr_io_poll_once(c);
        if (done(c, arg))
            break;
        if (c->server_count > 16 && fds == stack_fds) {
            fds = calloc(c->server_count, sizeof(*fds));
            if (fds == NULL) {
                for (uint32_t i = 0; i < c->server_count; i++)
                    if (c->servers[i]->queued > 0)
                        lmr_io_fail_server(c->servers[i], MEMCACHED_MEMORY_ALLOCATION_FAILURE,
                                           "out of memory");
                return;
            }
        }
        if (spin_for_input(c)) {
            last_progress = -1; /* input moved: progress; the clock is read at the next sleep */
            continue;
        }
        if (last_progress < 0)
            last_progress =
                lmr_io_now_ms(); /* not before: a reply found while spinning needs no clock */
        /* a connect that blocked the caller (a step asked a server whose
         * connection had closed; a handshake) is not silence of the
         * servers: requests asked after it get their whole poll timeout */
        if (c->connect_returned_ms > last_progress)
            last_progress = c->connect_returned_ms;
        nfds_t nfds = 0;
        for (uint32_t i = 0; i < c->server_count; i++) {
            memcached_instance_st *srv = c->servers[i];
            if (srv->queued == 0 || srv->conn.ops == NULL)
                continue;
            short events = 0;
            if (srv->connecting)
                events |= POLLOUT | POLLIN; /* as finish_connecting() asks */
            else if (srv->send_next != NULL && window_allows(srv, srv->send_next, 0))
                events |= POLLOUT;
            if (wants_input(srv))
                events |= POLLIN;
            fds[nfds].fd = srv->conn.ops->poll_fd(&srv->conn);
            fds[nfds].events = events;
            fds[nfds].revents = 0;
            nfds++;
        }
        if (nfds == 0)
            break; /* nothing left that could make progress */
        int timeout = c->behaviors.poll_timeout_ms;
        int64_t now = lmr_io_now_ms();
        int64_t remaining = timeout < 0 ? INT32_MAX : timeout - (now - last_progress);
        for (uint32_t i = 0; i < c->server_count; i++) { /* connect and stall deadlines too */
            memcached_instance_st *srv = c->servers[i];
            if (srv->connecting && srv->connect_deadline_ms - now < remaining)
                remaining = srv->connect_deadline_ms - now;
            int64_t stalled = stalled_deadline_ms(srv);
            if (stalled >= 0 && stalled - now < remaining)
                remaining = stalled - now;
        }
        int64_t wake = lmr_group_next_wake_ms(c); /* and parents' timers */
        bool woken = wake >= 0 && wake - now < remaining;
        if (woken)
            remaining = wake - now;
        if (remaining < 0)
            remaining = 0;
        int n =
            poll(fds, nfds, timeout < 0 && remaining == INT32_MAX && !woken ? -1 : (int)remaining);
        if (n < 0 && errno == EINTR)
            continue;
        if (n > 0) {
            last_progress = lmr_io_now_ms();
            continue;
        }
        if (timeout < 0 || lmr_io_now_ms() - last_progress < timeout)
            continue; /* a connect deadline: finish_connecting() deals with it */
        /* no progress for the whole poll timeout */
        for (uint32_t i = 0; i < c->server_count; i++) {
            memcached_instance_st *srv = c->servers[i];
            if (srv->queued > 0 && srv->conn.ops != NULL && !srv->connecting)
                fail_timed_out(srv);
        }
        last_progress = lmr_io_now_ms();
    }
    if (fds != stack_fds)
        free(fds);
}

static bool request_done(struct lmr_client *c, const void *arg)
{
    (void)c;
    const memcached_request_st *req = arg;
    return req->state != LMR_STATE_QUEUED;
}

memcached_return_t lmr_io_wait(struct lmr_client *c, memcached_request_st *req)
{
    if (req->state == LMR_STATE_QUEUED)
        run_until(c, request_done, req);
    if (req->state == LMR_STATE_QUEUED) /* cannot happen: every queue drains */
        return MEMCACHED_FAILURE;
    return req->rc;
}

static bool all_done(struct lmr_client *c, const void *arg)
{
    (void)arg;
    for (uint32_t i = 0; i < c->server_count; i++)
        if (c->servers[i]->queued > 0)
            return false;
    return c->pending_groups == NULL;
}

memcached_return_t lmr_io_wait_all(struct lmr_client *c)
{
    run_until(c, all_done, NULL);
    return MEMCACHED_SUCCESS;
}

static bool fetch_ready(struct lmr_client *c, const void *arg)
{
    (void)arg;
    return c->fetch.head != NULL || c->fetch.pending_requests == 0;
}

void lmr_io_wait_fetch(struct lmr_client *c)
{
    run_until(c, fetch_ready, NULL);
}

char *lmr_io_get_destination(memcached_request_st *req, size_t length)
{
    if (req->sink == LMR_SINK_USER)
        return length <= req->user_capacity ? req->user_buffer : NULL;
    size_t prefix = req->group != NULL ? lmr_group_child_prefix(req, length) : 0;
    return lmr_request_reserve_value(req, prefix > 0 ? prefix : length) ? req->lib_buffer : NULL;
}

/* The group did not place the value of the child receiving it (or the child
 * straggles): the rest goes to the child's own buffer, grown from the
 * prefix's room to the whole value. Without memory, the rest is discarded
 * and the parser fails the server (no_memory). */
static void keep_rest(memcached_instance_st *srv)
{
    struct lmr_body *body = &srv->body;
    if (lmr_request_reserve_value(srv->head, body->value_length)) {
        body->dest = srv->head->lib_buffer;
    } else {
        body->dest = NULL;
        body->no_memory = true;
    }
}

void lmr_io_start_body(memcached_instance_st *srv, char *dest, size_t value_length,
                       size_t trailer_length)
{
    srv->body.active = true;
    srv->body.dest = dest;
    srv->body.value_length = value_length;
    srv->body.received = 0;
    srv->body.trailer_length = trailer_length;
    srv->body.payload = NULL;
    srv->body.prefix_length = 0;
    srv->body.no_memory = false;
    srv->large_values = value_length >= LMR_RBUF_MIN;
    memcached_request_st *req = srv->head; /* a group's child may place its value */
    if (dest != NULL && req != NULL && req->group != NULL && dest == req->lib_buffer)
        srv->body.prefix_length = lmr_group_child_prefix(req, value_length);
}

void lmr_io_unplace(memcached_request_st *req)
{
    memcached_instance_st *srv = req->server;
    if (srv != NULL && srv->head == req && srv->body.active) {
        /* nobody reads a straggler's value: the rest is dropped (its buffer
         * may hold the prefix only, lmr_io_get_destination) */
        srv->body.dest = NULL;
        srv->body.payload = NULL;
        srv->body.prefix_length = 0;
    }
}

bool lmr_io_feed_body(memcached_instance_st *srv)
{
    struct lmr_body *body = &srv->body;
    size_t total = body->value_length + body->trailer_length;
    while (body->received < total && srv->rstart < srv->rend && !body->no_memory) {
        size_t avail = srv->rend - srv->rstart;
        const char *src = srv->rbuf + srv->rstart;
        if (body->received < body->value_length) {
            size_t want = body->received < body->prefix_length
                              ? body->prefix_length - body->received
                              : body->value_length - body->received;
            size_t take = avail < want ? avail : want;
            if (body->dest != NULL)
                memcpy(body_target(body), src, take);
            body->received += take;
            srv->rstart += take;
            if (body->prefix_length > 0 && body->received == body->prefix_length) {
                body->payload = lmr_group_place_payload(srv->head, body->dest, body->value_length);
                if (body->payload == NULL)
                    keep_rest(srv);
            }
        } else {
            body->trailer[body->received - body->value_length] = *src;
            body->received++;
            srv->rstart++;
        }
    }
    return body->received >= total;
}
