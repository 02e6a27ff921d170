/*
 * proto_text.c: memcached's text protocol with memcached 1.6's replies.
 *
 * process() takes one request line from the read buffer, splits it into
 * tokens the way memcached does (spaces only, at most MAX_TOKENS, the last
 * token keeping the unsplit rest), and runs the command. Storage commands
 * allocate the item and let the connection receive the value straight into
 * item memory; value_done() then stores it. Replies go on the connection's
 * queue; hits are sent from item memory. Touches no socket, no slab.
 */
#include "proto_text.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "items.h"
#include "log.h"
#include "meta_marks.h"
#include "proto_text_internal.h"
#include "settings.h"
#include "stats.h"
#include "stats_detail.h"
#include "thread.h"
#include "tokenize.h"
#include "flash.h"
#include "value_fetch.h"
#include "numbers.h"
#include "watch.h"

#define MAX_TOKENS 24
#define LONG_LINE_LIMIT 2048 /* without a newline: only get/gets may be longer */

proto_meta_fn proto_text_meta_handler;

/* Decimal digits of v at p; returns the count. */
static size_t u64_to_text(uint64_t v, char *p)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

/* ---- replies ------------------------------------------------------------------------- */
void out_string(struct conn *c, bool noreply, const char *str)
{
    if (log_enabled(LOG_CMDS))
        log_msg(LOG_CMDS, ">%d %s%s", c->fd, noreply ? "NOREPLY " : "", str);
    if (noreply)
        return;
    if (!conn_out_string(c, str))
        log_msg(LOG_WARN, "<%d out of memory queueing a reply", c->fd);
}

bool set_noreply_maybe(struct token *tokens, size_t ntokens)
{
    size_t i = ntokens - 2;
    return tokens[i].value && tokens[i].length == 7 && strcmp(tokens[i].value, "noreply") == 0;
}

/* ---- retrieval ---------------------------------------------------------------------
 * A multi-get queues a response object for each key, as memcached does (a
 * miss's is empty; the objects count against -o read_buf_mem_limit), at
 * most GET_BATCH at a time: the keys after them wait in a resumable
 * response (conn.h) until the replies before it are written, so a client
 * that asks for many keys and does not read holds one batch of responses
 * (the values themselves are written from item memory). */
#define GET_BATCH 64

struct get_opts {
    bool return_cas, touch;
    rel_time_t exptime;
};

/* The keys of a multi-get not yet looked up: copied once, then consumed
 * from pos on, a batch at a time. */
struct get_rest {
    struct get_opts o;
    size_t pos, len;
    char keys[]; /* len bytes, NUL-terminated, space-separated */
};

static void get_rest_resume(struct conn *c, void *ctx);
static const struct resp_stream get_rest_ops = {.resume = get_rest_resume, .free = free};

/* Whether a key from key_token on is longer than memcached allows (a
 * multi-get with one is answered with an error only). */
static bool get_rest_too_long(const struct token *key_token)
{
    const struct token *t;
    for (t = key_token; t->length != 0; t++)
        if (t->length > KEY_MAX_LENGTH)
            return true;
    size_t run = 0;
    for (const char *p = t->value; p && *p; p++) {
        run = *p == ' ' ? 0 : run + 1;
        if (run > KEY_MAX_LENGTH)
            return true;
    }
    return false;
}

/* Copies the keys from key_token on (the rest of a tokenizer pass, then
 * the unsplit remainder of the line) into a get_rest. */
static struct get_rest *get_rest_new(const struct token *key_token, const struct get_opts *o)
{
    size_t len = 0;
    const struct token *t;
    for (t = key_token; t->length != 0; t++)
        len += t->length + 1;
    if (t->value)
        len += strlen(t->value);
    struct get_rest *g = malloc(sizeof(*g) + len + 1);
    if (!g)
        return NULL;
    g->o = *o;
    char *p = g->keys;
    for (t = key_token; t->length != 0; t++) {
        memcpy(p, t->value, t->length);
        p += t->length;
        *p++ = ' ';
    }
    if (t->value) {
        size_t n = strlen(t->value);
        memcpy(p, t->value, n);
        p += n;
    }
    *p = '\0';
    g->pos = 0;
    g->len = (size_t)(p - g->keys);
    return g;
}

