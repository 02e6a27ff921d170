/* t/rdma/rdma_test_ud.c: the UD endpoint (rdma/ud_ep.c) on real verbs in the
 * Soft-RoCE guest: an echo server and client processes exchanging messages
 * of 1 B to 1 MiB, byte-checked, without and with loss, duplication and
 * reordering; a client killed mid-message; peers that never send; a hostile
 * sender; work requests per round trip and memory per peer. */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "mcr/ud_wire.h"
#include "rdma/ud_ep.h"
#include "t/rdma/proc.h"
#include "t/rdma/tap.h"

#define PORT_CLEAN 7471
#define PORT_LOSSY 7472
#define PORT_NOBODY 7473 /* nothing listens there */
/* Messages per client and exchange: on the clean link about 25 of them
 * (1%) up to 1 MiB long, on the lossy one about 5 (0.2%); the two
 * exchanges are most of this program's time. */
#define MSGS_PER_CLIENT 2500
#define NCLIENTS 2
#define MAX_OUT_BYTES (1536u * 1024u)
#define MAX_OUT_MSGS 4

/* What the server processes publish to the test program. */
struct server_shared {
    volatile int stop;
    volatile int listening; /* set once its context listens */
    struct mcr_udep_stats st;
    size_t heap_in_use; /* mallinfo2 uordblks */
    uint64_t send_errors;
    uint64_t killed_len_seen; /* messages delivered of KILLED_MSG_LEN bytes */
};

/* The killed client's message: a length no other client sends (those end
 * at 1 MiB), so its delivery can be told from any other. */
#define KILLED_MSG_LEN ((1u << 20) + 7u)

/* What a client process publishes. */
struct client_shared {
    uint64_t verified, corrupted, server_dead;
    struct mcr_udep_stats st;
    int done;
    int polls_handled[2]; /* poll_cap: what its first two polls handled */
};

static struct server_shared *shm_servers;
static struct client_shared *shm_clients;

static uint64_t ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static const char *guest_addr(void)
{
    const char *a = getenv("RXE_VM_ADDR");
    if (a == NULL)
        tap_bail("RXE_VM_ADDR is not set: run inside scripts/rxe-vm");
    return a;
}

/* ---- server --------------------------------------------------------- */

static void echo(struct mcr_udep_peer *peer, const void *msg, size_t len, void *user)
{
    struct server_shared *sh = user;
    if (len == KILLED_MSG_LEN)
        sh->killed_len_seen++;
    if (mcr_udep_send(peer, msg, len) != 0)
        sh->send_errors++;
}

/* The servers probe a peer silent for KEEPALIVE_MS and free it when its
 * probes go unanswered for DEAD_MS: a vanished client is freed within
 * their sum, and a check that peers are kept holds them past it. */
enum { KEEPALIVE_MS = 1000, DEAD_MS = 3000 };

static void serve(uint16_t port, struct server_shared *sh, uint32_t loss_ppm)
{
    struct mcr_udep_opts o = {.addr = guest_addr()};
    mcr_udep_opts_default(&o);
    o.port = port;
    /* a guest on a loaded host stalls for seconds at times */
    o.keepalive_ms = KEEPALIVE_MS;
    o.dead_ms = DEAD_MS;
    o.test_drop_ppm = loss_ppm;
    o.test_dup_ppm = loss_ppm ? 10000 : 0;
    o.test_delay_ppm = loss_ppm ? 20000 : 0;
    struct mcr_udep_callbacks cb = {.on_message = echo};
    char err[256];
    struct mcr_udep_ctx *ctx = mcr_udep_open(&o, &cb, sh, err, sizeof(err));
    if (ctx == NULL) {
        fprintf(stderr, "server: %s\n", err);
        _exit(2);
    }
    sh->listening = 1;
    uint64_t end = ms_now() + 600000;
    while (!sh->stop && ms_now() < end) {
        if (mcr_udep_poll(ctx, 20) < 0)
            _exit(3);
        /* gathered aside, then stored whole: the test process reads
         * sh->st meanwhile and must never see a field half way (the
         * gathering writes some fields twice) */
        struct mcr_udep_stats st;
        mcr_udep_stats(ctx, &st);
        sh->st = st;
        sh->heap_in_use = mallinfo2().uordblks;
    }
    mcr_udep_close(ctx);
    _exit(0);
}

