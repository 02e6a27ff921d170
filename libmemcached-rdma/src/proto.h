/* proto.h: the two wire protocols behind one table: encoding a request
 * (lmr_op_args -> head/body/tail) and parsing the replies buffered in a
 * server (completing requests through io.h). proto_text.c and proto_bin.c
 * implement it; binary frame layout is include/mcr/binary_wire.h. */
#ifndef LMR_PROTO_H
#define LMR_PROTO_H

#include "request.h"
#include "server.h"

struct lmr_proto {
    const char *name;
    /* Fills req's wire bytes; MEMCACHED_SUCCESS, or an error such as
     * MEMCACHED_NOT_SUPPORTED / MEMCACHED_MEMORY_ALLOCATION_FAILURE. */
    memcached_return_t (*encode)(memcached_request_st *req, const struct lmr_op_args *args,
                                 bool noreply);
    /* Consumes buffered replies. MEMCACHED_SUCCESS when it needs more bytes;
     * any other code is a broken stream and fails the server. */
    memcached_return_t (*parse)(memcached_instance_st *srv);
};

extern const struct lmr_proto lmr_proto_text;
extern const struct lmr_proto lmr_proto_binary;

const struct lmr_proto *lmr_proto_of(const struct lmr_client *c);

#endif
