/* proto_bin.c: the memcached binary protocol: encoding requests as frames
 * (the layout is include/mcr/binary_wire.h, shared with the server) and
 * parsing response frames into libmemcached return codes.
 * Replies are matched to the head request by opaque; responses to quiet
 * (noreply) requests that already completed are skipped. No socket code. */
#include "proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcr/binary_wire.h"

#include "client.h"
#include "io.h"
#include "stats.h"

#define LMR_BIN_MAX_SMALL_FRAME (1u << 20)
/* just over 30 days: memcached reads it as an absolute time, long past */
#define LMR_EXIST_EXPIRATION (60u * 60 * 24 * 30 + 1)

static void put_header(uint8_t *h, uint8_t opcode, size_t key_length, uint8_t extras,
                       size_t body_length, uint32_t opaque, uint64_t cas)
{
    mcr_bin_request_encode(h, opcode, extras, (uint16_t)key_length, (uint32_t)body_length, opaque,
                           cas);
}

/* One frame with extras and key in the head; the value (if any) is the body. */
static memcached_return_t simple_frame(memcached_request_st *req, uint8_t opcode,
                                       const uint8_t *extras, uint8_t extras_length,
                                       const char *key, size_t key_length, size_t value_length)
{
    size_t need = MCR_BIN_HEADER_LEN + extras_length + key_length;
    if (!lmr_request_reserve_head(req, need))
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    uint8_t *h = (uint8_t *)req->head;
    put_header(h, opcode, key_length, extras_length, extras_length + key_length + value_length,
               req->opaque, 0);
    if (extras_length > 0)
        memcpy(h + MCR_BIN_HEADER_LEN, extras, extras_length);
    if (key_length > 0)
        memcpy(h + MCR_BIN_HEADER_LEN + extras_length, key, key_length);
    req->head_length = need;
    return MEMCACHED_SUCCESS;
}

static memcached_return_t encode_mget(memcached_request_st *req, const struct lmr_op_args *a)
{
    size_t need = MCR_BIN_HEADER_LEN; /* the closing NOOP */
    for (size_t i = 0; i < a->key_count; i++)
        need += MCR_BIN_HEADER_LEN + a->key_lengths[i];
    if (!lmr_request_reserve_head(req, need))
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    uint8_t *p = (uint8_t *)req->head;
    for (size_t i = 0; i < a->key_count; i++) {
        put_header(p, MCR_BIN_OP_GETKQ, a->key_lengths[i], 0, a->key_lengths[i], req->opaque, 0);
        memcpy(p + MCR_BIN_HEADER_LEN, a->keys[i], a->key_lengths[i]);
        p += MCR_BIN_HEADER_LEN + a->key_lengths[i];
    }
    put_header(p, MCR_BIN_OP_NOOP, 0, 0, 0, req->opaque, 0);
    req->head_length = need;
    return MEMCACHED_SUCCESS;
}

