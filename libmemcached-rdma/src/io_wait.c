/* io_wait.c: the request pipeline's waiting (see io.c): one pass over the
 * servers with work, spinning on transports that poll, the poll() loop with
 * its timeouts, and the blocking waits built on it. */
#include "io_internal.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "group.h"

/* A client spinning for a reply makes no system call for this many rounds,
 * then reads the clock and yields every LMR_SPIN_CHECK_ROUNDS rounds. A
 * process that may run on one processor only checks from the first
 * LMR_SPIN_CHECK_ROUNDS: there a yield is how a server on the same machine
 * gets to run, and the scheduler ignores the yield of a thread that is owed
 * much time, which long spins build up. */
#define LMR_SPIN_QUIET_ROUNDS 4096
#define LMR_SPIN_CHECK_ROUNDS 256
/* Where a poll is itself a system call (sockets: a recv that does not
 * wait), 256 of them take a few hundred microseconds, past the whole
 * budget: the clock is read and the processor offered every this many
 * polls, from the first wait on. Without that a client spinning on a busy
 * machine kept a processor for milliseconds while the server thread that
 * would answer it (or another client's) waited for one. */
#define LMR_SPIN_SYSCALL_CHECK_ROUNDS 16

/* A server that let the poll timeout pass without a reply: what its
 * transport knows of the silence (transport.h: stall_why), for the
 * server's error. */
static void fail_timed_out(memcached_instance_st *srv)
{
    char detail[128] = "", why[160];
    if (srv->conn.ops != NULL && srv->conn.ops->stall_why != NULL)
        srv->conn.ops->stall_why(&srv->conn, detail, sizeof(detail));
    bool known = detail[0] != '\0';
    snprintf(why, sizeof(why), "timed out waiting for server%s%s%s", known ? " (" : "", detail,
             known ? ")" : "");
    lmr_io_fail_server(srv, MEMCACHED_TIMEOUT, why);
}

/* Sends what can be sent; reads replies when receive is set or when requests
 * are still waiting to go out (replies free the window and the socket). */
void lmr_io_pump(memcached_instance_st *srv, bool receive)
{
    if (srv->conn.ops == NULL || !lmr_io_finish_connecting(srv))
        return;
    if (!lmr_io_send_some(srv) || !lmr_io_wants_input(srv) || (!receive && srv->send_next == NULL))
        return;
    bool moving = lmr_io_switching(srv);
    /* moved: the requests held go over the new transport; and when the
     * new one was asked to move already (a MOVE during the SASL login
     * there), its END goes now: the server answers nothing more on it
     * before the END, so no input would wake the pipeline to send it */
    if (lmr_io_receive_some(srv) && moving && srv->conn.ops != NULL)
        lmr_io_send_some(srv);
}

/* When a server marked stalled (server.h) fails if it still made no
 * progress: POLL_TIMEOUT after it stopped answering. -1 when it is not
 * stalled (any more) or there is no poll timeout. */
static int64_t stalled_deadline_ms(memcached_instance_st *srv)
{
    if (!srv->stalled)
        return -1;
    if (srv->stalled_mark != srv->progress || srv->queued == 0 || srv->conn.ops == NULL) {
        srv->stalled = false; /* it answered, or has nothing left to answer */
        return -1;
    }
    int timeout = srv->client->behaviors.poll_timeout_ms;
    return timeout < 0 ? -1 : srv->stalled_since_ms + timeout;
}

/* Fails stalled servers whose deadline passed, even while other servers
 * keep the pipeline busy (run_until's own timeout needs silence on every
 * connection): requests left behind on them complete then. */
static void fail_stalled(struct lmr_client *c)
{
    int64_t now = -1;
    for (uint32_t i = 0; i < c->server_count; i++) {
        memcached_instance_st *srv = c->servers[i];
        int64_t deadline = stalled_deadline_ms(srv);
        if (deadline < 0)
            continue;
        if (now < 0)
            now = lmr_io_now_ms();
        if (now >= deadline) {
            srv->stalled = false;
            fail_timed_out(srv);
        }
    }
}

void lmr_io_poll_once(struct lmr_client *c)
{
    for (uint32_t i = 0; i < c->server_count; i++)
        if (c->servers[i]->queued > 0)
            lmr_io_pump(c->servers[i], true);
    fail_stalled(c);
    lmr_group_run_timers(c);  /* parents whose timer is due */
    lmr_group_run_pending(c); /* parents whose children completed */
}

