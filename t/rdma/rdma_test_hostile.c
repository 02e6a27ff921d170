/* t/rdma/rdma_test_hostile.c: libmemcached-rdma against a hostile server
 * written on the rdma/ substrate. The server answers an iget into a
 * caller's 1 MiB buffer with an RNDV_DONE | VALUE that claims the whole
 * buffer while the reply's header says the value is 10 bytes: the rest of
 * the buffer would stay in the client's input after the request completed
 * and its buffer went back to the caller. The client must end the stream
 * there instead of reading the caller's (here unmapped) memory later: the
 * request completes with its 10 bytes, the next call fails cleanly, and
 * the client process does not crash. Runs in the guest. */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "include/mcr/binary_wire.h"
#include "t/rdma/harness.h"
#include "t/rdma/proc.h"

#define VALUE_BUF (1u << 20)
#define CLAIMED_VALUE 10

/* ---- the hostile server (a child process) ---------------------------------------- */
/* What it writes into an iget's buffer: the 10-byte value, then binary
 * frames a client skips (errors of quiet gets), so the extra bytes parse
 * cleanly and part of them is still unread when the iget completes. */
static unsigned char pattern[VALUE_BUF] __attribute__((aligned(4096)));
static struct mcr_rdma_region pattern_region;

static void fill_pattern_frames(void)
{
    memset(pattern, 'v', CLAIMED_VALUE);
    for (size_t at = CLAIMED_VALUE; at + MCR_BIN_HEADER_LEN <= VALUE_BUF;
         at += MCR_BIN_HEADER_LEN) {
        unsigned char *f = pattern + at;
        f[0] = MCR_BIN_MAGIC_RESPONSE;
        f[1] = MCR_BIN_OP_GETQ;
        f[7] = MCR_BIN_STATUS_KEY_ENOENT;
    }
}

struct pending_done {
    uint32_t request_id, len;
};

static void send_value_done(struct mcr_rdma_ep *ep, uint32_t request_id, uint32_t written)
{
    /* the count claims all it wrote; the header it carries (a GET reply:
     * flags, then a 10-byte value) claims 10 bytes of it */
    unsigned char payload[4 + MCR_BIN_HEADER_LEN + 4] = {0};
    uint32_t n = htole32(written);
    memcpy(payload, &n, 4);
    unsigned char *h = payload + 4;
    h[0] = MCR_BIN_MAGIC_RESPONSE;
    h[1] = MCR_BIN_OP_GET;
    h[4] = 4; /* extras: the flags */
    uint32_t body = htonl(4 + CLAIMED_VALUE), opaque = htonl(request_id);
    memcpy(h + 8, &body, 4);
    memcpy(h + 12, &opaque, 4);
    struct iovec iov = {payload, sizeof(payload)};
    struct mcr_rdma_send s = {.type = MCR_RDMA_MSG_EAGER,
                              .flags = MCR_RDMA_F_RNDV_DONE | MCR_RDMA_F_VALUE,
                              .request_id = request_id,
                              .iov = &iov,
                              .iovcnt = 1};
    mcr_rdma_ep_send(ep, &s);
}

static void hostile_on_rdma_done(struct mcr_rdma_ep *ep, void *cookie, int status, void *user)
{
    (void)user;
    struct pending_done *p = cookie;
    if (status == 0)
        send_value_done(ep, p->request_id, p->len);
    free(p);
}

static void hostile_on_message(struct mcr_rdma_ep *ep, const struct mcr_rdma_msg *msg, void *user)
{
    (void)user;
    if (msg->type != MCR_RDMA_MSG_RNDV_WRITE || msg->flags != MCR_RDMA_F_VALUE)
        return; /* landing buffers, other requests: no answer */
    struct pending_done *p = malloc(sizeof(*p));
    *p = (struct pending_done){msg->request_id,
                               msg->rndv.len < VALUE_BUF ? msg->rndv.len : VALUE_BUF};
    if (mcr_rdma_ep_rdma_write(ep, &msg->rndv, 0, pattern, pattern_region.mr, p->len, p) != 0)
        free(p);
}

static int hostile_accept(struct mcr_rdma_listener *l, struct mcr_rdma_ep *ep, void *user)
{
    (void)l;
    static const struct mcr_rdma_ep_callbacks cb = {.on_message = hostile_on_message,
                                                    .on_rdma_done = hostile_on_rdma_done};
    mcr_rdma_ep_set_callbacks(ep, &cb, user);
    return 0;
}

