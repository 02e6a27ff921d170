/*
 * conn.h: one client connection and the interface protocol engines use.
 *
 * A connection owns a read buffer, the value being received, and an ordered
 * queue of responses. It moves bytes only through its transport
 * (transport.h) and understands no protocol: an engine (proto_text.c,
 * proto_bin.c; meta commands through proto_text's hook) turns bytes into
 * actions and replies.
 *
 * Engine interface, in short (doc/server-design.md has the long form):
 *  - process(c) handles at most one request at the front of the read
 *    buffer: conn_rdata()/conn_rlen() show the unparsed bytes, and
 *    conn_consume() drops the bytes of the request once handled. It returns
 *    PROTO_NEED_MORE (request incomplete, nothing consumed), PROTO_DONE or
 *    PROTO_CLOSE.
 *  - A request with a value (set ...) allocates the item, consumes its own
 *    line, then calls conn_read_value(): the connection moves the next bytes
 *    straight into the item's value segments plus a short trailer, then
 *    calls the engine's value_done() (or c->value.on_done when set after
 *    conn_read_value). conn_swallow() discards bytes instead.
 *  - Replies are queued with conn_resp_add() in request order. A response
 *    holds a small inline header, optionally a malloc'd text it frees, an
 *    item whose value is written from item memory (the reference is
 *    released once written) and a static tail. Replies are sent with
 *    writev, batched across requests.
 *  - Parking (ARCHITECTURE seam 2): resp_park() marks a response as not yet
 *    complete; it holds back every later response while the worker serves
 *    other connections and this connection keeps parsing. The owner of the
 *    slow work fills the response and calls conn_resp_complete() on the
 *    connection's worker thread (from another thread: worker_call()).
 *    A connection that closes meanwhile stays allocated until every parked
 *    response has been completed.
 *  - Over a datagram transport (UDP) the same engine runs unchanged: each
 *    request message is answered before the next is read, one reply
 *    message per response (transport.h).
 */
#ifndef MCR_CONN_H
#define MCR_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "clock.h"
#include "items.h"
#include "transport.h"

typedef struct item item;
struct worker;
struct event;
struct sasl_session;

enum conn_state {
    CONN_PARSE,     /* reading and handling requests */
    CONN_NREAD,     /* receiving a value into an item */
    CONN_SWALLOW,   /* discarding a value that could not be stored */
    CONN_CLOSING,   /* closed; waiting for parked responses */
    CONN_ROOM_WAIT, /* a set's item waits for the flash writer to free memory */
};

/* Longest inline header: "VALUE " key(250) flags length cas, with room. */
#define RESP_HEAD_MAX 320

/* A reply produced as the client reads it: either bytes, a chunk at a time
 * (fill: lru_crawler metadump, stats cachedump, ...), or more responses
 * (resume: the rest of a long multi-get, whose values are then written from
 * item memory). The connection holds one chunk, or one batch of responses,
 * and asks for the next once everything before it is written. */
struct resp_stream {
    /* Writes the next bytes of the reply (whole lines) into buf, at most
     * room; sets *done once the reply is complete (its last bytes included). */
    size_t (*fill)(void *ctx, char *buf, size_t room, bool *done);
    /* Used instead of fill: queues the next responses of the reply with
     * conn_resp_add (they take the stream's place in the queue, ahead of
     * later requests' replies), possibly ending with another resumable
     * response (conn_resp_add_resume) for the rest. Takes over ctx. */
    void (*resume)(struct conn *c, void *ctx);
    /* Frees ctx, whether the reply was complete or not. */
    void (*free)(void *ctx);
};

/* Bytes of a streamed reply held per connection. */
#define RESP_STREAM_CHUNK (64 * 1024)

struct resp {
    struct resp *next;
    const struct resp_stream *stream; /* set: heap holds the current chunk */
    void *stream_ctx;
    bool stream_done;
    item *it;         /* value to send after head/heap; released after write */
    char *heap;       /* malloc'd text sent after head, freed after write */
    const char *tail; /* static text sent last */
    size_t heap_len;
    size_t sent; /* bytes of this response already written */
    uint32_t tail_len;
    uint16_t head_len;
    uint8_t it_trailer; /* bytes of "\r\n" written after the value: 0 or 2 */
    bool parked;
    bool cancelled;                    /* dropped while parked: freed when its work completes */
    void (*on_cancel)(struct resp *r); /* optional: told when dropped while parked */
    char head[RESP_HEAD_MAX];
};

enum proto_status { PROTO_DONE, PROTO_NEED_MORE, PROTO_CLOSE };

