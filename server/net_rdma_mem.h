/*
 * net_rdma_mem.h: slab memory registered for the RDMA transport. Owns one
 * registration of every slab region with each worker context's protection
 * domain (local access only: the server reads into and writes from it; no
 * peer can reach it), made for the regions mapped before RDMA started and,
 * through the allocator's region observer (slabs.h), for every region
 * mapped later; and the lookup of the registration covering a buffer.
 */
#ifndef MCR_NET_RDMA_MEM_H
#define MCR_NET_RDMA_MEM_H

#include <stddef.h>

#include <infiniband/verbs.h>

/* Registers every slab region with each of the n protection domains (slot
 * i is pds[i]) now and every later region when it is mapped. Returns 0, or
 * -1 when out of memory (nothing registered then). */
int rdma_mem_start(struct ibv_pd *const *pds, unsigned n);
/* Stops registering new regions and deregisters everything, newest first
 * (before the protection domains are destroyed). */
void rdma_mem_stop(void);
/* The registration (with the protection domain of `slot`) that covers
 * [addr, addr+len), or NULL when that range is not registered slab memory.
 * Any thread; lock-free. */
struct ibv_mr *rdma_mem_lookup(unsigned slot, const void *addr, size_t len);

#endif