static void hostile_server(int port_fd)
{
    struct mcr_rdma_ctx_opts o;
    test_opts(&o);
    struct mcr_rdma_ctx *ctx = make_ctx(&o);
    fill_pattern_frames();
    if (mcr_rdma_region_register(mcr_rdma_ctx_pd(ctx), pattern, sizeof(pattern),
                                 MCR_RDMA_ACCESS_LOCAL, &pattern_region) != 0)
        _exit(1);
    struct mcr_rdma_listener *l;
    if (mcr_rdma_rc_listen(ctx, rxe_addr(), 0, 8, hostile_accept, NULL, &l) != 0)
        _exit(1);
    uint16_t port = mcr_rdma_listener_port(l);
    if (write(port_fd, &port, sizeof(port)) != (ssize_t)sizeof(port))
        _exit(1);
    for (uint64_t until = now_ms() + 120000; now_ms() < until;) /* killed long before */
        mcr_rdma_ctx_progress(ctx, 50);
    _exit(0);
}

/* ---- the client (a child process: a crash must not end the test) ------------------ */
enum {
    CLIENT_OK = 0,
    FIRST_WRONG = 10,
    SECOND_SUCCEEDED = 11,
    NO_BUFFER = 12,
    SECOND_NOT_CLOSED = 13, /* failed, but not for the ended stream (a timeout?) */
    SECOND_SLOW = 14,
};

static int client_process(uint16_t port)
{
    char cfg[128];
    snprintf(cfg, sizeof(cfg), "--SERVER=rdma://%s:%u", rxe_addr(), port);
    memcached_st *m = memcached(cfg, strlen(cfg));
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 2000);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 0);
    char *buf = mmap(NULL, VALUE_BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        return NO_BUFFER;
    memcached_request_st *req = memcached_request_create(m);
    memcached_iget(m, "key", 3, buf, VALUE_BUF, req);
    memcached_return_t rc = memcached_wait(m, req);
    size_t len = 0;
    const char *v = memcached_request_value(req, &len);
    bool first_ok = rc == MEMCACHED_SUCCESS && v == buf && len == CLAIMED_VALUE;
    memcached_request_free(req);
    munmap(buf, VALUE_BUF); /* the caller's buffer is the caller's again */
    /* the next call must not read the stream from the unmapped buffer: the
     * stream ended, so it fails at once for the connection (writing to it,
     * or finding it closed), not after the 2 s poll timeout (this server
     * answers no get) */
    uint64_t t0 = now_ms();
    char *got = memcached_get(m, "next", 4, &len, &(uint32_t){0}, &rc);
    uint64_t took = now_ms() - t0;
    printf("# the next call: %s after %llu ms\n", memcached_strerror(m, rc),
           (unsigned long long)took);
    fflush(stdout);
    free(got);
    memcached_free(m);
    if (!first_ok)
        return FIRST_WRONG;
    if (rc == MEMCACHED_SUCCESS)
        return SECOND_SUCCEEDED;
    if (rc != MEMCACHED_CONNECTION_FAILURE && rc != MEMCACHED_WRITE_FAILURE)
        return SECOND_NOT_CLOSED;
    return took < 1000 ? CLIENT_OK : SECOND_SLOW;
}

int main(void)
{
    int fds[2];
    if (pipe(fds) != 0)
        tap_bail("pipe: %s", strerror(errno));
    pid_t server = proc_fork();
    if (server == 0) {
        close(fds[0]);
        hostile_server(fds[1]);
    }
    close(fds[1]);
    uint16_t port = 0;
    if (read(fds[0], &port, sizeof(port)) != (ssize_t)sizeof(port) || port == 0) {
        kill(server, SIGKILL);
        tap_bail("the hostile server did not start");
    }
    close(fds[0]);
    tap_diag("hostile server listens on %s port %u", rxe_addr(), port);

    pid_t client = proc_fork();
    if (client == 0)
        _exit(client_process(port));
    int ws = proc_reap(client, 60000);
    kill(server, SIGKILL);
    proc_reap(server, 10000);
    bool crashed = ws == -1 || WIFSIGNALED(ws);
    int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
    tap_ok(!crashed,
           "the client does not crash when the server claims more of an iget buffer "
           "than the reply uses (%s %d)",
           crashed ? "signal" : "exit",
           ws == -1  ? -1
           : crashed ? WTERMSIG(ws)
                     : code);
    tap_ok(code == CLIENT_OK,
           "the iget completes with the 10 bytes its header names, and the next call fails at "
           "once for the ended connection instead of reading the released buffer (exit %d)",
           code);
    tap_no_plan_end();
    return tap_exit_status();
}
