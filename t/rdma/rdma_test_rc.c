/* t/rdma/rdma_test_rc.c: RC endpoints on real verbs (inside the Soft-RoCE
 * guest): connect/accept, eager ping-pongs around the eager limit, 1,000
 * messages in flight bounded by credits without receiver-not-ready errors,
 * one-way and two-way streams, a paused peer, rendezvous RDMA READ and
 * WRITE up to 8 MiB with the data verified, several clients on one server
 * context, batched posts (one doorbell, in order) and deferred reposts,
 * and a clean close that returns every resource. Closes and limits:
 * t/rdma/rdma_test_rc_close. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t/rdma/harness.h"

static struct test_server srv;

static bool server_has_endpoints_0(void *arg)
{
    (void)arg;
    struct mcr_rdma_ctx_stats st;
    mcr_rdma_ctx_stats(srv.ctx, &st);
    return st.endpoints == 0;
}

static void test_eager(struct test_client *c)
{
    size_t limit = mcr_rdma_ep_max_eager_payload(c->ep);
    tap_ok(limit == 8192 - MCR_RDMA_HDR_MAX, "eager limit is the buffer minus the header (%zu)",
           limit);
    const uint32_t sizes[] = {0, 1, 100, 4096, (uint32_t)limit - 1, (uint32_t)limit};
    uint32_t id = 1000;
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        int good = 0, rounds = 100;
        for (int r = 0; r < rounds; r++)
            good += ping(c, id++, sizes[s]);
        tap_ok(good == rounds, "%d/%d eager ping-pongs of %u bytes echoed intact", good, rounds,
               sizes[s]);
    }
    static unsigned char big[8192];
    struct iovec iov = {.iov_base = big, .iov_len = limit + 1};
    struct mcr_rdma_send s = {
        .type = MCR_RDMA_MSG_EAGER, .request_id = 1, .iov = &iov, .iovcnt = 1};
    tap_ok(mcr_rdma_ep_send(c->ep, &s) == -EMSGSIZE,
           "limit+1 bytes refused as eager (-EMSGSIZE: use rendezvous)");
    /* Two iovecs that together fit exactly. */
    fill_pattern(big, limit, 7);
    struct iovec two[2] = {{big, 10}, {big + 10, limit - 10}};
    s = (struct mcr_rdma_send){
        .type = MCR_RDMA_MSG_EAGER, .request_id = id, .iov = two, .iovcnt = 2};
    c->next_expected = id;
    uint32_t before = c->replies;
    tap_ok(mcr_rdma_ep_send(c->ep, &s) == 0 && wait_replies(c, before + 1, 10000) &&
               c->last_len == limit && memcmp(c->last_payload, big, limit) == 0,
           "gathered payload of exactly the limit echoed intact");
}

static void test_credits(struct test_client *c)
{
    enum { N = 1000, LEN = 64 };
    unsigned char buf[LEN];
    uint32_t base = 100000;
    c->next_expected = base;
    c->bad_replies = 0;
    uint32_t before = c->replies;
    int sent = 0;
    for (uint32_t i = 0; i < N; i++) {
        fill_pattern(buf, LEN, base + i);
        struct iovec iov = {.iov_base = buf, .iov_len = LEN};
        struct mcr_rdma_send s = {
            .type = MCR_RDMA_MSG_EAGER, .request_id = base + i, .iov = &iov, .iovcnt = 1};
        sent += mcr_rdma_ep_send(c->ep, &s) == 0;
    }
    tap_ok(sent == N, "%d messages queued without waiting", sent);
    bool all = wait_replies(c, before + N, 120000);
    tap_ok(all && c->bad_replies == 0, "all %u replies came back in order (%d out of order)",
           c->replies - before, c->bad_replies);
    struct mcr_rdma_ep_stats st;
    mcr_rdma_ep_stats(c->ep, &st);
    tap_ok(st.max_in_flight <= st.peer_credits && st.max_in_flight + 1u >= st.peer_credits,
           "in flight never above the peer's credits (max %u, credits %u)", st.max_in_flight,
           st.peer_credits);
    tap_ok(st.credit_stalls > 0, "the sender ran out of credits and waited (%llu stalls)",
           (unsigned long long)st.credit_stalls);
    struct mcr_rdma_ctx_stats cs, ss;
    mcr_rdma_ctx_stats(c->ctx, &cs);
    mcr_rdma_ctx_stats(srv.ctx, &ss);
    tap_ok(cs.rnr_errors == 0 && ss.rnr_errors == 0 && cs.wc_errors == 0 && ss.wc_errors == 0,
           "no receiver-not-ready and no completion errors with rnr_retry=0 (client %llu/%llu, "
           "server %llu/%llu)",
           (unsigned long long)cs.rnr_errors, (unsigned long long)cs.wc_errors,
           (unsigned long long)ss.rnr_errors, (unsigned long long)ss.wc_errors);
    tap_diag("credit messages sent: client %llu", (unsigned long long)st.credit_msgs_sent);
    tap_ok(ping(c, 999999, 32), "connection healthy after the burst");
}

