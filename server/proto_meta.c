/*
 * proto_meta.c: memcached 1.6's meta commands on text connections.
 *
 *   mg <key> <flags>*          get, touch, vivify-on-miss, recache wins
 *   ms <key> <datalen> <flags>* set/add/replace/append/prepend/cas
 *   md <key> <flags>*          delete or invalidate (mark stale)
 *   ma <key> <flags>*          incr/decr with auto-create
 *   mn                         "MN": ends a batch of quiet commands
 *   me <key> [b]               human-readable item metadata
 *
 * Flags are parsed the way memcached 1.6.18 does: each token's first
 * character names the flag, the rest is its argument; a repeated flag or an
 * unknown one is an error; response flags come back in request order.
 * Errors are always sent; "q" hides only the nominal reply (EN for mg, HD
 * for ms/md/ma). Stale and win markers, which items.h does not keep, live
 * in meta_marks.c keyed by (key, cas).
 *
 * proto_meta_line.c parses the flags and builds the reply lines; this
 * file runs the commands. Owns meta syntax and replies only: no sockets, no
 * slab or LRU access.
 */
#include "proto_meta.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "items.h"
#include "log.h"
#include "meta_marks.h"
#include "numbers.h"
#include "proto_meta_internal.h"
#include "settings.h"
#include "stats.h"
#include "thread.h"
#include "tokenize.h"
#include "value_fetch.h"
#include "watch.h"

#define META_MAX_TOKENS 24 /* as the text protocol's tokenizer */

/* memcached's tokenizer; meta commands never look past the final token. */
static size_t meta_tokenize(char *line, size_t len, struct token *tokens)
{
    size_t n = tokenize(line, len, tokens, META_MAX_TOKENS);
    tokens[n - 1].value = NULL;
    return n;
}

/* ---- mg ----------------------------------------------------------------------------------- */
/* An empty item created by N (vivify); NULL when another client created
 * one first (then *raced is set) or memory ran out. */
static item *vivify(const char *key, size_t nkey, rel_time_t exptime, bool *raced)
{
    enum alloc_result why;
    item *it = item_alloc(key, nkey, 0, exptime, 0, &why);
    if (!it)
        return NULL;
    uint64_t cas = 0;
    if (item_store(it, STORE_ADD, 0, &cas) != STORE_STORED) {
        item_release(it);
        *raced = true;
        return NULL;
    }
    meta_marks_set(key, nkey, item_cas(it), MARK_TOKEN_SENT);
    return it;
}

