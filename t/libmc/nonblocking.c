/* t/libmc/nonblocking.c: the non-blocking API against real servers
 * ($MC_SERVER): iset/iget/bset/bget, test/wait/wait_all, E2BIG into a small
 * buffer, bset buffer reuse, ordering with blocking calls, request reuse,
 * 10,000 requests in flight over three servers, batched sends keeping
 * issue order and blocking calls' view, a server killed with requests in
 * flight or still held back, a silent server (timeout), and fake servers
 * that send garbage or hang up mid-reply. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <libmemcached/memcached.h>

#include "server.h"
#include "tap.h"

#define MANY 10000

static memcached_st *client_for(struct test_server *servers, int n, bool binary)
{
    memcached_st *memc = memcached_create(NULL);
    for (int i = 0; i < n; i++)
        memcached_server_add(memc, "127.0.0.1", (in_port_t)servers[i].port);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, binary);
    return memc;
}

static bool start_three(struct test_server *servers)
{
    for (int i = 0; i < 3; i++)
        if (!test_server_start(&servers[i], false)) {
            ok(0, "start three servers");
            return false;
        }
    return true;
}

static int server_index(memcached_st *memc, struct test_server *servers, int nservers,
                        const char *key)
{
    memcached_return_t rc;
    const memcached_instance_st *inst = memcached_server_by_key(memc, key, strlen(key), &rc);
    for (int s = 0; s < nservers; s++)
        if (inst != NULL && memcached_server_port(inst) == servers[s].port)
            return s;
    return -1;
}

static void test_basics(memcached_st *memc)
{
    memcached_request_st *req = memcached_request_create(memc);
    ok(req != NULL, "request_create");
    static const char value[] = "nonblocking value";
    is_rc(memcached_iset(memc, "nb-1", 4, value, sizeof(value) - 1, 0, 5, req), MEMCACHED_SUCCESS,
          "iset issues");
    memcached_return_t t = memcached_test(memc, req);
    ok(t == MEMCACHED_IN_PROGRESS || t == MEMCACHED_SUCCESS, "test: in progress or done");
    is_rc(memcached_wait(memc, req), MEMCACHED_SUCCESS, "wait returns the set's result");
    is_rc(memcached_test(memc, req), MEMCACHED_SUCCESS, "test after completion");

    char buffer[64];
    is_rc(memcached_iget(memc, "nb-1", 4, buffer, sizeof(buffer), req), MEMCACHED_SUCCESS,
          "iget issues (request reused)");
    is_rc(memcached_wait(memc, req), MEMCACHED_SUCCESS, "iget completes");
    size_t len = 0;
    const char *v = memcached_request_value(req, &len);
    ok(v == buffer && len == sizeof(value) - 1 && memcmp(buffer, value, len) == 0,
       "iget delivered into the caller's buffer");
    ok(memcached_request_flags(req) == 5, "request_flags");
    ok(memcached_request_cas(req) != 0, "request_cas");

    char tiny[4];
    memcached_iget(memc, "nb-1", 4, tiny, sizeof(tiny), req);
    is_rc(memcached_wait(memc, req), MEMCACHED_E2BIG, "iget into a small buffer: E2BIG");
    memcached_request_value(req, &len);
    ok(len == sizeof(value) - 1, "request_value reports the full length (%zu)", len);

    is_rc(memcached_bget(memc, "nb-1", 4, req), MEMCACHED_SUCCESS, "bget issues");
    is_rc(memcached_wait(memc, req), MEMCACHED_SUCCESS, "bget completes");
    v = memcached_request_value(req, &len);
    ok(v != NULL && len == sizeof(value) - 1 && memcmp(v, value, len) == 0,
       "bget delivered into library memory");

    memcached_iget(memc, "nb-missing", 10, buffer, sizeof(buffer), req);
    is_rc(memcached_wait(memc, req), MEMCACHED_NOTFOUND, "iget of a missing key");
    is_rc(memcached_request_return(req), MEMCACHED_NOTFOUND, "request_return");

    is_rc(memcached_iset(memc, NULL, 0, "x", 1, 0, 0, req), MEMCACHED_BAD_KEY_PROVIDED,
          "iset with no key fails at once");

    /* bset copies: the caller may reuse its buffer immediately */
    char reuse[32];
    strcpy(reuse, "first contents");
    is_rc(memcached_bset(memc, "nb-bset", 7, reuse, strlen(reuse), 0, 0, req), MEMCACHED_SUCCESS,
          "bset issues");
    memset(reuse, 'X', sizeof(reuse));
    is_rc(memcached_wait(memc, req), MEMCACHED_SUCCESS, "bset completes");
    memcached_return_t rc;
    size_t got_len;
    uint32_t flags;
    char *got = memcached_get(memc, "nb-bset", 7, &got_len, &flags, &rc);
    ok(got != NULL && got_len == 14 && memcmp(got, "first contents", 14) == 0,
       "bset stored the value as it was at the call");
    free(got);

    /* a blocking call sees the effect of earlier non-blocking requests */
    memcached_iset(memc, "nb-order", 8, "v1", 2, 0, 0, req);
    got = memcached_get(memc, "nb-order", 8, &got_len, &flags, &rc);
    ok(got != NULL && got_len == 2 && memcmp(got, "v1", 2) == 0,
       "blocking get after iset (no wait) sees the set");
    free(got);
    is_rc(memcached_test(memc, req), MEMCACHED_SUCCESS, "the iset completed in order");

    /* an iset held behind an iget awaiting its reply: a small value is
     * copied when held, so its buffer may be reused at once */
    memcached_request_st *held = memcached_request_create(memc);
    char small[16] = "small value";
    memcached_iget(memc, "nb-held", 7, buffer, sizeof(buffer), req);
    is_rc(memcached_iset(memc, "nb-held", 7, small, 11, 0, 0, held), MEMCACHED_SUCCESS,
          "iset held behind an iget");
    memset(small, 'X', sizeof(small));
    is_rc(memcached_wait(memc, held), MEMCACHED_SUCCESS, "held iset completes");
    got = memcached_get(memc, "nb-held", 7, &got_len, &flags, &rc);
    ok(got != NULL && got_len == 11 && memcmp(got, "small value", 11) == 0,
       "a held small value was stored as it was at the call");
    free(got);
    memcached_request_free(held);
    memcached_request_free(req);
}