struct sink_wait {
    struct test_client *c;
    uint32_t client_target, server_target;
};

static bool sink_done(void *arg)
{
    struct sink_wait *w = arg;
    return (w->c->replies >= w->client_target && srv.sunk >= w->server_target) || w->c->closed;
}

/* Without replies to carry credits back, only explicit credit messages keep
 * a one-way stream going; then both directions at once. */
static void test_streams(struct test_client *c)
{
    enum { N = 1000 };
    struct mcr_rdma_ep_stats before_c, after_c, after_s;
    mcr_rdma_ep_stats(c->ep, &before_c);
    srv.sink = true;
    srv.sunk = 0;
    int sent = send_burst(c->ep, 200000, N);
    struct sink_wait w = {c, c->replies, N};
    bool done = sent == N && run_until(sink_done, &w, 120000);
    mcr_rdma_ep_stats(c->ep, &after_c);
    mcr_rdma_ep_stats(srv.last_ep, &after_s);
    tap_ok(done && srv.sunk == N,
           "one-way stream of %d messages to a server that never replies "
           "arrived (%u)",
           N, srv.sunk);
    tap_ok(after_s.credit_msgs_sent > 0 && after_c.max_in_flight <= after_c.peer_credits,
           "carried by %llu explicit credit messages from the server, in flight <= %u",
           (unsigned long long)after_s.credit_msgs_sent, after_c.peer_credits);

    srv.sunk = 0;
    c->next_expected = 300000;
    c->bad_replies = 0;
    int sent_c = send_burst(c->ep, 400000, N);
    int sent_s = send_burst(srv.last_ep, 300000, N);
    w = (struct sink_wait){c, c->replies + N, N};
    done = run_until(sink_done, &w, 120000);
    struct mcr_rdma_ctx_stats cs, ss;
    mcr_rdma_ctx_stats(c->ctx, &cs);
    mcr_rdma_ctx_stats(srv.ctx, &ss);
    tap_ok(done && sent_c == N && sent_s == N && c->bad_replies == 0 && !c->closed,
           "%d messages each way at once, all delivered in order", N);
    tap_ok(cs.rnr_errors == 0 && ss.rnr_errors == 0 && cs.wc_errors == 0 && ss.wc_errors == 0,
           "still no receiver-not-ready and no completion errors");
    srv.sink = false;
}

/* A paused server endpoint holds what arrives and returns no credit, so the
 * client stops at its credits; resume delivers everything in order. */
static void test_pause(struct test_client *c)
{
    enum { N = 100 };
    struct mcr_rdma_ep_stats before, during;
    mcr_rdma_ep_stats(c->ep, &before);
    mcr_rdma_ep_pause(srv.last_ep);
    c->next_expected = 500000;
    c->bad_replies = 0;
    uint32_t replies0 = c->replies;
    int sent = send_burst(c->ep, 500000, N);
    run_for(500);
    mcr_rdma_ep_stats(c->ep, &during);
    tap_ok(sent == N && c->replies == replies0 && during.credit_stalls > before.credit_stalls,
           "paused server endpoint: nothing delivered, the client waits for credits");
    mcr_rdma_ep_resume(srv.last_ep);
    bool all = wait_replies(c, replies0 + N, 60000);
    tap_ok(all && c->bad_replies == 0,
           "after resume all %d messages were delivered and answered in order", N);
}