/* ---- clients ---------------------------------------------------------- */

/* Large messages in a thousand (1% on a clean link; fewer on the lossy
 * one, where each loss in a long message waits for a retransmission). */
static uint32_t large_per_mille = 10;

/* Message i of client c: its length, and its bytes (a window into a
 * pseudo-random pattern that starts at a place of its own). */
static size_t msg_len(uint32_t c, uint32_t i)
{
    if (i == 0)
        return 1;
    if (i == 1)
        return 1u << 20;
    uint32_t x = (c * 2654435761u) ^ (i * 40503u);
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    uint32_t k = x % 1000;
    if (k < 900)
        return 1 + x % 2048;
    if (k < 1000 - large_per_mille)
        return 1 + x % 65536;
    return 1 + x % (1u << 20);
}

#define PATTERN_LEN (2u << 20)
static uint8_t *pattern;

static const uint8_t *msg_bytes(uint32_t c, uint32_t i)
{
    return pattern + ((c * 7919u + i * 104729u) % (PATTERN_LEN / 2));
}

static void make_pattern(void)
{
    pattern = malloc(PATTERN_LEN);
    if (pattern == NULL)
        tap_bail("out of memory");
    uint32_t x = 0x9e3779b9u;
    for (size_t k = 0; k < PATTERN_LEN; k++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        pattern[k] = (uint8_t)x;
    }
}

struct client_state {
    uint32_t id, nsent, nrecv, nmsgs;
    size_t fixed_len; /* every message this long; 0: msg_len() */
    bool peer_gone;   /* the server stopped answering: the peer is freed */
    size_t out_bytes;
    struct client_shared *sh;
};

static void on_reply(struct mcr_udep_peer *peer, const void *msg, size_t len, void *user)
{
    (void)peer;
    struct client_state *cs = user;
    uint32_t i = cs->nrecv++;
    size_t want = cs->fixed_len ? cs->fixed_len : msg_len(cs->id, i);
    int bad = len != want || memcmp(msg, msg_bytes(cs->id, i), len) != 0;
    if (bad)
        cs->sh->corrupted++;
    else
        cs->sh->verified++;
    cs->out_bytes -= want;
}

static void on_server_dead(struct mcr_udep_peer *peer, int reason, void *user)
{
    (void)peer;
    (void)reason;
    struct client_state *cs = user;
    cs->sh->server_dead++;
    cs->peer_gone = true;
}

static struct mcr_udep_ctx *client_ctx_capped(struct client_state *cs, uint32_t loss_ppm,
                                              struct mcr_udep_peer **peer, uint16_t port,
                                              uint32_t poll_max)
{
    struct mcr_udep_opts o = {.addr = guest_addr()};
    mcr_udep_opts_default(&o);
    if (poll_max)
        o.poll_max = poll_max;
    o.test_drop_ppm = loss_ppm;
    o.test_dup_ppm = loss_ppm ? 10000 : 0;
    o.test_delay_ppm = loss_ppm ? 20000 : 0;
    struct mcr_udep_callbacks cb = {.on_message = on_reply, .on_dead = on_server_dead};
    char err[256];
    struct mcr_udep_ctx *ctx = mcr_udep_open(&o, &cb, cs, err, sizeof(err));
    if (ctx == NULL) {
        fprintf(stderr, "client: %s\n", err);
        _exit(2);
    }
    *peer = mcr_udep_connect(ctx, guest_addr(), port, 5000, err, sizeof(err));
    if (*peer == NULL) {
        fprintf(stderr, "client connect: %s\n", err);
        _exit(2);
    }
    return ctx;
}