static void test_many(memcached_st *memc, struct test_server *servers, int nservers)
{
    memcached_request_st **reqs = calloc(MANY, sizeof(*reqs));
    char(*keys)[32] = calloc(MANY, 32);
    char(*bufs)[32] = calloc(MANY, 32);
    for (int i = 0; i < MANY; i++) {
        reqs[i] = memcached_request_create(memc);
        snprintf(keys[i], 32, "many-%d", i);
    }
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_REQUEST_WINDOW, 512);
    int issued = 0;
    time_t start = time(NULL);
    for (int i = 0; i < MANY; i++)
        if (memcached_iset(memc, keys[i], strlen(keys[i]), keys[i], strlen(keys[i]), 0, (uint32_t)i,
                           reqs[i]) == MEMCACHED_SUCCESS)
            issued++;
    int pending = 0;
    for (int i = 0; i < MANY; i++)
        if (memcached_request_return(reqs[i]) == MEMCACHED_IN_PROGRESS)
            pending++;
    ok(issued == MANY, "%d isets issued without waiting", issued);
    tap_diag("%d of them still in flight after issuing", pending);
    is_rc(memcached_wait_all(memc), MEMCACHED_SUCCESS, "wait_all");
    int good = 0;
    for (int i = 0; i < MANY; i++)
        if (memcached_request_return(reqs[i]) == MEMCACHED_SUCCESS)
            good++;
    ok(good == MANY, "all %d isets succeeded (%d)", MANY, good);

    for (int i = 0; i < MANY; i++)
        memcached_iget(memc, keys[i], strlen(keys[i]), bufs[i], 32, reqs[i]);
    memcached_wait_all(memc);
    good = 0;
    for (int i = 0; i < MANY; i++) {
        size_t len;
        const char *v = memcached_request_value(reqs[i], &len);
        if (memcached_request_return(reqs[i]) == MEMCACHED_SUCCESS && v == bufs[i] &&
            len == strlen(keys[i]) && memcmp(v, keys[i], len) == 0 &&
            memcached_request_flags(reqs[i]) == (uint32_t)i)
            good++;
    }
    ok(good == MANY, "all %d igets returned their own value (%d)", MANY, good);
    ok(time(NULL) - start < 60, "10,000 + 10,000 requests finished in bounded time");

    /* every server got a share */
    int per_server[8] = {0};
    for (int i = 0; i < MANY; i++) {
        int s = server_index(memc, servers, nservers, keys[i]);
        if (s >= 0)
            per_server[s]++;
    }
    ok(per_server[0] > 0 && per_server[1] > 0 && per_server[2] > 0,
       "keys spread over the three servers (%d/%d/%d)", per_server[0], per_server[1],
       per_server[2]);
    for (int i = 0; i < MANY; i++)
        memcached_request_free(reqs[i]);
    free(bufs);
    free(keys);
    free(reqs);
}

