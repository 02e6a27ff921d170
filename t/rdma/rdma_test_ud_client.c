/* t/rdma/rdma_test_ud_client.c: libmemcached-rdma over rdma+ud://host:port
 * against memcached-rdma serving UD (-o rdma_transport=hybrid|ud). Inside
 * the Soft-RoCE guest:
 *   rdma_test_ud_client SERVER_BINARY
 * With MC_RDMA_POLL=spin|adaptive the servers of the first three parts
 * poll that way (-o rdma_poll), with one worker.
 *
 * - sets and gets of values from 1 byte to 3 MiB, text and binary protocols, every value read back
 *   compared byte for byte; an mget of many of them at once; two UD
 *   servers sharing the client's one UD context;
 * - the server's stats: rdma_ud_peers counts the client, and goes back
 *   once the client closed (its empty message) and once a client process
 *   was killed (keepalive probes unanswered);
 * - a peer is not set up anew as idle (1 s here) inside a request whose
 *   sending waits for room (a 6 MiB set to a server stopped 1.6 s), nor
 *   while a NOREPLY set is unacknowledged (3 MiB to a stopped server);
 * - rdma_rc_max=1: a second rdma+rc:// client is refused while a UD
 *   client is served, a second rdma:// client is served over UD (stats:
 *   rdma_rc_conns 1, rdma_ud_peers 2), and only one RC connection's
 *   message buffers are registered (rdma_rc_buffer_bytes); rdma_transport=ud serves no RC,
 *   and rdma:// clients over UD; a port where nothing listens fails an
 *   rdma:// connect with CONNECTION_FAILURE (not the connect timeout);
 * - a server that stops answering fails the requests with
 *   MEMCACHED_CONNECTION_FAILURE (no hang);
 * - sets parked for the flash writer (-m 8, -o ext_path): over rdma+rc://
 *   and rdma+ud://, a burst of 128 KiB sets all in flight at once
 *   (memcached_bset), then every key read back byte for byte (a key
 *   missing only as evicted); with ext_item_size above the values, so
 *   that the writer takes none of them, every set that finds no free
 *   chunk parks, then evicts: extstore_set_waits and
 *   extstore_set_waits_given_up show parking over RDMA;
 * - -c 4 (the TCP listener, a stats connection and two UD clients): the
 *   next two UD clients are refused at their connect request, each
 *   counted in rejected_connections and rdma_rejected_connections, their
 *   requests failing with CONNECTION_FAILURE at once (not at the client's
 *   dead timeout); the two kept are served, and a new one once one of
 *   them left.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "t/libmc/test_util.h"
#include "t/rdma/mc_server.h"
#include "t/rdma/proc.h"
#include "t/rdma/tap.h"

#define MIB (1u << 20)

static memcached_st *ud_client(unsigned port, bool binary)
{
    char cfg[160];
    snprintf(cfg, sizeof(cfg), "--SERVER=rdma+ud://%s:%u%s", rxe, port,
             binary ? " --BINARY-PROTOCOL" : "");
    memcached_st *m = memcached(cfg, strlen(cfg));
    if (m == NULL)
        tap_bail("memcached(\"%s\") failed", cfg);
    return m;
}

/* Waits up to ms for the stat to equal want; returns its last value. */
static long wait_stat(unsigned tcp_port, const char *name, long want, int ms)
{
    memcached_st *m = tcp_stats_client(tcp_port);
    long v = client_stat_wait(m, name, want, ms);
    memcached_free(m);
    return v;
}

static const size_t sizes[] = {1,      2,      100,     1000,  4000,    4060,
                               4061,   8192,   65535,   65536, 65537,   100000,
                               262144, 500000, MIB - 1, MIB,   MIB + 1, 3 * MIB + 7};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Sets and gets every size, each value compared byte for byte. */
