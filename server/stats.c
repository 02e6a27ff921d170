/*
 * stats.c: memcached's "stats", "stats settings", "stats conns" and
 * "stats reset" from the daemon's side. Worker counters are summed over
 * the workers on read; reset stores the current sums as a baseline that
 * later reads subtract, so no thread ever writes another thread's counters.
 * Storage stats come from the storage engine (items.h) and are appended.
 */
#include "stats.h"

#include "config.h"

#include <event2/event.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#include "clock.h"
#include "conn.h"
#include "log.h"
#include "net_sock.h"
#include "net_tls.h"
#include "flash.h"
#include "items.h"
#include "settings.h"
#include "settings_rdma.h"
#include "stats_detail.h"
#include "thread.h"
#include "watch.h"

static uint64_t curr_conns, total_conns, rejected_conns, listen_disabled_num;
static uint64_t listen_disabled_us;       /* total time accepting was paused */
static struct timeval listen_disabled_at; /* listener thread only */
static int accepting_conns = 1;

static pthread_mutex_t baseline_lock = PTHREAD_MUTEX_INITIALIZER;
static struct worker_stats baseline;
static uint64_t total_conns_baseline, rejected_conns_baseline, listen_disabled_baseline;

void stats_init(void)
{
    memset(&baseline, 0, sizeof(baseline));
}

void stats_conn_opened(void)
{
    __atomic_add_fetch(&curr_conns, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&total_conns, 1, __ATOMIC_RELAXED);
}

void stats_conn_closed(void)
{
    __atomic_sub_fetch(&curr_conns, 1, __ATOMIC_RELAXED);
}

void stats_conn_rejected(void)
{
    __atomic_add_fetch(&rejected_conns, 1, __ATOMIC_RELAXED);
}

void stats_listen_disabled(void)
{
    __atomic_add_fetch(&listen_disabled_num, 1, __ATOMIC_RELAXED);
    gettimeofday(&listen_disabled_at, NULL);
}

void stats_listen_enabled(void)
{
    struct timeval now;
    gettimeofday(&now, NULL);
    int64_t us = (int64_t)(now.tv_sec - listen_disabled_at.tv_sec) * 1000000 +
                 (now.tv_usec - listen_disabled_at.tv_usec);
    if (us > 0)
        __atomic_add_fetch(&listen_disabled_us, (uint64_t)us, __ATOMIC_RELAXED);
}

void stats_set_accepting(int accepting)
{
    __atomic_store_n(&accepting_conns, accepting, __ATOMIC_RELAXED);
}

uint64_t stats_curr_conns(void)
{
    return __atomic_load_n(&curr_conns, __ATOMIC_RELAXED);
}

static void sum_workers(struct worker_stats *out)
{
    memset(out, 0, sizeof(*out));
    for (unsigned i = 0; i < workers_count(); i++) {
        struct worker_stats *ws = &worker_at(i)->stats;
#define X(name) out->name += __atomic_load_n(&ws->name, __ATOMIC_RELAXED);
        WORKER_STATS_FIELDS(X)
#undef X
    }
}

void stats_reset(void)
{
    struct worker_stats now;
    sum_workers(&now);
    pthread_mutex_lock(&baseline_lock);
    baseline = now;
    total_conns_baseline = __atomic_load_n(&total_conns, __ATOMIC_RELAXED);
    rejected_conns_baseline = __atomic_load_n(&rejected_conns, __ATOMIC_RELAXED);
    listen_disabled_baseline = __atomic_load_n(&listen_disabled_num, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&baseline_lock);
    storage_stats_reset();
    stats_detail_clear();
}

static void emit_u64(stat_emit_fn emit, void *ctx, const char *name, uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%" PRIu64, v);
    emit(ctx, name, buf);
}

static void emit_i64(stat_emit_fn emit, void *ctx, const char *name, int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%" PRId64, v);
    emit(ctx, name, buf);
}

/* The storage engine's stats, gathered so they can be placed where
 * memcached reports them; whatever is not placed follows at the end. */
struct storage_stat {
    char name[64];
    char value[64];
    bool used;
};

struct storage_stats {
    struct storage_stat *v;
    size_t n, cap;
};