void lmr_io_poll_events(struct lmr_client *c)
{
    bool any = false;
    for (uint32_t i = 0; i < c->server_count; i++) {
        memcached_instance_st *srv = c->servers[i];
        if (srv->queued > 0 && srv->conn.ops != NULL && !srv->connecting &&
            srv->conn.ops->poll_events != NULL) {
            srv->conn.ops->poll_events(&srv->conn);
            any = true;
        }
    }
    if (any)
        lmr_io_poll_once(c);
}

typedef bool (*lmr_done_fn)(struct lmr_client *c, const void *arg);

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Rounds before a spinning client's first check: LMR_SPIN_QUIET_ROUNDS, or
 * LMR_SPIN_CHECK_ROUNDS where the process may run on one processor only
 * (asked of the kernel once per process). */
static unsigned spin_quiet_rounds(void)
{
    static _Atomic unsigned known; /* 0 until asked */
    unsigned rounds = atomic_load_explicit(&known, memory_order_relaxed);
    if (rounds == 0) {
        cpu_set_t allowed;
        bool one_cpu =
            sched_getaffinity(0, sizeof(allowed), &allowed) == 0 && CPU_COUNT(&allowed) == 1;
        rounds = one_cpu ? LMR_SPIN_CHECK_ROUNDS : LMR_SPIN_QUIET_ROUNDS;
        atomic_store_explicit(&known, rounds, memory_order_relaxed);
    }
    return rounds;
}

/* Servers whose transport polls input without sleeping (RDMA: without a
 * system call; sockets: with a recv that does not wait) are polled for up
 * to their spin budget before the pipeline sleeps, then readied for
 * sleeping. True when one of them has input. */
static bool spin_for_input(struct lmr_client *c)
{
    unsigned budget = 0;
    bool pollers = false, syscall_polls = false;
    for (uint32_t i = 0; i < c->server_count; i++) {
        memcached_instance_st *srv = c->servers[i];
        if (srv->conn.ops != NULL && srv->conn.ops->poll_input != NULL && srv->queued > 0 &&
            !srv->connecting) {
            pollers = true;
            syscall_polls = syscall_polls || srv->conn.ops->poll_input_is_syscall;
            if (lmr_io_awaiting_reply(srv) && srv->conn.spin_us > budget &&
                (srv->conn.ops->peer_shares_cpu == NULL ||
                 !srv->conn.ops->peer_shares_cpu(&srv->conn)))
                budget = srv->conn.spin_us;
        }
    }
    if (!pollers)
        return false;
    /* Past spin_quiet_rounds(), and every LMR_SPIN_CHECK_ROUNDS after, the
     * processor is offered to other threads (software RDMA devices, rxe, do
     * part of their work in kernel threads that a spinning client would
     * starve) and the clock is read for the budget, which counts from the
     * first such point. Both are system calls. The first rounds make none:
     * a small request's reply comes within them, and on an emulated device
     * any system call between two doorbells makes the next one slower (a
     * clock read and a yield at round 256 cost a 1-byte get about 4 us in
     * the test guest; see doc/rdma-measurements.md). */
    int64_t until = 0;
    unsigned check_every = syscall_polls ? LMR_SPIN_SYSCALL_CHECK_ROUNDS : LMR_SPIN_CHECK_ROUNDS;
    unsigned next_check = syscall_polls ? check_every : spin_quiet_rounds();
    if (syscall_polls && budget > 0)
        until = now_us() + budget; /* the polls cost more than the clock */
    for (unsigned round = 1; budget > 0; round++) {
        if (round == next_check) {
            next_check += check_every;
            int64_t now = now_us();
            if (until == 0)
                until = now + budget;
            else if (now >= until)
                break;
            sched_yield();
        }
        for (uint32_t i = 0; i < c->server_count; i++) {
            memcached_instance_st *srv = c->servers[i];
            if (srv->conn.ops != NULL && srv->conn.ops->poll_input != NULL &&
                lmr_io_wants_input(srv) && srv->conn.ops->poll_input(&srv->conn))
                return true;
        }
    }
    bool ready = false;
    for (uint32_t i = 0; i < c->server_count; i++) {
        memcached_instance_st *srv = c->servers[i];
        if (srv->conn.ops != NULL && srv->conn.ops->prepare_sleep != NULL && srv->queued > 0 &&
            !srv->connecting && srv->conn.ops->prepare_sleep(&srv->conn))
            ready = true;
    }
    return ready;
}