static void mixed_sizes(memcached_st *m, const char *proto, char tag)
{
    char *want = malloc(4 * MIB), key[32];
    unsigned stored = 0, same = 0;
    for (size_t i = 0; i < NSIZES; i++) {
        size_t len = sizes[i];
        fill_bytes(want, len, (unsigned)i + (unsigned)tag);
        int klen = snprintf(key, sizeof(key), "%cmix%zu", tag, i);
        memcached_return_t rc = memcached_set(m, key, (size_t)klen, want, len, 0, (uint32_t)i);
        if (rc == MEMCACHED_SUCCESS)
            stored++;
        else
            tap_diag("%s: set of %zu bytes: %s (%s)", proto, len, memcached_strerror(m, rc),
                     memcached_last_error_message(m));
        size_t got_len = 0;
        uint32_t flags = 0;
        char *got = memcached_get(m, key, (size_t)klen, &got_len, &flags, &rc);
        if (got && got_len == len && flags == i && memcmp(got, want, len) == 0)
            same++;
        else
            tap_diag("%s: get of %zu bytes: %s, %zu bytes", proto, len, memcached_strerror(m, rc),
                     got_len);
        free(got);
    }
    tap_ok(stored == NSIZES && same == NSIZES,
           "%s over UD: %u of %zu values of 1 B to 3 MiB stored, %u read back byte for byte", proto,
           stored, NSIZES, same);
    /* all at once: one mget, every value checked */
    const char *keys[NSIZES];
    size_t klens[NSIZES];
    static char keybuf[NSIZES][32];
    for (size_t i = 0; i < NSIZES; i++) {
        klens[i] = (size_t)snprintf(keybuf[i], sizeof(keybuf[i]), "%cmix%zu", tag, i);
        keys[i] = keybuf[i];
    }
    memcached_return_t rc = memcached_mget(m, keys, klens, NSIZES);
    unsigned fetched = 0, right = 0;
    memcached_result_st *res;
    while (rc == MEMCACHED_SUCCESS && (res = memcached_fetch_result(m, NULL, &rc)) != NULL) {
        fetched++;
        unsigned i = memcached_result_flags(res);
        if (i < NSIZES && memcached_result_length(res) == sizes[i]) {
            fill_bytes(want, sizes[i], i + (unsigned)tag);
            right += memcmp(memcached_result_value(res), want, sizes[i]) == 0;
        }
        memcached_result_free(res);
    }
    tap_ok(fetched == NSIZES && right == NSIZES,
           "%s over UD: one mget of all %zu: %u came, %u right", proto, NSIZES, fetched, right);
    free(want);
}

/* Many small requests without waiting (NOREPLY sets, then gets). */
static void many_small(memcached_st *m)
{
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_NOREPLY, 1);
    char key[32], val[64];
    memcached_return_t rc = MEMCACHED_SUCCESS;
    for (int i = 0; i < 2000 && rc == MEMCACHED_SUCCESS; i++) {
        int kl = snprintf(key, sizeof(key), "nr%d", i);
        int vl = snprintf(val, sizeof(val), "value-%d", i * 7);
        rc = memcached_set(m, key, (size_t)kl, val, (size_t)vl, 0, 0);
    }
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_NOREPLY, 0);
    unsigned right = 0;
    for (int i = 0; i < 2000; i++) {
        int kl = snprintf(key, sizeof(key), "nr%d", i);
        int vl = snprintf(val, sizeof(val), "value-%d", i * 7);
        size_t len;
        uint32_t flags;
        char *v = memcached_get(m, key, (size_t)kl, &len, &flags, &rc);
        right += v && len == (size_t)vl && memcmp(v, val, len) == 0;
        free(v);
    }
    tap_ok(right == 2000, "2,000 NOREPLY sets over UD, then 2,000 gets: %u right", right);
}

/* A client whose UD peer is set up anew after idle_ms unused
 * (LIBMEMCACHED_RDMA_UD_IDLE_MS, read when the first UD connection
 * opens: here, with its first set, of "old" under key), binary protocol,
 * a 20 s poll timeout (megabytes over UD in an emulated guest take
 * seconds). *rc: that set's result. */
static memcached_st *ud_client_idle(unsigned port, const char *idle_ms, const char *key,
                                    memcached_return_t *rc)
{
    setenv("LIBMEMCACHED_RDMA_UD_IDLE_MS", idle_ms, 1);
    memcached_st *m = ud_client(port, true);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 20000);
    *rc = memcached_set(m, key, strlen(key), "old", 3, 0, 0);
    unsetenv("LIBMEMCACHED_RDMA_UD_IDLE_MS");
    return m;
}

/* The value under key read back: whether it is want (len bytes); *rc and
 * *got_len say what came. */
static bool reads_back(memcached_st *m, const char *key, const char *want, size_t len,
                       memcached_return_t *rc, size_t *got_len)
{
    *got_len = 0;
    char *got = memcached_get(m, key, strlen(key), got_len, NULL, rc);
    bool same = got != NULL && *got_len == len && memcmp(got, want, len) == 0;
    free(got);
    return same;
}

/* Stops the server for ms from now (a child wakes it): the client's
 * sends wait for room meanwhile. Returns the child. */
static pid_t stop_server_for(const struct server *s, unsigned ms)
{
    kill(s->pid, SIGSTOP);
    pid_t waker = proc_fork();
    if (waker == 0) {
        usleep(ms * 1000u);
        kill(s->pid, SIGCONT);
        _exit(0);
    }
    return waker;
}

/* The library sets up a UD peer unused for its idle time anew before the
 * next request, never inside one: a set larger than the client's send
 * queue (4 MiB) meets a server stopped for 1.6 s, longer than the idle
 * time (1 s), so one send of it waits that long for room; the rest of the
 * value must follow on the same peer, not reach a new one without its
 * start. */
