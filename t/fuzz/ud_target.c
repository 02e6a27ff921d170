/* t/fuzz/ud_target.c: the fuzz target for UD reliability's datagram parser
 * and receive path (udr_parse(), udr_input() in rdma/ud_reliable.c).
 *
 * An input is a sequence of records: a 2-byte little-endian length, then
 * that many bytes of one datagram (cut short at the input's end), or, when
 * the length's top bit is set, a tick: the clock advances by the low 15
 * bits times 100 us and udr_tick() runs. Each input drives a fresh peer
 * (MTU 128, window 8, max_msg 2048, conn ids 0x100 local and 0x200 remote,
 * both sequences from 0) that has sent two messages of its own, so acks
 * have something to acknowledge. The peer's emitted datagrams are parsed
 * back and must pass; delivered messages must be no longer than max_msg
 * and arrive whole; the counters must add up. A broken invariant aborts.
 *
 * Built two ways: with t/fuzz/replay.c as t/test_fuzz_ud (make check replays
 * t/fuzz/ud.corpus), or with clang -fsanitize=fuzzer and
 * rdma/ud_reliable.c for coverage-guided fuzzing. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdma/ud_reliable.h"
#include "mcr/byteorder.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MTU 128u
#define FUZZ_MAX_MSG 2048u

static void fail(const char *what)
{
    fprintf(stderr, "ud_target: %s\n", what);
    abort();
}

static void on_emit(void *arg, const uint8_t *hdr, const uint8_t *payload, size_t len)
{
    (void)arg;
    uint8_t d[FUZZ_MTU];
    if (MCR_UD_HDR_LEN + len > sizeof(d))
        fail("emitted a datagram over the MTU");
    memcpy(d, hdr, MCR_UD_HDR_LEN);
    if (len > 0)
        memcpy(d + MCR_UD_HDR_LEN, payload, len);
    struct mcr_ud_hdr h;
    if (udr_parse(d, MCR_UD_HDR_LEN + len, &h) != UDR_OK)
        fail("emitted a datagram udr_parse refuses");
    if (h.conn_id != 0x200)
        fail("emitted a datagram for another peer");
}

static uint64_t delivered;

static void on_deliver(void *arg, const uint8_t *msg, size_t len)
{
    (void)arg;
    if (len > FUZZ_MAX_MSG)
        fail("delivered a message over max_msg");
    /* touch every byte: the sanitizers check the range */
    volatile uint8_t sum = 0;
    for (size_t i = 0; i < len; i++)
        sum ^= msg[i];
    (void)sum;
    delivered++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct udr_ops ops = {.emit = on_emit, .deliver = on_deliver};
    struct udr_config cfg;
    udr_config_defaults(&cfg, FUZZ_MTU);
    cfg.window = 8;
    cfg.ack_every = 2;
    cfg.max_msg = FUZZ_MAX_MSG;
    cfg.sendq_max = 2 * FUZZ_MAX_MSG;
    cfg.keepalive_us = 50000;
    cfg.local_conn_id = 0x100;
    cfg.peer_conn_id = 0x200;
    uint64_t now = 1000;
    struct udr_peer *p = udr_open(&cfg, &ops, NULL, now);
    if (p == NULL)
        fail("udr_open");
    static uint8_t out[600];
    if (udr_send(p, out, 10, now) != 0 || udr_send(p, out, sizeof(out), now) != 0)
        fail("udr_send");
    delivered = 0;
    uint64_t fed = 0, parsed_bad = 0;
    size_t at = 0;
    while (at + 2 <= size) {
        size_t n = mcr_le_get16(data + at);
        at += 2;
        if (n & 0x8000) {
            now += (uint64_t)(n & 0x7fff) * 100;
            udr_tick(p, now);
            continue;
        }
        if (n > size - at)
            n = size - at;
        struct mcr_ud_hdr h;
        enum udr_verdict v = udr_parse(data + at, n, &h);
        if (v == UDR_OK) {
            if (h.seg_len != n - MCR_UD_HDR_LEN)
                fail("udr_parse passed a length that does not match");
            udr_input(p, &h, data + at + MCR_UD_HDR_LEN, now);
        } else {
            parsed_bad++;
        }
        fed++;
        /* the whole path too, on the same bytes (a duplicate, mostly) */
        udr_receive(p, data + at, n, now);
        fed++;
        at += n;
    }
    const struct udr_stats *st = udr_stats(p);
    if (st->dgrams_received != fed - parsed_bad)
        fail("dgrams_received does not count every datagram");
    if (st->malformed < parsed_bad)
        fail("a refused datagram went uncounted");
    if (st->msgs_delivered != delivered)
        fail("msgs_delivered does not match the deliveries");
    if (st->bad_peer + st->out_of_window > st->malformed)
        fail("the drop counters do not add up");
    udr_close(p);
    return 0;
}
