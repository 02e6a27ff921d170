/*
 * net_rdma_move.c: the hybrid transport's policy (net_rdma_move.h). Rates
 * are messages a second from the client over -o rdma_move_interval_ms, as
 * the transports count them (a message carries one request or several
 * pipelined ones). State is a few atomics shared by the workers: the RC
 * slots promotions under way hold (a promoted client connects RC only after
 * the END marks, when it is no longer counted on UD), the rate of the
 * busiest UD client that found no slot, and the counters.
 */
#include "net_rdma_move.h"

#ifdef HAVE_RDMA

#include <stdio.h>

#include "net_rdma_conn.h"
#include "settings.h"

static uint64_t slots_held;  /* promotions under way */
static uint64_t slot_wanted; /* rate of a UD client that found no slot; 0 none */
static uint64_t promotions, demotions;

bool rdma_move_enabled(void)
{
    /* -Y: a moved client reconnects, and its new connection has not
     * logged in (the login is a text "set" the client library cannot tell
     * from others, so it cannot repeat it as it repeats SASL's): clients
     * stay where they started */
    return settings.rdma_transport == RDMA_SERVE_HYBRID && settings.auth_file == NULL;
}

uint64_t rdma_move_rate(uint64_t msgs, uint64_t interval_ms)
{
    return interval_ms == 0 ? 0 : msgs * 1000u / interval_ms;
}

bool rdma_move_promote(uint64_t rate)
{
    if (!rdma_move_enabled() || rate < settings.rdma_promote_rate || rate == 0)
        return false;
    uint64_t held = __atomic_load_n(&slots_held, __ATOMIC_RELAXED);
    for (;;) {
        if (settings.rdma_rc_max > 0 && rdma_rc_conns() + held >= settings.rdma_rc_max) {
            uint64_t w = __atomic_load_n(&slot_wanted, __ATOMIC_RELAXED);
            if (rate > w)
                __atomic_store_n(&slot_wanted, rate, __ATOMIC_RELAXED);
            return false;
        }
        if (__atomic_compare_exchange_n(&slots_held, &held, held + 1, false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
            return true;
    }
}

void rdma_move_release_slot(void)
{
    __atomic_sub_fetch(&slots_held, 1, __ATOMIC_RELAXED);
}

bool rdma_move_demote(uint64_t rate)
{
    if (!rdma_move_enabled())
        return false;
    /* idle: only where RC slots are scarce (with no -o rdma_rc_max an
     * rdma:// client always gets RC and keeps it) */
    if (settings.rdma_rc_max > 0 && rate < settings.rdma_demote_rate)
        return true;
    uint64_t w = __atomic_load_n(&slot_wanted, __ATOMIC_RELAXED);
    /* the note goes to one RC client only */
    return w > rate && __atomic_compare_exchange_n(&slot_wanted, &w, 0, false, __ATOMIC_RELAXED,
                                                   __ATOMIC_RELAXED);
}

void rdma_move_done(bool to_rc)
{
    __atomic_add_fetch(to_rc ? &promotions : &demotions, 1, __ATOMIC_RELAXED);
}

void rdma_move_stats(stat_emit_fn emit, void *ctx)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%llu",
             (unsigned long long)__atomic_load_n(&promotions, __ATOMIC_RELAXED));
    emit(ctx, "rdma_promotions", buf);
    snprintf(buf, sizeof(buf), "%llu",
             (unsigned long long)__atomic_load_n(&demotions, __ATOMIC_RELAXED));
    emit(ctx, "rdma_demotions", buf);
}

#endif