/* Moves g's position to key_token, a token of g's text: the separators
 * the tokenizer cut after the tokens still to look up are put back. */
static void get_rest_advance(struct get_rest *g, const struct token *key_token)
{
    const struct token *t;
    for (t = key_token; t->length != 0; t++)
        if (t[1].length != 0 || t[1].value != NULL)
            t->value[t->length] = ' ';
    g->pos = (size_t)(key_token->value - g->keys);
}

/* Looks up the keys from key_token on (tokens: the array to re-tokenize the
 * rest of the line into), queueing a reply per key (an empty one for a miss) and END after the
 * last, or, after GET_BATCH keys, a resumable response for the rest. g: the get_rest the keys come
 * from (taken over), NULL for the request line. */
static void get_keys(struct conn *c, struct token *key_token, struct token *tokens,
                     const struct get_opts *o, struct get_rest *g)
{
    struct worker_stats *ws = &c->worker->stats;
    struct resp *mark = conn_resp_mark(c);
    struct resp *last = NULL;
    bool fail_length = false, fail_memory = false;
    unsigned queued = 0;

    for (;;) {
        for (; key_token->length != 0; key_token++) {
            if (queued == GET_BATCH) {
                if (g) {
                    get_rest_advance(g, key_token);
                } else if (get_rest_too_long(key_token)) { /* the rest is checked once */
                    fail_length = true;
                    goto stop;
                } else {
                    g = get_rest_new(key_token, o);
                }
                if (!g || !conn_resp_add_resume(c, &get_rest_ops, g))
                    fail_memory = true;
                g = NULL; /* the resumable response owns it */
                goto stop;
            }
            const char *key = key_token->value;
            size_t nkey = key_token->length;
            if (nkey > KEY_MAX_LENGTH) {
                fail_length = true;
                goto stop;
            }
            item *it = o->touch ? item_get_touch(key, nkey, o->exptime) : item_get(key, nkey);
            if (stats_detail_on())
                stats_detail_record_get(key, nkey, it != NULL);
            watch_item_get(key, nkey, it, c->fd);
            if (o->touch) /* gat counts as a touch only, as memcached */
                STAT_INCR(ws, touch_cmds);
            else
                STAT_INCR(ws, get_cmds);
            if (!it) {
                if (o->touch)
                    STAT_INCR(ws, touch_misses);
                else
                    STAT_INCR(ws, get_misses);
                if (log_enabled(LOG_CMDS))
                    log_msg(LOG_CMDS, ">%d miss %.*s", c->fd, (int)nkey, key);
                last = conn_resp_add(c); /* empty: nothing to say */
                if (!last) {
                    fail_memory = true;
                    goto stop;
                }
                queued++;
                continue;
            }
            if (o->touch)
                STAT_INCR(ws, touch_hits);
            else
                STAT_INCR(ws, get_hits);
            struct resp *r = conn_resp_add(c);
            if (!r) {
                item_release(it);
                fail_memory = true;
                goto stop;
            }
            char *p = r->head;
            memcpy(p, "VALUE ", 6);
            p += 6;
            memcpy(p, item_key(it), item_nkey(it));
            p += item_nkey(it);
            *p++ = ' ';
            p += u64_to_text(item_flags(it), p);
            *p++ = ' ';
            p += u64_to_text(item_nbytes(it), p);
            if (o->return_cas) {
                *p++ = ' ';
                p += u64_to_text(item_cas(it), p);
            }
            *p++ = '\r';
            *p++ = '\n';
            r->head_len = (uint16_t)(p - r->head);
            if (!conn_resp_set_value(c, r, it, true, "", 0)) { /* a miss: nothing */
                fail_memory = true;
                goto stop;
            }
            last = r;
            queued++;
            if (log_enabled(LOG_CMDS))
                log_msg(LOG_CMDS, ">%d sending key %.*s", c->fd, (int)nkey, key);
        }
        if (key_token->value == NULL)
            break;
        /* more keys than one tokenizer pass holds */
        tokenize(key_token->value, strlen(key_token->value), tokens, MAX_TOKENS);
        key_token = tokens;
    }
    if (log_enabled(LOG_CMDS))
        log_msg(LOG_CMDS, ">%d END", c->fd);
    if (!last)
        last = conn_resp_add(c);
    if (last)
        resp_set_tail(last, "END\r\n", 5);
    free(g);
    return;
stop:
    free(g);
    if (fail_length || fail_memory) {
        conn_resp_truncate(c, mark);
        c->resp_oom = false; /* answered by the error below, as memcached does */
        out_string(c, false,
                   fail_length ? "CLIENT_ERROR bad command line format"
                               : "SERVER_ERROR out of memory writing get response");
    }
}

