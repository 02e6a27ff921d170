/* t/rdma/mc_server.h: a memcached-rdma server process for the libmemcached
 * tests of the RDMA suite (TCP on 127.0.0.1 and RDMA on the guest's rxe
 * address), and a client of it over rdma:// (or the scheme MC_RDMA_SCHEME
 * names: rdma+rc, rdma+ud). Header-only; the including program sets
 * server_bin and rxe before starting one (and server_probe_scheme, to ask
 * a starting server over another scheme than rdma+rc). */
#ifndef MCR_T_RDMA_MC_SERVER_H
#define MCR_T_RDMA_MC_SERVER_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "t/rdma/proc.h"
#include "t/rdma/tap.h"

static const char *server_bin;
static const char *rxe;
/* The scheme server_start_with() asks a starting server over; NULL: rdma+rc. */
static const char *server_probe_scheme;

struct server {
    pid_t pid;
    unsigned tcp_port, rdma_port;
};

/* How server_start_args() asks a starting server whether its RDMA
 * listener answers: true when it did; NULL: its version over
 * server_probe_scheme (a server that wants a login first needs its own). */
static bool (*server_probe)(const struct server *s);

/* A TCP connection to port on the loopback address, its reads bounded by
 * 5 s: the socket, or -1. */
static int tcp_connect_loopback(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval limit = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static bool tcp_accepts(unsigned port)
{
    int fd = tcp_connect_loopback(port);
    if (fd >= 0)
        close(fd);
    return fd >= 0;
}

/* A binary-protocol client of the server over scheme ("rdma", "rdma+rc",
 * "rdma+ud"). */
static memcached_st *rdma_client_over(const struct server *s, const char *scheme)
{
    char cfg[128];
    snprintf(cfg, sizeof(cfg), "--SERVER=%s://%s:%u --BINARY-PROTOCOL", scheme, rxe, s->rdma_port);
    return memcached(cfg, strlen(cfg));
}

/* The scheme of the RDMA server strings: MC_RDMA_SCHEME (rdma, rdma+rc or
 * rdma+ud), rdma by default. */
static inline const char *rdma_scheme(void)
{
    const char *scheme = getenv("MC_RDMA_SCHEME");
    return scheme != NULL && scheme[0] != '\0' ? scheme : "rdma";
}

static inline bool rdma_over_ud(void)
{
    return strcmp(rdma_scheme(), "rdma+ud") == 0;
}

/* A client over MC_RDMA_SCHEME. */
static inline memcached_st *rdma_client(const struct server *s)
{
    return rdma_client_over(s, rdma_scheme());
}

/* One value of a stats snapshot; -1 when missing. */
static inline long stat_of(memcached_st *m, memcached_stat_st *st, const char *name)
{
    memcached_return_t rc;
    char *v = st ? memcached_stat_get_value(m, st, name, &rc) : NULL;
    long n = v ? atol(v) : -1;
    free(v);
    return n;
}

/* One stat of the server client m talks to (over m's connection, which
 * it keeps); -1 when missing. */
static inline long client_stat(memcached_st *m, const char *name)
{
    memcached_return_t rc;
    memcached_stat_st *st = memcached_stat(m, NULL, &rc);
    long n = stat_of(m, st, name);
    memcached_stat_free(m, st);
    return n;
}

/* client_stat, looked at every 100 ms for up to ms until it equals want;
 * its last value. */
static inline long client_stat_wait(memcached_st *m, const char *name, long want, int ms)
{
    long v = client_stat(m, name);
    for (int waited = 0; v != want && waited < ms; waited += 100) {
        usleep(100000);
        v = client_stat(m, name);
    }
    return v;
}

/* A text-protocol client of the server at tcp_port over TCP (for its
 * stats). */
static inline memcached_st *tcp_stats_client(unsigned tcp_port)
{
    char cfg[64];
    snprintf(cfg, sizeof(cfg), "--SERVER=127.0.0.1:%u", tcp_port);
    return memcached(cfg, strlen(cfg));
}

/* One stat of the server at tcp_port (over a TCP connection of its own);
 * -1 when missing. */
static inline long tcp_stat(unsigned tcp_port, const char *name)
{
    memcached_st *m = tcp_stats_client(tcp_port);
    long n = client_stat(m, name);
    memcached_free(m);
    return n;
}

/* Starts the server with TCP on tcp_port and RDMA on rdma_port; threads
 * workers, poll (NULL or an rdma_poll= value) for its RDMA polling, and
 * args (NULL-terminated, at most 16) for the rest of its command line. */
static void server_start_args(struct server *s, unsigned tcp_port, unsigned rdma_port,
                              const char *threads, const char *poll, const char *const *args)
{
    char listen[128], port[16];
    s->tcp_port = tcp_port;
    s->rdma_port = rdma_port;
    snprintf(listen, sizeof(listen), "rdma_listen=%s:%u%s%s", rxe, rdma_port,
             poll ? ",rdma_poll=" : "", poll ? poll : "");
    snprintf(port, sizeof(port), "%u", tcp_port);
    const char *argv[32] = {server_bin, "-u", "root",  "-l", "127.0.0.1", "-p",
                            port,       "-t", threads, "-o", listen};
    size_t argc = 11;
    for (size_t i = 0; args[i] != NULL && argc < 11 + 16; i++)
        argv[argc++] = args[i];
    s->pid = proc_fork();
    if (s->pid == 0) {
        execv(server_bin, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    for (int i = 0; i < 200 && !tcp_accepts(tcp_port); i++) {
        if (!proc_alive(s->pid, &status))
            tap_bail("server for tcp port %u exited at start-up (status %d)", tcp_port, status);
        usleep(100000);
    }
    /* RDMA listeners open after TCP: ask over RC until it answers (an
     * rdma:// client could be served over UD before RC listens), or over
     * the scheme the program named */
    for (int i = 0; i < 50; i++) {
        if (!proc_alive(s->pid, &status))
            tap_bail("server for rdma port %u exited at start-up (status %d)", rdma_port, status);
        if (server_probe != NULL) {
            if (server_probe(s))
                return;
            usleep(200000);
            continue;
        }
        memcached_st *m =
            rdma_client_over(s, server_probe_scheme ? server_probe_scheme : "rdma+rc");
        memcached_return_t rc = memcached_version(m);
        memcached_free(m);
        if (rc == MEMCACHED_SUCCESS)
            return;
        usleep(200000);
    }
    tap_bail("server on rdma port %u did not answer", rdma_port);
}

/* The same with -m 128 -I 9m and option (NULL or one more -o setting). */
static void server_start_with(struct server *s, unsigned tcp_port, unsigned rdma_port,
                              const char *threads, const char *poll, const char *option)
{
    const char *args[] = {"-m", "128", "-I", "9m", option ? "-o" : NULL, option, NULL};
    server_start_args(s, tcp_port, rdma_port, threads, poll, args);
}

static inline void server_start(struct server *s, unsigned tcp_port, unsigned rdma_port)
{
    server_start_with(s, tcp_port, rdma_port, "2", NULL, NULL);
}

/* Stops the server with sig; one stopped with SIGTERM must exit cleanly
 * (a check of its own). */
static void server_stop(struct server *s, int sig)
{
    if (s->pid > 0) {
        kill(s->pid, sig);
        int status = proc_reap(s->pid, 10000);
        s->pid = 0;
        if (sig == SIGTERM) {
            char what[64];
            snprintf(what, sizeof(what), "the server on tcp port %u", s->tcp_port);
            proc_check_clean_exit(status, what);
        }
    }
}

#endif