static void process_mg(struct conn *c, struct token *tokens, size_t ntokens)
{
    struct worker_stats *ws = &c->worker->stats;
    struct meta_flags of = {0};
    const char *errstr = "CLIENT_ERROR bad command line format";

    if (ntokens < 3) {
        send_error(c, "ERROR");
        return;
    }
    if (tokens[1].length > KEY_MAX_LENGTH) {
        send_error(c, "CLIENT_ERROR bad command line format");
        return;
    }
    if (ntokens > META_MAX_OPT_TOKENS) {
        send_error(c, "CLIENT_ERROR options flags are too long");
        return;
    }
    if (!meta_preparse(tokens, 2, &of, &errstr)) {
        send_error(c, errstr);
        return;
    }
    const char *key = tokens[1].value;
    size_t nkey = tokens[1].length;

    /* memcached applies T, N and R in token order, so a t or R before T
     * sees the old TTL: then the touch waits for its token */
    bool touch_in_loop = false;
    for (size_t i = 2; of.new_ttl && i < ntokens - 1 && tokens[i].value[0] != 'T'; i++)
        touch_in_loop |= tokens[i].value[0] == 't' || tokens[i].value[0] == 'R';
    /* u: no fetch and no LRU bump (memcached's DONT_UPDATE); a T is then
     * written after the token loop without counting as a fetch */
    item *it;
    if (of.no_update)
        it = item_peek(key, nkey);
    else if (of.new_ttl && !touch_in_loop)
        it = item_get_touch(key, nkey, of.exptime);
    else
        it = item_get(key, nkey);
    watch_item_get(key, nkey, it, c->fd);
    bool created = false;
    if (!it && of.vivify) {
        bool raced = false;
        it = vivify(key, nkey, created_exptime(tokens, ntokens, &of), &raced);
        created = it != NULL;
        if (raced)
            it = item_get(key, nkey);
    }

    struct meta_line l;
    l.len = 0;
    if (!it) {
        /* a miss counts as a get even with T (a hit with T as a touch),
         * as memcached counts them */
        STAT_INCR(ws, get_misses);
        STAT_INCR(ws, get_cmds);
        if (!miss_line(&l, tokens, ntokens, key, nkey, of.key_binary)) {
            send_error(c, "CLIENT_ERROR opaque token too long");
            return;
        }
        if (!of.no_reply)
            send_line(c, &l, NULL, NULL);
        return;
    }

    uint64_t cas = item_cas(it);
    unsigned marks = created ? 0 : meta_marks_get(key, nkey, cas);
    bool won = false;
    /* the TTL as memcached's token loop sees it: a vivified item starts
     * without one until its N token */
    rel_time_t exptime = created ? 0 : item_exptime(it);
    char tmp[32];
    if (of.value) {
        line_add(&l, tmp, (size_t)snprintf(tmp, sizeof(tmp), "VA %zu", item_nbytes(it)));
    } else {
        line_str(&l, "HD");
    }
    for (size_t i = 2; i < ntokens - 1; i++) {
        switch (tokens[i].value[0]) {
        case 'T':
            exptime = of.exptime;
            break;
        case 'N':
            if (created) {
                exptime = of.autoviv_exptime;
                won = true;
            }
            break;
        case 'R':
            if (!(marks & MARK_TOKEN_SENT) && !created && exptime != 0 && exptime < of.recache_time)
                won = true;
            break;
        case 's':
            line_flag_u64(&l, 's', item_nbytes(it));
            break;
        case 't':
            line_ttl(&l, exptime);
            break;
        case 'c':
            line_flag_u64(&l, 'c', cas);
            break;
        case 'f':
            line_flag_u64(&l, 'f', item_flags(it));
            break;
        case 'l': {
            rel_time_t now = clock_now(), la = item_last_access(it);
            line_flag_u64(&l, 'l', now >= la ? now - la : 0);
            break;
        }
        case 'h':
            line_str(&l, item_was_fetched(it) ? " h1" : " h0");
            break;
        case 'O':
            if (!line_opaque(&l, &tokens[i])) {
                item_release(it);
                send_error(c, "CLIENT_ERROR opaque token too long");
                return;
            }
            break;
        case 'k':
            line_key(&l, item_key(it), item_nkey(it), (marks & MARK_BINARY_KEY) != 0);
            break;
        default:
            break;
        }
    }
    /* the TTL the token loop ended with, where the lookup did not set it */
    if (!created && of.no_update && of.new_ttl)
        item_set_exptime(key, nkey, exptime);
    else if (!created && touch_in_loop)
        item_touch(key, nkey, exptime);
    if (marks & MARK_TOKEN_SENT)
        line_str(&l, " Z");
    if (marks & MARK_STALE) {
        line_str(&l, " X");
        if (!(marks & MARK_TOKEN_SENT))
            won = true;
    }
    if (won) {
        /* created items already carry the marker; otherwise claim it, and
         * if another client claimed it meanwhile, it won, not this one */
        unsigned before = created ? 0 : meta_marks_take_token(key, nkey, cas);
        line_str(&l, (before & MARK_TOKEN_SENT) ? " Z" : " W");
    }

    if (of.new_ttl) {
        STAT_INCR(ws, touch_cmds);
        STAT_INCR(ws, touch_hits);
    } else {
        STAT_INCR(ws, get_cmds);
        STAT_INCR(ws, get_hits);
    }
    if (of.value) {
        struct meta_line miss; /* sent instead when the value cannot be read from flash */
        miss.len = 0;
        if (of.no_reply || !miss_line(&miss, tokens, ntokens, key, nkey, of.key_binary))
            miss.len = 0;
        send_line(c, &l, it, &miss);
    } else {
        send_line(c, &l, NULL, NULL);
        item_release(it);
    }
}

