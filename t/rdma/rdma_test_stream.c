/* t/rdma/rdma_test_stream.c: the byte stream over messages (rdma/stream.h)
 * and the RNDV_DONE payload (include/mcr/rdma_wire.h): the byte queue
 * keeps the order across growth and moves, every type and flag
 * combination is sorted (the ones no peer sends as bad, an RNDV_DONE
 * without its count too), and pushing output through a sink that takes
 * whole messages, stops, fails or takes another count (as a rendezvous
 * does) hands on every byte once, in order. Pure code: runs anywhere. */
#include <string.h>

#include "rdma/stream.h"
#include "t/rdma/tap.h"

static void test_bytes(void)
{
    struct mcr_rdma_bytes b = {0};
    char in[100000], out[100000];
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (char)(i * 13 + i / 251);
    /* appends and takes of odd sizes, the queue growing and moving its
     * bytes to the front: what comes out is what went in */
    size_t put = 0, got = 0;
    bool ok = true;
    for (unsigned round = 0; put < sizeof(in); round++) {
        size_t n = 1 + (round * 977) % 7000;
        if (n > sizeof(in) - put)
            n = sizeof(in) - put;
        ok = ok && mcr_rdma_bytes_append(&b, in + put, n);
        put += n;
        got += mcr_rdma_bytes_take(&b, out + got, (round * 541) % 5000);
    }
    got += mcr_rdma_bytes_take(&b, out + got, sizeof(out));
    tap_ok(ok && got == sizeof(in) && memcmp(in, out, got) == 0 && b.len == 0 && b.off == 0,
           "byte queue: 100,000 bytes in odd pieces come out in order (%zu)", got);
    tap_ok(mcr_rdma_bytes_append(&b, in, 0) && b.len == 0, "byte queue: an empty append is fine");
    ok = mcr_rdma_bytes_append(&b, in, 10) && mcr_rdma_bytes_take(&b, NULL, 4) == 4 && b.len == 6 &&
         mcr_rdma_bytes_take(&b, out, 100) == 6 && memcmp(out, in + 4, 6) == 0;
    tap_ok(ok, "byte queue: take with no buffer drops bytes");
    size_t cap = b.cap;
    ok = mcr_rdma_bytes_append(&b, in, 16) && mcr_rdma_bytes_take(&b, NULL, 15) == 15 &&
         mcr_rdma_bytes_reserve(&b, cap - 1) && b.off == 0 && b.len == 1 && b.cap == cap &&
         b.buf[0] == in[15];
    tap_ok(ok, "byte queue: reserve moves the bytes to the front before growing");
    mcr_rdma_bytes_free(&b);
    tap_ok(b.buf == NULL && b.cap == 0, "byte queue: freed");
}

static enum mcr_rdma_stream_kind kind_of(uint8_t type, uint16_t flags, const void *payload,
                                         uint32_t len, struct mcr_rdma_stream_in *in)
{
    struct mcr_rdma_msg m = {
        .type = type, .flags = flags, .request_id = 7, .payload = payload, .payload_len = len};
    return mcr_rdma_stream_classify(&m, in);
}