/* Requests queued on a stopped server, which is then killed: each request
 * completes exactly once, with an error; the other servers are unaffected. */
static void test_killed_server(bool binary)
{
    struct test_server servers[3];
    if (!start_three(servers))
        return;
    memcached_st *memc = client_for(servers, 3, binary);
    enum { N = 3000 };
    memcached_request_st **reqs = calloc(N, sizeof(*reqs));
    char(*keys)[32] = calloc(N, 32);
    size_t value_len = 4000;
    char *value = malloc(value_len);
    memset(value, 'v', value_len);
    /* make sure connections exist before the victim stops */
    memcached_version(memc);
    test_server_pause(&servers[1]);
    for (int i = 0; i < N; i++) {
        reqs[i] = memcached_request_create(memc);
        snprintf(keys[i], 32, "kill-%d", i);
        memcached_bset(memc, keys[i], strlen(keys[i]), value, value_len, 0, 0, reqs[i]);
    }
    int victim_pending = 0;
    bool *was_pending = calloc(N, sizeof(*was_pending));
    for (int i = 0; i < N; i++) {
        if (server_index(memc, servers, 3, keys[i]) == 1 &&
            memcached_request_return(reqs[i]) == MEMCACHED_IN_PROGRESS) {
            victim_pending++;
            was_pending[i] = true;
        }
    }
    ok(victim_pending > 0, "requests in flight on the stopped server (%d)", victim_pending);
    test_server_stop(&servers[1], true);
    memcached_wait_all(memc);
    int done = 0, failed_victim = 0, ok_victim = 0, ok_others = 0, others = 0;
    int pending_failed = 0;
    for (int i = 0; i < N; i++) {
        memcached_return_t rc = memcached_request_return(reqs[i]);
        if (rc != MEMCACHED_IN_PROGRESS)
            done++;
        if (was_pending[i] && rc != MEMCACHED_SUCCESS && rc != MEMCACHED_IN_PROGRESS)
            pending_failed++;
        if (server_index(memc, servers, 3, keys[i]) == 1) {
            if (rc == MEMCACHED_SUCCESS)
                ok_victim++;
            else
                failed_victim++;
        } else {
            others++;
            if (rc == MEMCACHED_SUCCESS)
                ok_others++;
        }
    }
    ok(done == N, "every request completed (%d of %d)", done, N);
    ok(pending_failed == victim_pending,
       "each request in flight on the killed server completed with an error (%d of %d)",
       pending_failed, victim_pending);
    ok(ok_victim + failed_victim + others == N, "no request lost or counted twice");
    free(was_pending);
    ok(ok_others == others, "requests on the other servers succeeded (%d of %d)", ok_others,
       others);
    for (int i = 0; i < N; i++)
        memcached_request_free(reqs[i]);
    free(value);
    free(keys);
    free(reqs);
    memcached_free(memc);
    test_server_stop(&servers[0], false);
    test_server_stop(&servers[2], false);
}

