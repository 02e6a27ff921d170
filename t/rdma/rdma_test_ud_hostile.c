/* t/rdma/rdma_test_ud_hostile.c: a hand-written hostile UD sender against
 * memcached-rdma's UD port, inside the Soft-RoCE guest:
 *   rdma_test_ud_hostile SERVER_BINARY
 *
 * A hostile process with two UD contexts of its own (a peer of the server
 * on each) sends, ROUNDS times each: sequence numbers far outside the
 * window, its first peer's connection id from its second queue pair, a
 * segment length that disagrees with the datagram, a message length beyond
 * the server's largest message, a segment beyond its message, datagrams
 * shorter than a header, a wrong header check, a wrong version, an id no
 * peer has, and an ack of datagrams never sent; and it replays one request
 * it sent (sequence number and all) FLOOD times. Meanwhile a well-behaved
 * UD client and an RC client (processes of their own) set and read back
 * values, byte for byte. The server must answer the replayed request once,
 * count the forgeries in rdma_ud_malformed and the replays in
 * rdma_ud_duplicates, keep serving the hostile sender's own peer, and exit
 * cleanly (the sanitizer build finds no error).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "mcr/ud_wire.h"
#include "rdma/ud_ep.h"
#include "t/rdma/mc_server.h"
#include "t/rdma/mixed_workload.h"
#include "t/rdma/proc.h"
#include "t/rdma/tap.h"

#define ROUNDS 50
#define FORGERY_KINDS 10
#define FLOOD 500
#define GOOD_OPS 300
#define REQUEST "version\r\n"
#define REQUEST_LEN 9u

/* ---- the hostile sender ------------------------------------------------------------- */
static unsigned replies; /* messages from the server on the first peer */

static void on_reply(struct mcr_udep_peer *peer, const void *msg, size_t len, void *user)
{
    (void)user;
    (void)peer;
    if (len >= 8 && memcmp(msg, "VERSION ", 8) == 0)
        replies++;
    else
        fprintf(stderr, "hostile: unexpected reply of %zu bytes\n", len);
}

static struct mcr_udep_ctx *hostile_ctx(unsigned port, struct mcr_udep_peer **peer)
{
    struct mcr_udep_opts o = {.addr = rxe};
    mcr_udep_opts_default(&o);
    struct mcr_udep_callbacks cb = {.on_message = on_reply};
    char err[256];
    struct mcr_udep_ctx *ctx = mcr_udep_open(&o, &cb, NULL, err, sizeof(err));
    if (ctx == NULL) {
        fprintf(stderr, "hostile: %s\n", err);
        _exit(2);
    }
    *peer = mcr_udep_connect(ctx, rxe, (uint16_t)port, 5000, err, sizeof(err));
    if (*peer == NULL) {
        fprintf(stderr, "hostile connect: %s\n", err);
        _exit(2);
    }
    return ctx;
}

/* Polls c until the first peer has `want` replies, up to 10 s. */
static bool await_replies(struct mcr_udep_ctx *c, unsigned want)
{
    for (int i = 0; i < 10000 && replies < want; i++)
        mcr_udep_poll(c, 1);
    return replies >= want;
}

/* Sends one request the ordinary way; returns the sequence number it went
 * with. */
static uint32_t send_request(struct mcr_udep_ctx *c, struct mcr_udep_peer *p)
{
    uint32_t seq, expected;
    mcr_udep_peer_seqs(p, &seq, &expected);
    while (mcr_udep_send(p, REQUEST, REQUEST_LEN) == -EAGAIN)
        mcr_udep_poll(c, 1);
    return seq;
}

/* Prints "sent FORGED REPLAYED" on stdout; exit status 0 when the server
 * answered each of the three real requests exactly once. */
