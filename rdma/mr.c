/* rdma/mr.c: region registration and the client registration cache (see
 * mr.h). Owns translation of MCR_RDMA_ACCESS_* to verbs access flags; it never
 * grants remote access that was not asked for. */
#include "rdma/mr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define REMOTE_ACCESS (MCR_RDMA_ACCESS_REMOTE_READ | MCR_RDMA_ACCESS_REMOTE_WRITE)

int mcr_rdma_window_access(unsigned access)
{
    int flags = 0;
    if (access & MCR_RDMA_ACCESS_REMOTE_READ)
        flags |= IBV_ACCESS_REMOTE_READ;
    if (access & MCR_RDMA_ACCESS_REMOTE_WRITE)
        flags |= IBV_ACCESS_REMOTE_WRITE;
    return flags;
}

static int verbs_access(unsigned access)
{
    int flags = IBV_ACCESS_LOCAL_WRITE | mcr_rdma_window_access(access);
    if (access & MCR_RDMA_ACCESS_WINDOW)
        flags |= IBV_ACCESS_MW_BIND;
    return flags;
}

struct ibv_mw *mcr_rdma_window_alloc(struct ibv_pd *pd)
{
    return ibv_alloc_mw(pd, IBV_MW_TYPE_2);
}

void mcr_rdma_window_free(struct ibv_mw *mw)
{
    if (mw != NULL)
        ibv_dealloc_mw(mw);
}

int mcr_rdma_region_register(struct ibv_pd *pd, void *addr, size_t len, unsigned access,
                             struct mcr_rdma_region *out)
{
    memset(out, 0, sizeof(*out));
    if (addr == NULL || len == 0)
        return -EINVAL;
    struct ibv_mr *mr = ibv_reg_mr(pd, addr, len, verbs_access(access));
    if (mr == NULL)
        return errno ? -errno : -ENOMEM;
    out->addr = addr;
    out->len = len;
    out->mr = mr;
    return 0;
}

void mcr_rdma_region_deregister(struct mcr_rdma_region *region)
{
    if (region->mr != NULL)
        ibv_dereg_mr(region->mr);
    memset(region, 0, sizeof(*region));
}

struct regcache_entry {
    struct ibv_mr *mr; /* NULL: slot empty */
    uintptr_t start, end;
    unsigned access;
    unsigned refs;
    uint64_t last_use;
};

struct mcr_rdma_regcache {
    struct ibv_pd *pd;
    unsigned max_entries;
    uint64_t clock;
    struct mcr_rdma_regcache_stats stats;
    struct regcache_entry *entries;
};

struct mcr_rdma_regcache *mcr_rdma_regcache_create(struct ibv_pd *pd, unsigned max_entries)
{
    struct mcr_rdma_regcache *cache = calloc(1, sizeof(*cache));
    if (cache == NULL)
        return NULL;
    cache->pd = pd;
    cache->max_entries = max_entries;
    if (max_entries > 0) {
        cache->entries = calloc(max_entries, sizeof(*cache->entries));
        if (cache->entries == NULL) {
            free(cache);
            return NULL;
        }
    }
    return cache;
}

void mcr_rdma_regcache_destroy(struct mcr_rdma_regcache *cache)
{
    if (cache == NULL)
        return;
    for (unsigned i = 0; i < cache->max_entries; i++)
        if (cache->entries[i].mr != NULL)
            ibv_dereg_mr(cache->entries[i].mr);
    free(cache->entries);
    free(cache);
}

struct ibv_mr *mcr_rdma_regcache_get(struct mcr_rdma_regcache *cache, void *addr, size_t len,
                                     unsigned access)
{
    uintptr_t start = (uintptr_t)addr, end = start + len;
    if (addr == NULL || len == 0 || end < start) {
        errno = EINVAL;
        return NULL;
    }
    if (cache->max_entries == 0 || (access & REMOTE_ACCESS)) {
        cache->stats.misses++; /* never kept: see mr.h */
        return ibv_reg_mr(cache->pd, addr, len, verbs_access(access));
    }
    struct regcache_entry *victim = NULL;
    for (unsigned i = 0; i < cache->max_entries; i++) {
        struct regcache_entry *e = &cache->entries[i];
        if (e->mr != NULL && e->start <= start && end <= e->end && (e->access & access) == access) {
            e->refs++;
            e->last_use = ++cache->clock;
            cache->stats.hits++;
            return e->mr;
        }
        if (e->mr == NULL) {
            if (victim == NULL || victim->mr != NULL)
                victim = e;
        } else if (e->refs == 0 &&
                   (victim == NULL || (victim->mr != NULL && e->last_use < victim->last_use))) {
            victim = e;
        }
    }
    if (victim == NULL) {
        errno = ENOSPC;
        return NULL;
    }
    struct ibv_mr *mr = ibv_reg_mr(cache->pd, addr, len, verbs_access(access));
    if (mr == NULL)
        return NULL;
    if (victim->mr != NULL) {
        ibv_dereg_mr(victim->mr);
        cache->stats.evictions++;
        cache->stats.entries--;
    }
    victim->mr = mr;
    victim->start = start;
    victim->end = end;
    victim->access = access;
    victim->refs = 1;
    victim->last_use = ++cache->clock;
    cache->stats.misses++;
    cache->stats.entries++;
    return mr;
}

void mcr_rdma_regcache_put(struct mcr_rdma_regcache *cache, struct ibv_mr *mr)
{
    for (unsigned i = 0; i < cache->max_entries; i++) {
        if (cache->entries[i].mr == mr && cache->entries[i].refs > 0) {
            cache->entries[i].refs--;
            return;
        }
    }
    ibv_dereg_mr(mr); /* not kept (remote access, or no cache) */
}

unsigned mcr_rdma_regcache_invalidate(struct mcr_rdma_regcache *cache, void *addr, size_t len)
{
    uintptr_t start = (uintptr_t)addr, end = start + len;
    unsigned busy = 0;
    for (unsigned i = 0; i < cache->max_entries; i++) {
        struct regcache_entry *e = &cache->entries[i];
        if (e->mr == NULL || e->end <= start || end <= e->start)
            continue;
        if (e->refs > 0) {
            busy++;
            continue;
        }
        ibv_dereg_mr(e->mr);
        memset(e, 0, sizeof(*e));
        cache->stats.entries--;
    }
    return busy;
}

void mcr_rdma_regcache_stats(const struct mcr_rdma_regcache *cache,
                             struct mcr_rdma_regcache_stats *out)
{
    *out = cache->stats;
}