static void set_across_wait_for_room(const struct server *s)
{
    const size_t len = 6 * MIB;
    char *value = malloc(len);
    fill_bytes(value, len, 61);
    memcached_return_t warm;
    memcached_st *m = ud_client_idle(s->rdma_port, "1000", "roomwait", &warm);
    pid_t waker = stop_server_for(s, 1600);
    memcached_return_t rs = memcached_set(m, "roomwait", 8, value, len, 0, 0);
    proc_reap(waker, 10000);
    kill(s->pid, SIGCONT);
    memcached_return_t rg;
    size_t got_len;
    bool same = reads_back(m, "roomwait", value, len, &rg, &got_len);
    tap_ok(warm == MEMCACHED_SUCCESS && rs == MEMCACHED_SUCCESS && same,
           "a 6 MiB set whose sending waits 1.6 s for room, past the 1 s idle time, stays on its "
           "peer: set %s, get %s with %zu bytes%s",
           memcached_strerror(m, rs), memcached_strerror(m, rg), got_len,
           same ? ", the value's" : "");
    if (rs != MEMCACHED_SUCCESS)
        tap_diag("set: %s", memcached_last_error_message(m));
    memcached_free(m);
    free(value);
}

/* Nor while what it sent is unacknowledged: a NOREPLY set of 3 MiB to a
 * stopped server returns once queued (its push gives up at the 200 ms
 * poll timeout), the client stays idle past its idle time while the server
 * is stopped, and the next get after the server resumes must find the new
 * value (a new peer would drop the rest of the set unsent). */
static void noreply_set_across_idle(const struct server *s)
{
    const size_t len = 3 * MIB;
    char *value = malloc(len);
    fill_bytes(value, len, 62);
    memcached_return_t warm;
    memcached_st *m = ud_client_idle(s->rdma_port, "1000", "nrwait", &warm);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 200);
    pid_t waker = stop_server_for(s, 1500);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_NOREPLY, 1);
    memcached_return_t rs = memcached_set(m, "nrwait", 6, value, len, 0, 0);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_NOREPLY, 0);
    proc_reap(waker, 10000); /* idle meanwhile: no call of the library */
    kill(s->pid, SIGCONT);
    usleep(200000); /* and past the server's resumption */
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 20000);
    memcached_return_t rg;
    size_t got_len;
    bool same = reads_back(m, "nrwait", value, len, &rg, &got_len);
    tap_ok(warm == MEMCACHED_SUCCESS && rs == MEMCACHED_SUCCESS && same,
           "a 3 MiB NOREPLY set still unacknowledged when the client has been idle past its idle "
           "time is not dropped with its peer: the next get %s with %zu bytes%s",
           memcached_strerror(m, rg), got_len, same ? ", the value's" : " (want 3145728)");
    memcached_free(m);
    free(value);
}

/* ---- sets parked for the flash writer ---------------------------------------------------- */
#define PARK_LEN (128u * 1024)
enum { PARK_SETS = 32, PARK_FORCED = 24 };

/* A text command to the server's TCP port: whether its reply starts with
 * want. */
