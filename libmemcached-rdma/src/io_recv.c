/* io_recv.c: the request pipeline's receiving (see io.c): reads into the
 * server's buffer or straight into a value's place, hands replies to the
 * protocol parser, and receives value bodies for the parsers. */
#include "io_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "group.h"
#include "proto.h"

#define LMR_RBUF_MIN 16384
#define LMR_DIRECT_RECV_MIN 8192
/* After a value of at least LMR_RBUF_MIN bytes, a read into an empty rbuf
 * while no value is arriving (or its prefix is not all in) takes at most
 * this many bytes: a reply's head (binary header, extras and key, or a text
 * VALUE line) and a group child's prefix, so that a large value's bytes go
 * straight to its destination (one read for the head, as one read of
 * LMR_RBUF_MIN was; the value's first bytes are not copied out of rbuf). */
#define LMR_HEAD_READ_MAX 512

void lmr_io_note_quiet(struct lmr_client *c)
{
    if (++c->quiet_unread < LMR_QUIET_READ_EVERY)
        return;
    c->quiet_unread = 0;
    for (uint32_t i = 0; i < c->server_count; i++) {
        memcached_instance_st *srv = c->servers[i];
        if (srv->conn.ops != NULL && !srv->connecting)
            (void)lmr_io_receive_some(srv); /* a failure is the server's, noted there */
    }
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

/* Where the body's next byte goes: dest, or past a placed value's prefix
 * its payload (lmr_group_place_payload). */
static char *body_target(const struct lmr_body *body)
{
    if (body->payload != NULL && body->received >= body->prefix_length)
        return body->payload + (body->received - body->prefix_length);
    return body->dest + body->received;
}

/* Reads what is available and parses it. Returns false if the server failed. */
bool lmr_io_receive_some(memcached_instance_st *srv)
{
    const struct lmr_proto *proto = lmr_proto_of(srv->client);
    for (int round = 0; round < 64 && srv->conn.ops != NULL; round++) {
        struct lmr_body *body = &srv->body;
        bool was_switching = lmr_io_switching(srv);
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
                               lmr_io_transport_why(srv, "connection closed by server"));
            return false;
        }
        if (got < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return was_switching && !lmr_io_switching(srv) ? lmr_io_authenticate_anew(srv)
                                                               : true;
            lmr_io_fail_server(srv, MEMCACHED_READ_FAILURE,
                               lmr_io_transport_why(srv, strerror(errno)));
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
        if (!lmr_io_wants_input(srv))
            return true; /* every reply is in: no read that would only say EAGAIN */
    }
    return true;
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
