/*
 * test_conn_park.c: unit test of conn.c's ordered, parkable response queue
 * and its read side, over an in-memory transport, a tiny line-based engine
 * and a fake item store (so the test sees every item reference).
 *
 * Engine requests, one per line:
 *   R<n>      reply "R<n>" at once
 *   P<n>      park a reply; the test completes it later, in any order
 *   K<n>      park a reply, then fail the request: drop it (as a get that
 *             meets a bad key after queuing flash reads) and reply "ERR"
 *   V<n>      reply with a two-segment fake item (checks refs are released)
 *   S<len>    receive <len> value bytes plus "\r\n" into a fake item
 *   T<n>      a streamed reply: lines "L0\n".."L<n-1>\n", then "END\r\n",
 *             produced STREAM_LINES_PER_FILL lines per fill
 *   anything else: PROTO_CLOSE
 * A second part runs the same engine over a datagram transport (as UDP):
 * one request message per receive, one reply message per response.
 * TAP output.
 */
#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"
#include "items.h"
#include "settings.h"
#include "thread.h"
#include "t/rdma/tap.h"

/* ---- fake storage: just enough of items.h for conn.c --------------------- */
struct item {
    int refs;
    size_t nbytes;
    char *seg[2];
    size_t seglen[2];
};
static int live_refs;

static item *fake_item(size_t nbytes, const char *fill)
{
    item *it = calloc(1, sizeof(*it));
    it->refs = 1;
    live_refs++;
    it->nbytes = nbytes;
    it->seglen[0] = nbytes / 2;
    it->seglen[1] = nbytes - nbytes / 2;
    for (int i = 0; i < 2; i++) {
        it->seg[i] = malloc(it->seglen[i] + 1);
        memset(it->seg[i], 0, it->seglen[i] + 1);
    }
    if (fill) {
        memcpy(it->seg[0], fill, it->seglen[0]);
        memcpy(it->seg[1], fill + it->seglen[0], it->seglen[1]);
    }
    return it;
}

void item_release(item *it)
{
    live_refs--;
    if (--it->refs == 0) {
        free(it->seg[0]);
        free(it->seg[1]);
        free(it);
    }
}
size_t item_nbytes(const item *it)
{
    return it->nbytes;
}
unsigned item_value_nseg(const item *it)
{
    (void)it;
    return 2;
}
struct iovec item_value_seg(const item *it, unsigned i)
{
    struct iovec v = {it->seg[i], it->seglen[i]};
    return v;
}
rel_time_t clock_now(void)
{
    return 1;
}

/* ---- in-memory transport ------------------------------------------------- */
static char in_buf[1 << 16];
static size_t in_len, in_pos;
static size_t in_chunk = 1 << 16; /* bytes one recv may return */
static bool in_eof;
static char out_buf[1 << 16];
static size_t out_len;
static size_t out_chunk = 1 << 16; /* bytes one sendv may take */
static bool out_eagain_next;       /* alternate EAGAIN and progress */
static bool alternate_eagain;
static bool want_read, want_write, closed;

static int fake_attach(struct conn *c, struct event_base *base)
{
    (void)c;
    (void)base;
    return 0;
}
static ssize_t fake_recv(struct conn *c, void *buf, size_t len)
{
    (void)c;
    if (in_pos == in_len) {
        if (in_eof)
            return 0;
        errno = EAGAIN;
        return -1;
    }
    size_t n = in_len - in_pos;
    if (n > len)
        n = len;
    if (n > in_chunk)
        n = in_chunk;
    memcpy(buf, in_buf + in_pos, n);
    in_pos += n;
    return (ssize_t)n;
}
static ssize_t fake_sendv(struct conn *c, const struct iovec *iov, int iovcnt)
{
    (void)c;
    if (alternate_eagain) {
        out_eagain_next = !out_eagain_next;
        if (!out_eagain_next) {
            errno = EAGAIN;
            return -1;
        }
    }
    size_t total = 0;
    for (int i = 0; i < iovcnt && total < out_chunk; i++) {
        size_t n = iov[i].iov_len;
        if (n > out_chunk - total)
            n = out_chunk - total;
        memcpy(out_buf + out_len, iov[i].iov_base, n);
        out_len += n;
        total += n;
    }
    return (ssize_t)total;
}
static void fake_want(struct conn *c, bool r, bool w)
{
    (void)c;
    want_read = r;
    want_write = w;
}
static void fake_close(struct conn *c)
{
    (void)c;
    closed = true;
}
static void fake_describe(struct conn *c, char *buf, size_t len)
{
    (void)c;
    snprintf(buf, len, "test:0");
}
static const struct transport_ops fake_tp = {
    .name = "test",
    .attach = fake_attach,
    .recv = fake_recv,
    .sendv = fake_sendv,
    .want = fake_want,
    .close = fake_close,
    .describe = fake_describe,
};