/* Per server, completed requests must be a prefix of the issue order.
 * Returns how many requests break that. */
static int order_violations(memcached_request_st **reqs, const int *srv_of, int n, int nservers)
{
    int violations = 0;
    for (int s = 0; s < nservers; s++) {
        bool pending_seen = false;
        for (int i = 0; i < n; i++) {
            if (srv_of[i] != s)
                continue;
            bool done = memcached_request_return(reqs[i]) != MEMCACHED_IN_PROGRESS;
            if (done && pending_seen)
                violations++;
            if (!done)
                pending_seen = true;
        }
    }
    return violations;
}

/* Polls with memcached_test until every request is done, checking the issue
 * order after each step. Returns the violations seen. */
static int drain_in_order(memcached_st *memc, memcached_request_st **reqs, const int *srv_of, int n,
                          int nservers)
{
    int violations = 0;
    time_t start = time(NULL);
    for (;;) {
        violations += order_violations(reqs, srv_of, n, nservers);
        int last_pending = -1;
        for (int i = n - 1; i >= 0 && last_pending < 0; i--)
            if (memcached_request_return(reqs[i]) == MEMCACHED_IN_PROGRESS)
                last_pending = i;
        if (last_pending < 0 || time(NULL) - start > 60)
            break;
        if (memcached_test(memc, reqs[last_pending]) == MEMCACHED_IN_PROGRESS)
            usleep(200);
    }
    return violations;
}

/* A burst of requests issued while others await replies is held back and
 * sent in batches: completions still come in issue order per server, and a
 * blocking get in the middle of the burst sees every earlier iset of its
 * key. */
static void test_batching(memcached_st *memc, struct test_server *servers, int nservers)
{
    memcached_request_st **reqs = calloc(MANY, sizeof(*reqs));
    char(*keys)[32] = calloc(MANY, 32);
    char(*values)[32] = calloc(MANY, 32);
    char(*bufs)[32] = calloc(MANY, 32);
    int *srv_of = calloc(MANY, sizeof(*srv_of));
    for (int i = 0; i < MANY; i++) {
        reqs[i] = memcached_request_create(memc);
        snprintf(keys[i], 32, "batch-%d", i % (MANY / 2)); /* every key set twice */
        snprintf(values[i], 32, "value-%d", i);
        srv_of[i] = server_index(memc, servers, nservers, keys[i]);
    }
    int blocking_seen = 0, blocking_gets = 0, issued = 0;
    for (int i = 0; i < MANY; i++) {
        if (memcached_iset(memc, keys[i], strlen(keys[i]), values[i], strlen(values[i]), 0,
                           (uint32_t)i, reqs[i]) == MEMCACHED_SUCCESS)
            issued++;
        if (i % 97 == 96) {
            /* request j is the newest iset of its key (from the second half
             * on, it overwrites one of the first), possibly still held back */
            int j = i - 37;
            memcached_return_t rc;
            size_t len;
            uint32_t flags;
            char *v = memcached_get(memc, keys[j], strlen(keys[j]), &len, &flags, &rc);
            blocking_gets++;
            if (v != NULL && len == strlen(values[j]) && memcmp(v, values[j], len) == 0 &&
                flags == (uint32_t)j)
                blocking_seen++;
            else
                tap_diag("blocking get of %s after iset %d: %s", keys[j], j,
                         memcached_strerror(memc, rc));
            free(v);
        }
    }
    ok(issued == MANY, "burst: %d isets issued", issued);
    ok(blocking_seen == blocking_gets,
       "burst: blocking gets in the middle saw the earlier isets (%d of %d)", blocking_seen,
       blocking_gets);
    int violations = drain_in_order(memc, reqs, srv_of, MANY, nservers);
    ok(violations == 0, "burst: isets completed in issue order per server (%d out of order)",
       violations);
    int good = 0;
    for (int i = 0; i < MANY; i++)
        if (memcached_request_return(reqs[i]) == MEMCACHED_SUCCESS)
            good++;
    ok(good == MANY, "burst: every iset succeeded (%d)", good);

    for (int i = 0; i < MANY; i++)
        memcached_iget(memc, keys[i], strlen(keys[i]), bufs[i], 32, reqs[i]);
    violations = drain_in_order(memc, reqs, srv_of, MANY, nservers);
    ok(violations == 0, "burst: igets completed in issue order per server (%d out of order)",
       violations);
    good = 0;
    for (int i = 0; i < MANY; i++) {
        int newest = i % (MANY / 2) + MANY / 2;
        size_t len;
        const char *v = memcached_request_value(reqs[i], &len);
        if (memcached_request_return(reqs[i]) == MEMCACHED_SUCCESS && v == bufs[i] &&
            len == strlen(values[newest]) && memcmp(v, values[newest], len) == 0)
            good++;
    }
    ok(good == MANY, "burst: every iget returned the last value set (%d)", good);
    for (int i = 0; i < MANY; i++)
        memcached_request_free(reqs[i]);
    free(srv_of);
    free(bufs);
    free(values);
    free(keys);
    free(reqs);
}

