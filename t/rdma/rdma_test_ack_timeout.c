/* t/rdma/rdma_test_ack_timeout.c: the RC ACK timeout a context sets on its
 * connections (rdma/ctx.h, ack_timeout; the server's -o rdma_ack_timeout
 * and the client library's LIBMEMCACHED_RDMA_ACK_TIMEOUT), inside the
 * Soft-RoCE guest:
 * - contexts with ack_timeout 16 on both ends: both queue pairs report
 *   16 (ibv_query_qp), and messages go both ways;
 * - contexts with the default (0): the RDMA CM's own value stays, which
 *   is not 0 (0 would mean waiting for ever);
 * - a context with 32 (past the field's 5 bits) is refused.
 * Whether a lower timeout recovers losses sooner is shown through tc
 * netem by rdma_test_netem_rc. */
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "rdma/rc_internal.h"
#include "t/rdma/harness.h"

/* The ACK timeout ep's queue pair has; -1 when it cannot be read. */
static int qp_ack_timeout(struct mcr_rdma_ep *ep)
{
    if (ep == NULL)
        return -1;
    struct ibv_qp_attr attr;
    struct ibv_qp_init_attr init;
    if (ibv_query_qp(rc_from_ep(ep)->qp, &attr, IBV_QP_TIMEOUT, &init) != 0)
        return -1;
    return attr.timeout;
}

/* A server and a client, both with ack_timeout; the two queue pairs'
 * timeouts in got (server, client); whether a ping went both ways. */
static bool connect_with(uint8_t ack_timeout, int got[2])
{
    struct mcr_rdma_ctx_opts so, co;
    test_opts(&so);
    so.ack_timeout = ack_timeout;
    test_opts(&co);
    co.ack_timeout = ack_timeout;
    struct test_server srv;
    server_start(&srv, &so);
    struct test_client c;
    bool up = client_connect(&c, &co, srv.port);
    bool pinged = up && ping(&c, 1, 100) && ping(&c, 2, 4000);
    got[0] = qp_ack_timeout(srv.last_ep);
    got[1] = qp_ack_timeout(c.ep);
    if (!up)
        tap_diag("ack_timeout %u: no connection: %s", ack_timeout, c.close_why);
    client_destroy(&c);
    server_stop(&srv);
    return pinged;
}

int main(void)
{
    int got[2];
    bool pinged = connect_with(16, got);
    tap_ok(pinged && got[0] == 16 && got[1] == 16,
           "ack_timeout 16: the server's and the client's queue pairs have 16 (%d, %d), and "
           "messages went both ways (%s)",
           got[0], got[1], pinged ? "yes" : "no");

    pinged = connect_with(0, got);
    tap_ok(pinged && got[0] > 0 && got[1] > 0,
           "ack_timeout 0: the RDMA CM's own value stays (server %d, client %d: 4.096 us times "
           "2^N), and messages went both ways (%s)",
           got[0], got[1], pinged ? "yes" : "no");

    struct mcr_rdma_ctx_opts bad;
    test_opts(&bad);
    bad.ack_timeout = 32;
    char err[256] = "";
    struct mcr_rdma_ctx *ctx = mcr_rdma_ctx_create(&bad, err, sizeof(err));
    tap_ok(ctx == NULL && strstr(err, "invalid") != NULL,
           "ack_timeout 32 (past 5 bits): the context is refused (%s)", err);
    if (ctx != NULL)
        mcr_rdma_ctx_destroy(ctx);
    tap_no_plan_end();
    return tap_exit_status();
}
