/*
 * net_rdma_move.h: the policy of -o rdma_transport=hybrid: which rdma://
 * clients move between UD and RC (promotion at -o rdma_promote_rate, while
 * -o rdma_rc_max leaves an RC slot; demotion below -o rdma_demote_rate, or
 * when a busier UD client wants the slot), the slots promotions under way
 * hold, and the rdma_promotions / rdma_demotions counters. The moves
 * themselves (MOVE, the END marks) are the transports' (net_rdma_ud.c,
 * net_rdma_recv.c, net_rdma_send.c). Callable from any worker thread.
 */
#ifndef MCR_NET_RDMA_MOVE_H
#define MCR_NET_RDMA_MOVE_H

#include "config.h"

#include <stdbool.h>
#include <stdint.h>

#include "stats.h"

#ifdef HAVE_RDMA

/* Moves happen at all (rdma_transport=hybrid, and no -Y: see
 * net_rdma_move.c). */
bool rdma_move_enabled(void);
/* Messages a second from a count over the last interval. */
uint64_t rdma_move_rate(uint64_t msgs, uint64_t interval_ms);
/* A UD client at `rate`: true when it should move to RC now, which holds
 * one RC slot for it until rdma_move_release_slot; false leaves a note
 * that a slot is wanted (when its rate is over the threshold). */
bool rdma_move_promote(uint64_t rate);
void rdma_move_release_slot(void);
/* An RC client at `rate`: true when it should move to UD now (below
 * rdma_demote_rate, or a busier UD client wants its slot: that note is
 * then taken). */
bool rdma_move_demote(uint64_t rate);
/* After our END of a move to UD the client disconnects the RC connection.
 * One still open this long after that END is closed by the server: the
 * client's disconnect request was lost (its RDMA CM does not send it again
 * once the client destroyed its CM id, which it does at once), and the
 * connection would hold an RC slot, refusing every promotion, for good. */
#define RDMA_MOVE_END_GRACE_MS 5000
/* A move completed (both END marks passed). */
void rdma_move_done(bool to_rc);
/* rdma_promotions, rdma_demotions. */
void rdma_move_stats(stat_emit_fn emit, void *ctx);

#endif
#endif
