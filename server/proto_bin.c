/*
 * proto_bin.c: memcached's binary protocol with memcached 1.6's replies.
 *
 * process() waits until the 24-byte header, the extras and the key of the
 * request at the front of the read buffer are in, consumes them and runs
 * the command. Storage commands allocate the item and let the connection
 * receive the value straight into item memory; value_done() then stores it.
 * Hits are sent from item memory. Replies echo the request's opcode and
 * opaque.
 *
 * memcached's rules kept here (doc/binary-protocol.md has the list):
 *  - a request whose magic byte is not 0x80 closes the connection at once;
 *  - keylen + extlen > bodylen: UNKNOWN_COMMAND, then close;
 *  - a key over 250 bytes, or lengths a command does not accept: EINVAL,
 *    then close;
 *  - an unknown opcode: UNKNOWN_COMMAND, then bodylen bytes are discarded
 *    counting from the end of the key, as memcached does;
 *  - quiet commands answer only on error; quiet gets only on a hit;
 *  - a value too large: E2BIG and the value is discarded (a failed SET also
 *    drops the old value).
 * Touches no socket and no slab; counters go through stats.h as the text
 * engine counts them, following memcached's binary engine where it differs.
 */
#include "proto_bin.h"
#include "growbuf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "items.h"
#include "log.h"
#include "meta_marks.h"
#include "sasl.h"
#include "mcr/binary_wire.h"
#include "settings.h"
#include "stats.h"
#include "stats_detail.h"
#include "thread.h"
#include "value_fetch.h"
#include "watch.h"

/* What every reply to one request needs. */
struct bin_reply {
    uint8_t opcode; /* the request's opcode, echoed */
    bool quiet;     /* a quiet variant: success is not answered */
    uint32_t opaque;
};

/* One parsed request; extras and key point into the read buffer, which
 * stays untouched until the engine returns. */
struct bin_request {
    struct mcr_bin_header h;
    uint8_t cmd; /* the opcode with quiet variants mapped to loud ones */
    struct bin_reply rc;
    const unsigned char *extras;
    const char *key;
    const char *value; /* SASL AUTH / STEP only: the whole body is in */
};

/* memcached reads SASL data into an item; larger data gets its ENOMEM. */
#define SASL_DATA_MAX 8192

/* ---- replies ------------------------------------------------------------------------ */
static const char *status_text(uint16_t status)
{
    switch (status) {
    case MCR_BIN_STATUS_ENOMEM:
        return "Out of memory";
    case MCR_BIN_STATUS_UNKNOWN_COMMAND:
        return "Unknown command";
    case MCR_BIN_STATUS_KEY_ENOENT:
        return "Not found";
    case MCR_BIN_STATUS_EINVAL:
        return "Invalid arguments";
    case MCR_BIN_STATUS_KEY_EEXISTS:
        return "Data exists for key.";
    case MCR_BIN_STATUS_E2BIG:
        return "Too large.";
    case MCR_BIN_STATUS_DELTA_BADVAL:
        return "Non-numeric server-side value for incr or decr";
    case MCR_BIN_STATUS_NOT_STORED:
        return "Not stored.";
    case MCR_BIN_STATUS_AUTH_ERROR:
        return "Auth failure.";
    }
    return "Unknown error";
}

/* A response holding a header; the caller appends body bytes after it. */
static struct resp *reply_start(struct conn *c, const struct bin_reply *rc, uint16_t status,
                                uint8_t extlen, uint16_t keylen, uint32_t bodylen, uint64_t cas)
{
    struct resp *r = conn_resp_add(c);
    if (!r) {
        log_msg(LOG_WARN, "<%d out of memory queueing a reply", c->fd);
        return NULL;
    }
    mcr_bin_response_encode(r->head, rc->opcode, status, extlen, keylen, bodylen, rc->opaque, cas);
    r->head_len = MCR_BIN_HEADER_LEN;
    return r;
}

/* An error reply: status and a short text (memcached's when text is NULL).
 * Errors are answered for quiet commands too. */
static void reply_error(struct conn *c, const struct bin_reply *rc, uint16_t status,
                        const char *text)
{
    if (!text)
        text = status_text(status);
    size_t len = strlen(text);
    if (log_enabled(LOG_CMDS))
        log_msg(LOG_CMDS, ">%d Writing an error: %s", c->fd, text);
    struct resp *r = reply_start(c, rc, status, 0, 0, (uint32_t)len, 0);
    if (r)
        resp_add_head(r, text, len);
}

/* A success reply with an optional body (no extras, no key); nothing for
 * quiet commands. */
