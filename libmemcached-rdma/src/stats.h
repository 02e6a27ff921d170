/* stats.h: where "STAT name value" pairs go: into a memcached_stat_st
 * (known fields plus every pair for memcached_stat_get_value) and/or to a
 * memcached_stat_execute callback. Filled by the protocol parsers. */
#ifndef LMR_STATS_H
#define LMR_STATS_H

#include <libmemcached/memcached.h>

struct lmr_stat_sink {
    memcached_stat_st *stat;    /* NULL: callback only */
    memcached_stat_fn callback; /* NULL: struct only */
    void *context;
    const memcached_instance_st *server;
    memcached_return_t rc; /* first failure while storing */
    /* memcached_dump: "ITEM key ..." lines are keys, for these (with
     * context); there may be none */
    bool dumping;
    memcached_dump_fn *dump;
    uint32_t dump_count;
    const memcached_st *root;
};

void lmr_stat_sink_add(struct lmr_stat_sink *sink, const char *name, size_t name_length,
                       const char *value, size_t value_length);
/* One key of a "stats cachedump" reply: to each dump callback in turn,
 * until one fails (its code then kept in sink->rc). */
void lmr_stat_sink_item(struct lmr_stat_sink *sink, const char *key, size_t key_length);
/* Frees the list of every pair kept for memcached_stat_get_value. */
void lmr_stat_pairs_free(memcached_stat_st *st);

#endif
