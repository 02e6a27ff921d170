/* behavior.c: memcached_behavior_set/get and the distribution/hash
 * shortcuts, with libmemcached's couplings (KETAMA picks the ketama
 * distribution, KETAMA_WEIGHTED also selects MD5 hashing, a distribution
 * decides whether ketama is weighted). Changing how keys are placed marks
 * the placement for rebuilding; changing the protocol drains and closes. */
#include <libmemcached/memcached.h>

#include "client.h"
#include "erasure.h"
#include "io.h"

static memcached_return_t set_distribution(struct lmr_client *c,
                                           memcached_server_distribution_t type)
{
    switch (type) {
    case MEMCACHED_DISTRIBUTION_CONSISTENT:
    case MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA:
        c->behaviors.ketama_weighted = false;
        break;
    case MEMCACHED_DISTRIBUTION_MODULA:
    case MEMCACHED_DISTRIBUTION_RANDOM:
    case MEMCACHED_DISTRIBUTION_VIRTUAL_BUCKET:
    case MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY:
        break; /* keep the weighting, as libmemcached does (it shows again
                  when a consistent distribution comes back) */
    case MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED:
        c->behaviors.ketama_weighted = true;
        break;
    default:
        return MEMCACHED_INVALID_ARGUMENTS;
    }
    c->behaviors.distribution = type;
    lmr_client_redistribute(c);
    return MEMCACHED_SUCCESS;
}

/* Hsieh is refused as Debian's libmemcached (built without it) refuses it,
 * so that both libraries place keys alike for any accepted setting. */
static bool valid_hash(uint64_t h)
{
    return h < MEMCACHED_HASH_CUSTOM && h != MEMCACHED_HASH_HSIEH;
}

static void drain_and_close(struct lmr_client *c)
{
    lmr_io_wait_all(c);
    lmr_io_drain_all(c);
    for (uint32_t i = 0; i < c->server_count; i++)
        lmr_io_close(c->servers[i]);
}

static int32_t clamp_ms(uint64_t v)
{
    return v > INT32_MAX ? INT32_MAX : (int32_t)v;
}

