/* stats.c: statistics of servers: storing "STAT name value" pairs into a
 * memcached_stat_st (the well-known fields and the full list of pairs),
 * memcached_stat_get_value / _get_keys, memcached_stat_free, and
 * memcached_analyze's summary of them. */
#include "stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

/* Every pair received, as "name\0value\0" strings. */
struct lmr_stat_pairs {
    size_t count, capacity;
    char **pairs;
};

static unsigned long long to_ull(const char *v)
{
    return strtoull(v, NULL, 10);
}

/* The numeric fields of memcached_stat_st, named as the server names them. */
#define NUMERIC_FIELDS(X)                                                                          \
    X(connection_structures)                                                                       \
    X(curr_connections)                                                                            \
    X(curr_items)                                                                                  \
    X(pid)                                                                                         \
    X(pointer_size)                                                                                \
    X(threads)                                                                                     \
    X(time)                                                                                        \
    X(total_connections)                                                                           \
    X(total_items)                                                                                 \
    X(uptime)                                                                                      \
    X(bytes)                                                                                       \
    X(bytes_read)                                                                                  \
    X(bytes_written)                                                                               \
    X(cmd_get)                                                                                     \
    X(cmd_set)                                                                                     \
    X(evictions)                                                                                   \
    X(get_hits)                                                                                    \
    X(get_misses)                                                                                  \
    X(limit_maxbytes)

