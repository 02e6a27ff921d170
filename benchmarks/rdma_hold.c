/* benchmarks/rdma_hold.c: holds many RDMA endpoints open against one
 * memcached-rdma server, for the memory-at-scale half of
 * benchmarks/rdma-ud-vs-rc:
 *   rdma_hold rc|ud ADDR PORT COUNT READY_FILE
 *
 * ud: one UD context with COUNT peers of the server (each a connection on
 * the server, as a memcached_st over rdma+ud:// would be); rc: one RC
 * context with COUNT connections. Once all are set up (or refused) it
 * writes "COUNT_OPEN COUNT_REFUSED" into READY_FILE and keeps driving its
 * context (answering the server's UD keepalive probes) until SIGTERM or
 * ten minutes. Exit status 0 when it held every endpoint it opened. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rdma/ctx.h"
#include "rdma/rc.h"
#include "rdma/ud_ep.h"

static volatile sig_atomic_t stopping;
static long rc_open, rc_closed;

static void on_term(int sig)
{
    (void)sig;
    stopping = 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void ready(const char *file, long open, long refused)
{
    FILE *f = fopen(file, "w");
    if (f) {
        fprintf(f, "%ld %ld\n", open, refused);
        fclose(f);
    }
}

static int hold_ud(const char *addr, uint16_t port, long count, const char *file)
{
    struct mcr_udep_opts o = {.addr = addr};
    mcr_udep_opts_default(&o);
    o.max_peers = (uint32_t)count + 1;
    struct mcr_udep_callbacks cb = {0};
    char err[256];
    struct mcr_udep_ctx *ctx = mcr_udep_open(&o, &cb, NULL, err, sizeof(err));
    if (ctx == NULL) {
        fprintf(stderr, "rdma_hold: %s\n", err);
        return 2;
    }
    long open = 0, refused = 0;
    for (long i = 0; i < count; i++) {
        if (mcr_udep_connect(ctx, addr, port, 10000, err, sizeof(err)) != NULL) {
            open++;
        } else {
            if (refused++ == 0)
                fprintf(stderr, "rdma_hold: peer %ld: %s\n", i, err);
        }
        mcr_udep_poll(ctx, 0);
    }
    ready(file, open, refused);
    double end = now_s() + 600;
    while (!stopping && now_s() < end)
        mcr_udep_poll(ctx, 100);
    struct mcr_udep_stats st;
    mcr_udep_stats(ctx, &st);
    mcr_udep_close(ctx);
    return st.dead_peers == 0 ? 0 : 1;
}

static void on_connected(struct mcr_rdma_ep *ep, void *user)
{
    (void)ep;
    (void)user;
    rc_open++;
}

static void on_message(struct mcr_rdma_ep *ep, const struct mcr_rdma_msg *msg, void *user)
{
    (void)ep;
    (void)msg;
    (void)user;
}

static void on_rdma_done(struct mcr_rdma_ep *ep, void *cookie, int status, void *user)
{
    (void)ep;
    (void)cookie;
    (void)status;
    (void)user;
}

static void on_closed(struct mcr_rdma_ep *ep, int reason, const char *why, void *user)
{
    (void)ep;
    (void)reason;
    (void)user;
    if (rc_closed++ == 0 && !stopping)
        fprintf(stderr, "rdma_hold: an RC connection closed: %s\n", why ? why : "");
}

static int hold_rc(const char *addr, uint16_t port, long count, const char *file)
{
    struct mcr_rdma_ctx_opts o;
    mcr_rdma_ctx_opts_default(&o);
    o.addr = addr;
    o.addr_is_peer = true;
    o.recv_bufs = (uint32_t)(count * o.credits + 64); /* credits for every connection */
    o.send_bufs = 256;
    char err[256];
    struct mcr_rdma_ctx *ctx = mcr_rdma_ctx_create(&o, err, sizeof(err));
    if (ctx == NULL) {
        fprintf(stderr, "rdma_hold: %s\n", err);
        return 2;
    }
    static const struct mcr_rdma_ep_callbacks cb = {on_connected, on_message, on_rdma_done,
                                                    on_closed};
    long started = 0;
    for (long i = 0; i < count; i++) {
        struct mcr_rdma_ep *ep;
        if (mcr_rdma_rc_connect(ctx, addr, port, &cb, NULL, &ep) == 0)
            started++;
        /* a few at a time: the server's listener takes them one by one */
        double give_up = now_s() + 30;
        while (started - rc_open - rc_closed >= 8 && now_s() < give_up)
            mcr_rdma_ctx_progress(ctx, 100);
    }
    double end = now_s() + 120;
    while (rc_open + rc_closed < started && now_s() < end)
        mcr_rdma_ctx_progress(ctx, 100);
    long open = rc_open, refused = count - rc_open;
    ready(file, open, refused);
    end = now_s() + 600;
    while (!stopping && now_s() < end)
        mcr_rdma_ctx_progress(ctx, 100);
    mcr_rdma_ctx_destroy(ctx);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 6 || (strcmp(argv[1], "rc") != 0 && strcmp(argv[1], "ud") != 0)) {
        fprintf(stderr, "usage: rdma_hold rc|ud ADDR PORT COUNT READY_FILE\n");
        return 64;
    }
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    uint16_t port = (uint16_t)atoi(argv[3]);
    long count = atol(argv[4]);
    if (strcmp(argv[1], "ud") == 0)
        return hold_ud(argv[2], port, count, argv[5]);
    return hold_rc(argv[2], port, count, argv[5]);
}
