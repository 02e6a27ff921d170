/*
 * proto_text_admin.c: the text protocol's administration commands: stats
 * (with the streamed "stats conns", "stats detail dump" and "stats
 * cachedump"), flush_all, verbosity, cache_memlimit, lru_crawler (with the
 * streamed metadump), watch, slabs, lru, shutdown and refresh_certs.
 * proto_text.c parses the line and calls these; replies go on the
 * connection's queue as there.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flash.h"
#include "growbuf.h"
#include "items.h"
#include "log.h"
#include "net_tls.h"
#include "numbers.h"
#include "proto_text_internal.h"
#include "settings.h"
#include "stats.h"
#include "stats_detail.h"
#include "thread.h"
#include "watch.h"

static void emit_stat_line(void *ctx, const char *name, const char *value)
{
    struct growbuf *t = ctx;
    growbuf_append(t, "STAT ", 5);
    growbuf_append(t, name, strlen(name));
    growbuf_append(t, " ", 1);
    growbuf_append(t, value, strlen(value));
    growbuf_append(t, "\r\n", 2);
}

static void send_stats_text(struct conn *c, struct growbuf *t)
{
    growbuf_append(t, "END\r\n", 5);
    struct resp *r = t->oom ? NULL : conn_resp_add(c);
    if (!r) {
        free(t->buf);
        out_string(c, false, "SERVER_ERROR out of memory writing stats");
        return;
    }
    resp_set_heap(r, t->buf, t->len);
}

void process_flush_all(struct conn *c, struct token *tokens, size_t ntokens)
{
    bool noreply = set_noreply_maybe(tokens, ntokens);
    int32_t delay = 0;
    STAT_INCR(&c->worker->stats, flush_cmds);
    if (!settings.flush_enabled) {
        out_string(c, noreply, "CLIENT_ERROR flush_all not allowed");
        return;
    }
    if (ntokens != (noreply ? 3u : 2u) && !num_parse_i32(tokens[1].value, &delay)) {
        out_string(c, noreply, "CLIENT_ERROR invalid exptime argument");
        return;
    }
    storage_flush_all(delay > 0 ? clock_exptime(delay) : 0);
    out_string(c, noreply, "OK");
}

void process_verbosity(struct conn *c, struct token *tokens, size_t ntokens)
{
    bool noreply = set_noreply_maybe(tokens, ntokens);
    uint32_t level;
    if (!num_parse_u32(tokens[1].value, &level)) {
        out_string(c, noreply, "CLIENT_ERROR bad command line format");
        return;
    }
    log_set_verbosity(level > LOG_MAX_VERBOSITY ? LOG_MAX_VERBOSITY : (int)level);
    out_string(c, noreply, "OK");
}

void process_memlimit(struct conn *c, struct token *tokens, size_t ntokens)
{
    bool noreply = set_noreply_maybe(tokens, ntokens);
    uint32_t mb;
    if (!num_parse_u32(tokens[1].value, &mb)) {
        out_string(c, noreply, "ERROR");
    } else if (mb < 8) {
        out_string(c, noreply, "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m");
    } else if (mb > 1000000000) {
        out_string(c, noreply, "MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes");
    } else if (storage_set_memlimit((size_t)mb * 1024 * 1024) == 0) {
        log_msg(LOG_WARN, "maxbytes adjusted to %um", mb);
        out_string(c, noreply, "OK");
    } else {
        out_string(c, noreply, "MEMLIMIT_ADJUST_FAILED out of bounds or unable to adjust");
    }
}

/* "crawl all" or "crawl 1,2,...": memcached's class ids are 1..63. */
static bool valid_class_list(const char *list)
{
    if (strcmp(list, "all") == 0)
        return true;
    const char *p = list;
    while (*p) {
        char *end;
        errno = 0;
        long id = strtol(p, &end, 10);
        if (end == p || errno || id < 1 || id > 63)
            return false;
        if (*end == ',')
            end++;
        else if (*end != '\0')
            return false;
        p = end;
    }
    return true;
}

/* ---- item dumps ----------------------------------------------------------------------
 * lru_crawler metadump and stats cachedump are streamed: each reply walks
 * the LRUs a chunk at a time as the client reads (conn.h, resp_stream), so
 * a client that does not read holds one chunk and a marker, whatever the
 * number of items. */
