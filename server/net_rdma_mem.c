/*
 * net_rdma_mem.c: registration of slab memory with the RDMA worker
 * contexts (net_rdma_mem.h). Owns the list of registered regions: one entry
 * per slab region, one local-only memory region per protection domain,
 * published newest first so worker threads look up without a lock; entries
 * are added under the allocator's pool lock (its region observer) and freed
 * only at shutdown.
 */
#include "config.h"

#ifdef HAVE_RDMA

#include "net_rdma_mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "rdma/mr.h"
#include "slabs.h"

struct slab_reg {
    struct slab_reg *next; /* older; immutable once published */
    const char *base;
    size_t len;
    struct mcr_rdma_region reg[]; /* one per protection domain slot */
};

static struct ibv_pd **pds;
static unsigned npds;
static struct slab_reg *regs; /* newest first */

/* The allocator's region observer: runs with its pool lock held. */
static void register_region(void *arg, void *base, size_t len)
{
    (void)arg;
    struct slab_reg *r = calloc(1, sizeof(*r) + npds * sizeof(r->reg[0]));
    if (!r) {
        log_msg(LOG_WARN, "rdma: out of memory registering %zu bytes of slab memory", len);
        return;
    }
    r->base = base;
    r->len = len;
    for (unsigned i = 0; i < npds; i++) {
        int err = mcr_rdma_region_register(pds[i], base, len, MCR_RDMA_ACCESS_LOCAL, &r->reg[i]);
        if (err != 0)
            log_msg(LOG_WARN,
                    "rdma: cannot register %zu bytes of slab memory (%s): values in it go "
                    "through staging buffers",
                    len, strerror(-err));
    }
    r->next = regs;
    __atomic_store_n(&regs, r, __ATOMIC_RELEASE);
}

int rdma_mem_start(struct ibv_pd *const *list, unsigned n)
{
    pds = calloc(n ? n : 1, sizeof(*pds));
    if (!pds)
        return -1;
    memcpy(pds, list, n * sizeof(*pds));
    npds = n;
    slabs_observe_regions(register_region, NULL);
    return 0;
}

void rdma_mem_stop(void)
{
    if (!pds)
        return;
    slabs_observe_regions(NULL, NULL);
    while (regs) {
        struct slab_reg *r = regs;
        regs = r->next;
        for (unsigned i = npds; i-- > 0;)
            mcr_rdma_region_deregister(&r->reg[i]);
        free(r);
    }
    free(pds);
    pds = NULL;
    npds = 0;
}

struct ibv_mr *rdma_mem_lookup(unsigned slot, const void *addr, size_t len)
{
    const char *p = addr;
    for (const struct slab_reg *r = __atomic_load_n(&regs, __ATOMIC_ACQUIRE); r; r = r->next) {
        if (p >= r->base && p < r->base + r->len) {
            if (len > (size_t)(r->base + r->len - p) || slot >= npds)
                return NULL;
            return r->reg[slot].mr;
        }
    }
    return NULL;
}

#else
/* Built without rdma-core: nothing is registered. */
typedef int net_rdma_mem_unused;
#endif
