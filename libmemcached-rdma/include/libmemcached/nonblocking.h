/* libmemcached/nonblocking.h: the non-blocking calls of libmemcached-rdma.
 * A request object carries one operation from issue to completion; many may
 * be in flight at once on many servers. Included by libmemcached/memcached.h.
 * Declarations only; see memcached_iset(3), memcached_test(3). */
#ifndef LIBMEMCACHED_RDMA_NONBLOCKING_H
#define LIBMEMCACHED_RDMA_NONBLOCKING_H

#include <libmemcached/types.h>

#ifdef __cplusplus
extern "C" {
#endif

memcached_request_st *memcached_request_create(memcached_st *memc);
/* Waits for the request first if it is still in flight. */
void memcached_request_free(memcached_request_st *req);

/* Zero-copy store: key and value must stay valid and unchanged until the
 * request completes. */
memcached_return_t memcached_iset(memcached_st *memc, const char *key, size_t key_length,
                                  const char *value, size_t value_length, time_t expiration,
                                  uint32_t flags, memcached_request_st *req);
/* Buffered store: the value is copied before the call returns. */
memcached_return_t memcached_bset(memcached_st *memc, const char *key, size_t key_length,
                                  const char *value, size_t value_length, time_t expiration,
                                  uint32_t flags, memcached_request_st *req);
/* Zero-copy get into the caller's buffer (MEMCACHED_E2BIG if it is too small). */
memcached_return_t memcached_iget(memcached_st *memc, const char *key, size_t key_length,
                                  char *buffer, size_t buffer_length, memcached_request_st *req);
/* Get into library-owned memory, valid until the request is reused or freed. */
memcached_return_t memcached_bget(memcached_st *memc, const char *key, size_t key_length,
                                  memcached_request_st *req);

/* MEMCACHED_IN_PROGRESS while pending, then the operation's own result. */
memcached_return_t memcached_test(memcached_st *memc, memcached_request_st *req);
memcached_return_t memcached_wait(memcached_st *memc, memcached_request_st *req);
memcached_return_t memcached_wait_all(memcached_st *memc);

memcached_return_t memcached_request_return(const memcached_request_st *req);
const char *memcached_request_value(const memcached_request_st *req, size_t *value_length);
uint32_t memcached_request_flags(const memcached_request_st *req);
uint64_t memcached_request_cas(const memcached_request_st *req);

#ifdef __cplusplus
}
#endif

#endif
