/* t/rdma/rdma_test_hostile.c: libmemcached-rdma against hostile servers
 * written on the rdma/ substrate. Runs in the guest.
 *
 * A claiming server answers an iget into a caller's 1 MiB buffer with an
 * RNDV_DONE | VALUE that claims the whole buffer while the reply's header
 * says the value is 10 bytes: the rest of the buffer would stay in the
 * client's input after the request completed and its buffer went back to
 * the caller. The client must end the stream there instead of reading the
 * caller's (here unmapped) memory later: the request completes with its 10
 * bytes, the next call fails cleanly, and the client process does not
 * crash.
 *
 * A snooping server uses the regions the client advertised after their
 * transfers ended (the landing buffer, the request buffer, a completed
 * iget's buffer, its registration cached): every such RDMA READ or WRITE
 * must fail with a remote access error and leave the client's memory as
 * it was, with memory windows and with registrations per transfer. */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
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
    snprintf(cfg, sizeof(cfg), "--SERVER=rdma://%s:%u --BINARY-PROTOCOL", rxe_addr(), port);
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

/* ---- a server that reaches outside the transfers it was offered --------------------- */
/* It serves what the client asks in the ordinary way (a get by RDMA WRITE
 * into the landing buffer, an iget's value into the caller's buffer, a
 * large set by RDMA READ of the request region), remembering every region
 * advertised. Then, asked for the key "attack-land", "attack-src" or
 * "attack-iget", it uses the region the client advertised first of that
 * kind, whose transfer is over: an RDMA WRITE into the landing buffer, an
 * RDMA READ of the request buffer (it held the set's value), an RDMA
 * WRITE into the iget's buffer (the caller's again). It reports each
 * attack's outcome on a pipe: "TARGET STATUS REASON LEAKED" (STATUS the
 * operation's, REASON the connection's close reason, -EACCES for a remote
 * access error; LEAKED 1 when a READ returned the set's bytes; KEYS how the
 * landing buffer's second advertised rkey relates to its first: "window"
 * for the same window under a new key (same index, rkey >> 8), "new" for
 * another index, "same" for the same rkey). */
#define SNOOP_VALUE 20000u
#define SNOOP_PROBE 64u

enum snoop_target { SNOOP_NONE, SNOOP_LAND, SNOOP_SRC, SNOOP_IGET };
static const char *const snoop_names[] = {"none", "land", "src", "iget"};

static struct {
    int report_fd;
    struct mcr_rdma_region local; /* what it writes from and reads into */
    unsigned char *buf;
    /* per connection */
    unsigned char in[65536];
    size_t in_len;
    struct mcr_rdma_rndv land_first, land_second, land_cur, src_first, vbuf_first, vbuf_cur;
    uint32_t land_cur_id, vbuf_cur_opaque, land_ads;
    bool land_seen, land_usable, src_seen, vbuf_seen, vbuf_usable;
    bool land_pending; /* a get waits for the landing buffer's next advertisement */
    uint32_t land_pending_opaque;
    enum snoop_target attack;
    int attack_status;
    uint32_t attack_opaque;
} snoop;

struct snoop_op {
    enum { SNOOP_OP_REPLY_WRITE, SNOOP_OP_SET_READ, SNOOP_OP_ATTACK } what;
    uint32_t request_id;
    uint16_t flags;
    uint32_t opaque;
};

static void snoop_send(struct mcr_rdma_ep *ep, uint16_t flags, uint32_t request_id,
                       const void *payload, size_t len)
{
    struct iovec iov = {(void *)payload, len};
    struct mcr_rdma_send s = {.type = MCR_RDMA_MSG_EAGER,
                              .flags = flags,
                              .request_id = request_id,
                              .iov = &iov,
                              .iovcnt = len > 0};
    mcr_rdma_ep_send(ep, &s);
}

static void snoop_reply(struct mcr_rdma_ep *ep, uint8_t opcode, uint16_t status, uint32_t opaque)
{
    unsigned char h[MCR_BIN_HEADER_LEN];
    mcr_bin_response_encode(h, opcode, status, 0, 0, 0, opaque, 0);
    snoop_send(ep, 0, 0, h, sizeof(h));
}