/* ---- in-memory datagram transport ---------------------------------------- */
static const char *dg_in[16];
static int dg_in_count, dg_in_next;
static char dg_out[32][64]; /* reply messages, one per sendv */
static int dg_out_count;
static int dg_out_before_recv[16]; /* replies sent before message i was taken */

static ssize_t dg_recv(struct conn *c, void *buf, size_t len)
{
    (void)c;
    if (dg_in_next == dg_in_count) {
        errno = EAGAIN;
        return -1;
    }
    dg_out_before_recv[dg_in_next] = dg_out_count;
    const char *m = dg_in[dg_in_next++];
    size_t n = strlen(m) < len ? strlen(m) : len;
    memcpy(buf, m, n);
    return (ssize_t)n;
}
static ssize_t dg_sendv(struct conn *c, const struct iovec *iov, int iovcnt)
{
    (void)c;
    size_t total = 0;
    char *o = dg_out[dg_out_count++];
    for (int i = 0; i < iovcnt; i++) {
        memcpy(o + total, iov[i].iov_base, iov[i].iov_len);
        total += iov[i].iov_len;
    }
    o[total] = '\0';
    return (ssize_t)total;
}
static const struct transport_ops dgram_tp = {
    .name = "dgram",
    .datagram = true,
    .attach = fake_attach,
    .recv = dg_recv,
    .sendv = dg_sendv,
    .want = fake_want,
    .close = fake_close,
    .describe = fake_describe,
};

/* ---- a tiny line engine ---------------------------------------------------- */
static struct resp *parked[64];
static void add_stream(struct conn *c, int n);

static int cancels;
static void count_cancel(struct resp *r)
{
    (void)r;
    cancels++;
}

static enum proto_status line_process(struct conn *c)
{
    char *data = conn_rdata(c);
    char *nl = memchr(data, '\n', conn_rlen(c));
    if (!nl)
        return PROTO_NEED_MORE;
    size_t linelen = (size_t)(nl - data);
    char line[64];
    snprintf(line, sizeof(line), "%.*s", (int)linelen, data);
    conn_consume(c, linelen + 1);
    int n = atoi(line + 1);
    struct resp *r;
    switch (line[0]) {
    case 'R':
        r = conn_resp_add(c);
        resp_add_head(r, line, strlen(line));
        resp_add_head(r, "\r\n", 2);
        break;
    case 'P':
        r = conn_resp_add(c);
        resp_park(c, r);
        parked[n] = r;
        break;
    case 'K': {
        struct resp *mark = conn_resp_mark(c);
        r = conn_resp_add(c);
        r->on_cancel = count_cancel;
        resp_park(c, r);
        parked[n] = r;
        conn_resp_truncate(c, mark);
        conn_out_string(c, "ERR");
        break;
    }
    case 'V': {
        char val[32];
        snprintf(val, sizeof(val), "value-%d", n);
        r = conn_resp_add(c);
        resp_add_head(r, "V ", 2);
        resp_set_item(r, fake_item(strlen(val), val), true);
        break;
    }
    case 'S':
        conn_read_value(c, fake_item((size_t)n, NULL), (size_t)n, 2);
        break;
    case 'T':
        add_stream(c, n);
        break;
    default:
        return PROTO_CLOSE;
    }
    return PROTO_DONE;
}

static char last_value[1 << 15];
static void line_value_done(struct conn *c, const char *trailer, size_t len)
{
    item *it = c->value.it;
    c->value.it = NULL;
    snprintf(last_value, sizeof(last_value), "%s%s", it->seg[0], it->seg[1]);
    conn_out_string(c, len == 2 && memcmp(trailer, "\r\n", 2) == 0 ? "STORED" : "BAD");
    item_release(it);
}

static const struct proto_engine line_engine = {"line", line_process, line_value_done};

/* ---- a streamed reply ------------------------------------------------------ */
#define STREAM_LINES_PER_FILL 3
struct line_stream {
    int next, count;
};
static int stream_fills, stream_frees;