#define DUMP_LINE_MAX 1024                    /* longest metadump or cachedump line */
#define CACHEDUMP_MAX_BYTES (2 * 1024 * 1024) /* memcached's cap on a cachedump */

struct dump_stream {
    struct storage_walk *walk;
    time_t started;
    bool cachedump;
    uint32_t lines_left; /* cachedump: the limit (0: none) */
    size_t bytes_total;  /* cachedump: bytes so far, against CACHEDUMP_MAX_BYTES */
    bool capped;         /* cachedump: limit or cap reached */
    char *out;           /* the chunk being filled */
    size_t len;
};

static void metadump_line(void *ctx, const item *it)
{
    struct dump_stream *d = ctx;
    char k[KEY_MAX_LENGTH * 3 + 1];
    rel_time_t exp = item_exptime(it);
    long long exp_abs = exp == 0 ? -1 : (long long)d->started + exp;
    int n = snprintf(d->out + d->len, DUMP_LINE_MAX,
                     "key=%s exp=%lld la=%llu cas=%llu fetch=%s cls=%u size=%zu\n",
                     watch_key(k, sizeof(k), item_key(it), item_nkey(it)), exp_abs,
                     (unsigned long long)d->started + item_last_access(it),
                     (unsigned long long)item_cas(it), item_was_fetched(it) ? "yes" : "no",
                     item_slab_class(it), item_memcached_size(it));
    if (n > 0)
        d->len += (size_t)n < DUMP_LINE_MAX ? (size_t)n : DUMP_LINE_MAX - 1;
}

static void cachedump_line(void *ctx, const item *it)
{
    struct dump_stream *d = ctx;
    if (d->capped)
        return;
    char line[KEY_MAX_LENGTH + 64];
    rel_time_t exp = item_exptime(it);
    int n = snprintf(line, sizeof(line), "ITEM %.*s [%zu b; %llu s]\r\n", (int)item_nkey(it),
                     item_key(it), item_nbytes(it),
                     exp == 0 ? 0ULL : (unsigned long long)d->started + exp);
    if (n <= 0)
        return;
    if (d->bytes_total + (size_t)n + 5 > CACHEDUMP_MAX_BYTES) {
        d->capped = true;
        return;
    }
    memcpy(d->out + d->len, line, (size_t)n);
    d->len += (size_t)n;
    d->bytes_total += (size_t)n;
    if (d->lines_left > 0 && --d->lines_left == 0)
        d->capped = true;
}

static size_t dump_fill(void *ctx, char *buf, size_t room, bool *done)
{
    struct dump_stream *d = ctx;
    d->out = buf;
    d->len = 0;
    storage_item_fn line = d->cachedump ? cachedump_line : metadump_line;
    /* each step leaves room for a whole line per item and the final END */
    while (!d->capped && !storage_walk_done(d->walk) && room - d->len >= DUMP_LINE_MAX + 5)
        storage_walk_step(d->walk, (unsigned)((room - d->len - 5) / DUMP_LINE_MAX), line, d);
    *done = d->capped || storage_walk_done(d->walk);
    if (*done) {
        memcpy(buf + d->len, "END\r\n", 5);
        d->len += 5;
    }
    return d->len;
}

static void dump_free(void *ctx)
{
    struct dump_stream *d = ctx;
    storage_walk_close(d->walk);
    free(d);
}

static const struct resp_stream dump_stream_ops = {.fill = dump_fill, .free = dump_free};

/* Queues a streamed reply (conn.h); ctx is freed through ops. */
static void send_stream(struct conn *c, const struct resp_stream *ops, void *ctx)
{
    if (!ctx || !conn_resp_add_stream(c, ops, ctx))
        out_string(c, false, "SERVER_ERROR out of memory writing stats");
}

