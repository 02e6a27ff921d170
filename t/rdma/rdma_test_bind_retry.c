/* t/rdma/rdma_test_bind_retry.c: a memory window bind behind a message the
 * peer has not acknowledged, while that message is being retransmitted
 * (inside the Soft-RoCE guest).
 *
 * Soft-RoCE (rxe) carries out a bind when its requester reaches it, and
 * again when a retransmission walks the send queue back from the oldest
 * unacknowledged request; the second bind of a type 2 window fails, and
 * the requester stops without resending that request, so nothing completes
 * any more (rdma/rc_data.c, bind_after_completions). Through a lossy link
 * this hung a fresh rdma:// connection (its HELLO unacknowledged, the
 * landing buffer's bind behind it). Here the retransmission is made
 * without loss: the server's shared receive queue holds two receives
 * (recv_window) and the server is not driven, so the client's third
 * message meets receiver-not-ready and is retried over and over; the
 * client then binds a window and sends a fourth. Once the server runs
 * again, all four messages must arrive and the connection stay up.
 *
 * Then the client closes gracefully, freeing its window in on_closed as
 * libmemcached-rdma does (its grants): rxe (Linux 6.1) holds a QP for
 * each type 2 window bound through it, and destroying the QP (after
 * on_closed) waits 12500 jiffies (50 s at 250 Hz) for those references
 * before it warns and goes on. A window freed only after on_closed made
 * this close take 51 s in the guest, one call to the client's progress
 * blocked in ibv_destroy_qp, with or without the receiver-not-ready
 * retries; freed in on_closed, it takes 30 ms to 1 s. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdma/mr.h"
#include "t/rdma/harness.h"

#define REGION_SIZE 65536

static struct test_server srv;
static struct ibv_mw *client_window; /* bound through the client's endpoint */

/* The harness's on_closed, then the window bound through the endpoint
 * goes, before the endpoint's QP does. */
static void closed_freeing_window(struct mcr_rdma_ep *ep, int reason, const char *why, void *user)
{
    client_on_closed(ep, reason, why, user);
    mcr_rdma_window_free(client_window);
    client_window = NULL;
}

static bool sunk_four(void *arg)
{
    (void)arg;
    return srv.sunk >= 4;
}

static int send_one(struct test_client *c, uint32_t id)
{
    unsigned char b = (unsigned char)id;
    struct iovec iov = {&b, 1};
    struct mcr_rdma_send m = {
        .type = MCR_RDMA_MSG_EAGER, .request_id = id, .iov = &iov, .iovcnt = 1};
    return c->ep != NULL ? mcr_rdma_ep_send(c->ep, &m) : -ENOTCONN;
}

int main(void)
{
    struct mcr_rdma_ctx_opts so;
    test_opts(&so);
    so.recv_window = 2; /* two receives posted until the server runs again */
    so.rnr_retry = 7;   /* the client retries receiver-not-ready for ever */
    server_start(&srv, &so);
    srv.sink = true;
    struct test_client c;
    bool up = client_connect(&c, NULL, srv.port);
    tap_ok(up, "client connected to port %u%s%s", srv.port, c.closed ? ": " : "",
           c.closed ? c.close_why : "");
    if (!up)
        tap_bail("cannot continue without a connection");
    if (!mcr_rdma_ctx_has_windows(c.ctx)) {
        tap_skip("the device binds no type 2 memory windows");
        client_destroy(&c);
        server_stop(&srv);
        tap_no_plan_end();
        return tap_exit_status();
    }
    char *region = aligned_alloc(4096, REGION_SIZE);
    struct mcr_rdma_region reg;
    struct ibv_mw *mw = NULL;
    if (region == NULL ||
        mcr_rdma_region_register(mcr_rdma_ctx_pd(c.ctx), region, REGION_SIZE,
                                 MCR_RDMA_ACCESS_WINDOW, &reg) != 0 ||
        (mw = mcr_rdma_window_alloc(mcr_rdma_ctx_pd(c.ctx))) == NULL)
        tap_bail("registering the client's region and its window");

    /* the server stops: its queue keeps the two receives it holds */
    loop_remove(srv.ctx);
    int sent = 0;
    for (uint32_t id = 1; id <= 3; id++)
        sent += send_one(&c, id) == 0;
    run_for(300); /* the third meets receiver-not-ready, again and again */
    uint32_t rkey = 0;
    int bound = mcr_rdma_ep_bind_window(c.ep, mw, reg.mr, region, REGION_SIZE,
                                        MCR_RDMA_ACCESS_REMOTE_WRITE, &rkey, NULL);
    sent += send_one(&c, 4) == 0;
    run_for(300); /* retries walk back over the bind */
    struct mcr_rdma_ep_stats st = {0};
    if (c.ep != NULL)
        mcr_rdma_ep_stats(c.ep, &st);
    tap_ok(sent == 4 && bound == 0 && !c.closed && st.sends_unfinished >= 2,
           "with the server stopped, 4 messages and a window bind were accepted (%d sent, bind "
           "%s), and 2 or more of them wait (%u unacknowledged)",
           sent, strerror(-bound), st.sends_unfinished);

    loop_add(srv.ctx); /* the server runs again: receives are posted */
    bool all = run_until(sunk_four, NULL, 10000);
    run_for(200);
    if (c.ep != NULL)
        mcr_rdma_ep_stats(c.ep, &st);
    tap_ok(all && !c.closed && st.sends_unfinished == 0,
           "then all 4 reach the server and the connection stays up (%u received, %u "
           "unacknowledged%s%s)",
           srv.sunk, st.sends_unfinished, c.closed ? "; closed: " : "",
           c.closed ? c.close_why : "");

    /* a graceful close with nothing outstanding: over within the longest a
     * close lingers, plus room for a slow emulated guest (30 ms to 1 s
     * seen), however long a single call takes (the loop checks its own
     * bound only between calls): far below the 50 s of a QP held by a
     * bound window */
    client_window = mw;
    static const struct mcr_rdma_ep_callbacks freeing_cb = {
        .on_connected = client_on_connected,
        .on_message = client_on_message,
        .on_closed = closed_freeing_window,
    };
    uint64_t close_started = now_ms();
    if (c.ep != NULL) {
        mcr_rdma_ep_set_callbacks(c.ep, &freeing_cb, &c);
        mcr_rdma_ep_close(c.ep);
    }
    bool closed = run_until(client_closed, &c, 10000);
    uint64_t close_ms = now_ms() - close_started;
    tap_ok(closed && c.close_reason == 0 && close_ms < MCR_RDMA_LINGER_MS + 3000,
           "a graceful close is over (on_closed, the window freed there, the endpoint "
           "freed) within %d + 3000 ms (%s after %llu ms%s%s)",
           MCR_RDMA_LINGER_MS, closed ? "closed" : "not closed", (unsigned long long)close_ms,
           c.closed ? ": " : "", c.closed ? c.close_why : "");
    mcr_rdma_window_free(client_window); /* not closed: it goes before the context */
    mcr_rdma_region_deregister(&reg);
    free(region);
    client_destroy(&c);
    server_stop(&srv);
    tap_no_plan_end();
    return tap_exit_status();
}
