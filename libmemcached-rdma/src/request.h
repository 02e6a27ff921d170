/* request.h: the request object (memcached_request_st), the unit of the
 * pipeline. Every API call becomes one or more requests queued on servers;
 * a request holds its wire bytes (a head it owns, a value it borrows or
 * copies, a tail), its reply sink and its completion code. This header
 * defines the object and its lifecycle; encoding lives in proto_*.c,
 * moving bytes in io.c, io_send.c and io_recv.c. */
#ifndef LMR_REQUEST_H
#define LMR_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libmemcached/memcached.h>

enum lmr_op_kind {
    LMR_OP_STORE,
    LMR_OP_GET,
    LMR_OP_MGET,
    LMR_OP_DELETE,
    LMR_OP_TOUCH,
    LMR_OP_ARITH,
    LMR_OP_EXIST,
    LMR_OP_FLUSH,
    LMR_OP_VERSION,
    LMR_OP_VERBOSITY,
    LMR_OP_STATS,
};

enum lmr_store_verb { LMR_SET, LMR_ADD, LMR_REPLACE, LMR_APPEND, LMR_PREPEND, LMR_CAS };

/* Where a GET's value goes. */
enum lmr_sink {
    LMR_SINK_LIBRARY, /* lib_buf, grown as needed (bget, memcached_get) */
    LMR_SINK_USER,    /* the caller's buffer (iget) */
    LMR_SINK_RESULTS, /* the client's fetch queue (mget) */
};

enum lmr_op_state { LMR_STATE_IDLE, LMR_STATE_QUEUED, LMR_STATE_DONE };

#define LMR_HEAD_INLINE 320

/* Everything an encoder needs to build one request. */
struct lmr_op_args {
    const char *key;
    size_t key_length;
    const char *value;
    size_t value_length;
    time_t expiration;
    uint32_t flags;
    uint64_t cas;
    enum lmr_store_verb verb;
    bool increment;    /* ARITH */
    bool with_initial; /* ARITH: create with `initial` when missing */
    uint64_t delta;
    uint64_t initial;
    uint32_t number;         /* VERBOSITY level */
    const char *const *keys; /* MGET */
    const size_t *key_lengths;
    size_t key_count;
    const char *stat_args; /* STATS: NULL or e.g. "items" */
    enum lmr_sink sink;    /* GET: where the value goes */
    char *user_buffer;     /* GET with LMR_SINK_USER */
    size_t user_capacity;
    struct lmr_stat_sink *stats; /* STATS: where pairs go */
    bool copy_value;             /* STORE: copy the value before sending (bset) */
    bool want_cas; /* GET: the CAS even without SUPPORT_CAS (text: "gets", not "get") */
    /* STORE: bytes stored in front of the value (a chunk header), sent from
     * the request's head so that the value itself stays zero-copy */
    const char *value_prefix;
    size_t value_prefix_length;
};

struct lmr_stat_sink; /* stats.c */
struct lmr_group;     /* group.h */

struct memcached_request_st {
    struct lmr_client *client;
    struct memcached_instance_st *server;     /* while queued */
    struct memcached_request_st *prev, *next; /* server queue links */

    enum lmr_op_kind kind;
    enum lmr_op_state state;
    bool expects_reply; /* false: noreply/quiet, done once sent */
    bool detached;      /* library-owned: freed when it completes */
    bool counted;       /* counts against the server's window */
    bool got_value;
    bool value_offered; /* the transport holds user_buffer for the value */
    memcached_return_t rc;
    uint32_t opaque; /* binary protocol: ties replies to this request */

    /* wire bytes: head + body + tail, `sent` of them written so far */
    char *head; /* head_inline or a heap buffer */
    size_t head_length;
    const char *body;
    size_t body_length;
    char *body_copy; /* owned copy (bset, buffered stores) */
    const char *tail;
    size_t tail_length;
    size_t sent;

    /* reply sink */
    enum lmr_sink sink;
    char *user_buffer;
    size_t user_capacity;
    char *lib_buffer;
    size_t lib_capacity;
    size_t value_length;
    uint32_t flags;
    uint64_t cas;
    uint64_t number; /* ARITH result */
    struct lmr_stat_sink *stats;

    /* a parent request: its group of children (group.h) while in progress;
     * a child: the group it belongs to and its place there */
    struct lmr_group *group;
    uint32_t child_index;

    /* last: resetting a request clears everything before it, not this
     * (a head is written before it is read) */
    char head_inline[LMR_HEAD_INLINE];
};

size_t lmr_request_wire_length(const memcached_request_st *req);
/* Makes a request (on the caller's stack) ready for lmr_request_prepare:
 * owns nothing, so = {0} without clearing the inline head buffer. */
void lmr_request_init(memcached_request_st *req);
/* Resets a request for a new operation (keeps lib_buffer for reuse). */
void lmr_request_prepare(memcached_request_st *req, struct lmr_client *client,
                         enum lmr_op_kind kind);
/* Releases what the request owns, but not the request itself. */
void lmr_request_release(memcached_request_st *req);
/* Heap request the library frees on completion (buffered or noreply work). */
memcached_request_st *lmr_request_new_detached(struct lmr_client *client, enum lmr_op_kind kind);
/* Makes sure the head buffer holds `need` bytes; false on ENOMEM. */
bool lmr_request_reserve_head(memcached_request_st *req, size_t need);
/* Appends bytes to the head (growing it as needed); false on ENOMEM. */
bool lmr_request_append_head(memcached_request_st *req, const char *bytes, size_t length);
/* Makes the body an owned copy of itself; false on ENOMEM. */
bool lmr_request_copy_body(memcached_request_st *req);
/* Makes lib_buffer hold `length` bytes and a NUL after them (written);
 * false on ENOMEM. */
bool lmr_request_reserve_value(memcached_request_st *req, size_t length);

#endif