/* ---- ms ----------------------------------------------------------------------------------- */
/* c->value.op carries the store op plus these notes for ms_value_done. */
#define MS_OP_MASK 0xff
#define MS_STALE 0x100  /* I with C: an older cas stores the item as stale */
#define MS_BINKEY 0x200 /* the key came base64-encoded */

static void ms_value_done(struct conn *c, const char *trailer, size_t trailer_len);
static void ms_value(struct conn *c);

static void process_ms(struct conn *c, struct token *tokens, size_t ntokens)
{
    struct meta_flags of = {0};
    const char *errstr = "CLIENT_ERROR bad command line format";
    int32_t vlen;

    if (ntokens < 3) {
        send_error(c, "ERROR");
        return;
    }
    if (tokens[1].length > KEY_MAX_LENGTH || ntokens == 3) {
        send_error(c, "CLIENT_ERROR bad command line format");
        return;
    }
    if (ntokens > META_MAX_OPT_TOKENS) {
        send_error(c, "CLIENT_ERROR options flags too long");
        return;
    }
    if (!num_parse_i32(tokens[2].value, &vlen) || vlen < 0 || vlen > INT_MAX - 2) {
        send_error(c, "CLIENT_ERROR bad command line format");
        return;
    }
    size_t to_swallow = (size_t)vlen + 2;
    if (!meta_preparse(tokens, 3, &of, &errstr))
        goto error;

    /* the reply's flags in request order, completed once stored:
     * O is echoed, k and c are filled in later */
    char stash[sizeof(c->value.note)];
    size_t stash_len = 0;
    bool has_error = false;
    for (size_t i = 3; i < ntokens - 1; i++) {
        switch (tokens[i].value[0]) {
        case 'O':
            if (tokens[i].length > META_MAX_OPAQUE) {
                errstr = "CLIENT_ERROR opaque token too long";
                has_error = true;
                break;
            }
            stash[stash_len++] = ' ';
            memcpy(stash + stash_len, tokens[i].value, tokens[i].length);
            stash_len += tokens[i].length;
            break;
        case 'k':
            memcpy(stash + stash_len, " k", 2);
            stash_len += 2;
            break;
        case 'c':
            memcpy(stash + stash_len, " c", 2);
            stash_len += 2;
            break;
        default:
            break;
        }
    }

    enum store_op op;
    switch (of.mode) {
    case 0:
    case 'S':
        op = STORE_SET;
        break;
    case 'E':
        op = STORE_ADD;
        break;
    case 'A':
        op = STORE_APPEND;
        break;
    case 'P':
        op = STORE_PREPEND;
        break;
    case 'R':
        op = STORE_REPLACE;
        break;
    default:
        errstr = "CLIENT_ERROR invalid mode for ms M token";
        goto error;
    }
    /* a cas turns set and replace into cas; append/prepend check it too */
    if (of.has_cas && (op == STORE_SET || op == STORE_REPLACE))
        op = STORE_CAS;
    if (has_error)
        goto error;

    /* completed in ms_value_done: no reply may be queued before the value
     * is in, or it would be sent ahead of time */
    conn_value_request(c, tokens[1].value, tokens[1].length, of.client_flags,
                       of.new_ttl ? of.exptime : 0, (size_t)vlen);
    memcpy(c->value.note, stash, stash_len);
    c->value.note_len = (uint8_t)stash_len;
    c->value.op = (int)op | (of.set_stale && op == STORE_CAS ? MS_STALE : 0) |
                  (of.key_binary ? MS_BINKEY : 0);
    c->value.noreply = of.no_reply;
    c->value.cas = of.req_cas;
    ms_value(c);
    return;

error:
    send_error(c, errstr);
    conn_swallow(c, to_swallow);
}

