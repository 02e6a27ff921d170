/*
 * t/storage_harness.c: what the storage engine's unit tests (t/test_storage*.c) share: the
 * engine's default settings and start, values written and read through an item's segments, stores
 * in one call, and stats collected by name. See storage_harness.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/clock.h"
#include "server/slabs.h"
#include "t/rdma/tap.h"
#include "t/storage_harness.h"

struct storage_config default_config(void)
{
    struct storage_config cfg = {
        .maxbytes = 64 * (size_t)MIB,
        .factor = 1.25,
        .chunk_size = 48,
        .item_size_max = MIB,
        .slab_page_size = MIB,
        .slab_chunk_max = 0,
        .prealloc = false,
        .evict_to_free = true,
        .use_cas = true,
        .hashpower_init = 0,
        .lru_crawler = true,
        .worker_threads = 4,
    };
    return cfg;
}

int start(const struct storage_config *cfg)
{
    char err[256] = "";
    clock_init();
    int rc = storage_init(cfg, err, sizeof(err));
    if (rc != 0)
        tap_diag("storage_init: %s", err);
    return rc;
}

void fill_pattern(char *buf, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (char)('a' + (i * 7 + seed * 13 + i / 251) % 26);
}

int store_full(const char *key, const char *val, size_t len, uint32_t flags, rel_time_t exp,
               enum store_op op, uint64_t cas, uint64_t *cas_out, enum alloc_result *why)
{
    enum alloc_result w;
    item *it = item_alloc(key, strlen(key), flags, exp, len, &w);
    if (why)
        *why = w;
    if (!it)
        return -1;
    item_value_write(it, val, len);
    enum store_result r = item_store(it, op, cas, cas_out);
    item_release(it);
    return (int)r;
}

int store(const char *key, const char *val, enum store_op op)
{
    return store_full(key, val, strlen(val), 0, 0, op, 0, NULL, NULL);
}

char *value_of(const item *it)
{
    size_t len = item_nbytes(it), off = 0;
    char *buf = malloc(len + 1);
    unsigned n = item_value_nseg(it);
    for (unsigned i = 0; i < n; i++) {
        struct iovec v = item_value_seg(it, i);
        memcpy(buf + off, v.iov_base, v.iov_len);
        off += v.iov_len;
    }
    buf[off] = '\0';
    return buf;
}

int has_value(const char *key, const char *expect)
{
    item *it = item_get(key, strlen(key));
    if (!it)
        return expect == NULL;
    char *v = value_of(it);
    int same = expect && item_nbytes(it) == strlen(expect) && strcmp(v, expect) == 0;
    if (!same)
        tap_diag("%s holds '%.60s' (%zu bytes), expected '%.60s'", key, v, item_nbytes(it),
                 expect ? expect : "(missing)");
    free(v);
    item_release(it);
    return same;
}

int exists(const char *key)
{
    item *it = item_get(key, strlen(key));
    if (it)
        item_release(it);
    return it != NULL;
}

void collect(void *ctx, const char *name, const char *value)
{
    struct stat_list *l = ctx;
    if (l->n < 512) {
        snprintf(l->names[l->n], 64, "%s", name);
        snprintf(l->values[l->n], 64, "%s", value);
        l->n++;
    }
}

const char *stat_get(const struct stat_list *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->names[i], name) == 0)
            return l->values[i];
    return NULL;
}

unsigned long long general_stat(const char *name)
{
    static struct stat_list l;
    l.n = 0;
    storage_stats_general(collect, &l);
    const char *v = stat_get(&l, name);
    if (!v) {
        tap_diag("stat %s missing", name);
        return (unsigned long long)-1;
    }
    return strtoull(v, NULL, 10);
}

unsigned long long malloced(void)
{
    static struct stat_list l;
    l.n = 0;
    storage_stats_slabs(collect, &l);
    const char *v = stat_get(&l, "total_malloced");
    return v ? strtoull(v, NULL, 10) : (unsigned long long)-1;
}

unsigned long long held(void)
{
    struct slabs_global_stats g;
    slabs_global_stats(&g);
    return g.held_bytes;
}