/* Queues a streamed dump of the classes selected (classes[0]: all). */
static void send_dump(struct conn *c, const bool classes[64], bool newest_first, bool cachedump,
                      uint32_t limit)
{
    struct dump_stream *d = calloc(1, sizeof(*d));
    if (d) {
        d->walk =
            storage_walk_open(classes, 64, newest_first, cachedump); /* memcached dumps COLD */
        d->started = clock_process_started();
        d->cachedump = cachedump;
        d->lines_left = limit;
    }
    if (d && !d->walk) {
        free(d);
        d = NULL;
    }
    send_stream(c, &dump_stream_ops, d);
}

/* memcached's class ids are 1..63; the list is "all", "hash" (every item,
 * here in the same order as "all") or "1,2,...". */
static bool parse_class_list(const char *list, bool classes[64])
{
    memset(classes, 0, 64 * sizeof(bool));
    if (strcmp(list, "all") == 0 || strcmp(list, "hash") == 0) {
        classes[0] = true;
        return true;
    }
    const char *p = list;
    while (*p) {
        char *end;
        errno = 0;
        long id = strtol(p, &end, 10);
        if (end == p || errno || id < 1 || id > 63)
            return false;
        classes[id] = true;
        if (*end == ',')
            end++;
        else if (*end != '\0')
            return false;
        p = end;
    }
    return true;
}

/* "stats conns" and "stats detail dump", streamed like the dumps */
struct chunk_out {
    char *buf;
    size_t len, room;
};

static void emit_chunk_line(void *ctx, const char *name, const char *value)
{
    struct chunk_out *o = ctx;
    size_t nl = strlen(name), vl = strlen(value);
    if (o->room - o->len < nl + vl + 8)
        return; /* cannot happen within the group bound; never overflow */
    o->len += (size_t)snprintf(o->buf + o->len, o->room - o->len, "STAT %s %s\r\n", name, value);
}

struct conns_stream {
    int after; /* last fd reported */
};

static size_t conns_fill(void *ctx, char *buf, size_t room, bool *done)
{
    struct conns_stream *cs = ctx;
    struct chunk_out o = {buf, 0, room - 5};
    size_t max = (room - 5) / STATS_CONN_GROUP_MAX;
    *done = stats_report_conns_from(&cs->after, max, emit_chunk_line, &o) < max;
    if (*done) {
        memcpy(buf + o.len, "END\r\n", 5);
        o.len += 5;
    }
    return o.len;
}

static const struct resp_stream conns_stream_ops = {.fill = conns_fill, .free = free};

static size_t detail_fill(void *ctx, char *buf, size_t room, bool *done)
{
    return stats_detail_dump_fill(ctx, buf, room, done);
}

static void detail_free(void *ctx)
{
    stats_detail_dump_close(ctx);
}

static const struct resp_stream detail_stream_ops = {.fill = detail_fill, .free = detail_free};

static enum proto_status datagram_stream_refused(struct conn *c, const char *what);

static enum proto_status process_metadump(struct conn *c, const char *list)
{
    bool classes[64];
    if (!settings.dump_enabled) {
        out_string(c, false, "ERROR metadump not allowed");
        return PROTO_DONE;
    }
    if (!parse_class_list(list, classes)) {
        out_string(c, false, "BADCLASS invalid class id");
        return PROTO_DONE;
    }
    if (c->tp->datagram)
        return datagram_stream_refused(c, "lru_crawler metadump");
    if (c->nresp > 0) { /* replies of earlier pipelined requests still queued */
        out_string(c, false, "ERROR cannot pipeline other commands before metadump");
        return PROTO_DONE;
    }
    send_dump(c, classes, false, false, 0);
    return PROTO_DONE;
}

static void process_cachedump(struct conn *c, struct token *tokens, size_t ntokens)
{
    uint32_t id, limit;
    if (ntokens < 5) {
        out_string(c, false, "CLIENT_ERROR bad command line");
        return;
    }
    if (!settings.dump_enabled) {
        out_string(c, false, "CLIENT_ERROR stats cachedump not allowed");
        return;
    }
    if (!num_parse_u32(tokens[2].value, &id) || !num_parse_u32(tokens[3].value, &limit)) {
        out_string(c, false, "CLIENT_ERROR bad command line format");
        return;
    }
    if (id >= 64) {
        out_string(c, false, "CLIENT_ERROR Illegal slab id");
        return;
    }
    if (id == 0) {
        out_string(c, false, "END");
        return;
    }
    /* the newest items first, at most `limit` lines (0: no limit) and what
     * fits memcached's 2 MB reply */
    bool classes[64] = {false};
    classes[id] = true;
    send_dump(c, classes, true, true, limit);
}

