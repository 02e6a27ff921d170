/*
 * conn.c: the connection state machine and a connection's life. Reads
 * requests into a reusable buffer, hands them to the connection's protocol
 * engine one at a time (at most -R per event, then yields), receives values
 * straight into item memory, then has conn_resp.c write the ordered
 * response queue. Owns the registry behind "stats conns" and creating,
 * closing and freeing connections. Talks to the network only through the
 * transport table; knows no protocol (except the one-byte binary/text
 * negotiation) and no storage internals (items.h handles only).
 */
#include "conn.h"
#include "conn_internal.h"

#include <errno.h>
#include <event2/event.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "items.h"
#include "sasl.h"
#include "log.h"
#include "settings.h"
#include "stats.h"
#include "thread.h"
#include "watch.h"

#define RBUF_LIMIT (64 * 1024 * 1024) /* one request line may not exceed this */
#define DIRECT_READ_MIN 4096          /* values this large bypass the read buffer */
#define RESP_QUEUE_LIMIT 4096         /* stop parsing while this many replies wait */

const struct proto_engine *conn_text_engine;
const struct proto_engine *conn_binary_engine;

const struct proto_engine *conn_engine_for_new(void)
{
    switch (settings.binding_protocol) {
    case PROTOCOL_ASCII:
        return conn_text_engine;
    case PROTOCOL_BINARY:
        return conn_binary_engine;
    case PROTOCOL_AUTO:
        break;
    }
    return NULL;
}

/* ---- registry for "stats conns" ---------------------------------------------- */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct conn *registry;
static unsigned registry_count;

static void registry_add(struct conn *c)
{
    pthread_mutex_lock(&registry_lock);
    c->gprev = NULL;
    c->gnext = registry;
    if (registry)
        registry->gprev = c;
    registry = c;
    registry_count++;
    pthread_mutex_unlock(&registry_lock);
}

static void registry_remove(struct conn *c)
{
    pthread_mutex_lock(&registry_lock);
    if (c->gprev)
        c->gprev->gnext = c->gnext;
    else
        registry = c->gnext;
    if (c->gnext)
        c->gnext->gprev = c->gprev;
    registry_count--;
    pthread_mutex_unlock(&registry_lock);
}

static const char *state_name(const struct conn *c)
{
    switch (__atomic_load_n(&c->state, __ATOMIC_RELAXED)) {
    case CONN_PARSE:
        return __atomic_load_n(&c->write_blocked, __ATOMIC_RELAXED) ? "conn_mwrite"
                                                                    : "conn_parse_cmd";
    case CONN_NREAD:
        return "conn_nread";
    case CONN_SWALLOW:
        return "conn_swallow";
    case CONN_CLOSING:
        return "conn_closing";
    case CONN_ROOM_WAIT:
        return "conn_waiting";
    }
    return "conn_unknown";
}

void conns_visit(conn_visit_fn fn, void *ctx)
{
    rel_time_t now = clock_now();
    pthread_mutex_lock(&registry_lock);
    for (struct conn *c = registry; c; c = c->gnext) {
        rel_time_t last = __atomic_load_n(&c->last_cmd_time, __ATOMIC_RELAXED);
        fn(ctx, c->fd, c->peer_addr, c->listen_addr, state_name(c), now >= last ? now - last : 0);
    }
    pthread_mutex_unlock(&registry_lock);
}

unsigned conns_allocated(void)
{
    pthread_mutex_lock(&registry_lock);
    unsigned n = registry_count;
    pthread_mutex_unlock(&registry_lock);
    return n;
}

static void set_state(struct conn *c, enum conn_state s)
{
    __atomic_store_n(&c->state, s, __ATOMIC_RELAXED);
}

/* ---- scheduling ------------------------------------------------------------------ */
void conn_schedule_resume(struct conn *c)
{
    if (!c->yield_pending) {
        c->yield_pending = true;
        event_active(c->resume_ev, 0, 0);
    }
}

void conn_wake(struct conn *c)
{
    if (c->state != CONN_CLOSING)
        conn_schedule_resume(c);
}

/* ---- the read side ---------------------------------------------------------------- */
void conn_consume(struct conn *c, size_t n)
{
    c->rpos += n;
    c->rlen -= n;
    if (c->rlen == 0)
        c->rpos = 0;
}

