/* request.c: lifecycle of request objects: preparing one for a new
 * operation, owned buffers, detached requests. Does no I/O and no encoding. */
#include "request.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

size_t lmr_request_wire_length(const memcached_request_st *req)
{
    return req->head_length + req->body_length + req->tail_length;
}

static void release_head(memcached_request_st *req)
{
    if (req->head != NULL && req->head != req->head_inline)
        free(req->head);
    req->head = req->head_inline;
    req->head_length = 0;
}

void lmr_request_init(memcached_request_st *req)
{
    memset(req, 0, offsetof(memcached_request_st, head_inline));
}

void lmr_request_prepare(memcached_request_st *req, struct lmr_client *client,
                         enum lmr_op_kind kind)
{
    char *lib_buffer = req->lib_buffer;
    size_t lib_capacity = req->lib_capacity;
    bool detached = req->detached;
    struct lmr_group *group = req->group;
    uint32_t child_index = req->child_index;
    release_head(req);
    free(req->body_copy);
    lmr_request_init(req);
    req->lib_buffer = lib_buffer;
    req->lib_capacity = lib_capacity;
    req->detached = detached;
    req->group = group;
    req->child_index = child_index;
    req->head = req->head_inline;
    req->client = client;
    req->kind = kind;
    req->state = LMR_STATE_IDLE;
    req->expects_reply = true;
    req->rc = MEMCACHED_SUCCESS;
}

void lmr_request_release(memcached_request_st *req)
{
    release_head(req);
    free(req->body_copy);
    req->body_copy = NULL;
    free(req->lib_buffer);
    req->lib_buffer = NULL;
    req->lib_capacity = 0;
}

memcached_request_st *lmr_request_new_detached(struct lmr_client *client, enum lmr_op_kind kind)
{
    memcached_request_st *req = calloc(1, sizeof(*req));
    if (req == NULL)
        return NULL;
    req->head = req->head_inline;
    lmr_request_prepare(req, client, kind);
    req->detached = true;
    return req;
}

bool lmr_request_reserve_head(memcached_request_st *req, size_t need)
{
    if (need <= LMR_HEAD_INLINE) {
        req->head = req->head_inline;
        return true;
    }
    char *big = malloc(need);
    if (big == NULL)
        return false;
    req->head = big;
    return true;
}

bool lmr_request_copy_body(memcached_request_st *req)
{
    if (req->body_length == 0)
        return true;
    char *copy = malloc(req->body_length);
    if (copy == NULL)
        return false;
    memcpy(copy, req->body, req->body_length);
    req->body_copy = copy;
    req->body = copy;
    return true;
}

bool lmr_request_append_head(memcached_request_st *req, const char *bytes, size_t length)
{
    size_t need = req->head_length + length;
    if (req->head == req->head_inline && need > LMR_HEAD_INLINE) {
        char *big = malloc(need);
        if (big == NULL)
            return false;
        memcpy(big, req->head, req->head_length);
        req->head = big;
    } else if (req->head != req->head_inline) {
        char *big = realloc(req->head, need);
        if (big == NULL)
            return false;
        req->head = big;
    }
    memcpy(req->head + req->head_length, bytes, length);
    req->head_length = need;
    return true;
}

bool lmr_request_reserve_value(memcached_request_st *req, size_t length)
{
    if (req->lib_capacity < length + 1) {
        char *grown = realloc(req->lib_buffer, length + 1);
        if (grown == NULL)
            return false;
        req->lib_buffer = grown;
        req->lib_capacity = length + 1;
    }
    req->lib_buffer[length] = '\0';
    return true;
}
