/* t/test_ud_reliable.c: unit tests of UD's software reliability
 * (rdma/ud_reliable.c), no verbs: two peers joined by a simulated channel
 * that loses, duplicates and reorders datagrams under a seeded PRNG, a
 * silent peer, and hostile datagrams. TAP on stdout.
 *
 * UDR_TEST_SEED=N in the environment changes the channel's seed (default
 * fixed, so a failure repeats). */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdma/ud_reliable.h"
#include "t/rdma/tap.h"

/* ---- PRNG (splitmix64) ------------------------------------------------------ */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t seed = 20261128;
static uint64_t rng_state;

static uint64_t rng(void)
{
    rng_state += 0x9e3779b97f4a7c15ull;
    return mix64(rng_state);
}

static uint64_t rng_below(uint64_t n)
{
    return rng() % n;
}

/* ---- allocation failures (the program links with -Wl,--wrap=malloc) ------------ */

void *__real_malloc(size_t size);
void *__wrap_malloc(size_t size);

static unsigned malloc_fail_per_mille; /* while the layer runs */
static bool in_layer;
static uint64_t malloc_failed;

void *__wrap_malloc(size_t size)
{
    if (in_layer && malloc_fail_per_mille != 0 && rng_below(1000) < malloc_fail_per_mille) {
        malloc_failed++;
        return NULL;
    }
    return __real_malloc(size);
}

/* ---- messages: size and bytes follow from (direction, index) ------------------- */

#define MIB (1u << 20)

static size_t msg_size(int dir, uint32_t k)
{
    if (k == 0)
        return 1;
    if (k == 1)
        return MIB;
    if (k == 2)
        return 0;
    uint64_t r = mix64((uint64_t)dir << 40 | k);
    unsigned pick = (unsigned)(r % 100);
    r >>= 8;
    if (pick < 90)
        return 1 + r % 2048;
    if (pick < 99)
        return 1 + r % 65536;
    return 1 + r % MIB;
}

static void msg_fill(int dir, uint32_t k, uint8_t *buf, size_t len)
{
    uint64_t base = mix64((uint64_t)dir << 40 | k | 1ull << 63);
    for (size_t i = 0; i < len; i += 8) {
        uint64_t w = mix64(base + i);
        size_t n = len - i < 8 ? len - i : 8;
        memcpy(buf + i, &w, n);
    }
}

/* ---- the simulated channel ---------------------------------------------------- */

struct packet {
    uint64_t at;  /* arrival time */
    uint64_t ord; /* tie-break: emission order */
    int to;
    uint32_t len;
    uint8_t *bytes;
};

struct channel {
    struct packet *heap;
    size_t n, cap;
    uint64_t ord;
    unsigned loss_pct10; /* per mille */
    unsigned dup_pct10;  /* per mille */
    unsigned late_pct10; /* per mille: delayed by up to late_us (reordering) */
    uint32_t delay_us;   /* base one-way delay */
    uint32_t jitter_us;  /* uniform extra delay (reordering) */
    uint32_t late_us;
    uint64_t emitted, lost, duplicated;
};

static bool pk_before(const struct packet *a, const struct packet *b)
{
    return a->at != b->at ? a->at < b->at : a->ord < b->ord;
}

static void heap_push(struct channel *c, struct packet pk)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 256;
        c->heap = realloc(c->heap, c->cap * sizeof(*c->heap));
        if (c->heap == NULL)
            tap_bail("out of memory");
    }
    size_t i = c->n++;
    while (i > 0 && pk_before(&pk, &c->heap[(i - 1) / 2])) {
        c->heap[i] = c->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    c->heap[i] = pk;
}

static struct packet heap_pop(struct channel *c)
{
    struct packet top = c->heap[0], last = c->heap[--c->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const struct packet *best = &last;
        if (l < c->n && pk_before(&c->heap[l], best))
            m = l, best = &c->heap[l];
        if (r < c->n && pk_before(&c->heap[r], best))
            m = r;
        if (m == i)
            break;
        c->heap[i] = c->heap[m];
        i = m;
    }
    if (c->n > 0)
        c->heap[i] = last;
    return top;
}

/* one side of the simulation */
struct side {
    int id;
    struct udr_peer *peer;
    struct channel *ch;
    uint64_t *now;
    /* sending */
    uint32_t next_send, n_msgs;
    uint8_t *scratch; /* message bytes being checked */
    uint8_t *out;     /* message next_send's bytes, once filled */
    bool out_filled;
    /* receiving (messages of the other side's direction) */
    uint32_t next_expect;
    uint64_t bad, bytes_ok;
    bool silent;           /* emits nothing */
    size_t max_buffered;   /* most udr_buffered_bytes() seen between steps */
    bool reply_in_deliver; /* answer every message with reply_len bytes */
    bool count_only;       /* only count what arrives */
    size_t reply_len;
    uint64_t delivered;
};