static struct mcr_udep_ctx *client_ctx(struct client_state *cs, uint32_t loss_ppm,
                                       struct mcr_udep_peer **peer, uint16_t port)
{
    return client_ctx_capped(cs, loss_ppm, peer, port, 0);
}

/* Sends nmsgs messages with a few outstanding, checks every echo. */
static void client_run(struct client_state *cs, uint32_t loss_ppm, uint16_t port)
{
    struct mcr_udep_peer *peer;
    struct mcr_udep_ctx *ctx = client_ctx(cs, loss_ppm, &peer, port);
    uint64_t end = ms_now() + 200000;
    while (cs->nrecv < cs->nmsgs && ms_now() < end && !cs->peer_gone) {
        while (cs->nsent < cs->nmsgs && cs->nsent - cs->nrecv < MAX_OUT_MSGS &&
               cs->out_bytes + msg_len(cs->id, cs->nsent) <= MAX_OUT_BYTES) {
            size_t len = msg_len(cs->id, cs->nsent);
            if (mcr_udep_send(peer, msg_bytes(cs->id, cs->nsent), len) != 0)
                break;
            cs->out_bytes += len;
            cs->nsent++;
        }
        if (mcr_udep_poll(ctx, 10) < 0)
            break;
    }
    mcr_udep_stats(ctx, &cs->sh->st);
    mcr_udep_close(ctx);
    cs->sh->done = 1;
    _exit(cs->nrecv == cs->nmsgs ? 0 : 1);
}

static pid_t start_client(uint32_t id, uint32_t nmsgs, uint32_t loss_ppm, uint16_t port)
{
    pid_t pid = proc_fork();
    if (pid == 0) {
        struct client_state cs = {.id = id, .nmsgs = nmsgs, .sh = &shm_clients[id]};
        client_run(&cs, loss_ppm, port);
    }
    return pid;
}

/* ---- phases --------------------------------------------------------- */

static void exchange(const char *what, uint32_t first_id, uint32_t loss_ppm, uint16_t port,
                     struct server_shared *srv)
{
    pid_t pids[NCLIENTS];
    uint64_t t0 = ms_now();
    for (uint32_t c = 0; c < NCLIENTS; c++)
        pids[c] = start_client(first_id + c, MSGS_PER_CLIENT, loss_ppm, port);
    uint64_t verified = 0, corrupted = 0, retrans = 0, dups = 0, timeouts = 0, drops = 0, gone = 0;
    uint64_t dead0 = srv->st.dead_peers;
    int all_ok = 1;
    for (uint32_t c = 0; c < NCLIENTS; c++) {
        int st = proc_reap(pids[c], 220000);
        struct client_shared *cs = &shm_clients[first_id + c];
        all_ok &= st == 0;
        verified += cs->verified;
        corrupted += cs->corrupted;
        retrans += cs->st.retransmits;
        dups += cs->st.duplicates;
        timeouts += cs->st.timeouts;
        drops += cs->st.send_drops;
        gone += cs->server_dead;
    }
    usleep(200000);
    tap_ok(all_ok, "%s: %d clients finished", what, NCLIENTS);
    tap_ok(verified == (uint64_t)NCLIENTS * MSGS_PER_CLIENT && corrupted == 0,
           "%s: %llu messages echoed and byte-verified, %llu corrupted, %llu lost (%llu ms)", what,
           (unsigned long long)verified, (unsigned long long)corrupted,
           (unsigned long long)((uint64_t)NCLIENTS * MSGS_PER_CLIENT - verified - corrupted),
           (unsigned long long)(ms_now() - t0));
    tap_diag("%s: clients retransmitted %llu, dropped %llu duplicates; server retransmitted "
             "%llu, dropped %llu duplicates, send errors %llu",
             what, (unsigned long long)retrans, (unsigned long long)dups,
             (unsigned long long)srv->st.retransmits, (unsigned long long)srv->st.duplicates,
             (unsigned long long)srv->send_errors);
    tap_diag("%s: client timer expiries %llu, server %llu; datagrams not posted (no send "
             "buffer): clients %llu, server %llu; injected at the server: %llu dropped, %llu "
             "duplicated, %llu late",
             what, (unsigned long long)timeouts, (unsigned long long)srv->st.timeouts,
             (unsigned long long)drops, (unsigned long long)srv->st.send_drops,
             (unsigned long long)srv->st.test_dropped, (unsigned long long)srv->st.test_duplicated,
             (unsigned long long)srv->st.test_delayed);
    tap_diag("%s: peers found dead: by the clients %llu, by the server %llu; server drops: "
             "unknown peer %llu, bad source %llu",
             what, (unsigned long long)gone, (unsigned long long)(srv->st.dead_peers - dead0),
             (unsigned long long)srv->st.unknown_peer, (unsigned long long)srv->st.bad_source);
    if (loss_ppm)
        tap_ok(retrans > 0 && srv->st.retransmits > 0 && dups > 0,
               "%s: retransmission and duplicate counters moved", what);
    else
        tap_ok(srv->st.malformed == 0 && srv->st.bad_source == 0,
               "%s: no datagram dropped as malformed", what);
}