static void get_rest_resume(struct conn *c, void *ctx)
{
    struct get_rest *g = ctx;
    struct token tokens[MAX_TOKENS];
    tokenize(g->keys + g->pos, g->len - g->pos, tokens, MAX_TOKENS);
    get_keys(c, tokens, tokens, &g->o, g);
}

static void process_get(struct conn *c, struct token *tokens, bool return_cas, bool touch)
{
    struct get_opts o = {return_cas, touch, 0};
    struct token *key_token = &tokens[1];
    if (touch) {
        int32_t exptime_int;
        if (!num_parse_i32(tokens[1].value, &exptime_int)) {
            out_string(c, false, "CLIENT_ERROR invalid exptime argument");
            return;
        }
        key_token++;
        o.exptime = clock_exptime(exptime_int);
    }
    get_keys(c, key_token, tokens, &o, NULL);
}

/* ---- storage ------------------------------------------------------------------------ */
enum { OP_SET, OP_ADD, OP_REPLACE, OP_APPEND, OP_PREPEND, OP_CAS };

static const enum store_op store_ops[] = {STORE_SET,    STORE_ADD,     STORE_REPLACE,
                                          STORE_APPEND, STORE_PREPEND, STORE_CAS};

static void update_value(struct conn *c);

static void process_update(struct conn *c, struct token *tokens, size_t ntokens, int op)
{
    bool noreply = set_noreply_maybe(tokens, ntokens);
    uint32_t flags;
    int32_t exptime_int, vlen;
    uint64_t req_cas = 0;

    if (tokens[1].length > KEY_MAX_LENGTH) {
        out_string(c, noreply, "CLIENT_ERROR bad command line format");
        return;
    }
    if (!(num_parse_u32(tokens[2].value, &flags) && num_parse_i32(tokens[3].value, &exptime_int) &&
          num_parse_i32(tokens[4].value, &vlen))) {
        out_string(c, noreply, "CLIENT_ERROR bad command line format");
        return;
    }
    if (op == OP_CAS && !num_parse_u64(tokens[5].value, &req_cas)) {
        out_string(c, noreply, "CLIENT_ERROR bad command line format");
        return;
    }
    if (vlen < 0 || vlen > INT_MAX - 2) {
        out_string(c, noreply, "CLIENT_ERROR bad command line format");
        return;
    }
    const char *key = tokens[1].value;
    size_t nkey = tokens[1].length;
    if (stats_detail_on())
        stats_detail_record_set(key, nkey);
    conn_value_request(c, key, nkey, flags, clock_exptime(exptime_int), (size_t)vlen);
    c->value.op = op;
    c->value.noreply = noreply;
    c->value.cas = req_cas;
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
        out_string(c, v->noreply, conn_value_alloc_error(c, why));
        /* a failed set must not leave the old value readable */
        if (v->op == OP_SET)
            conn_value_delete_old(c);
        conn_swallow(c, v->nbytes + 2);
        return;
    }
    conn_read_value(c, it, v->nbytes, 2);
}

