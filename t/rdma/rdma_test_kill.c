/* t/rdma/rdma_test_kill.c: a client process killed mid-transfer (during an
 * 8 MiB rendezvous READ, and while streaming eager messages) is cleaned up by
 * the server, which frees everything of that connection and keeps serving
 * the other client and new ones. The killed clients are this program re-run
 * in a child process ("child-rndv PORT" / "child-stream PORT"). Runs in the
 * guest. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t/rdma/harness.h"
#include "t/rdma/proc.h"

static struct test_server srv;
static struct test_client good;
static struct mcr_rdma_ep *good_server_ep;
static int victim_rndv, victim_msgs;
static pid_t victim_pid;

/* ---- child side ---------------------------------------------------------- */
static int child_main(const char *mode, uint16_t port)
{
    alarm(60); /* never outlive the test */
    struct test_client c;
    if (!client_connect(&c, NULL, port))
        return 2;
    if (strcmp(mode, "child-rndv") == 0) {
        uint32_t len = 8u << 20;
        unsigned char *buf = aligned_alloc(4096, len);
        fill_pattern(buf, len, 3);
        struct mcr_rdma_region region;
        if (mcr_rdma_region_register(mcr_rdma_ctx_pd(c.ctx), buf, len, MCR_RDMA_ACCESS_REMOTE_READ,
                                     &region) != 0)
            return 3;
        struct mcr_rdma_rndv adv = {(uintptr_t)buf, region.mr->rkey, len};
        struct mcr_rdma_send s = {
            .type = MCR_RDMA_MSG_RNDV_READ, .request_id = 1, .advertise = &adv};
        mcr_rdma_ep_send(c.ep, &s);
    } else {
        unsigned char buf[2048];
        fill_pattern(buf, sizeof(buf), 9);
        struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
        for (uint32_t i = 0; i < 1000; i++) {
            struct mcr_rdma_send s = {
                .type = MCR_RDMA_MSG_EAGER, .request_id = i, .iov = &iov, .iovcnt = 1};
            while (mcr_rdma_ep_send(c.ep, &s) == -EAGAIN)
                run_for(1);
        }
    }
    run_for(50000); /* killed long before this ends */
    return 4;
}

/* ---- server side ---------------------------------------------------------- */
static void hook(struct test_server *s, struct mcr_rdma_ep *ep, const struct mcr_rdma_msg *msg)
{
    (void)s;
    if (good_server_ep == NULL)
        good_server_ep = ep; /* the first message is the good client's ping */
    if (ep == good_server_ep)
        return;
    if (msg->type == MCR_RDMA_MSG_RNDV_READ) {
        /* Kill the client now: the server starts its READ of the client's
         * 8 MiB right after this hook returns, into a dying peer. */
        victim_rndv++;
        kill(victim_pid, SIGKILL);
    } else
        victim_msgs++;
}

static bool seen_rndv(void *arg)
{
    (void)arg;
    return victim_rndv > 0;
}

static bool seen_100_msgs(void *arg)
{
    (void)arg;
    return victim_msgs >= 100;
}

static bool server_back_to_one(void *arg)
{
    (void)arg;
    struct mcr_rdma_ctx_stats st;
    mcr_rdma_ctx_stats(srv.ctx, &st);
    return st.endpoints == 1;
}

static pid_t spawn(const char *self, const char *mode)
{
    char port[8];
    snprintf(port, sizeof(port), "%u", srv.port);
    pid_t pid = proc_fork();
    if (pid == 0) {
        execl(self, self, mode, port, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void kill_case(const char *self, const char *mode, bool (*ready)(void *),
                      struct mcr_rdma_ctx_opts *so)
{
    int closed_before = srv.closed;
    pid_t pid = victim_pid = spawn(self, mode);
    bool started = run_until(ready, NULL, 30000);
    kill(pid, SIGKILL);
    int status = proc_reap(pid, 10000);
    /* killed by us, not dead of its own (a sanitizer's abort, a crash) */
    tap_ok(started && status != -1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
           "%s: transfer under way when the client was killed", mode);
    uint64_t t0 = now_ms();
    bool freed = run_until(server_back_to_one, NULL, 60000);
    struct mcr_rdma_ctx_stats st;
    mcr_rdma_ctx_stats(srv.ctx, &st);
    tap_ok(freed && srv.closed == closed_before + 1,
           "%s: server freed the dead client's endpoint (%llu ms)", mode,
           (unsigned long long)(now_ms() - t0));
    run_for(100);
    mcr_rdma_ctx_stats(srv.ctx, &st);
    /* one endpoint left (the good client's): its credits; no send buffer
     * (its credit messages go inline, which rxe takes) */
    tap_ok(st.granted_credits == so->credits && st.recv_posted >= so->credits &&
               st.recv_deferred == 0 && st.recv_posted + st.recv_bufs_free == so->recv_bufs &&
               st.send_bufs_free == so->send_bufs,
           "%s: its credits, receives and send buffers are all back (%u, %u posted + %u free of "
           "%u, %u/%u)",
           mode, st.granted_credits, st.recv_posted, st.recv_bufs_free, so->recv_bufs,
           st.send_bufs_free, so->send_bufs);
    tap_ok(ping(&good, (uint32_t)(500 + srv.closed), 1000), "%s: the other client is still served",
           mode);
}

int main(int argc, char **argv)
{
    if (argc == 3)
        return child_main(argv[1], (uint16_t)atoi(argv[2]));
    struct mcr_rdma_ctx_opts so;
    test_opts(&so);
    server_start(&srv, &so);
    srv.on_message_hook = hook;
    if (!client_connect(&good, NULL, srv.port))
        tap_bail("good client could not connect");
    tap_ok(ping(&good, 1, 100) && good_server_ep != NULL, "well-behaved client served");

    kill_case(argv[0], "child-rndv", seen_rndv, &so);
    tap_ok(srv.rdma_failed + srv.rdma_done >= 1,
           "the interrupted RDMA READ was reported to its owner (%d failed, %d done)",
           srv.rdma_failed, srv.rdma_done);
    victim_msgs = 0;
    kill_case(argv[0], "child-stream", seen_100_msgs, &so);

    struct test_client later;
    tap_ok(client_connect(&later, NULL, srv.port) && ping(&later, 42, 4000),
           "a new client connects and is served afterwards");
    client_destroy(&later);
    client_destroy(&good);
    run_for(200);
    server_stop(&srv);
    tap_no_plan_end();
    return tap_exit_status();
}
