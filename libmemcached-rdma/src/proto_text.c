/* proto_text.c: the memcached text protocol: encoding requests and parsing
 * replies ("STORED", "VALUE k f n [cas]" + data + "END", "STAT k v", ...).
 * Maps every reply to the libmemcached return code. Knows nothing of
 * sockets: bytes come from the server's receive buffer (io_recv.c). */
#include "proto.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "io.h"
#include "stats.h"

#define LMR_TEXT_MAX_LINE 2048

static const char *const store_verbs[] = {"set", "add", "replace", "append", "prepend", "cas"};

static memcached_return_t head_printf(memcached_request_st *req, size_t max, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static memcached_return_t head_printf(memcached_request_st *req, size_t max, const char *fmt, ...)
{
    if (!lmr_request_reserve_head(req, max))
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(req->head, max, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= max)
        return MEMCACHED_FAILURE;
    req->head_length = (size_t)n;
    return MEMCACHED_SUCCESS;
}

static char *put_u64(char *p, uint64_t v)
{
    char digits[20];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    while (n > 0)
        *p++ = digits[--n];
    return p;
}

static char *put_i64(char *p, long long v)
{
    if (v >= 0)
        return put_u64(p, (uint64_t)v);
    *p++ = '-';
    return put_u64(p, (uint64_t)0 - (uint64_t)v);
}

/* "VERB KEY FLAGS EXPTIME BYTES [CAS] [noreply]\r\n", without printf: the
 * hot path of a blocking set. */
static memcached_return_t encode_store(memcached_request_st *req, const struct lmr_op_args *a,
                                       bool noreply)
{
    const char *verb = store_verbs[a->verb];
    size_t verb_length = strlen(verb);
    /* verb, key, four numbers of at most 20 digits and a sign, noreply, CRLF */
    if (!lmr_request_reserve_head(req, verb_length + a->key_length + 4 * 22 + 16))
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    char *p = req->head;
    memcpy(p, verb, verb_length);
    p += verb_length;
    *p++ = ' ';
    memcpy(p, a->key, a->key_length);
    p += a->key_length;
    *p++ = ' ';
    p = put_u64(p, a->flags);
    *p++ = ' ';
    p = put_i64(p, (long long)a->expiration);
    *p++ = ' ';
    p = put_u64(p, a->value_length);
    if (a->verb == LMR_CAS) {
        *p++ = ' ';
        p = put_u64(p, a->cas);
    }
    if (noreply) {
        memcpy(p, " noreply", 8);
        p += 8;
    }
    *p++ = '\r';
    *p++ = '\n';
    req->head_length = (size_t)(p - req->head);
    return MEMCACHED_SUCCESS;
}

/* "get KEY\r\n" ("gets" with SUPPORT_CAS or when asked for the CAS), without
 * printf: the hot path of a blocking get. */
static memcached_return_t encode_get(memcached_request_st *req, const struct lmr_op_args *a)
{
    const char *key = a->key;
    size_t key_length = a->key_length;
    bool cas = a->want_cas || req->client->behaviors.support_cas;
    size_t verb = cas ? 5 : 4;
    if (!lmr_request_reserve_head(req, verb + key_length + 2))
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    char *p = req->head;
    memcpy(p, cas ? "gets " : "get ", verb);
    memcpy(p + verb, key, key_length);
    memcpy(p + verb + key_length, "\r\n", 2);
    req->head_length = verb + key_length + 2;
    return MEMCACHED_SUCCESS;
}

static memcached_return_t encode_mget(memcached_request_st *req, const struct lmr_op_args *a)
{
    size_t need = 8;
    for (size_t i = 0; i < a->key_count; i++)
        need += a->key_lengths[i] + 1;
    if (!lmr_request_reserve_head(req, need))
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    /* "get" as libmemcached sends it, "gets" (replies carry the CAS) with
     * SUPPORT_CAS */
    const char *verb = req->client->behaviors.support_cas ? "gets" : "get";
    char *p = req->head;
    memcpy(p, verb, strlen(verb));
    p += strlen(verb);
    for (size_t i = 0; i < a->key_count; i++) {
        *p++ = ' ';
        memcpy(p, a->keys[i], a->key_lengths[i]);
        p += a->key_lengths[i];
    }
    *p++ = '\r';
    *p++ = '\n';
    req->head_length = (size_t)(p - req->head);
    return MEMCACHED_SUCCESS;
}

static memcached_return_t text_encode(memcached_request_st *req, const struct lmr_op_args *a,
                                      bool noreply)
{
    const char *nr = noreply ? " noreply" : "";
    int kl = (int)a->key_length;
    size_t max = a->key_length + 128;
    req->expects_reply = !noreply;
    switch (req->kind) {
    case LMR_OP_STORE:
        req->body = a->value;
        req->body_length = a->value_length;
        req->tail = "\r\n";
        req->tail_length = 2;
        return encode_store(req, a, noreply);
    case LMR_OP_GET:
        req->expects_reply = true;
        return encode_get(req, a);
    case LMR_OP_MGET:
        req->expects_reply = true;
        return encode_mget(req, a);
    case LMR_OP_DELETE:
        return head_printf(req, max, "delete %.*s%s\r\n", kl, a->key, nr);
    case LMR_OP_TOUCH:
        return head_printf(req, max, "touch %.*s %lld%s\r\n", kl, a->key, (long long)a->expiration,
                           nr);
    case LMR_OP_ARITH:
        if (a->with_initial)
            return MEMCACHED_INVALID_ARGUMENTS;
        return head_printf(req, max, "%s %.*s %" PRIu64 "%s\r\n", a->increment ? "incr" : "decr",
                           kl, a->key, a->delta, nr);
    case LMR_OP_EXIST:
        /* add of an already-expired item: stores nothing visible, answers
         * NOT_STORED exactly when the key exists */
        req->expects_reply = true;
        req->tail = "\r\n";
        req->tail_length = 2;
        return head_printf(req, max, "add %.*s 0 -1 0\r\n", kl, a->key);
    case LMR_OP_FLUSH:
        if (a->expiration != 0)
            return head_printf(req, max, "flush_all %lld%s\r\n", (long long)a->expiration, nr);
        return head_printf(req, max, "flush_all%s\r\n", nr);
    case LMR_OP_VERSION:
        req->expects_reply = true;
        return head_printf(req, max, "version\r\n");
    case LMR_OP_VERBOSITY:
        return head_printf(req, max, "verbosity %" PRIu32 "%s\r\n", a->number, nr);
    case LMR_OP_STATS:
        req->expects_reply = true;
        if (a->stat_args != NULL && a->stat_args[0] != '\0')
            return head_printf(req, strlen(a->stat_args) + 16, "stats %s\r\n", a->stat_args);
        return head_printf(req, max, "stats\r\n");
    }
    return MEMCACHED_NOT_SUPPORTED;
}

static bool line_is(const char *line, size_t len, const char *word)
{
    size_t wl = strlen(word);
    return len == wl && memcmp(line, word, wl) == 0;
}

static bool line_starts(const char *line, size_t len, const char *word)
{
    size_t wl = strlen(word);
    return len >= wl && memcmp(line, word, wl) == 0;
}

/* Error replies any command may get; MEMCACHED_MAXIMUM_RETURN if not one. */
static memcached_return_t error_reply(memcached_instance_st *srv, const char *line, size_t len)
{
    memcached_return_t rc = MEMCACHED_MAXIMUM_RETURN;
    if (line_is(line, len, "ERROR"))
        rc = MEMCACHED_ERROR;
    else if (line_starts(line, len, "CLIENT_ERROR"))
        rc = MEMCACHED_CLIENT_ERROR;
    else if (line_starts(line, len, "SERVER_ERROR object too large"))
        rc = MEMCACHED_E2BIG;
    else if (line_starts(line, len, "SERVER_ERROR out of memory"))
        rc = MEMCACHED_SERVER_MEMORY_ALLOCATION_FAILURE;
    else if (line_starts(line, len, "SERVER_ERROR"))
        rc = MEMCACHED_SERVER_ERROR;
    if (rc != MEMCACHED_MAXIMUM_RETURN)
        snprintf(srv->error_message, sizeof(srv->error_message), "%.*s", (int)len, line);
    return rc;
}

static bool parse_u64(const char *s, size_t len, uint64_t *out)
{
    if (len == 0 || len > 20)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* Splits line into at most max space-separated tokens. */
static size_t tokenize(const char *line, size_t len, const char **tok, size_t *tlen, size_t max)
{
    size_t n = 0, i = 0;
    while (i < len && n < max) {
        while (i < len && line[i] == ' ')
            i++;
        if (i >= len)
            break;
        size_t start = i;
        while (i < len && line[i] != ' ')
            i++;
        tok[n] = line + start;
        tlen[n] = i - start;
        n++;
    }
    return n;
}

/* "VALUE key flags bytes [cas]": sets up the value's destination. */
static memcached_return_t begin_value(memcached_instance_st *srv, const char *line, size_t len)
{
    memcached_request_st *req = srv->head;
    const char *tok[6];
    size_t tl[6];
    size_t n = tokenize(line, len, tok, tl, 6);
    uint64_t flags, bytes, cas = 0;
    if (n < 4 || n > 5 || !parse_u64(tok[2], tl[2], &flags) || flags > UINT32_MAX ||
        !parse_u64(tok[3], tl[3], &bytes) || bytes > SIZE_MAX / 2 ||
        (n == 5 && !parse_u64(tok[4], tl[4], &cas)))
        return MEMCACHED_UNKNOWN_READ_FAILURE;
    if (tl[1] >= MEMCACHED_MAX_KEY)
        return MEMCACHED_KEY_TOO_BIG;
    char *dest = NULL;
    if (req->kind == LMR_OP_MGET) {
        const char *key = tok[1];
        size_t key_length = tl[1];
        lmr_client_strip_namespace(srv->client, &key, &key_length);
        struct lmr_fetched *f = lmr_fetched_new(key, key_length, (size_t)bytes);
        if (f == NULL)
            return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
        f->flags = (uint32_t)flags;
        f->cas = cas;
        srv->body.fetched = f;
        dest = f->value;
    } else if (req->kind == LMR_OP_GET && !req->got_value) {
        req->got_value = true;
        req->flags = (uint32_t)flags;
        req->cas = cas;
        req->value_length = (size_t)bytes;
        dest = lmr_io_get_destination(req, (size_t)bytes);
        if (dest == NULL && req->sink != LMR_SINK_USER)
            return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    } else {
        return MEMCACHED_UNKNOWN_READ_FAILURE;
    }
    lmr_io_start_body(srv, dest, (size_t)bytes, 2);
    return MEMCACHED_SUCCESS;
}

static memcached_return_t finish_value(memcached_instance_st *srv)
{
    struct lmr_body *body = &srv->body;
    if (body->trailer[0] != '\r' || body->trailer[1] != '\n')
        return MEMCACHED_UNKNOWN_READ_FAILURE;
    if (body->fetched != NULL) {
        lmr_fetch_push(&srv->client->fetch, body->fetched);
        body->fetched = NULL;
    }
    body->active = false;
    return MEMCACHED_SUCCESS;
}

static memcached_return_t get_end(memcached_request_st *req)
{
    if (req->kind == LMR_OP_MGET)
        return MEMCACHED_SUCCESS;
    if (!req->got_value)
        return MEMCACHED_NOTFOUND;
    if (req->sink == LMR_SINK_USER && req->value_length > req->user_capacity)
        return MEMCACHED_E2BIG;
    return MEMCACHED_SUCCESS;
}

/* Handles one reply line for the head request. */
static memcached_return_t handle_line(memcached_instance_st *srv, const char *line, size_t len)
{
    memcached_request_st *req = srv->head;
    switch (req->kind) {
    case LMR_OP_GET:
    case LMR_OP_MGET:
        if (line_starts(line, len, "VALUE "))
            return begin_value(srv, line, len);
        if (line_is(line, len, "END")) {
            lmr_io_complete_head(srv, get_end(req));
            return MEMCACHED_SUCCESS;
        }
        break;
    case LMR_OP_STORE:
        if (line_is(line, len, "STORED")) {
            lmr_io_complete_head(srv, MEMCACHED_SUCCESS);
            return MEMCACHED_SUCCESS;
        }
        if (line_is(line, len, "NOT_STORED")) {
            lmr_io_complete_head(srv, MEMCACHED_NOTSTORED);
            return MEMCACHED_SUCCESS;
        }
        if (line_is(line, len, "EXISTS")) {
            lmr_io_complete_head(srv, MEMCACHED_DATA_EXISTS);
            return MEMCACHED_SUCCESS;
        }
        if (line_is(line, len, "NOT_FOUND")) {
            lmr_io_complete_head(srv, MEMCACHED_NOTFOUND);
            return MEMCACHED_SUCCESS;
        }
        break;
    case LMR_OP_EXIST:
        if (line_is(line, len, "NOT_STORED")) {
            lmr_io_complete_head(srv, MEMCACHED_SUCCESS);
            return MEMCACHED_SUCCESS;
        }
        if (line_is(line, len, "STORED")) {
            lmr_io_complete_head(srv, MEMCACHED_NOTFOUND);
            return MEMCACHED_SUCCESS;
        }
        break;
    case LMR_OP_DELETE:
    case LMR_OP_TOUCH:
        if (line_is(line, len, "DELETED") || line_is(line, len, "TOUCHED")) {
            lmr_io_complete_head(srv, MEMCACHED_SUCCESS);
            return MEMCACHED_SUCCESS;
        }
        if (line_is(line, len, "NOT_FOUND")) {
            lmr_io_complete_head(srv, MEMCACHED_NOTFOUND);
            return MEMCACHED_SUCCESS;
        }
        break;
    case LMR_OP_ARITH:
        if (line_is(line, len, "NOT_FOUND")) {
            lmr_io_complete_head(srv, MEMCACHED_NOTFOUND);
            return MEMCACHED_SUCCESS;
        }
        if (len > 0 && line[0] >= '0' && line[0] <= '9') {
            uint64_t v;
            if (!parse_u64(line, len, &v))
                return MEMCACHED_UNKNOWN_READ_FAILURE;
            req->number = v;
            lmr_io_complete_head(srv, MEMCACHED_SUCCESS);
            return MEMCACHED_SUCCESS;
        }
        break;
    case LMR_OP_FLUSH:
    case LMR_OP_VERBOSITY:
        if (line_is(line, len, "OK")) {
            lmr_io_complete_head(srv, MEMCACHED_SUCCESS);
            return MEMCACHED_SUCCESS;
        }
        break;
    case LMR_OP_VERSION:
        if (line_starts(line, len, "VERSION ")) {
            unsigned major = 0, minor = 0, micro = 0;
            char text[64];
            snprintf(text, sizeof(text), "%.*s", (int)(len - 8), line + 8);
            if (sscanf(text, "%u.%u.%u", &major, &minor, &micro) < 1)
                major = minor = micro = 0;
            srv->major_version = (uint8_t)major;
            srv->minor_version = (uint8_t)minor;
            srv->micro_version = (uint8_t)micro;
            lmr_io_complete_head(srv, MEMCACHED_SUCCESS);
            return MEMCACHED_SUCCESS;
        }
        break;
    case LMR_OP_STATS:
        if (line_starts(line, len, "ITEM ") && req->stats != NULL && req->stats->dumping) {
            const char *key = line + 5; /* "ITEM key [n b; t s]" (stats cachedump) */
            size_t kl = 0;
            while (5 + kl < len && key[kl] > ' ' && key[kl] < 0x7f)
                kl++;
            lmr_stat_sink_item(req->stats, key, kl);
            return MEMCACHED_SUCCESS;
        }
        if (line_starts(line, len, "STAT ")) {
            const char *name = line + 5;
            const char *sp = memchr(name, ' ', len - 5);
            if (sp == NULL)
                return MEMCACHED_UNKNOWN_READ_FAILURE;
            const char *value = sp + 1;
            if (req->stats != NULL)
                lmr_stat_sink_add(req->stats, name, (size_t)(sp - name), value,
                                  len - (size_t)(value - line));
            return MEMCACHED_SUCCESS;
        }
        if (line_is(line, len, "END")) {
            lmr_io_complete_head(srv, MEMCACHED_SUCCESS);
            return MEMCACHED_SUCCESS;
        }
        break;
    }
    memcached_return_t rc = error_reply(srv, line, len);
    if (rc == MEMCACHED_MAXIMUM_RETURN)
        return MEMCACHED_UNKNOWN_READ_FAILURE;
    lmr_io_complete_head(srv, rc);
    return MEMCACHED_SUCCESS;
}

static memcached_return_t text_parse(memcached_instance_st *srv)
{
    for (;;) {
        if (srv->body.active) {
            if (!lmr_io_feed_body(srv))
                return srv->body.no_memory ? MEMCACHED_MEMORY_ALLOCATION_FAILURE
                                           : MEMCACHED_SUCCESS;
            memcached_return_t rc = finish_value(srv);
            if (rc != MEMCACHED_SUCCESS)
                return rc;
            continue;
        }
        if (srv->rstart == srv->rend)
            return MEMCACHED_SUCCESS;
        if (srv->head == NULL || srv->head == srv->send_next)
            return MEMCACHED_UNKNOWN_READ_FAILURE; /* data nobody asked for */
        const char *start = srv->rbuf + srv->rstart;
        size_t avail = srv->rend - srv->rstart;
        const char *nl = memchr(start, '\n', avail);
        if (nl == NULL) {
            if (avail > LMR_TEXT_MAX_LINE)
                return MEMCACHED_UNKNOWN_READ_FAILURE;
            return MEMCACHED_SUCCESS;
        }
        size_t len = (size_t)(nl - start);
        if (len == 0 || start[len - 1] != '\r')
            return MEMCACHED_UNKNOWN_READ_FAILURE;
        srv->rstart += len + 1;
        memcached_return_t rc = handle_line(srv, start, len - 1);
        if (rc != MEMCACHED_SUCCESS)
            return rc;
    }
}

const struct lmr_proto lmr_proto_text = {
    .name = "text",
    .encode = text_encode,
    .parse = text_parse,
};

const struct lmr_proto *lmr_proto_of(const struct lmr_client *c)
{
    return c->behaviors.binary_protocol ? &lmr_proto_binary : &lmr_proto_text;
}