void conn_read_value(struct conn *c, item *it, size_t nbytes, size_t trailer_len)
{
    log_msg(LOG_DEBUG, "<%d receiving a %zu-byte value", c->fd, nbytes);
    c->value.it = it;
    c->value.seg = 0;
    c->value.seg_off = 0;
    c->value.left = nbytes;
    c->value.trailer_len =
        trailer_len < sizeof(c->value.trailer) ? trailer_len : sizeof(c->value.trailer);
    c->value.trailer_got = 0;
    c->value.on_done = NULL;
    set_state(c, CONN_NREAD);
}

void conn_swallow(struct conn *c, size_t nbytes)
{
    log_msg(LOG_DEBUG, "<%d swallowing %zu bytes", c->fd, nbytes);
    c->swallow_left = nbytes;
    if (nbytes > 0)
        set_state(c, CONN_SWALLOW);
}

static void room_cb(evutil_socket_t fd, short what, void *arg);

bool conn_wait_room(struct conn *c, void (*retry)(struct conn *c))
{
    if (!c->room_ev)
        c->room_ev = evtimer_new(c->worker->base, room_cb, c);
    struct timeval step = {0, 500};
    if (!c->room_ev || evtimer_add(c->room_ev, &step) != 0)
        return false;
    log_msg(LOG_DEBUG, "<%d a set waits for the flash writer", c->fd);
    c->room_retry = retry;
    set_state(c, CONN_ROOM_WAIT);
    return true;
}

void conn_set_close_after_write(struct conn *c)
{
    c->close_after_write = true;
}

enum read_result {
    READ_DATA,
    READ_AGAIN,
    READ_EOF,
    READ_ERROR,
    READ_TRUNCATED, /* datagram: a value did not fit in its request message */
};

static enum read_result transport_recv(struct conn *c, void *buf, size_t len, size_t *got)
{
    ssize_t n = c->tp->recv(c, buf, len);
    if (n > 0) {
        STAT_ADD(&c->worker->stats, bytes_read, (uint64_t)n);
        *got = (size_t)n;
        c->rbuf_drained = (size_t)n < len;
        return READ_DATA;
    }
    if (n == 0)
        return READ_EOF;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        c->rbuf_drained = true;
        return READ_AGAIN;
    }
    log_msg(LOG_WARN, "<%d read error: %s", c->fd, strerror(errno));
    return READ_ERROR;
}

/* Reads more bytes behind the unparsed ones, taking a buffer from the
 * worker's cache, compacting or growing as needed. */
static enum read_result read_into_rbuf(struct conn *c)
{
    if (c->tp->datagram && c->state != CONN_PARSE)
        return READ_TRUNCATED; /* the rest would come from another message */
    if (!c->rbuf) {
        c->rbuf = worker_rbuf_get(c->worker);
        if (!c->rbuf) {
            log_msg(LOG_WARN, "<%d out of memory for the read buffer, closing", c->fd);
            return READ_ERROR;
        }
        c->rsize = WORKER_RBUF_SIZE;
        c->rpos = c->rlen = 0;
    }
    if (c->rpos > 0 && c->rpos + c->rlen > c->rsize / 2) {
        memmove(c->rbuf, c->rbuf + c->rpos, c->rlen);
        c->rpos = 0;
    }
    if (c->rpos + c->rlen == c->rsize) {
        if (c->rsize >= RBUF_LIMIT) {
            log_msg(LOG_WARN, "<%d request larger than %d bytes, closing", c->fd, RBUF_LIMIT);
            return READ_ERROR;
        }
        if (!worker_mem_charge(c->worker, c->rsize)) {
            STAT_INCR(&c->worker->stats, read_buf_oom);
            log_msg(LOG_WARN, "<%d read buffer memory limit reached, closing", c->fd);
            return READ_ERROR;
        }
        char *bigger = realloc(c->rbuf, c->rsize * 2);
        if (!bigger) {
            worker_mem_uncharge(c->worker, c->rsize);
            STAT_INCR(&c->worker->stats, read_buf_oom);
            log_msg(LOG_WARN, "<%d out of memory for the read buffer, closing", c->fd);
            return READ_ERROR;
        }
        STAT_ADD(&c->worker->stats, read_buf_bytes, c->rsize);
        c->rbuf = bigger;
        c->rsize *= 2;
    }
    size_t got = 0;
    size_t at = c->rpos + c->rlen;
    enum read_result rr = transport_recv(c, c->rbuf + at, c->rsize - at, &got);
    if (rr == READ_DATA)
        c->rlen += got;
    return rr;
}

/* A connection with nothing unparsed gives its buffer back (a grown one
 * is freed), so idle connections hold no read memory. */