static void side_emit(void *arg, const uint8_t *hdr, const uint8_t *payload, size_t len)
{
    struct side *s = arg;
    struct channel *c = s->ch;
    bool was_in_layer = in_layer;
    in_layer = false; /* the channel's own allocations never fail */
    c->emitted++;
    if (s->silent)
        return;
    if (rng_below(1000) < c->loss_pct10) {
        c->lost++;
        return;
    }
    int copies = rng_below(1000) < c->dup_pct10 ? 2 : 1;
    if (copies == 2)
        c->duplicated++;
    for (int i = 0; i < copies; i++) {
        struct packet pk = {.to = !s->id, .len = (uint32_t)(MCR_UD_HDR_LEN + len), .ord = c->ord++};
        pk.at = *s->now + c->delay_us + (c->jitter_us ? rng_below(c->jitter_us) : 0);
        if (c->late_pct10 && rng_below(1000) < c->late_pct10)
            pk.at += rng_below(c->late_us);
        pk.bytes = malloc(pk.len);
        if (pk.bytes == NULL)
            tap_bail("out of memory");
        memcpy(pk.bytes, hdr, MCR_UD_HDR_LEN);
        if (len > 0)
            memcpy(pk.bytes + MCR_UD_HDR_LEN, payload, len);
        heap_push(c, pk);
    }
    in_layer = was_in_layer;
}

static void side_deliver(void *arg, const uint8_t *msg, size_t len)
{
    struct side *s = arg;
    s->delivered++;
    if (s->reply_in_deliver) {
        static const uint8_t reply[64];
        if (udr_send(s->peer, reply, s->reply_len, *s->now) != 0)
            s->bad++;
        return;
    }
    if (s->count_only)
        return;
    uint32_t k = s->next_expect++;
    size_t want = msg_size(!s->id, k);
    if (len != want) {
        if (s->bad++ < 5)
            tap_diag("side %d message %u: %zu bytes, want %zu", s->id, k, len, want);
        return;
    }
    msg_fill(!s->id, k, s->scratch, len);
    if (len > 0 && memcmp(msg, s->scratch, len) != 0) {
        if (s->bad++ < 5)
            tap_diag("side %d message %u: bytes differ", s->id, k);
        return;
    }
    s->bytes_ok += len;
}

static const struct udr_ops side_ops = {.emit = side_emit, .deliver = side_deliver};

/* when set, side_feed hands each message to udr_sendv in up to four
 * pieces of random lengths (some empty) */
static bool feed_in_pieces;

static int send_in_pieces(struct side *s, size_t len)
{
    struct iovec iov[4];
    size_t off = 0;
    for (int i = 0; i < 3; i++) {
        size_t n = len - off > 0 ? (size_t)rng_below(len - off + 1) : 0;
        iov[i] = (struct iovec){.iov_base = s->out + off, .iov_len = n};
        off += n;
    }
    iov[3] = (struct iovec){.iov_base = s->out + off, .iov_len = len - off};
    return udr_sendv(s->peer, iov, 4, *s->now);
}

static void side_feed(struct side *s)
{
    while (s->next_send < s->n_msgs) {
        size_t len = msg_size(s->id, s->next_send);
        if (!s->out_filled)
            msg_fill(s->id, s->next_send, s->out, len);
        s->out_filled = true;
        in_layer = true;
        int rc = feed_in_pieces ? send_in_pieces(s, len) : udr_send(s->peer, s->out, len, *s->now);
        in_layer = false;
        if (rc == -EAGAIN || rc == -ENOMEM)
            return; /* again at the next step */
        if (rc != 0)
            tap_bail("udr_send: %d", rc);
        s->next_send++;
        s->out_filled = false;
    }
}

struct sim {
    struct channel ch;
    struct side side[2];
    uint64_t now, steps;
};

/* when set, changes each side's configuration in sim_open() */
static void (*sim_config_hook)(int side, struct udr_config *cfg);

/* Two peers, each to send n_msgs messages, over a perfect channel (the
 * caller sets its faults); the PRNG restarts from the seed. */
static void sim_open(struct sim *sim, uint32_t mtu, uint32_t n_msgs, uint32_t isn0, uint32_t isn1)
{
    rng_state = seed;
    memset(sim, 0, sizeof(*sim));
    for (int i = 0; i < 2; i++) {
        struct side *s = &sim->side[i];
        struct udr_config cfg;
        udr_config_defaults(&cfg, mtu);
        cfg.local_conn_id = 0x1000u + (uint32_t)i;
        cfg.peer_conn_id = 0x1000u + (uint32_t)!i;
        cfg.tx_isn = i == 0 ? isn0 : isn1;
        cfg.rx_isn = i == 0 ? isn1 : isn0;
        if (sim_config_hook != NULL)
            sim_config_hook(i, &cfg);
        s->id = i;
        s->ch = &sim->ch;
        s->now = &sim->now;
        s->n_msgs = n_msgs;
        s->scratch = malloc(MIB);
        s->out = malloc(MIB);
        s->peer = udr_open(&cfg, &side_ops, s, 0);
        if (s->peer == NULL || s->scratch == NULL || s->out == NULL)
            tap_bail("udr_open");
    }
}

static void sim_close(struct sim *sim)
{
    while (sim->ch.n > 0)
        free(heap_pop(&sim->ch).bytes);
    free(sim->ch.heap);
    for (int i = 1; i >= 0; i--) {
        udr_close(sim->side[i].peer);
        free(sim->side[i].out);
        free(sim->side[i].scratch);
    }
}

/* Runs until both directions are delivered and idle, a peer dies, or the
 * bounds pass. True when everything arrived. */