static void test_rendezvous(struct test_client *c, struct mcr_rdma_regcache *cache)
{
    size_t limit = mcr_rdma_ep_max_eager_payload(c->ep);
    const uint32_t sizes[] = {(uint32_t)limit + 1, 65536, 1u << 20, 8u << 20};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint32_t len = sizes[i];
        unsigned char *src = aligned_alloc(4096, (len + 4095) & ~4095u);
        unsigned char *dst = aligned_alloc(4096, (len + 4095) & ~4095u);
        fill_pattern(src, len, len);
        memset(dst, 0, len);
        /* set: the server pulls src with RDMA READ */
        struct ibv_mr *mr = mcr_rdma_regcache_get(cache, src, len, MCR_RDMA_ACCESS_REMOTE_READ);
        struct mcr_rdma_rndv adv = {(uintptr_t)src, mr ? mr->rkey : 0, len};
        const char frame[] = "set-frame";
        struct iovec iov = {.iov_base = (void *)frame, .iov_len = sizeof(frame)};
        struct mcr_rdma_send s = {.type = MCR_RDMA_MSG_RNDV_READ,
                                  .request_id = 5000 + (uint32_t)i,
                                  .iov = &iov,
                                  .iovcnt = 1,
                                  .advertise = &adv};
        c->next_expected = s.request_id;
        uint32_t before = c->replies;
        uint64_t t0 = now_ms();
        bool ok =
            mr != NULL && mcr_rdma_ep_send(c->ep, &s) == 0 && wait_replies(c, before + 1, 60000);
        uint64_t want = fnv1a(src, len), got = 0;
        if (ok && c->last_len == sizeof(got))
            memcpy(&got, c->last_payload, sizeof(got));
        tap_ok(ok && c->last_flags == MCR_RDMA_F_READ_DONE && got == want,
               "rendezvous READ of %u bytes: server pulled the exact data (%llu ms)", len,
               (unsigned long long)(now_ms() - t0));
        if (mr != NULL)
            mcr_rdma_regcache_put(cache, mr);
        /* get: the server pushes the same bytes into dst with RDMA WRITE */
        mr = mcr_rdma_regcache_get(cache, dst, len, MCR_RDMA_ACCESS_REMOTE_WRITE);
        adv = (struct mcr_rdma_rndv){(uintptr_t)dst, mr ? mr->rkey : 0, len};
        s.type = MCR_RDMA_MSG_RNDV_WRITE;
        s.request_id = 6000 + (uint32_t)i;
        c->next_expected = s.request_id;
        before = c->replies;
        t0 = now_ms();
        ok = mr != NULL && mcr_rdma_ep_send(c->ep, &s) == 0 && wait_replies(c, before + 1, 60000);
        tap_ok(ok && (c->last_flags & MCR_RDMA_F_RNDV_DONE) && memcmp(dst, src, len) == 0,
               "rendezvous WRITE of %u bytes: the data arrived intact (%llu ms)", len,
               (unsigned long long)(now_ms() - t0));
        if (mr != NULL)
            mcr_rdma_regcache_put(cache, mr);
        mcr_rdma_regcache_invalidate(cache, src, len);
        mcr_rdma_regcache_invalidate(cache, dst, len);
        free(dst);
        free(src);
    }
    tap_ok(srv.range_checks_ok == 8 && srv.errors == 0,
           "accesses beyond the advertised region refused (%d of 8), no server errors (%d)",
           srv.range_checks_ok, srv.errors);
    /* The cache returns the same registration for a buffer used again,
     * and never keeps one with remote access. */
    unsigned char *buf = aligned_alloc(4096, 65536);
    struct ibv_mr *a = mcr_rdma_regcache_get(cache, buf, 65536, MCR_RDMA_ACCESS_WINDOW);
    mcr_rdma_regcache_put(cache, a);
    struct ibv_mr *b = mcr_rdma_regcache_get(cache, buf + 100, 1000, MCR_RDMA_ACCESS_WINDOW);
    mcr_rdma_regcache_put(cache, b);
    struct ibv_mr *l = mcr_rdma_regcache_get(cache, buf, 65536, MCR_RDMA_ACCESS_LOCAL);
    mcr_rdma_regcache_put(cache, l);
    struct mcr_rdma_regcache_stats before, after;
    mcr_rdma_regcache_stats(cache, &before);
    struct ibv_mr *w = mcr_rdma_regcache_get(cache, buf, 65536, MCR_RDMA_ACCESS_REMOTE_WRITE);
    bool w_remote = w != NULL && w->rkey != 0;
    if (w != NULL)
        mcr_rdma_regcache_put(cache, w);
    mcr_rdma_regcache_stats(cache, &after);
    tap_ok(a != NULL && a == b && l == a,
           "registration cache: hit for a covered range and for less access");
    tap_ok(w_remote && after.entries == before.entries && after.misses == before.misses + 1,
           "registration cache: a registration with remote access is made for its use and not "
           "kept (entries %u -> %u)",
           before.entries, after.entries);
    mcr_rdma_regcache_invalidate(cache, buf, 65536);
    free(buf);
}