static void release_idle_rbuf(struct conn *c)
{
    if (!c->rbuf || c->rlen > 0)
        return;
    if (c->rsize == WORKER_RBUF_SIZE) {
        worker_rbuf_put(c->worker, c->rbuf);
    } else {
        free(c->rbuf);
        worker_mem_uncharge(c->worker, c->rsize);
        STAT_SUB(&c->worker->stats, read_buf_count, 1);
        STAT_SUB(&c->worker->stats, read_buf_bytes, c->rsize);
    }
    c->rbuf = NULL;
    c->rsize = c->rpos = 0;
}

/* Copies buffered bytes into the value; returns bytes copied. */
static size_t value_copy_in(struct conn *c, const char *src, size_t len)
{
    struct conn_value *v = &c->value;
    size_t done = 0;
    while (done < len && v->left > 0) {
        struct iovec seg = item_value_seg(v->it, v->seg);
        size_t room = seg.iov_len - v->seg_off;
        if (room == 0) {
            v->seg++;
            v->seg_off = 0;
            continue;
        }
        size_t n = len - done;
        if (n > room)
            n = room;
        if (n > v->left)
            n = v->left;
        memcpy((char *)seg.iov_base + v->seg_off, src + done, n);
        v->seg_off += n;
        v->left -= n;
        done += n;
    }
    return done;
}

/* Receives the value: returns READ_DATA when value and trailer are in. */
static enum read_result fill_value(struct conn *c)
{
    struct conn_value *v = &c->value;
    while (v->left > 0) {
        if (c->rlen > 0) {
            conn_consume(c, value_copy_in(c, conn_rdata(c), c->rlen));
            continue;
        }
        if (v->left >= DIRECT_READ_MIN && !c->tp->datagram) {
            struct iovec seg = item_value_seg(v->it, v->seg);
            if (v->seg_off == seg.iov_len) {
                v->seg++;
                v->seg_off = 0;
                continue;
            }
            size_t room = seg.iov_len - v->seg_off;
            if (room > v->left)
                room = v->left;
            size_t got = 0;
            enum read_result rr = transport_recv(c, (char *)seg.iov_base + v->seg_off, room, &got);
            if (rr != READ_DATA)
                return rr;
            v->seg_off += got;
            v->left -= got;
            continue;
        }
        enum read_result rr = read_into_rbuf(c);
        if (rr != READ_DATA)
            return rr;
    }
    while (v->trailer_got < v->trailer_len) {
        if (c->rlen > 0) {
            size_t n = v->trailer_len - v->trailer_got;
            if (n > c->rlen)
                n = c->rlen;
            memcpy(v->trailer + v->trailer_got, conn_rdata(c), n);
            v->trailer_got += n;
            conn_consume(c, n);
            continue;
        }
        enum read_result rr = read_into_rbuf(c);
        if (rr != READ_DATA)
            return rr;
    }
    return READ_DATA;
}

static enum read_result drain_swallow(struct conn *c)
{
    while (c->swallow_left > 0) {
        if (c->rlen > 0) {
            size_t n = c->swallow_left < c->rlen ? c->swallow_left : c->rlen;
            conn_consume(c, n);
            c->swallow_left -= n;
            continue;
        }
        enum read_result rr = read_into_rbuf(c);
        if (rr != READ_DATA)
            return rr;
    }
    return READ_DATA;
}

/* ---- the state machine ------------------------------------------------------------ */
/* Picks the engine from the first byte under -B auto. */
static bool negotiate(struct conn *c)
{
    if ((unsigned char)c->rbuf[c->rpos] == 0x80) {
        if (settings.auth_file) { /* -Y authenticates text connections only */
            log_msg(LOG_WARN, "<%d binary protocol refused: ASCII authentication is on", c->fd);
            return false;
        }
        if (!conn_binary_engine) {
            log_msg(LOG_WARN, "<%d binary protocol is not supported yet, closing", c->fd);
            return false;
        }
        c->engine = conn_binary_engine;
    } else {
        c->engine = conn_text_engine;
    }
    return true;
}

/* Datagram transports: answer the current request message, drop what is
 * left of it, then take the next message. */
static enum read_result datagram_next(struct conn *c)
{
    if (c->resp_head) {
        if (!conn_flush(c))
            return READ_ERROR;
        if (c->resp_head)
            return READ_AGAIN; /* parked: the next message waits */
    }
    c->rlen = 0;
    c->rpos = 0;
    c->close_now = false;
    c->close_after_write = false;
    if (c->rbuf_drained)
        return READ_AGAIN;
    return read_into_rbuf(c);
}

/* Datagram transports: a value cut short by the end of its message is
 * abandoned, as is the rest of the message. */