struct proto_engine {
    const char *name;
    enum proto_status (*process)(struct conn *c);
    /* The value asked for with conn_read_value() arrived; trailer holds the
     * bytes that followed it. The engine owns c->value.it again. */
    void (*value_done)(struct conn *c, const char *trailer, size_t trailer_len);
};

/* A value being received (CONN_NREAD) and the engine's notes about it. */
struct conn_value {
    item *it;
    unsigned seg;   /* current value segment */
    size_t seg_off; /* offset in it */
    size_t left;    /* value bytes still to receive */
    size_t trailer_len, trailer_got;
    char trailer[8];
    /* for the engine: what to do when the value is complete; on_done, when
     * set, is called instead of the engine's value_done (meta commands) */
    void (*on_done)(struct conn *c, const char *trailer, size_t trailer_len);
    int op;
    bool noreply;
    uint64_t cas;
    uint64_t opaque;
    /* an engine's own note about the request, kept until on_done (meta
     * commands keep the reply flags they echo once the value is stored) */
    uint8_t note_len;
    char note[47];
    /* the item a set asks for (conn_value_request), kept while it waits
     * for room (conn_alloc_value) */
    uint32_t flags;
    rel_time_t exptime;
    size_t nbytes;
    struct alloc_wait room;
    size_t nkey; /* as asked: longer than key holds means too large */
    char key[KEY_MAX_LENGTH];
};

/* Why a connection closed, as watch's connevents name it. */
enum conn_close_reason { CLOSE_NORMAL, CLOSE_ERROR, CLOSE_IDLE_TIMEOUT, CLOSE_SHUTDOWN };

struct conn {
    const struct transport_ops *tp;
    int fd;        /* the transport's descriptor; a transport without one (RDMA)
                      numbers its connections above any descriptor: only socket
                      transports use it for I/O, the rest only to name the
                      connection (log lines, watch, "stats conns") */
    void *tp_data; /* transport's own per-connection state */
    struct worker *worker;
    const struct proto_engine *engine; /* NULL: negotiate on first byte */
    enum conn_state state;
    bool write_blocked;     /* output waits for the transport */
    bool close_after_write; /* quit: close once replies are out */
    bool close_now;         /* close at the end of this event */
    bool resp_oom;          /* a command found no response object (read_buf_mem_limit): the
                             * connection closes after it, as memcached's does, unless the
                             * engine cleared this after answering with an error */
    enum conn_close_reason close_reason; /* for watch connevents */
    bool yield_pending;
    bool watching;             /* a "watch" log stream (watch.c) */
    bool authenticated;        /* -Y or -S: the connection sent valid credentials */
    struct sasl_session *sasl; /* -S: the binary engine's SASL exchange (sasl.h) */
    rel_time_t last_cmd_time;
    char listen_addr[64]; /* for "stats conns" */
    char peer_addr[96];

    /* read buffer: unparsed bytes are rbuf[rpos .. rpos+rlen) */
    char *rbuf;
    size_t rsize, rpos, rlen;
    bool rbuf_drained; /* last receive did not fill the buffer */

    struct conn_value value;
    size_t swallow_left;

    /* responses, oldest first */
    struct resp *resp_head, *resp_tail;
    struct resp *cancelled; /* parked responses dropped by conn_resp_truncate */
    unsigned nresp, nparked;

    struct event *resume_ev; /* yields and park completions */
    struct event *room_ev;   /* CONN_ROOM_WAIT: the next try (made at the first) */
    void (*room_retry)(struct conn *c);
    struct conn *wnext, *wprev; /* worker's list */
    struct conn *gnext, *gprev; /* registry for "stats conns" */
};

/* Engines, registered at start-up (binary is optional until it exists). */
extern const struct proto_engine *conn_text_engine;
extern const struct proto_engine *conn_binary_engine;
/* The engine a new stream connection starts with, as -B says: text, binary,
 * or NULL to negotiate on the first byte (auto). Sockets and RDMA alike. */
const struct proto_engine *conn_engine_for_new(void);

/* Creates a connection over an attached endpoint, on w's thread. engine
 * NULL negotiates (first byte 0x80 selects binary). NULL on failure (the
 * endpoint is then closed through tp). */
struct conn *conn_new(struct worker *w, const struct transport_ops *tp, int fd, void *tp_data,
                      const struct proto_engine *engine, const char *listen_addr);
/* Closes now (replies not yet written are dropped). */
void conn_close(struct conn *c);
/* Frees a connection during worker teardown, whatever its state. */
void conn_destroy(struct conn *c);

