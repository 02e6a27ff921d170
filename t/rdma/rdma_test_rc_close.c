/* t/rdma/rdma_test_rc_close.c: RC endpoints closing and at their limits
 * on real verbs (inside the Soft-RoCE guest): a local close that lets
 * what was sent before it go first, a close after unsignaled sends,
 * messages held after the peer left, credits riding on a held message,
 * endpoints closed inside a batch, the cap on messages waiting for
 * credit, small send pools streaming both ways, and admission limited by
 * the shared receive queue (t/rdma/rdma_test_rc: the data paths). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t/rdma/harness.h"

static struct test_server srv;

static bool client_ctx_empty(void *arg)
{
    struct mcr_rdma_ctx_stats st;
    mcr_rdma_ctx_stats(((struct test_client *)arg)->ctx, &st);
    return st.endpoints == 0;
}

/* An endpoint that closes inside a batch: closed locally, it still posts
 * what it collected; failed (here: the peer disconnects), it drops it.
 * Either way every send buffer comes back and the endpoint is freed. */
static void test_batch_close(bool local)
{
    struct test_client c;
    struct mcr_rdma_ctx_opts co;
    test_opts(&co);
    bool up = client_connect(&c, &co, srv.port);
    struct mcr_rdma_ep *server_ep = srv.last_ep;
    unsigned char buf[64];
    fill_pattern(buf, sizeof(buf), 7);
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
    struct mcr_rdma_send s = {
        .type = MCR_RDMA_MSG_EAGER, .request_id = 1, .iov = &iov, .iovcnt = 1};
    mcr_rdma_ctx_batch_begin(c.ctx);
    bool queued = up && mcr_rdma_ep_send(c.ep, &s) == 0;
    if (local)
        mcr_rdma_ep_close(c.ep);
    else if (up)
        mcr_rdma_ep_close(server_ep);
    bool closed = run_until(client_closed, &c, 10000);
    mcr_rdma_ctx_batch_end(c.ctx);
    bool freed = run_until(client_ctx_empty, &c, 10000);
    struct mcr_rdma_ctx_stats st;
    mcr_rdma_ctx_stats(c.ctx, &st);
    tap_ok(queued && closed && freed && st.send_bufs_free == co.send_bufs &&
               (local ? c.close_reason == 0 : c.close_reason < 0),
           "an endpoint %s inside a batch is freed with every send buffer back (%u/%u; %s)",
           local ? "closed locally" : "whose peer left", st.send_bufs_free, co.send_bufs,
           c.close_why);
    client_destroy(&c);
}

/* Both sides stream to each other with small send pools that fill up with
 * messages waiting for credit: credits must still flow back (each endpoint
 * keeps a send buffer for credit messages), or both would wait forever. */
static void test_small_pools(void)
{
    enum { N = 500 };
    struct test_server sp;
    struct mcr_rdma_ctx_opts o;
    test_opts(&o);
    o.send_bufs = 40;
    server_start(&sp, &o);
    sp.sink = true;
    struct test_client c;
    bool up = client_connect(&c, &o, sp.port);
    struct mcr_rdma_ep *sep = sp.last_ep;
    uint32_t sent_c = 0, sent_s = 0;
    int full_c = 0, full_s = 0;
    uint64_t deadline = now_ms() + 120000;
    unsigned char buf[100];
    memset(buf, 0x42, sizeof(buf));
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
    c.next_expected = 0;
    while (up && !c.closed && (sent_c < N || sent_s < N) && now_ms() < deadline) {
        int rc = 0;
        while (sent_c < N) {
            struct mcr_rdma_send m = {.type = MCR_RDMA_MSG_EAGER,
                                      .request_id = 900000 + sent_c,
                                      .iov = &iov,
                                      .iovcnt = 1};
            if ((rc = mcr_rdma_ep_send(c.ep, &m)) != 0)
                break;
            sent_c++;
        }
        full_c += rc == -EAGAIN;
        rc = 0;
        while (sent_s < N) {
            struct mcr_rdma_send m = {
                .type = MCR_RDMA_MSG_EAGER, .request_id = sent_s, .iov = &iov, .iovcnt = 1};
            if ((rc = mcr_rdma_ep_send(sep, &m)) != 0)
                break;
            sent_s++;
        }
        full_s += rc == -EAGAIN;
        run_for(5);
    }
    bool done = false;
    uint64_t until = now_ms() + 60000;
    while (!done && now_ms() < until) {
        run_for(20);
        done = c.replies >= N && sp.sunk >= N;
    }
    tap_ok(up && done && full_c > 0 && full_s > 0 && c.bad_replies == 0,
           "send pools of 40 full on both sides (%d/%d times): %u and %u of %d messages "
           "delivered each way",
           full_c, full_s, sp.sunk, c.replies, N);
    client_destroy(&c);
    run_for(100);
    server_stop(&sp);
}

