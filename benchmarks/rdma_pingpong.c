/* benchmarks/rdma_pingpong.c: the round trip of the rdma/ substrate alone:
 * eager messages bounced between two processes over one RC connection,
 * both sides busy-polling their completion queues the way memcached-rdma
 * and libmemcached-rdma do (completion events off, no system call while
 * polling but the processor offered, and the deadline checked, after 1,024
 * empty polls in a row). It sits between perftest's ib_send_lat (raw
 * verbs) and a memcached get over RDMA (substrate plus server and client
 * library), so benchmarks/rdma-floor can tell which layer costs what.
 *
 *   rdma_pingpong ADDR [--sizes=N,N,...] [--iterations=N]
 *
 * ADDR is a local address of an RDMA device (inside scripts/rxe-vm: the
 * guest's rxe address). Forks a server (before any verbs resource exists)
 * and prints "SIZE MEDIAN_US" per payload size: the median round trip of
 * a message of SIZE payload bytes there and back, timed like the OHB
 * benchmarks (ohb_clock.c). */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ohb_clock.h"
#include "rdma/ctx.h"
#include "rdma/endpoint.h"
#include "rdma/rc.h"

#define PORT 21399
#define MAX_SIZES 16

struct peer {
    struct mcr_rdma_ep *ep;
    bool connected, closed;
    unsigned received;   /* messages seen */
    unsigned char *echo; /* server: the payload to send back */
    uint32_t echo_len;
};

static void on_connected(struct mcr_rdma_ep *ep, void *user)
{
    (void)ep;
    ((struct peer *)user)->connected = true;
}

static void on_message(struct mcr_rdma_ep *ep, const struct mcr_rdma_msg *msg, void *user)
{
    struct peer *p = user;
    p->received++;
    if (p->echo == NULL)
        return;
    memcpy(p->echo, msg->payload, msg->payload_len);
    struct iovec iov = {p->echo, msg->payload_len};
    struct mcr_rdma_send s = {.type = MCR_RDMA_MSG_EAGER, .iov = &iov, .iovcnt = 1};
    if (mcr_rdma_ep_send(ep, &s) != 0)
        mcr_rdma_ep_close(ep);
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
    (void)why;
    ((struct peer *)user)->closed = true;
}

static const struct mcr_rdma_ep_callbacks callbacks = {on_connected, on_message, on_rdma_done,
                                                       on_closed};

static struct peer server_peer;

static int on_accept(struct mcr_rdma_listener *l, struct mcr_rdma_ep *ep, void *user)
{
    (void)l;
    (void)user;
    server_peer.ep = ep;
    mcr_rdma_ep_set_callbacks(ep, &callbacks, &server_peer);
    return 0;
}

/* Spins on the completion queue as the server's rdma_poll=spin does. */
static void spin_until(struct mcr_rdma_ctx *ctx, const bool *flag, const unsigned *count,
                       unsigned want, double deadline)
{
    unsigned empty = 0;
    for (;;) {
        if ((flag && *flag) || (count && *count >= want))
            return;
        if (mcr_rdma_ctx_poll(ctx) != 0) {
            empty = 0;
        } else if (++empty == 1024) {
            empty = 0;
            if (ohb_now_us() > deadline)
                return;
            sched_yield();
        }
    }
}

static struct mcr_rdma_ctx *context(const char *addr)
{
    struct mcr_rdma_ctx_opts o;
    mcr_rdma_ctx_opts_default(&o);
    o.addr = addr;
    char err[256];
    struct mcr_rdma_ctx *ctx = mcr_rdma_ctx_create(&o, err, sizeof(err));
    if (ctx == NULL) {
        fprintf(stderr, "rdma_pingpong: %s\n", err);
        exit(1);
    }
    return ctx;
}

