/* t/rdma/rdma_test_client_close.c: libmemcached-rdma clients whose
 * connections close or whose servers stop or are killed, against
 * memcached-rdma inside the Soft-RoCE guest:
 *   rdma_test_client_close SERVER_BINARY
 *
 * A server killed with requests in flight (they complete with
 * MEMCACHED_CONNECTION_FAILURE; after a restart the next call reconnects;
 * killed mid-request over rdma+rc:// and rdma+ud://, the error messages
 * name the RDMA cause), an idle connection closed by the server
 * (-o idle_timeout), a client that only polls with memcached_test, stores
 * that expect no reply before a close, a quit and a flush, the drain of a
 * close bounded by one poll timeout, noreply stores on their way to a
 * stopped server, and (over UD) a reply slower than the client's idle
 * time. Each part starts servers of its own.
 *
 * With MC_RDMA_SCHEME=rdma+ud the whole runs over UD: the connection
 * counts are rdma_ud_peers, the client sets up a peer unused for 5 s
 * anew, and the checks of stores waiting for a stopped server's credits
 * are skipped (UD gives a server silent for 5 s up). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libmemcached/memcached.h>
#include <libmemcached/nonblocking.h>

#include "mcr/rdma_wire.h"
#include "t/rdma/mc_client.h"
#include "t/rdma/mc_server.h"
#include "t/rdma/proc.h"
#include "t/rdma/tap.h"

/* Sets keys prefix0 .. prefix<count-1> to their own names; how many
 * calls returned SUCCESS. */
static int set_keys(memcached_st *m, const char *prefix, int count)
{
    int stored = 0;
    for (int i = 0; i < count; i++) {
        char key[32];
        int kl = snprintf(key, sizeof(key), "%s%d", prefix, i);
        stored += memcached_set(m, key, (size_t)kl, key, (size_t)kl, 0, 0) == MEMCACHED_SUCCESS;
    }
    return stored;
}

/* How many of keys prefix0 .. prefix<count-1> the server holds. */
static int keys_present(memcached_st *m, const char *prefix, int count)
{
    int present = 0;
    for (int i = 0; i < count; i++) {
        char key[32];
        int kl = snprintf(key, sizeof(key), "%s%d", prefix, i);
        present += memcached_exist(m, key, (size_t)kl) == MEMCACHED_SUCCESS;
    }
    return present;
}

static double wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A server killed with 50 requests of ours in flight (stopped first, so
 * that they are on their way): all complete with CONNECTION_FAILURE; the
 * server restarted on the same ports, the next call reconnects. */
static void server_killed_in_flight(unsigned tcp_port, unsigned rdma_port)
{
    struct server s;
    memcached_return_t rc;
    server_start(&s, tcp_port, rdma_port);
    memcached_st *mk = rdma_client(&s);
    memcached_behavior_set(mk, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 0);
    memcached_behavior_set(mk, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 20000);
    tap_ok(memcached_set(mk, "before", 6, "1", 1, 0, 0) == MEMCACHED_SUCCESS,
           "client connected to the second server");
    kill(s.pid, SIGSTOP);
    usleep(300000); /* stopped for sure before the requests go out */
    memcached_request_st *inflight[50];
    char kb[50][16];
    for (int i = 0; i < 50; i++) {
        inflight[i] = memcached_request_create(mk);
        memcached_iget(mk, "before", 6, kb[i], sizeof(kb[i]), inflight[i]);
    }
    for (int i = 0; i < 50; i++)
        memcached_test(mk, inflight[i]);
    server_stop(&s, SIGKILL);
    int failed = 0;
    for (int i = 0; i < 50; i++) {
        memcached_return_t r = memcached_wait(mk, inflight[i]);
        if (r == MEMCACHED_CONNECTION_FAILURE)
            failed++;
        else if (failed == 0 && i == 0)
            tap_diag("first in-flight request: %s", memcached_strerror(mk, r));
        memcached_request_free(inflight[i]);
    }
    tap_ok(failed == 50,
           "a killed server completes 50 in-flight requests with "
           "CONNECTION_FAILURE (%d)",
           failed);
    server_start(&s, tcp_port, rdma_port);
    rc = memcached_set(mk, "after", 5, "2", 1, 0, 0);
    if (rc != MEMCACHED_SUCCESS) /* one failed connect may be counted first */
        rc = memcached_set(mk, "after", 5, "2", 1, 0, 0);
    tap_ok(rc == MEMCACHED_SUCCESS, "after a restart the next call reconnects (%s)",
           memcached_strerror(mk, rc));
    memcached_free(mk);
    server_stop(&s, SIGTERM);
}

