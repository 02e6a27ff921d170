/* t/libmc/slow_handshake.c: a TLS handshake or a SASL exchange that blocks
 * inside a wait for longer than POLL_TIMEOUT does not time out the requests
 * other servers still owe (the poll loop restarts its clock when a connect
 * or handshake returns, src/io_wait.c). Run by t/libmc/slow_handshake.t, which
 * makes the certificates and the SASL user database (as t/libmc/tls.t).
 *
 * Four servers, RS(3,1): three real ones ($MC_SERVER with -Z, or with -S)
 * and, at the fourth place, a fake one that accepts the connection, reads
 * what the client sends first (a ClientHello, or SASL's LIST MECHS), waits
 * HANDSHAKE_MS (longer than POLL_TIMEOUT) and closes it. A coded get asks
 * chunk 0 first and, once it arrived (the pipeline slept for it, so the
 * poll timeout's clock runs), chunk 1 on a stopped server and chunk 2 on the
 * fake one, whose handshake blocks the client. The test stops the servers
 * of chunks 0, 1 and 3 before the get; the fake continues the first
 * FIRST_AFTER_MS later (its reply then wakes the sleeping pipeline) and the
 * others RESUME_AFTER_MS after it closed: with the clock restarted when the
 * handshake returned they answer within the poll timeout and the get
 * decodes the value; with the clock left where it was, the poll loop finds
 * the poll timeout over as soon as the handshake returns and fails them
 * with MEMCACHED_TIMEOUT (the get then fails), which is what this test
 * catches. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "test_util.h"
#include "server.h"
#include "tap.h"

enum {
    REAL = 3,              /* real servers */
    SERVERS = REAL + 1,    /* and the fake one, last */
    SIZE = 20000,          /* coded: over the threshold below */
    THRESHOLD = 1024,      /* ERASURE_CODING_THRESHOLD: position 0 is asked first */
    POLL_MS = 1000,        /* POLL_TIMEOUT */
    HANDSHAKE_MS = 1500,   /* the fake's handshake: longer than POLL_MS */
    RESUME_AFTER_MS = 300, /* the stopped servers run again this long after it */
    FIRST_AFTER_MS = 200,  /* chunk 0's server runs again this long after the get began */
    CONNECT_MS = 4000,     /* CONNECT_TIMEOUT: longer than the fake's handshake */
    KEYS = 200,            /* keys tried for the two layouts wanted */
};

enum mode { OVER_TLS, WITH_SASL };
static const char *mode_names[] = {"TLS handshake", "SASL exchange"};
static char tls_args[512];

static bool start_real(struct test_server *s, enum mode mode)
{
    if (mode == OVER_TLS) {
        const char *args[] = {"-Z", "-o", tls_args, NULL};
        return test_server_start_args(s, false, args);
    }
    const char *args[] = {"-S", "-B", "binary", NULL};
    return test_server_start_args(s, false, args);
}

/* A client of the given ports (all of them as the scheme's servers, or
 * one for reading what a server holds). */
static memcached_st *client_of(enum mode mode, const unsigned *ports, int count, bool coded)
{
    memcached_st *memc = memcached_create(NULL);
    for (int i = 0; i < count; i++) {
        if (mode == OVER_TLS) {
            char spec[64];
            snprintf(spec, sizeof(spec), "tls://127.0.0.1:%u", ports[i]);
            memcached_server_st *list = memcached_servers_parse(spec);
            memcached_server_push(memc, list);
            memcached_server_list_free(list);
        } else {
            memcached_server_add(memc, "127.0.0.1", (in_port_t)ports[i]);
        }
    }
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
    if (mode == WITH_SASL)
        memcached_set_sasl_auth_data(memc, "alice", "secret");
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, CONNECT_MS);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, POLL_MS);
    if (coded) {
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_ERASURE_CODING,
                               MEMCACHED_ERASURE_CODING(3, 1));
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_ERASURE_CODING_THRESHOLD, THRESHOLD);
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_RESILIENCE_HEDGE_TIMEOUT, 0);
    }
    return memc;
}