static void reply_ok(struct conn *c, const struct bin_reply *rc, const void *body, size_t len,
                     uint64_t cas)
{
    if (rc->quiet)
        return;
    struct resp *mark = conn_resp_mark(c);
    struct resp *r = reply_start(c, rc, MCR_BIN_STATUS_SUCCESS, 0, 0, (uint32_t)len, cas);
    if (!r || len == 0 || resp_add_head(r, body, len))
        return;
    char *copy = malloc(len);
    if (!copy) { /* a header without its body would break the stream */
        log_msg(LOG_WARN, "<%d out of memory queueing a reply", c->fd);
        conn_resp_truncate(c, mark);
        return;
    }
    memcpy(copy, body, len);
    resp_set_heap(r, copy, len);
}

/* A malformed request: EINVAL, then the connection closes. */
static void protocol_error(struct conn *c, const struct bin_request *req)
{
    reply_error(c, &req->rc, MCR_BIN_STATUS_EINVAL, NULL);
    log_msg(LOG_WARN, "Protocol error (opcode %02x), close connection %d", req->h.opcode, c->fd);
    conn_set_close_after_write(c);
}

/* An opcode not served: UNKNOWN_COMMAND, then `swallow` bytes dropped. */
static void unknown_command(struct conn *c, const struct bin_request *req, size_t swallow)
{
    reply_error(c, &req->rc, MCR_BIN_STATUS_UNKNOWN_COMMAND, NULL);
    conn_swallow(c, swallow);
}

/* ---- retrieval and touch --------------------------------------------------------------- */
static void process_get(struct conn *c, const struct bin_request *req)
{
    struct worker_stats *ws = &c->worker->stats;
    const char *key = req->key;
    size_t nkey = req->h.keylen;
    uint8_t cmd = req->cmd;
    bool touch = cmd == MCR_BIN_OP_TOUCH || cmd == MCR_BIN_OP_GAT || cmd == MCR_BIN_OP_GATK;
    bool return_key = cmd == MCR_BIN_OP_GETK || cmd == MCR_BIN_OP_GATK;
    bool return_value = cmd != MCR_BIN_OP_TOUCH;
    item *it;

    if (log_enabled(LOG_CMDS))
        log_msg(LOG_CMDS, "<%d %s %.*s", c->fd, touch ? "TOUCH" : "GET", (int)nkey, key);
    if (touch) {
        uint32_t exptime = mcr_be_get32(req->extras);
        it = item_get_touch(key, nkey, clock_exptime((int64_t)exptime));
        STAT_INCR(ws, touch_cmds);
    } else {
        it = item_get(key, nkey);
        STAT_INCR(ws, get_cmds);
    }
    watch_item_get(key, nkey, it, c->fd);

    if (stats_detail_on())
        stats_detail_record_get(key, nkey, it != NULL);
    if (!it) {
        if (touch)
            STAT_INCR(ws, touch_misses);
        else
            STAT_INCR(ws, get_misses);
        if (req->rc.quiet)
            return;
        if (return_key) {
            struct resp *r = reply_start(c, &req->rc, MCR_BIN_STATUS_KEY_ENOENT, 0, (uint16_t)nkey,
                                         (uint32_t)nkey, 0);
            if (r)
                resp_add_head(r, key, nkey);
        } else {
            reply_error(c, &req->rc, MCR_BIN_STATUS_KEY_ENOENT, NULL);
        }
        return;
    }

    if (touch)
        STAT_INCR(ws, touch_hits);
    else
        STAT_INCR(ws, get_hits);
    uint16_t keylen = return_key ? (uint16_t)nkey : 0;
    size_t bodylen = MCR_BIN_EXTRAS_GET_REPLY_LEN + keylen + (return_value ? item_nbytes(it) : 0);
    /* quiet gets answer hits: no quiet check here */
    struct resp *r = reply_start(c, &req->rc, MCR_BIN_STATUS_SUCCESS, MCR_BIN_EXTRAS_GET_REPLY_LEN,
                                 keylen, (uint32_t)bodylen, item_cas(it));
    if (!r) {
        item_release(it);
        return;
    }
    unsigned char flags[4];
    mcr_be_put32(flags, item_flags(it));
    resp_add_head(r, (const char *)flags, sizeof(flags));
    if (return_key)
        resp_add_head(r, item_key(it), keylen);
    if (return_value) { /* the value goes out from item memory */
        /* if it cannot be read from flash: the miss reply above */
        char miss[MCR_BIN_HEADER_LEN + KEY_MAX_LENGTH + 16];
        size_t miss_len = 0;
        if (!req->rc.quiet) {
            const char *text = return_key ? key : status_text(MCR_BIN_STATUS_KEY_ENOENT);
            size_t tlen = return_key ? nkey : strlen(text);
            mcr_bin_response_encode(miss, req->rc.opcode, MCR_BIN_STATUS_KEY_ENOENT, 0,
                                    return_key ? (uint16_t)nkey : 0, (uint32_t)tlen, req->rc.opaque,
                                    0);
            memcpy(miss + MCR_BIN_HEADER_LEN, text, tlen);
            miss_len = MCR_BIN_HEADER_LEN + tlen;
        }
        conn_resp_set_value(c, r, it, false, miss, miss_len);
    } else {
        item_release(it);
    }
}