static int serve(const char *addr)
{
    struct mcr_rdma_ctx *ctx = context(addr);
    struct mcr_rdma_listener *l;
    if (mcr_rdma_rc_listen(ctx, addr, PORT, 4, on_accept, NULL, &l) != 0)
        return 1;
    server_peer.echo = malloc(8192);
    while (!server_peer.connected && !server_peer.closed)
        mcr_rdma_ctx_progress(ctx, 100);
    mcr_rdma_ctx_set_polling(ctx, true);
    double deadline = ohb_now_us() + 600e6;
    while (!server_peer.closed && ohb_now_us() < deadline) {
        spin_until(ctx, &server_peer.closed, NULL, 0, ohb_now_us() + 1e6);
        mcr_rdma_ctx_handle_events(ctx); /* the disconnect */
    }
    free(server_peer.echo);
    mcr_rdma_listener_destroy(l);
    mcr_rdma_ctx_destroy(ctx);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs("usage: rdma_pingpong ADDR [--sizes=N,N,...] [--iterations=N]\n", stderr);
        return 2;
    }
    const char *addr = argv[1];
    unsigned iterations = 1000, nsizes = 0;
    size_t sizes[MAX_SIZES];
    for (int i = 2; i < argc; i++) {
        if (strncmp(argv[i], "--iterations=", 13) == 0) {
            iterations = (unsigned)strtoul(argv[i] + 13, NULL, 10);
        } else if (strncmp(argv[i], "--sizes=", 8) == 0) {
            for (char *p = argv[i] + 8; *p && nsizes < MAX_SIZES; p += *p == ',') {
                sizes[nsizes++] = strtoul(p, &p, 10);
                if (*p != ',' && *p != '\0')
                    break;
            }
        } else {
            fprintf(stderr, "rdma_pingpong: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (nsizes == 0) {
        static const size_t defaults[] = {2, 64, 1024, 4096};
        nsizes = 4;
        memcpy(sizes, defaults, sizeof(defaults));
    }
    if (iterations == 0)
        iterations = 1;
    signal(SIGPIPE, SIG_IGN);
    ohb_clock_calibrate();
    pid_t server = fork();
    if (server == 0)
        _exit(serve(addr));

    struct mcr_rdma_ctx *ctx = context(addr);
    struct peer me = {0};
    int rc = -1;
    for (int attempt = 0; attempt < 50 && !me.connected; attempt++) {
        memset(&me, 0, sizeof(me));
        if (mcr_rdma_rc_connect(ctx, addr, PORT, &callbacks, &me, &me.ep) != 0)
            break;
        while (!me.connected && !me.closed)
            mcr_rdma_ctx_progress(ctx, 100);
        if (!me.connected)
            usleep(200000); /* the server is not listening yet */
    }
    if (me.connected) {
        mcr_rdma_ctx_set_polling(ctx, true);
        size_t max_payload = mcr_rdma_ep_max_eager_payload(me.ep);
        unsigned char *buf = calloc(1, max_payload);
        double *rtt = malloc(iterations * sizeof(*rtt));
        printf("# substrate round trip (eager messages, both sides polling), %u per size, "
               "clock: %s\n",
               iterations, ohb_clock_name());
        printf("# %-10s %14s\n", "Size", "Median(us)");
        rc = 0;
        for (unsigned s = 0; s < nsizes && rc == 0; s++) {
            size_t len = sizes[s] < max_payload ? sizes[s] : max_payload;
            struct iovec iov = {buf, len};
            struct mcr_rdma_send m = {.type = MCR_RDMA_MSG_EAGER, .iov = &iov, .iovcnt = 1};
            for (unsigned i = 0; i < iterations + 20 && rc == 0; i++) { /* 20 warm up */
                unsigned want = me.received + 1;
                double t0 = ohb_now_us();
                if (mcr_rdma_ep_send(me.ep, &m) != 0) {
                    rc = 1;
                    break;
                }
                spin_until(ctx, &me.closed, &me.received, want, t0 + 10e6);
                if (me.received < want)
                    rc = 1;
                else if (i >= 20)
                    rtt[i - 20] = ohb_now_us() - t0;
            }
            if (rc == 0) {
                qsort(rtt, iterations, sizeof(*rtt), cmp_double);
                printf("%-12zu %14.2f\n", len, rtt[iterations / 2]);
                fflush(stdout);
            }
        }
        free(rtt);
        free(buf);
        mcr_rdma_ep_close(me.ep);
        for (int i = 0; i < 50 && !me.closed; i++)
            mcr_rdma_ctx_progress(ctx, 20);
    }
    mcr_rdma_ctx_destroy(ctx);
    int status = 0;
    kill(server, SIGTERM);
    waitpid(server, &status, 0);
    if (rc != 0)
        fprintf(stderr, "rdma_pingpong: %s\n",
                me.connected ? "round trip failed" : "no connection");
    return rc == 0 ? 0 : 1;
}
