/* t/rdma/rdma_test_workers.c: one listener spreading connections over three
 * worker contexts, each driven by its own thread (the server's threading
 * model): every connection lands on its chosen worker, is served there, and
 * is freed there after the client closes. Clients run on the main thread.
 * Runs in the guest. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "t/rdma/harness.h"

#define WORKERS 3
#define CLIENTS 6

struct worker {
    struct mcr_rdma_ctx *ctx;
    pthread_t thread;
    atomic_int accepted, connected, closed, echoed, wrong_thread;
};

static struct worker workers[WORKERS];
static atomic_bool stop;
static atomic_uint next_worker;
static __thread struct worker *current_worker; /* the worker this thread runs */

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    current_worker = w;
    while (!atomic_load(&stop))
        if (mcr_rdma_ctx_progress(w->ctx, 20) < 0)
            break;
    return NULL;
}

static void w_on_connected(struct mcr_rdma_ep *ep, void *user)
{
    (void)ep;
    atomic_fetch_add(&((struct worker *)user)->connected, 1);
}

static void w_on_message(struct mcr_rdma_ep *ep, const struct mcr_rdma_msg *msg, void *user)
{
    struct worker *w = user;
    if (current_worker != w)
        atomic_fetch_add(&w->wrong_thread, 1);
    struct iovec iov = {.iov_base = (void *)msg->payload, .iov_len = msg->payload_len};
    struct mcr_rdma_send s = {.type = MCR_RDMA_MSG_EAGER,
                              .request_id = msg->request_id,
                              .iov = &iov,
                              .iovcnt = msg->payload_len ? 1 : 0};
    if (mcr_rdma_ep_send(ep, &s) == 0)
        atomic_fetch_add(&w->echoed, 1);
}

static void w_on_closed(struct mcr_rdma_ep *ep, int reason, const char *why, void *user)
{
    (void)ep;
    (void)reason;
    (void)why;
    atomic_fetch_add(&((struct worker *)user)->closed, 1);
}

static int w_accept(struct mcr_rdma_listener *l, struct mcr_rdma_ep *ep, void *user)
{
    (void)l;
    (void)user;
    struct worker *w = NULL;
    for (int i = 0; i < WORKERS; i++)
        if (workers[i].ctx == ep->ctx)
            w = &workers[i];
    if (w == NULL)
        return -1;
    if (current_worker != w)
        atomic_fetch_add(&w->wrong_thread, 1);
    static const struct mcr_rdma_ep_callbacks cb = {
        .on_connected = w_on_connected,
        .on_message = w_on_message,
        .on_closed = w_on_closed,
    };
    mcr_rdma_ep_set_callbacks(ep, &cb, w);
    atomic_fetch_add(&w->accepted, 1);
    return 0;
}

static struct mcr_rdma_ctx *place(struct mcr_rdma_listener *l, void *user)
{
    (void)l;
    (void)user;
    return workers[atomic_fetch_add(&next_worker, 1) % WORKERS].ctx;
}

static bool all_closed(void *arg)
{
    (void)arg;
    for (int i = 0; i < WORKERS; i++)
        if (atomic_load(&workers[i].closed) != atomic_load(&workers[i].accepted))
            return false;
    return true;
}

int main(void)
{
    tap_plan(6);
    for (int i = 0; i < WORKERS; i++) {
        struct mcr_rdma_ctx_opts o;
        test_opts(&o);
        workers[i].ctx = make_ctx(&o);
    }
    struct mcr_rdma_listener *listener;
    int rc = mcr_rdma_rc_listen(workers[0].ctx, rxe_addr(), 0, 64, w_accept, NULL, &listener);
    if (rc != 0)
        tap_bail("listen: %s", strerror(-rc));
    mcr_rdma_listener_set_placement(listener, place, NULL);
    uint16_t port = mcr_rdma_listener_port(listener);
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]);

    static struct test_client cl[CLIENTS];
    int up = 0;
    for (int i = 0; i < CLIENTS; i++)
        up += client_connect(&cl[i], NULL, port);
    tap_ok(up == CLIENTS, "%d clients connected through one listener", up);
    int spread = 0;
    for (int i = 0; i < WORKERS; i++)
        spread += atomic_load(&workers[i].accepted) == CLIENTS / WORKERS;
    tap_ok(spread == WORKERS, "connections spread evenly: %d/%d/%d",
           atomic_load(&workers[0].accepted), atomic_load(&workers[1].accepted),
           atomic_load(&workers[2].accepted));
    int good = 0;
    for (uint32_t r = 0; r < 50; r++)
        for (int i = 0; i < CLIENTS; i++)
            good += ping(&cl[i], (uint32_t)i * 1000 + r, 1 + (r * 131) % 8000);
    tap_ok(good == 50 * CLIENTS, "%d/%d requests served by the workers", good, 50 * CLIENTS);
    int wrong = 0;
    for (int i = 0; i < WORKERS; i++)
        wrong += atomic_load(&workers[i].wrong_thread);
    tap_ok(wrong == 0, "every callback ran on its worker's own thread (%d elsewhere)", wrong);
    for (int i = 0; i < CLIENTS; i++)
        if (cl[i].ep != NULL)
            mcr_rdma_ep_close(cl[i].ep);
    int closed = 0;
    for (int i = 0; i < CLIENTS; i++)
        closed += run_until(client_closed, &cl[i], 10000);
    tap_ok(closed == CLIENTS, "clients closed");
    tap_ok(run_until(all_closed, NULL, 15000), "each worker freed its connections");
    for (int i = 0; i < CLIENTS; i++)
        client_destroy(&cl[i]);
    atomic_store(&stop, true);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(workers[i].thread, NULL);
    mcr_rdma_listener_destroy(listener);
    for (int i = WORKERS - 1; i >= 0; i--)
        mcr_rdma_ctx_destroy(workers[i].ctx);
    return tap_exit_status();
}