static void gather_storage_stat(void *arg, const char *name, const char *value)
{
    struct storage_stats *ss = arg;
    if (ss->n == ss->cap) {
        size_t cap = ss->cap ? ss->cap * 2 : 64;
        struct storage_stat *v = realloc(ss->v, cap * sizeof(*v));
        if (!v)
            return;
        ss->v = v;
        ss->cap = cap;
    }
    struct storage_stat *st = &ss->v[ss->n++];
    snprintf(st->name, sizeof(st->name), "%s", name);
    snprintf(st->value, sizeof(st->value), "%s", value);
    st->used = false;
}

static void place_storage_stat(struct storage_stats *ss, const char *name, stat_emit_fn emit,
                               void *ctx)
{
    for (size_t i = 0; i < ss->n; i++) {
        if (!ss->v[i].used && strcmp(ss->v[i].name, name) == 0) {
            ss->v[i].used = true;
            emit(ctx, ss->v[i].name, ss->v[i].value);
            return;
        }
    }
}

static void rest_of_storage_stats(struct storage_stats *ss, stat_emit_fn emit, void *ctx)
{
    for (size_t i = 0; i < ss->n; i++)
        if (!ss->v[i].used)
            emit(ctx, ss->v[i].name, ss->v[i].value);
    free(ss->v);
}

/* memcached leaves out the crawler's names while the crawler is off (-o
 * no_lru_crawler, until `lru_crawler enable`) and the LRU maintainer's
 * under -o no_lru_maintainer: so do we. */
static void drop_stats_memcached_hides(struct storage_stats *ss)
{
    static const char *const crawler[] = {"lru_crawler_running", "lru_crawler_starts"};
    static const char *const maintainer[] = {
        "lru_maintainer_juggles", "evicted_active",  "moves_to_cold",    "moves_to_warm",
        "moves_within_lru",       "direct_reclaims", "lru_bumps_dropped"};
    bool crawler_on = storage_crawler_enabled();
    for (size_t i = 0; i < ss->n; i++) {
        for (size_t k = 0; !crawler_on && k < sizeof(crawler) / sizeof(*crawler); k++)
            if (strcmp(ss->v[i].name, crawler[k]) == 0)
                ss->v[i].used = true;
        for (size_t k = 0; !settings.lru_maintainer && k < sizeof(maintainer) / sizeof(*maintainer);
             k++)
            if (strcmp(ss->v[i].name, maintainer[k]) == 0)
                ss->v[i].used = true;
    }
}

void (*stats_general_extra)(stat_emit_fn emit, void *ctx);