/* Sends n eager messages of len pattern bytes under request ids first ..
 * first+n-1 (the patterns kept in bufs, n x len) and expects their echoes
 * in that order; returns how many the endpoint took. */
static int send_patterns(struct test_client *c, uint32_t first, int n, size_t len,
                         unsigned char *bufs)
{
    c->next_expected = first;
    c->bad_replies = 0;
    int sent = 0;
    for (int i = 0; i < n; i++) {
        unsigned char *buf = bufs + (size_t)i * len;
        fill_pattern(buf, len, first + (uint32_t)i);
        struct iovec iov = {.iov_base = buf, .iov_len = len};
        struct mcr_rdma_send s = {.type = MCR_RDMA_MSG_EAGER,
                                  .request_id = first + (uint32_t)i,
                                  .iov = &iov,
                                  .iovcnt = 1};
        sent += mcr_rdma_ep_send(c->ep, &s) == 0;
    }
    return sent;
}

/* Batching: sends collected between batch_begin and batch_end go to the
 * device in one post (one doorbell) at the end, none before, and reach the
 * peer in order. */
static void test_batch(struct test_client *c)
{
    enum { N = 5, LEN = 64 };
    static unsigned char buf[N][LEN];
    struct mcr_rdma_ctx_stats before, during, after;
    uint32_t id = 500000, replies0 = c->replies;
    mcr_rdma_ctx_stats(c->ctx, &before);
    mcr_rdma_ctx_batch_begin(c->ctx);
    int sent = send_patterns(c, id, N, LEN, &buf[0][0]);
    run_for(100);
    mcr_rdma_ctx_stats(c->ctx, &during);
    uint32_t early = c->replies - replies0;
    mcr_rdma_ctx_batch_end(c->ctx);
    mcr_rdma_ctx_stats(c->ctx, &after);
    bool all = wait_replies(c, replies0 + N, 10000);
    tap_ok(sent == N && early == 0 && during.doorbells == before.doorbells,
           "%d sends in a batch wait for its end (%u answered before it)", N, early);
    tap_ok(after.doorbells == before.doorbells + 1 &&
               after.work_requests - before.work_requests >= N,
           "the batch's end posts them together: %llu doorbell(s), %llu work requests",
           (unsigned long long)(after.doorbells - before.doorbells),
           (unsigned long long)(after.work_requests - before.work_requests));
    tap_ok(all && c->bad_replies == 0 && c->last_id == id + N - 1 && c->last_len == LEN &&
               memcmp(c->last_payload, buf[N - 1], LEN) == 0,
           "all %d echoed in order, intact", N);
}

/* A send with post_now in a batch goes at once, together with what the
 * endpoint collected before it (one doorbell); a send after it waits for
 * the batch's end again; all reach the peer in order. This is how the
 * server answers a request without waiting for the rest of its pass. */