/* A child process with one context that sets up npeers peers of the
 * clean server (sending one byte on each when `send_one`), polls for
 * hold_ms (answering the server's keepalive probes), sets *ready, polls
 * for linger_ms more and closes. The test process waits for *ready. */
static pid_t hold_peers(int npeers, bool send_one, uint32_t hold_ms, uint32_t linger_ms,
                        volatile int *ready)
{
    pid_t pid = proc_fork();
    if (pid != 0)
        return pid;
    struct mcr_udep_opts o = {.addr = guest_addr()};
    mcr_udep_opts_default(&o);
    char err[256];
    struct mcr_udep_ctx *ctx = mcr_udep_open(&o, NULL, NULL, err, sizeof(err));
    if (ctx == NULL)
        _exit(2);
    for (int i = 0; i < npeers; i++) {
        struct mcr_udep_peer *p =
            mcr_udep_connect(ctx, guest_addr(), PORT_CLEAN, 5000, err, sizeof(err));
        if (p == NULL || (send_one && mcr_udep_send(p, "x", 1) != 0))
            _exit(3);
        /* answer the server's keepalive probes of the peers set up */
        mcr_udep_poll(ctx, 0);
    }
    uint64_t end = ms_now() + hold_ms;
    while (ms_now() < end)
        mcr_udep_poll(ctx, 10);
    *ready = 1;
    end = ms_now() + linger_ms;
    while (ms_now() < end)
        mcr_udep_poll(ctx, 10);
    mcr_udep_close(ctx);
    _exit(0);
}

static void wait_ready(volatile int *ready)
{
    uint64_t end = ms_now() + 60000;
    while (!*ready && ms_now() < end)
        usleep(20000);
}