/* The client's endpoint knows its peer left (or it closed). */
static bool client_saw_peer_leave(void *arg)
{
    struct test_client *c = arg;
    return c->closed || (c->ep != NULL && mcr_rdma_ep_peer_left(c->ep));
}

/* A paused client of srv with n messages sent to it by the server, some of
 * them still waiting for credit; its server endpoint in *sep. On failure
 * a failed check names `what` and the client is destroyed. */
static bool client_with_waiting(struct test_client *c, uint32_t n, struct mcr_rdma_ep **sep,
                                const char *what)
{
    int connected0 = srv.connected;
    bool up = client_connect(c, NULL, srv.port);
    *sep = srv.last_ep;
    int sent = -1;
    if (up &&
        run_until(server_connected_past, &(struct server_count_wait){&srv, connected0}, 10000)) {
        mcr_rdma_ep_pause(c->ep); /* no credits come back: some sends must wait */
        sent = send_burst(*sep, 0, n);
        run_for(200);
    }
    if (sent == (int)n)
        return true;
    tap_ok(0, "%s: a paused client with %u messages sent to it", what, n);
    client_destroy(c);
    return false;
}

/* A local close lets what was sent before it go first: messages still
 * waiting for credit when the server closes its endpoint reach the client
 * once it returns credits, before the disconnect; the endpoint takes no
 * new sends meanwhile. */
static void test_close_lingers(void)
{
    enum { N = 45 };
    struct test_client c;
    struct mcr_rdma_ep *sep;
    if (!client_with_waiting(&c, N, &sep, "close lingers"))
        return;
    struct mcr_rdma_ep_stats st;
    mcr_rdma_ep_stats(sep, &st);
    uint32_t waiting = st.sends_unfinished;
    int closed0 = srv.closed;
    mcr_rdma_ep_close(sep);
    unsigned char b = 0;
    struct iovec iov = {&b, 1};
    struct mcr_rdma_send m = {.type = MCR_RDMA_MSG_EAGER, .iov = &iov, .iovcnt = 1};
    int after = mcr_rdma_ep_send(sep, &m);
    run_for(200);
    bool still_open = srv.closed == closed0 && !c.closed;
    if (c.ep != NULL)
        mcr_rdma_ep_resume(c.ep);
    bool all = wait_replies(&c, N, 20000);
    run_until(client_closed, &c, 20000);
    tap_ok(waiting > 0 && after == -ENOTCONN && still_open,
           "a server endpoint closed with %u of %d messages unfinished takes no new send and "
           "stays open for them",
           waiting, N);
    tap_ok(all && c.replies == N && c.bad_replies == 0 && c.closed,
           "the client receives all %d, in order, then the disconnect (%u received)", N, c.replies);
    client_destroy(&c);

    /* abort: what waits is dropped, the endpoint closes at once */
    if (!client_with_waiting(&c, N, &sep, "abort"))
        return;
    closed0 = srv.closed;
    mcr_rdma_ep_abort(sep);
    run_until(server_closed_past, &(struct server_count_wait){&srv, closed0}, 10000);
    bool server_closed = srv.closed == closed0 + 1;
    if (c.ep != NULL)
        mcr_rdma_ep_resume(c.ep);
    run_until(client_closed, &c, 20000);
    tap_ok(server_closed && c.closed && c.replies < N,
           "an aborted endpoint closes at once and drops what waited (%u of %d arrived)", c.replies,
           N);
    client_destroy(&c);
}

/* The server's context sends short messages without a completion
 * (send_signal_every): a close right after a few of them, with nothing
 * waiting, lingers until a completion tells they went (a credit message
 * asks for one), not for the whole MCR_RDMA_LINGER_MS; the client gets
 * them all, then the disconnect. */