/* Requests held back behind one awaiting its reply, on a server that is then
 * killed: each completes exactly once, with an error, and the request
 * objects can be issued again to the servers still alive. */
static void test_killed_with_held_requests(bool binary)
{
    struct test_server servers[3];
    if (!start_three(servers))
        return;
    memcached_st *memc = client_for(servers, 3, binary);
    memcached_version(memc); /* connections exist before the victim stops */
    enum { N = 600 };
    memcached_request_st **reqs = calloc(N, sizeof(*reqs));
    char(*keys)[32] = calloc(N, 32);
    int *srv_of = calloc(N, sizeof(*srv_of));
    test_server_pause(&servers[1]);
    int on_victim = 0;
    for (int i = 0; i < N; i++) {
        reqs[i] = memcached_request_create(memc);
        snprintf(keys[i], 32, "held-%d", i);
        srv_of[i] = server_index(memc, servers, 3, keys[i]);
        if (srv_of[i] == 1)
            on_victim++;
        memcached_iset(memc, keys[i], strlen(keys[i]), keys[i], strlen(keys[i]), 0, 0, reqs[i]);
    }
    int pending = 0;
    for (int i = 0; i < N; i++)
        if (srv_of[i] == 1 && memcached_request_return(reqs[i]) == MEMCACHED_IN_PROGRESS)
            pending++;
    ok(on_victim > 1 && pending == on_victim,
       "every iset to the stopped server is pending (%d of %d)", pending, on_victim);
    test_server_stop(&servers[1], true);
    is_rc(memcached_wait_all(memc), MEMCACHED_SUCCESS, "wait_all returns");
    int victim_failed = 0, others = 0, others_ok = 0, still = 0;
    for (int i = 0; i < N; i++) {
        memcached_return_t rc = memcached_request_return(reqs[i]);
        if (rc == MEMCACHED_IN_PROGRESS)
            still++;
        else if (srv_of[i] == 1 && rc != MEMCACHED_SUCCESS)
            victim_failed++;
        else if (srv_of[i] != 1) {
            others++;
            if (rc == MEMCACHED_SUCCESS)
                others_ok++;
        }
    }
    ok(still == 0, "no request left pending (%d)", still);
    ok(victim_failed == on_victim,
       "each request on the killed server, held back or sent, failed (%d of %d)", victim_failed,
       on_victim);
    ok(others_ok == others, "requests on the live servers succeeded (%d of %d)", others_ok, others);
    /* completed exactly once: every request object is free to be reused */
    int reused = 0;
    for (int i = 0; i < N; i++) {
        if (srv_of[i] == 1)
            continue;
        if (memcached_iset(memc, keys[i], strlen(keys[i]), "again", 5, 0, 0, reqs[i]) ==
            MEMCACHED_SUCCESS)
            reused++;
    }
    memcached_wait_all(memc);
    int again_ok = 0;
    for (int i = 0; i < N; i++)
        if (srv_of[i] != 1 && memcached_request_return(reqs[i]) == MEMCACHED_SUCCESS)
            again_ok++;
    ok(reused == others && again_ok == others, "the requests were reused (%d, %d of %d)", reused,
       again_ok, others);
    for (int i = 0; i < N; i++)
        memcached_request_free(reqs[i]);
    free(srv_of);
    free(keys);
    free(reqs);
    memcached_free(memc);
    test_server_stop(&servers[0], false);
    test_server_stop(&servers[2], false);
}