static size_t stream_fill(void *ctx, char *buf, size_t room, bool *done)
{
    struct line_stream *ls = ctx;
    size_t used = 0;
    stream_fills++;
    for (int i = 0; i < STREAM_LINES_PER_FILL && ls->next < ls->count; i++)
        used += (size_t)snprintf(buf + used, room - used, "L%d\n", ls->next++);
    *done = ls->next == ls->count;
    if (*done)
        used += (size_t)snprintf(buf + used, room - used, "END\r\n");
    return used;
}

static void stream_free(void *ctx)
{
    stream_frees++;
    free(ctx);
}

static const struct resp_stream line_stream_ops = {.fill = stream_fill, .free = stream_free};

static void add_stream(struct conn *c, int n)
{
    struct line_stream *ls = calloc(1, sizeof(*ls));
    ls->count = n;
    conn_resp_add_stream(c, &line_stream_ops, ls);
}

/* The text a T<n> request streams. */
static const char *stream_text(int n)
{
    static char text[1 << 15];
    size_t used = 0;
    for (int i = 0; i < n; i++)
        used += (size_t)snprintf(text + used, sizeof(text) - used, "L%d\n", i);
    snprintf(text + used, sizeof(text) - used, "END\r\n");
    return text;
}

/* ---- helpers -------------------------------------------------------------------- */
static struct worker w;

static void reset_io(void)
{
    in_len = in_pos = out_len = 0;
    in_chunk = out_chunk = 1 << 16;
    in_eof = closed = false;
    alternate_eagain = false;
}

static void feed(const char *s)
{
    memcpy(in_buf + in_len, s, strlen(s));
    in_len += strlen(s);
}

static void run_loop(void)
{
    for (int i = 0; i < 20; i++)
        event_base_loop(w.base, EVLOOP_NONBLOCK);
}

/* Drives the connection the way a transport would, bounded. */
static void pump(struct conn *c)
{
    for (int i = 0; i < 100000 && !closed; i++) {
        if (!want_read && !want_write)
            break;
        if (want_read && in_pos == in_len && !in_eof && !want_write)
            break;
        conn_on_ready(c, want_read, want_write);
        run_loop();
    }
    run_loop();
}

static bool out_is(const char *expect)
{
    return out_len == strlen(expect) && memcmp(out_buf, expect, out_len) == 0;
}

static void fill_parked(struct conn *c, int n)
{
    char text[16];
    snprintf(text, sizeof(text), "P%d\r\n", n);
    resp_add_head(parked[n], text, strlen(text));
    conn_resp_complete(c, parked[n]);
}

struct completion {
    struct conn *c;
    int n;
};
static void complete_on_worker(struct worker *wk, void *arg)
{
    (void)wk;
    struct completion *cp = arg;
    fill_parked(cp->c, cp->n);
}
static void *completer_thread(void *arg)
{
    usleep(10000);
    worker_call(&w, complete_on_worker, arg);
    return NULL;
}

