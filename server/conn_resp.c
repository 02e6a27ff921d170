/*
 * conn_resp.c: a connection's responses. Builds them (conn_resp_add and the
 * resp_* setters, streamed and resumable replies, conn_out_string), parks
 * and completes them, drops them (conn_resp_truncate) and releases what
 * they hold, and writes the ordered queue with writev (conn_flush):
 * everything behind a parked response waits, a streamed reply is refilled
 * as its chunks leave. The state machine (conn.c) decides when to flush.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "conn.h"
#include "conn_internal.h"
#include "growbuf.h"
#include "items.h"
#include "log.h"
#include "stats.h"
#include "thread.h"

#define STREAM_REFILLS_PER_EVENT 16 /* chunks of a streamed reply per event, then yield */

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
void conn_item_release(struct conn *c, item *it)
{
    if (c->state == CONN_CLOSING && c->tp->adopt_item && c->tp->adopt_item(c, it))
        return;
    item_release(it);
}

/* Releases what a response holds and returns it to the pool. */
void resp_free(struct conn *c, struct resp *r)
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
    conn_schedule_resume(c);
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
bool conn_flush(struct conn *c)
{
    struct worker *w = c->worker;
    unsigned refills = 0;
    c->write_blocked = false;
    while (c->resp_head && !c->resp_head->parked) {
        if (resp_resumable(c->resp_head)) {
            if (refills++ >= STREAM_REFILLS_PER_EVENT) {
                conn_schedule_resume(c); /* let the worker's other connections run */
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
                    conn_schedule_resume(c); /* let the worker's other connections run */
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