static void run_until(struct lmr_client *c, lmr_done_fn done, const void *arg)
{
    struct pollfd stack_fds[16];
    struct pollfd *fds = stack_fds;
    int64_t last_progress = -1; /* read the clock only once the pipeline sleeps */
    for (;;) {
        lmr_io_poll_once(c);
        if (done(c, arg))
            break;
        if (c->server_count > 16 && fds == stack_fds) {
            fds = calloc(c->server_count, sizeof(*fds));
            if (fds == NULL) {
                for (uint32_t i = 0; i < c->server_count; i++)
                    if (c->servers[i]->queued > 0)
                        lmr_io_fail_server(c->servers[i], MEMCACHED_MEMORY_ALLOCATION_FAILURE,
                                           "out of memory");
                return;
            }
        }
        if (spin_for_input(c)) {
            last_progress = -1; /* input moved: progress; the clock is read at the next sleep */
            continue;
        }
        if (last_progress < 0)
            last_progress =
                lmr_io_now_ms(); /* not before: a reply found while spinning needs no clock */
        /* a connect that blocked the caller (a step asked a server whose
         * connection had closed; a handshake) is not silence of the
         * servers: requests asked after it get their whole poll timeout */
        if (c->connect_returned_ms > last_progress)
            last_progress = c->connect_returned_ms;
        nfds_t nfds = 0;
        for (uint32_t i = 0; i < c->server_count; i++) {
            memcached_instance_st *srv = c->servers[i];
            if (srv->queued == 0 || srv->conn.ops == NULL)
                continue;
            short events = 0;
            if (srv->connecting)
                events |= POLLOUT | POLLIN; /* as lmr_io_finish_connecting() asks */
            else if (srv->send_next != NULL && lmr_io_window_allows(srv, srv->send_next, 0))
                events |= POLLOUT;
            if (lmr_io_wants_input(srv))
                events |= POLLIN;
            fds[nfds].fd = srv->conn.ops->poll_fd(&srv->conn);
            fds[nfds].events = events;
            fds[nfds].revents = 0;
            nfds++;
        }
        if (nfds == 0)
            break; /* nothing left that could make progress */
        int timeout = c->behaviors.poll_timeout_ms;
        int64_t now = lmr_io_now_ms();
        int64_t remaining = timeout < 0 ? INT32_MAX : timeout - (now - last_progress);
        for (uint32_t i = 0; i < c->server_count; i++) { /* connect and stall deadlines too */
            memcached_instance_st *srv = c->servers[i];
            if (srv->connecting && srv->connect_deadline_ms - now < remaining)
                remaining = srv->connect_deadline_ms - now;
            int64_t stalled = stalled_deadline_ms(srv);
            if (stalled >= 0 && stalled - now < remaining)
                remaining = stalled - now;
        }
        int64_t wake = lmr_group_next_wake_ms(c); /* and parents' timers */
        bool woken = wake >= 0 && wake - now < remaining;
        if (woken)
            remaining = wake - now;
        if (remaining < 0)
            remaining = 0;
        int n =
            poll(fds, nfds, timeout < 0 && remaining == INT32_MAX && !woken ? -1 : (int)remaining);
        if (n < 0 && errno == EINTR)
            continue;
        if (n > 0) {
            last_progress = lmr_io_now_ms();
            continue;
        }
        if (timeout < 0 || lmr_io_now_ms() - last_progress < timeout)
            continue; /* a connect deadline: lmr_io_finish_connecting() deals with it */
        /* no progress for the whole poll timeout */
        for (uint32_t i = 0; i < c->server_count; i++) {
            memcached_instance_st *srv = c->servers[i];
            if (srv->queued > 0 && srv->conn.ops != NULL && !srv->connecting)
                fail_timed_out(srv);
        }
        last_progress = lmr_io_now_ms();
    }
    if (fds != stack_fds)
        free(fds);
}

static bool request_done(struct lmr_client *c, const void *arg)
{
    (void)c;
    const memcached_request_st *req = arg;
    return req->state != LMR_STATE_QUEUED;
}

memcached_return_t lmr_io_wait(struct lmr_client *c, memcached_request_st *req)
{
    if (req->state == LMR_STATE_QUEUED)
        run_until(c, request_done, req);
    if (req->state == LMR_STATE_QUEUED) /* cannot happen: every queue drains */
        return MEMCACHED_FAILURE;
    return req->rc;
}

static bool all_done(struct lmr_client *c, const void *arg)
{
    (void)arg;
    for (uint32_t i = 0; i < c->server_count; i++)
        if (c->servers[i]->queued > 0)
            return false;
    return c->pending_groups == NULL;
}

memcached_return_t lmr_io_wait_all(struct lmr_client *c)
{
    run_until(c, all_done, NULL);
    return MEMCACHED_SUCCESS;
}

static bool fetch_ready(struct lmr_client *c, const void *arg)
{
    (void)arg;
    return c->fetch.head != NULL || c->fetch.pending_requests == 0;
}

void lmr_io_wait_fetch(struct lmr_client *c)
{
    run_until(c, fetch_ready, NULL);
}
