/* proto_bin.c: the memcached binary protocol: encoding requests as frames
 * (bin_wire.h) and parsing response frames into libmemcached return codes.
 * Replies are matched to the head request by opaque; responses to quiet
 * (noreply) requests that already completed are skipped. No socket code. */
#include "proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bin_wire.h"
#include "client.h"
#include "io.h"
#include "stats.h"

#define LMR_BIN_MAX_SMALL_FRAME (1u << 20)
/* just over 30 days: memcached reads it as an absolute time, long past */
#define LMR_EXIST_EXPIRATION (60u * 60 * 24 * 30 + 1)

static void put_header(uint8_t *h, uint8_t opcode, size_t key_length, uint8_t extras,
                       size_t body_length, uint32_t opaque, uint64_t cas)
{
    memset(h, 0, LMR_BIN_HEADER_SIZE);
    h[0] = LMR_BIN_MAGIC_REQUEST;
    h[1] = opcode;
    lmr_put16(h + 2, (uint16_t)key_length);
    h[4] = extras;
    lmr_put32(h + 8, (uint32_t)body_length);
    lmr_put32(h + 12, opaque);
    lmr_put64(h + 16, cas);
}

/* One frame with extras and key in the head; the value (if any) is the body. */
static memcached_return_t simple_frame(memcached_request_st *req, uint8_t opcode,
                                       const uint8_t *extras, uint8_t extras_length,
                                       const char *key, size_t key_length, size_t value_length)
{
    size_t need = LMR_BIN_HEADER_SIZE + extras_length + key_length;
    if (!lmr_request_reserve_head(req, need))
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    uint8_t *h = (uint8_t *)req->head;
    put_header(h, opcode, key_length, extras_length, extras_length + key_length + value_length,
               req->opaque, 0);
    if (extras_length > 0)
        memcpy(h + LMR_BIN_HEADER_SIZE, extras, extras_length);
    if (key_length > 0)
        memcpy(h + LMR_BIN_HEADER_SIZE + extras_length, key, key_length);
    req->head_length = need;
    return MEMCACHED_SUCCESS;
}

static memcached_return_t encode_mget(memcached_request_st *req, const struct lmr_op_args *a)
{
    size_t need = LMR_BIN_HEADER_SIZE; /* the closing NOOP */
    for (size_t i = 0; i < a->key_count; i++)
        need += LMR_BIN_HEADER_SIZE + a->key_lengths[i];
    if (!lmr_request_reserve_head(req, need))
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    uint8_t *p = (uint8_t *)req->head;
    for (size_t i = 0; i < a->key_count; i++) {
        put_header(p, LMR_BIN_GETKQ, a->key_lengths[i], 0, a->key_lengths[i], req->opaque, 0);
        memcpy(p + LMR_BIN_HEADER_SIZE, a->keys[i], a->key_lengths[i]);
        p += LMR_BIN_HEADER_SIZE + a->key_lengths[i];
    }
    put_header(p, LMR_BIN_NOOP, 0, 0, 0, req->opaque, 0);
    req->head_length = need;
    return MEMCACHED_SUCCESS;
}

