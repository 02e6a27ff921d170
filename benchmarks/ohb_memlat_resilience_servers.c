/* benchmarks/ohb_memlat_resilience_servers.c: ohb_memlat_resilience's five
 * servers: starting them (over TCP, Unix sockets or RDMA), killing and
 * restarting them, flushing them, summing their stats, and a client of
 * each scheme on them. */
#include "ohb_memlat_resilience.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

struct server servers[SERVERS];

static unsigned free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    unsigned port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sin, &len) == 0)
        port = ntohs(sin.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* Adds server i to memc: over RDMA with --rdma (unless `tcp`), else over
 * its Unix socket or TCP port. */
static void add_server(memcached_st *memc, int i, bool tcp)
{
    const struct server *s = &servers[i];
    if (rdma_addr != NULL && !tcp) {
        char spec[128];
        snprintf(spec, sizeof(spec), "%s://%s:%u", rdma_schemes[rdma_mode], rdma_addr,
                 s->rdma_port);
        memcached_server_st *list = memcached_servers_parse(spec);
        memcached_server_push(memc, list);
        memcached_server_list_free(list);
    } else if (over_unix) {
        memcached_server_add_unix_socket(memc, s->path);
    } else {
        memcached_server_add(memc, "127.0.0.1", (in_port_t)s->port);
    }
}

/* Whether server i answers over TCP (or its Unix socket). */
static bool server_tcp_answers(int i)
{
    memcached_st *probe = memcached_create(NULL);
    add_server(probe, i, true);
    memcached_return_t rc = memcached_exist(probe, "probe", 5);
    memcached_free(probe);
    return rc == MEMCACHED_SUCCESS || rc == MEMCACHED_NOTFOUND;
}

/* Starts server i (again, on the same port or path, when it ran before). */
bool res_server_start(int i)
{
    struct server *s = &servers[i];
    char rdma_listen[128] = "", rdma_transport[32];
    if (rdma_addr != NULL) {
        s->rdma_port = free_port();
        snprintf(rdma_listen, sizeof(rdma_listen), "rdma_listen=%s:%u", rdma_addr, s->rdma_port);
    }
    snprintf(rdma_transport, sizeof(rdma_transport), "rdma_transport=%s", rdma_modes[rdma_mode]);
    if (over_unix && s->path[0] == '\0')
        snprintf(s->path, sizeof(s->path), "/tmp/ohb-res-%d-%d.sock", (int)getpid(), i);
    if (!over_unix && s->port == 0)
        s->port = free_port();
    if (over_unix)
        unlink(s->path);
    char port[16];
    snprintf(port, sizeof(port), "%u", s->port);
    s->pid = fork();
    if (s->pid < 0)
        return false;
    if (s->pid == 0) {
        const char *argv[24]; /* 21 at most below, with the NULL */
        int n = 0;
        argv[n++] = server_binary;
        if (over_unix) {
            argv[n++] = "-s";
            argv[n++] = s->path;
        } else {
            argv[n++] = "-p";
            argv[n++] = port;
            argv[n++] = "-l";
            argv[n++] = "127.0.0.1";
        }
        argv[n++] = "-U";
        argv[n++] = "0";
        argv[n++] = "-m";
        argv[n++] = "512";
        argv[n++] = "-t";
        argv[n++] = "1";
        argv[n++] = "-I"; /* 1 MiB values whole, with their key and header */
        argv[n++] = "2m";
        if (rdma_listen[0] != '\0') {
            argv[n++] = "-o";
            argv[n++] = rdma_listen;
            argv[n++] = "-o";
            argv[n++] = rdma_transport;
        }
        if (geteuid() == 0) {
            argv[n++] = "-u";
            argv[n++] = "root";
        }
        argv[n] = NULL;
        execv(server_binary, (char *const *)argv);
        _exit(127);
    }
    char last_error[512] = "";
    bool tcp_answered = false;                  /* so its RDMA listeners are open (see below) */
    for (int tries = 0; tries < 500; tries++) { /* up to 5 s */
        memcached_st *probe = memcached_create(NULL);
        add_server(probe, i, false);
        memcached_return_t rc = memcached_exist(probe, "probe", 5); /* over RDMA too */
        if (rc == MEMCACHED_NOTFOUND)
            rc = MEMCACHED_SUCCESS;
        if (rc != MEMCACHED_SUCCESS)
            snprintf(last_error, sizeof(last_error), "%s", memcached_last_error_message(probe));
        memcached_free(probe);
        if (rc == MEMCACHED_SUCCESS)
            return true;
        int status;
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            fprintf(stderr, "server %d (%s) exited with status %d before answering\n", i,
                    server_binary,
                    WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
            s->pid = 0;
            return false;
        }
        if (tcp_answered) {
            /* an RDMA probe made after the listeners opened was refused */
            fprintf(stderr,
                    "server %d answers over TCP but not at %s://%s:%u (%s): no RDMA at %s?\n", i,
                    rdma_schemes[rdma_mode], rdma_addr, s->rdma_port, last_error, rdma_addr);
            return false;
        }
        if (rdma_addr != NULL && tries >= 50 && server_tcp_answers(i)) {
            /* the server answers TCP only once its RDMA listeners are open
             * or given up (it said why on its standard error); the RDMA
             * probe above may have been refused before they opened, so the
             * next one decides */
            tcp_answered = true;
            continue;
        }
        usleep(10000);
    }
    fprintf(stderr, "server %d did not answer in 5 s: %s\n", i, last_error);
    return false;
}

void res_server_kill(int i)
{
    if (servers[i].pid > 0) {
        kill(servers[i].pid, SIGKILL);
        waitpid(servers[i].pid, NULL, 0);
        servers[i].pid = 0;
    }
}

memcached_st *res_client(enum scheme scheme)
{
    memcached_st *memc = memcached_create(NULL);
    for (int i = 0; i < SERVERS; i++)
        add_server(memc, i, false);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 3600);
    if (hedge_timeout >= 0)
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_RESILIENCE_HEDGE_TIMEOUT,
                               (uint64_t)hedge_timeout);
    if (scheme == SYNC_REP)
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_REPLICATION, MEMCACHED_REPLICATION_SYNC(3));
    if (scheme == ASYNC_REP)
        memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_REPLICATION,
                               MEMCACHED_REPLICATION_ASYNC(3));
    if (scheme == RS) {
        memcached_return_t rc = memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_ERASURE_CODING,
                                                       MEMCACHED_ERASURE_CODING(3, 2));
        if (rc != MEMCACHED_SUCCESS)
            ohb_fail(memc, "ERASURE_CODING", rc);
        if (ec_threshold >= 0)
            memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_ERASURE_CODING_THRESHOLD,
                                   (uint64_t)ec_threshold);
    }
    return memc;
}