static void text_value_done(struct conn *c, const char *trailer, size_t trailer_len)
{
    item *it = c->value.it;
    bool noreply = c->value.noreply;
    int op = c->value.op;
    struct worker_stats *ws = &c->worker->stats;
    c->value.it = NULL;
    STAT_INCR(ws, set_cmds);
    if (trailer_len != 2 || trailer[0] != '\r' || trailer[1] != '\n') {
        out_string(c, noreply, "CLIENT_ERROR bad data chunk");
        item_release(it);
        return;
    }
    watch_store_lookup(it, c->fd);
    enum store_result res = item_store(it, store_ops[op], c->value.cas, NULL);
    watch_item_store(it, res, store_ops[op], c->fd);
    item_release(it);
    if (op == OP_CAS) {
        if (res == STORE_STORED)
            STAT_INCR(ws, cas_hits);
        else if (res == STORE_EXISTS)
            STAT_INCR(ws, cas_badval);
        else if (res == STORE_NOT_FOUND)
            STAT_INCR(ws, cas_misses);
    }
    switch (res) {
    case STORE_STORED:
        out_string(c, noreply, "STORED");
        break;
    case STORE_EXISTS:
        out_string(c, noreply, "EXISTS");
        break;
    case STORE_NOT_FOUND:
        out_string(c, noreply, "NOT_FOUND");
        break;
    case STORE_NOT_STORED:
        out_string(c, noreply, "NOT_STORED");
        break;
    case STORE_NO_MEMORY: /* append/prepend: memcached says NOT_STORED */
        out_string(c, noreply, "NOT_STORED");
        break;
    }
}

/* ---- other commands ----------------------------------------------------------------- */
static void process_arith(struct conn *c, struct token *tokens, size_t ntokens, bool incr)
{
    bool noreply = set_noreply_maybe(tokens, ntokens);
    struct worker_stats *ws = &c->worker->stats;
    uint64_t delta, value = 0;
    if (tokens[1].length > KEY_MAX_LENGTH) {
        out_string(c, noreply, "CLIENT_ERROR bad command line format");
        return;
    }
    if (!num_parse_u64(tokens[2].value, &delta)) {
        out_string(c, noreply, "CLIENT_ERROR invalid numeric delta argument");
        return;
    }
    uint64_t new_cas = 0;
    /* meta markers stay where memcached rewrites in place */
    switch (item_arith(tokens[1].value, tokens[1].length, incr, delta, 0, &value, &new_cas,
                       meta_marks_carry)) {
    case ARITH_OK: {
        char buf[24];
        buf[u64_to_text(value, buf)] = '\0';
        if (incr)
            STAT_INCR(ws, incr_hits);
        else
            STAT_INCR(ws, decr_hits);
        out_string(c, noreply, buf);
        break;
    }
    case ARITH_NON_NUMERIC:
        out_string(c, noreply, "CLIENT_ERROR cannot increment or decrement non-numeric value");
        break;
    case ARITH_NO_MEMORY:
        out_string(c, noreply, "SERVER_ERROR out of memory");
        break;
    case ARITH_NOT_FOUND:
    case ARITH_EXISTS:
        if (incr)
            STAT_INCR(ws, incr_misses);
        else
            STAT_INCR(ws, decr_misses);
        out_string(c, noreply, "NOT_FOUND");
        break;
    }
}

static void process_delete(struct conn *c, struct token *tokens, size_t ntokens)
{
    bool noreply = false;
    if (ntokens > 3) {
        bool hold_is_zero = strcmp(tokens[2].value, "0") == 0;
        noreply = set_noreply_maybe(tokens, ntokens);
        bool valid = (ntokens == 4 && (hold_is_zero || noreply)) ||
                     (ntokens == 5 && hold_is_zero && noreply);
        if (!valid) {
            out_string(c, noreply,
                       "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]");
            return;
        }
    }
    if (tokens[1].length > KEY_MAX_LENGTH) {
        out_string(c, noreply, "CLIENT_ERROR bad command line format");
        return;
    }
    if (stats_detail_on())
        stats_detail_record_delete(tokens[1].value, tokens[1].length);
    if (item_delete(tokens[1].value, tokens[1].length, 0) == DELETE_DELETED) {
        if (watch_wants(WATCH_DELETIONS)) {
            char k[KEY_MAX_LENGTH * 3 + 1];
            watch_log(WATCH_DELETIONS, "type=deleted key=%s cmd=delete cfd=%d",
                      watch_key(k, sizeof(k), tokens[1].value, tokens[1].length), c->fd);
        }
        STAT_INCR(&c->worker->stats, delete_hits);
        out_string(c, noreply, "DELETED");
    } else {
        STAT_INCR(&c->worker->stats, delete_misses);
        out_string(c, noreply, "NOT_FOUND");
    }
}

