/* t/rdma/mc_client.h: what the libmemcached-rdma client programs of the RDMA
 * suite share (rdma_test_client, rdma_test_client_procs,
 * rdma_test_client_close): the start of a program (its command line, the
 * guest's address, the port base, UD's idle time), the main server of the
 * first two, many requests in flight with every value
 * checked, and which stat counts the connections. Header-only (static inline functions);
 * servers and clients are t/rdma/mc_server.h's. */
#ifndef MCR_T_RDMA_MC_CLIENT_H
#define MCR_T_RDMA_MC_CLIENT_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libmemcached/memcached.h>
#include <libmemcached/nonblocking.h>

#include "mcr/rdma_wire.h"
#include "t/libmc/test_util.h" /* fill_bytes: the values */
#include "t/rdma/mc_server.h"
#include "t/rdma/tap.h"

/* EAGER: the largest payload of one message with the server's default
 * 8 KiB buffers. */
#define EAGER (8192 - MCR_RDMA_HDR_MAX)

/* 1,000 non-blocking requests in flight: isets, then igets into caller
 * buffers, then bgets. Returns the number of mismatches. */
static inline int many_in_flight(memcached_st *m, int count)
{
    memcached_request_st **reqs = calloc((size_t)count, sizeof(*reqs));
    char(*bufs)[64] = calloc((size_t)count, 64);
    int bad = 0;
    for (int i = 0; i < count; i++) {
        reqs[i] = memcached_request_create(m);
        char key[32];
        int kl = snprintf(key, sizeof(key), "nb%d", i);
        /* iset is zero-copy: the value stays put until the request completed */
        int vl = snprintf(bufs[i], sizeof(bufs[i]), "value-%d", i * 7);
        if (memcached_iset(m, key, (size_t)kl, bufs[i], (size_t)vl, 0, (uint32_t)i, reqs[i]) !=
            MEMCACHED_SUCCESS)
            bad++;
    }
    if (memcached_wait_all(m) != MEMCACHED_SUCCESS)
        bad++;
    for (int i = 0; i < count; i++)
        if (memcached_request_return(reqs[i]) != MEMCACHED_SUCCESS)
            bad++;
    for (int i = 0; i < count; i++) {
        char key[32];
        int kl = snprintf(key, sizeof(key), "nb%d", i);
        memcached_iget(m, key, (size_t)kl, bufs[i], sizeof(bufs[i]), reqs[i]);
    }
    for (int i = count; i-- > 0;) {
        char val[32];
        int vl = snprintf(val, sizeof(val), "value-%d", i * 7);
        size_t len = 0;
        if (memcached_wait(m, reqs[i]) != MEMCACHED_SUCCESS)
            bad++;
        const char *v = memcached_request_value(reqs[i], &len);
        if (v != bufs[i] || len != (size_t)vl || memcmp(v, val, len) != 0 ||
            memcached_request_flags(reqs[i]) != (uint32_t)i)
            bad++;
    }
    for (int i = 0; i < count; i++) {
        char key[32];
        int kl = snprintf(key, sizeof(key), "nb%d", i);
        memcached_bget(m, key, (size_t)kl, reqs[i]);
    }
    memcached_wait_all(m);
    for (int i = 0; i < count; i++) {
        char val[32];
        int vl = snprintf(val, sizeof(val), "value-%d", i * 7);
        size_t len = 0;
        const char *v = memcached_request_value(reqs[i], &len);
        if (memcached_request_return(reqs[i]) != MEMCACHED_SUCCESS || v == NULL ||
            len != (size_t)vl || memcmp(v, val, len) != 0)
            bad++;
    }
    for (int i = 0; i < count; i++)
        memcached_request_free(reqs[i]);
    free(bufs);
    free(reqs);
    return bad;
}

/* The server's count of open RDMA connections of the scheme under test. */
static inline const char *conns_stat(void)
{
    return rdma_over_ud() ? "rdma_ud_peers" : "rdma_curr_connections";
}

/* The guest's address from RXE_VM_ADDR, or a bail-out; the usage line
 * when the command line names no server. */
static inline void client_tests_env(int argc, const char *name)
{
    if (argc < 2)
        tap_bail("usage: %s SERVER_BINARY", name);
    rxe = getenv("RXE_VM_ADDR");
    if (rxe == NULL)
        tap_bail("RXE_VM_ADDR is not set: run inside scripts/rxe-vm");
}

/* The server binary from the command line, SIGPIPE ignored, and over UD
 * the client's idle time; returns the base of the program's ports (it
 * uses base .. base + 23). */
static inline unsigned client_tests_begin(char **argv)
{
    server_bin = argv[1];
    signal(SIGPIPE, SIG_IGN);
    if (rdma_over_ud())
        setenv("LIBMEMCACHED_RDMA_UD_IDLE_MS", "5000", 1); /* below the server's keepalive */
    return 23000 + (unsigned)(getpid() % 1000) * 4;
}

/* The main server of rdma_test_client and rdma_test_client_procs: TCP on
 * base, RDMA on base + 1, two workers. */
static inline void main_server_start(struct server *s, unsigned base)
{
    if (rdma_over_ud()) {
        server_start_with(s, base, base + 1, "2", NULL, "rdma_ud_keepalive_ms=10000");
    } else {
        /* 32 credits per RC connection, rc's default: with hybrid's 8 a
         * 64 KiB set costs the server an explicit CREDIT message more
         * (posts_per_large_request counts 3 work requests in 3 doorbells) */
        server_start_with(s, base, base + 1, "2", NULL, "rdma_rc_credits=32");
    }
}

#endif
