/* t/libmc/server.c: server processes and the fake server for the client
 * tests (see server.h). Every wait here is bounded in time. */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

void test_server_add_to(memcached_st *memc, const struct test_server *s)
{
    if (s->rdma_port != 0) {
        char spec[128];
        snprintf(spec, sizeof(spec), "rdma://%s:%u", s->rdma_addr, s->rdma_port);
        memcached_server_st *list = memcached_servers_parse(spec);
        memcached_server_push(memc, list);
        memcached_server_list_free(list);
    } else if (s->port == 0) {
        memcached_server_add_unix_socket(memc, s->socket_path);
    } else {
        memcached_server_add(memc, "127.0.0.1", (in_port_t)s->port);
    }
}

memcached_st *test_client_for(const struct test_server *s, bool binary)
{
    memcached_st *memc = memcached_create(NULL);
    test_server_add_to(memc, s);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, binary);
    return memc;
}

unsigned test_unused_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    if (fd < 0)
        return 0;
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
        getsockname(fd, (struct sockaddr *)&sin, &len) < 0) {
        close(fd);
        return 0;
    }
    close(fd);
    return ntohs(sin.sin_port);
}

static bool can_connect(const struct test_server *s)
{
    int fd;
    int rc;
    if (s->port == 0) {
        struct sockaddr_un sun = {.sun_family = AF_UNIX};
        snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", s->socket_path);
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        rc = connect(fd, (struct sockaddr *)&sun, sizeof(sun));
    } else {
        struct sockaddr_in sin = {.sin_family = AF_INET,
                                  .sin_port = htons((uint16_t)s->port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        fd = socket(AF_INET, SOCK_STREAM, 0);
        rc = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
    }
    if (fd >= 0)
        close(fd);
    return rc == 0;
}

/* Whether a client reaches s over RDMA: a server restarted on the port of
 * one just killed cannot listen there while the kernel still holds the
 * killed one's connections, and then serves TCP only. */
static bool rdma_accepts(const struct test_server *s)
{
    char cfg[192];
    snprintf(cfg, sizeof(cfg), "--SERVER=rdma://%s:%u --CONNECT-TIMEOUT=2000", s->rdma_addr,
             s->rdma_port);
    memcached_st *memc = memcached(cfg, strlen(cfg));
    if (memc == NULL)
        return false;
    memcached_return_t rc = memcached_exist(memc, "rdma-probe", 10);
    memcached_free(memc);
    return rc == MEMCACHED_SUCCESS || rc == MEMCACHED_NOTFOUND;
}

/* Starts the server on s's port or socket path when `again`, else on new
 * ones (and an RDMA listener on rdma_addr when not NULL), with the extra
 * arguments (NULL-terminated, or NULL). */
static bool start_once(struct test_server *s, bool unix_socket, bool again,
                       const char *const *extra, const char *rdma_addr)
{
    const char *binary = getenv("MC_SERVER");
    if (binary == NULL || binary[0] == '\0')
        binary = "/usr/bin/memcached";
    char port_text[16];
    if (again) { /* the same port or path */
        s->pid = 0;
        if (unix_socket)
            unlink(s->socket_path);
    } else if (unix_socket) {
        memset(s, 0, sizeof(*s));
        snprintf(s->socket_path, sizeof(s->socket_path), "/tmp/lmr-test-%d-%ld.sock", (int)getpid(),
                 (long)random());
        unlink(s->socket_path);
    } else {
        memset(s, 0, sizeof(*s));
        s->port = test_unused_port();
        if (s->port == 0)
            return false;
        if (rdma_addr != NULL) { /* RDMA CM ports are a space of their own */
            s->rdma_port = test_unused_port();
            snprintf(s->rdma_addr, sizeof(s->rdma_addr), "%s", rdma_addr);
        }
    }
    snprintf(port_text, sizeof(port_text), "%u", s->port);
    char rdma_listen[128];
    snprintf(rdma_listen, sizeof(rdma_listen), "rdma_listen=%s:%u", s->rdma_addr, s->rdma_port);
    pid_t pid = fork();
    if (pid < 0)
        return false;
    if (pid == 0) {
        const char *argv[32];
        int n = 0;
        argv[n++] = binary;
        if (unix_socket) {
            argv[n++] = "-s";
            argv[n++] = s->socket_path;
        } else {
            argv[n++] = "-p";
            argv[n++] = port_text;
            argv[n++] = "-l";
            argv[n++] = "127.0.0.1";
        }
        argv[n++] = "-U";
        argv[n++] = "0";
        argv[n++] = "-m";
        argv[n++] = "64";
        if (s->rdma_port != 0) {
            argv[n++] = "-o";
            argv[n++] = rdma_listen;
        }
        if (geteuid() == 0) {
            argv[n++] = "-u";
            argv[n++] = "root";
        }
        for (; extra != NULL && *extra != NULL && n < 31; extra++)
            argv[n++] = *extra;
        argv[n] = NULL;
        execv(binary, (char *const *)argv);
        _exit(127);
    }
    s->pid = pid;
    int rdma_tries = 0;
    for (int i = 0; i < 500; i++) { /* at most 5 s, and 8 s more over RDMA */
        if (can_connect(s)) {
            /* the RDMA listener comes up after TCP's (an emulated device
             * registers the server's buffers slowly) */
            if (s->rdma_port == 0 || rdma_accepts(s))
                return true;
            if (++rdma_tries == 40)
                break;
            usleep(200000);
        }
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            s->pid = 0;
            return false;
        }
        usleep(10000);
    }
    test_server_stop(s, true);
    return false;
}

bool test_server_start(struct test_server *s, bool unix_socket)
{
    return test_server_start_args(s, unix_socket, NULL);
}

bool test_server_start_args(struct test_server *s, bool unix_socket, const char *const *extra)
{
    static bool seeded;
    if (!seeded) {
        srandom((unsigned)(time(NULL) ^ getpid()));
        seeded = true;
    }
    for (int attempt = 0; attempt < 5; attempt++)
        if (start_once(s, unix_socket, false, extra, NULL))
            return true;
    return false;
}

bool test_server_start_rdma(struct test_server *s, const char *rdma_addr)
{
    for (int attempt = 0; attempt < 5; attempt++)
        if (start_once(s, false, false, NULL, rdma_addr))
            return true;
    return false;
}

bool test_server_restart_fresh(struct test_server *s)
{
    if (s->rdma_port == 0)
        return start_once(s, s->port == 0, true, NULL, NULL);
    /* a port free for TCP may still be held in the RDMA CM's port space
     * (a killed server's listener, for seconds): then the server serves
     * TCP only and start_once gives up on it; another port is tried */
    for (int attempt = 0; attempt < 5; attempt++) {
        unsigned port = test_unused_port();
        if (port == 0)
            return false;
        s->rdma_port = port;
        if (start_once(s, s->port == 0, true, NULL, NULL))
            return true;
    }
    return false;
}

bool test_server_restart(struct test_server *s)
{
    /* over RDMA, again until the port is free (seconds after a kill) */
    for (int attempt = 0; attempt < (s->rdma_port != 0 ? 60 : 1); attempt++) {
        if (start_once(s, s->port == 0, true, NULL, NULL))
            return true;
        usleep(250000);
    }
    return false;
}

void test_server_stop(struct test_server *s, bool hard)
{
    if (s->pid > 0) {
        if (hard) {
            kill(s->pid, SIGKILL); /* also ends a stopped process, without resuming it */
        } else {
            kill(s->pid, SIGCONT);
            kill(s->pid, SIGTERM);
        }
        int status;
        for (int i = 0; i < 500; i++) {
            if (waitpid(s->pid, &status, WNOHANG) == s->pid)
                break;
            if (i == 300)
                kill(s->pid, SIGKILL);
            usleep(10000);
        }
        s->pid = 0;
    }
    if (s->socket_path[0] != '\0')
        unlink(s->socket_path);
}

void test_server_pause(struct test_server *s)
{
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGSTOP);
    /* signals are asynchronous: wait until the process has really stopped */
    int status;
    (void)waitpid(s->pid, &status, WUNTRACED);
}