/* The item of the ms conn_value_request noted; then its value is read
 * (also when an ms that waited for room tries again). */
static void ms_value(struct conn *c)
{
    struct conn_value *v = &c->value;
    enum alloc_result why = ALLOC_OK;
    item *it = conn_alloc_value(c, ms_value, &why);
    if (!it) {
        if (why == ALLOC_FLASH_WAIT)
            return;
        send_error(c, conn_value_alloc_error(c, why));
        conn_value_delete_old(c); /* no stale value survives a failed store */
        conn_swallow(c, v->nbytes + 2);
        return;
    }
    conn_read_value(c, it, v->nbytes, 2);
    c->value.on_done = ms_value_done;
}

/* I with C: the client's cas is older than the item's, so the value is
 * stored all the same and marked stale (memcached's "set-to-invalid"). */
static enum store_result store_stale(item *it, uint64_t req_cas, uint64_t *cas_out)
{
    item *cur = item_peek(item_key(it), item_nkey(it));
    if (!cur)
        return STORE_NOT_FOUND;
    uint64_t cur_cas = item_cas(cur);
    rel_time_t cur_exptime = item_exptime(cur);
    item_release(cur);
    if (req_cas >= cur_cas)
        return STORE_EXISTS;
    unsigned old_marks = meta_marks_get(item_key(it), item_nkey(it), cur_cas);
    enum store_result res = item_store(it, STORE_CAS, cur_cas, cas_out);
    if (res == STORE_STORED) {
        /* memcached keeps the old TTL (no fetch) and a win token already sent */
        item_set_exptime(item_key(it), item_nkey(it), cur_exptime);
        meta_marks_set(item_key(it), item_nkey(it), *cas_out,
                       MARK_STALE | (old_marks & MARK_TOKEN_SENT));
    }
    return res;
}

static void ms_value_done(struct conn *c, const char *trailer, size_t trailer_len)
{
    struct worker_stats *ws = &c->worker->stats;
    item *it = c->value.it;
    c->value.it = NULL;
    STAT_INCR(ws, set_cmds);
    const char *stash = c->value.note;
    size_t stash_len = c->value.note_len;

    if (trailer_len != 2 || trailer[0] != '\r' || trailer[1] != '\n') {
        item_release(it);
        send_error(c, "CLIENT_ERROR bad data chunk");
        return;
    }
    enum store_op op = (enum store_op)(c->value.op & MS_OP_MASK);
    uint64_t cas_out = 0;
    watch_store_lookup(it, c->fd);
    enum store_result res = item_store(it, op, c->value.cas, &cas_out);
    if (res == STORE_EXISTS && (c->value.op & MS_STALE))
        res = store_stale(it, c->value.cas, &cas_out);
    watch_item_store(it, res, op, c->fd);
    if (res == STORE_STORED && (c->value.op & MS_BINKEY)) {
        unsigned marks = meta_marks_get(item_key(it), item_nkey(it), cas_out);
        meta_marks_set(item_key(it), item_nkey(it), cas_out, marks | MARK_BINARY_KEY);
    }
    if (op == STORE_CAS) {
        if (res == STORE_STORED)
            STAT_INCR(ws, cas_hits);
        else if (res == STORE_EXISTS)
            STAT_INCR(ws, cas_badval);
        else if (res == STORE_NOT_FOUND)
            STAT_INCR(ws, cas_misses);
    }

    struct meta_line l;
    l.len = 0;
    switch (res) {
    case STORE_STORED:
        line_str(&l, "HD");
        break;
    case STORE_EXISTS:
        line_str(&l, "EX");
        break;
    case STORE_NOT_FOUND:
        line_str(&l, "NF");
        break;
    case STORE_NOT_STORED:
    case STORE_NO_MEMORY: /* memcached answers NOT_STORED here too */
        line_str(&l, "NS");
        break;
    }
    for (size_t i = 0; i < stash_len; i++) {
        if (stash[i] != ' ' || i + 1 >= stash_len)
            continue;
        char f = stash[i + 1];
        if (f == 'O') {
            size_t end = i + 1;
            while (end < stash_len && stash[end] != ' ')
                end++;
            line_add(&l, stash + i, end - i);
        } else if (f == 'k') {
            line_key(&l, item_key(it), item_nkey(it), (c->value.op & MS_BINKEY) != 0);
        } else if (f == 'c') {
            line_flag_u64(&l, 'c', cas_out);
        }
    }
    item_release(it);
    if (res == STORE_STORED && c->value.noreply)
        return;
    send_line(c, &l, NULL, NULL);
}

