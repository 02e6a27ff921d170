/*
 * conn_value.c: the item a set's value is read into, allocated for the
 * connection from what conn_value_request() noted, parking the request
 * (conn_wait_room, conn.c) while the flash writer frees memory of the
 * item's class (see conn.h), counted as extstore_set_waits and, when the
 * wait ends without such a chunk, extstore_set_waits_given_up.
 */
#include "conn.h"

#include <string.h>

#include "items.h"
#include "stats.h"
#include "thread.h"

void conn_value_request(struct conn *c, const char *key, size_t nkey, uint32_t flags,
                        rel_time_t exptime, size_t nbytes)
{
    struct conn_value *v = &c->value;
    v->nkey = nkey;
    memcpy(v->key, key, nkey < sizeof(v->key) ? nkey : sizeof(v->key));
    v->flags = flags;
    v->exptime = exptime;
    v->nbytes = nbytes;
    v->room = (struct alloc_wait){0};
}

item *conn_alloc_value(struct conn *c, void (*retry)(struct conn *c), enum alloc_result *why)
{
    struct conn_value *v = &c->value;
    if (v->nkey > sizeof(v->key)) {
        *why = ALLOC_TOO_LARGE;
        return NULL;
    }
    if (c->tp->datagram) /* a message cannot wait: the next one would be read */
        return item_alloc(v->key, v->nkey, v->flags, v->exptime, v->nbytes, why);
    struct worker_stats *ws = &c->worker->stats;
    bool parked_before = v->room.started;
    item *it = item_alloc_parkable(v->key, v->nkey, v->flags, v->exptime, v->nbytes, &v->room, why);
    if (!it && *why == ALLOC_FLASH_WAIT) {
        if (conn_wait_room(c, retry)) {
            if (!parked_before)
                STAT_INCR(ws, extstore_set_waits);
            return NULL;
        }
        *why = ALLOC_NO_MEMORY; /* cannot wait: the set fails, as memcached's would */
    }
    /* the wait ended without a chunk the writer freed: the set evicted,
     * or failed */
    if (parked_before && (v->room.gave_up || !it))
        STAT_INCR(ws, extstore_set_waits_given_up);
    return it;
}

void conn_value_delete_old(struct conn *c)
{
    if (c->value.nkey <= sizeof(c->value.key)) /* a longer key names no item */
        item_delete(c->value.key, c->value.nkey, 0);
}

const char *conn_value_alloc_error(struct conn *c, enum alloc_result why)
{
    if (why == ALLOC_TOO_LARGE) {
        STAT_INCR(&c->worker->stats, store_too_large);
        return "SERVER_ERROR object too large for cache";
    }
    STAT_INCR(&c->worker->stats, store_no_memory);
    return "SERVER_ERROR out of memory storing object";
}