/* ---- storage --------------------------------------------------------------------------- */
static void update_value(struct conn *c);
static uint8_t loud_opcode(uint8_t opcode);

/* Starts receiving the value of a set/add/replace/append/prepend. */
static void process_update(struct conn *c, const struct bin_request *req)
{
    const char *key = req->key;
    size_t nkey = req->h.keylen;
    bool append = req->cmd == MCR_BIN_OP_APPEND || req->cmd == MCR_BIN_OP_PREPEND;
    uint32_t flags = 0;
    rel_time_t exptime = 0;
    if (!append) {
        flags = mcr_be_get32(req->extras);
        exptime = clock_exptime((int64_t)mcr_be_get32(req->extras + 4));
    }
    size_t vlen = (size_t)req->h.bodylen - nkey - req->h.extlen;

    if (log_enabled(LOG_CMDS))
        log_msg(LOG_CMDS, "<%d opcode %02x %.*s value length %zu", c->fd, req->h.opcode, (int)nkey,
                key, vlen);
    if (stats_detail_on())
        stats_detail_record_set(key, nkey);
    conn_value_request(c, key, nkey, flags, exptime, vlen);
    c->value.op = req->h.opcode;
    c->value.noreply = req->rc.quiet;
    c->value.cas = req->h.cas;
    c->value.opaque = req->h.opaque;
    update_value(c);
}

/* The item of the set conn_value_request noted; then its value is read
 * (also when a set that waited for room tries again). */
static void update_value(struct conn *c)
{
    struct conn_value *v = &c->value;
    enum alloc_result why = ALLOC_OK;
    item *it = conn_alloc_value(c, update_value, &why);
    if (!it) {
        if (why == ALLOC_FLASH_WAIT)
            return;
        struct bin_reply rc = {(uint8_t)v->op, v->noreply, (uint32_t)v->opaque};
        if (why == ALLOC_TOO_LARGE)
            reply_error(c, &rc, MCR_BIN_STATUS_E2BIG, NULL);
        else
            reply_error(c, &rc, MCR_BIN_STATUS_ENOMEM, "Out of memory allocating item");
        /* a failed set must not leave the old value readable */
        if (loud_opcode((uint8_t)v->op) == MCR_BIN_OP_SET)
            conn_value_delete_old(c);
        conn_swallow(c, v->nbytes);
        return;
    }
    conn_read_value(c, it, v->nbytes, 0);
}

static uint8_t loud_opcode(uint8_t opcode)
{
    switch (opcode) {
    case MCR_BIN_OP_SETQ:
        return MCR_BIN_OP_SET;
    case MCR_BIN_OP_ADDQ:
        return MCR_BIN_OP_ADD;
    case MCR_BIN_OP_REPLACEQ:
        return MCR_BIN_OP_REPLACE;
    case MCR_BIN_OP_DELETEQ:
        return MCR_BIN_OP_DELETE;
    case MCR_BIN_OP_INCREMENTQ:
        return MCR_BIN_OP_INCREMENT;
    case MCR_BIN_OP_DECREMENTQ:
        return MCR_BIN_OP_DECREMENT;
    case MCR_BIN_OP_QUITQ:
        return MCR_BIN_OP_QUIT;
    case MCR_BIN_OP_FLUSHQ:
        return MCR_BIN_OP_FLUSH;
    case MCR_BIN_OP_APPENDQ:
        return MCR_BIN_OP_APPEND;
    case MCR_BIN_OP_PREPENDQ:
        return MCR_BIN_OP_PREPEND;
    case MCR_BIN_OP_GETQ:
        return MCR_BIN_OP_GET;
    case MCR_BIN_OP_GETKQ:
        return MCR_BIN_OP_GETK;
    case MCR_BIN_OP_GATQ:
        return MCR_BIN_OP_GAT;
    case MCR_BIN_OP_GATKQ:
        return MCR_BIN_OP_GATK;
    default:
        return opcode;
    }
}