void stats_report_general(stat_emit_fn emit, void *ctx)
{
    struct worker_stats s, base;
    struct storage_stats ss = {NULL, 0, 0};
    char buf[64];
    storage_stats_general(gather_storage_stat, &ss);
    sum_workers(&s);
    pthread_mutex_lock(&baseline_lock);
    base = baseline;
    uint64_t total_base = total_conns_baseline, rejected_base = rejected_conns_baseline,
             disabled_base = listen_disabled_baseline;
    pthread_mutex_unlock(&baseline_lock);
#define D(name) (s.name - base.name)

    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);

    emit_u64(emit, ctx, "pid", (uint64_t)getpid());
    emit_u64(emit, ctx, "uptime", clock_now());
    emit_u64(emit, ctx, "time", (uint64_t)clock_unix_now());
    emit(ctx, "version", settings_version());
    emit(ctx, "libevent", event_get_version());
    emit_u64(emit, ctx, "pointer_size", 8 * sizeof(void *));
    snprintf(buf, sizeof(buf), "%ld.%06ld", (long)usage.ru_utime.tv_sec,
             (long)usage.ru_utime.tv_usec);
    emit(ctx, "rusage_user", buf);
    snprintf(buf, sizeof(buf), "%ld.%06ld", (long)usage.ru_stime.tv_sec,
             (long)usage.ru_stime.tv_usec);
    emit(ctx, "rusage_system", buf);
    emit_u64(emit, ctx, "max_connections", (uint64_t)settings.maxconns);
    emit_u64(emit, ctx, "curr_connections", stats_curr_conns());
    emit_u64(emit, ctx, "total_connections",
             __atomic_load_n(&total_conns, __ATOMIC_RELAXED) - total_base);
    emit_u64(emit, ctx, "rejected_connections",
             __atomic_load_n(&rejected_conns, __ATOMIC_RELAXED) - rejected_base);
    emit_u64(emit, ctx, "connection_structures", conns_allocated() + listeners_count());
    emit_u64(emit, ctx, "response_obj_oom", D(response_obj_oom));
    emit_u64(emit, ctx, "response_obj_count", s.response_obj_count);
    emit_u64(emit, ctx, "response_obj_bytes", s.response_obj_count * sizeof(struct resp));
    emit_u64(emit, ctx, "read_buf_count", s.read_buf_count);
    emit_u64(emit, ctx, "read_buf_bytes", s.read_buf_bytes);
    emit_u64(emit, ctx, "read_buf_bytes_free", s.read_buf_bytes_free);
    emit_u64(emit, ctx, "read_buf_oom", D(read_buf_oom));
    emit_u64(emit, ctx, "reserved_fds", 3 + listeners_count() + 2 * workers_count());
    emit_u64(emit, ctx, "cmd_get", D(get_cmds));
    emit_u64(emit, ctx, "cmd_set", D(set_cmds));
    emit_u64(emit, ctx, "cmd_flush", D(flush_cmds));
    emit_u64(emit, ctx, "cmd_touch", D(touch_cmds));
    emit_u64(emit, ctx, "cmd_meta", D(meta_cmds));
    emit_u64(emit, ctx, "get_hits", D(get_hits));
    emit_u64(emit, ctx, "get_misses", D(get_misses));
    place_storage_stat(&ss, "get_expired", emit, ctx);
    place_storage_stat(&ss, "get_flushed", emit, ctx);
    flash_stats_gets(emit, ctx);
    emit_u64(emit, ctx, "delete_misses", D(delete_misses));
    emit_u64(emit, ctx, "delete_hits", D(delete_hits));
    emit_u64(emit, ctx, "incr_misses", D(incr_misses));
    emit_u64(emit, ctx, "incr_hits", D(incr_hits));
    emit_u64(emit, ctx, "decr_misses", D(decr_misses));
    emit_u64(emit, ctx, "decr_hits", D(decr_hits));
    emit_u64(emit, ctx, "cas_misses", D(cas_misses));
    emit_u64(emit, ctx, "cas_hits", D(cas_hits));
    emit_u64(emit, ctx, "cas_badval", D(cas_badval));
    emit_u64(emit, ctx, "touch_hits", D(touch_hits));
    emit_u64(emit, ctx, "touch_misses", D(touch_misses));
    emit_u64(emit, ctx, "store_too_large", D(store_too_large));
    emit_u64(emit, ctx, "store_no_memory", D(store_no_memory));
    emit_u64(emit, ctx, "auth_cmds", D(auth_cmds));
    emit_u64(emit, ctx, "auth_errors", D(auth_errors));
    if (settings.idle_timeout)
        emit_u64(emit, ctx, "idle_kicks", D(idle_kicks));
    emit_u64(emit, ctx, "bytes_read", D(bytes_read));
    emit_u64(emit, ctx, "bytes_written", D(bytes_written));
    place_storage_stat(&ss, "limit_maxbytes", emit, ctx);
    emit_u64(emit, ctx, "accepting_conns",
             (uint64_t)__atomic_load_n(&accepting_conns, __ATOMIC_RELAXED));
    emit_u64(emit, ctx, "listen_disabled_num",
             __atomic_load_n(&listen_disabled_num, __ATOMIC_RELAXED) - disabled_base);
    emit_u64(emit, ctx, "time_in_listen_disabled_us",
             __atomic_load_n(&listen_disabled_us, __ATOMIC_RELAXED));
    emit_u64(emit, ctx, "threads", workers_count());
    emit_u64(emit, ctx, "conn_yields", D(conn_yields));
    unsigned watchers;
    unsigned long long logged, sent, dropped, skipped;
    watch_counters(&watchers, &logged, &sent, &dropped, &skipped);
    emit_u64(emit, ctx, "log_worker_dropped", dropped);
    emit_u64(emit, ctx, "log_worker_written", logged);
    emit_u64(emit, ctx, "log_watcher_skipped", skipped);
    emit_u64(emit, ctx, "log_watcher_sent", sent);
    emit_u64(emit, ctx, "log_watchers", watchers);
    flash_stats_store(emit, ctx);
    if (flash_running()) { /* sets parked for the flash writer (conn_value.c) */
        emit_u64(emit, ctx, "extstore_set_waits", D(extstore_set_waits));
        emit_u64(emit, ctx, "extstore_set_waits_given_up", D(extstore_set_waits_given_up));
    }