static memcached_return_t bin_encode(memcached_request_st *req, const struct lmr_op_args *a,
                                     bool noreply)
{
    uint8_t extras[MCR_BIN_EXTRAS_ARITH_LEN]; /* the longest extras sent */
    req->opaque = ++req->client->next_opaque;
    req->expects_reply = !noreply;
    switch (req->kind) {
    case LMR_OP_STORE: {
        static const uint8_t loud[] = {MCR_BIN_OP_SET,    MCR_BIN_OP_ADD,     MCR_BIN_OP_REPLACE,
                                       MCR_BIN_OP_APPEND, MCR_BIN_OP_PREPEND, MCR_BIN_OP_SET};
        static const uint8_t quiet[] = {MCR_BIN_OP_SETQ,     MCR_BIN_OP_ADDQ,
                                        MCR_BIN_OP_REPLACEQ, MCR_BIN_OP_APPENDQ,
                                        MCR_BIN_OP_PREPENDQ, MCR_BIN_OP_SETQ};
        uint8_t opcode = noreply ? quiet[a->verb] : loud[a->verb];
        uint8_t elen = 0;
        if (a->verb != LMR_APPEND && a->verb != LMR_PREPEND) {
            mcr_be_put32(extras, a->flags);
            mcr_be_put32(extras + 4, (uint32_t)a->expiration);
            elen = MCR_BIN_EXTRAS_STORE_LEN;
        }
        if (a->value_length > UINT32_MAX - MCR_BIN_EXTRAS_STORE_LEN - a->key_length)
            return MEMCACHED_E2BIG; /* the frame's body length is 32 bits */
        req->body = a->value;
        req->body_length = a->value_length;
        memcached_return_t rc =
            simple_frame(req, opcode, extras, elen, a->key, a->key_length, a->value_length);
        if (rc == MEMCACHED_SUCCESS && a->verb == LMR_CAS)
            mcr_be_put64((uint8_t *)req->head + 16, a->cas);
        return rc;
    }
    case LMR_OP_GET:
        req->expects_reply = true;
        return simple_frame(req, MCR_BIN_OP_GET, NULL, 0, a->key, a->key_length, 0);
    case LMR_OP_MGET:
        req->expects_reply = true;
        return encode_mget(req, a);
    case LMR_OP_DELETE:
        return simple_frame(req, noreply ? MCR_BIN_OP_DELETEQ : MCR_BIN_OP_DELETE, NULL, 0, a->key,
                            a->key_length, 0);
    case LMR_OP_TOUCH:
        req->expects_reply = true; /* there is no quiet touch */
        mcr_be_put32(extras, (uint32_t)a->expiration);
        return simple_frame(req, MCR_BIN_OP_TOUCH, extras, MCR_BIN_EXTRAS_TOUCH_LEN, a->key,
                            a->key_length, 0);
    case LMR_OP_ARITH: {
        uint8_t opcode = a->increment ? (noreply ? MCR_BIN_OP_INCREMENTQ : MCR_BIN_OP_INCREMENT)
                                      : (noreply ? MCR_BIN_OP_DECREMENTQ : MCR_BIN_OP_DECREMENT);
        mcr_be_put64(extras, a->delta);
        mcr_be_put64(extras + 8, a->initial);
        mcr_be_put32(extras + 16,
                     a->with_initial ? (uint32_t)a->expiration : MCR_BIN_ARITH_NO_CREATE);
        return simple_frame(req, opcode, extras, MCR_BIN_EXTRAS_ARITH_LEN, a->key, a->key_length,
                            0);
    }
    case LMR_OP_EXIST:
        /* add of an item whose expiration (an absolute time in 1970) has
         * passed: stores nothing visible, EEXISTS exactly when present */
        req->expects_reply = true;
        mcr_be_put32(extras, 0);
        mcr_be_put32(extras + 4, LMR_EXIST_EXPIRATION);
        return simple_frame(req, MCR_BIN_OP_ADD, extras, MCR_BIN_EXTRAS_STORE_LEN, a->key,
                            a->key_length, 0);
    case LMR_OP_FLUSH:
        mcr_be_put32(extras, (uint32_t)a->expiration);
        return simple_frame(req, noreply ? MCR_BIN_OP_FLUSHQ : MCR_BIN_OP_FLUSH, extras,
                            a->expiration ? MCR_BIN_EXTRAS_FLUSH_LEN : 0, NULL, 0, 0);
    case LMR_OP_VERSION:
        req->expects_reply = true;
        return simple_frame(req, MCR_BIN_OP_VERSION, NULL, 0, NULL, 0, 0);
    case LMR_OP_VERBOSITY:
        req->expects_reply = true;
        mcr_be_put32(extras, a->number);
        return simple_frame(req, MCR_BIN_OP_VERBOSITY, extras, MCR_BIN_EXTRAS_VERBOSITY_LEN, NULL,
                            0, 0);
    case LMR_OP_STATS: {
        req->expects_reply = true;
        size_t alen = a->stat_args != NULL ? strlen(a->stat_args) : 0;
        return simple_frame(req, MCR_BIN_OP_STAT, NULL, 0, a->stat_args, alen, 0);
    }
    }
    return MEMCACHED_NOT_SUPPORTED;
}

static memcached_return_t status_code(uint16_t status)
{
    switch (status) {
    case MCR_BIN_STATUS_SUCCESS:
        return MEMCACHED_SUCCESS;
    case MCR_BIN_STATUS_KEY_ENOENT:
        return MEMCACHED_NOTFOUND;
    case MCR_BIN_STATUS_KEY_EEXISTS:
        return MEMCACHED_DATA_EXISTS;
    case MCR_BIN_STATUS_E2BIG:
        return MEMCACHED_E2BIG;
    case MCR_BIN_STATUS_EINVAL:
        return MEMCACHED_INVALID_ARGUMENTS;
    case MCR_BIN_STATUS_NOT_STORED:
        return MEMCACHED_NOTSTORED;
    case MCR_BIN_STATUS_AUTH_ERROR:
        return MEMCACHED_AUTH_FAILURE;
    case MCR_BIN_STATUS_AUTH_CONTINUE:
        return MEMCACHED_AUTH_CONTINUE;
    case MCR_BIN_STATUS_ENOMEM:
        return MEMCACHED_SERVER_MEMORY_ALLOCATION_FAILURE;
    case MCR_BIN_STATUS_NOT_SUPPORTED:
    case MCR_BIN_STATUS_UNKNOWN_COMMAND:
        return MEMCACHED_NOT_SUPPORTED;
    case MCR_BIN_STATUS_EINTERNAL:
    case MCR_BIN_STATUS_EBUSY:
    case MCR_BIN_STATUS_ETMPFAIL:
        return MEMCACHED_SERVER_ERROR;
    default:
        return MEMCACHED_UNKNOWN_READ_FAILURE; /* includes DELTA_BADVAL, as libmemcached */
    }
}