/* Stores that expect no reply complete once the transport took their
 * bytes; over RDMA those may still wait for credit when the program
 * closes the client or flushes and then goes quiet. As over a socket,
 * whose kernel still delivers what was written, they must reach the
 * server: memcached_free and memcached_quit send them first, and so does
 * memcached_flush_buffers. */
static void stores_before_close(unsigned tcp_port, unsigned rdma_port)
{
    enum { N = 400 };
    struct server s;
    server_start_with(&s, tcp_port, rdma_port, "1", NULL, NULL);
    memcached_st *check = rdma_client(&s);
    size_t big_len = 3000000;
    char *big = malloc(big_len);
    fill_bytes(big, big_len, 55);

    memcached_st *m = rdma_client(&s);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_NOREPLY, 1);
    int took = set_keys(m, "nr", N);
    took += memcached_set(m, "nrbig", 5, big, big_len, 0, 0) == MEMCACHED_SUCCESS;
    memcached_free(m); /* at once: no call in between sends what waits */
    size_t len = 0;
    memcached_return_t rc;
    char *got = memcached_get(check, "nrbig", 5, &len, &(uint32_t){0}, &rc);
    int present = keys_present(check, "nr", N);
    tap_ok(took == N + 1 && present == N && got && len == big_len && memcmp(got, big, len) == 0,
           "noreply sets (%d of 400 small, and 3 MB) reach the server when the client is freed "
           "right after them",
           present);
    free(got);

    m = rdma_client(&s);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_NOREPLY, 1);
    set_keys(m, "nq", N);
    memcached_quit(m);
    present = keys_present(check, "nq", N);
    tap_ok(present == N, "and when it quits (%d of %d)", present, N);
    memcached_free(m);

    m = rdma_client(&s);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_BUFFER_REQUESTS, 1);
    set_keys(m, "nf", N);
    rc = memcached_flush_buffers(m);
    usleep(300000); /* the program goes quiet: nothing pushes them any more */
    present = keys_present(check, "nf", N);
    tap_ok(rc == MEMCACHED_SUCCESS && present == N,
           "buffered sets are all on the server after memcached_flush_buffers (%d of %d)", present,
           N);
    memcached_free(m);
    memcached_free(check);
    free(big);
    server_stop(&s, SIGTERM);
}

/* Draining before a close waits one poll timeout in all, not one per
 * server: two servers stopped (SIGSTOP) with noreply stores waiting for
 * their credits, and memcached_free returns after about one timeout. */
static void drain_bounded(unsigned base)
{
    if (rdma_over_ud()) {
        tap_skip("RC only: over UD a noreply store waits for the server's ack when it is sent, "
                 "and a server silent for the dead timeout (5 s) is given up, with what waited "
                 "for it (doc/rdma-ud.md)");
        return;
    }
    struct server a, b;
    server_start_with(&a, base, base + 1, "1", NULL, NULL);
    server_start_with(&b, base + 2, base + 3, "1", NULL, NULL);
    char cfg[256];
    snprintf(cfg, sizeof(cfg), "--SERVER=%s://%s:%u --SERVER=%s://%s:%u --BINARY-PROTOCOL",
             rdma_scheme(), rxe, a.rdma_port, rdma_scheme(), rxe, b.rdma_port);
    memcached_st *m = memcached(cfg, strlen(cfg));
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 2000);
    set_keys(m, "warm", 20); /* both connected */
    kill(a.pid, SIGSTOP);
    kill(b.pid, SIGSTOP);
    usleep(200000);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_NOREPLY, 1);
    set_keys(m, "stuck", 400); /* more than the credits of both */
    double t0 = wall_ms();
    memcached_free(m);
    double took = wall_ms() - t0;
    kill(a.pid, SIGCONT);
    kill(b.pid, SIGCONT);
    /* one timeout per server would be 4,000 ms and more; the rest is the
     * teardown of two connections, slow in an emulated guest */
    tap_ok(took >= 1900 && took < 3600,
           "memcached_free with two stopped servers and stores waiting for both drains for one "
           "2,000 ms poll timeout in all (%.0f ms)",
           took);
    server_stop(&a, SIGTERM);
    server_stop(&b, SIGTERM);
}