static void process_touch(struct conn *c, struct token *tokens, size_t ntokens)
{
    bool noreply = set_noreply_maybe(tokens, ntokens);
    struct worker_stats *ws = &c->worker->stats;
    int32_t exptime_int;
    if (tokens[1].length > KEY_MAX_LENGTH) {
        out_string(c, noreply, "CLIENT_ERROR bad command line format");
        return;
    }
    if (!num_parse_i32(tokens[2].value, &exptime_int)) {
        out_string(c, noreply, "CLIENT_ERROR invalid exptime argument");
        return;
    }
    STAT_INCR(ws, touch_cmds);
    if (item_touch(tokens[1].value, tokens[1].length, clock_exptime(exptime_int))) {
        STAT_INCR(ws, touch_hits);
        out_string(c, noreply, "TOUCHED");
    } else {
        STAT_INCR(ws, touch_misses);
        out_string(c, noreply, "NOT_FOUND");
    }
}

/* ---- dispatch ------------------------------------------------------------------------ */
#define WANT_TOKENS(n, min, max)                                                                   \
    do {                                                                                           \
        if ((n) < (min) || (n) > (max)) {                                                          \
            out_string(c, false, "ERROR");                                                         \
            return PROTO_DONE;                                                                     \
        }                                                                                          \
    } while (0)
#define WANT_TOKENS_OR(n, a, b)                                                                    \
    do {                                                                                           \
        if ((n) != (a) && (n) != (b)) {                                                            \
            out_string(c, false, "ERROR");                                                         \
            return PROTO_DONE;                                                                     \
        }                                                                                          \
    } while (0)

static enum proto_status dispatch(struct conn *c, char *line, size_t len)
{
    struct token tokens[MAX_TOKENS];
    size_t ntokens = tokenize(line, len, tokens, MAX_TOKENS);
    if (ntokens < 2 || tokens[0].length < 2) {
        out_string(c, false, "ERROR");
        return PROTO_DONE;
    }
    const char *cmd = tokens[0].value;
    char first = cmd[0];