static bool tcp_command(unsigned port, const char *cmd, const char *want)
{
    int fd = tcp_connect_loopback(port);
    char reply[64] = "";
    size_t len = strlen(cmd);
    bool ok = fd >= 0 && write(fd, cmd, len) == (ssize_t)len &&
              read(fd, reply, sizeof(reply) - 1) > 0 && strncmp(reply, want, strlen(want)) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* What a burst left: sets stored, and of its keys read back those with
 * their value (byte for byte), missing, or with other bytes; the server's
 * counters moved meanwhile. */
struct burst {
    int stored, right, missing, wrong;
    long evicted, waits, given_up;
};

/* n sets of PARK_LEN bytes under tag, all issued before any is waited for
 * (memcached_bset), then each key read back. */
static struct burst park_burst(const struct server *s, memcached_st *m, const char *tag, int n)
{
    struct burst b = {0};
    long evictions = tcp_stat(s->tcp_port, "evictions");
    long waits = tcp_stat(s->tcp_port, "extstore_set_waits");
    long given_up = tcp_stat(s->tcp_port, "extstore_set_waits_given_up");
    memcached_request_st *req[PARK_SETS];
    char *value = malloc(PARK_LEN), key[32];
    for (int i = 0; i < n; i++) {
        int kl = snprintf(key, sizeof(key), "%s%d", tag, i);
        fill_bytes(value, PARK_LEN, (unsigned)i + (unsigned)tag[0] * 1000u);
        req[i] = memcached_request_create(m);
        memcached_bset(m, key, (size_t)kl, value, PARK_LEN, 0, (uint32_t)i, req[i]);
    }
    memcached_wait_all(m);
    for (int i = 0; i < n; i++) {
        memcached_return_t rc = memcached_request_return(req[i]);
        if (rc == MEMCACHED_SUCCESS)
            b.stored++;
        else if (b.stored == i) /* the first that failed */
            tap_diag("%s: set %d: %s", tag, i, memcached_strerror(m, rc));
        memcached_request_free(req[i]);
    }
    for (int i = 0; i < n; i++) {
        int kl = snprintf(key, sizeof(key), "%s%d", tag, i);
        fill_bytes(value, PARK_LEN, (unsigned)i + (unsigned)tag[0] * 1000u);
        size_t len = 0;
        uint32_t flags = 0;
        memcached_return_t rc;
        char *got = memcached_get(m, key, (size_t)kl, &len, &flags, &rc);
        if (got == NULL && rc == MEMCACHED_NOTFOUND)
            b.missing++;
        else if (got && len == PARK_LEN && flags == (uint32_t)i && memcmp(got, value, len) == 0)
            b.right++;
        else
            b.wrong++;
        free(got);
    }
    free(value);
    b.evicted = tcp_stat(s->tcp_port, "evictions") - evictions;
    b.waits = tcp_stat(s->tcp_port, "extstore_set_waits") - waits;
    b.given_up = tcp_stat(s->tcp_port, "extstore_set_waits_given_up") - given_up;
    return b;
}

/* -m 8 with a flash file: a burst of 128 KiB sets outruns the flash
 * writer, which keeps only a few of their class's chunks free, so a set
 * may find none and park its connection until the writer frees one (a
 * millisecond at a time, 5 ms at most, then it evicts). The connection
 * must read nothing more meanwhile (the transport honours want_read
 * false) and, once the set has its item, pull its value and go on with
 * the requests behind it in order. Then, with ext_item_size above the
 * values' length but not their chunks' (150000: they take 161,720-byte
 * chunks), the writer serves their class but moves none of them: each
 * set that finds no free chunk parks until two writer passes moved
 * nothing, then evicts, so parking must happen. The LRU is flat
 * (no_lru_maintainer), every item in COLD, where the writer takes its
 * values: segmented, a fresh server's first burst finds COLD empty (its
 * items still in HOT) and evicts without parking. */
static void sets_parked_for_flash(unsigned tcp_port, unsigned rdma_port, const char *threads,
                                  const char *poll)
{
    char path[64], ext[96];
    snprintf(path, sizeof(path), "/tmp/mcr-rdma-park.%d", (int)getpid());
    snprintf(ext, sizeof(ext), "ext_path=%s:64m", path);
    const char *const args[] = {"-m", "8", "-o", ext, "-o", "no_lru_maintainer", NULL};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct server s;
    server_start_args(&s, tcp_port, rdma_port, threads, poll, args);
    static const char *const schemes[] = {"rdma+rc", "rdma+ud"};
    for (size_t k = 0; k < sizeof(schemes) / sizeof(*schemes); k++) {
        const char *scheme = schemes[k];
        memcached_st *m = rdma_client_over(&s, scheme);
        memcached_behavior_set(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 20000);
        char tag[8];
        snprintf(tag, sizeof(tag), "%c", k == 0 ? 'r' : 'u');
        struct burst b = park_burst(&s, m, tag, PARK_SETS);
        tap_ok(b.stored == PARK_SETS && b.wrong == 0 && b.right + b.missing == PARK_SETS &&
                   b.missing <= b.evicted,
               "%s: %d sets of 128 KiB in flight at once into -m 8 with flash: %d stored, read "
               "back %d right, %d missing (%ld evicted), %d wrong; %ld parked, %ld gave up",
               scheme, PARK_SETS, b.stored, b.right, b.missing, b.evicted, b.wrong, b.waits,
               b.given_up);
        bool tuned = tcp_command(s.tcp_port, "extstore item_size 150000\r\n", "OK");
        snprintf(tag, sizeof(tag), "%c", k == 0 ? 'R' : 'U');
        b = park_burst(&s, m, tag, PARK_FORCED);
        bool restored = tcp_command(s.tcp_port, "extstore item_size 512\r\n", "OK");
        tap_ok(tuned && restored && b.stored == PARK_FORCED && b.wrong == 0 &&
                   b.right + b.missing == PARK_FORCED && b.waits > 0 && b.given_up > 0 &&
                   b.given_up <= b.waits,
               "%s: %d sets the writer cannot make room for (ext_item_size 150000): %ld parked, "
               "%ld gave up waiting (%ld evicted); %d stored, read back %d right, %d missing, "
               "%d wrong",
               scheme, PARK_FORCED, b.waits, b.given_up, b.evicted, b.stored, b.right, b.missing,
               b.wrong);
        memcached_free(m);
    }
    server_stop(&s, SIGTERM);
    unlink(path);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    tap_diag("sets parked for the flash writer: %ld ms",
             (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000));
}

/* ---- UD peers over -c ---------------------------------------------------------------- */
/* -c 4: the TCP listener and a TCP connection held for stats count as
 * two, so the server keeps two UD clients and refuses the next two at
 * their connect requests (the server's admit callback rejects them).
 * Each refusal counts in rejected_connections and in
 * rdma_rejected_connections; a refused client's request fails with
 * CONNECTION_FAILURE, the library's error naming the refusal, well
 * before the client's dead timeout (5 s; its poll timeout 20 s: a server
 * that set the peer up and closed it, as before, failed it at 5 s); the
 * two kept are served, and once one of them left a new client is. */
#define REFUSED_WITHIN_MS 4000
static void ud_peers_over_conn_limit(unsigned tcp_port, unsigned rdma_port, const char *threads,
                                     const char *poll)
{
    enum { KEPT = 2, REFUSED = 2 };
    static const char *const args[] = {"-c", "4", NULL}; /* 2 + KEPT */
    struct server s;
    server_start_args(&s, tcp_port, rdma_port, threads, poll, args);
    memcached_st *held = tcp_stats_client(s.tcp_port); /* its connection stays open */
    /* the start-up probe's RC connection counts until the server saw it go */
    long curr = client_stat_wait(held, "curr_connections", 2, 10000);
    long rej0 = client_stat(held, "rejected_connections");
    long rdma_rej0 = client_stat(held, "rdma_rejected_connections");
    memcached_st *kept[KEPT];
    char key[16];
    int stored = 0;
    for (int i = 0; i < KEPT; i++) {
        kept[i] = ud_client(rdma_port, false);
        int kl = snprintf(key, sizeof(key), "kept%d", i);
        stored +=
            memcached_set(kept[i], key, (size_t)kl, key, (size_t)kl, 0, 0) == MEMCACHED_SUCCESS;
    }
    long peers = client_stat(held, "rdma_ud_peers");
    int failed = 0;
    long ms = 0, slowest = 0;
    char why[256] = "";
    memcached_return_t rr = MEMCACHED_SUCCESS;
    for (int i = 0; i < REFUSED; i++) {
        memcached_st *m = ud_client(rdma_port, false);
        memcached_behavior_set(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 20000);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        memcached_return_t rc = memcached_set(m, "refused", 7, "x", 1, 0, 0);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long took = (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
        const char *err = memcached_last_error_message(m);
        failed += rc == MEMCACHED_CONNECTION_FAILURE && err != NULL && strstr(err, "refused") &&
                  took < REFUSED_WITHIN_MS;
        slowest = took > slowest ? took : slowest;
        if (i == 0 || rc != MEMCACHED_CONNECTION_FAILURE) {
            rr = rc;
            ms = took;
            snprintf(why, sizeof(why), "%s", err != NULL ? err : "no error message");
        }
        memcached_free(m);
    }
    tap_ok(curr == 2 && stored == KEPT && peers == KEPT && failed == REFUSED,
           "-c 4 (TCP listener, stats connection, %d UD clients): %d stored, rdma_ud_peers %ld; "
           "%d of the next %d UD clients refused within %d ms: %s after %ld ms (%s; slowest "
           "%ld ms)",
           KEPT, stored, peers, failed, REFUSED, REFUSED_WITHIN_MS, memcached_strerror(NULL, rr),
           ms, why, slowest);
    long rej = client_stat(held, "rejected_connections") - rej0;
    long rdma_rej = client_stat(held, "rdma_rejected_connections") - rdma_rej0;
    tap_ok(rej0 == 0 && rdma_rej0 == 0 && rej == REFUSED && rdma_rej == REFUSED,
           "-c: the %d UD clients refused count in rejected_connections (+%ld) and in "
           "rdma_rejected_connections (+%ld)",
           REFUSED, rej, rdma_rej);
    int right = 0;
    for (int i = 0; i < KEPT; i++) {
        int kl = snprintf(key, sizeof(key), "kept%d", i);
        size_t vlen = 0;
        memcached_return_t rc;
        char *v = memcached_get(kept[(i + 1) % KEPT], key, (size_t)kl, &vlen, NULL, &rc);
        right += v != NULL && vlen == (size_t)kl && memcmp(v, key, vlen) == 0;
        free(v);
    }
    memcached_free(kept[0]);
    curr = client_stat_wait(held, "curr_connections", 2 + KEPT - 1, 5000);
    memcached_st *late = ud_client(rdma_port, false);
    memcached_return_t rl = memcached_set(late, "late", 4, "1", 1, 0, 0);
    size_t vlen = 0;
    memcached_return_t rg;
    char *v = memcached_get(late, "kept1", 5, &vlen, NULL, &rg);
    bool late_ok = rl == MEMCACHED_SUCCESS && v != NULL && vlen == 5 && memcmp(v, "kept1", 5) == 0;
    free(v);
    tap_ok(right == KEPT && curr == 2 + KEPT - 1 && late_ok &&
               client_stat(held, "rejected_connections") - rej0 == REFUSED,
           "-c: the kept UD clients are served after the refusals (%d of %d values read back); "
           "once one left (curr_connections %ld), a new one is served: set %s, get %s",
           right, KEPT, curr, memcached_strerror(NULL, rl), memcached_strerror(NULL, rg));
    memcached_free(late);
    memcached_free(kept[1]);
    memcached_free(held);
    server_stop(&s, SIGTERM);
}

/* A client process that connects over UD, stores, and is killed. */
static pid_t killed_client(unsigned port)
{
    pid_t pid = proc_fork();
    if (pid == 0) {
        memcached_st *m = ud_client(port, false);
        memcached_set(m, "victim", 6, "x", 1, 0, 0);
        pause();
        _exit(0);
    }
    return pid;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        tap_bail("usage: rdma_test_ud_client SERVER_BINARY");
    rxe = getenv("RXE_VM_ADDR");
    if (rxe == NULL)
        tap_bail("RXE_VM_ADDR is not set: run inside scripts/rxe-vm");
    server_bin = argv[1];
    signal(SIGPIPE, SIG_IGN);
    unsigned base = 27000 + (unsigned)(getpid() % 500) * 4;
    struct server s;
    const char *poll = getenv("MC_RDMA_POLL"), *threads = poll ? "1" : "2";
    server_start_with(&s, base, base + 1, threads, poll, NULL);

    memcached_st *mt = ud_client(s.rdma_port, false);
    tap_ok(strcmp(memcached_server_type(memcached_server_instance_by_position(mt, 0)), "RDMA+UD") ==
               0,
           "an rdma+ud:// server has the type RDMA+UD");
    mixed_sizes(mt, "text", 't');
    tap_ok(memcached_set(mt, "bad key", 7, "v", 1, 0, 0) == MEMCACHED_BAD_KEY_PROVIDED &&
               memcached_add(mt, "tmix0", 5, "v", 1, 0, 0) == MEMCACHED_NOTSTORED,
           "text over UD: a key with a space is refused, add of an existing key NOTSTORED");
    memcached_st *mb = ud_client(s.rdma_port, true);
    memcached_return_t rt = memcached_set(mt, "both", 4, "t", 1, 0, 0);
    memcached_return_t rb = memcached_set(mb, "both", 4, "b", 1, 0, 0);
    long peers = tcp_stat(s.tcp_port, "rdma_ud_peers");
    tap_ok(rt == MEMCACHED_SUCCESS && rb == MEMCACHED_SUCCESS && peers == 2,
           "stats: rdma_ud_peers %ld with two clients", peers);
    mixed_sizes(mb, "binary", 'b');
    tap_ok(memcached_add(mb, "bmix0", 5, "v", 1, 0, 0) == MEMCACHED_DATA_EXISTS,
           "binary over UD: add of an existing key DATA_EXISTS");
    many_small(mb);
    /* the text client was idle meanwhile (maybe past the client's idle
     * reconnect): it is served as before */
    size_t len = 0;
    uint32_t flags = 0;
    memcached_return_t rg;
    char *v = memcached_get(mt, "both", 4, &len, &flags, &rg);
    tap_ok(v && len == 1 && v[0] == 'b', "the first client is served again: %s",
           memcached_strerror(mt, rg));
    free(v);
    tap_ok(tcp_stat(s.tcp_port, "rdma_rc_conns") == 0 &&
               tcp_stat(s.tcp_port, "rdma_ud_retransmits") >= 0 &&
               tcp_stat(s.tcp_port, "rdma_ud_duplicates") >= 0 &&
               tcp_stat(s.tcp_port, "rdma_ud_malformed") >= 0,
           "stats: rdma_rc_conns 0, rdma_ud_retransmits, _duplicates, _malformed present");
    memcached_free(mb);
    memcached_free(mt);
    peers = wait_stat(s.tcp_port, "rdma_ud_peers", 0, 3000);
    tap_ok(peers == 0, "closed clients' peers are freed at once: rdma_ud_peers %ld", peers);
    set_across_wait_for_room(&s);
    noreply_set_across_idle(&s);

    /* two UD servers on one client context */
    struct server s2;
    server_start_with(&s2, base + 2, base + 3, threads, poll, "rdma_ud_keepalive_ms=1000");
    /* a killed client: the server's probes go unanswered (1 s idle, then
     * 1 s more: keepalive and dead timeout 1 s) */
    pid_t victim = killed_client(s2.rdma_port);
    long before = wait_stat(s2.tcp_port, "rdma_ud_peers", 1, 5000);
    kill(victim, SIGKILL);
    proc_reap(victim, 5000);
    peers = wait_stat(s2.tcp_port, "rdma_ud_peers", 0, 10000);
    tap_ok(before == 1 && peers == 0, "a killed client's peer is freed: rdma_ud_peers %ld -> %ld",
           before, peers);

    char cfg[200];
    snprintf(cfg, sizeof(cfg), "--SERVER=rdma+ud://%s:%u --SERVER=rdma+ud://%s:%u", rxe,
             s.rdma_port, rxe, s2.rdma_port);
    memcached_st *m2 = memcached(cfg, strlen(cfg));
    unsigned right = 0;
    char key[32];
    for (int i = 0; i < 200; i++) {
        int kl = snprintf(key, sizeof(key), "two%d", i);
        if (memcached_set(m2, key, (size_t)kl, key, (size_t)kl, 0, 0) != MEMCACHED_SUCCESS)
            continue;
        size_t vlen;
        uint32_t vflags;
        memcached_return_t rc;
        char *val = memcached_get(m2, key, (size_t)kl, &vlen, &vflags, &rc);
        right += val && vlen == (size_t)kl && memcmp(val, key, vlen) == 0;
        free(val);
    }
    long p1 = tcp_stat(s.tcp_port, "rdma_ud_peers"), p2 = tcp_stat(s2.tcp_port, "rdma_ud_peers");
    tap_ok(right == 200 && p1 == 1 && p2 == 1,
           "two UD servers from one client: %u of 200 right, one peer on each (%ld, %ld)", right,
           p1, p2);

    /* a server that stops answering: requests fail, none hangs */
    kill(s2.pid, SIGSTOP);
    memcached_return_t rc1 = MEMCACHED_SUCCESS;
    for (int i = 0; i < 200 && rc1 == MEMCACHED_SUCCESS; i++) {
        int kl = snprintf(key, sizeof(key), "two%d", i);
        if (memcached_server_by_key(m2, key, (size_t)kl, &rc1) == NULL)
            break;
        const memcached_instance_st *inst = memcached_server_by_key(m2, key, (size_t)kl, &rc1);
        if (memcached_server_port(inst) != s2.rdma_port)
            continue;
        rc1 = memcached_set(m2, key, (size_t)kl, "x", 1, 0, 0);
        if (rc1 == MEMCACHED_SUCCESS) /* taken before the timeout: ask for a reply */
            free(memcached_get(m2, key, (size_t)kl, NULL, NULL, &rc1));
    }
    tap_ok(rc1 == MEMCACHED_CONNECTION_FAILURE || rc1 == MEMCACHED_TIMEOUT,
           "a stopped UD server fails its requests: %s", memcached_strerror(m2, rc1));
    memcached_free(m2);
    kill(s2.pid, SIGCONT);
    server_stop(&s2, SIGTERM);
    server_stop(&s, SIGTERM);

    /* rdma_rc_max=1: a second rdma+rc:// client is refused, UD still
     * served, and a second rdma:// client goes over UD by itself. No
     * demotions (rdma_demote_rate=0): the first client sends far fewer
     * than the default 10 messages a second, and where the checks took
     * longer than a move interval (1 s; seen with MC_RDMA_POLL=spin in
     * the guest) the server had moved it to UD: rdma_rc_conns 0. */
    struct server s3;
    server_start_with(&s3, base + 2, base + 3, threads, poll, "rdma_rc_max=1,rdma_demote_rate=0");
    /* server_start's probe (RC) closed its own connection; the server holds
     * its one RC slot until it has seen that close. Connecting before then
     * would send the first rdma:// client over UD. */
    long probe_rc = wait_stat(s3.tcp_port, "rdma_rc_conns", 0, 10000);
    if (probe_rc != 0)
        tap_diag("the probe's RC connection still counted after 10 s (rdma_rc_conns %ld)",
                 probe_rc);
    memcached_st *rc_a = rdma_client(&s3);
    memcached_return_t ra = memcached_set(rc_a, "a", 1, "1", 1, 0, 0);
    memcached_st *rc_b = rdma_client_over(&s3, "rdma+rc");
    memcached_return_t r2 = memcached_set(rc_b, "b", 1, "1", 1, 0, 0);
    memcached_st *ud = ud_client(s3.rdma_port, false);
    memcached_return_t ru = memcached_set(ud, "c", 1, "1", 1, 0, 0);
    tap_ok(ra == MEMCACHED_SUCCESS && r2 == MEMCACHED_CONNECTION_FAILURE && ru == MEMCACHED_SUCCESS,
           "rdma_rc_max=1: first RC client %s, second (rdma+rc://) %s, a UD client %s",
           memcached_strerror(rc_a, ra), memcached_strerror(rc_b, r2), memcached_strerror(ud, ru));
    memcached_st *follow = rdma_client(&s3);
    memcached_return_t rf = memcached_set(follow, "f", 1, "follow", 6, 0, 0);
    size_t flen = 0;
    char *fv = memcached_get(rc_a, "f", 1, &flen, NULL, &rf);
    bool f_ok = fv != NULL && flen == 6 && memcmp(fv, "follow", 6) == 0;
    free(fv);
    fv = memcached_get(follow, "a", 1, &flen, NULL, &rf);
    f_ok = f_ok && fv != NULL && flen == 1 && fv[0] == '1';
    free(fv);
    long rcs = tcp_stat(s3.tcp_port, "rdma_rc_conns"), uds = tcp_stat(s3.tcp_port, "rdma_ud_peers");
    tap_ok(f_ok && rcs == 1 && uds == 2,
           "rdma_rc_max=1: a second rdma:// client is served (over UD): %s; stats rdma_rc_conns "
           "%ld, rdma_ud_peers %ld",
           f_ok ? "values read back" : memcached_strerror(follow, rf), rcs, uds);
    /* message buffers are registered as RC connections come, in chunks
     * of a connection's credits (hybrid: 8 buffers of 8,192 bytes), one
     * chunk of receives a connection and a chunk of send buffers a worker:
     * the refused RC client and the UD ones add nothing. A worker keeps
     * what it registered, so the probe of server_start (RC too) may have
     * added a chunk or two: 2 to 4 chunks, never more. */
    long chunk = 8L * 8192, bufs = tcp_stat(s3.tcp_port, "rdma_rc_buffer_bytes");
    tap_ok(bufs % chunk == 0 && bufs >= 2 * chunk && bufs <= 4 * chunk,
           "rdma_rc_max=1: %ld bytes of RC message buffers registered (chunks of %ld), with one "
           "RC client, one refused and two over UD",
           bufs, chunk);
    memcached_free(follow);
    memcached_free(ud);
    memcached_free(rc_b);
    memcached_free(rc_a);
    server_stop(&s3, SIGTERM);

    /* rdma_transport=ud: UD only */
    struct server s4;
    s4.tcp_port = base + 2;
    s4.rdma_port = base + 3;
    char port[16], listen[96];
    snprintf(port, sizeof(port), "%u", s4.tcp_port);
    snprintf(listen, sizeof(listen), "rdma_listen=%s:%u", rxe, s4.rdma_port);
    s4.pid = proc_fork();
    if (s4.pid == 0) {
        execl(server_bin, server_bin, "-u", "root", "-l", "127.0.0.1", "-p", port, "-t", "2", "-o",
              listen, "-o", "rdma_transport=ud", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 100 && !tcp_accepts(s4.tcp_port); i++)
        usleep(100000);
    memcached_return_t u4 = MEMCACHED_FAILURE;
    for (int i = 0; i < 25 && u4 != MEMCACHED_SUCCESS; i++) {
        memcached_st *m = ud_client(s4.rdma_port, false);
        u4 = memcached_set(m, "u", 1, "1", 1, 0, 0);
        memcached_free(m);
        if (u4 != MEMCACHED_SUCCESS)
            usleep(200000);
    }
    memcached_st *r4 = rdma_client_over(&s4, "rdma+rc");
    memcached_return_t c4 = memcached_set(r4, "r", 1, "1", 1, 0, 0);
    memcached_free(r4);
    memcached_st *f4 = rdma_client(&s4);
    memcached_return_t sf4 = memcached_set(f4, "r", 1, "2", 1, 0, 0);
    size_t len4 = 0;
    memcached_return_t gf4;
    char *v4 = memcached_get(f4, "r", 1, &len4, NULL, &gf4);
    bool f4_ok = sf4 == MEMCACHED_SUCCESS && v4 != NULL && len4 == 1 && v4[0] == '2';
    free(v4);
    memcached_free(f4);
    tap_ok(u4 == MEMCACHED_SUCCESS && c4 == MEMCACHED_CONNECTION_FAILURE && f4_ok,
           "rdma_transport=ud: UD %s, rdma+rc:// %s, rdma:// over UD %s",
           memcached_strerror(NULL, u4), memcached_strerror(NULL, c4),
           memcached_strerror(NULL, f4_ok                      ? MEMCACHED_SUCCESS
                                    : sf4 != MEMCACHED_SUCCESS ? sf4
                                                               : gf4));
    server_stop(&s4, SIGTERM);
    /* nothing listens on the port any more: RC refused, UD refused too */
    memcached_st *gone = rdma_client(&s4);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memcached_return_t rg4 = memcached_set(gone, "r", 1, "1", 1, 0, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    memcached_free(gone);
    tap_diag("rdma:// to a closed port failed after %ld ms",
             (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000));
    tap_ok(rg4 == MEMCACHED_CONNECTION_FAILURE, "rdma:// to a port where nothing listens: %s",
           memcached_strerror(NULL, rg4));
    sets_parked_for_flash(base + 2, base + 3, threads, poll);
    ud_peers_over_conn_limit(base + 2, base + 3, threads, poll);
    tap_no_plan_end();
    return tap_failed == 0 ? 0 : 1;
}