static void test_classify(void)
{
    struct mcr_rdma_stream_in in;
    const char text[] = "get a\r\n";
    tap_ok(kind_of(MCR_RDMA_MSG_EAGER, 0, text, 7, &in) == MCR_RDMA_IN_BYTES && in.bytes == text &&
               in.len == 7,
           "EAGER: stream bytes");
    tap_ok(kind_of(MCR_RDMA_MSG_EAGER, MCR_RDMA_F_READ_DONE, text, 7, &in) ==
                   MCR_RDMA_IN_READ_DONE &&
               in.len == 7,
           "EAGER + READ_DONE: ends a READ region, its payload is stream bytes");
    const unsigned char move[2] = {MCR_RDMA_CTL_MOVE, MCR_RDMA_MOVE_TO_UD};
    tap_ok(kind_of(MCR_RDMA_MSG_EAGER, MCR_RDMA_F_CONTROL, move, 2, &in) == MCR_RDMA_IN_CONTROL &&
               in.bytes == move && in.len == 2,
           "EAGER + CONTROL: a control record, not stream bytes");
    tap_ok(kind_of(MCR_RDMA_MSG_EAGER, MCR_RDMA_F_CONTROL, move, 0, &in) == MCR_RDMA_IN_BAD,
           "EAGER + CONTROL without a record: bad");
    unsigned char done[4 + 5];
    mcr_rdma_done_encode_count(70000, done);
    memcpy(done + 4, "head!", 5);
    tap_ok(kind_of(MCR_RDMA_MSG_EAGER, MCR_RDMA_F_RNDV_DONE, done, 9, &in) ==
                   MCR_RDMA_IN_WRITE_DONE &&
               in.done.count == 70000 && in.len == 5 && memcmp(in.bytes, "head!", 5) == 0,
           "EAGER + RNDV_DONE: the count (little-endian), then the bytes before the written ones");
    tap_ok(done[0] == 0x70 && done[1] == 0x11 && done[2] == 0x01 && done[3] == 0,
           "the RNDV_DONE count is little-endian on the wire");
    tap_ok(kind_of(MCR_RDMA_MSG_EAGER, MCR_RDMA_F_RNDV_DONE | MCR_RDMA_F_VALUE, done, 4, &in) ==
                   MCR_RDMA_IN_VALUE_DONE &&
               in.done.count == 70000 && in.len == 0,
           "EAGER + RNDV_DONE + VALUE: a value region ended, no head");
    tap_ok(kind_of(MCR_RDMA_MSG_EAGER, MCR_RDMA_F_RNDV_DONE, done, 3, &in) == MCR_RDMA_IN_BAD,
           "RNDV_DONE shorter than its count: bad");
    tap_ok(kind_of(MCR_RDMA_MSG_EAGER, MCR_RDMA_F_RNDV_DONE, NULL, 0, &in) == MCR_RDMA_IN_BAD,
           "RNDV_DONE without payload: bad");
    mcr_rdma_done_encode_count(0, done);
    tap_ok(kind_of(MCR_RDMA_MSG_EAGER, MCR_RDMA_F_RNDV_DONE, done, 4, &in) == MCR_RDMA_IN_BAD,
           "RNDV_DONE that counts nothing: bad");
    tap_ok(kind_of(MCR_RDMA_MSG_RNDV_WRITE, 0, text, 7, &in) == MCR_RDMA_IN_LANDING && in.len == 7,
           "RNDV_WRITE: a landing region, its payload stream bytes");
    tap_ok(kind_of(MCR_RDMA_MSG_RNDV_WRITE, MCR_RDMA_F_VALUE, NULL, 0, &in) ==
               MCR_RDMA_IN_VALUE_REGION,
           "RNDV_WRITE + VALUE: a value region");
    tap_ok(kind_of(MCR_RDMA_MSG_RNDV_READ, 0, text, 7, &in) == MCR_RDMA_IN_READ_REGION &&
               in.len == 7,
           "RNDV_READ: the next bytes are in the region, the payload comes first");
    /* every other combination of type and flags */
    int bad = 0, seen = 0;
    for (unsigned type = 0; type < 8; type++) {
        for (unsigned flags = 0; flags < 16; flags++) {
            bool valid =
                (type == MCR_RDMA_MSG_EAGER &&
                 (flags == 0 || flags == MCR_RDMA_F_READ_DONE || flags == MCR_RDMA_F_RNDV_DONE ||
                  flags == (MCR_RDMA_F_RNDV_DONE | MCR_RDMA_F_VALUE) ||
                  flags == MCR_RDMA_F_CONTROL)) ||
                (type == MCR_RDMA_MSG_RNDV_WRITE && (flags == 0 || flags == MCR_RDMA_F_VALUE)) ||
                (type == MCR_RDMA_MSG_RNDV_READ && flags == 0);
            if (valid)
                continue;
            seen++;
            mcr_rdma_done_encode_count(1, done);
            if (kind_of((uint8_t)type, (uint16_t)flags, done, 4, &in) != MCR_RDMA_IN_BAD)
                bad++;
        }
    }
    tap_ok(bad == 0, "the %d other combinations of type and flags (CREDIT too) are bad (%d not)",
           seen, bad);
}

/* A sink that glues what it is handed into out, taking whole messages
 * until stop_after bytes, failing at fail_at, or taking a fixed larger
 * count when a message starts at rendezvous_at (as a rendezvous takes
 * more than one message's worth). */
struct sink {
    char *out;
    size_t at;
    size_t stop_after, fail_at, rendezvous_at, rendezvous_len;
    int calls, whole_calls;
};