/* The value is in: store it and answer. */
static void bin_value_done(struct conn *c, const char *trailer, size_t trailer_len)
{
    (void)trailer;
    (void)trailer_len; /* binary values have no trailer */
    struct worker_stats *ws = &c->worker->stats;
    item *it = c->value.it;
    c->value.it = NULL;
    uint8_t opcode = (uint8_t)c->value.op;
    struct bin_reply rc = {opcode, c->value.noreply, (uint32_t)c->value.opaque};
    uint64_t req_cas = c->value.cas;

    enum store_op op;
    switch (loud_opcode(opcode)) {
    case MCR_BIN_OP_ADD:
        op = STORE_ADD;
        break;
    case MCR_BIN_OP_REPLACE:
        op = STORE_REPLACE;
        break;
    case MCR_BIN_OP_APPEND:
        op = STORE_APPEND;
        break;
    case MCR_BIN_OP_PREPEND:
        op = STORE_PREPEND;
        break;
    default:
        op = STORE_SET;
        break;
    }
    /* a cas turns set, add and replace into a compare-and-swap */
    if (req_cas != 0 && op != STORE_APPEND && op != STORE_PREPEND)
        op = STORE_CAS;

    STAT_INCR(ws, set_cmds);
    uint64_t new_cas = 0;
    watch_store_lookup(it, c->fd);
    enum store_result res = item_store(it, op, req_cas, &new_cas);
    watch_item_store(it, res, op, c->fd);
    item_release(it);
    if (op == STORE_CAS) {
        if (res == STORE_STORED)
            STAT_INCR(ws, cas_hits);
        else if (res == STORE_EXISTS)
            STAT_INCR(ws, cas_badval);
        else if (res == STORE_NOT_FOUND)
            STAT_INCR(ws, cas_misses);
    }
    switch (res) {
    case STORE_STORED:
        reply_ok(c, &rc, NULL, 0, new_cas);
        break;
    case STORE_EXISTS:
        reply_error(c, &rc, MCR_BIN_STATUS_KEY_EEXISTS, NULL);
        break;
    case STORE_NOT_FOUND:
        reply_error(c, &rc, MCR_BIN_STATUS_KEY_ENOENT, NULL);
        break;
    case STORE_NOT_STORED:
    case STORE_NO_MEMORY:
        if (op == STORE_ADD)
            reply_error(c, &rc, MCR_BIN_STATUS_KEY_EEXISTS, NULL);
        else if (op == STORE_REPLACE)
            reply_error(c, &rc, MCR_BIN_STATUS_KEY_ENOENT, NULL);
        else
            reply_error(c, &rc, MCR_BIN_STATUS_NOT_STORED, NULL);
        break;
    }
}

/* ---- delete and arithmetic ------------------------------------------------------------- */
static void process_delete(struct conn *c, const struct bin_request *req)
{
    struct worker_stats *ws = &c->worker->stats;
    if (log_enabled(LOG_CMDS))
        log_msg(LOG_CMDS, "<%d DELETE %.*s", c->fd, (int)req->h.keylen, req->key);
    if (stats_detail_on())
        stats_detail_record_delete(req->key, req->h.keylen);
    switch (item_delete(req->key, req->h.keylen, req->h.cas)) {
    case DELETE_DELETED:
        STAT_INCR(ws, delete_hits);
        reply_ok(c, &req->rc, NULL, 0, 0);
        break;
    case DELETE_EXISTS:
        reply_error(c, &req->rc, MCR_BIN_STATUS_KEY_EEXISTS, NULL);
        break;
    case DELETE_NOT_FOUND:
        STAT_INCR(ws, delete_misses);
        reply_error(c, &req->rc, MCR_BIN_STATUS_KEY_ENOENT, NULL);
        break;
    }
}

/* Creates a missing counter with the request's initial value (incr/decr
 * with an expiration other than 0xffffffff). */