/* A command that streams or turns the connection into a stream (watch,
 * metadump) and was accepted, over a datagram transport (UDP): memcached
 * answers nothing and drops the rest of the message, and so does this
 * engine. A datagram reply to a forgeable source address must not grow
 * with the cache (a reflection amplifier), and a shared UDP endpoint must
 * never become a log stream. PROTO_CLOSE over a datagram transport only
 * ends the message (conn.c). */
static enum proto_status datagram_stream_refused(struct conn *c, const char *what)
{
    log_msg(LOG_CMDS, "<%d %s is not served over UDP: no reply", c->fd, what);
    return PROTO_CLOSE;
}

enum proto_status process_lru_crawler(struct conn *c, struct token *tokens, size_t ntokens)
{
    const char *sub = tokens[1].value;
    uint32_t n;
    if (ntokens == 4 && strcmp(sub, "crawl") == 0) {
        if (!valid_class_list(tokens[2].value)) {
            out_string(c, false, "BADCLASS invalid class id");
            return PROTO_DONE;
        }
        storage_crawl_soon();
        out_string(c, false, "OK");
    } else if (ntokens == 4 && strcmp(sub, "metadump") == 0) {
        return process_metadump(c, tokens[2].value);
    } else if (ntokens == 3 && strcmp(sub, "enable") == 0) {
        out_string(c, false,
                   storage_crawler_enable(true) == 0 ? "OK"
                                                     : "ERROR failed to start lru crawler thread");
    } else if (ntokens == 3 && strcmp(sub, "disable") == 0) {
        storage_crawler_enable(false); /* already off is fine, as memcached */
        out_string(c, false, "OK");
    } else if (ntokens == 4 && strcmp(sub, "sleep") == 0) {
        if (!num_parse_u32(tokens[2].value, &n))
            out_string(c, false, "CLIENT_ERROR bad command line format");
        else if (n > 1000000)
            out_string(c, false, "CLIENT_ERROR sleep must be one second or less");
        else if (storage_crawler_set_sleep(n) != 0)
            out_string(c, false, "CLIENT_ERROR bad command line format");
        else
            out_string(c, false, "OK");
    } else if (ntokens == 4 && strcmp(sub, "tocrawl") == 0) {
        if (!num_parse_u32(tokens[2].value, &n)) {
            out_string(c, false, "CLIENT_ERROR bad command line format");
        } else {
            storage_crawler_set_tocrawl(n);
            out_string(c, false, "OK");
        }
    } else {
        out_string(c, false, "ERROR");
    }
    return PROTO_DONE;
}

enum proto_status process_watch(struct conn *c, struct token *tokens, size_t ntokens)
{
    if (!settings.watch_enabled) {
        out_string(c, false, "CLIENT_ERROR watch commands not allowed");
        return PROTO_DONE;
    }
    unsigned kinds = 0;
    if (ntokens > 2) {
        for (size_t i = 1; i < ntokens - 1; i++) {
            int kind = watch_parse_kind(tokens[i].value);
            if (kind < 0) {
                out_string(c, false, "ERROR");
                return PROTO_DONE;
            }
            kinds |= (unsigned)kind;
        }
    } else {
        kinds = WATCH_FETCHERS;
    }
    if (c->tp->datagram)
        return datagram_stream_refused(c, "watch");
    if (!watch_start(c, kinds)) {
        out_string(c, false, "WATCHER_TOO_MANY log watcher limit reached");
        return PROTO_DONE;
    }
    out_string(c, false, "OK");
    return PROTO_DONE;
}