/* Reads what arrives on fd within ms milliseconds (until `want` bytes). */
static size_t read_for(int fd, char *buf, size_t cap, size_t want, int ms)
{
    size_t got = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long left =
            ms - (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
        if (got >= want || got >= cap || left <= 0)
            return got;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, (int)left) <= 0)
            continue;
        ssize_t n = recv(fd, buf + got, cap - got, 0);
        if (n <= 0)
            return got;
        got += (size_t)n;
    }
}

/* The batching rule, seen from the server side (text protocol, a scripted
 * server): a request issued with nothing awaiting a reply goes out at once;
 * requests issued behind it are held until the next test or wait, then go out
 * together in issue order; held requests of a server that hangs up complete
 * with an error. */
static void test_batching_rule(void)
{
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t slen = sizeof(sin);
    if (listener < 0 || bind(listener, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
        listen(listener, 4) < 0 || getsockname(listener, (struct sockaddr *)&sin, &slen) < 0) {
        ok(0, "set up a scripted server");
        return;
    }
    memcached_st *memc = memcached_create(NULL);
    memcached_server_add(memc, "127.0.0.1", ntohs(sin.sin_port));
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 5000);
    enum { HELD = 20 };
    memcached_request_st *reqs[HELD + 1];
    char bufs[HELD + 1][16];
    for (int i = 0; i <= HELD; i++)
        reqs[i] = memcached_request_create(memc);
    memcached_iget(memc, "first", 5, bufs[0], sizeof(bufs[0]), reqs[0]);
    for (int i = 0; i < 50 && memcached_test(memc, reqs[0]) == MEMCACHED_IN_PROGRESS; i++)
        ; /* the connect finishes inside the poll loop */
    int fd = accept(listener, NULL, NULL);
    char got[4096];
    size_t n = read_for(fd, got, sizeof(got), 12, 2000);
    ok(n == 12 && memcmp(got, "gets first\r\n", 12) == 0,
       "a request with nothing awaiting a reply is sent at once");

    char expect[4096];
    size_t expect_len = 0;
    for (int i = 1; i <= HELD; i++) {
        char key[16];
        int kl = snprintf(key, sizeof(key), "held%02d", i);
        memcached_iget(memc, key, (size_t)kl, bufs[i], sizeof(bufs[i]), reqs[i]);
        expect_len +=
            (size_t)snprintf(expect + expect_len, sizeof(expect) - expect_len, "gets %s\r\n", key);
    }
    n = read_for(fd, got, sizeof(got), 1, 200);
    ok(n == 0, "requests issued behind it are held back (%zu bytes arrived)", n);
    is_rc(memcached_test(memc, reqs[HELD]), MEMCACHED_IN_PROGRESS, "test of a held request");
    n = read_for(fd, got, sizeof(got), expect_len, 2000);
    ok(n == expect_len && memcmp(got, expect, n) == 0,
       "memcached_test sent the held requests in issue order (%zu of %zu bytes)", n, expect_len);
    /* answer the first two: they complete, the others wait */
    static const char two[] = "VALUE first 0 1 7\r\nA\r\nEND\r\nEND\r\n";
    ok(send(fd, two, sizeof(two) - 1, 0) == (ssize_t)(sizeof(two) - 1), "scripted replies sent");
    is_rc(memcached_wait(memc, reqs[1]), MEMCACHED_NOTFOUND, "second request answered");
    is_rc(memcached_request_return(reqs[0]), MEMCACHED_SUCCESS, "first request answered first");

    /* hold more behind the ones awaiting replies, then the server hangs up */
    memcached_request_st *late[5];
    for (int i = 0; i < 5; i++) {
        late[i] = memcached_request_create(memc);
        memcached_iset(memc, "late", 4, "v", 1, 0, 0, late[i]);
    }
    n = read_for(fd, got, sizeof(got), 1, 200);
    ok(n == 0, "more requests held back (%zu bytes arrived)", n);
    close(fd);
    is_rc(memcached_wait_all(memc), MEMCACHED_SUCCESS, "wait_all after the hang-up");
    int failed = 0;
    for (int i = 2; i <= HELD; i++)
        if (memcached_request_return(reqs[i]) != MEMCACHED_SUCCESS &&
            memcached_request_return(reqs[i]) != MEMCACHED_IN_PROGRESS)
            failed++;
    for (int i = 0; i < 5; i++)
        if (memcached_request_return(late[i]) != MEMCACHED_SUCCESS &&
            memcached_request_return(late[i]) != MEMCACHED_IN_PROGRESS)
            failed++;
    ok(failed == HELD - 1 + 5, "sent and held requests all completed with an error (%d of %d)",
       failed, HELD - 1 + 5);
    for (int i = 0; i < 5; i++)
        memcached_request_free(late[i]);
    for (int i = 0; i <= HELD; i++)
        memcached_request_free(reqs[i]);
    memcached_free(memc);
    close(listener);
}