static void arith_create(struct conn *c, const struct bin_request *req, uint64_t initial,
                         uint32_t exptime)
{
    char text[24];
    int len = snprintf(text, sizeof(text), "%" PRIu64, initial);
    enum alloc_result why;
    item *it =
        item_alloc(req->key, req->h.keylen, 0, clock_exptime((int64_t)exptime), (size_t)len, &why);
    if (!it) {
        reply_error(c, &req->rc, MCR_BIN_STATUS_ENOMEM, "Out of memory allocating new item");
        return;
    }
    item_value_write(it, text, (size_t)len);
    uint64_t new_cas = 0;
    enum store_result res = item_store(it, STORE_ADD, 0, &new_cas);
    item_release(it);
    if (res != STORE_STORED) {
        reply_error(c, &req->rc, MCR_BIN_STATUS_NOT_STORED, NULL);
        return;
    }
    unsigned char body[MCR_BIN_ARITH_REPLY_LEN];
    mcr_be_put64(body, initial);
    reply_ok(c, &req->rc, body, sizeof(body), new_cas);
}

static void process_arith(struct conn *c, const struct bin_request *req)
{
    struct worker_stats *ws = &c->worker->stats;
    bool incr = req->cmd == MCR_BIN_OP_INCREMENT;
    uint64_t delta = mcr_be_get64(req->extras);
    uint64_t initial = mcr_be_get64(req->extras + 8);
    uint32_t exptime = mcr_be_get32(req->extras + 16);
    uint64_t value = 0, new_cas = 0;

    if (log_enabled(LOG_CMDS))
        log_msg(LOG_CMDS, "<%d %s %.*s %" PRIu64 ", %" PRIu64 ", %" PRIu32, c->fd,
                incr ? "INCR" : "DECR", (int)req->h.keylen, req->key, delta, initial, exptime);
    /* meta markers stay where memcached rewrites in place */
    switch (item_arith(req->key, req->h.keylen, incr, delta, req->h.cas, &value, &new_cas,
                       meta_marks_carry)) {
    case ARITH_OK: {
        if (incr)
            STAT_INCR(ws, incr_hits);
        else
            STAT_INCR(ws, decr_hits);
        unsigned char body[MCR_BIN_ARITH_REPLY_LEN];
        mcr_be_put64(body, value);
        reply_ok(c, &req->rc, body, sizeof(body), new_cas);
        break;
    }
    case ARITH_NON_NUMERIC:
        reply_error(c, &req->rc, MCR_BIN_STATUS_DELTA_BADVAL, NULL);
        break;
    case ARITH_NO_MEMORY:
        reply_error(c, &req->rc, MCR_BIN_STATUS_ENOMEM, "Out of memory incrementing value");
        break;
    case ARITH_EXISTS:
        reply_error(c, &req->rc, MCR_BIN_STATUS_KEY_EEXISTS, NULL);
        break;
    case ARITH_NOT_FOUND:
        if (exptime != MCR_BIN_ARITH_NO_CREATE) {
            arith_create(c, req, initial, exptime);
            break;
        }
        if (incr)
            STAT_INCR(ws, incr_misses);
        else
            STAT_INCR(ws, decr_misses);
        reply_error(c, &req->rc, MCR_BIN_STATUS_KEY_ENOENT, NULL);
        break;
    }
}

/* ---- stats ------------------------------------------------------------------------------ */
/* Stats replies: one STAT packet per value, then an empty one. */
struct bin_stats {
    const struct bin_reply *rc;
    struct growbuf out;
};

static void stats_packet(struct bin_stats *st, const char *name, size_t nlen, const char *value,
                         size_t vlen)
{
    unsigned char head[MCR_BIN_HEADER_LEN];
    mcr_bin_response_encode(head, MCR_BIN_OP_STAT, MCR_BIN_STATUS_SUCCESS, 0, (uint16_t)nlen,
                            (uint32_t)(nlen + vlen), st->rc->opaque, 0);
    growbuf_append(&st->out, head, sizeof(head));
    growbuf_append(&st->out, name, nlen);
    growbuf_append(&st->out, value, vlen);
}

static void emit_stat_packet(void *ctx, const char *name, const char *value)
{
    stats_packet(ctx, name, strlen(name), value, strlen(value));
}

/* Adds the closing empty packet and queues everything. */
static void stats_send(struct conn *c, struct bin_stats *st)
{
    stats_packet(st, "", 0, "", 0);
    struct resp *r = st->out.oom ? NULL : conn_resp_add(c);
    if (!r) {
        free(st->out.buf);
        reply_error(c, st->rc, MCR_BIN_STATUS_ENOMEM, "Out of memory preparing to send stats");
        return;
    }
    resp_set_heap(r, st->out.buf, st->out.len);
}

static bool key_is(const char *key, size_t nkey, const char *word)
{
    return nkey == strlen(word) && memcmp(key, word, nkey) == 0;
}

/* memcached matches some stats groups by prefix only. */
static bool key_starts(const char *key, size_t nkey, const char *word)
{
    size_t n = strlen(word);
    return nkey >= n && memcmp(key, word, n) == 0;
}