static void killed_client(struct server_shared *srv)
{
    /* the clients before it left without a word: the server forgets them */
    uint64_t wait_end = ms_now() + 20000;
    while (srv->st.peers != 0 && ms_now() < wait_end)
        usleep(50000);
    tap_diag("earlier clients freed as dead: %llu, peers left %u",
             (unsigned long long)srv->st.dead_peers, srv->st.peers);
    uint64_t dead0 = srv->st.dead_peers;
    struct client_shared *ksh = &shm_clients[9];
    pid_t pid = proc_fork();
    if (pid == 0) {
        struct client_state cs = {.id = 9, .nmsgs = 1, .sh = ksh};
        struct mcr_udep_peer *peer;
        /* It drops every datagram it receives, so no ack reaches its
         * layer and it never sends more of the message than its first
         * window (32 of 259 datagrams at MTU 4096), however long it
         * polls. A client that took the acks sent on within the very
         * poll that saw its first ones: 32 to 105 datagrams in one
         * poll, and now and then all of them, the whole message then
         * rightly delivered (doc/rdma-ud.md). */
        struct mcr_udep_ctx *ctx = client_ctx(&cs, 1000000, &peer, PORT_CLEAN);
        uint8_t *buf = calloc(1, KILLED_MSG_LEN);
        if (buf == NULL || mcr_udep_send(peer, buf, KILLED_MSG_LEN) != 0)
            _exit(4);
        struct mcr_udep_stats st;
        uint64_t end = ms_now() + 10000;
        do { /* until the server answered: it holds part of the message */
            mcr_udep_poll(ctx, 1);
            mcr_udep_stats(ctx, &st);
        } while (st.test_dropped == 0 && ms_now() < end);
        ksh->st = st; /* what it had sent when it died */
        raise(SIGKILL);
    }
    int st = proc_reap(pid, 20000);
    uint32_t seg_max = ksh->st.mtu > MCR_UD_HDR_LEN ? ksh->st.mtu - MCR_UD_HDR_LEN : 1;
    uint64_t nsegs = (KILLED_MSG_LEN + seg_max - 1) / seg_max;
    tap_ok(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && ksh->st.test_dropped > 0 &&
               ksh->st.data_sent < nsegs,
           "a client killed itself mid-message (%llu of its %llu datagrams sent, %llu answers "
           "ignored)",
           (unsigned long long)ksh->st.data_sent, (unsigned long long)nsegs,
           (unsigned long long)ksh->st.test_dropped);
    uint64_t end = ms_now() + 20000;
    while (ms_now() < end && (srv->st.peers != 0 || srv->st.dead_peers == dead0))
        usleep(50000);
    tap_ok(srv->st.peers == 0 && srv->st.dead_peers > dead0,
           "the server freed it after the dead timeout (%llu dead peers, %u left)",
           (unsigned long long)srv->st.dead_peers, srv->st.peers);
    tap_ok(srv->killed_len_seen == 0,
           "its partial message was never delivered (%llu deliveries of its length)",
           (unsigned long long)srv->killed_len_seen);
}

/* Peers set up that never send: the server reaches each from its connect
 * request (not only from a first datagram), so its keepalive probes are
 * answered and it keeps them past the dead timeout. */
static void silent_peers(struct server_shared *srv)
{
    enum { PEERS = 20 };
    uint64_t wait_end = ms_now() + 20000;
    while (srv->st.peers != 0 && ms_now() < wait_end)
        usleep(50000);
    uint32_t peers0 = srv->st.peers;
    uint64_t dead0 = srv->st.dead_peers;
    volatile int *ready = &shm_clients[45].done;
    /* past the server's keepalive and dead timeout, 2 s more */
    pid_t pid = hold_peers(PEERS, false, KEEPALIVE_MS + DEAD_MS + 2000, 2000, ready);
    wait_ready(ready);
    uint32_t held = srv->st.peers - peers0;
    uint64_t dead = srv->st.dead_peers - dead0;
    tap_ok(*ready && held == PEERS && dead == 0,
           "%u peers that never sent held past the dead timeout (%u held, %llu found dead)", PEERS,
           held, (unsigned long long)dead);
    tap_ok(proc_reap(pid, 30000) == 0, "their client set them up and closed");
}

/* A sender with a peer of its own forges datagrams; the clients beside it
 * must not notice. */