static int hostile_process(unsigned port)
{
    struct mcr_udep_peer *p1, *p2;
    struct mcr_udep_ctx *c1 = hostile_ctx(port, &p1);
    struct mcr_udep_ctx *c2 = hostile_ctx(port, &p2);
    uint32_t id1 = mcr_udep_peer_remote_id(p1);
    long forged = 0, replayed = 0;

    /* a real request, answered; then the same datagram again and again */
    uint32_t seq = send_request(c1, p1);
    bool first = await_replies(c1, 1);
    uint32_t next_send, next_recv;
    mcr_udep_peer_seqs(p1, &next_send, &next_recv);
    uint8_t d[MCR_UD_HDR_LEN + 64];
    struct mcr_ud_hdr replay = {.version = MCR_UD_VERSION,
                                .type = MCR_UD_DATA,
                                .window = 32,
                                .conn_id = id1,
                                .seq = seq,
                                .ack = next_recv,
                                .msg_len = REQUEST_LEN,
                                .seg_len = REQUEST_LEN};
    mcr_ud_hdr_encode(&replay, d);
    memcpy(d + MCR_UD_HDR_LEN, REQUEST, REQUEST_LEN);
    for (int i = 0; i < FLOOD; i++) {
        replayed += mcr_udep_send_raw(p1, d, MCR_UD_HDR_LEN + REQUEST_LEN) == 0;
        if (i % 8 == 7) {
            mcr_udep_poll(c1, 0);
            usleep(500);
        }
    }
    send_request(c1, p1);
    bool second = await_replies(c1, 2);

    for (int i = 0; i < ROUNDS; i++) {
        mcr_udep_peer_seqs(p1, &next_send, &next_recv);
        struct mcr_ud_hdr h = {.version = MCR_UD_VERSION,
                               .type = MCR_UD_DATA,
                               .window = 32,
                               .conn_id = id1,
                               .seq = next_recv + 0x40000000u + (uint32_t)i,
                               .ack = next_recv,
                               .msg_len = 8,
                               .seg_len = 8};
        memset(d, 0xee, sizeof(d));
        /* 1: a sequence number far outside the window, from the right QP */
        mcr_ud_hdr_encode(&h, d);
        forged += mcr_udep_send_raw(p1, d, MCR_UD_HDR_LEN + 8) == 0;
        /* 2: the first peer's id from the other QP (a forged source) */
        h.seq = next_recv;
        mcr_ud_hdr_encode(&h, d);
        forged += mcr_udep_send_raw(p2, d, MCR_UD_HDR_LEN + 8) == 0;
        /* 3: a segment length that disagrees with the datagram */
        h.seg_len = h.msg_len = 60;
        mcr_ud_hdr_encode(&h, d);
        forged += mcr_udep_send_raw(p1, d, MCR_UD_HDR_LEN + 8) == 0;
        /* 4: a message longer than the server takes */
        h.seg_len = 8;
        h.msg_len = 0xfffffff0u;
        mcr_ud_hdr_encode(&h, d);
        forged += mcr_udep_send_raw(p1, d, MCR_UD_HDR_LEN + 8) == 0;
        /* 5: a segment beyond the end of its message */
        h.msg_len = 8;
        h.seg_off = 4;
        mcr_ud_hdr_encode(&h, d);
        forged += mcr_udep_send_raw(p1, d, MCR_UD_HDR_LEN + 8) == 0;
        h.seg_off = 0;
        /* 6: shorter than a header */
        forged += mcr_udep_send_raw(p1, d, 10) == 0;
        /* 7: a wrong header check */
        mcr_ud_hdr_encode(&h, d);
        d[34] ^= 0x5a;
        forged += mcr_udep_send_raw(p1, d, MCR_UD_HDR_LEN + 8) == 0;
        /* 8: a version of the future */
        h.version = MCR_UD_VERSION + 7;
        mcr_ud_hdr_encode(&h, d);
        forged += mcr_udep_send_raw(p1, d, MCR_UD_HDR_LEN + 8) == 0;
        h.version = MCR_UD_VERSION;
        /* 9: an id no peer has */
        h.conn_id = id1 ^ 0x5a5a0000u;
        mcr_ud_hdr_encode(&h, d);
        forged += mcr_udep_send_raw(p1, d, MCR_UD_HDR_LEN + 8) == 0;
        h.conn_id = id1;
        /* 10: an ack of datagrams never sent */
        struct mcr_ud_hdr ack = {.version = MCR_UD_VERSION,
                                 .type = MCR_UD_ACK,
                                 .window = 32,
                                 .conn_id = id1,
                                 .ack = next_recv + 0x10000000u};
        mcr_ud_hdr_encode(&ack, d);
        forged += mcr_udep_send_raw(p1, d, MCR_UD_HDR_LEN) == 0;
        mcr_udep_poll(c1, 1);
        mcr_udep_poll(c2, 1);
    }
    /* its own peer still works */
    send_request(c1, p1);
    bool third = await_replies(c1, 3);
    for (int i = 0; i < 200; i++) /* late answers to the replays would show now */
        mcr_udep_poll(c1, 1);
    printf("sent %ld %ld replies %u\n", forged, replayed, replies);
    fflush(stdout);
    mcr_udep_close(c2);
    mcr_udep_close(c1);
    return first && second && third && replies == 3 ? 0 : 1;
}

/* ---- the well-behaved clients ------------------------------------------------------- */
/* GOOD_OPS sets and gets over scheme://, every value checked; exit status
 * 0 when all held. */