/* ---- for engines: the read buffer -------------------------------------- */
static inline char *conn_rdata(struct conn *c)
{
    return c->rbuf + c->rpos;
}
static inline size_t conn_rlen(const struct conn *c)
{
    return c->rlen;
}
void conn_consume(struct conn *c, size_t n);
/* Receive nbytes into it's value segments, then trailer_len bytes. */
void conn_read_value(struct conn *c, item *it, size_t nbytes, size_t trailer_len);
void conn_swallow(struct conn *c, size_t nbytes);
/* A set's item, before its value is read: conn_value_request() notes what
 * it asks for, conn_alloc_value() allocates it. When the item's class has
 * no free chunk and the flash writer is at work freeing some, the
 * request is parked instead of evicting a value flash would keep (or
 * holding up the worker): conn_alloc_value() returns NULL with
 * ALLOC_FLASH_WAIT, the connection reads and parses nothing more, and
 * retry(c) runs on its worker in about a millisecond, to call
 * conn_alloc_value() again (5 ms at most; then it evicts). Over a
 * datagram transport it never parks. */
void conn_value_request(struct conn *c, const char *key, size_t nkey, uint32_t flags,
                        rel_time_t exptime, size_t nbytes);
/* Parks the request for conn_alloc_value (false when it cannot). */
bool conn_wait_room(struct conn *c, void (*retry)(struct conn *c));
item *conn_alloc_value(struct conn *c, void (*retry)(struct conn *c), enum alloc_result *why);
/* After a set failed: deletes the key's old value, which must not stay
 * readable. */
void conn_value_delete_old(struct conn *c);
/* The text protocols' error line for a set whose item could not be
 * allocated (why), counted as store_too_large or store_no_memory. */
const char *conn_value_alloc_error(struct conn *c, enum alloc_result why);
void conn_set_close_after_write(struct conn *c);

/* ---- for engines: responses ----------------------------------------------- */
/* A new, empty response at the end of the queue (NULL when out of memory:
 * counted as response_obj_oom and c->resp_oom is set). */
struct resp *conn_resp_add(struct conn *c);
/* Appends to the inline header; false (nothing added) if it does not fit. */
bool resp_add_head(struct resp *r, const char *data, size_t len);
/* Attaches text the response frees after writing it. */
void resp_set_heap(struct resp *r, char *text, size_t len);
/* Attaches an item (takes over the caller's reference) and its trailer. */
void resp_set_item(struct resp *r, item *it, bool crlf);
void resp_set_tail(struct resp *r, const char *text, size_t len);
/* Queues a streamed reply and fills its first chunk: the connection holds
 * one RESP_STREAM_CHUNK of it at a time and refills it as the client reads.
 * Over a datagram transport the whole reply is produced now and sent as
 * one message. ctx is freed through ops once done with (also on failure:
 * false when out of memory, nothing queued or an empty response queued). */
bool conn_resp_add_stream(struct conn *c, const struct resp_stream *ops, void *ctx);
/* Queues a response whose ops->resume runs once every response before it
 * is written. false when out of memory (ctx is then freed through ops). */
bool conn_resp_add_resume(struct conn *c, const struct resp_stream *ops, void *ctx);
/* Convenience: a response holding str + "\r\n". false when out of memory. */
bool conn_out_string(struct conn *c, const char *str);
/* The last response queued, to drop later ones with conn_resp_truncate. */
static inline struct resp *conn_resp_mark(struct conn *c)
{
    return c->resp_tail;
}
/* Drops (and releases) every response queued after mark (NULL: all
 * unwritten ones). A parked one is only marked cancelled (resp_cancelled)
 * and set aside: its work still completes it, and then it is freed. */
void conn_resp_truncate(struct conn *c, struct resp *mark);

/* Runs the connection again soon on its worker (e.g. to write replies
 * queued from outside a request). Worker thread only. */
void conn_wake(struct conn *c);

/* ---- parking ------------------------------------------------------------ */
void resp_park(struct conn *c, struct resp *r);
/* The response was dropped while parked: whoever completes it fills nothing
 * and only calls conn_resp_complete(). */
static inline bool resp_cancelled(const struct resp *r)
{
    return r->cancelled;
}
/* On c's worker thread: r is filled; lets it (and later replies) go out. */
void conn_resp_complete(struct conn *c, struct resp *r);

/* ---- for "stats conns" ----------------------------------------------------- */
typedef void (*conn_visit_fn)(void *ctx, int fd, const char *addr, const char *listen_addr,
                              const char *state, unsigned secs_since_last_cmd);
void conns_visit(conn_visit_fn fn, void *ctx);
/* Number of connection structures ever allocated and still alive. */
unsigned conns_allocated(void);

#endif