memcached_return_t memcached_behavior_set(memcached_st *ptr, const memcached_behavior_t flag,
                                          uint64_t data)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    struct lmr_behaviors *b = &c->behaviors;
    switch (flag) {
    case MEMCACHED_BEHAVIOR_NO_BLOCK:
        b->no_block = data != 0;
        break;
    case MEMCACHED_BEHAVIOR_TCP_NODELAY:
        b->tcp_nodelay = data != 0;
        break;
    case MEMCACHED_BEHAVIOR_TCP_KEEPALIVE:
        b->tcp_keepalive = data != 0;
        break;
    case MEMCACHED_BEHAVIOR_TCP_KEEPIDLE:
        b->tcp_keepidle = (uint32_t)data;
        break;
    case MEMCACHED_BEHAVIOR_HASH:
        if (!valid_hash(data))
            return MEMCACHED_INVALID_ARGUMENTS;
        b->key_hash = (memcached_hash_t)data;
        c->custom_hash = NULL; /* replaces memcached_set_hashkit's function */
        c->custom_hash_context = NULL;
        c->placement_dirty = true;
        break;
    case MEMCACHED_BEHAVIOR_KETAMA_HASH:
        if (!valid_hash(data))
            return MEMCACHED_INVALID_ARGUMENTS;
        b->ketama_hash = (memcached_hash_t)data;
        c->placement_dirty = true;
        break;
    case MEMCACHED_BEHAVIOR_KETAMA:
        return set_distribution(c, data ? MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA
                                        : MEMCACHED_DISTRIBUTION_MODULA);
    case MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED:
        if (!data)
            return set_distribution(c, MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA);
        b->key_hash = MEMCACHED_HASH_MD5;
        b->ketama_hash = MEMCACHED_HASH_MD5;
        return set_distribution(c, MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED);
    case MEMCACHED_BEHAVIOR_DISTRIBUTION:
        return set_distribution(c, (memcached_server_distribution_t)data);
    case MEMCACHED_BEHAVIOR_SOCKET_SEND_SIZE:
        b->socket_send_size = data;
        break;
    case MEMCACHED_BEHAVIOR_SOCKET_RECV_SIZE:
        b->socket_recv_size = data;
        break;
    case MEMCACHED_BEHAVIOR_CACHE_LOOKUPS: /* always on, as in libmemcached */
        return MEMCACHED_DEPRECATED;
    case MEMCACHED_BEHAVIOR_SUPPORT_CAS:
        b->support_cas = data != 0;
        break;
    case MEMCACHED_BEHAVIOR_POLL_TIMEOUT:
        b->poll_timeout_ms = clamp_ms(data);
        break;
    case MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT:
        b->connect_timeout_ms = clamp_ms(data);
        break;
    case MEMCACHED_BEHAVIOR_RCV_TIMEOUT:
        b->rcv_timeout_us = clamp_ms(data);
        break;
    case MEMCACHED_BEHAVIOR_SND_TIMEOUT:
        b->snd_timeout_us = clamp_ms(data);
        break;
    case MEMCACHED_BEHAVIOR_BUFFER_REQUESTS:
        b->buffer_requests = data != 0;
        if (!b->buffer_requests)
            lmr_io_wait_all(c);
        break;
    case MEMCACHED_BEHAVIOR_USER_DATA:
        return MEMCACHED_DEPRECATED; /* memcached_set_user_data instead */
    case MEMCACHED_BEHAVIOR_SORT_HOSTS:
        b->sort_hosts = data != 0;
        if (b->sort_hosts) /* the servers already added too */
            lmr_client_sort_servers(c);
        lmr_client_redistribute(c); /* libmemcached rebuilds here */
        break;
    case MEMCACHED_BEHAVIOR_VERIFY_KEY:
        b->verify_key = data != 0;
        break;
    case MEMCACHED_BEHAVIOR_RETRY_TIMEOUT:
        b->retry_timeout_s = (uint32_t)data;
        break;
    case MEMCACHED_BEHAVIOR_BINARY_PROTOCOL:
        if ((data != 0) != b->binary_protocol) {
            drain_and_close(c);
            b->binary_protocol = data != 0;
        }
        break;
    case MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT:
        if (data == 0) /* as libmemcached: at least one failure */
            return MEMCACHED_INVALID_ARGUMENTS;
        b->server_failure_limit = (uint32_t)data;
        break;
    case MEMCACHED_BEHAVIOR_IO_MSG_WATERMARK:
        b->io_msg_watermark = data;
        break;
    case MEMCACHED_BEHAVIOR_IO_BYTES_WATERMARK:
        b->io_bytes_watermark = data;
        break;
    case MEMCACHED_BEHAVIOR_IO_KEY_PREFETCH:
        b->io_key_prefetch = data;
        break;
    case MEMCACHED_BEHAVIOR_HASH_WITH_PREFIX_KEY:
        b->hash_with_prefix_key = data != 0;
        break;
    case MEMCACHED_BEHAVIOR_NOREPLY:
        b->noreply = data != 0;
        break;
    case MEMCACHED_BEHAVIOR_USE_UDP:
        if (data)
            return MEMCACHED_NOT_SUPPORTED;
        break;
    case MEMCACHED_BEHAVIOR_AUTO_EJECT_HOSTS:
    case MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS:
        b->remove_failed_servers = data != 0;
        break;
    case MEMCACHED_BEHAVIOR_NUMBER_OF_REPLICAS:
        b->number_of_replicas = (uint32_t)data;
        break;
    case MEMCACHED_BEHAVIOR_RANDOMIZE_REPLICA_READ:
        b->randomize_replica_read = data != 0;
        break;
    case MEMCACHED_BEHAVIOR_CORK: /* always on, as in libmemcached */
        return MEMCACHED_DEPRECATED;
    case MEMCACHED_BEHAVIOR_LOAD_FROM_FILE: /* configuration strings only */
        return MEMCACHED_INVALID_ARGUMENTS;
    case MEMCACHED_BEHAVIOR_DEAD_TIMEOUT:
        b->dead_timeout_s = (uint32_t)data;
        break;
    case MEMCACHED_BEHAVIOR_SERVER_TIMEOUT_LIMIT:
        b->server_timeout_limit = (uint32_t)data;
        break;
    case MEMCACHED_BEHAVIOR_REQUEST_WINDOW:
        if (data == 0 || data > UINT32_MAX)
            return MEMCACHED_INVALID_ARGUMENTS;
        b->request_window = (uint32_t)data;
        break;
    case MEMCACHED_BEHAVIOR_REPLICATION: {
        uint64_t copies = data & ~(uint64_t)MEMCACHED_REPLICATION_ASYNC_FLAG;
        if (copies > LMR_EC_MAX_CHUNKS || (copies > 1 && b->ec_data_chunks > 0))
            return MEMCACHED_INVALID_ARGUMENTS; /* one scheme at a time */
        b->replication_copies = copies > 1 ? (uint32_t)copies : 0;
        b->replication_async = (data & MEMCACHED_REPLICATION_ASYNC_FLAG) != 0;
        break;
    }
    case MEMCACHED_BEHAVIOR_ERASURE_CODING: {
        uint64_t k = data >> 8, m = data & 0xff;
        if (data == 0) {
            b->ec_data_chunks = b->ec_parity_chunks = 0;
            break;
        }
        if (!lmr_ec_available())
            return MEMCACHED_NOT_SUPPORTED;
        if (k < 2 || m < 1 || k + m > LMR_EC_MAX_CHUNKS || b->replication_copies > 1)
            return MEMCACHED_INVALID_ARGUMENTS;
        b->ec_data_chunks = (uint32_t)k;
        b->ec_parity_chunks = (uint32_t)m;
        break;
    }
    case MEMCACHED_BEHAVIOR_ERASURE_CODING_THRESHOLD:
        b->ec_threshold = data;
        break;
    case MEMCACHED_BEHAVIOR_RESILIENCE_HEDGE_TIMEOUT:
        b->hedge_timeout_ms = clamp_ms(data);
        break;
    case MEMCACHED_BEHAVIOR_RESILIENCE_FAILURES:
        if (data != 0)
            return MEMCACHED_INVALID_ARGUMENTS;
        c->resilience_failures = 0;
        break;
    default:
        return MEMCACHED_INVALID_ARGUMENTS;
    }
    return MEMCACHED_SUCCESS;
}