static void test_batch_post_now(struct test_client *c)
{
    enum { N = 4, LEN = 48 };
    static unsigned char buf[N + 1][LEN];
    struct mcr_rdma_ctx_stats before, now, end;
    uint32_t id = 550000, replies0 = c->replies;
    mcr_rdma_ctx_stats(c->ctx, &before);
    mcr_rdma_ctx_batch_begin(c->ctx);
    int sent = send_patterns(c, id, N - 1, LEN, &buf[0][0]);
    fill_pattern(buf[N - 1], LEN, id + N - 1);
    struct iovec iov = {.iov_base = buf[N - 1], .iov_len = LEN};
    struct mcr_rdma_send s = {.type = MCR_RDMA_MSG_EAGER,
                              .request_id = id + N - 1,
                              .iov = &iov,
                              .iovcnt = 1,
                              .post_now = true};
    sent += mcr_rdma_ep_send(c->ep, &s) == 0;
    mcr_rdma_ctx_stats(c->ctx, &now);
    fill_pattern(buf[N], LEN, id + N);
    iov.iov_base = buf[N];
    s.request_id = id + N;
    s.post_now = false;
    sent += mcr_rdma_ep_send(c->ep, &s) == 0;
    struct mcr_rdma_ctx_stats after_last;
    mcr_rdma_ctx_stats(c->ctx, &after_last);
    mcr_rdma_ctx_batch_end(c->ctx);
    mcr_rdma_ctx_stats(c->ctx, &end);
    bool all = wait_replies(c, replies0 + N + 1, 10000);
    tap_ok(sent == N + 1 && now.doorbells == before.doorbells + 1 &&
               now.work_requests - before.work_requests == N,
           "a post_now send in a batch posts itself and the %d collected before it at once: "
           "%llu doorbell(s), %llu work requests",
           N - 1, (unsigned long long)(now.doorbells - before.doorbells),
           (unsigned long long)(now.work_requests - before.work_requests));
    tap_ok(after_last.doorbells == now.doorbells && end.doorbells == now.doorbells + 1,
           "a send after it waits for the batch's end (%llu doorbell(s) at the end)",
           (unsigned long long)(end.doorbells - after_last.doorbells));
    tap_ok(all && c->bad_replies == 0 && c->last_id == id + N && c->last_len == LEN &&
               memcmp(c->last_payload, buf[N], LEN) == 0,
           "all %d echoed in order, intact", N + 1);
}

/* More sends in one batch than an endpoint collects: the full collection
 * goes when the next one comes, the rest at the end; all arrive in order
 * in fewer doorbells than messages. */
static void test_batch_overflow(struct test_client *c)
{
    enum { N = 40, LEN = 32 };
    static unsigned char buf[N][LEN];
    struct mcr_rdma_ctx_stats before, after;
    uint32_t id = 600000, replies0 = c->replies;
    mcr_rdma_ctx_stats(c->ctx, &before);
    mcr_rdma_ctx_batch_begin(c->ctx);
    int sent = send_patterns(c, id, N, LEN, &buf[0][0]);
    mcr_rdma_ctx_batch_end(c->ctx);
    mcr_rdma_ctx_stats(c->ctx, &after);
    bool all = wait_replies(c, replies0 + N, 10000);
    uint64_t doorbells = after.doorbells - before.doorbells;
    tap_ok(sent == N && all && c->bad_replies == 0 && c->last_id == id + N - 1 &&
               memcmp(c->last_payload, buf[N - 1], LEN) == 0 && doorbells > 1 && doorbells < N,
           "%d sends in one batch: all echoed in order, in %llu doorbells", N,
           (unsigned long long)doorbells);
}

/* Receive buffers go back to the shared receive queue later than their
 * messages are handled: a poll that handles 24 replies (and the server's
 * credit messages) leaves the buffers waiting, posting them when the list
 * is full (MCR_RDMA_REPOST_MAX, 16), and the next poll that finds nothing
 * posts the rest, so reposting is off the path from a message to the answer
 * it leads to. The replies reach the client's queue while only the server
 * runs. */