static bool sim_run(struct sim *sim, uint64_t max_steps, uint64_t max_time_us)
{
    struct side *a = &sim->side[0], *b = &sim->side[1];
    for (;;) {
        side_feed(a);
        side_feed(b);
        bool done = a->next_expect == b->n_msgs && b->next_expect == a->n_msgs &&
                    udr_is_idle(a->peer) && udr_is_idle(b->peer) && sim->ch.n == 0;
        if (done)
            return true;
        if (++sim->steps > max_steps || sim->now > max_time_us)
            return false;
        uint64_t t = udr_next_deadline(a->peer);
        uint64_t tb = udr_next_deadline(b->peer);
        t = tb < t ? tb : t;
        if (sim->ch.n > 0 && sim->ch.heap[0].at < t)
            t = sim->ch.heap[0].at;
        if (t == UINT64_MAX) {
            if (a->next_send == a->n_msgs && b->next_send == b->n_msgs)
                return false;   /* stuck: nothing will ever happen */
            t = sim->now + 100; /* a send refused for memory: again later */
        }
        if (t > sim->now)
            sim->now = t;
        while (sim->ch.n > 0 && sim->ch.heap[0].at <= sim->now) {
            struct packet pk = heap_pop(&sim->ch);
            in_layer = true;
            udr_receive(sim->side[pk.to].peer, pk.bytes, pk.len, sim->now);
            in_layer = false;
            free(pk.bytes);
        }
        in_layer = true;
        int dead = udr_tick(a->peer, sim->now) != 0 || udr_tick(b->peer, sim->now) != 0;
        in_layer = false;
        if (dead)
            return false;
        for (int i = 0; i < 2; i++) {
            size_t held = udr_buffered_bytes(sim->side[i].peer);
            if (held > sim->side[i].max_buffered)
                sim->side[i].max_buffered = held;
        }
    }
}

/* Delivers every datagram in the channel, the clock moving to each one's
 * arrival: the acks they cause go in too unless a side delays them. */
static void sim_deliver_all(struct sim *sim)
{
    while (sim->ch.n > 0) {
        struct packet pk = heap_pop(&sim->ch);
        if (pk.at > sim->now)
            sim->now = pk.at;
        udr_receive(sim->side[pk.to].peer, pk.bytes, pk.len, sim->now);
        free(pk.bytes);
    }
}

static void sim_report(const struct sim *sim, const char *name)
{
    for (int i = 0; i < 2; i++) {
        const struct udr_stats *st = udr_stats(sim->side[i].peer);
        tap_diag("%s side %d: msgs %" PRIu64 "/%" PRIu64 " data %" PRIu64 " retransmits %" PRIu64
                 " timeouts %" PRIu64 " acks %" PRIu64 " dups %" PRIu64 " malformed %" PRIu64,
                 name, i, st->msgs_sent, st->msgs_delivered, st->data_sent, st->retransmits,
                 st->timeouts, st->acks_sent, st->duplicates, st->malformed);
    }
    tap_diag("%s: %" PRIu64 " steps, %.3f s simulated, channel %" PRIu64 " emitted %" PRIu64
             " lost %" PRIu64 " duplicated",
             name, sim->steps, (double)sim->now / 1e6, sim->ch.emitted, sim->ch.lost,
             sim->ch.duplicated);
}

/* ---- tests ------------------------------------------------------------------------ */

static void test_lossy(const char *name, uint32_t mtu, uint32_t n, uint32_t isn0, uint32_t isn1)
{
    struct sim sim;
    sim_open(&sim, mtu, n, isn0, isn1);
    sim.ch.loss_pct10 = 50; /* 5 % */
    sim.ch.dup_pct10 = 10;  /* 1 % */
    sim.ch.late_pct10 = 20; /* 2 % arrive up to 3 ms late */
    sim.ch.delay_us = 20;
    sim.ch.jitter_us = 80;
    sim.ch.late_us = 3000;
    /* bounds: about five times the steps and twenty times the simulated
     * time that runs with 40 seeds took (at most 63,478 steps, 0.51 s) */
    bool ok = sim_run(&sim, 300000, 10ull * 1000 * 1000);
    sim_report(&sim, name);
    const struct side *a = &sim.side[0], *b = &sim.side[1];
    tap_ok(ok, "%s: both directions completed within the step and time bounds", name);
    tap_ok(a->next_expect == n && b->next_expect == n && a->bad == 0 && b->bad == 0,
           "%s: %u messages each way delivered once, in order, byte-exact (%u, %u; bad %" PRIu64
           ", %" PRIu64 ")",
           name, n, b->next_expect, a->next_expect, a->bad, b->bad);
    const struct udr_stats *sa = udr_stats(a->peer), *sb = udr_stats(b->peer);
    tap_ok(sa->retransmits > 0 && sb->retransmits > 0 && sa->duplicates + sb->duplicates > 0,
           "%s: retransmission and duplicate counters moved", name);
    tap_ok(sa->malformed == 0 && sb->malformed == 0, "%s: nothing counted as malformed", name);
    struct udr_config cfg;
    udr_config_defaults(&cfg, mtu);
    size_t bound = cfg.sendq_max + cfg.window * (size_t)udr_seg_max(a->peer) + cfg.max_msg;
    tap_ok(a->max_buffered <= bound && b->max_buffered <= bound,
           "%s: memory held per peer bounded (at most %zu and %zu bytes, bound %zu)", name,
           a->max_buffered, b->max_buffered, bound);
    sim_close(&sim);
}

/* cfg.sum: both peers add every counter to one shared sum, which then
 * equals their own counters added up (the UD endpoint keeps its totals
 * so, without visiting its peers). */
static struct udr_stats shared_sum;

static void sum_into_shared(int side, struct udr_config *cfg)
{
    (void)side;
    cfg->sum = &shared_sum;
}