uint64_t memcached_behavior_get(memcached_st *ptr, const memcached_behavior_t flag)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return 0;
    const struct lmr_behaviors *b = &c->behaviors;
    switch (flag) {
    case MEMCACHED_BEHAVIOR_NO_BLOCK:
        return b->no_block;
    case MEMCACHED_BEHAVIOR_TCP_NODELAY:
        return b->tcp_nodelay;
    case MEMCACHED_BEHAVIOR_TCP_KEEPALIVE:
        return b->tcp_keepalive;
    case MEMCACHED_BEHAVIOR_TCP_KEEPIDLE:
        return b->tcp_keepidle;
    case MEMCACHED_BEHAVIOR_HASH:
        return c->custom_hash != NULL ? MEMCACHED_HASH_CUSTOM : b->key_hash;
    case MEMCACHED_BEHAVIOR_KETAMA_HASH:
        return b->ketama_hash;
    case MEMCACHED_BEHAVIOR_KETAMA:
        return lmr_distribution_is_consistent(b->distribution);
    case MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED:
        return lmr_distribution_is_consistent(b->distribution) && b->ketama_weighted;
    case MEMCACHED_BEHAVIOR_DISTRIBUTION:
        return b->distribution;
    case MEMCACHED_BEHAVIOR_SOCKET_SEND_SIZE:
        return b->socket_send_size;
    case MEMCACHED_BEHAVIOR_SOCKET_RECV_SIZE:
        return b->socket_recv_size;
    case MEMCACHED_BEHAVIOR_CACHE_LOOKUPS:
        return 1;
    case MEMCACHED_BEHAVIOR_SUPPORT_CAS:
        return b->support_cas;
    case MEMCACHED_BEHAVIOR_POLL_TIMEOUT:
        return (uint64_t)b->poll_timeout_ms;
    case MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT:
        return (uint64_t)b->connect_timeout_ms;
    case MEMCACHED_BEHAVIOR_RCV_TIMEOUT:
        return (uint64_t)b->rcv_timeout_us;
    case MEMCACHED_BEHAVIOR_SND_TIMEOUT:
        return (uint64_t)b->snd_timeout_us;
    case MEMCACHED_BEHAVIOR_BUFFER_REQUESTS:
        return b->buffer_requests;
    case MEMCACHED_BEHAVIOR_SORT_HOSTS:
        return b->sort_hosts;
    case MEMCACHED_BEHAVIOR_VERIFY_KEY:
        return b->verify_key;
    case MEMCACHED_BEHAVIOR_RETRY_TIMEOUT:
        return b->retry_timeout_s;
    case MEMCACHED_BEHAVIOR_BINARY_PROTOCOL:
        return b->binary_protocol;
    case MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT:
        return b->server_failure_limit;
    case MEMCACHED_BEHAVIOR_IO_MSG_WATERMARK:
        return b->io_msg_watermark;
    case MEMCACHED_BEHAVIOR_IO_BYTES_WATERMARK:
        return b->io_bytes_watermark;
    case MEMCACHED_BEHAVIOR_IO_KEY_PREFETCH:
        return b->io_key_prefetch;
    case MEMCACHED_BEHAVIOR_HASH_WITH_PREFIX_KEY:
        return b->hash_with_prefix_key;
    case MEMCACHED_BEHAVIOR_NOREPLY:
        return b->noreply;
    case MEMCACHED_BEHAVIOR_AUTO_EJECT_HOSTS:
    case MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS:
        return b->remove_failed_servers;
    case MEMCACHED_BEHAVIOR_NUMBER_OF_REPLICAS:
        return b->number_of_replicas;
    case MEMCACHED_BEHAVIOR_RANDOMIZE_REPLICA_READ:
        return b->randomize_replica_read;
    case MEMCACHED_BEHAVIOR_CORK:
        return 1;
    case MEMCACHED_BEHAVIOR_DEAD_TIMEOUT:
        return b->dead_timeout_s;
    case MEMCACHED_BEHAVIOR_SERVER_TIMEOUT_LIMIT:
        return b->server_timeout_limit;
    case MEMCACHED_BEHAVIOR_REQUEST_WINDOW:
        return b->request_window;
    case MEMCACHED_BEHAVIOR_REPLICATION:
        return b->replication_copies |
               (b->replication_async ? (uint64_t)MEMCACHED_REPLICATION_ASYNC_FLAG : 0);
    case MEMCACHED_BEHAVIOR_ERASURE_CODING:
        return MEMCACHED_ERASURE_CODING(b->ec_data_chunks, b->ec_parity_chunks);
    case MEMCACHED_BEHAVIOR_ERASURE_CODING_THRESHOLD:
        return b->ec_threshold;
    case MEMCACHED_BEHAVIOR_RESILIENCE_HEDGE_TIMEOUT:
        return (uint64_t)b->hedge_timeout_ms;
    case MEMCACHED_BEHAVIOR_RESILIENCE_FAILURES:
        return c->resilience_failures;
    default:
        return 0;
    }
}