static void test_deferred_reposts(struct test_client *c)
{
    enum { N = 24, LEN = 40 };
    static unsigned char buf[N][LEN];
    const uint32_t recv_bufs = mcr_rdma_ctx_options(c->ctx)->recv_bufs;
    uint32_t replies0 = c->replies;
    run_for(20);
    struct mcr_rdma_ctx_stats idle, srv0, srv_now, busy, after;
    mcr_rdma_ctx_stats(c->ctx, &idle);
    mcr_rdma_ctx_stats(srv.ctx, &srv0);
    int sent = send_patterns(c, 800000, N, LEN, &buf[0][0]);
    uint64_t deadline = now_ms() + 10000;
    do { /* the server alone: it echoes each request as it lands */
        if (mcr_rdma_ctx_progress(srv.ctx, 5) < 0)
            tap_bail("server progress failed");
        mcr_rdma_ctx_stats(srv.ctx, &srv_now);
    } while (srv_now.work_requests - srv0.work_requests < N && now_ms() < deadline);
    int handled = mcr_rdma_ctx_poll(c->ctx);
    mcr_rdma_ctx_stats(c->ctx, &busy);
    uint32_t busy_replies = c->replies;
    int idle_polls = 0;
    while (c->replies < replies0 + N && now_ms() < deadline)
        mcr_rdma_ctx_poll(c->ctx);
    int polled;
    while (((polled = mcr_rdma_ctx_poll(c->ctx)) > 0 || ++idle_polls < 2) && polled >= 0 &&
           now_ms() < deadline + 10000)
        ;
    mcr_rdma_ctx_stats(c->ctx, &after);
    tap_ok(idle.recv_deferred == 0 && idle.recv_posted == idle.granted_credits &&
               idle.recv_posted + idle.recv_bufs_free == recv_bufs,
           "idle, the queue holds one receive per granted credit (%u posted, %u credits, %u "
           "free of %u, %u waiting)",
           idle.recv_posted, idle.granted_credits, idle.recv_bufs_free, recv_bufs,
           idle.recv_deferred);
    uint32_t got = busy_replies - replies0;
    tap_ok(sent == N && handled >= N && busy.recv_deferred > 0 && busy.recv_deferred <= 16 &&
               busy.recv_posted + busy.recv_deferred + busy.recv_bufs_free == recv_bufs,
           "one poll handling %d completions (%u replies so far) leaves %u receive buffers "
           "waiting, never more than a full list of 16 (%u posted)",
           handled, got, busy.recv_deferred, busy.recv_posted);
    tap_ok(c->replies == replies0 + N && c->bad_replies == 0 && after.recv_deferred == 0 &&
               after.recv_posted == after.granted_credits &&
               after.recv_posted + after.recv_bufs_free == recv_bufs,
           "a poll that finds nothing posts them: %u posted again (one per credit), %u free "
           "of %u, all %d replies intact",
           after.recv_posted, after.recv_bufs_free, recv_bufs, N);
}

static void test_many_clients(void)
{
    enum { NCLIENTS = 4, ROUNDS = 50 };
    static struct test_client cl[NCLIENTS];
    int connected = 0;
    for (int i = 0; i < NCLIENTS; i++)
        connected += client_connect(&cl[i], NULL, srv.port);
    tap_ok(connected == NCLIENTS, "%d clients connected to one server context", connected);
    struct mcr_rdma_ctx_stats st;
    mcr_rdma_ctx_stats(srv.ctx, &st);
    tap_ok(st.endpoints == NCLIENTS + 1, "server context holds %u endpoints", st.endpoints);
    /* interleave: every client has a message outstanding at once */
    unsigned char buf[256];
    int good = 0;
    for (int r = 0; r < ROUNDS; r++) {
        uint32_t before[NCLIENTS];
        for (int i = 0; i < NCLIENTS; i++) {
            uint32_t id = (uint32_t)(i * 100000 + r);
            fill_pattern(buf, sizeof(buf), id);
            struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
            struct mcr_rdma_send s = {
                .type = MCR_RDMA_MSG_EAGER, .request_id = id, .iov = &iov, .iovcnt = 1};
            cl[i].next_expected = id;
            before[i] = cl[i].replies;
            if (cl[i].ep != NULL)
                mcr_rdma_ep_send(cl[i].ep, &s);
        }
        for (int i = 0; i < NCLIENTS; i++) {
            uint32_t id = (uint32_t)(i * 100000 + r);
            fill_pattern(buf, sizeof(buf), id);
            good += wait_replies(&cl[i], before[i] + 1, 10000) && cl[i].last_id == id &&
                    memcmp(cl[i].last_payload, buf, sizeof(buf)) == 0;
        }
    }
    tap_ok(good == NCLIENTS * ROUNDS, "%d/%d interleaved requests answered correctly", good,
           NCLIENTS * ROUNDS);
    for (int i = 0; i < NCLIENTS; i++) {
        if (cl[i].ep != NULL)
            mcr_rdma_ep_close(cl[i].ep);
    }
    int closed = 0;
    for (int i = 0; i < NCLIENTS; i++)
        closed += run_until(client_closed, &cl[i], 10000);
    tap_ok(closed == NCLIENTS, "all clients closed");
    for (int i = 0; i < NCLIENTS; i++)
        client_destroy(&cl[i]);
}