static void process_stat(struct conn *c, const struct bin_request *req)
{
    const char *key = req->key;
    size_t nkey = req->h.keylen;
    struct bin_stats st = {&req->rc, {NULL, 0, 0, false}};

    if (log_enabled(LOG_CMDS))
        log_msg(LOG_CMDS, "<%d STATS %.*s", c->fd, (int)nkey, key);
    if (nkey == 0) {
        stats_report_general(emit_stat_packet, &st);
    } else if (key_starts(key, nkey, "reset")) {
        stats_reset();
    } else if (key_starts(key, nkey, "settings")) {
        stats_report_settings(emit_stat_packet, &st);
    } else if (key_starts(key, nkey, "detail")) {
        const char *sub = key + 6;
        size_t nsub = nkey - 6;
        const char *arg = key_starts(sub, nsub, " dump")  ? "dump"
                          : key_starts(sub, nsub, " on")  ? "on"
                          : key_starts(sub, nsub, " off") ? "off"
                                                          : NULL;
        if (!arg) {
            reply_error(c, &req->rc, MCR_BIN_STATUS_KEY_ENOENT, NULL);
            return;
        }
        size_t len = 0;
        char *text = stats_detail_reply(arg, &len);
        if (!text || len == 0) {
            free(text);
            reply_error(c, &req->rc, MCR_BIN_STATUS_ENOMEM, "Out of memory generating stats");
            return;
        }
        /* on/off answer only the closing packet; dump, its text as one value */
        if (strcmp(arg, "dump") == 0)
            stats_packet(&st, "detailed", 8, text, len);
        free(text);
    } else if (key_is(key, nkey, "items")) {
        storage_stats_items(emit_stat_packet, &st);
    } else if (key_is(key, nkey, "slabs")) {
        storage_stats_slabs(emit_stat_packet, &st);
    } else if (key_is(key, nkey, "sizes")) {
        storage_stats_sizes(emit_stat_packet, &st);
    } else {
        reply_error(c, &req->rc, MCR_BIN_STATUS_KEY_ENOENT, NULL);
        return;
    }
    stats_send(c, &st);
}

/* ---- SASL (-S) ---------------------------------------------------------------------------- */
/* Before authenticating, a -S connection may only list mechanisms,
 * authenticate and ask the version; anything else gets AUTH_ERROR and the
 * connection closes, as in memcached. */
static bool sasl_allows(const struct conn *c, uint8_t opcode)
{
    if (!settings.sasl || c->authenticated)
        return true;
    return opcode == MCR_BIN_OP_SASL_LIST_MECHS || opcode == MCR_BIN_OP_SASL_AUTH ||
           opcode == MCR_BIN_OP_SASL_STEP || opcode == MCR_BIN_OP_VERSION;
}

/* memcached starts every SASL command by dropping the connection's
 * authentication and creating its exchange once. */
static struct sasl_session *sasl_restart(struct conn *c)
{
    c->authenticated = false;
    if (!c->sasl)
        c->sasl = sasl_session_new();
    return c->sasl;
}

static void process_sasl_list_mechs(struct conn *c, const struct bin_request *req)
{
    const char *mechs = NULL;
    unsigned len = 0;
    if (!sasl_session_mechs(sasl_restart(c), &mechs, &len)) {
        reply_error(c, &req->rc, MCR_BIN_STATUS_AUTH_ERROR, NULL);
        return;
    }
    reply_ok(c, &req->rc, mechs, len, 0);
}

