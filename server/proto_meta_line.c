/*
 * proto_meta_line.c: the syntax of a meta command and of its reply: the
 * flags of a request parsed and checked as memcached 1.6.18 does
 * (meta_preparse), base64 keys (the b flag), and the reply line built flag
 * by flag and queued with its value (send_line) or as an error
 * (send_error). proto_meta.c runs the commands with these.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "items.h"
#include "log.h"
#include "numbers.h"
#include "proto_meta_internal.h"
#include "settings.h"
#include "tokenize.h"
#include "value_fetch.h"

/* ---- base64 keys (b flag) ----------------------------------------------------------------- */
static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_value(char ch)
{
    const char *p = ch ? strchr(b64_alphabet, ch) : NULL;
    return p ? (int)(p - b64_alphabet) : -1;
}

/* Decodes in place (the result is never longer); 0 on malformed input.
 * As memcached reads a base64 key: characters outside the alphabet and '='
 * are skipped; those left must come in groups of four; '=' counts as a zero
 * digit that drops one byte of its group (three or four of them in a
 * group are an error), and decoding ends after the first group with one. */
size_t b64_decode_inplace(char *s, size_t len)
{
    size_t digits = 0;
    for (size_t i = 0; i < len; i++)
        digits += s[i] == '=' || b64_value(s[i]) >= 0;
    if (digits == 0 || digits % 4 != 0)
        return 0;
    size_t out = 0;
    uint32_t group = 0;
    int in_group = 0, pad = 0;
    for (size_t i = 0; i < len; i++) {
        int v = s[i] == '=' ? 0 : b64_value(s[i]);
        if (v < 0)
            continue;
        pad += s[i] == '=';
        group = group << 6 | (uint32_t)v;
        if (++in_group < 4)
            continue;
        if (pad > 2)
            return 0;
        s[out++] = (char)(group >> 16);
        if (pad < 2)
            s[out++] = (char)(group >> 8 & 0xff);
        if (pad < 1)
            s[out++] = (char)(group & 0xff);
        if (pad > 0)
            break;
        group = 0;
        in_group = 0;
    }
    return out;
}

/* Encodes n bytes to dst (room for 4*ceil(n/3) bytes); returns the length. */
static size_t b64_encode(const unsigned char *src, size_t n, char *dst)
{
    size_t out = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w = (uint32_t)src[i] << 16;
        if (i + 1 < n)
            w |= (uint32_t)src[i + 1] << 8;
        if (i + 2 < n)
            w |= src[i + 2];
        dst[out++] = b64_alphabet[w >> 18 & 63];
        dst[out++] = b64_alphabet[w >> 12 & 63];
        dst[out++] = i + 1 < n ? b64_alphabet[w >> 6 & 63] : '=';
        dst[out++] = i + 2 < n ? b64_alphabet[w & 63] : '=';
    }
    return out;
}

/* ---- flags -------------------------------------------------------------------------------- */

/* memcached's flag pre-parse: duplicates and unknown flags stop at once;
 * bad arguments are noted (the last message wins) and parsing goes on.
 * Decodes a base64 key in place. Returns false with *errstr on error. */
bool meta_preparse(struct token *tokens, size_t start, struct meta_flags *of, const char **errstr)
{
    bool seen[128] = {false};
    int32_t t;
    for (size_t i = start; tokens[i].length != 0; i++) {
        unsigned char o = (unsigned char)tokens[i].value[0];
        const char *arg = tokens[i].value + 1;
        if (o >= 127 || seen[o]) {
            *errstr = "CLIENT_ERROR duplicate flag";
            return false;
        }
        seen[o] = true;
        switch (o) {
        case 'b': {
            size_t n = b64_decode_inplace(tokens[1].value, tokens[1].length);
            if (n == 0) {
                *errstr = "CLIENT_ERROR error decoding key";
                of->has_error = true;
            }
            tokens[1].length = n;
            of->key_binary = true;
            break;
        }
        case 'N':
            of->vivify = true;
            if (!num_parse_i32(arg, &t)) {
                *errstr = "CLIENT_ERROR bad token in command line format";
                of->has_error = true;
            } else {
                of->autoviv_exptime = clock_exptime(t);
            }
            break;
        case 'T':
            if (!num_parse_i32(arg, &t)) {
                *errstr = "CLIENT_ERROR bad token in command line format";
                of->has_error = true;
            } else {
                of->exptime = clock_exptime(t);
                of->new_ttl = true;
            }
            break;
        case 'R':
            if (!num_parse_i32(arg, &t)) {
                *errstr = "CLIENT_ERROR bad token in command line format";
                of->has_error = true;
            } else {
                of->recache_time = clock_exptime(t);
                of->has_recache = true;
            }
            break;
        case 'O': /* opaque; length checked when echoed */
        case 'P': /* accepted and ignored by memcached 1.6.18 (proxy hints) */
        case 'L':
        case 'k':
        case 's':
        case 't':
        case 'c':
        case 'f':
        case 'l':
        case 'h':
            break;
        case 'u':
            of->no_update = true;
            break;
        case 'v':
            of->value = true;
            break;
        case 'q':
            of->no_reply = true;
            break;
        case 'F':
            if (!num_parse_u32(arg, &of->client_flags))
                of->has_error = true;
            break;
        case 'C':
            if (!num_parse_u64(arg, &of->req_cas)) {
                *errstr = "CLIENT_ERROR bad token in command line format";
                of->has_error = true;
            } else {
                of->has_cas = true;
            }
            break;
        case 'M':
            if (tokens[i].length != 2) {
                *errstr = "CLIENT_ERROR incorrect length for M token";
                of->has_error = true;
            } else {
                of->mode = tokens[i].value[1];
            }
            break;
        case 'J':
            if (!num_parse_u64(arg, &of->initial)) {
                *errstr = "CLIENT_ERROR invalid numeric initial value";
                of->has_error = true;
            }
            break;
        case 'D':
            if (!num_parse_u64(arg, &of->delta)) {
                *errstr = "CLIENT_ERROR invalid numeric delta value";
                of->has_error = true;
            }
            break;
        case 'I':
            of->set_stale = true;
            break;
        default:
            *errstr = "CLIENT_ERROR invalid flag";
            return false;
        }
    }
    return !of->has_error;
}

