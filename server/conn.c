/*
 * conn.c: the connection state machine. Reads requests into a reusable
 * buffer, hands them to the connection's protocol engine one at a time
 * (at most -R per event, then yields), receives values straight into item
 * memory, and writes the ordered response queue with writev, holding back
 * everything behind a parked response. Talks to the network only through
 * the transport table; knows no protocol (except the one-byte binary/text
 * negotiation) and no storage internals (items.h handles only).
 */
#include "conn.h"

#include <errno.h>
#include <event2/event.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "growbuf.h"
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
#define STREAM_REFILLS_PER_EVENT 16   /* chunks of a streamed reply per event, then yield */

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

/* ---- responses ------------------------------------------------------------------ */
struct resp *conn_resp_add(struct conn *c)
{
    struct resp *r = worker_resp_get(c->worker);
    if (!r) {
        STAT_INCR(&c->worker->stats, response_obj_oom);
        c->resp_oom = true;
        return NULL;
    }
    if (c->resp_tail)
        c->resp_tail->next = r;
    else
        c->resp_head = r;
    c->resp_tail = r;
    c->nresp++;
    return r;
}

bool resp_add_head(struct resp *r, const char *data, size_t len)
{
    if (len > (size_t)RESP_HEAD_MAX - r->head_len)
        return false;
    memcpy(r->head + r->head_len, data, len);
    r->head_len += (uint16_t)len;
    return true;
}

void resp_set_heap(struct resp *r, char *text, size_t len)
{
    free(r->heap);
    r->heap = text;
    r->heap_len = len;
}

void resp_set_item(struct resp *r, item *it, bool crlf)
{
    r->it = it;
    r->it_trailer = crlf ? 2 : 0;
}

void resp_set_tail(struct resp *r, const char *text, size_t len)
{
    r->tail = text;
    r->tail_len = (uint32_t)len;
}

/* Writes the next chunk of a streamed reply into its buffer. */
static void resp_stream_refill(struct resp *r)
{
    r->sent = 0;
    r->head_len = 0;
    r->heap_len = r->stream->fill(r->stream_ctx, r->heap, RESP_STREAM_CHUNK, &r->stream_done);
}

/* Datagram transports send each response as one message: the whole reply
 * is produced at once (as memcached builds it), chunk after chunk. */
static bool resp_stream_whole(struct resp *r, const struct resp_stream *ops, void *ctx)
{
    struct growbuf text = {NULL, 0, 0, false};
    bool done = false;
    char *room;
    while (!done && (room = growbuf_reserve(&text, RESP_STREAM_CHUNK)) != NULL)
        text.len += ops->fill(ctx, room, RESP_STREAM_CHUNK, &done);
    ops->free(ctx);
    if (text.oom) {
        free(text.buf);
        return false;
    }
    resp_set_heap(r, text.buf, text.len);
    return true;
}

bool conn_resp_add_stream(struct conn *c, const struct resp_stream *ops, void *ctx)
{
    struct resp *r = conn_resp_add(c);
    if (!r) {
        ops->free(ctx);
        return false;
    }
    if (c->tp->datagram)
        return resp_stream_whole(r, ops, ctx);
    char *chunk = malloc(RESP_STREAM_CHUNK);
    if (!chunk) {
        ops->free(ctx);
        return false;
    }
    resp_set_heap(r, chunk, 0);
    r->stream = ops;
    r->stream_ctx = ctx;
    r->stream_done = false;
    do
        resp_stream_refill(r);
    while (r->heap_len == 0 && !r->stream_done);
    return true;
}

bool conn_resp_add_resume(struct conn *c, const struct resp_stream *ops, void *ctx)
{
    struct resp *r = conn_resp_add(c);
    if (!r) {
        ops->free(ctx);
        return false;
    }
    r->stream = ops;
    r->stream_ctx = ctx;
    return true;
}

bool conn_out_string(struct conn *c, const char *str)
{
    struct resp *r = conn_resp_add(c);
    if (!r)
        return false;
    size_t len = strlen(str);
    if (len + 2 <= RESP_HEAD_MAX) {
        memcpy(r->head, str, len);
        memcpy(r->head + len, "\r\n", 2);
        r->head_len = (uint16_t)(len + 2);
    } else {
        char *text = malloc(len + 2);
        if (!text)
            return false;
        memcpy(text, str, len);
        memcpy(text + len, "\r\n", 2);
        resp_set_heap(r, text, len + 2);
    }
    return true;
}