static void test_silent_server(void)
{
    struct test_server s;
    if (!test_server_start(&s, false)) {
        ok(0, "start a server");
        return;
    }
    memcached_st *memc = client_for(&s, 1, false);
    is_rc(memcached_version(memc), MEMCACHED_SUCCESS, "connected to the server");
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 300);
    test_server_pause(&s);
    memcached_return_t rc;
    size_t len;
    uint32_t flags;
    time_t start = time(NULL);
    char *v = memcached_get(memc, "silent", 6, &len, &flags, &rc);
    ok(v == NULL, "no value from a silent server");
    is_rc(rc, MEMCACHED_TIMEOUT, "a server that never answers times out");
    ok(time(NULL) - start <= 3, "within the poll timeout");
    test_server_resume(&s);
    memcached_free(memc);
    test_server_stop(&s, false);
}

static void test_fake(const char *what, const char *reply, size_t len, bool hang_up, bool binary,
                      memcached_return_t want)
{
    struct fake_server f;
    if (!fake_server_start(&f, reply, len, hang_up)) {
        ok(0, "start fake server");
        return;
    }
    memcached_st *memc = memcached_create(NULL);
    memcached_server_add(memc, "127.0.0.1", (in_port_t)f.port);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, binary);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 500);
    memcached_return_t rc;
    size_t vlen;
    uint32_t flags;
    char *v = memcached_get(memc, "fake", 4, &vlen, &flags, &rc);
    ok(v == NULL, "%s: no value", what);
    is_rc(rc, want, what);
    free(v);
    memcached_free(memc);
    fake_server_stop(&f);
}

/* A listener whose accept queue is full drops new connection attempts, so
 * connecting can only end by the connect timeout. */