/* A blocking call that sends without a reply (NOREPLY) returns with its
 * bytes on their way, as a socket's kernel goes on sending what a call
 * wrote: when the server's credits ran out, the call waits for them
 * instead of leaving its bytes for a later call into the library. And a
 * server that returns no credits for a whole poll timeout is waited for
 * once, not once per call. */
static void noreply_on_its_way(unsigned tcp_port, unsigned rdma_port)
{
    enum { N = 400, RESUME_MS = 500 };
    struct server s;
    server_start_with(&s, tcp_port, rdma_port, "1", NULL, NULL);
    memcached_st *check = rdma_client(&s);
    memcached_st *m = rdma_client(&s);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_NOREPLY, 1);
    double t0 = wall_ms();
    int took = set_keys(m, "on", N); /* m makes no call after these */
    double took_ms = wall_ms() - t0;
    int present = keys_present(check, "on", N);
    tap_ok(took == N && present == N,
           "%d noreply sets in a row (%.0f ms) are all on the server with no later call from "
           "their client (%d of %d)",
           took, took_ms, present, N);

    /* the server stops, and resumes while the client's sets wait for credits */
    memcached_exist(m, "on0", 3); /* connected, credits all back */
    kill(s.pid, SIGSTOP);
    pid_t waker = proc_fork();
    if (waker == 0) {
        usleep(RESUME_MS * 1000);
        kill(s.pid, SIGCONT);
        _exit(0);
    }
    t0 = wall_ms();
    took = set_keys(m, "held", N);
    took_ms = wall_ms() - t0;
    proc_reap(waker, 10000);
    kill(s.pid, SIGCONT);
    usleep(200000);
    present = keys_present(check, "held", N);
    tap_ok(took == N && present == N && took_ms >= RESUME_MS / 2,
           "noreply sets to a stopped server wait for its credits: resumed after %d ms, all are "
           "on it with no later call (%d of %d; the sets took %.0f ms)",
           RESUME_MS, present, N, took_ms);

    if (rdma_over_ud()) { /* UD gives a server silent for 5 s up, with what waited */
        tap_skip("RC only: over UD a server stopped for the dead timeout (5 s) is given up and "
                 "the stores waiting for it are lost (doc/rdma-ud.md)");
        memcached_free(m);
        memcached_free(check);
        server_stop(&s, SIGTERM);
        return;
    }
    /* stopped for longer than the poll timeout: one wait, then none */
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 500);
    kill(s.pid, SIGSTOP);
    t0 = wall_ms();
    took = set_keys(m, "stall", N);
    took_ms = wall_ms() - t0;
    kill(s.pid, SIGCONT);
    memcached_free(m); /* its drain sends what was held */
    present = keys_present(check, "stall", N);
    tap_ok(took == N && took_ms >= 450 && took_ms < 1500 && present == N,
           "a server stopped for good is waited for one 500 ms poll timeout, not one per set "
           "(%d sets took %.0f ms; after the close %d of %d are on it)",
           N, took_ms, present, N);
    memcached_free(check);
    server_stop(&s, SIGTERM);
}

/* Over UD the library sets up a peer unused for LIBMEMCACHED_RDMA_UD_IDLE_MS
 * anew before its next request, but not while replies are awaited (a
 * stopped or overloaded server is slow, not gone). Here the server stops
 * with a get of ours on its way, for longer than the client's idle time
 * (1 s), and resumes; the client then issues a second get before the
 * first reply came, and both must be answered exactly. */