static void test_close_after_unsignaled(void)
{
    enum { N = 5 }; /* fewer than send_signal_every - 1: none asks for a completion */
    struct test_client c;
    int connected0 = srv.connected;
    bool up = client_connect(&c, NULL, srv.port);
    if (!up ||
        !run_until(server_connected_past, &(struct server_count_wait){&srv, connected0}, 10000)) {
        tap_ok(0, "close after unsignaled sends: a client connected");
        client_destroy(&c);
        return;
    }
    struct mcr_rdma_ep *sep = srv.last_ep;
    int sent = send_burst(sep, 0, N);
    bool arrived = wait_replies(&c, N, 10000);
    struct mcr_rdma_ep_stats st;
    mcr_rdma_ep_stats(sep, &st);
    int closed0 = srv.closed;
    uint64_t t0 = now_ms();
    mcr_rdma_ep_close(sep);
    bool server_closed =
        run_until(server_closed_past, &(struct server_count_wait){&srv, closed0}, 10000);
    uint64_t took = now_ms() - t0;
    run_until(client_closed, &c, 10000);
    tap_ok(sent == N && arrived && st.sends_unfinished == N,
           "%d short sends arrive without completions (%u unfinished for the sender)", N,
           st.sends_unfinished);
    tap_ok(server_closed && took < MCR_RDMA_LINGER_MS / 2 && c.closed && c.replies == N &&
               c.bad_replies == 0,
           "the endpoint closed right after them lingers %llu ms, not the whole %d, and the "
           "client has all %d, then the disconnect",
           (unsigned long long)took, MCR_RDMA_LINGER_MS, N);
    client_destroy(&c);
}

/* A peer that disconnects while a paused endpoint holds messages of its
 * does not take them along: resume still delivers them all, in order,
 * then the close is reported, as a socket's reader gets the data before
 * the end of stream; sends are refused meanwhile. An owner that does not
 * resume loses them after MCR_RDMA_LINGER_MS, and the endpoint closes. */
static void test_held_after_peer_left(void)
{
    enum { N = 20 }; /* fewer than the credits: all of them reach the paused client */
    struct test_client c;
    struct mcr_rdma_ep *sep;
    if (!client_with_waiting(&c, N, &sep, "peer left"))
        return;
    mcr_rdma_ep_close(sep);
    run_until(client_saw_peer_leave, &c, 10000);
    run_for(100); /* and it stays so */
    bool still_open = !c.closed && c.replies == 0;
    int refused = -1;
    if (c.ep != NULL) {
        unsigned char b = 0;
        struct iovec iov = {&b, 1};
        struct mcr_rdma_send m = {.type = MCR_RDMA_MSG_EAGER, .iov = &iov, .iovcnt = 1};
        refused = mcr_rdma_ep_send(c.ep, &m);
        mcr_rdma_ep_resume(c.ep);
    }
    run_until(client_closed, &c, 5000);
    tap_ok(still_open && refused == -ENOTCONN,
           "a paused endpoint whose peer disconnected stays open while it holds messages, and "
           "refuses sends (%s)",
           strerror(-refused));
    tap_ok(c.replies == N && c.bad_replies == 0 && c.closed && c.close_reason == -ECONNRESET,
           "resumed, it delivers all %d, in order, then reports the close (%u delivered, %s)", N,
           c.replies, c.close_why);
    client_destroy(&c);

    if (!client_with_waiting(&c, N, &sep, "peer left, not resumed"))
        return;
    mcr_rdma_ep_close(sep);
    uint64_t t0 = now_ms();
    run_until(client_closed, &c, 10000);
    uint64_t took = now_ms() - t0;
    struct mcr_rdma_ctx_stats st;
    mcr_rdma_ctx_stats(c.ctx, &st);
    struct mcr_rdma_ctx_opts co;
    test_opts(&co);
    tap_ok(c.closed && c.replies == 0 && took >= MCR_RDMA_LINGER_MS - 500 &&
               took < MCR_RDMA_LINGER_MS + 3000 && st.endpoints == 0 && st.recv_deferred == 0 &&
               st.recv_posted + st.recv_bufs_free == co.recv_bufs,
           "never resumed, it drops them and closes after about %d ms (%llu ms), its receive "
           "buffers back (%u posted, %u free)",
           MCR_RDMA_LINGER_MS, (unsigned long long)took, st.recv_posted, st.recv_bufs_free);
    client_destroy(&c);
}

/* Credits can come back on a data message the receiving endpoint holds
 * (paused): they are the sender's at once, so its sends waiting for credit
 * go out without the endpoint being resumed. The client holds what the
 * server sent it, resumes, and with the last one delivered sends a data
 * message of its own, which carries the credits for all of them (fewer
 * than a credit message's worth are left after it); the server's endpoint
 * is paused and holds that message. */
