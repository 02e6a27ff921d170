/* t/rdma/rdma_test_libevent.c: a server and a client context driven by a
 * libevent loop the way the server's workers drive theirs: one persistent
 * read event on each context's descriptor (mcr_rdma_ctx_fd) calling
 * mcr_rdma_ctx_handle_events(). Also runs a client in busy-poll mode. Runs in the guest. */
#include <event2/event.h>
#include <string.h>

#include "t/rdma/harness.h"

static struct event_base *base;

static void on_ctx_fd(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    if (mcr_rdma_ctx_handle_events(arg) < 0)
        tap_bail("handle_events failed");
}

#define MAX_EVENTS 8
static struct event *events[MAX_EVENTS];
static int nevents;

static void watch(struct mcr_rdma_ctx *ctx)
{
    events[nevents] = event_new(base, mcr_rdma_ctx_fd(ctx), EV_READ | EV_PERSIST, on_ctx_fd, ctx);
    event_add(events[nevents++], NULL);
}

static void libevent_driver(int timeout_ms)
{
    struct timeval tv = {0, timeout_ms * 1000};
    event_base_loopexit(base, &tv);
    event_base_loop(base, EVLOOP_ONCE);
}

static struct test_server srv;

static bool server_empty(void *arg)
{
    (void)arg;
    struct mcr_rdma_ctx_stats st;
    mcr_rdma_ctx_stats(srv.ctx, &st);
    return st.endpoints == 0;
}

int main(void)
{
    tap_plan(7);
    base = event_base_new();
    struct mcr_rdma_ctx_opts so;
    test_opts(&so);
    server_start(&srv, &so);
    watch(srv.ctx);
    loop_driver = libevent_driver;

    struct test_client c;
    struct mcr_rdma_ctx_opts co;
    test_opts(&co);
    memset(&c, 0, sizeof(c));
    /* client_connect creates the context and connects in one go; its context
     * must be watched before connecting, so do the steps here. */
    c.ctx = make_ctx(&co);
    loop_add(c.ctx);
    watch(c.ctx);
    static const struct mcr_rdma_ep_callbacks cb = {
        .on_connected = client_on_connected,
        .on_message = client_on_message,
        .on_closed = client_on_closed,
    };
    bool up = mcr_rdma_rc_connect(c.ctx, rxe_addr(), srv.port, &cb, &c, &c.ep) == 0 &&
              run_until(client_settled, &c, 10000) && c.connected;
    tap_ok(up, "connected through a libevent loop");
    int good = 0;
    for (uint32_t i = 0; up && i < 200; i++)
        good += ping(&c, i, 1 + (i * 97) % 8160);
    tap_ok(good == 200, "%d/200 ping-pongs through the libevent loop", good);
    if (up)
        mcr_rdma_ep_close(c.ep);
    tap_ok(run_until(client_closed, &c, 10000) && run_until(server_empty, NULL, 10000),
           "close completes and the server frees the endpoint from event handlers alone");

    /* busy polling: progress() spins on the CQ before sleeping */
    loop_driver = NULL;
    for (int i = 0; i < nevents; i++)
        event_free(events[i]);
    nevents = 0;
    struct test_client b;
    struct mcr_rdma_ctx_opts bo;
    test_opts(&bo);
    bo.busy_poll_us = 200;
    tap_ok(client_connect(&b, &bo, srv.port), "busy-polling client connected");
    good = 0;
    for (uint32_t i = 0; b.ep != NULL && i < 200; i++)
        good += ping(&b, i, 64);
    tap_ok(good == 200, "%d/200 ping-pongs with busy polling", good);
    if (b.ep != NULL)
        mcr_rdma_ep_close(b.ep);
    tap_ok(run_until(client_closed, &b, 10000), "busy-polling client closed");
    tap_ok(run_until(server_empty, NULL, 10000), "server freed it");
    client_destroy(&b);
    client_destroy(&c);
    run_for(100);
    server_stop(&srv);
    event_base_free(base);
    return tap_exit_status();
}