static void set_known_field(memcached_stat_st *st, const char *name, const char *value)
{
#define FIELD(f)                                                                                   \
    if (strcmp(name, #f) == 0) {                                                                   \
        st->f = (__typeof__(st->f))to_ull(value);                                                  \
        return;                                                                                    \
    }
    NUMERIC_FIELDS(FIELD)
#undef FIELD
    if (strcmp(name, "version") == 0) {
        snprintf(st->version, sizeof(st->version), "%s", value);
    } else if (strcmp(name, "rusage_user") == 0 || strcmp(name, "rusage_system") == 0) {
        char *dot;
        unsigned long secs = strtoul(value, &dot, 10);
        unsigned long usecs = *dot == '.' || *dot == ':' ? strtoul(dot + 1, NULL, 10) : 0;
        if (name[7] == 'u') {
            st->rusage_user_seconds = secs;
            st->rusage_user_microseconds = usecs;
        } else {
            st->rusage_system_seconds = secs;
            st->rusage_system_microseconds = usecs;
        }
    }
}

static memcached_return_t store_pair(memcached_stat_st *st, const char *name, size_t nl,
                                     const char *value, size_t vl)
{
    struct lmr_stat_pairs *p = st->impl;
    if (p == NULL) {
        p = calloc(1, sizeof(*p));
        if (p == NULL)
            return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
        st->impl = p;
    }
    if (p->count == p->capacity) {
        size_t cap = p->capacity ? p->capacity * 2 : 64;
        char **grown = realloc(p->pairs, cap * sizeof(*grown));
        if (grown == NULL)
            return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
        p->pairs = grown;
        p->capacity = cap;
    }
    char *pair = malloc(nl + vl + 2);
    if (pair == NULL)
        return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    memcpy(pair, name, nl);
    pair[nl] = '\0';
    memcpy(pair + nl + 1, value, vl);
    pair[nl + 1 + vl] = '\0';
    p->pairs[p->count++] = pair;
    set_known_field(st, pair, pair + nl + 1);
    return MEMCACHED_SUCCESS;
}

void lmr_stat_sink_add(struct lmr_stat_sink *sink, const char *name, size_t name_length,
                       const char *value, size_t value_length)
{
    if (sink->stat != NULL) {
        memcached_return_t rc = store_pair(sink->stat, name, name_length, value, value_length);
        if (rc != MEMCACHED_SUCCESS && sink->rc == MEMCACHED_SUCCESS)
            sink->rc = rc;
    }
    if (sink->callback != NULL)
        (void)sink->callback(sink->server, name, name_length, value, value_length, sink->context);
}

void lmr_stat_sink_item(struct lmr_stat_sink *sink, const char *key, size_t key_length)
{
    char copy[MEMCACHED_MAX_KEY];
    if (key_length >= sizeof(copy))
        key_length = sizeof(copy) - 1;
    memcpy(copy, key, key_length);
    copy[key_length] = '\0'; /* callbacks get a terminated key */
    for (uint32_t i = 0; i < sink->dump_count; i++) {
        memcached_return_t rc = sink->dump[i](sink->root, copy, key_length, sink->context);
        if (rc != MEMCACHED_SUCCESS) {
            if (sink->rc == MEMCACHED_SUCCESS)
                sink->rc = rc;
            break;
        }
    }
}

/* The well-known fields by name, as text (false for any other name). */
static bool known_field_text(const memcached_stat_st *st, const char *name, char *out, size_t size)
{
#define FIELD(f)                                                                                   \
    if (strcmp(name, #f) == 0)                                                                     \
        return snprintf(out, size, "%llu", (unsigned long long)st->f) > 0;
    NUMERIC_FIELDS(FIELD)
#undef FIELD
    if (strcmp(name, "version") == 0)
        return snprintf(out, size, "%s", st->version) >= 0;
    if (strcmp(name, "rusage_user") == 0)
        return snprintf(out, size, "%lu.%06lu", (unsigned long)st->rusage_user_seconds,
                        (unsigned long)st->rusage_user_microseconds) > 0;
    if (strcmp(name, "rusage_system") == 0)
        return snprintf(out, size, "%lu.%06lu", (unsigned long)st->rusage_system_seconds,
                        (unsigned long)st->rusage_system_microseconds) > 0;
    return false;
}

char *memcached_stat_get_value(const memcached_st *ptr, memcached_stat_st *memc_stat,
                               const char *key, memcached_return_t *error)
{
    memcached_return_t unused;
    if (error == NULL)
        error = &unused;
    if (memc_stat == NULL || key == NULL) {
        *error = MEMCACHED_INVALID_ARGUMENTS;
        return NULL;
    }
    const struct lmr_stat_pairs *p = memc_stat->impl;
    char text[64];
    const char *found = NULL;
    for (size_t i = 0; p != NULL && i < p->count && found == NULL; i++)
        if (strcmp(p->pairs[i], key) == 0)
            found = p->pairs[i] + strlen(p->pairs[i]) + 1;
    /* a struct without its pairs (memcached_stat_servername's) still has
     * the well-known fields */
    if (found == NULL && p == NULL && known_field_text(memc_stat, key, text, sizeof(text)))
        found = text;
    if (found == NULL) {
        *error = MEMCACHED_INVALID_ARGUMENTS; /* a name the server did not send, as libmemcached */
        return NULL;
    }
    char *copy = lmr_caller_buffer(ptr, strdup(found), strlen(found));
    *error = copy ? MEMCACHED_SUCCESS : MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    return copy;
}

/* libmemcached's fixed list: the names of memcached_stat_st's fields, the
 * same whatever the server sent (memcached_stat_get_value reads any name). */
static const char *const stat_key_names[] = {"pid",
                                             "uptime",
                                             "time",
                                             "version",
                                             "pointer_size",
                                             "rusage_user",
                                             "rusage_system",
                                             "curr_items",
                                             "total_items",
                                             "bytes",
                                             "curr_connections",
                                             "total_connections",
                                             "connection_structures",
                                             "cmd_get",
                                             "cmd_set",
                                             "get_hits",
                                             "get_misses",
                                             "evictions",
                                             "bytes_read",
                                             "bytes_written",
                                             "limit_maxbytes",
                                             "threads",
                                             NULL};

char **memcached_stat_get_keys(memcached_st *ptr, memcached_stat_st *memc_stat,
                               memcached_return_t *error)
{
    (void)memc_stat;
    memcached_return_t unused;
    if (error == NULL)
        error = &unused;
    if (ptr == NULL) {
        *error = MEMCACHED_INVALID_ARGUMENTS;
        return NULL;
    }
    /* one block: the caller releases it with a single free() */
    char **list = lmr_caller_alloc(ptr, sizeof(stat_key_names));
    if (list == NULL) {
        *error = MEMCACHED_MEMORY_ALLOCATION_FAILURE;
        return NULL;
    }
    memcpy(list, stat_key_names, sizeof(stat_key_names));
    *error = MEMCACHED_SUCCESS;
    return list;
}

void lmr_stat_pairs_free(memcached_stat_st *st)
{
    struct lmr_stat_pairs *p = st->impl;
    if (p == NULL)
        return;
    for (size_t i = p->count; i > 0; i--)
        free(p->pairs[i - 1]);
    free(p->pairs);
    free(p);
    st->impl = NULL;
}

void memcached_stat_free(const memcached_st *ptr, memcached_stat_st *memc_stat)
{
    (void)ptr;
    if (memc_stat == NULL)
        return;
    for (memcached_stat_st *st = memc_stat; st->root != NULL; st++)
        lmr_stat_pairs_free(st);
    free(memc_stat);
}

memcached_analysis_st *memcached_analyze(memcached_st *memc, memcached_stat_st *memc_stat,
                                         memcached_return_t *error)
{
    memcached_return_t unused;
    if (error == NULL)
        error = &unused;
    if (memc == NULL || memc_stat == NULL)
        return NULL;
    memcached_analysis_st *a = calloc(1, sizeof(*a));
    if (a == NULL) {
        *error = MEMCACHED_MEMORY_ALLOCATION_FAILURE;
        return NULL;
    }
    a->root = memc;
    uint64_t items = 0, bytes = 0, gets = 0, hits = 0;
    uint32_t n = memcached_server_count(memc);
    for (uint32_t i = 0; i < n; i++) {
        const memcached_stat_st *st = &memc_stat[i];
        if (st->bytes > a->most_used_bytes) { /* the first of equals wins */
            a->most_used_bytes = st->bytes;
            a->most_consumed_server = i;
        }
        if ((uint32_t)st->uptime > a->longest_uptime) {
            a->longest_uptime = (uint32_t)st->uptime;
            a->oldest_server = i;
        }
        uint64_t room = st->limit_maxbytes - st->bytes;
        /* 0 means "none yet", as libmemcached reads it: a full server is
         * passed over by the next one */
        if (a->least_remaining_bytes == 0 || room < a->least_remaining_bytes) {
            a->least_remaining_bytes = room;
            a->least_free_server = i;
        }
        items += st->curr_items;
        bytes += st->bytes;
        gets += st->cmd_get;
        hits += st->get_hits;
    }
    if (items > 0 && bytes > 0)
        a->average_item_size = (uint32_t)(bytes / items);
    a->pool_hit_ratio = gets > 0 && hits > 0 ? (double)hits / (double)gets * 100.0 : 0.0;
    *error = MEMCACHED_SUCCESS;
    return a;
}

void memcached_analyze_free(memcached_analysis_st *analysis)
{
    free(analysis);
}