static void fill(char *value, unsigned seed)
{
    for (int i = 0; i < SIZE; i++)
        value[i] = (char)('a' + (i * 7 + seed) % 26);
}

/* The chunk index each real server holds for key (-1: none). */
static void locate(enum mode mode, const unsigned *ports, const char *key, int index_of[REAL])
{
    for (int j = 0; j < REAL; j++) {
        memcached_st *holder = client_of(mode, &ports[j], 1, false);
        size_t length;
        memcached_return_t rc;
        char *item = memcached_get(holder, key, strlen(key), &length, NULL, &rc);
        index_of[j] = rc == MEMCACHED_SUCCESS && length > 32 && memcmp(item, "RSc1", 4) == 0
                          ? (unsigned char)item[5]
                          : -1;
        free(item);
        memcached_free(holder);
    }
}

/* The real server holding chunk `index` (-1: the fake does). */
static int holder_of(const int index_of[REAL], int index)
{
    for (int j = 0; j < REAL; j++)
        if (index_of[j] == index)
            return j;
    return -1;
}

/* The fake server: a child process that continues the server of chunk 0
 * (first) FIRST_AFTER_MS from now, accepts one connection on listen_fd,
 * reads what comes, waits HANDSHAKE_MS, closes it and continues the other
 * stopped servers RESUME_AFTER_MS later. */
static pid_t fake_start(int listen_fd, pid_t first, const pid_t *stopped, int stopped_count)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    usleep(FIRST_AFTER_MS * 1000);
    kill(first, SIGCONT);
    struct pollfd pfd = {.fd = listen_fd, .events = POLLIN};
    int fd = poll(&pfd, 1, 20000) == 1 ? accept(listen_fd, NULL, NULL) : -1;
    if (fd >= 0) {
        char hello[512];
        pfd = (struct pollfd){.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 20000) == 1)
            (void)read(fd, hello, sizeof(hello));
        usleep(HANDSHAKE_MS * 1000);
        close(fd);
    }
    usleep(RESUME_AFTER_MS * 1000);
    for (int i = 0; i < stopped_count; i++)
        kill(stopped[i], SIGCONT);
    _exit(fd >= 0 ? 0 : 1);
}

