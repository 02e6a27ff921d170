/* rdma/rc.h: reliable-connected (RC) endpoints over the RDMA CM (RDMA_PS_TCP):
 * client connect, server listen/accept. The endpoints implement endpoint.h.
 *
 * Each RC endpoint's QP uses its context's CQ and shared receive queue. At
 * connect time each side grants the other `credits` receives (context option);
 * a connection request is refused when the context's receive queue cannot
 * back the credits it would grant, so memory never grows per connection
 * beyond the QP itself. This header owns the RC constructors only.
 */
#ifndef MCR_RDMA_RC_H
#define MCR_RDMA_RC_H

#include <stddef.h>
#include <stdint.h>

#include "rdma/ctx.h"
#include "rdma/endpoint.h"

struct mcr_rdma_listener;

/* Decides about a new connection: install callbacks with
 * mcr_rdma_ep_set_callbacks() and return 0 to accept, or non-zero to
 * refuse. on_connected follows when the connection is established. Runs on
 * the thread of the endpoint's context (mcr_rdma_ep's ctx). */
typedef int (*mcr_rdma_accept_fn)(struct mcr_rdma_listener *listener, struct mcr_rdma_ep *ep,
                                  void *user);

/* Chooses the context (worker) that serves a new connection; NULL keeps it
 * on the listener's context. Runs on the listener's thread; the chosen
 * context accepts the connection on its own thread (calling on_accept
 * there). */
typedef struct mcr_rdma_ctx *(*mcr_rdma_place_fn)(struct mcr_rdma_listener *listener, void *user);

/* Listens on addr:port (addr must be an address of the context's device;
 * port 0 picks a free port, see mcr_rdma_listener_port). */
int mcr_rdma_rc_listen(struct mcr_rdma_ctx *ctx, const char *addr, uint16_t port, int backlog,
                       mcr_rdma_accept_fn on_accept, void *user, struct mcr_rdma_listener **out);
uint16_t mcr_rdma_listener_port(const struct mcr_rdma_listener *listener);
/* Spreads new connections over contexts (e.g. one per worker thread). The
 * contexts must be on the listener's device and outlive the listener. */
void mcr_rdma_listener_set_placement(struct mcr_rdma_listener *listener, mcr_rdma_place_fn place,
                                     void *user);

/* Told of each connection request the listener refuses by itself: no
 * endpoint or QP could be made for it (e.g. the chosen context has no
 * receive credits left), its parameters are malformed, its move to the
 * chosen context failed, no buffers could be attached, rdma_accept failed,
 * or it ended before it was accepted; not of those on_accept refused (the
 * owner knows). peer is the requester's address ("" when unknown), err a
 * negative errno, why one line. Runs on the thread of the context that
 * refused: the listener's, or the chosen context's. Every refusal, these
 * and on_accept's, counts once in `rejected` (mcr_rdma_ctx_stats) of that
 * context. */
typedef void (*mcr_rdma_refused_fn)(struct mcr_rdma_listener *listener, const char *peer, int err,
                                    const char *why, void *user);
void mcr_rdma_listener_set_refused(struct mcr_rdma_listener *listener, mcr_rdma_refused_fn refused,
                                   void *user);
void mcr_rdma_listener_destroy(struct mcr_rdma_listener *listener);

/* Starts connecting to host:port; returns the endpoint at once. Its
 * on_connected or on_closed callback reports the outcome. */
int mcr_rdma_rc_connect(struct mcr_rdma_ctx *ctx, const char *host, uint16_t port,
                        const struct mcr_rdma_ep_callbacks *cb, void *user,
                        struct mcr_rdma_ep **out);

/* Posts `len` bytes exactly as given, header included, as one SEND using a
 * credit. Exists so tests can check the peer's validation of malformed
 * messages; never use it to carry protocol traffic. */
int mcr_rdma_rc_send_raw(struct mcr_rdma_ep *ep, const void *bytes, uint32_t len);

#endif