/* ---- response lines ------------------------------------------------------------------------ */

void line_add(struct meta_line *l, const char *s, size_t n)
{
    if (n > sizeof(l->buf) - l->len)
        n = sizeof(l->buf) - l->len; /* cannot happen with bounded tokens */
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

void line_str(struct meta_line *l, const char *s)
{
    line_add(l, s, strlen(s));
}

void line_flag_u64(struct meta_line *l, char flag, uint64_t v)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof(tmp), " %c%llu", flag, (unsigned long long)v);
    line_add(l, tmp, (size_t)n);
}

/* The key as sent back: base64 when it came base64-encoded. */
void line_key_text(struct meta_line *l, const char *key, size_t nkey, bool binary)
{
    if (!binary) {
        line_add(l, key, nkey);
        return;
    }
    char enc[4 * (KEY_MAX_LENGTH / 3 + 1)];
    line_add(l, enc, b64_encode((const unsigned char *)key, nkey, enc));
}

/* " k<key>", with a trailing " b" when the key is binary. */
void line_key(struct meta_line *l, const char *key, size_t nkey, bool binary)
{
    line_add(l, " k", 2);
    line_key_text(l, key, nkey, binary);
    if (binary)
        line_add(l, " b", 2);
}

/* " O..." echo; false when the opaque is too long (memcached's error). */
bool line_opaque(struct meta_line *l, const struct token *tok)
{
    if (tok->length > META_MAX_OPAQUE)
        return false;
    line_add(l, " ", 1);
    line_add(l, tok->value, tok->length);
    return true;
}

/* mg's miss line: EN with the O and k flags it echoes; false when an
 * opaque is too long. */
bool miss_line(struct meta_line *l, const struct token *tokens, size_t ntokens, const char *key,
               size_t nkey, bool key_binary)
{
    l->len = 0;
    line_str(l, "EN");
    for (size_t i = 2; i < ntokens - 1; i++) {
        if (tokens[i].value[0] == 'O' && !line_opaque(l, &tokens[i]))
            return false;
        if (tokens[i].value[0] == 'k')
            line_key(l, key, nkey, key_binary);
    }
    return true;
}

/* Fills r with the line (inline when it fits, else as heap text). */
static bool resp_put_line(struct resp *r, const struct meta_line *l)
{
    if (l->len + 2 <= RESP_HEAD_MAX) {
        memcpy(r->head, l->buf, l->len);
        memcpy(r->head + l->len, "\r\n", 2);
        r->head_len = (uint16_t)(l->len + 2);
        return true;
    }
    char *text = malloc(l->len + 2);
    if (!text)
        return false;
    memcpy(text, l->buf, l->len);
    memcpy(text + l->len, "\r\n", 2);
    resp_set_heap(r, text, l->len + 2);
    return true;
}

/* Queues line + "\r\n", then it's value + "\r\n" when it is given (the
 * reference passes to the response). */
void send_line(struct conn *c, const struct meta_line *l, item *value_it,
               const struct meta_line *miss)
{
    struct resp *r = conn_resp_add(c);
    if (!r || !resp_put_line(r, l)) {
        if (value_it)
            item_release(value_it);
        if (r)
            conn_out_string(c, "SERVER_ERROR out of memory writing response");
        log_msg(LOG_WARN, "<%d out of memory queueing a meta reply", c->fd);
        return;
    }
    if (value_it) {
        char text[RESP_HEAD_MAX];
        size_t len = 0;
        if (miss && miss->len > 0 && miss->len + 2 <= sizeof(text)) {
            memcpy(text, miss->buf, miss->len);
            memcpy(text + miss->len, "\r\n", 2);
            len = miss->len + 2;
        }
        conn_resp_set_value(c, r, value_it, true, text, len);
    }
}

/* Errors are sent whatever q says. */
void send_error(struct conn *c, const char *msg)
{
    if (log_enabled(LOG_CMDS))
        log_msg(LOG_CMDS, ">%d %s", c->fd, msg);
    if (!conn_out_string(c, msg))
        log_msg(LOG_WARN, "<%d out of memory queueing a reply", c->fd);
}

/* Remaining TTL as memcached prints it: -1 for never. */
void line_ttl(struct meta_line *l, rel_time_t exptime)
{
    char tmp[24];
    int n;
    if (exptime == 0)
        n = snprintf(tmp, sizeof(tmp), " t-1");
    else
        n = snprintf(tmp, sizeof(tmp), " t%u", (unsigned)(uint32_t)(exptime - clock_now()));
    line_add(l, tmp, (size_t)n);
}

/* The TTL an item created by N ends with: memcached creates it without
 * one, then applies T and N in token order. */
rel_time_t created_exptime(const struct token *tokens, size_t ntokens, const struct meta_flags *of)
{
    rel_time_t exptime = 0;
    for (size_t i = 2; i < ntokens - 1; i++) {
        if (tokens[i].value[0] == 'T')
            exptime = of->exptime;
        else if (tokens[i].value[0] == 'N')
            exptime = of->autoviv_exptime;
    }
    return exptime;
}