static void snoop_report(int reason)
{
    char line[96];
    bool leaked = snoop.attack == SNOOP_SRC && snoop.attack_status == 0 &&
                  snoop.buf[SNOOP_VALUE] == 'S' && snoop.buf[SNOOP_VALUE + SNOOP_PROBE - 1] == 'S';
    uint32_t first = snoop.land_first.rkey, now = snoop.land_second.rkey;
    const char *keys = first == now ? "same" : first >> 8 == now >> 8 ? "window" : "new";
    int n = snprintf(line, sizeof(line), "%s %d %d %d %s\n", snoop_names[snoop.attack],
                     snoop.attack_status, reason, leaked, keys);
    if (write(snoop.report_fd, line, (size_t)n) != n)
        _exit(1);
    snoop.attack = SNOOP_NONE;
}

/* A get's value by WRITE, then the RNDV_DONE that carries its header. */
static void snoop_write_value(struct mcr_rdma_ep *ep, const struct mcr_rdma_rndv *to, char fill,
                              uint16_t flags, uint32_t request_id, uint32_t opaque)
{
    memset(snoop.buf, fill, SNOOP_VALUE);
    struct snoop_op *op = malloc(sizeof(*op));
    *op = (struct snoop_op){SNOOP_OP_REPLY_WRITE, request_id, flags, opaque};
    if (mcr_rdma_ep_rdma_write(ep, to, 0, snoop.buf, snoop.local.mr, SNOOP_VALUE, op) != 0)
        free(op);
}

static void snoop_get(struct mcr_rdma_ep *ep, const char *key, size_t keylen, uint32_t opaque)
{
    enum snoop_target attack = SNOOP_NONE;
    const struct mcr_rdma_rndv *target = NULL;
    if (keylen == 4 && memcmp(key, "land", 4) == 0 && !snoop.land_usable) {
        snoop.land_pending = true; /* served when the buffer is advertised again */
        snoop.land_pending_opaque = opaque;
        return;
    }
    if (keylen == 4 && memcmp(key, "land", 4) == 0) {
        snoop.land_usable = false;
        snoop_write_value(ep, &snoop.land_cur, 'L', MCR_RDMA_F_RNDV_DONE, snoop.land_cur_id,
                          opaque);
        return;
    }
    if (keylen == 4 && memcmp(key, "iget", 4) == 0 && snoop.vbuf_usable &&
        snoop.vbuf_cur_opaque == opaque) {
        snoop.vbuf_usable = false;
        snoop_write_value(ep, &snoop.vbuf_cur, 'I', MCR_RDMA_F_RNDV_DONE | MCR_RDMA_F_VALUE, opaque,
                          opaque);
        return;
    }
    if (keylen == 11 && memcmp(key, "attack-land", 11) == 0 && snoop.land_seen) {
        attack = SNOOP_LAND;
        target = &snoop.land_first;
    } else if (keylen == 10 && memcmp(key, "attack-src", 10) == 0 && snoop.src_seen) {
        attack = SNOOP_SRC;
        target = &snoop.src_first;
    } else if (keylen == 11 && memcmp(key, "attack-iget", 11) == 0 && snoop.vbuf_seen) {
        attack = SNOOP_IGET;
        target = &snoop.vbuf_first;
    }
    if (attack == SNOOP_NONE) {
        snoop_reply(ep, MCR_BIN_OP_GET, MCR_BIN_STATUS_KEY_ENOENT, opaque);
        return;
    }
    snoop.attack = attack;
    snoop.attack_opaque = opaque;
    memset(snoop.buf + SNOOP_VALUE, 'X', SNOOP_PROBE);
    struct snoop_op *op = malloc(sizeof(*op));
    *op = (struct snoop_op){SNOOP_OP_ATTACK, 0, 0, opaque};
    int rc = attack == SNOOP_SRC ? mcr_rdma_ep_rdma_read(ep, target, 0, snoop.buf + SNOOP_VALUE,
                                                         snoop.local.mr, SNOOP_PROBE, op)
                                 : mcr_rdma_ep_rdma_write(ep, target, 0, snoop.buf + SNOOP_VALUE,
                                                          snoop.local.mr, SNOOP_PROBE, op);
    if (rc != 0) {
        free(op);
        snoop.attack_status = rc;
        snoop_report(0);
    }
}