static void datagram_abandon_value(struct conn *c)
{
    if (c->value.it) {
        item_release(c->value.it);
        c->value.it = NULL;
    }
    c->swallow_left = 0;
    c->rlen = 0;
    c->rpos = 0;
    set_state(c, CONN_PARSE);
}

/* A command found no response object (-o read_buf_mem_limit): its reply
 * is missing from the stream, so the connection closes at once, the
 * replies queued before it unsent, as memcached's does. A datagram only
 * loses its reply: a message cannot hang up a shared socket. */
static bool resp_oom_fails(struct conn *c)
{
    if (!c->resp_oom)
        return false;
    c->resp_oom = false;
    if (c->tp->datagram)
        return false;
    log_msg(LOG_WARN, "<%d out of memory for responses, closing", c->fd);
    c->close_reason = CLOSE_ERROR;
    return true;
}

static void conn_drive(struct conn *c)
{
    int budget = settings.reqs_per_event;
    bool fail = false;
    bool queue_full = false; /* parsing stopped at RESP_QUEUE_LIMIT replies */

    while (!fail && !c->close_now && !c->write_blocked) {
        if (resp_oom_fails(c)) {
            fail = true;
            break;
        }
        enum read_result rr = READ_DATA;
        if (c->state == CONN_NREAD) {
            rr = fill_value(c);
            if (rr == READ_DATA) {
                set_state(c, CONN_PARSE);
                if (c->value.on_done)
                    c->value.on_done(c, c->value.trailer, c->value.trailer_len);
                else
                    c->engine->value_done(c, c->value.trailer, c->value.trailer_len);
                continue;
            }
        } else if (c->state == CONN_SWALLOW) {
            rr = drain_swallow(c);
            if (rr == READ_DATA) {
                set_state(c, CONN_PARSE);
                continue;
            }
        } else if (c->state == CONN_ROOM_WAIT) {
            break; /* nothing after the set is parsed before it */
        } else if (c->close_after_write) {
            break;
        } else if (c->nresp >= RESP_QUEUE_LIMIT) {
            queue_full = true;
            break;
        } else if (c->rlen > 0) {
            if (budget == 0) {
                log_msg(LOG_DEBUG, "<%d yields after %d requests", c->fd, settings.reqs_per_event);
                STAT_INCR(&c->worker->stats, conn_yields);
                conn_schedule_resume(c);
                break;
            }
            if (!c->engine && !negotiate(c)) {
                fail = true;
                break;
            }
            c->last_cmd_time = clock_now();
            enum proto_status st = c->engine->process(c);
            if (st == PROTO_CLOSE && c->tp->datagram) {
                c->rlen = 0; /* a message cannot hang up a shared socket */
                c->rpos = 0;
                continue;
            }
            if (st == PROTO_CLOSE) {
                c->close_now = true;
                c->close_reason = CLOSE_ERROR;
                break;
            }
            if (st == PROTO_DONE) {
                budget--;
                if (c->tp->datagram)
                    c->close_after_write = false; /* quit: nothing to close */
                continue;
            }
            if (c->tp->datagram) {
                rr = datagram_next(c);
            } else {
                if (c->rbuf_drained && c->rpos + c->rlen < c->rsize)
                    break; /* wait for the transport to say more arrived */
                rr = read_into_rbuf(c);
            }
        } else if (c->tp->datagram) {
            rr = datagram_next(c);
        } else {
            if (c->rbuf_drained)
                break;
            rr = read_into_rbuf(c);
        }
        if (rr == READ_TRUNCATED) {
            datagram_abandon_value(c);
            continue;
        }
        if (rr == READ_AGAIN)
            break;
        if (rr == READ_EOF || rr == READ_ERROR) {
            fail = true;
            c->close_reason = rr == READ_EOF ? CLOSE_NORMAL : CLOSE_ERROR;
        }
    }

    if (fail || resp_oom_fails(c)) {
        conn_close(c);
        return;
    }
    release_idle_rbuf(c);
    if (!conn_flush(c)) {
        c->close_reason = CLOSE_ERROR;
        conn_close(c);
        return;
    }
    if ((c->close_now || c->close_after_write) && !c->write_blocked &&
        (c->resp_head == NULL || c->close_now)) {
        conn_close(c);
        return;
    }
    bool want_read = !c->write_blocked && !c->close_after_write && !c->close_now &&
                     c->nresp < RESP_QUEUE_LIMIT && !(c->tp->datagram && c->resp_head) &&
                     c->state != CONN_ROOM_WAIT;
    /* requests already read wait behind a full queue that has now drained:
     * no readiness event will come for them */
    if (queue_full && want_read && c->rlen > 0)
        conn_schedule_resume(c);
    c->tp->want(c, want_read, c->write_blocked);
}