/* Gives up the connection's reference to an item. While closing, the
 * transport may keep it until its transfers from or into the item's memory
 * have ended (transport.h, adopt_item). */
static void conn_item_release(struct conn *c, item *it)
{
    if (c->state == CONN_CLOSING && c->tp->adopt_item && c->tp->adopt_item(c, it))
        return;
    item_release(it);
}

/* Releases what a response holds and returns it to the pool. */
static void resp_free(struct conn *c, struct resp *r)
{
    if (r->it)
        conn_item_release(c, r->it);
    free(r->heap);
    if (r->stream)
        r->stream->free(r->stream_ctx);
    worker_resp_put(c->worker, r);
}

void conn_resp_truncate(struct conn *c, struct resp *mark)
{
    struct resp *r;
    if (mark) {
        r = mark->next;
        mark->next = NULL;
        c->resp_tail = mark;
    } else {
        r = c->resp_head;
        c->resp_head = c->resp_tail = NULL;
    }
    while (r) {
        struct resp *next = r->next;
        c->nresp--;
        if (r->parked) { /* its work still holds it */
            r->cancelled = true;
            if (r->on_cancel)
                r->on_cancel(r);
            r->next = c->cancelled;
            c->cancelled = r;
        } else {
            resp_free(c, r);
        }
        r = next;
    }
}

void resp_park(struct conn *c, struct resp *r)
{
    if (!r->parked) {
        r->parked = true;
        c->nparked++;
        log_msg(LOG_DEBUG, "<%d response parked (%u parked)", c->fd, c->nparked);
    }
}

static void conn_free(struct conn *c);

static void schedule_resume(struct conn *c)
{
    if (!c->yield_pending) {
        c->yield_pending = true;
        event_active(c->resume_ev, 0, 0);
    }
}

void conn_wake(struct conn *c)
{
    if (c->state != CONN_CLOSING)
        schedule_resume(c);
}