void process_slabs(struct conn *c, struct token *tokens, size_t ntokens)
{
    if (ntokens == 5 && strcmp(tokens[1].value, "reassign") == 0) {
        int32_t src, dst;
        if (!num_parse_i32(tokens[2].value, &src) || !num_parse_i32(tokens[3].value, &dst)) {
            out_string(c, false, "CLIENT_ERROR bad command line format");
            return;
        }
        switch (storage_slabs_reassign(src, dst)) {
        case REASSIGN_OK:
            out_string(c, false, "OK");
            break;
        case REASSIGN_BUSY:
            out_string(c, false, "BUSY currently processing reassign request");
            break;
        case REASSIGN_BADCLASS:
            out_string(c, false, "BADCLASS invalid src or dst class id");
            break;
        case REASSIGN_NOSPARE:
            out_string(c, false, "NOSPARE source class has no spare pages");
            break;
        case REASSIGN_NOTFULL:
            out_string(c, false, "NOTFULL dest class has spare memory");
            break;
        case REASSIGN_UNSAFE:
            out_string(c, false, "UNSAFE src class is in an unsafe state");
            break;
        case REASSIGN_SAME:
            out_string(c, false, "SAME src and dst class are identical");
            break;
        }
        return;
    }
    if (ntokens >= 4 && strcmp(tokens[1].value, "automove") == 0) {
        bool noreply = set_noreply_maybe(tokens, ntokens);
        if (strcmp(tokens[2].value, "ratio") == 0) {
            double ratio;
            if (ntokens < 5 || !num_parse_double(tokens[3].value, &ratio)) {
                out_string(c, noreply, "ERROR");
                return;
            }
            settings_lock();
            settings.slab_automove_ratio = ratio; /* reported; the mover has one policy */
            settings_unlock();
            out_string(c, noreply, "OK");
            return;
        }
        uint32_t level;
        if (!num_parse_u32(tokens[2].value, &level)) {
            out_string(c, noreply, "CLIENT_ERROR bad command line format");
            return;
        }
        out_string(c, noreply,
                   level <= 2 && storage_slab_automove((int)level) == 0 ? "OK" : "ERROR");
        return;
    }
    out_string(c, false, "ERROR");
}

/* "lru tune", "lru mode" and "lru temp_ttl", checked and answered as
 * memcached does (mode and temp_ttl only while the LRU maintainer runs),
 * applied to the engine and reported in "stats settings". */
void process_lru(struct conn *c, struct token *tokens, size_t ntokens)
{
    bool noreply = ntokens > 2 && set_noreply_maybe(tokens, ntokens);
    uint32_t pct_hot, pct_warm;
    double hot_factor, warm_factor;
    if (ntokens >= 7 && strcmp(tokens[1].value, "tune") == 0) {
        if (!num_parse_u32(tokens[2].value, &pct_hot) ||
            !num_parse_u32(tokens[3].value, &pct_warm) ||
            !num_parse_double(tokens[4].value, &hot_factor) ||
            !num_parse_double(tokens[5].value, &warm_factor)) {
            out_string(c, noreply, "ERROR");
        } else if ((uint64_t)pct_hot + pct_warm > 80) {
            out_string(c, noreply, "ERROR hot and warm pcts must not exceed 80");
        } else if (hot_factor <= 0 || warm_factor <= 0) {
            out_string(c, noreply, "ERROR hot/warm age factors must be greater than 0");
        } else {
            settings_lock();
            settings.hot_lru_pct = pct_hot;
            settings.warm_lru_pct = pct_warm;
            settings.hot_max_factor = hot_factor;
            settings.warm_max_factor = warm_factor;
            settings_unlock();
            storage_lru_tune(pct_hot, pct_warm, hot_factor, warm_factor);
            out_string(c, noreply, "OK");
        }
        return;
    }
    bool maintainer = storage_lru_maintainer_running();
    if (ntokens >= 4 && strcmp(tokens[1].value, "mode") == 0 && maintainer) {
        bool flat = strcmp(tokens[2].value, "flat") == 0;
        if (!flat && strcmp(tokens[2].value, "segmented") != 0) {
            out_string(c, noreply, "ERROR");
            return;
        }
        settings_lock();
        settings.lru_segmented = !flat;
        storage_lru_set_segmented(!flat);
        settings_unlock();
        out_string(c, noreply, "OK");
        return;
    }
    int32_t ttl;
    if (ntokens >= 4 && strcmp(tokens[1].value, "temp_ttl") == 0 && maintainer) {
        if (!num_parse_i32(tokens[2].value, &ttl)) {
            out_string(c, noreply, "ERROR");
            return;
        }
        settings_lock();
        settings.temp_lru = ttl >= 0;
        if (ttl >= 0)
            settings.temporary_ttl = ttl;
        storage_lru_set_temp_ttl(ttl);
        settings_unlock();
        out_string(c, noreply, "OK");
        return;
    }
    out_string(c, noreply, "ERROR");
}