/* Serves the complete request frames in the stream. */
static void snoop_parse(struct mcr_rdma_ep *ep)
{
    size_t at = 0;
    while (snoop.in_len - at >= MCR_BIN_HEADER_LEN) {
        struct mcr_bin_header h;
        mcr_bin_header_decode(snoop.in + at, &h);
        if (snoop.in_len - at < MCR_BIN_HEADER_LEN + h.bodylen)
            break;
        const char *key = (const char *)snoop.in + at + MCR_BIN_HEADER_LEN + h.extlen;
        if (h.opcode == MCR_BIN_OP_GET)
            snoop_get(ep, key, h.keylen, h.opaque);
        else if (h.opcode != MCR_BIN_OP_GETKQ && h.opcode != MCR_BIN_OP_GETQ)
            snoop_reply(ep, h.opcode, 0, h.opaque); /* noop, a set in the stream: done */
        at += MCR_BIN_HEADER_LEN + h.bodylen;
    }
    memmove(snoop.in, snoop.in + at, snoop.in_len - at);
    snoop.in_len -= at;
}

static void snoop_on_message(struct mcr_rdma_ep *ep, const struct mcr_rdma_msg *msg, void *user)
{
    (void)user;
    if (msg->flags == MCR_RDMA_F_CONTROL)
        return; /* an rdma:// client's HELLO: this server moves nobody */
    if (msg->type == MCR_RDMA_MSG_RNDV_WRITE && msg->flags == 0) {
        if (snoop.land_ads == 0)
            snoop.land_first = msg->rndv;
        else if (snoop.land_ads == 1)
            snoop.land_second = msg->rndv;
        snoop.land_ads++;
        snoop.land_seen = snoop.land_usable = true;
        snoop.land_cur = msg->rndv;
        snoop.land_cur_id = msg->request_id;
        if (snoop.land_pending) {
            snoop.land_pending = false;
            snoop_get(ep, "land", 4, snoop.land_pending_opaque);
        }
    } else if (msg->type == MCR_RDMA_MSG_RNDV_WRITE && msg->flags == MCR_RDMA_F_VALUE) {
        if (!snoop.vbuf_seen)
            snoop.vbuf_first = msg->rndv;
        snoop.vbuf_seen = snoop.vbuf_usable = true;
        snoop.vbuf_cur = msg->rndv;
        snoop.vbuf_cur_opaque = msg->request_id;
    } else if (msg->type == MCR_RDMA_MSG_RNDV_READ) {
        /* a large set: its head is the payload, the region its value */
        if (msg->payload_len < MCR_BIN_HEADER_LEN || msg->rndv.len > SNOOP_VALUE) {
            mcr_rdma_ep_abort(ep);
            return;
        }
        struct mcr_bin_header h;
        mcr_bin_header_decode(msg->payload, &h);
        if (!snoop.src_seen)
            snoop.src_first = msg->rndv;
        snoop.src_seen = true;
        struct snoop_op *op = malloc(sizeof(*op));
        *op = (struct snoop_op){SNOOP_OP_SET_READ, msg->request_id, 0, h.opaque};
        if (mcr_rdma_ep_rdma_read(ep, &msg->rndv, 0, snoop.buf, snoop.local.mr, msg->rndv.len,
                                  op) != 0)
            free(op);
        return;
    }
    if (msg->payload_len > sizeof(snoop.in) - snoop.in_len) {
        mcr_rdma_ep_abort(ep);
        return;
    }
    memcpy(snoop.in + snoop.in_len, msg->payload, msg->payload_len);
    snoop.in_len += msg->payload_len;
    snoop_parse(ep);
}

static void snoop_on_rdma_done(struct mcr_rdma_ep *ep, void *cookie, int status, void *user)
{
    (void)user;
    struct snoop_op *op = cookie;
    if (op->what == SNOOP_OP_ATTACK) {
        snoop.attack_status = status;
        if (status == 0) { /* it worked: the client gets a miss */
            snoop_report(0);
            snoop_reply(ep, MCR_BIN_OP_GET, MCR_BIN_STATUS_KEY_ENOENT, op->opaque);
        }
    } else if (status == 0 && op->what == SNOOP_OP_SET_READ) {
        unsigned char h[MCR_BIN_HEADER_LEN];
        mcr_bin_response_encode(h, MCR_BIN_OP_SET, 0, 0, 0, 0, op->opaque, 1);
        snoop_send(ep, MCR_RDMA_F_READ_DONE, op->request_id, h, sizeof(h));
    } else if (status == 0) {
        unsigned char done[4 + MCR_BIN_HEADER_LEN + 4] = {0};
        uint32_t n = htole32(SNOOP_VALUE);
        memcpy(done, &n, 4);
        mcr_bin_response_encode(done + 4, MCR_BIN_OP_GET, 0, 4, 0, 4 + SNOOP_VALUE, op->opaque, 1);
        snoop_send(ep, op->flags, op->request_id, done, sizeof(done));
    }
    free(op);
}