static void test_stats_sum(void)
{
    memset(&shared_sum, 0, sizeof(shared_sum));
    sim_config_hook = sum_into_shared;
    struct sim sim;
    sim_open(&sim, 1024, 500, 0, 0);
    sim_config_hook = NULL;
    sim.ch.loss_pct10 = 50;
    sim.ch.dup_pct10 = 10;
    sim.ch.delay_us = 20;
    sim.ch.jitter_us = 80;
    bool ok = sim_run(&sim, 300000, 10ull * 1000 * 1000);
    const struct udr_stats *a = udr_stats(sim.side[0].peer), *b = udr_stats(sim.side[1].peer);
    const uint64_t *pa = (const uint64_t *)a, *pb = (const uint64_t *)b,
                   *ps = (const uint64_t *)&shared_sum;
    size_t fields = sizeof(shared_sum) / sizeof(uint64_t), equal = 0;
    for (size_t i = 0; i < fields; i++)
        equal += ps[i] == pa[i] + pb[i];
    tap_ok(ok && equal == fields && shared_sum.retransmits > 0 && shared_sum.msgs_delivered == 1000,
           "a shared sum (cfg.sum) equals the peers' counters added up: %zu of %zu fields "
           "(retransmits %" PRIu64 ", delivered %" PRIu64 ")",
           equal, fields, shared_sum.retransmits, shared_sum.msgs_delivered);
    sim_close(&sim);
}

/* Allocations in the layer fail now and then: a refused send is tried
 * again, a datagram that cannot be held or start a reassembly counts as
 * lost. Everything still arrives. */
static void test_alloc_failures(void)
{
    struct sim sim;
    const uint32_t n = 2000;
    sim_open(&sim, 4096, n, 0, 0);
    sim.ch.loss_pct10 = 10;
    sim.ch.jitter_us = 80;
    sim.ch.delay_us = 20;
    malloc_failed = 0;
    malloc_fail_per_mille = 20;
    bool ok = sim_run(&sim, 300000, 10ull * 1000 * 1000);
    malloc_fail_per_mille = 0;
    sim_report(&sim, "allocation failures");
    const struct side *a = &sim.side[0], *b = &sim.side[1];
    tap_ok(ok && a->next_expect == n && b->next_expect == n && a->bad == 0 && b->bad == 0,
           "allocation failures (%" PRIu64 " injected, 2%%): %u messages each way delivered, "
           "byte-exact",
           malloc_failed, n);
    tap_ok(malloc_failed > 0, "allocation failures: some were injected");
    sim_close(&sim);
}

/* Request/reply with no loss: B answers every message from deliver, so
 * its reply carries the ack; A's next request carries A's ack. */
static void test_pingpong_acks(void)
{
    struct sim sim;
    const uint32_t n = 2000;
    sim_open(&sim, 4096, 0, 0, 0);
    sim.ch.delay_us = 5;
    struct side *a = &sim.side[0], *b = &sim.side[1];
    b->reply_in_deliver = true;
    b->reply_len = 32;
    a->count_only = true;
    static const uint8_t req[32];
    for (uint32_t i = 0; i < n; i++) {
        if (udr_send(a->peer, req, sizeof(req), sim.now) != 0)
            break;
        sim_deliver_all(&sim);
        sim.now += 10; /* the client thinks for 10 us: less than the ack delay */
        udr_tick(a->peer, sim.now);
        udr_tick(b->peer, sim.now);
    }
    uint64_t replies = a->delivered;
    const struct udr_stats *sa = udr_stats(a->peer), *sb = udr_stats(b->peer);
    tap_ok(replies == n, "ping-pong: %u requests, %" PRIu64 " replies", n, replies);
    double acks = (double)(sa->acks_sent + sb->acks_sent) / (2.0 * n);
    tap_diag("ping-pong: %" PRIu64 " + %" PRIu64 " standalone acks for %u round trips (%.4f per "
             "message), %" PRIu64 " + %" PRIu64 " data datagrams",
             sa->acks_sent, sb->acks_sent, n, acks, sa->data_sent, sb->data_sent);
    tap_ok(sa->acks_sent + sb->acks_sent <= 2 && sa->retransmits + sb->retransmits == 0,
           "ping-pong without loss: acks ride on data (standalone acks %" PRIu64
           "), no retransmission",
           sa->acks_sent + sb->acks_sent);
    sim_close(&sim);
}

/* udr_sent_all: false while a message sent is unacknowledged, true once
 * the ack came, also while the receiving side still owes an ack (not
 * idle). */
static void test_sent_all(void)
{
    struct sim sim;
    sim_open(&sim, 4096, 0, 0, 0);
    sim.ch.delay_us = 5;
    struct side *a = &sim.side[0], *b = &sim.side[1];
    b->count_only = true;
    static const uint8_t msg[10000];
    bool fresh = udr_sent_all(a->peer) && udr_is_idle(a->peer);
    bool queued = udr_send(a->peer, msg, sizeof(msg), sim.now) == 0 && !udr_sent_all(a->peer);
    sim_deliver_all(&sim); /* A's datagrams reach B; B's ack waits for its delay */
    bool unacked = !udr_sent_all(a->peer) && udr_sent_all(b->peer) && !udr_is_idle(b->peer);
    for (int i = 0; i < 100 && !udr_sent_all(a->peer); i++) {
        sim.now += 100;
        udr_tick(b->peer, sim.now);
        sim_deliver_all(&sim);
    }
    tap_ok(fresh && queued && unacked && udr_sent_all(a->peer) && b->delivered == 1,
           "sent_all: a fresh peer has sent all, not with a message unacknowledged (the "
           "receiver's ack still owed), again once the ack came");
    sim_close(&sim);
}

