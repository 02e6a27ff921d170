/* benchmarks/udr_pingpong.c: drives two UD reliability peers
 * (rdma/ud_reliable.c) in one process over a lossless in-memory link, for
 * deterministic cost figures of the layer alone: benchmarks/udr-cost runs
 * it under callgrind for instructions per round trip.
 *
 *   udr_pingpong [ROUNDS [REQ_BYTES [REPLY_BYTES [oneway]]]]
 * Ping-pong: the client sends a request, the server answers from its
 * deliver callback (the reply carries the ack), the client's next request
 * carries the client's ack; 10 simulated microseconds pass between rounds.
 * "oneway": the client streams ROUNDS requests and the server never
 * answers (acks go alone, delayed and amortised). Prints datagrams and
 * standalone acks per message. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdma/ud_reliable.h"

#define LINK_SLOTS 128u
#define MTU 4096u

/* datagrams on their way to one side, first in first out */
struct link {
    uint8_t buf[LINK_SLOTS][MTU];
    uint32_t len[LINK_SLOTS];
    uint32_t head, tail;
};

struct side {
    struct udr_peer *peer;
    struct link *to_other;
    size_t reply_len; /* answer each message with this many bytes (0: none) */
    uint64_t delivered;
    uint64_t now;
};

static void on_emit(void *arg, const uint8_t *hdr, const uint8_t *payload, size_t len)
{
    struct side *s = arg;
    struct link *l = s->to_other;
    if (l->tail - l->head == LINK_SLOTS) {
        fprintf(stderr, "udr_pingpong: link full\n");
        exit(1);
    }
    uint8_t *d = l->buf[l->tail % LINK_SLOTS];
    memcpy(d, hdr, MCR_UD_HDR_LEN);
    if (len > 0)
        memcpy(d + MCR_UD_HDR_LEN, payload, len);
    l->len[l->tail % LINK_SLOTS] = (uint32_t)(MCR_UD_HDR_LEN + len);
    l->tail++;
}

static uint8_t reply[MTU];

static void on_deliver(void *arg, const uint8_t *msg, size_t len)
{
    struct side *s = arg;
    (void)msg;
    (void)len;
    s->delivered++;
    if (s->reply_len > 0 && udr_send(s->peer, reply, s->reply_len, s->now) != 0) {
        fprintf(stderr, "udr_pingpong: reply refused\n");
        exit(1);
    }
}

static const struct udr_ops ops = {.emit = on_emit, .deliver = on_deliver};

/* The driver's calls into the layer, each through one of these (not
 * inlined): callgrind counts what runs inside them (--toggle-collect),
 * the layer's work plus the callbacks' copy into the link. */
__attribute__((noinline)) static int layer_send(struct udr_peer *p, const void *m, size_t n,
                                                uint64_t now)
{
    return udr_send(p, m, n, now);
}

__attribute__((noinline)) static void layer_receive(struct udr_peer *p, const uint8_t *d, size_t n,
                                                    uint64_t now)
{
    udr_receive(p, d, n, now);
}

__attribute__((noinline)) static void layer_tick(struct udr_peer *p, uint64_t now)
{
    udr_tick(p, now);
}

static struct link links[2];
static struct side sides[2];

/* Hands every datagram in flight to its receiver. */
static void settle(uint64_t now)
{
    for (;;) {
        int moved = 0;
        for (int i = 0; i < 2; i++) {
            struct link *l = &links[i]; /* links[i] leads to sides[i] */
            while (l->head != l->tail) {
                uint32_t slot = l->head++ % LINK_SLOTS;
                sides[i].now = now;
                layer_receive(sides[i].peer, l->buf[slot], l->len[slot], now);
                moved = 1;
            }
        }
        if (!moved)
            return;
    }
}

int main(int argc, char **argv)
{
    unsigned long rounds = argc > 1 ? strtoul(argv[1], NULL, 10) : 10000;
    size_t req_len = argc > 2 ? strtoul(argv[2], NULL, 10) : 32;
    size_t reply_len = argc > 3 ? strtoul(argv[3], NULL, 10) : 32;
    int oneway = argc > 4 && strcmp(argv[4], "oneway") == 0;
    if (req_len > MTU - MCR_UD_HDR_LEN || reply_len > MTU - MCR_UD_HDR_LEN) {
        fprintf(stderr, "udr_pingpong: messages of one datagram only (<= %u bytes)\n",
                MTU - MCR_UD_HDR_LEN);
        return 64;
    }
    for (int i = 0; i < 2; i++) {
        struct udr_config cfg;
        udr_config_defaults(&cfg, MTU);
        cfg.local_conn_id = 7u + (uint32_t)i;
        cfg.peer_conn_id = 7u + (uint32_t)!i;
        sides[i].to_other = &links[!i];
        sides[i].peer = udr_open(&cfg, &ops, &sides[i], 0);
        if (sides[i].peer == NULL) {
            perror("udr_open");
            return 1;
        }
    }
    sides[1].reply_len = oneway ? 0 : reply_len;
    static uint8_t req[MTU];
    uint64_t now = 0;
    for (unsigned long i = 0; i < rounds; i++) {
        sides[0].now = now;
        if (layer_send(sides[0].peer, req, req_len, now) != 0) {
            fprintf(stderr, "udr_pingpong: send refused at round %lu\n", i);
            return 1;
        }
        settle(now);
        now += 10;
        for (int s = 0; s < 2; s++)
            layer_tick(sides[s].peer, now);
        settle(now);
    }
    /* let the last acks go */
    now += 1000000;
    for (int s = 0; s < 2; s++)
        udr_tick(sides[s].peer, now);
    settle(now);
    const struct udr_stats *c = udr_stats(sides[0].peer), *sv = udr_stats(sides[1].peer);
    uint64_t msgs = c->msgs_sent + sv->msgs_sent;
    printf("# mode %s, %lu rounds, request %zu B, reply %zu B\n", oneway ? "oneway" : "pingpong",
           rounds, req_len, oneway ? (size_t)0 : reply_len);
    printf("messages %" PRIu64 " delivered %" PRIu64 "\n", msgs,
           sides[0].delivered + sides[1].delivered);
    printf("data datagrams %" PRIu64 " standalone acks %" PRIu64 " retransmits %" PRIu64 "\n",
           c->data_sent + sv->data_sent, c->acks_sent + sv->acks_sent,
           c->retransmits + sv->retransmits);
    printf("acks per message %.4f, datagrams per round %.4f\n",
           (double)(c->acks_sent + sv->acks_sent) / (double)msgs,
           (double)(c->data_sent + sv->data_sent + c->acks_sent + sv->acks_sent) / (double)rounds);
    for (int i = 1; i >= 0; i--)
        udr_close(sides[i].peer);
    return sides[1].delivered == rounds && (oneway || sides[0].delivered == rounds) ? 0 : 1;
}