memcached_return_t memcached_behavior_set_distribution(memcached_st *ptr,
                                                       memcached_server_distribution_t type)
{
    return memcached_behavior_set(ptr, MEMCACHED_BEHAVIOR_DISTRIBUTION, (uint64_t)type);
}

memcached_server_distribution_t memcached_behavior_get_distribution(memcached_st *ptr)
{
    return (memcached_server_distribution_t)memcached_behavior_get(ptr,
                                                                   MEMCACHED_BEHAVIOR_DISTRIBUTION);
}

memcached_return_t memcached_behavior_set_key_hash(memcached_st *ptr, memcached_hash_t type)
{
    return memcached_behavior_set(ptr, MEMCACHED_BEHAVIOR_HASH, (uint64_t)type);
}

memcached_hash_t memcached_behavior_get_key_hash(memcached_st *ptr)
{
    return (memcached_hash_t)memcached_behavior_get(ptr, MEMCACHED_BEHAVIOR_HASH);
}

memcached_return_t memcached_behavior_set_distribution_hash(memcached_st *ptr,
                                                            memcached_hash_t type)
{
    return memcached_behavior_set(ptr, MEMCACHED_BEHAVIOR_KETAMA_HASH, (uint64_t)type);
}

/* libmemcached 1.1 answers this with the key hash (memcached_behavior_get
 * of MEMCACHED_BEHAVIOR_KETAMA_HASH gives the ketama hash); so do we. */
memcached_hash_t memcached_behavior_get_distribution_hash(memcached_st *ptr)
{
    return (memcached_hash_t)memcached_behavior_get(ptr, MEMCACHED_BEHAVIOR_HASH);
}