void conn_on_ready(struct conn *c, bool readable, bool writable)
{
    if (c->state == CONN_CLOSING)
        return;
    if (readable)
        c->rbuf_drained = false;
    if (writable)
        c->write_blocked = false;
    conn_drive(c);
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct conn *c = arg;
    c->yield_pending = false;
    if (c->state == CONN_CLOSING)
        return;
    conn_drive(c);
}

/* A set parked by conn_alloc_value: tries again, then goes on as usual. */
static void room_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct conn *c = arg;
    if (c->state != CONN_ROOM_WAIT)
        return;
    set_state(c, CONN_PARSE);
    c->room_retry(c);
    conn_drive(c);
}

/* ---- life cycle ------------------------------------------------------------------ */
struct conn *conn_new(struct worker *w, const struct transport_ops *tp, int fd, void *tp_data,
                      const struct proto_engine *engine, const char *listen_addr)
{
    struct conn *c = calloc(1, sizeof(*c));
    if (!c)
        goto fail;
    c->tp = tp;
    c->fd = fd;
    c->tp_data = tp_data;
    c->worker = w;
    c->engine = engine;
    c->state = CONN_PARSE;
    c->last_cmd_time = clock_now();
    snprintf(c->listen_addr, sizeof(c->listen_addr), "%s", listen_addr ? listen_addr : "");
    c->resume_ev = event_new(w->base, -1, 0, resume_cb, c);
    if (!c->resume_ev)
        goto fail_conn;
    tp->describe(c, c->peer_addr, sizeof(c->peer_addr));
    if (tp->attach(c, w->base) != 0)
        goto fail_event;
    c->wnext = w->conns;
    if (w->conns)
        w->conns->wprev = c;
    w->conns = c;
    registry_add(c);
    log_msg(LOG_CMDS, "<%d new %s client connection", fd, tp->name);
    watch_conn_event(c, false);
    tp->want(c, true, false);
    return c;

fail_event:
    event_free(c->resume_ev);
fail_conn:
    free(c);
fail:
    log_msg(LOG_WARN, "failed to set up a connection for fd %d", fd);
    return NULL;
}

/* Frees the connection's memory; the transport is already closed. */
void conn_free(struct conn *c)
{
    struct worker *w = c->worker;
    registry_remove(c);
    if (c->wprev)
        c->wprev->wnext = c->wnext;
    else
        w->conns = c->wnext;
    if (c->wnext)
        c->wnext->wprev = c->wprev;
    while (c->resp_head) {
        struct resp *r = c->resp_head;
        c->resp_head = r->next;
        resp_free(c, r);
    }
    while (c->cancelled) {
        struct resp *r = c->cancelled;
        c->cancelled = r->next;
        resp_free(c, r);
    }
    if (c->room_ev)
        event_free(c->room_ev);
    event_free(c->resume_ev);
    sasl_session_free(c->sasl);
    c->rlen = 0;
    release_idle_rbuf(c);
    free(c);
}

void conn_close(struct conn *c)
{
    if (c->state == CONN_CLOSING)
        return;
    log_msg(LOG_CMDS, "<%d connection closed", c->fd);
    watch_stop(c);
    watch_conn_event(c, true);
    set_state(c, CONN_CLOSING);
    /* items go first: the transport may keep them while a transfer into or
     * out of their memory is in flight (it must still know the connection) */
    if (c->value.it) {
        conn_item_release(c, c->value.it);
        c->value.it = NULL;
    }
    /* drop what can be dropped; parked responses stay until completed */
    struct resp **link = &c->resp_head;
    c->resp_tail = NULL;
    while (*link) {
        struct resp *r = *link;
        if (r->parked) {
            c->resp_tail = r;
            link = &r->next;
            continue;
        }
        *link = r->next;
        c->nresp--;
        resp_free(c, r);
    }
    c->tp->close(c);
    if (c->yield_pending) {
        event_del(c->resume_ev);
        c->yield_pending = false;
    }
    if (c->room_ev)
        event_del(c->room_ev);
    if (c->nparked == 0)
        conn_free(c);
}

void conn_destroy(struct conn *c)
{
    if (c->state != CONN_CLOSING) {
        c->close_reason = CLOSE_SHUTDOWN;
        conn_close(c);
        return;
    }
    /* parked work never completed (teardown): release it here */
    c->nparked = 0;
    conn_free(c);
}