static void reply_slower_than_idle(unsigned tcp_port, unsigned rdma_port)
{
    if (!rdma_over_ud()) {
        tap_skip("UD only: an RC connection is not set up anew when idle");
        return;
    }
    enum { STOPPED_MS = 1600 };
    struct server s;
    server_start_with(&s, tcp_port, rdma_port, "1", NULL, NULL);
    /* read when the connection opens: with the first set */
    setenv("LIBMEMCACHED_RDMA_UD_IDLE_MS", "1000", 1);
    memcached_st *m = rdma_client(&s);
    memcached_request_st *first = memcached_request_create(m);
    memcached_request_st *second = memcached_request_create(m);
    char first_buf[32] = "", second_buf[32] = "";
    bool stored = memcached_set(m, "slow-first", 10, "one", 3, 0, 0) == MEMCACHED_SUCCESS &&
                  memcached_set(m, "slow-second", 11, "two", 3, 0, 0) == MEMCACHED_SUCCESS;
    setenv("LIBMEMCACHED_RDMA_UD_IDLE_MS", "5000", 1); /* the program's (client_tests_begin) */
    kill(s.pid, SIGSTOP);
    memcached_return_t rc1 =
        memcached_iget(m, "slow-first", 10, first_buf, sizeof(first_buf), first);
    memcached_test(m, first); /* on its way */
    usleep(STOPPED_MS * 1000);
    kill(s.pid, SIGCONT);
    memcached_return_t rc2 =
        memcached_iget(m, "slow-second", 11, second_buf, sizeof(second_buf), second);
    if (rc1 == MEMCACHED_SUCCESS)
        rc1 = memcached_wait(m, first);
    if (rc2 == MEMCACHED_SUCCESS)
        rc2 = memcached_wait(m, second);
    size_t len1 = 0, len2 = 0;
    const char *v1 = memcached_request_value(first, &len1);
    const char *v2 = memcached_request_value(second, &len2);
    bool exact = rc1 == MEMCACHED_SUCCESS && rc2 == MEMCACHED_SUCCESS && v1 != NULL && v2 != NULL &&
                 len1 == 3 && len2 == 3 && memcmp(v1, "one", 3) == 0 && memcmp(v2, "two", 3) == 0;
    tap_ok(stored && exact,
           "UD: a reply slower than the client's idle time (server stopped %d ms, idle 1 s): "
           "no new peer while it is awaited, both gets answered exactly (%s, %s)",
           STOPPED_MS, memcached_strerror(m, rc1), memcached_strerror(m, rc2));
    memcached_request_free(second);
    memcached_request_free(first);
    memcached_free(m);
    server_stop(&s, SIGTERM);
}

/* A server killed (SIGKILL) with a request of ours in flight, over
 * rdma+rc:// and rdma+ud://: the request fails with CONNECTION_FAILURE and
 * the library says why in RDMA's terms (RC: the connection manager's
 * disconnect or a failed work completion; UD: the server silent for the
 * dead timeout), in memcached_server_error and in
 * memcached_last_error_message, not only the generic code. */
static void killed_server_names_cause(unsigned base)
{
    static const char *const schemes[] = {"rdma+rc", "rdma+ud"};
    for (unsigned k = 0; k < 2; k++) {
        const char *scheme = schemes[k];
        if (rdma_over_ud() && k == 0)
            continue; /* the RC run has it */
        struct server s;
        server_probe_scheme = scheme;
        server_start_with(&s, base + 2 * k, base + 2 * k + 1, "2", NULL, NULL);
        server_probe_scheme = NULL;
        memcached_st *m = rdma_client_over(&s, scheme);
        /* longer than UD's dead timeout: the transport finds the cause */
        memcached_behavior_set(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 20000);
        memcached_return_t set = memcached_set(m, "cause", 5, "1", 1, 0, 0);
        kill(s.pid, SIGSTOP);
        usleep(300000); /* stopped for sure before the request goes out */
        memcached_request_st *req = memcached_request_create(m);
        memcached_bget(m, "cause", 5, req);
        memcached_test(m, req); /* on its way */
        server_stop(&s, SIGKILL);
        double t0 = wall_ms();
        memcached_return_t rc = memcached_wait(m, req);
        double took = wall_ms() - t0;
        memcached_request_free(req);
        const char *last = memcached_last_error_message(m);
        const char *server = memcached_server_error(memcached_server_instance_by_position(m, 0));
        const char *cause = k == 0 ? "RDMA: " : "RDMA UD: ";
        tap_ok(set == MEMCACHED_SUCCESS && rc == MEMCACHED_CONNECTION_FAILURE && server != NULL &&
                   strstr(server, cause) != NULL && strstr(last, server) != NULL,
               "%s: a server killed mid-request fails it with %s after %.0f ms, and the "
               "library names the cause: memcached_last_error_message \"%s\"",
               scheme, memcached_strerror(m, rc), took, last);
        if (server == NULL || strstr(server, cause) == NULL)
            tap_diag("memcached_server_error: %s", server ? server : "(none)");
        memcached_free(m);
    }
}

/* memcached_test until the request is done or `ms` passed; its last result. */
static memcached_return_t test_until_done(memcached_st *m, memcached_request_st *req, int ms)
{
    memcached_return_t rc = MEMCACHED_IN_PROGRESS;
    for (int waited = 0; rc == MEMCACHED_IN_PROGRESS && waited < ms * 10; waited++) {
        rc = memcached_test(m, req);
        if (rc == MEMCACHED_IN_PROGRESS)
            usleep(100);
    }
    return rc;
}