void test_server_resume(struct test_server *s)
{
    if (s->pid > 0)
        kill(s->pid, SIGCONT);
}

bool test_servers_start(struct test_server *servers, int count,
                        const enum test_transport *transports, const char *rdma_addr)
{
    for (int i = 0; i < count; i++)
        if (!(transports[i] == TEST_OVER_RDMA
                  ? test_server_start_rdma(&servers[i], rdma_addr)
                  : test_server_start(&servers[i], transports[i] == TEST_OVER_UNIX)))
            return false;
    return true;
}

void test_servers_stop(struct test_server *servers, int count)
{
    for (int i = count; i > 0; i--)
        test_server_stop(&servers[i - 1], false);
}

bool hung_listener_start(struct hung_listener *h, unsigned port)
{
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                              .sin_port = htons((uint16_t)port)};
    int one = 1;
    h->queued_fd = -1;
    h->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (h->listen_fd < 0)
        return false;
    /* a backlog of 0 holds one connection; the next SYNs are dropped */
    if (setsockopt(h->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(h->listen_fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
        listen(h->listen_fd, 0) < 0) {
        close(h->listen_fd);
        return false;
    }
    h->queued_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (h->queued_fd < 0 || connect(h->queued_fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
        hung_listener_stop(h);
        return false;
    }
    return true;
}

void hung_listener_stop(struct hung_listener *h)
{
    if (h->queued_fd >= 0)
        close(h->queued_fd);
    close(h->listen_fd);
    h->queued_fd = h->listen_fd = -1;
}

static void *fake_main(void *arg)
{
    struct fake_server *f = arg;
    while (!f->stop) {
        struct pollfd pfd = {.fd = f->listen_fd, .events = POLLIN};
        if (poll(&pfd, 1, 50) <= 0)
            continue;
        int fd = accept(f->listen_fd, NULL, NULL);
        if (fd < 0)
            continue;
        char buf[4096];
        struct pollfd cfd = {.fd = fd, .events = POLLIN};
        /* wait for a request (bounded), answer, then hang up or idle */
        for (int i = 0; i < 100 && !f->stop; i++) {
            if (poll(&cfd, 1, 50) > 0) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n <= 0)
                    break;
                if (f->reply != NULL && write(fd, f->reply, f->reply_length) < 0)
                    break;
                if (f->hang_up)
                    break;
            }
        }
        close(fd);
    }
    return NULL;
}

bool fake_server_start(struct fake_server *f, const char *reply, size_t reply_length, bool hang_up)
{
    memset(f, 0, sizeof(*f));
    f->reply = reply;
    f->reply_length = reply_length;
    f->hang_up = hang_up;
    f->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    if (f->listen_fd < 0 || bind(f->listen_fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
        listen(f->listen_fd, 8) < 0 || getsockname(f->listen_fd, (struct sockaddr *)&sin, &len) < 0)
        return false;
    f->port = ntohs(sin.sin_port);
    pthread_t t;
    if (pthread_create(&t, NULL, fake_main, f) != 0)
        return false;
    f->thread = (unsigned long)t;
    return true;
}

void fake_server_stop(struct fake_server *f)
{
    f->stop = true;
    pthread_join((pthread_t)f->thread, NULL);
    close(f->listen_fd);
}