static bool is_quiet(uint8_t opcode)
{
    switch (opcode) {
    case MCR_BIN_OP_GETQ:
    case MCR_BIN_OP_GETKQ:
    case MCR_BIN_OP_SETQ:
    case MCR_BIN_OP_ADDQ:
    case MCR_BIN_OP_REPLACEQ:
    case MCR_BIN_OP_DELETEQ:
    case MCR_BIN_OP_INCREMENTQ:
    case MCR_BIN_OP_DECREMENTQ:
    case MCR_BIN_OP_QUITQ:
    case MCR_BIN_OP_FLUSHQ:
    case MCR_BIN_OP_APPENDQ:
    case MCR_BIN_OP_PREPENDQ:
        return true;
    default:
        return false;
    }
}

/* An answer to a get: GET, or GETK (the key comes back too), which some
 * servers send and libmemcached takes. */
static bool answers_get(uint8_t opcode)
{
    return opcode == MCR_BIN_OP_GET || opcode == MCR_BIN_OP_GETK;
}

/* A GET's value has fully arrived. */
static void finish_value(memcached_instance_st *srv)
{
    struct lmr_body *body = &srv->body;
    body->active = false;
    if (body->fetched != NULL) {
        lmr_fetch_push(&srv->client->fetch, body->fetched);
        body->fetched = NULL;
        return;
    }
    memcached_request_st *req = srv->head;
    if (req == NULL || req->kind != LMR_OP_GET || !answers_get(srv->frame_opcode) ||
        req->opaque != srv->frame_opaque)
        return; /* a skipped frame (a multi-get's miss or stray frame) */
    if (srv->frame_status != MCR_BIN_STATUS_SUCCESS) {
        lmr_io_complete_head(srv, status_code(srv->frame_status));
        return;
    }
    bool too_big = req->sink == LMR_SINK_USER && req->value_length > req->user_capacity;
    lmr_io_complete_head(srv, too_big ? MEMCACHED_E2BIG : MEMCACHED_SUCCESS);
}

/* Handles a frame whose header, extras and key are buffered; `value` points
 * at the value when the whole frame is buffered, else NULL. Returns true if
 * it started a body for the value. */
static memcached_return_t handle_frame(memcached_instance_st *srv, const struct mcr_bin_header *h,
                                       const uint8_t *extras, const char *key, const char *value,
                                       size_t value_length, bool *started)
{
    memcached_request_st *req = srv->head;
    uint8_t opcode = h->opcode;
    uint16_t status = h->vbucket_or_status;
    bool has_flags = h->extlen >= MCR_BIN_EXTRAS_GET_REPLY_LEN;
    *started = false;

    /* a get's value streams (value is NULL here): a frame of another
     * command is a server out of step (it used to complete the get with an
     * empty value and leave the stream mid-frame) */
    if (req->kind == LMR_OP_GET && !answers_get(opcode))
        return MEMCACHED_PROTOCOL_ERROR;
    if (req->kind == LMR_OP_GET) {
        char *dest = NULL;
        if (status == MCR_BIN_STATUS_SUCCESS) {
            req->got_value = true;
            req->flags = has_flags ? mcr_be_get32(extras) : 0;
            req->cas = h->cas;
            req->value_length = value_length;
            dest = lmr_io_get_destination(req, value_length);
            if (dest == NULL && req->sink != LMR_SINK_USER)
                return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
        }
        lmr_io_start_body(srv, dest, value_length, 0);
        *started = true;
        return MEMCACHED_SUCCESS;
    }
    if (req->kind == LMR_OP_MGET) {
        if (opcode == MCR_BIN_OP_NOOP) {
            lmr_io_complete_head(srv, MEMCACHED_SUCCESS);
            return MEMCACHED_SUCCESS;
        }
        if (status == MCR_BIN_STATUS_SUCCESS) {
            size_t key_length = h->keylen;
            lmr_client_strip_namespace(srv->client, &key, &key_length);
            struct lmr_fetched *f = lmr_fetched_new(key, key_length, value_length);
            if (f == NULL)
                return key_length >= MEMCACHED_MAX_KEY ? MEMCACHED_KEY_TOO_BIG
                                                       : MEMCACHED_MEMORY_ALLOCATION_FAILURE;
            f->flags = has_flags ? mcr_be_get32(extras) : 0;
            f->cas = h->cas;
            srv->body.fetched = f;
            lmr_io_start_body(srv, f->value, value_length, 0);
            *started = true;
            return MEMCACHED_SUCCESS;
        }
        /* a miss or error for one key: skip it */
        lmr_io_start_body(srv, NULL, value_length, 0);
        *started = true;
        return MEMCACHED_SUCCESS;
    }
    memcached_return_t rc = status_code(status);
    switch (req->kind) {
    case LMR_OP_EXIST:
        rc = status == MCR_BIN_STATUS_KEY_EEXISTS ? MEMCACHED_SUCCESS
             : status == MCR_BIN_STATUS_SUCCESS   ? MEMCACHED_NOTFOUND
                                                  : rc;
        break;
    case LMR_OP_ARITH:
        if (rc == MEMCACHED_SUCCESS) {
            if (value_length != MCR_BIN_ARITH_REPLY_LEN)
                return MEMCACHED_PROTOCOL_ERROR;
            req->number = mcr_be_get64((const uint8_t *)value);
        }
        break;
    case LMR_OP_VERSION:
        if (rc == MEMCACHED_SUCCESS) {
            char text[64];
            unsigned major = 0, minor = 0, micro = 0;
            snprintf(text, sizeof(text), "%.*s", (int)value_length, value);
            if (sscanf(text, "%u.%u.%u", &major, &minor, &micro) < 1)
                major = minor = micro = 0;
            srv->major_version = (uint8_t)major;
            srv->minor_version = (uint8_t)minor;
            srv->micro_version = (uint8_t)micro;
        }
        break;
    case LMR_OP_STATS: {
        size_t key_length = h->keylen;
        if (rc == MEMCACHED_SUCCESS && key_length > 0) {
            if (req->stats != NULL)
                lmr_stat_sink_add(req->stats, key, key_length, value, value_length);
            return MEMCACHED_SUCCESS; /* more to come */
        }
        break;
    }
    default:
        break;
    }
    if (rc != MEMCACHED_SUCCESS && value_length > 0)
        snprintf(srv->error_message, sizeof(srv->error_message), "%.*s", (int)value_length, value);
    lmr_io_complete_head(srv, rc);
    return MEMCACHED_SUCCESS;
}