static void process_sasl_auth(struct conn *c, const struct bin_request *req)
{
    size_t vlen = (size_t)req->h.bodylen - req->h.keylen;
    if (req->h.keylen > SASL_MECH_NAME_MAX) {
        reply_error(c, &req->rc, MCR_BIN_STATUS_EINVAL, NULL);
        conn_swallow(c, vlen);
        return;
    }
    if (!req->value) { /* more data than memcached's item would hold */
        reply_error(c, &req->rc, MCR_BIN_STATUS_ENOMEM, NULL);
        conn_swallow(c, vlen);
        return;
    }
    char mech[SASL_MECH_NAME_MAX + 1];
    memcpy(mech, req->key, req->h.keylen);
    mech[req->h.keylen] = '\0';
    struct sasl_session *s = sasl_restart(c);
    const char *out = NULL;
    unsigned outlen = 0;
    enum sasl_step_result res =
        req->cmd == MCR_BIN_OP_SASL_AUTH
            ? sasl_session_start(s, mech, req->value, (unsigned)vlen, &out, &outlen)
            : sasl_session_step(s, req->value, (unsigned)vlen, &out, &outlen);
    struct worker_stats *ws = &c->worker->stats;
    switch (res) {
    case SASL_STEP_OK:
        c->authenticated = true;
        STAT_INCR(ws, auth_cmds);
        reply_ok(c, &req->rc, "Authenticated", strlen("Authenticated"), 0);
        break;
    case SASL_STEP_CONTINUE: {
        struct resp *r = reply_start(c, &req->rc, MCR_BIN_STATUS_AUTH_CONTINUE, 0, 0, outlen, 0);
        if (r && outlen > 0 && !resp_add_head(r, out, outlen)) {
            char *copy = malloc(outlen);
            if (copy) {
                memcpy(copy, out, outlen);
                resp_set_heap(r, copy, outlen);
            } else {
                conn_set_close_after_write(c); /* the header promised a body */
            }
        }
        break;
    }
    case SASL_STEP_FAILED:
        STAT_INCR(ws, auth_cmds);
        STAT_INCR(ws, auth_errors);
        reply_error(c, &req->rc, MCR_BIN_STATUS_AUTH_ERROR, NULL);
        break;
    }
}

/* ---- the rest --------------------------------------------------------------------------- */
static void process_flush(struct conn *c, const struct bin_request *req)
{
    if (!settings.flush_enabled) {
        reply_error(c, &req->rc, MCR_BIN_STATUS_AUTH_ERROR, NULL);
        return;
    }
    uint32_t exptime = req->h.extlen == MCR_BIN_EXTRAS_FLUSH_LEN ? mcr_be_get32(req->extras) : 0;
    storage_flush_all(exptime > 0 ? clock_exptime((int64_t)exptime) : 0);
    STAT_INCR(&c->worker->stats, flush_cmds);
    reply_ok(c, &req->rc, NULL, 0, 0);
}

/* Runs one request whose header, extras and key have been consumed. */
static void dispatch(struct conn *c, struct bin_request *req)
{
    const struct mcr_bin_header *h = &req->h;
    uint32_t extlen = h->extlen, keylen = h->keylen, bodylen = h->bodylen;

    if (keylen + extlen > bodylen) {
        reply_error(c, &req->rc, MCR_BIN_STATUS_UNKNOWN_COMMAND, NULL);
        conn_set_close_after_write(c);
        return;
    }
    if (!sasl_allows(c, h->opcode)) {
        reply_error(c, &req->rc, MCR_BIN_STATUS_AUTH_ERROR, NULL);
        conn_set_close_after_write(c);
        return;
    }
    if (keylen > KEY_MAX_LENGTH) {
        protocol_error(c, req);
        return;
    }
    req->cmd = loud_opcode(h->opcode);
    req->rc.quiet = req->cmd != h->opcode;

    bool valid;
    switch (req->cmd) {
    case MCR_BIN_OP_VERSION:
    case MCR_BIN_OP_NOOP:
    case MCR_BIN_OP_QUIT:
    case MCR_BIN_OP_SASL_LIST_MECHS:
        valid = extlen == 0 && keylen == 0 && bodylen == 0;
        break;
    case MCR_BIN_OP_FLUSH:
        valid = keylen == 0 && bodylen == extlen && (extlen == 0 || extlen == 4);
        break;
    case MCR_BIN_OP_SET:
    case MCR_BIN_OP_ADD:
    case MCR_BIN_OP_REPLACE:
        valid = extlen == MCR_BIN_EXTRAS_STORE_LEN && keylen != 0;
        break;
    case MCR_BIN_OP_GET:
    case MCR_BIN_OP_GETK:
        valid = extlen == 0 && keylen > 0 && bodylen == keylen;
        break;
    case MCR_BIN_OP_DELETE:
        valid = extlen == 0 && keylen > 0 && bodylen == keylen;
        break;
    case MCR_BIN_OP_INCREMENT:
    case MCR_BIN_OP_DECREMENT:
        valid = extlen == MCR_BIN_EXTRAS_ARITH_LEN && keylen > 0 && bodylen == keylen + extlen;
        break;
    case MCR_BIN_OP_APPEND:
    case MCR_BIN_OP_PREPEND:
    case MCR_BIN_OP_SASL_AUTH:
    case MCR_BIN_OP_SASL_STEP:
        valid = extlen == 0 && keylen > 0;
        break;
    case MCR_BIN_OP_STAT:
        valid = extlen == 0;
        break;
    case MCR_BIN_OP_TOUCH:
    case MCR_BIN_OP_GAT:
    case MCR_BIN_OP_GATK:
        valid = extlen == MCR_BIN_EXTRAS_TOUCH_LEN && keylen != 0;
        break;
    default:
        /* memcached discards bodylen bytes counted after the key */
        if (log_enabled(LOG_CMDS))
            log_msg(LOG_CMDS, "<%d unknown opcode %02x", c->fd, h->opcode);
        unknown_command(c, req, bodylen);
        return;
    }
    if (!valid) {
        protocol_error(c, req);
        return;
    }

    switch (req->cmd) {
    case MCR_BIN_OP_VERSION: {
        const char *version = settings_version();
        reply_ok(c, &req->rc, version, strlen(version), 0);
        break;
    }
    case MCR_BIN_OP_NOOP:
        reply_ok(c, &req->rc, NULL, 0, 0);
        break;
    case MCR_BIN_OP_QUIT:
        reply_ok(c, &req->rc, NULL, 0, 0);
        conn_set_close_after_write(c);
        break;
    case MCR_BIN_OP_FLUSH:
        process_flush(c, req);
        break;
    case MCR_BIN_OP_SET:
    case MCR_BIN_OP_ADD:
    case MCR_BIN_OP_REPLACE:
    case MCR_BIN_OP_APPEND:
    case MCR_BIN_OP_PREPEND:
        process_update(c, req);
        break;
    case MCR_BIN_OP_GET:
    case MCR_BIN_OP_GETK:
    case MCR_BIN_OP_TOUCH:
    case MCR_BIN_OP_GAT:
    case MCR_BIN_OP_GATK:
        process_get(c, req);
        break;
    case MCR_BIN_OP_DELETE:
        process_delete(c, req);
        break;
    case MCR_BIN_OP_INCREMENT:
    case MCR_BIN_OP_DECREMENT:
        process_arith(c, req);
        break;
    case MCR_BIN_OP_STAT:
        process_stat(c, req);
        break;
    case MCR_BIN_OP_SASL_LIST_MECHS:
    case MCR_BIN_OP_SASL_AUTH:
    case MCR_BIN_OP_SASL_STEP:
        if (!settings.sasl) /* as memcached without -S */
            unknown_command(c, req, bodylen - keylen);
        else if (req->cmd == MCR_BIN_OP_SASL_LIST_MECHS)
            process_sasl_list_mechs(c, req);
        else
            process_sasl_auth(c, req);
        break;
    }
}

