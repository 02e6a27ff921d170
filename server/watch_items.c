/*
 * watch_items.c: the lines "watch" streams about items, field by field as
 * memcached 1.6 writes them: type=item_get (fetchers), type=item_store
 * (mutations) and type=eviction (evictions). Formats and hands them to
 * watch_log(); owns nothing. Kept apart from watch.c so that code linking
 * the connection machinery without the storage engine (conn.c's unit test)
 * does not need items.
 */
#include "watch.h"

#include "clock.h"

void watch_log_item_get(const char *key, size_t nkey, const item *it, int cfd)
{
    char k[KEY_MAX_LENGTH * 3 + 1];
    watch_log(WATCH_FETCHERS, "type=item_get key=%s status=%s clsid=%u cfd=%d size=%zu",
              watch_key(k, sizeof(k), key, nkey), it ? "found" : "not_found",
              it ? item_class(it) : 0, cfd, it ? item_nbytes(it) : 0);
}

void watch_log_store_lookup(const item *it, int cfd)
{
    item *old = item_peek(item_key(it), item_nkey(it));
    watch_log_item_get(item_key(it), item_nkey(it), old, cfd);
    if (old)
        item_release(old);
}

void watch_log_item_store(const item *it, enum store_result res, enum store_op op, int cfd)
{
    static const char *const cmds[] = {
        [STORE_SET] = "set",       [STORE_ADD] = "add",         [STORE_REPLACE] = "replace",
        [STORE_APPEND] = "append", [STORE_PREPEND] = "prepend", [STORE_CAS] = "cas"};
    static const char *const statuses[] = {[STORE_STORED] = "stored",
                                           [STORE_NOT_STORED] = "not_stored",
                                           [STORE_EXISTS] = "exists",
                                           [STORE_NOT_FOUND] = "not_found",
                                           [STORE_NO_MEMORY] = "no_memory"};
    /* an append or prepend stored a joined item: memcached logs that one */
    item *joined = NULL;
    if (res == STORE_STORED && (op == STORE_APPEND || op == STORE_PREPEND)) {
        joined = item_peek(item_key(it), item_nkey(it));
        if (joined)
            it = joined;
    }
    char k[KEY_MAX_LENGTH * 3 + 1];
    rel_time_t exp = item_exptime(it), now = clock_now();
    unsigned ttl = exp > now ? (unsigned)(exp - now) : 0; /* memcached: 0 without expiry */
    watch_log(WATCH_MUTATIONS,
              "type=item_store key=%s status=%s cmd=%s ttl=%u clsid=%u cfd=%d size=%zu",
              watch_key(k, sizeof(k), item_key(it), item_nkey(it)), statuses[res], cmds[op], ttl,
              item_class(it), cfd, item_nbytes(it));
    if (joined)
        item_release(joined);
}

void watch_eviction(const struct item_eviction *ev)
{
    if (!watch_wants(WATCH_EVICTIONS))
        return;
    char k[KEY_MAX_LENGTH * 3 + 1];
    watch_log(WATCH_EVICTIONS, "type=eviction key=%s fetch=%s ttl=%lld la=%u clsid=%u size=%zu",
              watch_key(k, sizeof(k), ev->key, ev->nkey), ev->fetched ? "yes" : "no", ev->ttl,
              (unsigned)ev->idle, ev->clsid, ev->nbytes);
}