static int listen_on(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(fd, 4) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void slow_handshake(enum mode mode)
{
    const char *name = mode_names[mode];
    struct test_server real[REAL];
    unsigned ports[SERVERS];
    for (int j = 0; j < REAL; j++) {
        if (!start_real(&real[j], mode)) {
            ok(0, "%s: start server %d", name, j);
            test_servers_stop(real, j);
            return;
        }
        ports[j] = real[j].port;
    }
    /* nothing listens there while the keys are written: their chunks
     * there fail at once (SOME_ERRORS, three of four stored) */
    ports[REAL] = test_unused_port();
    memcached_st *writer = client_of(mode, ports, SERVERS, true);
    char *value = malloc(SIZE), key[32], warm_key[32] = "", stalled_key[32] = "";
    int stalled_layout[REAL] = {-1, -1, -1};
    unsigned stalled_seed = 0;
    for (int i = 0; i < KEYS && (warm_key[0] == '\0' || stalled_key[0] == '\0'); i++) {
        snprintf(key, sizeof(key), "slow-hs-%d", i);
        fill(value, (unsigned)i);
        memcached_return_t rc = memcached_set(writer, key, strlen(key), value, SIZE, 0, 0);
        if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_SOME_ERRORS)
            continue;
        int index_of[REAL];
        locate(mode, ports, key, index_of);
        bool data_on_real = holder_of(index_of, 0) >= 0 && holder_of(index_of, 1) >= 0;
        if (data_on_real && holder_of(index_of, 2) >= 0 && holder_of(index_of, 3) < 0 &&
            warm_key[0] == '\0') /* the fake holds the parity: a get never asks it */
            memcpy(warm_key, key, sizeof(key));
        if (data_on_real && holder_of(index_of, 2) < 0 && holder_of(index_of, 3) >= 0 &&
            stalled_key[0] == '\0') { /* the fake holds data chunk 2 */
            memcpy(stalled_key, key, sizeof(key));
            memcpy(stalled_layout, index_of, sizeof(index_of));
            stalled_seed = (unsigned)i;
        }
    }
    memcached_free(writer);
    if (!ok(warm_key[0] != '\0' && stalled_key[0] != '\0', "%s: keys of both layouts (%s, %s)",
            name, warm_key, stalled_key)) {
        free(value);
        test_servers_stop(real, REAL);
        return;
    }
    memcached_st *reader = client_of(mode, ports, SERVERS, true);
    size_t length;
    memcached_return_t rc;
    /* connects to the three real servers (the fake holds this key's parity) */
    free(memcached_get(reader, warm_key, strlen(warm_key), &length, NULL, &rc));
    is_rc(rc, MEMCACHED_SUCCESS, "the reader is connected to the real servers");
    int chunk0 = holder_of(stalled_layout, 0), chunk1 = holder_of(stalled_layout, 1),
        parity = holder_of(stalled_layout, 3);
    pid_t stopped[2] = {real[chunk1].pid, real[parity].pid};
    /* chunk 0's server too, for a while: its reply must wake the
     * pipeline from its sleep (one found before it slept would leave the
     * clock unread) */
    test_server_pause(&real[chunk0]);
    test_server_pause(&real[chunk1]);
    test_server_pause(&real[parity]);
    int listen_fd = listen_on(ports[REAL]);
    pid_t fake = listen_fd >= 0 ? fake_start(listen_fd, real[chunk0].pid, stopped, 2) : -1;
    if (listen_fd >= 0)
        close(listen_fd);
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    char *got = memcached_get(reader, stalled_key, strlen(stalled_key), &length, NULL, &rc);
    long long took = elapsed_ms(&start);
    fill(value, stalled_seed);
    int fake_status = -1;
    if (fake > 0)
        waitpid(fake, &fake_status, 0);
    test_server_resume(&real[chunk0]);
    test_server_resume(&real[chunk1]);
    test_server_resume(&real[parity]);
    ok(fake > 0 && WIFEXITED(fake_status) && WEXITSTATUS(fake_status) == 0,
       "%s: the fake server took the connection and held it %d ms", name, HANDSHAKE_MS);
    tap_diag("%s: get with chunk 1 and the parity on stopped servers: %s, %zu bytes, %lld ms", name,
             memcached_strerror(NULL, rc), got != NULL ? length : 0, took);
    ok(rc == MEMCACHED_SUCCESS && got != NULL && length == SIZE && memcmp(got, value, SIZE) == 0,
       "%s of %d ms inside a wait (POLL_TIMEOUT %d ms): the requests on the other servers "
       "still answer, the coded get decodes the value",
       name, HANDSHAKE_MS, POLL_MS);
    free(got);
    memcached_free(reader);
    free(value);
    test_servers_stop(real, REAL);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    /* no spinning: chunk 0's reply wakes a sleeping pipeline, so the poll
     * timeout's clock runs when the handshake starts */
    setenv("LIBMEMCACHED_SOCKET_SPIN_US", "0", 1);
    const char *dir = getenv("TLS_TEST_DIR");
    if (dir != NULL) {
        static char ca[512];
        snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
        setenv("LIBMEMCACHED_TLS_CA_FILE", ca, 1);
        snprintf(tls_args, sizeof(tls_args),
                 "ssl_chain_cert=%s/server_crt.pem,ssl_key=%s/server_key.pem", dir, dir);
        slow_handshake(OVER_TLS);
    } else {
        tap_diag("no TLS_TEST_DIR: the TLS case is skipped");
    }
    if (getenv("SASL_CONF_PATH") != NULL)
        slow_handshake(WITH_SASL);
    else
        tap_diag("no SASL_CONF_PATH: the SASL case is skipped");
    if (tap_count == 0) {
        printf("1..0 # SKIP neither certificates nor a SASL user database\n");
        return 0;
    }
    return done_testing();
}