/* ---- md ----------------------------------------------------------------------------------- */
/* md I: keeps the item but gives it a new cas in place, optionally a new
 * TTL, and marks it stale with no win token sent yet. */
static enum store_result invalidate(const char *key, size_t nkey, const struct meta_flags *of)
{
    return item_invalidate(key, nkey, of->has_cas, of->req_cas, of->new_ttl, of->exptime, NULL,
                           meta_marks_make_stale);
}

static void process_md(struct conn *c, struct token *tokens, size_t ntokens)
{
    struct worker_stats *ws = &c->worker->stats;
    struct meta_flags of = {0};
    const char *errstr = "CLIENT_ERROR bad command line format";

    if (ntokens < 3) {
        send_error(c, "ERROR");
        return;
    }
    if (tokens[1].length > KEY_MAX_LENGTH) {
        send_error(c, "CLIENT_ERROR bad command line format");
        return;
    }
    if (ntokens > META_MAX_OPT_TOKENS) {
        send_error(c, "CLIENT_ERROR options flags too long");
        return;
    }
    if (!meta_preparse(tokens, 2, &of, &errstr)) {
        send_error(c, "CLIENT_ERROR invalid or duplicate flag");
        return;
    }
    const char *key = tokens[1].value;
    size_t nkey = tokens[1].length;

    struct meta_line flags;
    flags.len = 0;
    for (size_t i = 2; i < ntokens - 1; i++) {
        if (tokens[i].value[0] == 'O' && !line_opaque(&flags, &tokens[i])) {
            send_error(c, "CLIENT_ERROR opaque token too long");
            return;
        }
        if (tokens[i].value[0] == 'k')
            line_key(&flags, key, nkey, of.key_binary);
    }

    const char *code;
    bool nominal = false;
    if (of.set_stale) {
        switch (invalidate(key, nkey, &of)) {
        case STORE_STORED:
            code = "HD";
            nominal = true;
            break;
        case STORE_EXISTS:
            code = "EX";
            STAT_INCR(ws, delete_misses);
            break;
        case STORE_NO_MEMORY:
            send_error(c, "SERVER_ERROR out of memory");
            return;
        default:
            code = "NF";
            STAT_INCR(ws, delete_misses);
            break;
        }
    } else {
        switch (item_delete(key, nkey, of.has_cas ? of.req_cas : 0)) {
        case DELETE_DELETED:
            code = "HD";
            nominal = true;
            STAT_INCR(ws, delete_hits);
            break;
        case DELETE_EXISTS:
            code = "EX";
            STAT_INCR(ws, delete_misses);
            break;
        default:
            code = "NF";
            STAT_INCR(ws, delete_misses);
            break;
        }
    }
    if (nominal && of.no_reply)
        return;
    struct meta_line l;
    l.len = 0;
    line_str(&l, code);
    line_add(&l, flags.buf, flags.len);
    send_line(c, &l, NULL, NULL);
}

/* ---- ma ----------------------------------------------------------------------------------- */
/* ma N on a miss: creates the item holding the initial value. */
static enum store_result ma_create(const char *key, size_t nkey, const struct meta_flags *of,
                                   rel_time_t exptime, uint64_t *cas_out)
{
    char num[24];
    int n = snprintf(num, sizeof(num), "%llu", (unsigned long long)of->initial);
    enum alloc_result why;
    item *it = item_alloc(key, nkey, 0, exptime, (size_t)n, &why);
    if (!it)
        return STORE_NO_MEMORY;
    struct iovec seg = item_value_seg(it, 0);
    memcpy(seg.iov_base, num, (size_t)n);
    enum store_result res = item_store(it, STORE_ADD, 0, cas_out);
    item_release(it);
    return res;
}