static enum proto_status bin_process(struct conn *c)
{
    size_t avail = conn_rlen(c);
    if (avail < MCR_BIN_HEADER_LEN)
        return PROTO_NEED_MORE;
    const unsigned char *data = (const unsigned char *)conn_rdata(c);
    struct bin_request req;
    mcr_bin_header_decode(data, &req.h);
    if (req.h.magic != MCR_BIN_MAGIC_REQUEST) {
        log_msg(LOG_WARN, "Invalid magic:  %x", req.h.magic);
        return PROTO_CLOSE;
    }
    size_t head = MCR_BIN_HEADER_LEN + (size_t)req.h.extlen + req.h.keylen;
    if (avail < head)
        return PROTO_NEED_MORE;
    req.cmd = req.h.opcode;
    req.rc.opcode = req.h.opcode;
    req.rc.quiet = false;
    req.rc.opaque = req.h.opaque;
    req.extras = data + MCR_BIN_HEADER_LEN;
    req.key = (const char *)req.extras + req.h.extlen;
    req.value = NULL;
    /* SASL data is small: wait for all of it, it is handled in one piece */
    if (settings.sasl &&
        (req.h.opcode == MCR_BIN_OP_SASL_AUTH || req.h.opcode == MCR_BIN_OP_SASL_STEP) &&
        req.h.extlen == 0 && req.h.keylen > 0 && req.h.keylen <= SASL_MECH_NAME_MAX &&
        req.h.bodylen >= req.h.keylen && req.h.bodylen - req.h.keylen <= SASL_DATA_MAX) {
        if (avail < MCR_BIN_HEADER_LEN + (size_t)req.h.bodylen)
            return PROTO_NEED_MORE;
        req.value = req.key + req.h.keylen;
        head = MCR_BIN_HEADER_LEN + (size_t)req.h.bodylen;
    }
    /* extras, key and value stay readable until the next receive */
    conn_consume(c, head);
    dispatch(c, &req);
    return PROTO_DONE;
}

const struct proto_engine proto_bin_engine = {
    .name = "binary",
    .process = bin_process,
    .value_done = bin_value_done,
};