/* A program that only ever polls with memcached_test gets what one that
 * waits gets: a value larger than the landing buffer (which must be
 * advertised again between its pieces), and CONNECTION_FAILURE from a
 * server that goes away. */
static void polling_with_test_only(unsigned tcp_port, unsigned rdma_port)
{
    struct server s;
    server_start_with(&s, tcp_port, rdma_port, "1", NULL, NULL);
    memcached_st *m = rdma_client(&s);
    size_t n = 3000000, len = 0;
    char *val = malloc(n);
    fill_bytes(val, n, 77);
    memcached_return_t rc = memcached_set(m, "polled", 6, val, n, 0, 0);
    memcached_request_st *req = memcached_request_create(m);
    memcached_bget(m, "polled", 6, req);
    memcached_return_t got = test_until_done(m, req, 20000);
    const char *v = memcached_request_value(req, &len);
    tap_ok(rc == MEMCACHED_SUCCESS && got == MEMCACHED_SUCCESS && v != NULL && len == n &&
               memcmp(v, val, n) == 0,
           "a bget of 3 MB completes with memcached_test alone (%s, %zu bytes)",
           memcached_strerror(m, got), len);
    memcached_request_free(req);
    free(val);
    /* every byte of this server went over RDMA: its RDMA byte counters
     * agree with memcached's own, zero-copy WRITEs' reply headers included */
    memcached_stat_st *st = memcached_stat(m, NULL, &rc);
    long written = stat_of(m, st, "bytes_written"),
         rdma_written = stat_of(m, st, "rdma_bytes_written");
    long read = stat_of(m, st, "bytes_read"), rdma_read = stat_of(m, st, "rdma_bytes_read");
    memcached_stat_free(m, st);
    tap_ok(written > 3000000 && rdma_written == written && rdma_read == read,
           "rdma_bytes_written %ld and rdma_bytes_read %ld agree with bytes_written %ld and "
           "bytes_read %ld when all traffic is RDMA",
           rdma_written, rdma_read, written, read);

    kill(s.pid, SIGSTOP);
    req = memcached_request_create(m);
    memcached_bget(m, "polled", 6, req);
    memcached_return_t during = test_until_done(m, req, 300);
    server_stop(&s, SIGKILL);
    got = test_until_done(m, req, 20000);
    tap_ok(during == MEMCACHED_IN_PROGRESS && got == MEMCACHED_CONNECTION_FAILURE,
           "a server killed while the client polls with memcached_test: %s, then %s",
           memcached_strerror(m, during), memcached_strerror(m, got));
    memcached_request_free(req);
    memcached_free(m);
}

/* What a client sees of an idle close: the results of its calls after the
 * server closed its idle connection, until one finds the value (at most
 * three), as "SUCCESS kept" or the error's name, one per line. */
static void after_idle_close(memcached_st *m, char *out, size_t outlen)
{
    out[0] = '\0';
    for (int call = 0; call < 3; call++) {
        memcached_return_t rc;
        size_t len = 0, used = strlen(out);
        char *got = memcached_get(m, "idlekey", 7, &len, &(uint32_t){0}, &rc);
        snprintf(out + used, outlen - used, "%s%s\n", memcached_strerror(m, rc),
                 got && len == 4 && memcmp(got, "kept", 4) == 0 ? " kept" : "");
        free(got);
        if (rc == MEMCACHED_SUCCESS)
            return;
    }
}

/* The lines of text joined with ";" (in place). */
static const char *one_line(char *text)
{
    size_t n = strlen(text);
    if (n > 0 && text[n - 1] == '\n')
        text[--n] = '\0';
    for (char *p = strchr(text, '\n'); p; p = strchr(p, '\n'))
        *p = ';';
    return text;
}

/* -o idle_timeout closes idle RDMA connections as it closes sockets: the
 * server's way to get back the resources of a peer that vanished without
 * a disconnect (a crashed machine). The client's next calls see what a
 * socket client sees, and reconnect. */
