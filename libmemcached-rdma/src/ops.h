/* ops.h: the common path of every key operation: validate the key, choose
 * the server (group key or key), encode for the active protocol, queue it,
 * and, for blocking calls, wait. Replica writes are issued here too. */
#ifndef LMR_OPS_H
#define LMR_OPS_H

#include "client.h"
#include "request.h"

/* Prepares req for `kind`, encodes it and queues it on the key's server.
 * MEMCACHED_SUCCESS once queued; otherwise the request is done with the
 * returned code. */
memcached_return_t lmr_op_issue(struct lmr_client *c, memcached_request_st *req,
                                enum lmr_op_kind kind, const char *group_key,
                                size_t group_key_length, const struct lmr_op_args *args,
                                bool noreply);
/* Issues to one given server (no key placement). */
memcached_return_t lmr_op_issue_to(memcached_instance_st *srv, memcached_request_st *req,
                                   enum lmr_op_kind kind, const struct lmr_op_args *args,
                                   bool noreply);
/* A blocking key operation: issue + wait, with the NOREPLY, BUFFER_REQUESTS
 * and NUMBER_OF_REPLICAS behaviors applied. `req` receives the result. */
memcached_return_t lmr_op_blocking(memcached_st *ptr, memcached_request_st *req,
                                   enum lmr_op_kind kind, const char *group_key,
                                   size_t group_key_length, const struct lmr_op_args *args);

#endif