static void hostile(struct server_shared *srv)
{
    struct mcr_udep_stats before = srv->st;
    uint64_t malformed0 = srv->st.malformed;
    pid_t good[NCLIENTS];
    for (uint32_t c = 0; c < NCLIENTS; c++)
        good[c] = start_client(20 + c, 500, 0, PORT_CLEAN);
    enum { N = 50 };
    pid_t pid = proc_fork();
    if (pid == 0) {
        struct client_state cs = {.id = 30, .nmsgs = 0, .sh = &shm_clients[30]};
        struct mcr_udep_peer *p1, *p2;
        struct mcr_udep_ctx *c1 = client_ctx(&cs, 0, &p1, PORT_CLEAN);
        struct mcr_udep_ctx *c2 = client_ctx(&cs, 0, &p2, PORT_CLEAN);
        uint8_t d[256];
        for (int i = 0; i < N; i++) {
            struct mcr_ud_hdr h = {.version = MCR_UD_VERSION,
                                   .type = MCR_UD_DATA,
                                   .window = 32,
                                   .conn_id = mcr_udep_peer_remote_id(p1),
                                   .seq = 0x80000000u + (uint32_t)i,
                                   .msg_len = 8,
                                   .seg_len = 8};
            memset(d, 0xee, sizeof(d));
            /* 1: a sequence number far out of the window, from the right QP */
            mcr_ud_hdr_encode(&h, d);
            mcr_udep_send_raw(p1, d, MCR_UD_HDR_LEN + 8);
            /* 2: the same id from another QP (a forged source) */
            mcr_udep_send_raw(p2, d, MCR_UD_HDR_LEN + 8);
            /* 3: a length that disagrees with the datagram */
            h.seg_len = 200;
            h.msg_len = 200;
            mcr_ud_hdr_encode(&h, d);
            mcr_udep_send_raw(p1, d, MCR_UD_HDR_LEN + 8);
            /* 4: shorter than a header */
            mcr_udep_send_raw(p1, d, 10);
            /* 5: an id no peer has */
            h.conn_id ^= 0x5a5a0000u;
            h.seg_len = h.msg_len = 8;
            mcr_ud_hdr_encode(&h, d);
            mcr_udep_send_raw(p1, d, MCR_UD_HDR_LEN + 8);
            mcr_udep_poll(c1, 1);
            mcr_udep_poll(c2, 1);
        }
        usleep(300000);
        mcr_udep_close(c2);
        mcr_udep_close(c1);
        _exit(0);
    }
    int st = proc_reap(pid, 30000);
    tap_ok(st == 0, "the hostile sender ran");
    int all_ok = 1;
    uint64_t verified = 0;
    for (uint32_t c = 0; c < NCLIENTS; c++) {
        all_ok &= proc_reap(good[c], 120000) == 0;
        verified += shm_clients[20 + c].verified;
    }
    usleep(200000);
    tap_ok(all_ok && verified == NCLIENTS * 500u,
           "clients beside it: %llu of %u messages echoed and verified",
           (unsigned long long)verified, NCLIENTS * 500u);
    const struct mcr_udep_stats *s = &srv->st;
    tap_ok(s->malformed - malformed0 >= N, "forged sequence numbers dropped (%llu)",
           (unsigned long long)(s->malformed - malformed0));
    tap_ok(s->bad_source - before.bad_source >= N, "forged source QP dropped (%llu)",
           (unsigned long long)(s->bad_source - before.bad_source));
    tap_ok(s->bad_header - before.bad_header >= N, "forged lengths dropped (%llu)",
           (unsigned long long)(s->bad_header - before.bad_header));
    tap_ok(s->bad_length - before.bad_length >= N, "short datagrams dropped (%llu)",
           (unsigned long long)(s->bad_length - before.bad_length));
    tap_ok(s->unknown_peer - before.unknown_peer >= N, "unknown connection ids dropped (%llu)",
           (unsigned long long)(s->unknown_peer - before.unknown_peer));
}

/* One call of mcr_udep_poll handles at most poll_max completions: a client
 * with poll_max 4 sends 20 messages and lets their send completions and
 * echoes pile up before it polls. */