static void idle_rdma_connection(unsigned tcp_port, unsigned rdma_port)
{
    struct server s;
    /* one worker: one idle check closes both idle connections */
    server_start_with(&s, tcp_port, rdma_port, "1", NULL, "idle_timeout=2");
    memcached_st *by_rdma = rdma_client(&s);
    memcached_st *by_tcp = memcached_create(NULL);
    memcached_server_add(by_tcp, "127.0.0.1", (in_port_t)s.tcp_port);
    memcached_behavior_set(by_tcp, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
    memcached_st *watch = memcached_create(NULL); /* over TCP, busy enough to stay */
    memcached_server_add(watch, "127.0.0.1", (in_port_t)s.tcp_port);
    memcached_behavior_set(by_rdma, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 0);
    memcached_behavior_set(by_tcp, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 0);
    /* the socket goes idle first: it is closed no later than the RDMA connection */
    memcached_return_t rc_tcp = memcached_version(by_tcp);
    memcached_return_t rc = memcached_set(by_rdma, "idlekey", 7, "kept", 4, 0, 0);
    if (rdma_over_ud()) {
        /* Over UD the server closes the idle connection (curr_connections
         * drops by both idle ones), but its peer lingers until its last
         * reply is acknowledged or the keepalive gives it up: the client
         * runs the reliability layer only inside calls and left that ack
         * for later. The library sets up a peer unused for
         * LIBMEMCACHED_RDMA_UD_IDLE_MS (5 s here) anew, so once that
         * passed the next call finds the value at once. */
        long open = client_stat(watch, "curr_connections");
        long now = open;
        for (int i = 0; i < 60 && now != open - 2; i++) {
            usleep(200000);
            now = client_stat(watch, "curr_connections");
        }
        tap_ok(rc == MEMCACHED_SUCCESS && rc_tcp == MEMCACHED_SUCCESS && now == open - 2,
               "-o idle_timeout=2 closes an idle UD connection and an idle socket "
               "(curr_connections %ld -> %ld)",
               open, now);
        for (int i = 0; i < 55; i++) { /* the watcher stays busy meanwhile */
            usleep(100000);
            memcached_version(watch);
        }
        char seen_rdma[256];
        after_idle_close(by_rdma, seen_rdma, sizeof(seen_rdma));
        long reopened = client_stat(watch, "curr_connections");
        bool found_at_once = strcmp(seen_rdma, "SUCCESS kept\n") == 0; /* before one_line */
        tap_ok(found_at_once && reopened == open - 1,
               "after it, the UD client unused for 5 s sets its peer up anew: the value is found "
               "at once on a new connection (curr_connections %ld; calls: %s)",
               reopened, one_line(seen_rdma));
        memcached_free(watch);
        memcached_free(by_tcp);
        memcached_free(by_rdma);
        server_stop(&s, SIGTERM);
        return;
    }
    long open = client_stat(watch, conns_stat());
    long now = open;
    for (int i = 0; i < 60 && now != 0; i++) { /* idle 2 s, checked every second */
        usleep(200000);
        now = client_stat(watch, conns_stat());
    }
    tap_ok(rc == MEMCACHED_SUCCESS && rc_tcp == MEMCACHED_SUCCESS && open >= 1 && now == 0,
           "-o idle_timeout=2 closes an idle RDMA connection (%s %ld -> %ld)", conns_stat(), open,
           now);
    char seen_rdma[256], seen_tcp[256];
    after_idle_close(by_rdma, seen_rdma, sizeof(seen_rdma));
    after_idle_close(by_tcp, seen_tcp, sizeof(seen_tcp));
    long reopened = client_stat(watch, conns_stat());
    bool same = strstr(seen_rdma, "SUCCESS kept") != NULL && strcmp(seen_rdma, seen_tcp) == 0;
    if (!same)
        tap_diag("--- rdma\n%s--- tcp\n%s", seen_rdma, seen_tcp);
    tap_ok(same && reopened == 1,
           "after it, the RDMA client's calls give what a socket client's give, and the "
           "value is found on a new connection (%s %ld; calls: %s)",
           conns_stat(), reopened, one_line(seen_rdma));
    memcached_free(watch);
    memcached_free(by_tcp);
    memcached_free(by_rdma);
    server_stop(&s, SIGTERM);
}

int main(int argc, char **argv)
{
    client_tests_env(argc, "rdma_test_client_close");
    unsigned base = client_tests_begin(argv);

    server_killed_in_flight(base + 2, base + 3);
    killed_server_names_cause(base + 18);
    idle_rdma_connection(base + 6, base + 7);
    polling_with_test_only(base + 8, base + 9);
    stores_before_close(base + 10, base + 11);
    drain_bounded(base + 12);
    noreply_on_its_way(base + 16, base + 17);
    reply_slower_than_idle(base + 22, base + 23);
    tap_no_plan_end();
    return tap_exit_status();
}