#undef D
    net_tls_stats(emit, ctx);
    if (stats_general_extra)
        stats_general_extra(emit, ctx);
    drop_stats_memcached_hides(&ss);
    rest_of_storage_stats(&ss, emit, ctx);
    /* memcached's last two names; -N (NAPI ids) is not supported here */
    emit_u64(emit, ctx, "unexpected_napi_ids", 0);
    emit_u64(emit, ctx, "round_robin_fallback", 0);
}

void stats_report_settings(stat_emit_fn emit, void *ctx)
{
    struct storage_stats ss = {NULL, 0, 0};
    char buf[64];
    storage_stats_settings(gather_storage_stat, &ss);
    place_storage_stat(&ss, "maxbytes", emit, ctx);
    emit_u64(emit, ctx, "maxconns", (uint64_t)settings.maxconns);
    emit_u64(emit, ctx, "tcpport", (uint64_t)settings.port);
    emit_u64(emit, ctx, "udpport", (uint64_t)settings.udpport);
    emit(ctx, "inter", settings.inter ? settings.inter : "127.0.0.1");
    emit_u64(emit, ctx, "verbosity", (uint64_t)log_verbosity());
    place_storage_stat(&ss, "oldest", emit, ctx);
    place_storage_stat(&ss, "evictions", emit, ctx);
    emit(ctx, "domain_socket", settings.socketpath ? settings.socketpath : "NULL");
    snprintf(buf, sizeof(buf), "%o", settings.access);
    emit(ctx, "umask", buf);
    emit(ctx, "shutdown_command", settings.shutdown_command ? "yes" : "no");
    place_storage_stat(&ss, "growth_factor", emit, ctx);
    place_storage_stat(&ss, "chunk_size", emit, ctx);
    emit_u64(emit, ctx, "num_threads", (uint64_t)settings.num_threads);
    emit_u64(emit, ctx, "num_threads_per_udp", (uint64_t)settings.num_threads);
    snprintf(buf, sizeof(buf), "%c", settings.prefix_delimiter);
    emit(ctx, "stat_key_prefix", buf);
    emit(ctx, "detail_enabled", settings.detail_enabled ? "yes" : "no");
    emit_i64(emit, ctx, "reqs_per_event", settings.reqs_per_event);
    place_storage_stat(&ss, "cas_enabled", emit, ctx);
    emit_i64(emit, ctx, "tcp_backlog", settings.backlog);
    emit(ctx, "binding_protocol", settings_protocol_name(settings.binding_protocol));
    emit(ctx, "auth_enabled_sasl", settings.sasl ? "yes" : "no");
    emit(ctx, "auth_enabled_ascii", settings.auth_file ? "yes" : "no");
    place_storage_stat(&ss, "item_size_max", emit, ctx);
    emit(ctx, "maxconns_fast", settings.maxconns_fast ? "yes" : "no");
    place_storage_stat(&ss, "hashpower_init", emit, ctx);
    place_storage_stat(&ss, "slab_reassign", emit, ctx);
    place_storage_stat(&ss, "slab_automove", emit, ctx);
    settings_lock();
    struct settings tun = settings; /* the tunables "lru tune" may change */
    settings_unlock();
    snprintf(buf, sizeof(buf), "%.2f", tun.slab_automove_ratio);
    emit(ctx, "slab_automove_ratio", buf);
    emit_u64(emit, ctx, "slab_automove_window", tun.slab_automove_window);
    place_storage_stat(&ss, "slab_chunk_max", emit, ctx);
    place_storage_stat(&ss, "lru_crawler", emit, ctx);
    place_storage_stat(&ss, "lru_crawler_sleep", emit, ctx);
    place_storage_stat(&ss, "lru_crawler_tocrawl", emit, ctx);
    emit_u64(emit, ctx, "tail_repair_time", settings.tail_repair_time);
    emit(ctx, "flush_enabled", settings.flush_enabled ? "yes" : "no");
    emit(ctx, "dump_enabled", settings.dump_enabled ? "yes" : "no");
    place_storage_stat(&ss, "hash_algorithm", emit, ctx);
    emit(ctx, "lru_maintainer_thread", storage_lru_maintainer_running() ? "yes" : "no");
    emit(ctx, "lru_segmented", tun.lru_segmented ? "yes" : "no");
    emit_u64(emit, ctx, "hot_lru_pct", tun.hot_lru_pct);
    emit_u64(emit, ctx, "warm_lru_pct", tun.warm_lru_pct);
    snprintf(buf, sizeof(buf), "%.2f", tun.hot_max_factor);
    emit(ctx, "hot_max_factor", buf);
    snprintf(buf, sizeof(buf), "%.2f", tun.warm_max_factor);
    emit(ctx, "warm_max_factor", buf);
    emit(ctx, "temp_lru", tun.temp_lru ? "yes" : "no");
    snprintf(buf, sizeof(buf), "%d", tun.temporary_ttl);
    emit(ctx, "temporary_ttl", buf);
    emit_u64(emit, ctx, "idle_timeout", settings.idle_timeout);
    emit_u64(emit, ctx, "watcher_logbuf_size", tun.watcher_logbuf_size);
    emit_u64(emit, ctx, "worker_logbuf_size", tun.worker_logbuf_size);
    emit_u64(emit, ctx, "read_buf_mem_limit", settings.read_buf_mem_limit);
    place_storage_stat(&ss, "track_sizes", emit, ctx);
    emit(ctx, "inline_ascii_response", "no");
    settings_ext_stats(&tun.ext, emit, ctx);
    settings_rdma_stats(&settings, emit, ctx);
    rest_of_storage_stats(&ss, emit, ctx);
    /* -N is accepted and ignored (memcached's when not given) */
    emit(ctx, "num_napi_ids", "(null)");
    emit(ctx, "memory_file", settings.memory_file ? settings.memory_file : "(null)");
    net_tls_settings_stats(emit, ctx);
    /* "version" says which memcached this server answers as (1.6.18, the
     * form clients' version parsers expect); this line says what it is */
    emit(ctx, "memcached_rdma_version", PACKAGE_VERSION);
}