static memcached_return_t bin_parse(memcached_instance_st *srv)
{
    for (;;) {
        if (srv->body.active) {
            if (!lmr_io_feed_body(srv))
                return srv->body.no_memory ? MEMCACHED_MEMORY_ALLOCATION_FAILURE
                                           : MEMCACHED_SUCCESS;
            finish_value(srv);
            continue;
        }
        size_t avail = srv->rend - srv->rstart;
        if (avail == 0)
            return MEMCACHED_SUCCESS;
        const uint8_t *wire = (const uint8_t *)srv->rbuf + srv->rstart;
        if (wire[0] != MCR_BIN_MAGIC_RESPONSE)
            return MEMCACHED_PROTOCOL_ERROR;
        if (avail < MCR_BIN_HEADER_LEN)
            return MEMCACHED_SUCCESS;
        struct mcr_bin_header h;
        mcr_bin_header_decode(wire, &h);
        size_t key_length = h.keylen;
        size_t extras_length = h.extlen;
        size_t body_length = h.bodylen;
        uint32_t opaque = h.opaque;
        if (extras_length + key_length > body_length || key_length > 4096)
            return MEMCACHED_PROTOCOL_ERROR;
        size_t value_length = body_length - extras_length - key_length;
        memcached_request_st *req = srv->head;
        bool for_head = req != NULL && req != srv->send_next && req->opaque == opaque;
        if (!for_head && !is_quiet(h.opcode))
            return MEMCACHED_PROTOCOL_ERROR;
        bool value_streams = for_head && (req->kind == LMR_OP_GET || req->kind == LMR_OP_MGET);
        size_t need = MCR_BIN_HEADER_LEN + extras_length + key_length;
        if (!value_streams && for_head) {
            if (body_length > LMR_BIN_MAX_SMALL_FRAME)
                return MEMCACHED_PROTOCOL_ERROR;
            need += value_length;
        }
        if (avail < need)
            return MEMCACHED_SUCCESS;
        srv->frame_opcode = h.opcode;
        srv->frame_status = h.vbucket_or_status;
        srv->frame_opaque = opaque;
        const uint8_t *extras = wire + MCR_BIN_HEADER_LEN;
        const char *key = (const char *)extras + extras_length;
        const char *value = key + key_length;
        if (!for_head) {
            /* the error answer of a quiet request that already completed */
            srv->rstart += MCR_BIN_HEADER_LEN + extras_length + key_length;
            lmr_io_start_body(srv, NULL, value_length, 0);
            continue;
        }
        bool started = false;
        srv->rstart += need;
        memcached_return_t rc = handle_frame(srv, &h, extras, key, value_streams ? NULL : value,
                                             value_length, &started);
        if (rc != MEMCACHED_SUCCESS)
            return rc;
    }
}

const struct lmr_proto lmr_proto_binary = {
    .name = "binary",
    .encode = bin_encode,
    .parse = bin_parse,
};