static void snoop_on_closed(struct mcr_rdma_ep *ep, int reason, const char *why, void *user)
{
    (void)ep;
    (void)why;
    (void)user;
    if (snoop.attack != SNOOP_NONE)
        snoop_report(reason);
}

static int snoop_accept(struct mcr_rdma_listener *l, struct mcr_rdma_ep *ep, void *user)
{
    (void)l;
    static const struct mcr_rdma_ep_callbacks cb = {.on_message = snoop_on_message,
                                                    .on_rdma_done = snoop_on_rdma_done,
                                                    .on_closed = snoop_on_closed};
    int fd = snoop.report_fd;
    struct mcr_rdma_region local = snoop.local;
    unsigned char *buf = snoop.buf;
    memset(&snoop, 0, sizeof(snoop)); /* one connection at a time */
    snoop.report_fd = fd;
    snoop.local = local;
    snoop.buf = buf;
    mcr_rdma_ep_set_callbacks(ep, &cb, user);
    return 0;
}

static void snoop_server(int port_fd, int report_fd)
{
    struct mcr_rdma_ctx_opts o;
    test_opts(&o);
    struct mcr_rdma_ctx *ctx = make_ctx(&o);
    snoop.report_fd = report_fd;
    snoop.buf = pattern; /* this process serves no other scenario */
    if (mcr_rdma_region_register(mcr_rdma_ctx_pd(ctx), pattern, sizeof(pattern),
                                 MCR_RDMA_ACCESS_LOCAL, &snoop.local) != 0)
        _exit(1);
    struct mcr_rdma_listener *l;
    if (mcr_rdma_rc_listen(ctx, rxe_addr(), 0, 8, snoop_accept, NULL, &l) != 0)
        _exit(1);
    uint16_t port = mcr_rdma_listener_port(l);
    if (write(port_fd, &port, sizeof(port)) != (ssize_t)sizeof(port))
        _exit(1);
    for (uint64_t until = now_ms() + 240000; now_ms() < until;) /* killed long before */
        mcr_rdma_ctx_progress(ctx, 50);
    _exit(0);
}

/* One connection: a legitimate transfer of the target's kind, then the
 * request that makes the server attack. Exit status: 0, or what went
 * wrong. */
enum { SNOOP_OK = 0, SNOOP_LEGIT_FAILED = 20, SNOOP_BUFFER_CHANGED = 21, SNOOP_NO_MEMORY = 22 };

static int snoop_client(uint16_t port, enum snoop_target target)
{
    char cfg[128];
    snprintf(cfg, sizeof(cfg), "--SERVER=rdma://%s:%u --BINARY-PROTOCOL", rxe_addr(), port);
    memcached_st *m = memcached(cfg, strlen(cfg));
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 3000);
    memcached_return_t rc;
    size_t len = 0;
    bool legit = false;
    char *ibuf = NULL;
    if (target == SNOOP_LAND) { /* twice: the second after the buffer's next advertisement */
        legit = true;
        for (int i = 0; i < 2; i++) {
            char *v = memcached_get(m, "land", 4, &len, &(uint32_t){0}, &rc);
            legit &= rc == MEMCACHED_SUCCESS && len == SNOOP_VALUE && v[0] == 'L' &&
                     v[SNOOP_VALUE - 1] == 'L';
            free(v);
        }
    } else if (target == SNOOP_SRC) {
        char *value = malloc(SNOOP_VALUE);
        if (value == NULL)
            return SNOOP_NO_MEMORY;
        memset(value, 'S', SNOOP_VALUE);
        rc = memcached_set(m, "big", 3, value, SNOOP_VALUE, 0, 0);
        legit = rc == MEMCACHED_SUCCESS;
        free(value);
    } else {
        ibuf = malloc(4 * SNOOP_VALUE);
        if (ibuf == NULL)
            return SNOOP_NO_MEMORY;
        memcached_request_st *req = memcached_request_create(m);
        memcached_iget(m, "iget", 4, ibuf, 4 * SNOOP_VALUE, req);
        rc = memcached_wait(m, req);
        const char *v = memcached_request_value(req, &len);
        legit = rc == MEMCACHED_SUCCESS && v == ibuf && len == SNOOP_VALUE && v[0] == 'I' &&
                v[SNOOP_VALUE - 1] == 'I';
        memcached_request_free(req); /* the buffer is the caller's again */
    }
    char key[16];
    snprintf(key, sizeof(key), "attack-%s", snoop_names[target]);
    free(memcached_get(m, key, strlen(key), &len, &(uint32_t){0}, &rc));
    printf("# %s: the legitimate transfer %s; the request after it: %s\n", snoop_names[target],
           legit ? "worked" : "FAILED", memcached_strerror(m, rc));
    fflush(stdout);
    bool changed = false;
    if (ibuf != NULL) {
        for (size_t i = 0; i < SNOOP_PROBE; i++)
            changed |= ibuf[i] != 'I';
        free(ibuf);
    }
    memcached_free(m);
    return !legit ? SNOOP_LEGIT_FAILED : changed ? SNOOP_BUFFER_CHANGED : SNOOP_OK;
}