/* One-way stream without loss: acks are delayed and amortised. */
static void test_stream_acks(void)
{
    struct sim sim;
    const uint32_t n = 3000;
    sim_open(&sim, 4096, 0, 0, 0);
    sim.ch.delay_us = 5;
    sim.side[0].n_msgs = n;
    bool ok = sim_run(&sim, 1000000, 60ull * 1000 * 1000);
    const struct udr_stats *sa = udr_stats(sim.side[0].peer), *sb = udr_stats(sim.side[1].peer);
    tap_diag("one-way stream: %" PRIu64 " data datagrams, %" PRIu64 " standalone acks (%.3f per "
             "message)",
             sa->data_sent, sb->acks_sent, (double)sb->acks_sent / n);
    tap_ok(ok && sim.side[1].next_expect == n && sim.side[1].bad == 0,
           "one-way stream: %u messages delivered", n);
    tap_ok(sb->acks_sent * 2 <= sa->data_sent && sa->retransmits == 0,
           "one-way stream without loss: at most one ack per two datagrams, no retransmission");
    sim_close(&sim);
}

/* B holds at most 4 datagrams out of order; A's window is 32. */
static void small_window_b(int side, struct udr_config *cfg)
{
    if (side == 1) {
        cfg->window = 4;
        cfg->ack_every = 2;
    }
}

/* The sender keeps to the receiver's advertised window: nothing arrives
 * outside it, under loss and reordering. */
static void test_peer_window(void)
{
    struct sim sim;
    const uint32_t n = 1000;
    sim_config_hook = small_window_b;
    sim_open(&sim, 1024, n, 0, 0);
    sim_config_hook = NULL;
    sim.ch.loss_pct10 = 50;
    sim.ch.jitter_us = 80;
    sim.ch.delay_us = 20;
    bool ok = sim_run(&sim, 300000, 10ull * 1000 * 1000);
    const struct udr_stats *sb = udr_stats(sim.side[1].peer);
    tap_ok(ok && sim.side[0].next_expect == n && sim.side[1].next_expect == n &&
               sim.side[0].bad == 0 && sim.side[1].bad == 0,
           "peer window 4 against 32: %u messages each way delivered", n);
    tap_ok(sb->out_of_window == 0 && sb->malformed == 0,
           "peer window 4 against 32: the sender never went past the receiver's window");
    sim_close(&sim);
}

static void keepalive_on(int side, struct udr_config *cfg)
{
    (void)side;
    cfg->keepalive_us = 100000;
    cfg->dead_us = 300000;
}

/* Idle peers that answer their probes stay alive. */
static void test_keepalive_alive(void)
{
    struct sim sim;
    sim_config_hook = keepalive_on;
    sim_open(&sim, 1024, 0, 0, 0);
    sim_config_hook = NULL;
    sim.ch.delay_us = 50;
    sim.ch.loss_pct10 = 50;
    int dead = 0;
    while (sim.now < 10ull * 1000 * 1000 && !dead) {
        uint64_t t = udr_next_deadline(sim.side[0].peer);
        uint64_t tb = udr_next_deadline(sim.side[1].peer);
        t = tb < t ? tb : t;
        if (sim.ch.n > 0 && sim.ch.heap[0].at < t)
            t = sim.ch.heap[0].at;
        if (t == UINT64_MAX)
            break;
        sim.now = t > sim.now ? t : sim.now;
        while (sim.ch.n > 0 && sim.ch.heap[0].at <= sim.now) {
            struct packet pk = heap_pop(&sim.ch);
            udr_receive(sim.side[pk.to].peer, pk.bytes, pk.len, sim.now);
            free(pk.bytes);
        }
        dead = udr_tick(sim.side[0].peer, sim.now) != 0 || udr_tick(sim.side[1].peer, sim.now) != 0;
    }
    const struct udr_stats *sa = udr_stats(sim.side[0].peer);
    tap_ok(!dead && sim.now >= 10ull * 1000 * 1000 && sa->acks_sent >= 50,
           "keepalive: idle peers answering probes over a lossy channel stay alive for 10 s "
           "(%" PRIu64 " probes and answers from one side)",
           sa->acks_sent);
    sim_close(&sim);
}