void conn_resp_complete(struct conn *c, struct resp *r)
{
    if (r->cancelled) {
        struct resp **link = &c->cancelled;
        while (*link != r)
            link = &(*link)->next;
        *link = r->next;
        c->nparked--;
        resp_free(c, r);
        if (c->state == CONN_CLOSING && c->nparked == 0)
            conn_free(c);
        return;
    }
    if (r->parked) {
        r->parked = false;
        c->nparked--;
        log_msg(LOG_DEBUG, "<%d parked response completed (%u parked)", c->fd, c->nparked);
    }
    if (c->state == CONN_CLOSING) {
        if (c->nparked == 0)
            conn_free(c);
        return;
    }
    schedule_resume(c);
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

/* ---- the write side ---------------------------------------------------------------- */
/* Total bytes of a response. */
static size_t resp_size(const struct resp *r)
{
    size_t n = r->head_len + r->heap_len + r->tail_len;
    if (r->it)
        n += item_nbytes(r->it) + r->it_trailer;
    return n;
}

static bool iov_push(struct iovec *iov, int *niov, const void *base, size_t len, size_t *skip)
{
    if (len == 0)
        return true;
    if (*skip >= len) {
        *skip -= len;
        return true;
    }
    if (*niov == WORKER_IOV_MAX)
        return false;
    iov[*niov].iov_base = (char *)base + *skip;
    iov[*niov].iov_len = len - *skip;
    (*niov)++;
    *skip = 0;
    return true;
}

/* Gathers the pieces of one response (from r->sent on); false when the
 * iovec array filled up before its end. */
static bool resp_gather(const struct resp *r, struct iovec *iov, int *niov)
{
    static const char crlf[2] = {'\r', '\n'};
    size_t skip = r->sent;
    if (!iov_push(iov, niov, r->head, r->head_len, &skip))
        return false;
    if (!iov_push(iov, niov, r->heap, r->heap_len, &skip))
        return false;
    if (r->it) {
        unsigned nseg = item_value_nseg(r->it);
        for (unsigned i = 0; i < nseg; i++) {
            struct iovec seg = item_value_seg(r->it, i);
            if (!iov_push(iov, niov, seg.iov_base, seg.iov_len, &skip))
                return false;
        }
        if (!iov_push(iov, niov, crlf, r->it_trailer, &skip))
            return false;
    }
    return iov_push(iov, niov, r->tail, r->tail_len, &skip);
}

static bool resp_resumable(const struct resp *r)
{
    return r->stream && r->stream->resume;
}

/* The head response is resumable and nothing is left before it: replaces
 * it by the responses its resume queues. */
static void resp_resume_head(struct conn *c)
{
    struct resp *r = c->resp_head;
    struct resp *later = r->next, *later_tail = c->resp_tail;
    r->next = NULL;
    c->resp_tail = r; /* what resume queues goes right after r */
    const struct resp_stream *ops = r->stream;
    void *ctx = r->stream_ctx;
    r->stream = NULL; /* resume takes over ctx */
    r->stream_ctx = NULL;
    ops->resume(c, ctx);
    c->resp_tail->next = later;
    if (later)
        c->resp_tail = later_tail;
    c->resp_head = r->next;
    if (!c->resp_head)
        c->resp_tail = NULL;
    c->nresp--;
    resp_free(c, r);
}

/* A streamed reply whose chunk is written: true when it holds its next
 * chunk (false: it is complete and can be freed). */
static bool resp_stream_next(struct resp *r)
{
    while (r->stream && !r->stream_done) {
        resp_stream_refill(r);
        if (r->heap_len > 0)
            return true;
    }
    return false;
}

/* Writes ready responses in order. Returns false when the connection
 * failed and must close. A streamed reply is refilled as its chunks are
 * written, up to STREAM_REFILLS_PER_EVENT times, then the connection
 * yields to the worker's other connections. */
static bool conn_flush(struct conn *c)
{
    struct worker *w = c->worker;
    unsigned refills = 0;
    c->write_blocked = false;
    while (c->resp_head && !c->resp_head->parked) {
        if (resp_resumable(c->resp_head)) {
            if (refills++ >= STREAM_REFILLS_PER_EVENT) {
                schedule_resume(c); /* let the worker's other connections run */
                return true;
            }
            resp_resume_head(c);
            continue;
        }
        int niov = 0;
        for (struct resp *r = c->resp_head; r && !r->parked && !resp_resumable(r); r = r->next) {
            if (!resp_gather(r, w->iov, &niov))
                break;
            if (c->tp->datagram)
                break; /* each response is its own message */
            if (r->stream && !r->stream_done)
                break; /* later replies follow its last chunk */
        }
        if (niov == 0) { /* empty responses (e.g. nothing to say) */
            struct resp *r = c->resp_head;
            c->resp_head = r->next;
            if (!c->resp_head)
                c->resp_tail = NULL;
            c->nresp--;
            resp_free(c, r);
            continue;
        }
        ssize_t n = c->tp->sendv(c, w->iov, niov);
        if (n == 0) { /* nothing taken: wait until the transport can write */
            errno = EAGAIN;
            n = -1;
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                log_msg(LOG_DEBUG, "<%d output blocked, waiting to write", c->fd);
                __atomic_store_n(&c->write_blocked, true, __ATOMIC_RELAXED);
                return true;
            }
            log_msg(LOG_WARN, "<%d write error: %s", c->fd, strerror(errno));
            return false;
        }
        STAT_ADD(&w->stats, bytes_written, (uint64_t)n);
        size_t left = (size_t)n;
        while (c->resp_head && !c->resp_head->parked && !resp_resumable(c->resp_head)) {
            struct resp *r = c->resp_head;
            size_t remaining = resp_size(r) - r->sent;
            if (left < remaining) {
                r->sent += left;
                break;
            }
            left -= remaining;
            if (resp_stream_next(r)) {
                if (++refills >= STREAM_REFILLS_PER_EVENT) {
                    schedule_resume(c); /* let the worker's other connections run */
                    return true;
                }
                break;
            }
            c->resp_head = r->next;
            if (!c->resp_head)
                c->resp_tail = NULL;
            c->nresp--;
            resp_free(c, r);
        }
    }
    return true;
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
        } else if (c->close_after_write) {
            break;
        } else if (c->nresp >= RESP_QUEUE_LIMIT) {
            queue_full = true;
            break;
        } else if (c->rlen > 0) {
            if (budget == 0) {
                log_msg(LOG_DEBUG, "<%d yields after %d requests", c->fd, settings.reqs_per_event);
                STAT_INCR(&c->worker->stats, conn_yields);
                schedule_resume(c);
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
                     c->nresp < RESP_QUEUE_LIMIT && !(c->tp->datagram && c->resp_head);
    /* requests already read wait behind a full queue that has now drained:
     * no readiness event will come for them */
    if (queue_full && want_read && c->rlen > 0)
        schedule_resume(c);
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
static void conn_free(struct conn *c)
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