/* "stats conns": one group per connection, by file descriptor. */
struct conn_line {
    int fd;
    char addr[96];
    char listen_addr[64];
    char state[24];
    unsigned secs;
    bool has_listen;
};

/* The connections with fd above `after`, at most cap of them, the lowest
 * fds kept. */
struct conn_lines {
    struct conn_line *v;
    size_t n, cap;
    int after;
    size_t highest; /* index of the highest fd kept, once full */
};

static void collect_conn(void *arg, int fd, const char *addr, const char *listen_addr,
                         const char *state, unsigned secs)
{
    struct conn_lines *cl = arg;
    if (fd <= cl->after)
        return;
    struct conn_line *l;
    if (cl->n < cl->cap) {
        l = &cl->v[cl->n++];
    } else if (fd < cl->v[cl->highest].fd) {
        l = &cl->v[cl->highest];
    } else {
        return;
    }
    l->fd = fd;
    snprintf(l->addr, sizeof(l->addr), "%s", addr);
    l->has_listen = listen_addr != NULL && listen_addr[0] != '\0';
    snprintf(l->listen_addr, sizeof(l->listen_addr), "%s", l->has_listen ? listen_addr : "");
    snprintf(l->state, sizeof(l->state), "%s", state);
    l->secs = secs;
    if (cl->n == cl->cap) {
        cl->highest = 0;
        for (size_t i = 1; i < cl->n; i++)
            if (cl->v[i].fd > cl->v[cl->highest].fd)
                cl->highest = i;
    }
}
static int by_fd(const void *a, const void *b)
{
    const struct conn_line *x = a, *y = b;
    return (x->fd > y->fd) - (x->fd < y->fd);
}

size_t stats_report_conns_from(int *after, size_t max, stat_emit_fn emit, void *ctx)
{
    struct conn_lines cl = {NULL, 0, max, *after, 0};
    cl.v = malloc(max * sizeof(*cl.v));
    if (!cl.v)
        return 0;
    listeners_visit(collect_conn, &cl);
    conns_visit(collect_conn, &cl);
    qsort(cl.v, cl.n, sizeof(*cl.v), by_fd);
    char name[64], value[32];
    for (size_t i = 0; i < cl.n; i++) {
        struct conn_line *l = &cl.v[i];
        snprintf(name, sizeof(name), "%d:addr", l->fd);
        emit(ctx, name, l->addr);
        if (l->has_listen) {
            snprintf(name, sizeof(name), "%d:listen_addr", l->fd);
            emit(ctx, name, l->listen_addr);
        }
        snprintf(name, sizeof(name), "%d:state", l->fd);
        emit(ctx, name, l->state);
        snprintf(name, sizeof(name), "%d:secs_since_last_cmd", l->fd);
        snprintf(value, sizeof(value), "%u", l->secs);
        emit(ctx, name, value);
        *after = l->fd;
    }
    size_t n = cl.n;
    free(cl.v);
    return n;
}