int main(void)
{
    struct mcr_rdma_ctx_opts so;
    test_opts(&so);
    so.send_bufs = 1100;      /* the credit test lets 1,000 replies queue up */
    so.send_signal_every = 8; /* as memcached-rdma's contexts: short replies go unsignaled */
    server_start(&srv, &so);
    tap_ok(srv.port != 0, "server listens on %s port %u (%s)", rxe_addr(), srv.port,
           mcr_rdma_ctx_device_name(srv.ctx));

    struct test_client c;
    struct mcr_rdma_ctx_opts co;
    test_opts(&co);
    co.send_bufs = 1100; /* 1,000 requests queued at once */
    bool up = client_connect(&c, &co, srv.port);
    tap_ok(up, "client connected%s%s", c.closed ? ": " : "", c.closed ? c.close_why : "");
    if (!up)
        tap_bail("cannot continue without a connection");
    int none = 0;
    run_until(server_connected_past, &(struct server_count_wait){&srv, none}, 10000);
    tap_ok(srv.accepted == 1 && srv.connected == 1, "server accepted and saw the connection");

    struct test_client nobody;
    uint16_t unused_port = (uint16_t)(srv.port == 65535 ? 65534 : srv.port + 1);
    bool refused_up = client_connect(&nobody, NULL, unused_port);
    tap_ok(!refused_up && nobody.closed && nobody.close_reason < 0,
           "connecting to a port nobody listens on reports on_closed (%s)", nobody.close_why);
    client_destroy(&nobody);

    test_eager(&c);
    test_batch(&c);
    test_batch_post_now(&c);
    test_batch_overflow(&c);
    test_deferred_reposts(&c);
    test_credits(&c);
    test_streams(&c);
    test_pause(&c);
    struct mcr_rdma_regcache *cache = mcr_rdma_regcache_create(mcr_rdma_ctx_pd(c.ctx), 8);
    test_rendezvous(&c, cache);
    mcr_rdma_regcache_destroy(cache);
    test_many_clients();

    mcr_rdma_ep_close(c.ep);
    bool closed = run_until(client_closed, &c, 10000);
    bool server_empty = run_until(server_has_endpoints_0, NULL, 10000);
    tap_ok(closed && c.close_reason == 0, "client closed locally (%s)", c.close_why);
    tap_ok(server_empty && srv.closed == srv.accepted,
           "server freed every endpoint (%d closed of %d)", srv.closed, srv.accepted);
    struct mcr_rdma_ctx_stats st;
    mcr_rdma_ctx_stats(srv.ctx, &st);
    tap_ok(st.granted_credits == 0 && st.recv_deferred == 0 &&
               st.recv_posted + st.recv_bufs_free == so.recv_bufs &&
               st.send_bufs_free == so.send_bufs,
           "server context back to its initial state (credits %u, receives %u posted + %u free "
           "of %u, send buffers %u/%u)",
           st.granted_credits, st.recv_posted, st.recv_bufs_free, so.recv_bufs, st.send_bufs_free,
           so.send_bufs);
    client_destroy(&c);

    server_stop(&srv);
    tap_no_plan_end();
    return tap_exit_status();
}