static memcached_return_t bin_encode(memcached_request_st *req, const struct lmr_op_args *a,
                                     bool noreply)
{
    uint8_t extras[20];
    req->opaque = ++req->client->next_opaque;
    req->expects_reply = !noreply;
    switch (req->kind) {
    case LMR_OP_STORE: {
        static const uint8_t loud[] = {LMR_BIN_SET,    LMR_BIN_ADD,     LMR_BIN_REPLACE,
                                       LMR_BIN_APPEND, LMR_BIN_PREPEND, LMR_BIN_SET};
        static const uint8_t quiet[] = {LMR_BIN_SETQ,    LMR_BIN_ADDQ,     LMR_BIN_REPLACEQ,
                                        LMR_BIN_APPENDQ, LMR_BIN_PREPENDQ, LMR_BIN_SETQ};
        uint8_t opcode = noreply ? quiet[a->verb] : loud[a->verb];
        uint8_t elen = 0;
        if (a->verb != LMR_APPEND && a->verb != LMR_PREPEND) {
            lmr_put32(extras, a->flags);
            lmr_put32(extras + 4, (uint32_t)a->expiration);
            elen = 8;
        }
        if (a->value_length > UINT32_MAX - 8 - a->key_length)
            return MEMCACHED_E2BIG; /* the frame's body length is 32 bits */
        req->body = a->value;
        req->body_length = a->value_length;
        memcached_return_t rc =
            simple_frame(req, opcode, extras, elen, a->key, a->key_length, a->value_length);
        if (rc == MEMCACHED_SUCCESS && a->verb == LMR_CAS)
            lmr_put64((uint8_t *)req->head + 16, a->cas);
        return rc;
    }
    case LMR_OP_GET:
        req->expects_reply = true;
        return simple_frame(req, LMR_BIN_GET, NULL, 0, a->key, a->key_length, 0);
    case LMR_OP_MGET:
        req->expects_reply = true;
        return encode_mget(req, a);
    case LMR_OP_DELETE:
        return simple_frame(req, noreply ? LMR_BIN_DELETEQ : LMR_BIN_DELETE, NULL, 0, a->key,
                            a->key_length, 0);
    case LMR_OP_TOUCH:
        req->expects_reply = true; /* there is no quiet touch */
        lmr_put32(extras, (uint32_t)a->expiration);
        return simple_frame(req, LMR_BIN_TOUCH, extras, 4, a->key, a->key_length, 0);
    case LMR_OP_ARITH: {
        uint8_t opcode = a->increment ? (noreply ? LMR_BIN_INCREMENTQ : LMR_BIN_INCREMENT)
                                      : (noreply ? LMR_BIN_DECREMENTQ : LMR_BIN_DECREMENT);
        lmr_put64(extras, a->delta);
        lmr_put64(extras + 8, a->initial);
        lmr_put32(extras + 16, a->with_initial ? (uint32_t)a->expiration : 0xffffffffu);
        return simple_frame(req, opcode, extras, 20, a->key, a->key_length, 0);
    }
    case LMR_OP_EXIST:
        /* add of an item whose expiration (an absolute time in 1970) has
         * passed: stores nothing visible, EEXISTS exactly when present */
        req->expects_reply = true;
        lmr_put32(extras, 0);
        lmr_put32(extras + 4, LMR_EXIST_EXPIRATION);
        return simple_frame(req, LMR_BIN_ADD, extras, 8, a->key, a->key_length, 0);
    case LMR_OP_FLUSH:
        lmr_put32(extras, (uint32_t)a->expiration);
        return simple_frame(req, noreply ? LMR_BIN_FLUSHQ : LMR_BIN_FLUSH, extras,
                            a->expiration ? 4 : 0, NULL, 0, 0);
    case LMR_OP_VERSION:
        req->expects_reply = true;
        return simple_frame(req, LMR_BIN_VERSION, NULL, 0, NULL, 0, 0);
    case LMR_OP_VERBOSITY:
        req->expects_reply = true;
        lmr_put32(extras, a->number);
        return simple_frame(req, LMR_BIN_VERBOSITY, extras, 4, NULL, 0, 0);
    case LMR_OP_STATS: {
        req->expects_reply = true;
        size_t alen = a->stat_args != NULL ? strlen(a->stat_args) : 0;
        return simple_frame(req, LMR_BIN_STAT, NULL, 0, a->stat_args, alen, 0);
    }
    }
    return MEMCACHED_NOT_SUPPORTED;
}