static void test_connect_timeout(void)
{
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    int fillers[4];
    if (listener < 0 || bind(listener, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
        listen(listener, 0) < 0 || getsockname(listener, (struct sockaddr *)&sin, &len) < 0) {
        ok(0, "set up a listener that never accepts");
        return;
    }
    for (int i = 0; i < 4; i++) {
        fillers[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        (void)connect(fillers[i], (struct sockaddr *)&sin, sizeof(sin));
    }
    usleep(100000);
    memcached_st *memc = memcached_create(NULL);
    memcached_server_add(memc, "127.0.0.1", ntohs(sin.sin_port));
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, 300);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memcached_return_t rc = memcached_set(memc, "k", 1, "v", 1, 0, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long ms = (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
    is_rc(rc, MEMCACHED_TIMEOUT, "a connection that is never accepted times out");
    ok(ms >= 250 && ms < 3000, "after about the connect timeout (%ld ms)", ms);

    /* issuing does not wait for the connection: the request carries the timeout */
    memcached_st *nb = memcached_create(NULL);
    memcached_server_add(nb, "127.0.0.1", ntohs(sin.sin_port));
    memcached_behavior_set(nb, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, 300);
    memcached_request_st *req = memcached_request_create(nb);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memcached_return_t issued = memcached_iset(nb, "k", 1, "v", 1, 0, 0, req);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ms = (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
    is_rc(issued, MEMCACHED_SUCCESS, "iset to a server still connecting is issued");
    ok(ms < 200, "without waiting for the connection (%ld ms)", ms);
    is_rc(memcached_test(nb, req), MEMCACHED_IN_PROGRESS, "pending while connecting");
    is_rc(memcached_wait(nb, req), MEMCACHED_TIMEOUT, "then completes with the connect timeout");
    memcached_request_free(req);
    memcached_free(nb);
    memcached_free(memc);
    for (int i = 3; i >= 0; i--)
        close(fillers[i]);
    close(listener);
}

int main(void)
{
    struct test_server servers[3];
    for (int i = 0; i < 3; i++) {
        if (!test_server_start(&servers[i], false)) {
            printf("1..0 # SKIP cannot start the servers\n");
            return 0;
        }
    }
    for (int binary = 0; binary < 2; binary++) {
        tap_diag("%s protocol", binary ? "binary" : "text");
        memcached_st *memc = client_for(servers, 1, binary);
        test_basics(memc);
        memcached_free(memc);
        memc = client_for(servers, 3, binary);
        test_many(memc, servers, 3);
        memcached_free(memc);
        memc = client_for(servers, 3, binary);
        test_batching(memc, servers, 3);
        memcached_free(memc);
        test_killed_server(binary);
        test_killed_with_held_requests(binary);
    }
    for (int i = 0; i < 3; i++)
        test_server_stop(&servers[i], false);
    test_silent_server();
    test_batching_rule();

    static const char garbage[] = "HELLO THERE\r\n";
    test_fake("garbage reply (text)", garbage, sizeof(garbage) - 1, false, false,
              MEMCACHED_UNKNOWN_READ_FAILURE);
    test_fake("garbage reply (binary)", garbage, sizeof(garbage) - 1, false, true,
              MEMCACHED_PROTOCOL_ERROR);
    static const char cut[] = "VALUE fake 0 100\r\nonly part of it";
    test_fake("server hangs up mid-value", cut, sizeof(cut) - 1, true, false,
              MEMCACHED_CONNECTION_FAILURE);
    /* binary: a GET response header (opaque 1: the client's first request)
     * promising 4 bytes of flags and a 100-byte value, then only part of it */
    static const char cut_binary[] = "\x81\x00\x00\x00\x04\x00\x00\x00"
                                     "\x00\x00\x00\x68\x00\x00\x00\x01"
                                     "\x00\x00\x00\x00\x00\x00\x00\x00"
                                     "\x00\x00\x00\x00"
                                     "only part of it";
    test_fake("server hangs up mid-value (binary)", cut_binary, sizeof(cut_binary) - 1, true, true,
              MEMCACHED_CONNECTION_FAILURE);
    static const char wrong_trailer[] = "VALUE fake 0 2\r\nabXYEND\r\n";
    test_fake("value without its CRLF", wrong_trailer, sizeof(wrong_trailer) - 1, false, false,
              MEMCACHED_UNKNOWN_READ_FAILURE);
    test_fake("server that accepts and never answers", NULL, 0, false, false, MEMCACHED_TIMEOUT);
    test_connect_timeout();
    return done_testing();
}