static void process_ma(struct conn *c, struct token *tokens, size_t ntokens)
{
    struct worker_stats *ws = &c->worker->stats;
    struct meta_flags of = {0};
    const char *errstr = "CLIENT_ERROR bad command line format";
    of.delta = 1;

    if (ntokens < 3) {
        send_error(c, "ERROR");
        return;
    }
    if (tokens[1].length > KEY_MAX_LENGTH) {
        send_error(c, "CLIENT_ERROR bad command line format");
        return;
    }
    if (ntokens > META_MAX_OPT_TOKENS) {
        send_error(c, "CLIENT_ERROR options flags too long");
        return;
    }
    if (!meta_preparse(tokens, 2, &of, &errstr)) {
        send_error(c, "CLIENT_ERROR invalid or duplicate flag");
        return;
    }
    bool incr;
    switch (of.mode) {
    case 0:
    case 'I':
    case '+':
        incr = true;
        break;
    case 'D':
    case '-':
        incr = false;
        break;
    default:
        send_error(c, "CLIENT_ERROR invalid mode for ma M token");
        return;
    }
    const char *key = tokens[1].value;
    size_t nkey = tokens[1].length;

    uint64_t value = 0, cas = 0;
    bool have_item = false, created = false;
    const char *code = NULL;
    /* meta markers stay where memcached rewrites in place */
    switch (item_arith(key, nkey, incr, of.delta, of.has_cas ? of.req_cas : 0, &value, &cas,
                       meta_marks_carry)) {
    case ARITH_OK:
        have_item = true;
        if (incr)
            STAT_INCR(ws, incr_hits);
        else
            STAT_INCR(ws, decr_hits);
        break;
    case ARITH_NON_NUMERIC:
        send_error(c, "CLIENT_ERROR cannot increment or decrement non-numeric value");
        return;
    case ARITH_NO_MEMORY:
        send_error(c, "SERVER_ERROR out of memory");
        return;
    case ARITH_EXISTS:
        code = "EX";
        break;
    case ARITH_NOT_FOUND:
        if (of.vivify) {
            enum store_result res =
                ma_create(key, nkey, &of, created_exptime(tokens, ntokens, &of), &cas);
            if (res == STORE_STORED) {
                have_item = created = true;
                value = of.initial;
            } else if (res == STORE_NO_MEMORY) {
                send_error(c, "SERVER_ERROR Out of memory allocating new item");
                return;
            } else {
                code = "NS";
            }
        } else {
            if (incr)
                STAT_INCR(ws, incr_misses);
            else
                STAT_INCR(ws, decr_misses);
            code = "NF";
        }
        break;
    }

    struct meta_line l;
    l.len = 0;
    char num[24];
    int numlen = snprintf(num, sizeof(num), "%llu", (unsigned long long)value);
    if (!have_item) {
        line_str(&l, code);
    } else if (of.value) {
        char tmp[32];
        line_add(&l, tmp, (size_t)snprintf(tmp, sizeof(tmp), "VA %d", numlen));
    } else {
        line_str(&l, "HD");
    }
    /* the TTL as memcached's token loop sees it: T and N (for a created
     * item, which starts without a TTL) apply in token order; otherwise
     * the item's own, looked up when t asks for it */
    bool ttl_known = created, touched = false;
    rel_time_t exptime = 0;
    for (size_t i = 2; i < ntokens - 1; i++) {
        char f = tokens[i].value[0];
        if (f == 'O') {
            if (!line_opaque(&l, &tokens[i])) {
                send_error(c, "CLIENT_ERROR opaque token too long");
                return;
            }
        } else if (f == 'k') {
            line_key(&l, key, nkey, of.key_binary);
        } else if (!have_item) {
            continue;
        } else if (f == 'c') {
            line_flag_u64(&l, 'c', cas);
        } else if (f == 'T') {
            exptime = of.exptime;
            ttl_known = touched = true;
        } else if (f == 'N') {
            if (created)
                exptime = of.autoviv_exptime;
        } else if (f == 't') {
            if (!ttl_known) {
                item *it = item_peek(key, nkey); /* ma is no fetch */
                exptime = it ? item_exptime(it) : 0;
                if (it)
                    item_release(it);
                ttl_known = true;
            }
            line_ttl(&l, exptime);
        }
    }
    if (!created && touched)
        item_set_exptime(key, nkey, exptime); /* memcached's ma T: no fetch */
    if (have_item && !created && of.no_reply)
        return;
    if (have_item && of.value) {
        line_add(&l, "\r\n", 2);
        line_add(&l, num, (size_t)numlen);
    }
    send_line(c, &l, NULL, NULL);
}