static int good_process(const char *scheme, unsigned port)
{
    char cfg[160];
    snprintf(cfg, sizeof(cfg), "--SERVER=%s://%s:%u", scheme, rxe, port);
    memcached_st *m = memcached(cfg, strlen(cfg));
    if (m == NULL)
        return 2;
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 20000);
    char *value = malloc(200000);
    int wrong = 0;
    for (int i = 0; i < GOOD_OPS; i++) {
        char key[48];
        int kl = snprintf(key, sizeof(key), "good-%s-%d", scheme, i);
        size_t len = i % 50 == 0 ? 150000 : 1 + (size_t)(i * 97) % 9000;
        workload_fill(value, len, (uint32_t)i);
        memcached_return_t rc = memcached_set(m, key, (size_t)kl, value, len, 0, 0);
        size_t got_len = 0;
        memcached_return_t grc;
        char *got = memcached_get(m, key, (size_t)kl, &got_len, &(uint32_t){0}, &grc);
        if (rc != MEMCACHED_SUCCESS || got == NULL || got_len != len ||
            memcmp(got, value, len) != 0) {
            fprintf(stderr, "%s client: %s of %zu bytes: set %s, get %s, %zu bytes\n", scheme, key,
                    len, memcached_strerror(m, rc), memcached_strerror(m, grc), got_len);
            wrong++;
        }
        free(got);
    }
    free(value);
    memcached_free(m);
    printf("wrong %d\n", wrong);
    return wrong ? 1 : 0;
}

/* Re-executes this program in a role; its stdout goes to *out. */
static pid_t spawn(const char *self, const char *role, unsigned port, int *out)
{
    char port_arg[16];
    snprintf(port_arg, sizeof(port_arg), "%u", port);
    return workload_spawn(self, (const char *[]){role, port_arg, NULL}, out);
}

/* Reaps pid (up to timeout_ms) and reads its one line of output; its exit
 * status, -1 when it was killed. */
static int finish(pid_t pid, int out, int timeout_ms, char *line, size_t cap)
{
    int ws = workload_finish(pid, out, timeout_ms, line, cap);
    return ws != -1 && WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

int main(int argc, char **argv)
{
    rxe = getenv("RXE_VM_ADDR");
    if (rxe == NULL)
        tap_bail("RXE_VM_ADDR is not set: run inside scripts/rxe-vm");
    if (argc == 3 && strcmp(argv[1], "--hostile") == 0)
        return hostile_process((unsigned)atoi(argv[2]));
    if (argc == 3 && strcmp(argv[1], "--good-ud") == 0)
        return good_process("rdma+ud", (unsigned)atoi(argv[2]));
    if (argc == 3 && strcmp(argv[1], "--good-rc") == 0)
        return good_process("rdma", (unsigned)atoi(argv[2]));
    if (argc < 2)
        tap_bail("usage: rdma_test_ud_hostile SERVER_BINARY");
    server_bin = argv[1];
    signal(SIGPIPE, SIG_IGN);
    unsigned base = 29000 + (unsigned)(getpid() % 1000) * 2;
    struct server s;
    server_start_with(&s, base, base + 1, "2", NULL, NULL);
    long malformed0 = tcp_stat(s.tcp_port, "rdma_ud_malformed");
    long dups0 = tcp_stat(s.tcp_port, "rdma_ud_duplicates");

    int out_ud, out_rc, out_hostile;
    pid_t ud = spawn(argv[0], "--good-ud", s.rdma_port, &out_ud);
    pid_t rc = spawn(argv[0], "--good-rc", s.rdma_port, &out_rc);
    pid_t hostile = spawn(argv[0], "--hostile", s.rdma_port, &out_hostile);
    char line[256];
    int st = finish(hostile, out_hostile, 120000, line, sizeof(line));
    long forged = 0, replayed = 0;
    unsigned got = 0;
    bool parsed = sscanf(line, "sent %ld %ld replies %u", &forged, &replayed, &got) == 3;
    tap_ok(st == 0 && parsed,
           "the hostile sender's real requests were each answered once, before, between and "
           "after its forgeries (%u replies to 3 requests; exit status %d)",
           got, st);
    st = finish(ud, out_ud, 180000, line, sizeof(line));
    tap_ok(st == 0, "a UD client beside it: %d sets and gets of 1 B .. 150 KB intact (%s)",
           GOOD_OPS, line[0] ? line : "no report");
    st = finish(rc, out_rc, 180000, line, sizeof(line));
    tap_ok(st == 0, "an RC client beside it: %d sets and gets of 1 B .. 150 KB intact (%s)",
           GOOD_OPS, line[0] ? line : "no report");
    long malformed = tcp_stat(s.tcp_port, "rdma_ud_malformed") - malformed0;
    long dups = tcp_stat(s.tcp_port, "rdma_ud_duplicates") - dups0;
    /* a datagram the server's receive ring had no room for is lost before
     * any count: at least 9 in 10 must be counted */
    tap_ok(forged == (long)ROUNDS * FORGERY_KINDS && malformed >= forged * 9 / 10 &&
               malformed <= forged + 64,
           "rdma_ud_malformed counts the forgeries: %ld of %ld sent (%d kinds)", malformed, forged,
           FORGERY_KINDS);
    tap_ok(replayed == FLOOD && dups >= replayed * 9 / 10,
           "rdma_ud_duplicates counts the replayed request: %ld of %ld sent", dups, replayed);
    int alive = 0;
    tap_ok(proc_alive(s.pid, &alive), "the server is still running");
    server_stop(&s, SIGTERM);
    tap_no_plan_end();
    return tap_exit_status();
}