    if (first == 'g') {
        if (ntokens < 3) {
            out_string(c, false, "ERROR");
            return PROTO_DONE;
        }
        if (strcmp(cmd, "get") == 0)
            process_get(c, tokens, false, false);
        else if (strcmp(cmd, "gets") == 0)
            process_get(c, tokens, true, false);
        else if (strcmp(cmd, "gat") == 0)
            process_get(c, tokens, false, true);
        else if (strcmp(cmd, "gats") == 0)
            process_get(c, tokens, true, true);
        else
            out_string(c, false, "ERROR");
    } else if (strcmp(cmd, "bget") == 0) { /* memcached's undocumented old name for get */
        if (ntokens < 3)
            out_string(c, false, "ERROR");
        else
            process_get(c, tokens, false, false);
    } else if (strcmp(cmd, "set") == 0) {
        WANT_TOKENS_OR(ntokens, 6, 7);
        process_update(c, tokens, ntokens, OP_SET);
    } else if (strcmp(cmd, "add") == 0) {
        WANT_TOKENS_OR(ntokens, 6, 7);
        process_update(c, tokens, ntokens, OP_ADD);
    } else if (strcmp(cmd, "replace") == 0) {
        WANT_TOKENS_OR(ntokens, 6, 7);
        process_update(c, tokens, ntokens, OP_REPLACE);
    } else if (strcmp(cmd, "append") == 0) {
        WANT_TOKENS_OR(ntokens, 6, 7);
        process_update(c, tokens, ntokens, OP_APPEND);
    } else if (strcmp(cmd, "prepend") == 0) {
        WANT_TOKENS_OR(ntokens, 6, 7);
        process_update(c, tokens, ntokens, OP_PREPEND);
    } else if (strcmp(cmd, "cas") == 0) {
        WANT_TOKENS_OR(ntokens, 7, 8);
        process_update(c, tokens, ntokens, OP_CAS);
    } else if (strcmp(cmd, "incr") == 0) {
        WANT_TOKENS_OR(ntokens, 4, 5);
        process_arith(c, tokens, ntokens, true);
    } else if (strcmp(cmd, "decr") == 0) {
        WANT_TOKENS_OR(ntokens, 4, 5);
        process_arith(c, tokens, ntokens, false);
    } else if (strcmp(cmd, "delete") == 0) {
        WANT_TOKENS(ntokens, 3, 5);
        process_delete(c, tokens, ntokens);
    } else if (strcmp(cmd, "touch") == 0) {
        WANT_TOKENS_OR(ntokens, 4, 5);
        process_touch(c, tokens, ntokens);
    } else if (strcmp(cmd, "stats") == 0) {
        process_stats(c, tokens, ntokens);
    } else if (strcmp(cmd, "flush_all") == 0) {
        WANT_TOKENS(ntokens, 2, 4);
        process_flush_all(c, tokens, ntokens);
    } else if (strcmp(cmd, "mn") == 0) {
        out_string(c, false, "MN"); /* meta no-op; other meta commands need the meta engine */
    } else if (strcmp(cmd, "version") == 0) {
        char buf[64];
        snprintf(buf, sizeof(buf), "VERSION %s", settings_version());
        out_string(c, false, buf);
    } else if (strcmp(cmd, "quit") == 0) {
        conn_set_close_after_write(c);
    } else if (strcmp(cmd, "shutdown") == 0) {
        return process_shutdown(c, tokens, ntokens);
    } else if (strcmp(cmd, "verbosity") == 0) {
        WANT_TOKENS_OR(ntokens, 3, 4);
        process_verbosity(c, tokens, ntokens);
    } else if (strcmp(cmd, "watch") == 0) {
        return process_watch(c, tokens, ntokens);
    } else if (strcmp(cmd, "slabs") == 0) {
        process_slabs(c, tokens, ntokens);
    } else if (strcmp(cmd, "lru") == 0) {
        process_lru(c, tokens, ntokens);
    } else if (strcmp(cmd, "extstore") == 0) {
        /* "extstore <name> <value> [<value>]", as memcached (settings_ext.c) */
        settings_lock();
        bool ok =
            ntokens >= 4 && settings_ext_command(&settings.ext, tokens[1].value, tokens[2].value,
                                                 ntokens >= 5 ? tokens[3].value : NULL);
        struct ext_settings now = settings.ext;
        settings_unlock();
        flash_tune(&now);
        out_string(c, false, ok ? "OK" : "ERROR");
    } else if (strcmp(cmd, "lru_crawler") == 0) {
        return process_lru_crawler(c, tokens, ntokens);
    } else if (strcmp(cmd, "refresh_certs") == 0) {
        process_refresh_certs(c, tokens, ntokens);
    } else if (strcmp(cmd, "cache_memlimit") == 0) {
        WANT_TOKENS_OR(ntokens, 3, 4);
        process_memlimit(c, tokens, ntokens);
    } else {
        /* a web client: memcached hangs up, unless the word starts with a
         * letter of its own commands (it answers those ERROR first) */
        const char *last = tokens[ntokens - 2].value;
        bool own_letter = cmd[0] != '\0' && strchr("acdgist", cmd[0]) != NULL;
        if (last && strncmp(last, "HTTP/", 5) == 0 && !own_letter)
            return PROTO_CLOSE;
        out_string(c, false, "ERROR");
    }
    return PROTO_DONE;
}

#define AUTH_TOKEN_MAX 1024

/* -Y: before authenticating, only a "set" whose value is "user password"
 * is taken (its key, flags and exptime are ignored; it stores nothing);
 * everything else answers "CLIENT_ERROR unauthenticated". The request is
 * handled only once the line and its value are in the buffer. */
