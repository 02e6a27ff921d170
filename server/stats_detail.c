/*
 * stats_detail.c: the per-prefix counters behind "stats detail". One hash
 * table of prefixes under one mutex, as in memcached: recording only runs
 * while detail stats are on, which is a debugging mode, so the lock is not
 * on any normal request path. The on/off state lives in
 * settings.detail_enabled (so "stats settings" reports it), written and
 * read with relaxed atomics. Must not know connections or protocols.
 */
#include "stats_detail.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "growbuf.h"
#include "items.h"
#include "settings.h"

#define PREFIX_BUCKETS 256

struct prefix_stats {
    struct prefix_stats *next;
    uint64_t gets, hits, sets, deletes;
    size_t nprefix;
    char prefix[]; /* nprefix bytes, NUL-terminated for printing */
};

static pthread_mutex_t detail_lock = PTHREAD_MUTEX_INITIALIZER;
static struct prefix_stats *buckets[PREFIX_BUCKETS];

bool stats_detail_on(void)
{
    return __atomic_load_n(&settings.detail_enabled, __ATOMIC_RELAXED);
}

static uint32_t prefix_hash(const char *p, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 16777619u;
    }
    return h;
}

/* The entry for key's prefix, created on first use; NULL when the key has
 * no delimiter or memory ran out. Called with detail_lock held. */
static struct prefix_stats *prefix_find(const char *key, size_t nkey)
{
    const char *delim = memchr(key, settings.prefix_delimiter, nkey);
    if (!delim)
        return NULL;
    size_t n = (size_t)(delim - key);
    uint32_t b = prefix_hash(key, n) % PREFIX_BUCKETS;
    for (struct prefix_stats *ps = buckets[b]; ps; ps = ps->next) {
        if (ps->nprefix == n && memcmp(ps->prefix, key, n) == 0)
            return ps;
    }
    struct prefix_stats *ps = calloc(1, sizeof(*ps) + n + 1);
    if (!ps)
        return NULL;
    memcpy(ps->prefix, key, n);
    ps->nprefix = n;
    ps->next = buckets[b];
    buckets[b] = ps;
    return ps;
}

void stats_detail_record_get(const char *key, size_t nkey, bool hit)
{
    pthread_mutex_lock(&detail_lock);
    struct prefix_stats *ps = prefix_find(key, nkey);
    if (ps) {
        ps->gets++;
        if (hit)
            ps->hits++;
    }
    pthread_mutex_unlock(&detail_lock);
}

void stats_detail_record_set(const char *key, size_t nkey)
{
    pthread_mutex_lock(&detail_lock);
    struct prefix_stats *ps = prefix_find(key, nkey);
    if (ps)
        ps->sets++;
    pthread_mutex_unlock(&detail_lock);
}

void stats_detail_record_delete(const char *key, size_t nkey)
{
    pthread_mutex_lock(&detail_lock);
    struct prefix_stats *ps = prefix_find(key, nkey);
    if (ps)
        ps->deletes++;
    pthread_mutex_unlock(&detail_lock);
}

static char *copy_text(const char *text, size_t *len)
{
    *len = strlen(text);
    char *out = malloc(*len + 1);
    if (out)
        memcpy(out, text, *len + 1);
    return out;
}

/* "PREFIX <p> get <n> hit <n> set <n> del <n>\r\n" per prefix, "END\r\n".
 * Entries are only added (at a bucket's head) until shutdown, so a cursor
 * may keep a pointer to the next one between fills. */
#define DETAIL_LINE_MAX (KEY_MAX_LENGTH + 128)

struct stats_detail_cursor {
    unsigned bucket;
    struct prefix_stats *next; /* in bucket; NULL: start of bucket */
    bool started_bucket;
};

struct stats_detail_cursor *stats_detail_dump_open(void)
{
    return calloc(1, sizeof(struct stats_detail_cursor));
}

size_t stats_detail_dump_fill(struct stats_detail_cursor *cur, char *buf, size_t room, bool *done)
{
    static const char line_fmt[] =
        "PREFIX %s get %" PRIu64 " hit %" PRIu64 " set %" PRIu64 " del %" PRIu64 "\r\n";
    size_t used = 0;
    *done = false;
    pthread_mutex_lock(&detail_lock);
    while (cur->bucket < PREFIX_BUCKETS && room - used >= DETAIL_LINE_MAX + 5) {
        if (!cur->started_bucket) {
            cur->next = buckets[cur->bucket];
            cur->started_bucket = true;
        }
        struct prefix_stats *ps = cur->next;
        if (!ps) {
            cur->bucket++;
            cur->started_bucket = false;
            continue;
        }
        int n = snprintf(buf + used, DETAIL_LINE_MAX, line_fmt, ps->prefix, ps->gets, ps->hits,
                         ps->sets, ps->deletes);
        if (n > 0 && (size_t)n < DETAIL_LINE_MAX)
            used += (size_t)n;
        cur->next = ps->next;
    }
    pthread_mutex_unlock(&detail_lock);
    if (cur->bucket == PREFIX_BUCKETS && room - used >= 5) {
        memcpy(buf + used, "END\r\n", 5);
        used += 5;
        *done = true;
    }
    return used;
}

void stats_detail_dump_close(struct stats_detail_cursor *cur)
{
    free(cur);
}

/* The whole dump in one buffer (the binary protocol's single packet). */
static char *dump(size_t *len)
{
    struct stats_detail_cursor *cur = stats_detail_dump_open();
    struct growbuf out = {NULL, 0, 0, !cur};
    bool done = false;
    char *room;
    while (!done && (room = growbuf_reserve(&out, 64 * 1024)) != NULL)
        out.len += stats_detail_dump_fill(cur, room, 64 * 1024 - 1, &done);
    stats_detail_dump_close(cur);
    if (out.oom) {
        free(out.buf);
        *len = 0;
        return NULL;
    }
    out.buf[out.len] = '\0';
    *len = out.len;
    return out.buf;
}

char *stats_detail_reply(const char *arg, size_t *len)
{
    if (strcmp(arg, "on") == 0) {
        __atomic_store_n(&settings.detail_enabled, true, __ATOMIC_RELAXED);
        return copy_text("OK\r\n", len);
    }
    if (strcmp(arg, "off") == 0) {
        __atomic_store_n(&settings.detail_enabled, false, __ATOMIC_RELAXED);
        return copy_text("OK\r\n", len);
    }
    if (strcmp(arg, "dump") == 0)
        return dump(len);
    return copy_text("CLIENT_ERROR usage: stats detail on|off|dump\r\n", len);
}

void stats_detail_free(void)
{
    stats_detail_clear();
}

void stats_detail_clear(void)
{
    pthread_mutex_lock(&detail_lock);
    for (unsigned b = 0; b < PREFIX_BUCKETS; b++) {
        while (buckets[b]) {
            struct prefix_stats *ps = buckets[b];
            buckets[b] = ps->next;
            free(ps);
        }
    }
    pthread_mutex_unlock(&detail_lock);
}