/* ---- me ----------------------------------------------------------------------------------- */
static void process_me(struct conn *c, struct token *tokens, size_t ntokens)
{
    if (ntokens < 3 || tokens[1].length > KEY_MAX_LENGTH) {
        send_error(c, "CLIENT_ERROR bad command line format");
        return;
    }
    char *key = tokens[1].value;
    size_t nkey = tokens[1].length;
    bool binary = ntokens >= 4 && tokens[2].length == 1 && tokens[2].value[0] == 'b';
    if (binary) {
        nkey = b64_decode_inplace(key, nkey);
        if (nkey == 0) {
            send_error(c, "CLIENT_ERROR bad command line format");
            return;
        }
    }
    STAT_INCR(&c->worker->stats, meta_cmds);
    item *it = item_peek(key, nkey); /* me is no fetch and no LRU bump */
    if (!it) {
        send_error(c, "EN");
        return;
    }
    struct meta_line l;
    l.len = 0;
    /* the key as stored: encoded only when it was stored base64-encoded */
    bool stored_binary =
        meta_marks_get(item_key(it), item_nkey(it), item_cas(it)) & MARK_BINARY_KEY;
    line_str(&l, "ME ");
    line_key_text(&l, item_key(it), item_nkey(it), stored_binary);
    rel_time_t now = clock_now(), exp = item_exptime(it), la = item_last_access(it);
    char tmp[160];
    /* exp as memcached prints it: -1 for never, else now - exptime */
    int n = snprintf(tmp, sizeof(tmp), " exp=%d la=%u cas=%llu fetch=%s cls=%u size=%zu",
                     exp == 0 ? -1 : (int)(now - exp), (unsigned)(now >= la ? now - la : 0),
                     (unsigned long long)item_cas(it), item_was_fetched(it) ? "yes" : "no",
                     item_slab_class(it), item_memcached_size(it));
    line_add(&l, tmp, (size_t)n);
    item_release(it);
    send_line(c, &l, NULL, NULL);
}

/* ---- entry -------------------------------------------------------------------------------- */
enum proto_status proto_meta_handle(struct conn *c, char *line, size_t line_len, size_t consumed)
{
    /* the line stays readable until the next receive; consume it first so
     * a value that follows is taken from the right place */
    conn_consume(c, consumed);
    struct token tokens[META_MAX_TOKENS];
    size_t ntokens = meta_tokenize(line, line_len, tokens);
    if (ntokens < 2 || tokens[0].length != 2) {
        send_error(c, "ERROR");
        return PROTO_DONE;
    }
    switch (tokens[0].value[1]) {
    case 'g':
        process_mg(c, tokens, ntokens);
        break;
    case 's':
        process_ms(c, tokens, ntokens);
        break;
    case 'd':
        process_md(c, tokens, ntokens);
        break;
    case 'a':
        process_ma(c, tokens, ntokens);
        break;
    case 'n':
        send_error(c, "MN");
        break;
    case 'e':
        process_me(c, tokens, ntokens);
        break;
    default:
        send_error(c, "ERROR");
        break;
    }
    return PROTO_DONE;
}

void proto_meta_shutdown(void)
{
    meta_marks_free();
}
