/* t/libmc/fuzz_replies.c: the reply parsers against damaged input. A fake
 * server answers each request with a valid reply (text or binary) that has
 * been cut, had bytes flipped, inserted or duplicated, or with random bytes;
 * every call must come back within its timeout with a defined return code,
 * and a clean reply afterwards must still work on a fresh client. Runs are
 * bounded in count and time; the sanitizer build turns any memory error
 * into a failure. The seed is printed so a failure can be replayed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libmemcached/memcached.h>

#include "server.h"
#include "tap.h"

#define ROUNDS 120

/* valid for a get of "fake" and for an mget of "fake" and "other" */
static const char text_reply[] = "VALUE fake 7 5 99\r\nhello\r\nEND\r\n";

/* GET response, opaque 1, flags 7, value "hello" */
static const unsigned char bin_reply[] = {0x81, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00,
                                          0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
                                          0x00, 0x00, 0x00, 0x00, 0x00, 0x63, 0x00, 0x00, 0x00,
                                          0x07, 'h',  'e',  'l',  'l',  'o'};

static size_t mutate(char *out, size_t cap, const char *in, size_t len)
{
    size_t n = len < cap ? len : cap;
    memcpy(out, in, n);
    switch (random() % 5) {
    case 0: /* cut */
        return (size_t)random() % (n + 1);
    case 1: /* flip some bytes */
        for (int i = 0; i < 1 + random() % 4; i++)
            out[random() % n] = (char)random();
        return n;
    case 2: /* insert a byte */
        if (n < cap) {
            size_t at = (size_t)random() % n;
            memmove(out + at + 1, out + at, n - at);
            out[at] = (char)random();
            n++;
        }
        return n;
    case 3: /* duplicate the tail */
        if (n * 2 <= cap) {
            size_t from = (size_t)random() % n;
            memcpy(out + n, out + from, n - from);
            n += n - from;
        }
        return n;
    default: /* random bytes */
        n = 1 + (size_t)random() % 64;
        for (size_t i = 0; i < n; i++)
            out[i] = (char)random();
        return n;
    }
}

static bool run_one(const char *reply, size_t len, bool binary, bool hang_up, int *rc_out)
{
    struct fake_server f;
    if (!fake_server_start(&f, reply, len, hang_up))
        return false;
    memcached_st *memc = memcached_create(NULL);
    memcached_server_add(memc, "127.0.0.1", (in_port_t)f.port);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, binary);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 100);
    memcached_return_t rc;
    if (random() % 2) {
        size_t vlen;
        uint32_t flags;
        char *v = memcached_get(memc, "fake", 4, &vlen, &flags, &rc);
        free(v);
    } else {
        const char *keys[] = {"fake", "other"};
        size_t lengths[] = {4, 5};
        rc = memcached_mget(memc, keys, lengths, 2);
        memcached_result_st *r;
        memcached_return_t frc;
        int guard = 0;
        while (guard++ < 16 && (r = memcached_fetch_result(memc, NULL, &frc)) != NULL)
            memcached_result_free(r);
    }
    memcached_free(memc);
    fake_server_stop(&f);
    *rc_out = (int)rc;
    return true;
}

static void fuzz(bool binary, const char *valid, size_t valid_len)
{
    char buf[512];
    int defined = 0, started = 0, worst_ms = 0;
    for (int i = 0; i < ROUNDS; i++) {
        size_t n = mutate(buf, sizeof(buf), valid, valid_len);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int rc;
        if (!run_one(buf, n, binary, random() % 4 != 0, &rc))
            continue;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        int ms = (int)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
        if (ms > worst_ms)
            worst_ms = ms;
        started++;
        defined += rc >= 0 && rc < MEMCACHED_MAXIMUM_RETURN;
    }
    const char *name = binary ? "binary" : "text";
    ok(started == ROUNDS, "%s: %d damaged replies served", name, started);
    ok(defined == started, "%s: every call returned a defined code", name);
    ok(worst_ms < 3000, "%s: every call came back in bounded time (worst %d ms)", name, worst_ms);
    int rc = -1;
    bool served = run_one(valid, valid_len, binary, false, &rc);
    ok(served && rc == MEMCACHED_SUCCESS, "%s: the undamaged reply still parses (%d)", name, rc);
}

int main(void)
{
    unsigned seed =
        getenv("FUZZ_SEED") ? (unsigned)atoi(getenv("FUZZ_SEED")) : (unsigned)time(NULL);
    srandom(seed);
    tap_diag("seed %u (set FUZZ_SEED to replay)", seed);
    fuzz(false, text_reply, sizeof(text_reply) - 1);
    fuzz(true, (const char *)bin_reply, sizeof(bin_reply));
    return done_testing();
}