static uint32_t credits_ride_after;

static void send_after_last(struct test_client *c, struct mcr_rdma_ep *ep,
                            const struct mcr_rdma_msg *msg)
{
    (void)msg;
    if (c->replies != credits_ride_after)
        return;
    unsigned char b = 7;
    struct iovec iov = {&b, 1};
    struct mcr_rdma_send m = {
        .type = MCR_RDMA_MSG_EAGER, .request_id = 777777, .iov = &iov, .iovcnt = 1};
    mcr_rdma_ep_send(ep, &m);
}

static void test_credits_on_held_message(void)
{
    enum { N = 40 };
    struct test_client c;
    struct mcr_rdma_ep *sep;
    if (!client_with_waiting(&c, N, &sep, "credits on a held message"))
        return;
    struct mcr_rdma_ep_stats st;
    mcr_rdma_ep_stats(sep, &st);
    uint32_t waiting = st.sends_unfinished;
    mcr_rdma_ep_pause(sep);
    credits_ride_after = N - waiting;
    c.on_message_hook = send_after_last;
    if (c.ep != NULL)
        mcr_rdma_ep_resume(c.ep);
    struct reply_wait w = {&c, N};
    run_until(have_replies, &w, 5000);
    tap_ok(waiting > 0 && c.replies == N && c.bad_replies == 0,
           "credits returned on a message the server's paused endpoint holds let its %u waiting "
           "sends go (%u of %d received)",
           waiting, c.replies, N);
    c.on_message_hook = NULL;
    mcr_rdma_ep_resume(sep);
    if (c.ep != NULL)
        mcr_rdma_ep_close(c.ep);
    run_until(client_closed, &c, 10000);
    client_destroy(&c);
}

/* With ep_sends_waiting_max, a peer that returns no credits (its endpoint
 * paused) holds at most its credits plus that many of the context's send
 * buffers: sends to it then return -EAGAIN while another peer of the same
 * context is still sent to; resumed, it gets everything that was accepted,
 * in order. */
static void test_waiting_cap(void)
{
    enum { POOL = 64, CAP = 8 };
    struct test_server sp;
    struct mcr_rdma_ctx_opts o;
    test_opts(&o);
    o.send_bufs = POOL;
    o.ep_sends_waiting_max = CAP;
    server_start(&sp, &o);
    struct test_client stalled, other;
    memset(&other, 0, sizeof(other));
    bool up = client_connect(&stalled, NULL, sp.port);
    struct mcr_rdma_ep *to_stalled = sp.last_ep;
    up = up && client_connect(&other, NULL, sp.port);
    struct mcr_rdma_ep *to_other = sp.last_ep;
    if (!up) {
        tap_ok(0, "waiting cap: two clients connect");
        client_destroy(&stalled);
        client_destroy(&other);
        server_stop(&sp);
        return;
    }
    mcr_rdma_ep_pause(stalled.ep); /* its credits stop coming back */
    unsigned char buf[100];
    memset(buf, 0x5a, sizeof(buf));
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
    uint32_t accepted = 0;
    int rc = 0;
    for (uint32_t i = 0; i < 2 * POOL && rc == 0; i++) {
        struct mcr_rdma_send m = {
            .type = MCR_RDMA_MSG_EAGER, .request_id = i, .iov = &iov, .iovcnt = 1};
        rc = mcr_rdma_ep_send(to_stalled, &m);
        accepted += rc == 0;
        run_for(1); /* its completions come back: only credits are missing */
    }
    struct mcr_rdma_ep_stats st;
    mcr_rdma_ep_stats(to_stalled, &st);
    tap_ok(rc == -EAGAIN && accepted <= (uint32_t)st.peer_credits + CAP && accepted < POOL &&
               st.sends_waiting == CAP,
           "a peer returning no credits: %u sends accepted, then -EAGAIN (credits %u + %u "
           "waiting, counted %u; %u send buffers)",
           accepted, st.peer_credits, CAP, st.sends_waiting, POOL);
    int sent_other = 0;
    for (uint32_t i = 0; i < 10; i++) {
        struct mcr_rdma_send m = {
            .type = MCR_RDMA_MSG_EAGER, .request_id = i, .iov = &iov, .iovcnt = 1};
        sent_other += mcr_rdma_ep_send(to_other, &m) == 0;
    }
    bool other_got = wait_replies(&other, 10, 20000);
    tap_ok(sent_other == 10 && other_got && other.bad_replies == 0,
           "meanwhile another peer of the context is sent to (%d of 10 accepted, %u received)",
           sent_other, other.replies);
    mcr_rdma_ep_resume(stalled.ep);
    bool all = wait_replies(&stalled, accepted, 20000);
    tap_ok(all && stalled.replies == accepted && stalled.bad_replies == 0,
           "resumed, the stalled peer receives all %u accepted messages in order (%u)", accepted,
           stalled.replies);
    client_destroy(&stalled);
    client_destroy(&other);
    run_for(100);
    server_stop(&sp);
}