enum proto_status process_shutdown(struct conn *c, struct token *tokens, size_t ntokens)
{
    if (!settings.shutdown_command) {
        out_string(c, false, "ERROR: shutdown not enabled");
        return PROTO_DONE;
    }
    if (ntokens == 2) {
        log_msg(LOG_WARN, "shutdown requested by client %d", c->fd);
        raise(SIGINT);
        return PROTO_CLOSE;
    }
    if (ntokens == 3 && strcmp(tokens[1].value, "graceful") == 0) {
        log_msg(LOG_WARN, "graceful shutdown requested by client %d", c->fd);
        raise(SIGUSR1);
        return PROTO_CLOSE;
    }
    out_string(c, false, "CLIENT_ERROR invalid shutdown mode");
    return PROTO_DONE;
}

void process_stats(struct conn *c, struct token *tokens, size_t ntokens)
{
    struct growbuf t = {NULL, 0, 0, false};
    if (ntokens == 2) {
        stats_report_general(emit_stat_line, &t);
        send_stats_text(c, &t);
        return;
    }
    const char *sub = tokens[1].value;
    if (strcmp(sub, "reset") == 0) {
        stats_reset();
        out_string(c, false, "RESET");
        return;
    }
    if (strcmp(sub, "detail") == 0 && ntokens >= 4 && strcmp(tokens[2].value, "dump") == 0) {
        send_stream(c, &detail_stream_ops, stats_detail_dump_open());
        return;
    }
    if (strcmp(sub, "conns") == 0) {
        struct conns_stream *cs = calloc(1, sizeof(*cs));
        if (cs)
            cs->after = -1;
        send_stream(c, &conns_stream_ops, cs);
        return;
    }
    if (strcmp(sub, "detail") == 0) {
        size_t len;
        char *reply = stats_detail_reply(ntokens >= 4 ? tokens[2].value : "", &len);
        struct resp *r = reply ? conn_resp_add(c) : NULL;
        if (r) {
            resp_set_heap(r, reply, len);
        } else {
            free(reply);
            out_string(c, false, "SERVER_ERROR out of memory writing stats");
        }
        return;
    }
    if (strcmp(sub, "settings") == 0)
        stats_report_settings(emit_stat_line, &t);
    else if (strcmp(sub, "items") == 0)
        storage_stats_items(emit_stat_line, &t);
    else if (strcmp(sub, "slabs") == 0)
        storage_stats_slabs(emit_stat_line, &t);
    else if (strcmp(sub, "sizes") == 0)
        storage_stats_sizes(emit_stat_line, &t);
    else if (strcmp(sub, "extstore") == 0 && flash_running())
        flash_stats_pages(emit_stat_line, &t);
    else if (strcmp(sub, "cachedump") == 0) {
        process_cachedump(c, tokens, ntokens);
        return;
    } else if (strcmp(sub, "sizes_enable") == 0 || strcmp(sub, "sizes_disable") == 0) {
        bool on = strcmp(sub, "sizes_enable") == 0;
        storage_sizes_enable(on);
        out_string(c, false, on ? "STAT sizes_status enabled" : "STAT sizes_status disabled");
        return;
    } else {
        out_string(c, false, "ERROR");
        return;
    }
    send_stats_text(c, &t);
}

/* memcached's "refresh_certs": reload the TLS certificates for new
 * connections; the error text is the TLS layer's. */
void process_refresh_certs(struct conn *c, struct token *tokens, size_t ntokens)
{
    bool noreply = set_noreply_maybe(tokens, ntokens);
    char err[1024];
    if (net_tls_refresh_certs(err, sizeof(err))) {
        out_string(c, noreply, "OK");
        return;
    }
    err[strcspn(err, "\r\n")] = '\0';
    out_string(c, noreply, err);
}
