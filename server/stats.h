/*
 * stats.h: the daemon's counters with memcached's names, and the "stats",
 * "stats settings" and "stats conns" reports. Per-worker counters are
 * written only by their worker (relaxed atomic stores, no locks, no locked
 * instructions) and summed when read; "stats reset" records a baseline
 * instead of writing other threads' counters. Storage counters are not kept
 * here: the storage engine reports them (items.h). Formats nothing for a
 * particular protocol: reports go through a stat_emit_fn.
 */
#ifndef MCR_STATS_H
#define MCR_STATS_H

#include <stdint.h>

#include "items.h"

/* Counters of one worker, in the order they are reported. */
#define WORKER_STATS_FIELDS(X)                                                                     \
    X(get_cmds)                                                                                    \
    X(set_cmds)                                                                                    \
    X(flush_cmds)                                                                                  \
    X(touch_cmds)                                                                                  \
    X(meta_cmds)                                                                                   \
    X(get_hits)                                                                                    \
    X(get_misses)                                                                                  \
    X(delete_misses)                                                                               \
    X(delete_hits)                                                                                 \
    X(incr_misses)                                                                                 \
    X(incr_hits)                                                                                   \
    X(decr_misses)                                                                                 \
    X(decr_hits)                                                                                   \
    X(cas_misses)                                                                                  \
    X(cas_hits)                                                                                    \
    X(cas_badval)                                                                                  \
    X(touch_hits)                                                                                  \
    X(touch_misses)                                                                                \
    X(store_too_large)                                                                             \
    X(store_no_memory)                                                                             \
    X(extstore_set_waits)                                                                          \
    X(extstore_set_waits_given_up)                                                                 \
    X(auth_cmds)                                                                                   \
    X(auth_errors)                                                                                 \
    X(bytes_read)                                                                                  \
    X(bytes_written)                                                                               \
    X(conn_yields)                                                                                 \
    X(idle_kicks)                                                                                  \
    X(response_obj_oom)                                                                            \
    X(response_obj_count)                                                                          \
    X(read_buf_count)                                                                              \
    X(read_buf_bytes)                                                                              \
    X(read_buf_bytes_free)                                                                         \
    X(read_buf_oom)

struct worker_stats {
#define X(name) uint64_t name;
    WORKER_STATS_FIELDS(X)
#undef X
};

/* Only the owning worker calls this; readers use stats_load(). */
#define STAT_ADD(ws, field, n)                                                                     \
    __atomic_store_n(&(ws)->field, __atomic_load_n(&(ws)->field, __ATOMIC_RELAXED) + (n),          \
                     __ATOMIC_RELAXED)
#define STAT_INCR(ws, field) STAT_ADD(ws, field, 1)
/* Gauges (counts that go down too) use the same single-writer rule. */
#define STAT_SUB(ws, field, n)                                                                     \
    __atomic_store_n(&(ws)->field, __atomic_load_n(&(ws)->field, __ATOMIC_RELAXED) - (n),          \
                     __ATOMIC_RELAXED)

/* Process-wide connection counters (touched on accept/close only). */
void stats_conn_opened(void); /* curr and total connections */
void stats_conn_closed(void);
void stats_conn_rejected(void);   /* over -c */
void stats_listen_disabled(void); /* accepting paused */
void stats_listen_enabled(void);  /* accepting again */
void stats_set_accepting(int accepting);
uint64_t stats_curr_conns(void);

void stats_init(void);
/* "stats": ours, then the storage engine's general stats. */
void stats_report_general(stat_emit_fn emit, void *ctx);
/* Optional lines a transport adds to "stats" (net_rdma.c sets it). */
extern void (*stats_general_extra)(stat_emit_fn emit, void *ctx);
/* "stats settings": ours and the storage engine's. */
void stats_report_settings(stat_emit_fn emit, void *ctx);
/* "stats conns" a part at a time, by file descriptor: the groups of at
 * most max connections (listeners included) whose fd is above *after;
 * *after becomes the last fd reported. Returns how many were reported
 * (0: none left, or out of memory). Each group is at most
 * STATS_CONN_GROUP_MAX bytes of "STAT name value\r\n" lines. */
#define STATS_CONN_GROUP_MAX 512
size_t stats_report_conns_from(int *after, size_t max, stat_emit_fn emit, void *ctx);
/* "stats reset": counters start again from zero. */
void stats_reset(void);

#endif