static ssize_t take(void *owner, const struct mcr_rdma_stream_out *out, const struct iovec *msg_iov,
                    int n, size_t msg_len, bool whole)
{
    struct sink *s = owner;
    s->calls++;
    s->whole_calls += whole;
    if (s->at >= s->stop_after)
        return 0;
    if (s->at >= s->fail_at)
        return -1;
    if (s->at == s->rendezvous_at) {
        /* copy rendezvous_len bytes of the stream from out->at on */
        struct mcr_rdma_iov_pos pos = out->at;
        struct iovec piece[MCR_RDMA_MSG_IOV_MAX];
        size_t left = s->rendezvous_len;
        while (left > 0) {
            int k;
            size_t len = mcr_rdma_iov_cut(out->iov, out->iovcnt, &pos, left, piece, &k);
            if (len == 0)
                break;
            for (int i = 0; i < k; i++) {
                memcpy(s->out + s->at, piece[i].iov_base, piece[i].iov_len);
                s->at += piece[i].iov_len;
            }
            left -= len;
        }
        return (ssize_t)s->rendezvous_len;
    }
    size_t sum = 0;
    for (int i = 0; i < n; i++) {
        memcpy(s->out + s->at, msg_iov[i].iov_base, msg_iov[i].iov_len);
        s->at += msg_iov[i].iov_len;
        sum += msg_iov[i].iov_len;
    }
    return sum == msg_len ? (ssize_t)msg_len : -1;
}

static void test_push(void)
{
    static char data[200000], out[200000];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (char)(i * 7 + i / 1000);
    struct iovec iov[5] = {
        {data, 24}, {data + 24, 0}, {data + 24, 5}, {data + 29, 150000}, {data + 150029, 2}};
    size_t all = 150031;
    bool failed;

    struct sink s = {
        .out = out, .stop_after = SIZE_MAX, .fail_at = SIZE_MAX, .rendezvous_at = SIZE_MAX};
    size_t n = mcr_rdma_stream_push(iov, 1, 8164, take, &s, &failed);
    tap_ok(n == 24 && !failed && s.calls == 1 && s.whole_calls == 1 && memcmp(out, data, 24) == 0,
           "push: output that fits one message goes whole, from the caller's iovecs");

    s = (struct sink){
        .out = out, .stop_after = SIZE_MAX, .fail_at = SIZE_MAX, .rendezvous_at = SIZE_MAX};
    n = mcr_rdma_stream_push(iov, 5, 8164, take, &s, &failed);
    tap_ok(n == all && !failed && s.at == all && memcmp(out, data, all) == 0 &&
               s.whole_calls == 0 && s.calls == (int)((all + 8163) / 8164),
           "push: large output in %d messages of at most 8164 bytes, in order", s.calls);

    s = (struct sink){
        .out = out, .stop_after = 3 * 8164, .fail_at = SIZE_MAX, .rendezvous_at = SIZE_MAX};
    n = mcr_rdma_stream_push(iov, 5, 8164, take, &s, &failed);
    tap_ok(n == 3 * 8164 && !failed, "push: a sink that stops (no room) ends it, bytes so far");

    s = (struct sink){
        .out = out, .stop_after = SIZE_MAX, .fail_at = 2 * 8164, .rendezvous_at = SIZE_MAX};
    n = mcr_rdma_stream_push(iov, 5, 8164, take, &s, &failed);
    tap_ok(n == 2 * 8164 && failed, "push: a sink that fails ends it, and says so");

    s = (struct sink){.out = out,
                      .stop_after = SIZE_MAX,
                      .fail_at = SIZE_MAX,
                      .rendezvous_at = 8164,
                      .rendezvous_len = 100000};
    n = mcr_rdma_stream_push(iov, 5, 8164, take, &s, &failed);
    tap_ok(n == all && !failed && s.at == all && memcmp(out, data, all) == 0,
           "push: a sink that takes more than the message (a rendezvous) is followed on from "
           "there, every byte once");

    s = (struct sink){
        .out = out, .stop_after = SIZE_MAX, .fail_at = SIZE_MAX, .rendezvous_at = SIZE_MAX};
    n = mcr_rdma_stream_push(iov + 1, 1, 8164, take, &s, &failed);
    tap_ok(n == 0 && !failed && s.calls == 0, "push: empty output calls no sink");
}

int main(void)
{
    test_bytes();
    test_classify();
    test_push();
    tap_no_plan_end();
    return tap_failed == 0 ? 0 : 1;
}