static void test_dead_peer(void)
{
    struct sim sim;
    sim_open(&sim, 1024, 0, 0, 0);
    struct side *a = &sim.side[0], *b = &sim.side[1];
    b->silent = true;
    a->silent = true; /* nothing reaches B either: B is simply gone */
    uint8_t msg[100] = {0};
    tap_ok(udr_send(a->peer, msg, sizeof(msg), 0) == 0, "dead peer: a message queued");
    uint64_t dead_at = 0;
    int ticks = 0;
    for (uint64_t t = 0; ticks < 100000; ticks++) {
        t = udr_next_deadline(a->peer);
        if (t == UINT64_MAX)
            break;
        if (udr_tick(a->peer, t) != 0) {
            dead_at = t;
            break;
        }
    }
    const struct udr_stats *st = udr_stats(a->peer);
    tap_ok(dead_at == 5000000 && udr_is_dead(a->peer),
           "dead peer: declared dead at the 5 s timeout (at %" PRIu64 " us, %d ticks, %" PRIu64
           " retransmissions, %" PRIu64 " timeouts)",
           dead_at, ticks, st->retransmits, st->timeouts);
    tap_ok(st->timeouts >= 5 && st->timeouts <= 30,
           "dead peer: the timeout backed off (%" PRIu64 " expiries in 5 s from a 10 ms start)",
           st->timeouts);
    tap_ok(udr_send(a->peer, msg, 1, dead_at) == -EPIPE && udr_tick(a->peer, dead_at + 1) == -EPIPE,
           "dead peer: later sends and ticks say -EPIPE");
    sim_close(&sim);

    /* an owner that was not scheduled for longer than the dead timeout
     * (its first tick comes 6 s after the send) sends again three times
     * before it gives the peer up, instead of at once */
    sim_open(&sim, 1024, 0, 0, 0);
    a = &sim.side[0];
    b = &sim.side[1];
    a->silent = b->silent = true;
    udr_send(a->peer, msg, sizeof(msg), 0);
    int first = udr_tick(a->peer, 6000000);
    uint64_t retrans_first = udr_stats(a->peer)->retransmits;
    int expiries = 0;
    uint64_t woke = 6000000;
    for (ticks = 0; ticks < 1000 && !udr_is_dead(a->peer); ticks++) {
        uint64_t t = udr_next_deadline(a->peer);
        if (t == UINT64_MAX)
            break;
        woke = t > woke ? t : woke; /* a deadline passed already is due now */
        uint64_t before = udr_stats(a->peer)->timeouts;
        udr_tick(a->peer, woke);
        expiries += udr_stats(a->peer)->timeouts > before;
    }
    tap_ok(first == 0 && retrans_first == 1 && udr_is_dead(a->peer) && expiries == 2,
           "dead peer: after 6 s unscheduled, the first tick retransmits (%d, %" PRIu64
           " retransmissions) and the peer is dead after 2 more timeouts (%d)",
           first, retrans_first, expiries);
    sim_close(&sim);

    /* keepalive: an idle peer that stops answering probes */
    struct udr_config cfg;
    udr_config_defaults(&cfg, 1024);
    cfg.keepalive_us = 1000000;
    cfg.dead_us = 2000000;
    struct side quiet = {.id = 0};
    struct channel ch = {0};
    uint64_t now = 0;
    quiet.ch = &ch;
    quiet.now = &now;
    quiet.silent = true;
    struct udr_peer *p = udr_open(&cfg, &side_ops, &quiet, 0);
    uint64_t died = 0;
    for (int i = 0; i < 1000 && died == 0; i++) {
        now = udr_next_deadline(p);
        if (now == UINT64_MAX)
            break;
        if (udr_tick(p, now) != 0)
            died = now;
    }
    tap_ok(died == 3000000 && udr_stats(p)->acks_sent >= 2,
           "keepalive: an idle silent peer is probed after 1 s and dead 2 s later (%" PRIu64
           " us, %" PRIu64 " probes)",
           died, udr_stats(p)->acks_sent);
    udr_close(p);
}

/* ---- hostile datagrams -------------------------------------------------------------- */

static enum udr_verdict inject_raw(struct udr_peer *p, const uint8_t *d, size_t len, uint64_t now)
{
    return udr_receive(p, d, len, now);
}

static enum udr_verdict inject(struct udr_peer *p, const struct mcr_ud_hdr *h, size_t payload_len,
                               uint64_t now)
{
    static uint8_t buf[MCR_UD_HDR_LEN + 4096];
    mcr_ud_hdr_encode(h, buf);
    memset(buf + MCR_UD_HDR_LEN, 0xee, payload_len);
    return inject_raw(p, buf, MCR_UD_HDR_LEN + payload_len, now);
}

