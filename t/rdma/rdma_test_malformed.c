/* t/rdma/rdma_test_malformed.c: hand-written malformed messages (bad magic,
 * bad version, truncated headers, unknown type and flags, credits never
 * used, a credit message with payload, descriptor abuse, bad rkey, a message
 * longer than the receive buffers) each close only the connection that sent
 * them: the server frees it and keeps serving a well-behaved client. Runs in
 * the guest. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "t/rdma/harness.h"

static struct test_server srv;
static uint32_t so_buf_size;
static struct test_client good;
static unsigned char target[4096] __attribute__((aligned(4096)));

struct bad_case {
    const char *name;
    struct mcr_rdma_hdr hdr;
    uint32_t send_len;        /* bytes actually sent */
    bool bad_rkey;            /* fill in a real address and a wrong rkey */
    uint32_t client_buf_size; /* 0: default */
};

static struct mcr_rdma_hdr hdr(uint8_t type)
{
    return (struct mcr_rdma_hdr){
        .magic = MCR_RDMA_MAGIC, .version = MCR_RDMA_VERSION, .type = type, .request_id = 1};
}

static bool server_back_to_one(void *arg)
{
    (void)arg;
    struct mcr_rdma_ctx_stats st;
    mcr_rdma_ctx_stats(srv.ctx, &st);
    return st.endpoints == 1;
}

static void run_case(struct bad_case *bc, uint32_t seq)
{
    struct test_client bad;
    struct mcr_rdma_ctx_opts co;
    test_opts(&co);
    if (bc->client_buf_size)
        co.buf_size = bc->client_buf_size;
    if (!client_connect(&bad, &co, srv.port)) {
        tap_ok(0, "%s: connect", bc->name);
        client_destroy(&bad);
        return;
    }
    struct mcr_rdma_ctx_stats before;
    mcr_rdma_ctx_stats(srv.ctx, &before);
    struct ibv_mr *mr = NULL;
    if (bc->bad_rkey) {
        struct mcr_rdma_region region;
        if (mcr_rdma_region_register(mcr_rdma_ctx_pd(bad.ctx), target, sizeof(target),
                                     MCR_RDMA_ACCESS_REMOTE_READ, &region) == 0)
            mr = region.mr;
        bc->hdr.rndv_addr = (uintptr_t)target;
        bc->hdr.rndv_len = sizeof(target);
        bc->hdr.rndv_rkey = mr ? mr->rkey ^ 0x00a5a500u : 0x1234;
    }
    if (bc->client_buf_size)
        tap_ok(mcr_rdma_ep_max_eager_payload(bad.ep) == so_buf_size - MCR_RDMA_HDR_MAX,
               "%s: eager limit follows the peer's smaller buffers", bc->name);
    unsigned char msg[16384];
    memset(msg, 0x5c, sizeof(msg));
    mcr_rdma_hdr_encode(&bc->hdr, msg);
    int rc = mcr_rdma_rc_send_raw(bad.ep, msg, bc->send_len);
    bool closed = rc == 0 && run_until(client_closed, &bad, 15000);
    bool server_freed = run_until(server_back_to_one, NULL, 15000);
    struct mcr_rdma_ctx_stats after;
    mcr_rdma_ctx_stats(srv.ctx, &after);
    bool wc_error = bc->bad_rkey || bc->client_buf_size;
    bool counted =
        wc_error ? after.wc_errors > before.wc_errors : after.malformed == before.malformed + 1;
    tap_ok(closed && server_freed && counted,
           "%s: that connection closed (%s), server freed it, %s counted", bc->name, bad.close_why,
           wc_error ? "completion error" : "malformed message");
    tap_ok(ping(&good, 70000 + seq, 500), "%s: the other client is still served", bc->name);
    if (mr != NULL)
        ibv_dereg_mr(mr);
    client_destroy(&bad);
}

int main(void)
{
    struct mcr_rdma_ctx_opts so;
    test_opts(&so);
    server_start(&srv, &so);
    so_buf_size = so.buf_size;
    if (!client_connect(&good, NULL, srv.port))
        tap_bail("good client could not connect");
    tap_ok(ping(&good, 1, 100), "well-behaved client served");

    const uint32_t base = MCR_RDMA_HDR_BASE, rndv = MCR_RDMA_HDR_RNDV;
    struct bad_case cases[] = {
        {"bad magic", hdr(MCR_RDMA_MSG_EAGER), base + 16, false, 0},
        {"bad version", hdr(MCR_RDMA_MSG_EAGER), base + 16, false, 0},
        {"truncated header", hdr(MCR_RDMA_MSG_EAGER), base - 4, false, 0},
        {"rendezvous cut inside its descriptor", hdr(MCR_RDMA_MSG_RNDV_READ), rndv - 8, false, 0},
        {"unknown type", hdr(77), base, false, 0},
        {"unknown flags", hdr(MCR_RDMA_MSG_EAGER), base + 8, false, 0},
        {"credits never used", hdr(MCR_RDMA_MSG_EAGER), base, false, 0},
        {"credit message with payload", hdr(MCR_RDMA_MSG_CREDIT), base + 8, false, 0},
        {"rendezvous beyond the size limit", hdr(MCR_RDMA_MSG_RNDV_READ), rndv, false, 0},
        {"rendezvous with a bad rkey", hdr(MCR_RDMA_MSG_RNDV_READ), rndv, true, 0},
        {"message longer than the receive buffers", hdr(MCR_RDMA_MSG_EAGER), base + 12000, false,
         16384},
    };
    cases[0].hdr.magic = 0x1234;
    cases[1].hdr.version = 1; /* the 32-byte header's */
    cases[3].hdr.rndv_addr = (uintptr_t)target;
    cases[3].hdr.rndv_rkey = 1;
    cases[3].hdr.rndv_len = 16;
    cases[5].hdr.flags = 0x0100;
    cases[6].hdr.credits = 5;
    cases[8].hdr.rndv_addr = (uintptr_t)target;
    cases[8].hdr.rndv_rkey = 1;
    cases[8].hdr.rndv_len = 1u << 31;
    unsigned malformed = 0; /* cases the server must count as malformed messages */
    for (uint32_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        malformed += !cases[i].bad_rkey && !cases[i].client_buf_size;
    for (uint32_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        run_case(&cases[i], i);

    struct mcr_rdma_ctx_stats st;
    mcr_rdma_ctx_stats(srv.ctx, &st);
    tap_ok(st.malformed == malformed && st.endpoints == 1 && st.granted_credits == so.credits &&
               st.recv_posted >= so.credits && st.recv_deferred == 0 &&
               st.recv_posted + st.recv_bufs_free == so.recv_bufs,
           "server: %u malformed (of %u), 1 endpoint left, credits %u, receives %u posted + %u "
           "free of %u",
           (unsigned)st.malformed, malformed, st.granted_credits, st.recv_posted, st.recv_bufs_free,
           so.recv_bufs);
    client_destroy(&good);
    run_for(200);
    server_stop(&srv);
    tap_no_plan_end();
    return tap_exit_status();
}