/* Every server killed and started again, empty. */
void res_restart_all(void)
{
    for (int i = 0; i < SERVERS; i++) {
        res_server_kill(i);
        if (!res_server_start(i)) {
            fprintf(stderr, "could not restart %s\n", server_binary);
            exit(1);
        }
    }
}

/* Every running server flushed, over TCP or its Unix socket: a new RDMA
 * connection per server and call costs seconds in the Soft-RoCE guest. */
void res_flush_all(void)
{
    memcached_st *memc = memcached_create(NULL);
    for (int i = 0; i < SERVERS; i++)
        if (servers[i].pid > 0)
            add_server(memc, i, true);
    memcached_flush(memc, 0);
    memcached_free(memc);
}

/* The servers' `bytes` (gets: `cmd_get`) summed over those running. */
uint64_t res_servers_stat(bool gets)
{
    uint64_t total = 0;
    for (int i = 0; i < SERVERS; i++) {
        if (servers[i].pid <= 0)
            continue;
        memcached_st *memc = memcached_create(NULL);
        add_server(memc, i, true); /* stats: over TCP or the Unix socket */
        memcached_return_t rc;
        memcached_stat_st *stats = memcached_stat(memc, NULL, &rc);
        if (stats != NULL)
            total += gets ? stats[0].cmd_get : stats[0].bytes;
        memcached_stat_free(memc, stats);
        memcached_free(memc);
    }
    return total;
}

/* At any exit, also ohb_fail's: the servers go with the program. */
void res_kill_servers(void)
{
    for (int i = SERVERS; i > 0; i--)
        res_server_kill(i - 1);
    if (over_unix)
        for (int i = 0; i < SERVERS; i++)
            unlink(servers[i].path);
}