static void test_hostile(void)
{
    struct sim sim;
    const uint32_t n = 400;
    sim_open(&sim, 1024, n, 0, 0);
    sim.ch.delay_us = 10;
    sim.ch.jitter_us = 30;
    struct side *a = &sim.side[0], *b = &sim.side[1];
    /* let part of the stream through, so B has state (a message in reassembly perhaps) */
    sim_run(&sim, 3000, 60ull * 1000 * 1000);
    struct udr_peer *p = b->peer;
    const struct udr_stats *st = udr_stats(p);
    uint64_t mal0 = st->malformed;
    struct mcr_ud_hdr good;
    memset(&good, 0, sizeof(good));
    good.version = MCR_UD_VERSION;
    good.type = MCR_UD_DATA;
    good.window = 32;
    good.conn_id = 0x1001; /* B's id */
    good.ack = 0;
    /* B has received from A up to some seq; forge around it */
    struct mcr_ud_hdr h;
    int count = 0;
    uint8_t raw[64] = {0};
    uint64_t now = sim.now;

#define EXPECT(verdict, what)                                                                      \
    do {                                                                                           \
        enum udr_verdict v_ = (verdict);                                                           \
        count++;                                                                                   \
        tap_ok(v_ != UDR_OK && v_ != UDR_DUPLICATE, "hostile: %s dropped (verdict %d)", what, v_); \
    } while (0)

    /* the ack B last sent tells where A's sequence stands: A's snd_nxt is
     * at most 32 ahead of B's rcv_nxt. B's rcv_nxt: count what B took. */
    uint32_t rcv_nxt = (uint32_t)(udr_stats(a->peer)->data_sent); /* no loss: all arrived */
    h = good, h.seq = rcv_nxt + 1000000, h.msg_len = 10, h.seg_len = 10;
    EXPECT(inject(p, &h, 10, now), "a seq far ahead of the window");
    h = good, h.seq = rcv_nxt - 100000, h.msg_len = 10, h.seg_len = 10;
    EXPECT(inject(p, &h, 10, now), "a seq far behind the window");
    h = good, h.seq = rcv_nxt + 32, h.msg_len = 10, h.seg_len = 10;
    EXPECT(inject(p, &h, 10, now), "a seq just past the window");
    h = good, h.seq = rcv_nxt + 1, h.msg_len = 10, h.seg_len = 10;
    mcr_ud_hdr_encode(&h, raw);
    EXPECT(inject_raw(p, raw, MCR_UD_HDR_LEN + 5, now), "a seg_len longer than the datagram");
    EXPECT(inject_raw(p, raw, MCR_UD_HDR_LEN + 20, now), "a seg_len shorter than the datagram");
    h = good, h.seq = rcv_nxt + 1, h.msg_len = 5, h.seg_len = 10;
    EXPECT(inject(p, &h, 10, now), "a segment longer than its message");
    h = good, h.seq = rcv_nxt + 1, h.msg_len = 100, h.seg_off = 100, h.seg_len = 10;
    EXPECT(inject(p, &h, 10, now), "a segment offset at the message's end");
    h = good, h.seq = rcv_nxt + 1, h.msg_len = 100, h.seg_off = 95, h.seg_len = 10;
    EXPECT(inject(p, &h, 10, now), "a segment running past the message's end");
    h = good, h.seq = rcv_nxt + 1, h.msg_len = 100, h.seg_off = UINT32_MAX - 4, h.seg_len = 10;
    EXPECT(inject(p, &h, 10, now), "a segment offset that wraps");
    h = good, h.seq = rcv_nxt + 1, h.msg_len = 0, h.seg_len = 10;
    EXPECT(inject(p, &h, 10, now), "payload in an empty message");
    h = good, h.seq = rcv_nxt + 1, h.msg_len = 10, h.seg_len = 0;
    EXPECT(inject(p, &h, 0, now), "an empty segment of a non-empty message");
    h = good, h.seq = rcv_nxt + 1, h.msg_len = 3u << 20, h.seg_len = 10;
    EXPECT(inject(p, &h, 10, now), "a message longer than max_msg");
    h = good, h.seq = rcv_nxt + 1, h.msg_len = 2000, h.seg_len = 1000;
    EXPECT(inject(p, &h, 1000, now), "a segment longer than the MTU allows");
    h = good, h.seq = rcv_nxt + 1, h.msg_len = 10, h.seg_len = 10, h.conn_id = 0x1000;
    EXPECT(inject(p, &h, 10, now), "the wrong peer id");
    h = good, h.seq = rcv_nxt + 1, h.msg_len = 10, h.seg_len = 10, h.version = 2;
    EXPECT(inject(p, &h, 10, now), "an unknown version");
    h = good, h.seq = rcv_nxt + 1, h.msg_len = 10, h.seg_len = 10, h.type = 9;
    EXPECT(inject(p, &h, 10, now), "an unknown type");
    h = good, h.seq = rcv_nxt + 1, h.msg_len = 10, h.seg_len = 10, h.window = 0;
    EXPECT(inject(p, &h, 10, now), "a zero window");
    h = good, h.seq = rcv_nxt + 1, h.msg_len = 10, h.seg_len = 10;
    mcr_ud_hdr_encode(&h, raw);
    raw[10] ^= 1; /* seq changed after the check */
    EXPECT(inject_raw(p, raw, MCR_UD_HDR_LEN + 10, now), "a wrong header check");
    EXPECT(inject_raw(p, raw, MCR_UD_HDR_LEN - 1, now), "a truncated header");
    EXPECT(inject_raw(p, raw, 0, now), "an empty datagram");
    h = good, h.type = MCR_UD_ACK, h.seq = 5;
    EXPECT(inject(p, &h, 0, now), "an ACK with a sequence number");
    h = good, h.type = MCR_UD_ACK, h.ack = 1000000;
    EXPECT(inject(p, &h, 0, now), "an ack of datagrams never sent");
    uint64_t mal1 = st->malformed;
    h = good, h.type = MCR_UD_ACK, h.ack = (uint32_t)udr_stats(p)->data_sent, h.sack = 1ull << 40;
    tap_ok(inject(p, &h, 0, now) == UDR_OK && st->bad_sack == 1 && st->malformed == mal1,
           "hostile: a selective ack of datagrams never sent is ignored and counted, the rest of "
           "the datagram taken");
    tap_ok(mal1 - mal0 == (uint64_t)count,
           "hostile: every dropped datagram counted as malformed (%" PRIu64 " of %d)", mal1 - mal0,
           count);
    tap_ok(st->bad_peer == 1 && st->out_of_window == 4,
           "hostile: wrong peer (%" PRIu64 ") and out-of-window (%" PRIu64 ") counted apart",
           st->bad_peer, st->out_of_window);

    /* the good stream is unaffected */
    bool ok = sim_run(&sim, 2000000, 600ull * 1000 * 1000);
    tap_ok(ok && b->next_expect == n && a->next_expect == n && a->bad == 0 && b->bad == 0,
           "hostile: the stream still delivers all %u messages each way, byte-exact (%u, %u)", n,
           b->next_expect, a->next_expect);
    sim_close(&sim);
#undef EXPECT
}

/* A datagram that passes every check on arrival but, once in order, does
 * not continue the message being reassembled is forgotten, and the
 * sender's retransmission of the true one takes its place. */
