/* t/libmc/compat_config.h: the placement settings the compatibility test
 * runs through. Compiled into both the writer (Debian's libmemcached) and
 * the reader (libmemcached-rdma): only API calls both libraries share. */
#ifndef LMR_TEST_COMPAT_CONFIG_H
#define LMR_TEST_COMPAT_CONFIG_H

#include <string.h>

#include <libmemcached/memcached.h>

#define COMPAT_KEYS 2000

struct compat_mode {
    const char *name;
    int distribution; /* -1: leave the default */
    int ketama;       /* set MEMCACHED_BEHAVIOR_KETAMA */
    int weighted;     /* set MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED */
    int hash;         /* -1: default */
    uint32_t weights[3];
    int servers_first; /* add servers before setting behaviors */
    int sort_hosts;    /* 1: SORT_HOSTS before adding servers, 2: after
                          everything; servers are then added in descending
                          port order, so sorting changes the list */
};

static const struct compat_mode compat_modes[] = {
    {"modula", -1, 0, 0, -1, {1, 1, 1}, 1, 0},
    {"modula-md5", -1, 0, 0, MEMCACHED_HASH_MD5, {1, 1, 1}, 1, 0},
    {"modula-crc", -1, 0, 0, MEMCACHED_HASH_CRC, {1, 1, 1}, 0, 0},
    {"modula-fnv1a32", -1, 0, 0, MEMCACHED_HASH_FNV1A_32, {1, 1, 1}, 0, 0},
    {"modula-murmur", -1, 0, 0, MEMCACHED_HASH_MURMUR, {1, 1, 1}, 0, 0},
    {"modula-jenkins", -1, 0, 0, MEMCACHED_HASH_JENKINS, {1, 1, 1}, 0, 0},
    {"ketama", -1, 1, 0, -1, {1, 1, 1}, 1, 0},
    {"ketama-servers-last", -1, 1, 0, -1, {1, 1, 1}, 0, 0},
    {"ketama-weighted", -1, 0, 1, -1, {1, 2, 5}, 1, 0},
    {"ketama-md5", -1, 1, 0, MEMCACHED_HASH_MD5, {1, 1, 1}, 0, 0},
    {"consistent-murmur",
     MEMCACHED_DISTRIBUTION_CONSISTENT,
     0,
     0,
     MEMCACHED_HASH_MURMUR,
     {1, 1, 1},
     0,
     0},
    /* HASH set after the continuum was built: its points keep the default
     * hash, keys use the new one */
    {"ketama-hash-late-md5", -1, 1, 0, MEMCACHED_HASH_MD5, {1, 1, 1}, 1, 0},
    {"consistent-hash-late-murmur",
     MEMCACHED_DISTRIBUTION_CONSISTENT,
     0,
     0,
     MEMCACHED_HASH_MURMUR,
     {1, 1, 1},
     1,
     0},
    {"modula-sorted", -1, 0, 0, -1, {1, 1, 1}, 0, 1},
    {"modula-crc-sorted-late", -1, 0, 0, MEMCACHED_HASH_CRC, {1, 1, 1}, 1, 2},
    {"ketama-sorted", -1, 1, 0, -1, {1, 1, 1}, 0, 1},
    {"ketama-weighted-sorted-late", -1, 0, 1, -1, {1, 2, 5}, 1, 2},
};

#define COMPAT_MODE_COUNT (sizeof(compat_modes) / sizeof(compat_modes[0]))

static inline const struct compat_mode *compat_find(const char *name)
{
    for (size_t i = 0; i < COMPAT_MODE_COUNT; i++)
        if (strcmp(compat_modes[i].name, name) == 0)
            return &compat_modes[i];
    return NULL;
}

static inline void compat_add_servers(memcached_st *memc, const struct compat_mode *m,
                                      const unsigned *ports)
{
    int order[3] = {0, 1, 2};
    if (m->sort_hosts) /* descending ports */
        for (int i = 0; i < 3; i++)
            for (int j = i + 1; j < 3; j++)
                if (ports[order[j]] > ports[order[i]]) {
                    int t = order[i];
                    order[i] = order[j];
                    order[j] = t;
                }
    for (int i = 0; i < 3; i++)
        memcached_server_add_with_weight(memc, "127.0.0.1", (in_port_t)ports[order[i]],
                                         m->weights[order[i]]);
}

/* libmemcached hashes unweighted continuum points when the continuum is
 * built (adding servers, choosing a distribution), so a HASH set after that
 * leaves the points hashed with the old function: modes with servers_first
 * and a hash on a consistent distribution check that case. */
static inline memcached_st *compat_client(const struct compat_mode *m, const unsigned *ports)
{
    memcached_st *memc = memcached_create(NULL);
    if (m->sort_hosts == 1)
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_SORT_HOSTS, 1);
    if (m->servers_first)
        compat_add_servers(memc, m, ports);
    if (m->distribution >= 0)
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_DISTRIBUTION, (uint64_t)m->distribution);
    if (m->ketama)
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_KETAMA, 1);
    if (m->weighted)
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1);
    if (m->hash >= 0)
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_HASH, (uint64_t)m->hash);
    if (!m->servers_first)
        compat_add_servers(memc, m, ports);
    if (m->sort_hosts == 2)
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_SORT_HOSTS, 1);
    return memc;
}

static inline void compat_key(char *buf, size_t size, const char *mode, int i)
{
    snprintf(buf, size, "compat:%s:%d", mode, i);
}

#endif