static memcached_return_t status_code(uint16_t status)
{
    switch (status) {
    case LMR_BIN_STATUS_SUCCESS:
        return MEMCACHED_SUCCESS;
    case LMR_BIN_STATUS_KEY_ENOENT:
        return MEMCACHED_NOTFOUND;
    case LMR_BIN_STATUS_KEY_EEXISTS:
        return MEMCACHED_DATA_EXISTS;
    case LMR_BIN_STATUS_E2BIG:
        return MEMCACHED_E2BIG;
    case LMR_BIN_STATUS_EINVAL:
        return MEMCACHED_INVALID_ARGUMENTS;
    case LMR_BIN_STATUS_NOT_STORED:
        return MEMCACHED_NOTSTORED;
    case LMR_BIN_STATUS_AUTH_ERROR:
        return MEMCACHED_AUTH_FAILURE;
    case LMR_BIN_STATUS_AUTH_CONTINUE:
        return MEMCACHED_AUTH_CONTINUE;
    case LMR_BIN_STATUS_ENOMEM:
        return MEMCACHED_SERVER_MEMORY_ALLOCATION_FAILURE;
    case LMR_BIN_STATUS_NOT_SUPPORTED:
    case LMR_BIN_STATUS_UNKNOWN_COMMAND:
        return MEMCACHED_NOT_SUPPORTED;
    case LMR_BIN_STATUS_EINTERNAL:
    case LMR_BIN_STATUS_EBUSY:
    case LMR_BIN_STATUS_ETMPFAIL:
        return MEMCACHED_SERVER_ERROR;
    default:
        return MEMCACHED_UNKNOWN_READ_FAILURE; /* includes DELTA_BADVAL, as libmemcached */
    }
}

static bool is_quiet(uint8_t opcode)
{
    switch (opcode) {
    case LMR_BIN_GETQ:
    case LMR_BIN_GETKQ:
    case LMR_BIN_SETQ:
    case LMR_BIN_ADDQ:
    case LMR_BIN_REPLACEQ:
    case LMR_BIN_DELETEQ:
    case LMR_BIN_INCREMENTQ:
    case LMR_BIN_DECREMENTQ:
    case LMR_BIN_QUITQ:
    case LMR_BIN_FLUSHQ:
    case LMR_BIN_APPENDQ:
    case LMR_BIN_PREPENDQ:
        return true;
    default:
        return false;
    }
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
    if (req == NULL || srv->frame_opcode != LMR_BIN_GET || req->opaque != srv->frame_opaque)
        return; /* a skipped frame */
    if (srv->frame_status != LMR_BIN_STATUS_SUCCESS) {
        lmr_io_complete_head(srv, status_code(srv->frame_status));
        return;
    }
    bool too_big = req->sink == LMR_SINK_USER && req->value_length > req->user_capacity;
    lmr_io_complete_head(srv, too_big ? MEMCACHED_E2BIG : MEMCACHED_SUCCESS);
}

static char *get_destination(memcached_request_st *req, size_t length)
{
    if (req->sink == LMR_SINK_USER)
        return length <= req->user_capacity ? req->user_buffer : NULL;
    if (req->lib_capacity < length + 1) {
        char *nb = realloc(req->lib_buffer, length + 1);
        if (nb == NULL)
            return NULL;
        req->lib_buffer = nb;
        req->lib_capacity = length + 1;
    }
    req->lib_buffer[length] = '\0';
    return req->lib_buffer;
}

/* Handles a frame whose header, extras and key are buffered; `value` points
 * at the value when the whole frame is buffered, else NULL. Returns true if
 * it started a body for the value. */