/* What the listener's refusal callback was told. */
struct refusals {
    int count, err;
    char peer[64], why[128];
};

static void note_refusal(struct mcr_rdma_listener *listener, const char *peer, int err,
                         const char *why, void *user)
{
    (void)listener;
    struct refusals *r = user;
    r->count++;
    r->err = err;
    snprintf(r->peer, sizeof(r->peer), "%s", peer);
    snprintf(r->why, sizeof(r->why), "%s", why);
}

/* A context whose receive queue backs 4 connections refuses a fifth, and
 * tells the listener's owner why. */
static void test_admission(void)
{
    struct test_server small;
    struct mcr_rdma_ctx_opts o;
    test_opts(&o);
    o.recv_bufs = 64;
    o.credits = 16;
    server_start(&small, &o);
    struct refusals refused = {0};
    mcr_rdma_listener_set_refused(small.listener, note_refusal, &refused);
    static struct test_client cl[5];
    struct mcr_rdma_ctx_stats st0, st1, st;
    mcr_rdma_ctx_stats(small.ctx, &st0);
    int ok = client_connect(&cl[0], NULL, small.port);
    mcr_rdma_ctx_stats(small.ctx, &st1);
    for (int i = 1; i < 4; i++)
        ok += client_connect(&cl[i], NULL, small.port);
    bool fifth = client_connect(&cl[4], NULL, small.port);
    mcr_rdma_ctx_stats(small.ctx, &st);
    /* the pools register a connection's credits (16 buffers) at a time as
     * connections come: nothing at first; one connection, its 16 receives;
     * four, 64 receives; no send buffer, since nothing waits to be sent and
     * credit messages go inline from the endpoint (rxe takes 256 inline
     * bytes; a device without inline sends would add a send chunk) */
    const uint64_t chunk = 16u * o.buf_size;
    tap_ok(st0.registered_bytes == 0 && st1.registered_bytes == chunk &&
               st.registered_bytes == 4 * chunk,
           "buffers registered as connections come: %llu bytes with none, %llu with one, %llu "
           "with four (chunks of %llu)",
           (unsigned long long)st0.registered_bytes, (unsigned long long)st1.registered_bytes,
           (unsigned long long)st.registered_bytes, (unsigned long long)chunk);
    tap_ok(ok == 4 && !fifth && cl[4].closed && st.rejected == 1,
           "receive queue of 64 with 16 credits each: 4 accepted, the 5th refused (%s)",
           cl[4].close_why);
    tap_ok(st.granted_credits == 64, "granted credits never exceed the receive queue (%u)",
           st.granted_credits);
    tap_ok(refused.count == 1 && refused.err == -ENOBUFS && refused.peer[0] != '\0' &&
               strstr(refused.why, "no receive credits") != NULL,
           "the refusal callback was told once: from %s, %s (%s)", refused.peer, refused.why,
           strerror(-refused.err));
    for (int i = 0; i < 5; i++)
        client_destroy(&cl[i]);
    run_for(200);
    server_stop(&small);
}

int main(void)
{
    /* as rdma_test_rc's server: short replies go unsignaled */
    struct mcr_rdma_ctx_opts so;
    test_opts(&so);
    so.send_bufs = 1100;
    so.send_signal_every = 8;
    server_start(&srv, &so);
    tap_ok(srv.port != 0, "server listens on %s port %u (%s)", rxe_addr(), srv.port,
           mcr_rdma_ctx_device_name(srv.ctx));
    test_waiting_cap();
    test_close_lingers();
    test_close_after_unsignaled();
    test_held_after_peer_left();
    test_credits_on_held_message();
    test_batch_close(true);
    test_batch_close(false);
    test_small_pools();
    test_admission();
    server_stop(&srv);
    tap_no_plan_end();
    return tap_exit_status();
}