int main(void)
{
    tap_plan(36);
    settings_init(&settings);
    if (worker_init(&w, 0) != 0) {
        printf("Bail out! worker_init failed\n");
        return 1;
    }

    /* 1. parked responses hold back later ones; out-of-order completion */
    reset_io();
    struct conn *c = conn_new(&w, &fake_tp, -1, NULL, &line_engine, "test");
    tap_ok(c != NULL && want_read, "connection created and wants to read");
    feed("R1\nP2\nR3\nP4\nR5\n");
    pump(c);
    tap_ok(out_is("R1\r\n"), "only the reply before the first parked one is written");
    fill_parked(c, 4);
    run_loop();
    tap_ok(out_is("R1\r\n"), "completing a later parked reply first writes nothing");
    fill_parked(c, 2);
    run_loop();
    tap_ok(out_is("R1\r\nP2\r\nR3\r\nP4\r\nR5\r\n"), "after the first completes, all go in order");

    /* 2. completion from another thread through worker_call */
    feed("P6\nR7\n");
    pump(c);
    pthread_t th;
    struct completion cp = {c, 6};
    pthread_create(&th, NULL, completer_thread, &cp);
    pthread_join(th, NULL);
    for (int i = 0; i < 100 && out_len < strlen("R1\r\nP2\r\nR3\r\nP4\r\nR5\r\nP6\r\nR7\r\n");
         i++) {
        usleep(1000);
        run_loop();
    }
    tap_ok(out_is("R1\r\nP2\r\nR3\r\nP4\r\nR5\r\nP6\r\nR7\r\n"),
           "completion from another thread resumes the connection in order");

    /* 3. item values are written from item memory and released after */
    out_len = 0;
    feed("V1\nP8\nV2\n");
    pump(c);
    tap_ok(live_refs == 1, "item reference behind a parked reply is still held");
    fill_parked(c, 8);
    run_loop();
    tap_ok(out_is("V value-1\r\nP8\r\nV value-2\r\n"), "item values written in order");
    tap_ok(live_refs == 0, "item references released once written");

    /* 3b. a parked reply dropped by its failing request: the error goes out
     * at once, the reply is freed when its work completes */
    out_len = 0;
    feed("K30\nR31\n");
    pump(c);
    tap_ok(out_is("ERR\r\nR31\r\n"), "a dropped parked reply holds nothing back");
    tap_ok(cancels == 1 && resp_cancelled(parked[30]),
           "it is marked cancelled and on_cancel is told");
    fill_parked(c, 30);
    run_loop();
    tap_ok(out_is("ERR\r\nR31\r\n") && c->nparked == 0, "completing it later writes nothing");
    feed("R32\n");
    pump(c);
    tap_ok(out_is("ERR\r\nR31\r\nR32\r\n"), "the connection goes on");

    /* 4. requests and values split at every byte, partial and refused writes */
    out_len = 0;
    in_chunk = 1;
    out_chunk = 3;
    alternate_eagain = true;
    feed("R9\nS5\nhello\r\nS3\nabcd\nR10\n");
    pump(c);
    tap_ok(out_is("R9\r\nSTORED\r\nBAD\r\nR10\r\n"),
           "byte-at-a-time input, 3-byte writes with EAGAIN: replies whole and in order");
    tap_ok(strcmp(last_value, "abc") == 0, "value received into item segments");

    /* 5. a large value bypasses the read buffer */
    out_len = 0;
    in_chunk = 1 << 16;
    out_chunk = 1 << 16;
    alternate_eagain = false;
    char big[20001];
    for (int i = 0; i < 20000; i++)
        big[i] = (char)('a' + i % 26);
    big[20000] = '\0';
    feed("S20000\n");
    pump(c);
    in_chunk = 7000; /* arrive in pieces, so some go straight to the item */
    feed(big);
    feed("\r\n");
    pump(c);
    tap_ok(out_is("STORED\r\n") && strcmp(last_value, big) == 0, "20000-byte value stored intact");

    /* 6. -R bounds requests per event; the rest run after a yield */
    out_len = 0;
    settings.reqs_per_event = 2;
    uint64_t yields = w.stats.conn_yields;
    feed("R11\nR12\nR13\nR14\nR15\n");
    conn_on_ready(c, true, false);
    tap_ok(out_is("R11\r\nR12\r\n"), "only -R requests handled in one event");
    run_loop();
    tap_ok(out_is("R11\r\nR12\r\nR13\r\nR14\r\nR15\r\n") && w.stats.conn_yields > yields,
           "the rest follow after yielding (conn_yields counted)");
    settings.reqs_per_event = 20;

    /* 7. the peer goes away while a reply is parked */
    unsigned before = conns_allocated();
    feed("P20\n");
    pump(c);
    in_eof = true;
    conn_on_ready(c, true, false);
    tap_ok(closed && conns_allocated() == before, "closed transport; parked reply keeps the conn");
    fill_parked(c, 20);
    run_loop();
    tap_ok(conns_allocated() == before - 1, "connection freed once the parked reply completes");
    tap_ok(live_refs == 0, "no item reference left behind");

    /* 8. datagram transport: each message answered before the next is read */
    closed = false;
    struct conn *d = conn_new(&w, &dgram_tp, -1, NULL, &line_engine, "test");
    const char *messages[] = {"R1\nR2\n", "R3\nR4", "R5\n",     "X\nR6\n",
                              "S10\nabc", "R7\n",   "P8\nR9\n", "R10\n"};
    for (int i = 0; i < 8; i++)
        dg_in[dg_in_count++] = messages[i];
    for (int i = 0; i < 20; i++) {
        conn_on_ready(d, true, false);
        run_loop();
    }
    tap_ok(dg_out_count == 5 && strcmp(dg_out[0], "R1\r\n") == 0 &&
               strcmp(dg_out[1], "R2\r\n") == 0,
           "datagram: one reply message per response");
    tap_ok(strcmp(dg_out[2], "R3\r\n") == 0 && strcmp(dg_out[3], "R5\r\n") == 0,
           "datagram: an incomplete request does not leak into the next message");
    tap_ok(!closed && strcmp(dg_out[4], "R7\r\n") == 0,
           "datagram: a request that would hang up a stream only ends its message");
    tap_ok(strcmp(dg_out[4], "R7\r\n") == 0 && live_refs == 0,
           "datagram: a value cut short by its message is abandoned and released");
    tap_ok(dg_in_next == 7 && !want_read, "datagram: a parked reply holds back the next message");
    fill_parked(d, 8);
    run_loop();
    for (int i = 0; i < 5; i++) {
        conn_on_ready(d, true, false);
        run_loop();
    }
    tap_ok(dg_out_count == 8 && strcmp(dg_out[5], "P8\r\n") == 0 &&
               strcmp(dg_out[6], "R9\r\n") == 0 && strcmp(dg_out[7], "R10\r\n") == 0,
           "datagram: after completion the replies go, then the next message is served");
    bool ordered = true;
    int expect_before[] = {0, 2, 3, 4, 4, 4, 5, 7};
    for (int i = 0; i < 8; i++)
        ordered = ordered && dg_out_before_recv[i] == expect_before[i];
    tap_ok(ordered, "datagram: every reply to a message is sent before the next message is read");
    conn_close(d);

    /* 9. streamed replies: produced a chunk at a time as the peer reads */
    reset_io();
    closed = false;
    struct conn *st = conn_new(&w, &fake_tp, -1, NULL, &line_engine, "test");
    static char expect[1 << 16];
    snprintf(expect, sizeof(expect), "%sR1\r\n", stream_text(30));
    out_chunk = 7;
    alternate_eagain = true;
    feed("T30\nR1\n");
    pump(st);
    tap_ok(out_is(expect),
           "stream: every line in order, then END, then the next reply (short writes, "
           "EAGAIN)");
    tap_ok(stream_frees == 1 && stream_fills == 10, "stream: 10 fills of 3 lines, freed once");

    reset_io();
    stream_fills = stream_frees = 0;
    out_chunk = 0; /* the peer does not read */
    feed("T3000\nR2\n");
    for (int i = 0; i < 5; i++) {
        conn_on_ready(st, true, true);
        run_loop();
    }
    tap_ok(stream_fills == 1 && out_len == 0,
           "stream: a peer that does not read gets one chunk made");
    out_chunk = 1 << 16;
    conn_on_ready(st, false, true);
    tap_ok(stream_fills <= 17 && out_len < strlen(stream_text(3000)),
           "stream: at most 16 refills per event, then the connection yields");
    for (int i = 0; i < 200 && stream_frees == 0; i++) {
        conn_on_ready(st, false, true);
        run_loop();
    }
    snprintf(expect, sizeof(expect), "%sR2\r\n", stream_text(3000));
    tap_ok(out_is(expect) && stream_frees == 1, "stream: the rest follows after yielding");

    reset_io();
    stream_fills = stream_frees = 0;
    out_chunk = 0;
    feed("T3000\n");
    pump(st);
    conn_close(st);
    tap_ok(stream_frees == 1 && stream_fills == 1, "stream: closing mid-reply frees it");

    /* 10. a peer that sends requests and does not read: at most 4096 queued */
    reset_io();
    st = conn_new(&w, &fake_tp, -1, NULL, &line_engine, "test");
    out_chunk = 0;
    char many[1 << 15], *mp = many;
    for (int i = 0; i < 5000; i++)
        mp += sprintf(mp, "R%d\n", i);
    feed(many);
    pump(st);
    tap_ok(st->nresp == 4096 && !want_read,
           "a peer that does not read: 4096 replies queued, then no more reading");
    out_chunk = 1 << 16;
    pump(st);
    mp = expect;
    for (int i = 0; i < 5000; i++)
        mp += sprintf(mp, "R%d\r\n", i);
    tap_ok(out_is(expect) && st->nresp == 0, "once it reads: all 5000 replies, in order");
    conn_close(st);

    /* a datagram transport gets the whole streamed reply as one message */
    dg_in_count = dg_in_next = dg_out_count = 0;
    struct conn *ds = conn_new(&w, &dgram_tp, -1, NULL, &line_engine, "test");
    dg_in[dg_in_count++] = "T7\n";
    conn_on_ready(ds, true, false);
    run_loop();
    tap_ok(dg_out_count == 1 && strcmp(dg_out[0], stream_text(7)) == 0 && stream_frees == 2,
           "stream over a datagram transport: one message, all of it");
    conn_close(ds);

    worker_destroy(&w);
    settings_free(&settings);
    return tap_exit_status();
}
