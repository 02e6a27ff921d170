/* t/libmc/server.h: starting and stopping memcached servers for the client
 * tests: the binary named by $MC_SERVER (default /usr/bin/memcached), on a
 * free loopback port or a Unix socket, plus a scripted fake server that
 * answers with fixed bytes (for garbage, hang-up and silence cases). */
#ifndef LMR_TEST_SERVER_H
#define LMR_TEST_SERVER_H

#include <stdbool.h>
#include <sys/types.h>

struct test_server {
    pid_t pid;
    unsigned port; /* 0 for a Unix socket server */
    char socket_path[108];
    unsigned rdma_port; /* also listens over RDMA there when not 0 */
    char rdma_addr[64];
};

/* Starts a server on 127.0.0.1 at a free port (or on a Unix socket when
 * unix_socket is true) and waits until it accepts connections. */
bool test_server_start(struct test_server *s, bool unix_socket);
/* The same with more server arguments (NULL-terminated), e.g. "-S". */
bool test_server_start_args(struct test_server *s, bool unix_socket, const char *const *extra);
/* Starts a server on a free TCP port that also listens over RDMA on
 * rdma_addr (an address of an RDMA device) at a port of its own. */
bool test_server_start_rdma(struct test_server *s, const char *rdma_addr);
/* Starts a stopped server again, empty, on its old port or socket path. */
bool test_server_restart(struct test_server *s);
/* The same, but a server that also listens over RDMA does so on a new port
 * (the old one stays taken for seconds after a kill): clients made before
 * reach it over RDMA no more. */
bool test_server_restart_fresh(struct test_server *s);
/* SIGTERM (or SIGKILL when hard) and reap. */
void test_server_stop(struct test_server *s, bool hard);
void test_server_pause(struct test_server *s);  /* SIGSTOP */
void test_server_resume(struct test_server *s); /* SIGCONT */
/* How a test server listens. */
enum test_transport { TEST_OVER_TCP, TEST_OVER_UNIX, TEST_OVER_RDMA };
/* Starts servers[0..count), server i over transports[i] (over RDMA on
 * rdma_addr); false at the first that does not start. */
bool test_servers_start(struct test_server *servers, int count,
                        const enum test_transport *transports, const char *rdma_addr);
/* Stops them (SIGTERM), the last first. */
void test_servers_stop(struct test_server *servers, int count);
/* Adds the server to memc the way it listens: over RDMA when it does
 * (rdma://addr:port), else its Unix socket or 127.0.0.1:port. */
struct memcached_st;
void test_server_add_to(struct memcached_st *memc, const struct test_server *s);
/* A new client of the one server s, in the binary protocol when binary is
 * true, else the text protocol. */
struct memcached_st *test_client_for(const struct test_server *s, bool binary);
/* A port on 127.0.0.1 that nothing listens on (bound, then released). */
unsigned test_unused_port(void);

/* A listener on 127.0.0.1:port that accepts nothing and whose accept
 * queue is full, so a new connection to it hangs (its SYN is dropped)
 * until the client gives up: what a server that stopped, or whose machine
 * froze, looks like to a client connecting afresh. */
struct hung_listener {
    int listen_fd;
    int queued_fd; /* the one connection that fills the queue */
};
bool hung_listener_start(struct hung_listener *h, unsigned port);
void hung_listener_stop(struct hung_listener *h);

/* Fake server: a thread accepts one connection at a time, reads a request
 * and answers `reply` (length reply_length), then closes the connection if
 * hang_up, or stays silent if reply is NULL. */
struct fake_server {
    int listen_fd;
    unsigned port;
    const char *reply;
    size_t reply_length;
    bool hang_up;
    volatile bool stop;
    unsigned long thread;
};
bool fake_server_start(struct fake_server *f, const char *reply, size_t reply_length, bool hang_up);
void fake_server_stop(struct fake_server *f);

#endif