static enum proto_status process_unauthenticated(struct conn *c, char *data, size_t line_len,
                                                 size_t consumed)
{
    char line[512];
    struct token tokens[MAX_TOKENS];
    size_t len = line_len;
    if (len > 0 && data[len - 1] == '\r')
        len--;
    if (len >= sizeof(line))
        len = sizeof(line) - 1;
    memcpy(line, data, len);
    line[len] = '\0';
    len = strlen(line);
    size_t ntokens = tokenize(line, len, tokens, MAX_TOKENS);
    int32_t vlen;
    if (c->tp->datagram || ntokens < 6 || ntokens > 7 || strcmp(tokens[0].value, "set") != 0 ||
        !num_parse_i32(tokens[4].value, &vlen) || vlen < 0) {
        conn_consume(c, consumed);
        out_string(c, false, "CLIENT_ERROR unauthenticated");
        return PROTO_DONE;
    }
    STAT_INCR(&c->worker->stats, auth_cmds);
    if (vlen > AUTH_TOKEN_MAX) {
        conn_consume(c, consumed);
        conn_swallow(c, (size_t)vlen + 2);
        STAT_INCR(&c->worker->stats, auth_errors);
        out_string(c, false, "CLIENT_ERROR authentication failure");
        return PROTO_DONE;
    }
    if (conn_rlen(c) < consumed + (size_t)vlen + 2)
        return PROTO_NEED_MORE; /* nothing consumed: the whole request comes again */
    const char *token = data + consumed;
    bool chunk_ok = token[vlen] == '\r' && token[vlen + 1] == '\n';
    enum auth_result res = chunk_ok ? auth_check(token, (size_t)vlen) : AUTH_FAILED;
    conn_consume(c, consumed + (size_t)vlen + 2);
    if (!chunk_ok) {
        STAT_INCR(&c->worker->stats, auth_errors);
        out_string(c, false, "CLIENT_ERROR bad data chunk");
    } else if (res == AUTH_OK) {
        c->authenticated = true;
        out_string(c, false, "STORED"); /* even with noreply, as memcached */
    } else {
        STAT_INCR(&c->worker->stats, auth_errors);
        out_string(c, false,
                   res == AUTH_BAD_FORMAT ? "CLIENT_ERROR bad authentication token format"
                                          : "CLIENT_ERROR authentication failure");
    }
    return PROTO_DONE;
}

static enum proto_status text_process(struct conn *c)
{
    char *data = conn_rdata(c);
    size_t avail = conn_rlen(c);
    if (c->watching) { /* a log stream takes no more commands */
        conn_consume(c, avail);
        return PROTO_DONE;
    }
    char *el = memchr(data, '\n', avail);
    if (!el) {
        if (avail > LONG_LINE_LIMIT) {
            /* only a long multi-get may span this much without a newline */
            char *p = data;
            while (p < data + avail && *p == ' ')
                p++;
            size_t rest = (size_t)(data + avail - p);
            if (p - data > 100 || !((rest >= 4 && memcmp(p, "get ", 4) == 0) ||
                                    (rest >= 5 && memcmp(p, "gets ", 5) == 0))) {
                log_msg(LOG_WARN, "<%d request line too long, closing", c->fd);
                return PROTO_CLOSE;
            }
        }
        return PROTO_NEED_MORE;
    }
    size_t consumed = (size_t)(el - data) + 1;
    if (!c->authenticated && auth_enabled())
        return process_unauthenticated(c, data, (size_t)(el - data), consumed);
    if (el - data > 1 && el[-1] == '\r')
        el--;
    *el = '\0';
    size_t len = strlen(data); /* like memcached, a NUL ends the line early */
    if (log_enabled(LOG_CMDS))
        log_msg(LOG_CMDS, "<%d %s", c->fd, data);

    if (data[0] == 'm' && len >= 2 && (len == 2 || data[2] == ' ') && proto_text_meta_handler)
        return proto_text_meta_handler(c, data, len, consumed);

    /* the line stays readable until the next receive; consume it first so a
     * value that follows is taken from the right place */
    conn_consume(c, consumed);
    return dispatch(c, data, len);
}

const struct proto_engine proto_text_engine = {
    .name = "ascii",
    .process = text_process,
    .value_done = text_value_done,
};