static void poll_cap(void)
{
    enum { MSGS = 20, CAP = 4 };
    struct client_shared *sh = &shm_clients[42];
    pid_t pid = proc_fork();
    if (pid == 0) {
        struct client_state cs = {.id = 42, .nmsgs = MSGS, .fixed_len = 1, .sh = sh};
        struct mcr_udep_peer *peer;
        struct mcr_udep_ctx *ctx = client_ctx_capped(&cs, 0, &peer, PORT_CLEAN, CAP);
        for (uint32_t i = 0; i < MSGS; i++) {
            cs.out_bytes += 1;
            cs.nsent++;
            if (mcr_udep_send(peer, msg_bytes(42, i), 1) != 0)
                _exit(1);
        }
        usleep(500000);
        int first = mcr_udep_poll(ctx, 0);
        int second = mcr_udep_poll(ctx, 0);
        uint64_t end = ms_now() + 10000;
        while (cs.nrecv < MSGS && ms_now() < end && !cs.peer_gone)
            mcr_udep_poll(ctx, 10);
        sh->polls_handled[0] = first;
        sh->polls_handled[1] = second;
        mcr_udep_close(ctx);
        _exit(0);
    }
    (void)proc_reap(pid, 60000);
    int first = sh->polls_handled[0], second = sh->polls_handled[1];
    tap_diag("poll_max %d, %d messages sent before polling: the first poll handled %d, the "
             "next %d",
             CAP, MSGS, first, second);
    tap_ok(first >= 1 && first <= CAP && second >= 1 && second <= CAP,
           "a poll handles at most poll_max completions, the next one goes on");
    tap_ok(sh->verified == MSGS && sh->corrupted == 0, "every echo arrived across capped polls");
}

/* Work requests per small round trip, and memory per peer. */
static void costs(struct server_shared *srv)
{
    enum { ROUNDS = 2000, PEERS = 100 };
    struct mcr_udep_stats s0 = srv->st;
    struct client_shared *sh = &shm_clients[40];
    pid_t pid = proc_fork();
    if (pid == 0) {
        struct client_state cs = {.id = 40, .nmsgs = ROUNDS, .fixed_len = 1, .sh = sh};
        struct mcr_udep_peer *peer;
        struct mcr_udep_ctx *ctx = client_ctx(&cs, 0, &peer, PORT_CLEAN);
        struct mcr_udep_stats a, b;
        mcr_udep_stats(ctx, &a);
        for (uint32_t i = 0; i < ROUNDS; i++) {
            cs.out_bytes += 1;
            cs.nsent++;
            /* every message of this run is 1 byte */
            if (mcr_udep_send(peer, msg_bytes(40, i), 1) != 0)
                _exit(1);
            uint64_t end = ms_now() + 5000;
            while (cs.nrecv <= i && ms_now() < end)
                mcr_udep_poll(ctx, 10);
        }
        mcr_udep_stats(ctx, &b);
        sh->st = b;
        sh->st.send_wrs -= a.send_wrs;
        sh->st.recv_wrs -= a.recv_wrs;
        sh->st.post_send_calls -= a.post_send_calls;
        sh->st.post_recv_calls -= a.post_recv_calls;
        sh->st.acks_sent -= a.acks_sent;
        mcr_udep_close(ctx);
        _exit(0);
    }
    (void)proc_reap(pid, 120000);
    usleep(100000);
    struct mcr_udep_stats s1 = srv->st;
    tap_diag("1-byte round trips: %u; corrupted %llu", ROUNDS, (unsigned long long)sh->corrupted);
    tap_diag("client work requests per round trip: %.3f (send %.3f, receive %.3f), "
             "standalone acks %.4f",
             (double)(sh->st.send_wrs + sh->st.recv_wrs) / ROUNDS, (double)sh->st.send_wrs / ROUNDS,
             (double)sh->st.recv_wrs / ROUNDS, (double)sh->st.acks_sent / ROUNDS);
    tap_diag("server work requests per round trip: %.3f (send %.3f, receive %.3f)",
             (double)(s1.send_wrs - s0.send_wrs + s1.recv_wrs - s0.recv_wrs) / ROUNDS,
             (double)(s1.send_wrs - s0.send_wrs) / ROUNDS,
             (double)(s1.recv_wrs - s0.recv_wrs) / ROUNDS);
    tap_ok(sh->verified == ROUNDS && sh->corrupted == 0, "%u 1-byte round trips echoed", ROUNDS);

    /* memory: PEERS peers from one client context to the server, once the
     * server forgot the client before */
    uint64_t wait_end = ms_now() + 20000;
    while (srv->st.peers != 0 && ms_now() < wait_end)
        usleep(50000);
    usleep(100000);
    size_t heap0 = srv->heap_in_use;
    uint32_t peers0 = srv->st.peers;
    volatile int *ready = &shm_clients[41].done;
    pid = hold_peers(PEERS, true, 3000, 3000, ready);
    wait_ready(ready);
    usleep(100000);
    uint32_t npeers = srv->st.peers - peers0;
    size_t heap1 = srv->heap_in_use;
    tap_ok(npeers == PEERS, "%u peers set up from one client context", npeers);
    tap_diag("server memory per peer: heap %.0f bytes (mallinfo2 delta / peers; struct %zu), "
             "registered 0 per peer (%zu bytes per context: %u receives of %u + %u sends)",
             npeers ? (double)(heap1 - heap0) / npeers : 0.0, mcr_udep_peer_struct_bytes(),
             srv->st.registered_bytes, 512u, srv->st.mtu + MCR_UD_GRH_LEN, 256u);
    (void)proc_reap(pid, 30000);
}