/* Reads one report line of the server (at most 20 s). */
static bool snoop_read_report(int fd, char *line, size_t cap)
{
    size_t n = 0;
    uint64_t until = now_ms() + 20000;
    while (n + 1 < cap && now_ms() < until) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        if (read(fd, line + n, 1) != 1)
            return false;
        if (line[n] == '\n') {
            line[n] = '\0';
            return true;
        }
        n++;
    }
    return false;
}

static void snoop_scenario(const char *mode, bool windows)
{
    int port_pipe[2], report_pipe[2];
    if (pipe(port_pipe) != 0 || pipe(report_pipe) != 0)
        tap_bail("pipe: %s", strerror(errno));
    pid_t server = proc_fork();
    if (server == 0) {
        close(port_pipe[0]);
        close(report_pipe[0]);
        snoop_server(port_pipe[1], report_pipe[1]);
    }
    close(port_pipe[1]);
    close(report_pipe[1]);
    uint16_t port = 0;
    if (read(port_pipe[0], &port, sizeof(port)) != (ssize_t)sizeof(port) || port == 0) {
        kill(server, SIGKILL);
        tap_bail("the snooping server did not start");
    }
    close(port_pipe[0]);
    for (enum snoop_target t = SNOOP_LAND; t <= SNOOP_IGET; t++) {
        pid_t client = proc_fork();
        if (client == 0)
            _exit(snoop_client(port, t));
        int ws = proc_reap(client, 60000);
        int code = ws != -1 && WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
        char line[96] = "";
        char name[16] = "", keys[16] = "";
        int status = 1, reason = 0, leaked = 0;
        bool reported =
            snoop_read_report(report_pipe[0], line, sizeof(line)) &&
            sscanf(line, "%15s %d %d %d %15s", name, &status, &reason, &leaked, keys) == 5;
        const char *what = t == SNOOP_LAND  ? "an RDMA WRITE into the landing buffer"
                           : t == SNOOP_SRC ? "an RDMA READ of the request buffer"
                                            : "an RDMA WRITE into a completed iget's buffer";
        tap_ok(code == SNOOP_OK || code == SNOOP_BUFFER_CHANGED,
               "%s: the legitimate %s transfer works (client exit %d)", mode, snoop_names[t], code);
        tap_ok(reported && status != 0 && reason == -EACCES,
               "%s: %s with the rkey of a finished transfer fails with a remote access error "
               "(report '%s')",
               mode, what, line);
        if (t == SNOOP_LAND)
            tap_ok(reported && strcmp(keys, windows ? "window" : "new") == 0,
                   "%s: the landing buffer is advertised again under %s (%s)", mode,
                   windows ? "a new key of the same window" : "a new registration", keys);
        if (t == SNOOP_SRC)
            tap_ok(reported && !leaked, "%s: the server did not read the set's bytes back", mode);
        if (t == SNOOP_IGET)
            tap_ok(code == SNOOP_OK, "%s: the caller's buffer is unchanged", mode);
    }
    kill(server, SIGKILL);
    proc_reap(server, 10000);
    close(report_pipe[0]);
}

/* The server that claims more of an iget buffer than the reply uses. */
static void claiming_scenario(void)
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
}

int main(void)
{
    claiming_scenario();
    /* iget buffers' registrations cached: a cached registration must not
     * leave a buffer the caller got back open to the server */
    setenv("LIBMEMCACHED_RDMA_REGCACHE", "16", 1);
    snoop_scenario("memory windows", true);
    setenv("LIBMEMCACHED_RDMA_MEMORY_WINDOWS", "0", 1);
    snoop_scenario("registrations per transfer", false);
    tap_no_plan_end();
    return tap_exit_status();
}