static memcached_return_t handle_frame(memcached_instance_st *srv, const uint8_t *h,
                                       const uint8_t *extras, const char *key, const char *value,
                                       size_t value_length, bool *started)
{
    memcached_request_st *req = srv->head;
    uint8_t opcode = h[1];
    uint16_t status = lmr_get16(h + 6);
    uint8_t extras_length = h[4];
    *started = false;

    if (req->kind == LMR_OP_GET && opcode == LMR_BIN_GET) {
        char *dest = NULL;
        if (status == LMR_BIN_STATUS_SUCCESS) {
            req->got_value = true;
            req->flags = extras_length >= 4 ? lmr_get32(extras) : 0;
            req->cas = lmr_get64(h + 16);
            req->value_length = value_length;
            dest = get_destination(req, value_length);
            if (dest == NULL && req->sink != LMR_SINK_USER)
                return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
        }
        lmr_io_start_body(srv, dest, value_length, 0);
        *started = true;
        return MEMCACHED_SUCCESS;
    }
    if (req->kind == LMR_OP_MGET) {
        if (opcode == LMR_BIN_NOOP) {
            lmr_io_complete_head(srv, MEMCACHED_SUCCESS);
            return MEMCACHED_SUCCESS;
        }
        if ((opcode == LMR_BIN_GETKQ || opcode == LMR_BIN_GETK) &&
            status == LMR_BIN_STATUS_SUCCESS) {
            size_t key_length = lmr_get16(h + 2);
            lmr_client_strip_namespace(srv->client, &key, &key_length);
            struct lmr_fetched *f = lmr_fetched_new(key, key_length, value_length);
            if (f == NULL)
                return key_length >= MEMCACHED_MAX_KEY ? MEMCACHED_KEY_TOO_BIG
                                                       : MEMCACHED_MEMORY_ALLOCATION_FAILURE;
            f->flags = extras_length >= 4 ? lmr_get32(extras) : 0;
            f->cas = lmr_get64(h + 16);
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
        rc = status == LMR_BIN_STATUS_KEY_EEXISTS ? MEMCACHED_SUCCESS
             : status == LMR_BIN_STATUS_SUCCESS   ? MEMCACHED_NOTFOUND
                                                  : rc;
        break;
    case LMR_OP_ARITH:
        if (rc == MEMCACHED_SUCCESS) {
            if (value_length != 8)
                return MEMCACHED_PROTOCOL_ERROR;
            req->number = lmr_get64((const uint8_t *)value);
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
        size_t key_length = lmr_get16(h + 2);
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
                return MEMCACHED_SUCCESS;
            finish_value(srv);
            continue;
        }
        size_t avail = srv->rend - srv->rstart;
        if (avail == 0)
            return MEMCACHED_SUCCESS;
        const uint8_t *h = (const uint8_t *)srv->rbuf + srv->rstart;
        if (h[0] != LMR_BIN_MAGIC_RESPONSE)
            return MEMCACHED_PROTOCOL_ERROR;
        if (avail < LMR_BIN_HEADER_SIZE)
            return MEMCACHED_SUCCESS;
        size_t key_length = lmr_get16(h + 2);
        size_t extras_length = h[4];
        size_t body_length = lmr_get32(h + 8);
        uint32_t opaque = lmr_get32(h + 12);
        if (extras_length + key_length > body_length || key_length > 4096)
            return MEMCACHED_PROTOCOL_ERROR;
        size_t value_length = body_length - extras_length - key_length;
        memcached_request_st *req = srv->head;
        bool for_head = req != NULL && req != srv->send_next && req->opaque == opaque;
        if (!for_head && !is_quiet(h[1]))
            return MEMCACHED_PROTOCOL_ERROR;
        bool value_streams = for_head && (req->kind == LMR_OP_GET || req->kind == LMR_OP_MGET);
        size_t need = LMR_BIN_HEADER_SIZE + extras_length + key_length;
        if (!value_streams && for_head) {
            if (body_length > LMR_BIN_MAX_SMALL_FRAME)
                return MEMCACHED_PROTOCOL_ERROR;
            need += value_length;
        }
        if (avail < need)
            return MEMCACHED_SUCCESS;
        srv->frame_opcode = h[1];
        srv->frame_status = lmr_get16(h + 6);
        srv->frame_opaque = opaque;
        const uint8_t *extras = h + LMR_BIN_HEADER_SIZE;
        const char *key = (const char *)extras + extras_length;
        const char *value = key + key_length;
        if (!for_head) {
            /* the error answer of a quiet request that already completed */
            srv->rstart += LMR_BIN_HEADER_SIZE + extras_length + key_length;
            lmr_io_start_body(srv, NULL, value_length, 0);
            continue;
        }
        bool started = false;
        srv->rstart += need;
        memcached_return_t rc =
            handle_frame(srv, h, extras, key, value_streams ? NULL : value, value_length, &started);
        if (rc != MEMCACHED_SUCCESS)
            return rc;
    }
}

const struct lmr_proto lmr_proto_binary = {
    .name = "binary",
    .encode = bin_encode,
    .parse = bin_parse,
};