/* A connect to a port nothing listens on: the server's CM answers with a
 * refusal (a SIDR reply whose status says so), and the endpoint fails the
 * connect at once, without sending the request again until the connect
 * timeout (which made every connect to a killed server take all of it). */
static void refused_connect(void)
{
    enum { CONNECT_MS = 4000 };
    struct mcr_udep_opts o = {.addr = guest_addr()};
    mcr_udep_opts_default(&o);
    char err[256] = "";
    struct mcr_udep_ctx *ctx = mcr_udep_open(&o, NULL, NULL, err, sizeof(err));
    if (ctx == NULL)
        tap_bail("client context: %s", err);
    uint64_t t0 = ms_now();
    struct mcr_udep_peer *peer =
        mcr_udep_connect(ctx, guest_addr(), PORT_NOBODY, CONNECT_MS, err, sizeof(err));
    uint64_t took = ms_now() - t0;
    struct mcr_udep_stats st;
    mcr_udep_stats(ctx, &st);
    tap_ok(peer == NULL && st.connect_resends == 0,
           "a connect to a port nothing listens on fails without a resend: %s, %llu resends, "
           "%llu ms (connect timeout %d ms)",
           peer ? "connected" : err, (unsigned long long)st.connect_resends,
           (unsigned long long)took, CONNECT_MS);
    mcr_udep_close(ctx);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    shm_servers = mmap(NULL, 2 * sizeof(struct server_shared), PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    shm_clients = mmap(NULL, 64 * sizeof(struct client_shared), PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm_servers == MAP_FAILED || shm_clients == MAP_FAILED)
        tap_bail("mmap: %s", strerror(errno));
    memset(shm_servers, 0, 2 * sizeof(struct server_shared));
    memset(shm_clients, 0, 64 * sizeof(struct client_shared));
    tap_plan(24);
    make_pattern();

    pid_t clean = proc_fork();
    if (clean == 0)
        serve(PORT_CLEAN, &shm_servers[0], 0);
    pid_t lossy = proc_fork();
    if (lossy == 0)
        serve(PORT_LOSSY, &shm_servers[1], 50000);
    /* a guest on a loaded host can take seconds to open a device */
    uint64_t wait_end = ms_now() + 60000;
    while (!(shm_servers[0].listening && shm_servers[1].listening) && ms_now() < wait_end)
        usleep(20000);
    if (!(shm_servers[0].listening && shm_servers[1].listening))
        tap_bail("the UD servers did not start listening within 60 s");

    exchange("no loss", 0, 0, PORT_CLEAN, &shm_servers[0]);
    large_per_mille = 2;
    exchange("5% loss, 1% duplicates, 2% late", 2, 50000, PORT_LOSSY, &shm_servers[1]);
    killed_client(&shm_servers[0]);
    silent_peers(&shm_servers[0]);
    hostile(&shm_servers[0]);
    poll_cap();
    costs(&shm_servers[0]);
    refused_connect();

    shm_servers[0].stop = shm_servers[1].stop = 1;
    tap_ok(proc_reap(clean, 10000) == 0 && proc_reap(lossy, 10000) == 0,
           "the servers exited cleanly");
    return tap_failed ? 1 : 0;
}