static void test_forged_in_window(void)
{
    struct sim sim;
    sim_open(&sim, 1024, 0, 0, 0);
    sim.ch.delay_us = 10;
    struct side *a = &sim.side[0], *b = &sim.side[1];
    a->n_msgs = 1;
    b->n_msgs = 0;
    /* message 0 of side 0 is 1 byte; make A send a multi-segment one instead */
    a->next_send = 1; /* message 1: 1 MiB */
    a->n_msgs = 2;
    side_feed(a); /* the first datagram leaves (window 1 until B answers) */
    b->next_expect = 1;
    struct mcr_ud_hdr h;
    memset(&h, 0, sizeof(h));
    h.version = MCR_UD_VERSION;
    h.type = MCR_UD_DATA;
    h.window = 32;
    h.conn_id = 0x1001;
    h.seq = 6; /* ahead of the first, inside the window, not yet sent */
    h.msg_len = 500;
    h.seg_len = 100;
    tap_ok(inject(b->peer, &h, 100, sim.now) == UDR_OK,
           "forged in window: accepted on arrival (it could be true)");
    bool ok = sim_run(&sim, 2000000, 600ull * 1000 * 1000);
    tap_ok(ok && b->next_expect == 2 && b->bad == 0,
           "forged in window: dropped once in order, the true segment delivered instead");
    tap_ok(udr_stats(b->peer)->malformed == 1, "forged in window: counted as malformed");
    tap_ok(
        udr_stats(a->peer)->bad_sack > 0 && udr_stats(a->peer)->malformed == 0,
        "forged in window: the sender ignored the selective ack of what it had not sent (%" PRIu64
        " times) and took the rest",
        udr_stats(a->peer)->bad_sack);
    sim_close(&sim);
}

/* A sender killed in the middle of a segmented message: the receiver keeps
 * the part (bounded by max_msg) until it is closed, which frees it (the
 * sanitizer build checks for leaks). */
static void test_killed_mid_message(void)
{
    struct sim sim;
    sim_open(&sim, 4096, 0, 0, 0);
    sim.ch.delay_us = 10;
    struct side *a = &sim.side[0], *b = &sim.side[1];
    a->next_send = 1; /* message 1: 1 MiB */
    a->n_msgs = 2;
    b->next_expect = 1;
    side_feed(a);
    for (int i = 0; i < 120; i++) {
        if (i == 5)
            a->silent = true; /* killed: nothing more leaves A */
        sim.now += 100;
        udr_tick(a->peer, sim.now);
        while (sim.ch.n > 0 && sim.ch.heap[0].at <= sim.now) {
            struct packet pk = heap_pop(&sim.ch);
            udr_receive(sim.side[pk.to].peer, pk.bytes, pk.len, sim.now);
            free(pk.bytes);
        }
        udr_tick(b->peer, sim.now);
    }
    const struct udr_stats *sb = udr_stats(b->peer);
    tap_ok(sb->dgrams_received > 1 && sb->msgs_delivered == 0 && !udr_is_idle(b->peer),
           "killed mid-message: the receiver holds a part (%" PRIu64 " datagrams), delivers "
           "nothing",
           sb->dgrams_received);
    sim_close(&sim);
}

static void test_limits(void)
{
    struct udr_config cfg;
    struct side s = {0};
    struct channel ch = {0};
    uint64_t now = 0;
    s.ch = &ch;
    s.now = &now;
    s.silent = true;
    udr_config_defaults(&cfg, 4096);
    cfg.window = 65;
    errno = 0;
    tap_ok(udr_open(&cfg, &side_ops, &s, 0) == NULL && errno == EINVAL, "a window over 64 refused");
    udr_config_defaults(&cfg, 30);
    tap_ok(udr_open(&cfg, &side_ops, &s, 0) == NULL, "an MTU below the header refused");
    udr_config_defaults(&cfg, 4096);
    cfg.sendq_max = cfg.max_msg - 1;
    tap_ok(udr_open(&cfg, &side_ops, &s, 0) == NULL, "a send queue smaller than max_msg refused");
    udr_config_defaults(&cfg, 4096);
    cfg.max_msg = 1000;
    cfg.sendq_max = 2500;
    struct udr_peer *p = udr_open(&cfg, &side_ops, &s, 0);
    static uint8_t big[1001];
    tap_ok(udr_send(p, big, 1001, 0) == -EMSGSIZE, "a message over max_msg: -EMSGSIZE");
    tap_ok(udr_send(p, big, 1000, 0) == 0 && udr_send(p, big, 1000, 0) == 0 &&
               udr_send(p, big, 1000, 0) == -EAGAIN,
           "the send queue is bounded: -EAGAIN past sendq_max");
    tap_ok(udr_seg_max(p) == 4096 - MCR_UD_HDR_LEN, "segment payload is MTU minus the header");
    udr_close(p);
}

int main(void)
{
    const char *env = getenv("UDR_TEST_SEED");
    if (env != NULL)
        seed = strtoull(env, NULL, 0);
    tap_diag("seed %" PRIu64, seed);
    test_limits();
    test_lossy("lossy mtu 4096", 4096, 10000, 0, 0);
    test_lossy("lossy mtu 1024, seq wrapping", 1024, 2000, UINT32_MAX - 3000, UINT32_MAX - 10);
    feed_in_pieces = true; /* udr_sendv: messages gathered from pieces */
    test_lossy("lossy mtu 1024, messages in pieces", 1024, 2000, 0, 0);
    feed_in_pieces = false;
    test_alloc_failures();
    test_pingpong_acks();
    test_stream_acks();
    test_sent_all();
    test_peer_window();
    test_dead_peer();
    test_keepalive_alive();
    test_hostile();
    test_forged_in_window();
    test_killed_mid_message();
    test_stats_sum();
    tap_no_plan_end();
    return tap_exit_status();
}
