/* rdma/ctx.c: the per-worker RDMA context (see ctx.h): device discovery,
 * PD/CQ/SRQ/pools setup and teardown, event dispatch (CM events to their
 * owners, completions to their endpoints), reaping of closed endpoints, and
 * the inbox through which other threads hand over new endpoints (the only
 * cross-thread path: a mutex, an eventfd and an atomic credit counter).
 * It does not interpret messages: endpoint implementations do. */
#include "rdma/ctx_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void mcr_rdma_ctx_opts_default(struct mcr_rdma_ctx_opts *opts)
{
    const char *addr = opts->addr;
    memset(opts, 0, sizeof(*opts));
    opts->addr = addr;
    opts->buf_size = 8192;
    opts->recv_bufs = 1024;
    opts->send_bufs = 512;
    opts->credits = 32;
    opts->max_rndv_len = 64u << 20;
    opts->rnr_retry = 7;
    opts->busy_poll_us = 0;
    opts->resolve_timeout_ms = 2000;
}

static int set_nonblocking(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
        return -errno;
    return 0;
}

/* Receives the shared receive queue should hold: one per credit granted to
 * the context's endpoints, or with opts.recv_window no more than the
 * current window (widen_recv_window). Buffers beyond that stay in the pool, most
 * recently used first, so a lightly used context keeps touching the same
 * few buffers (fewer pages and cache lines than cycling through all). */
static uint32_t recv_target(const struct mcr_rdma_ctx *ctx)
{
    uint32_t n = ctx->stats.granted_credits < ctx->opts.recv_bufs ? ctx->stats.granted_credits
                                                                  : ctx->opts.recv_bufs;
    return ctx->opts.recv_window != 0 && ctx->recv_window < n ? ctx->recv_window : n;
}

/* Posts receives from the pool until the queue holds recv_target. */
static int post_from_pool(struct mcr_rdma_ctx *ctx)
{
    int64_t idx;
    while (ctx->stats.recv_posted < recv_target(ctx) &&
           (idx = mcr_rdma_pool_get(&ctx->recv_pool)) >= 0) {
        int rc = mcr_rdma_ctx_repost_recv(ctx, (uint32_t)idx);
        if (rc != 0) {
            mcr_rdma_pool_put(&ctx->recv_pool, (uint32_t)idx);
            return rc;
        }
    }
    return 0;
}

/* opts.recv_window: asks the device for IBV_EVENT_SRQ_LIMIT_REACHED once
 * fewer than half a window of receives are left in the queue. recv_posted
 * counts receives until their completions are polled, so it lags: a burst
 * can take every receive while the owner handles the previous pass, and
 * only the device sees that in time. Armed while the window may still grow
 * and the queue holds more than the limit (the event would come at once). */
static void arm_srq_limit(struct mcr_rdma_ctx *ctx)
{
    uint32_t limit = ctx->opts.recv_window / 2;
    if (ctx->opts.recv_window == 0 || ctx->srq_limit_armed || ctx->destroying ||
        ctx->recv_window >= ctx->stats.granted_credits || ctx->stats.recv_posted <= limit)
        return;
    struct ibv_srq_attr attr = {.srq_limit = limit};
    if (ibv_modify_srq(ctx->srq, &attr, IBV_SRQ_LIMIT) == 0)
        ctx->srq_limit_armed = true; /* a device without it: the completions' rule only */
}

/* The queue may hold a window more (posted from the pool at once,
 * registering buffers if none is free), up to one per credit granted. */
static void grow_recv_window(struct mcr_rdma_ctx *ctx)
{
    if (ctx->destroying || ctx->recv_window >= ctx->stats.granted_credits)
        return;
    ctx->recv_window += ctx->opts.recv_window;
    ctx->stats.recv_window_grown++;
    (void)post_from_pool(ctx); /* a failed post shows at the next fill */
    arm_srq_limit(ctx);
}

/* opts.recv_window: a receive completed and fewer than half a window are
 * left posted, or the device said so (arm_srq_limit). */
static void widen_recv_window(struct mcr_rdma_ctx *ctx)
{
    uint32_t step = ctx->opts.recv_window;
    if (step == 0 || ctx->stats.recv_posted >= step / 2)
        return;
    grow_recv_window(ctx);
}

int mcr_rdma_ctx_fill_recvs(struct mcr_rdma_ctx *ctx)
{
    if (!ctx->batching)
        mcr_rdma_ctx_flush_reposts(ctx); /* buffers waiting to go back count first */
    int rc = post_from_pool(ctx);
    arm_srq_limit(ctx);
    return rc;
}

/* The receive work request for one pool buffer (next: NULL). */
static void recv_wr(const struct mcr_rdma_ctx *ctx, uint32_t buf_index, struct ibv_sge *sge,
                    struct ibv_recv_wr *wr)
{
    *sge = (struct ibv_sge){
        .addr = (uintptr_t)mcr_rdma_pool_buf(&ctx->recv_pool, buf_index),
        .length = (uint32_t)ctx->recv_pool.buf_size,
        .lkey = mcr_rdma_pool_lkey(&ctx->recv_pool, buf_index),
    };
    *wr = (struct ibv_recv_wr){.wr_id = MCR_RDMA_WR_RECV | buf_index, .sg_list = sge, .num_sge = 1};
}

int mcr_rdma_ctx_repost_recv(struct mcr_rdma_ctx *ctx, uint32_t buf_index)
{
    struct ibv_sge sge;
    struct ibv_recv_wr wr;
    recv_wr(ctx, buf_index, &sge, &wr);
    struct ibv_recv_wr *bad;
    int rc = ibv_post_srq_recv(ctx->srq, &wr, &bad);
    if (rc != 0)
        return -rc;
    ctx->stats.recv_posted++;
    return 0;
}

void mcr_rdma_ctx_defer_repost(struct mcr_rdma_ctx *ctx, struct mcr_rdma_ep_link *owner,
                               uint32_t buf_index)
{
    if (ctx->repost_count == MCR_RDMA_REPOST_MAX)
        mcr_rdma_ctx_flush_reposts(ctx);
    uint32_t i = ctx->repost_count++;
    ctx->repost[i].buf_index = buf_index;
    ctx->repost[i].owner = owner;
}

void mcr_rdma_ctx_repost_due(struct mcr_rdma_ctx *ctx)
{
    ctx->repost_due = true;
}

/* After a pass: the deferred receive buffers go back, unless the owner
 * busy-polls and they may wait for more (opts.repost_hold). */
static void flush_reposts_unless_held(struct mcr_rdma_ctx *ctx)
{
    if (ctx->polling && !ctx->repost_due && ctx->repost_count < ctx->opts.repost_hold)
        return;
    mcr_rdma_ctx_flush_reposts(ctx);
}

void mcr_rdma_ctx_flush_reposts(struct mcr_rdma_ctx *ctx)
{
    uint32_t n = ctx->repost_count;
    ctx->repost_due = false;
    if (n == 0)
        return;
    /* the queue holds one receive per granted credit; the rest wait in the
     * pool (a credit may go back either way: the queue still holds one
     * receive for every credit the peers have) */
    uint32_t room =
        recv_target(ctx) > ctx->stats.recv_posted ? recv_target(ctx) - ctx->stats.recv_posted : 0;
    uint32_t to_post = n < room ? n : room;
    struct ibv_sge sge[MCR_RDMA_REPOST_MAX];
    struct ibv_recv_wr wr[MCR_RDMA_REPOST_MAX];
    for (uint32_t i = to_post; i < n; i++)
        mcr_rdma_pool_put(&ctx->recv_pool, ctx->repost[i].buf_index);
    for (uint32_t i = 0; i < to_post; i++) {
        recv_wr(ctx, ctx->repost[i].buf_index, &sge[i], &wr[i]);
        if (i + 1 < to_post)
            wr[i].next = &wr[i + 1];
    }
    struct ibv_recv_wr *bad = NULL;
    uint32_t posted = to_post;
    if (to_post > 0 && ibv_post_srq_recv(ctx->srq, wr, &bad) != 0) { /* those before bad went */
        posted = 0;
        while (posted < to_post && bad != &wr[posted])
            posted++;
        if (posted == to_post)
            posted = 0;
        for (uint32_t i = posted; i < to_post; i++)
            mcr_rdma_pool_put(&ctx->recv_pool, ctx->repost[i].buf_index);
    }
    ctx->stats.recv_posted += posted;
    arm_srq_limit(ctx);
    /* a copy: the callbacks may defer nothing, but they may close endpoints */
    struct mcr_rdma_ep_link *owner[MCR_RDMA_REPOST_MAX];
    for (uint32_t i = 0; i < n; i++)
        owner[i] = ctx->repost[i].owner;
    ctx->repost_count = 0;
    for (uint32_t i = 0; i < n; i++) /* a failed post fails its endpoint */
        if (owner[i] != NULL && !ctx->destroying)
            owner[i]->impl->recv_reposted(owner[i]->ep, i < posted || i >= to_post);
}

struct mcr_rdma_ctx *mcr_rdma_ctx_create(const struct mcr_rdma_ctx_opts *opts, char *err,
                                         size_t errlen)
{
    mcr_rdma_set_err(err, errlen, "%s", "");
    if (opts == NULL || opts->addr == NULL || opts->buf_size < MCR_RDMA_HDR_MAX + 64 ||
        opts->recv_bufs == 0 || opts->send_bufs == 0 || opts->credits < 4 ||
        opts->credits > opts->recv_bufs || opts->rnr_retry > 7 || opts->ack_timeout > 31 ||
        opts->repost_hold > MCR_RDMA_REPOST_MAX) {
        mcr_rdma_set_err(err, errlen, "invalid RDMA context options");
        return NULL;
    }
    int ndev = 0;
    struct ibv_device **devs = ibv_get_device_list(&ndev);
    if (devs != NULL)
        ibv_free_device_list(devs);
    if (devs == NULL || ndev == 0) {
        mcr_rdma_set_err(
            err, errlen,
            "no RDMA device on this machine (libibverbs lists none; RDMA needs an "
            "RDMA NIC or a Soft-RoCE device, e.g. `rdma link add rxe0 type rxe netdev IF`)");
        return NULL;
    }

    struct mcr_rdma_ctx *ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL) {
        mcr_rdma_set_err(err, errlen, "out of memory");
        return NULL;
    }
    ctx->opts = *opts;
    ctx->recv_window = opts->recv_window;
    ctx->wake_fd = ctx->epoll_fd = -1;
    const char *what = NULL;
    atomic_init(&ctx->admitted_credits, 0);
    atomic_init(&ctx->inbox_nonempty, false);
    if (pthread_mutex_init(&ctx->inbox_lock, NULL) != 0) {
        mcr_rdma_set_err(err, errlen, "pthread_mutex_init failed");
        free(ctx);
        return NULL;
    }
    ctx->inbox_lock_ready = true;

    ctx->device_channel = rdma_create_event_channel();
    if (ctx->device_channel == NULL) {
        mcr_rdma_set_err(err, errlen, "no RDMA device usable: cannot open the RDMA CM (%s)",
                         strerror(errno));
        goto fail;
    }
    if (mcr_rdma_device_find(&ctx->dev, ctx->device_channel, RDMA_PS_TCP, NULL, opts->addr, 0,
                             opts->addr_is_peer ? MCR_RDMA_FIND_RESOLVE : MCR_RDMA_FIND_ANY,
                             opts->resolve_timeout_ms, err, errlen) != 0)
        goto fail;

    struct ibv_device_attr dattr;
    struct ibv_port_attr pattr;
    if (ibv_query_device(ctx->dev.verbs, &dattr) != 0 ||
        ibv_query_port(ctx->dev.verbs, ctx->dev.port_num, &pattr) != 0) {
        what = "ibv_query_device/port";
        goto fail_errno;
    }
    ctx->max_msg_size = pattr.max_msg_sz;
    ctx->windows = (dattr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0;
    int rd = dattr.max_qp_rd_atom < dattr.max_qp_init_rd_atom ? dattr.max_qp_rd_atom
                                                              : dattr.max_qp_init_rd_atom;
    ctx->rd_atomic = (uint8_t)(rd > 16 ? 16 : rd < 1 ? 1 : rd);
    ctx->max_payload = opts->buf_size - MCR_RDMA_HDR_MAX;
    if (opts->recv_bufs > (uint32_t)dattr.max_srq_wr) {
        mcr_rdma_set_err(err, errlen, "%s: recv_bufs %u above the device limit %d", ctx->dev.name,
                         opts->recv_bufs, dattr.max_srq_wr);
        goto fail;
    }

    if (set_nonblocking(ctx->dev.verbs->async_fd) != 0) {
        what = "making the async event fd non-blocking";
        goto fail_errno;
    }
    uint32_t max_eps = opts->recv_bufs / opts->credits;
    long cq_size =
        (long)opts->recv_bufs + opts->send_bufs + (long)max_eps * MCR_RDMA_OPS_PER_EP + 64;
    if (cq_size > dattr.max_cqe)
        cq_size = dattr.max_cqe;
    ctx->cq_size = (int)cq_size;
    if (mcr_rdma_device_open(&ctx->dev, ctx->cq_size, ctx, err, errlen) != 0)
        goto fail;
    if (ibv_req_notify_cq(ctx->dev.cq, 0) != 0) {
        what = "ibv_req_notify_cq";
        goto fail_errno;
    }
    ctx->armed = true;
    struct ibv_srq_init_attr srq_attr = {.srq_context = ctx,
                                         .attr = {.max_wr = opts->recv_bufs, .max_sge = 1}};
    if ((ctx->srq = ibv_create_srq(ctx->dev.pd, &srq_attr)) == NULL) {
        what = "ibv_create_srq";
        goto fail_errno;
    }
    /* registered a connection's credits at a time, as connections come */
    int rc = mcr_rdma_pool_init_growing(&ctx->recv_pool, ctx->dev.pd, opts->recv_bufs,
                                        opts->buf_size, opts->credits);
    if (rc == 0)
        rc = mcr_rdma_pool_init_growing(&ctx->send_pool, ctx->dev.pd, opts->send_bufs,
                                        opts->buf_size, opts->credits);
    if (rc != 0) {
        mcr_rdma_set_err(err, errlen, "%s: registering buffer pools: %s", ctx->dev.name,
                         strerror(-rc));
        goto fail;
    }
    if ((ctx->send_ops = calloc(opts->send_bufs, sizeof(*ctx->send_ops))) == NULL) {
        mcr_rdma_set_err(err, errlen, "out of memory");
        goto fail;
    }
    if ((rc = mcr_rdma_ctx_fill_recvs(ctx)) != 0) {
        mcr_rdma_set_err(err, errlen, "%s: posting receives: %s", ctx->dev.name, strerror(-rc));
        goto fail;
    }
    if ((ctx->cm_channel = rdma_create_event_channel()) == NULL ||
        set_nonblocking(ctx->cm_channel->fd) != 0) {
        what = "rdma_create_event_channel";
        goto fail_errno;
    }
    if ((ctx->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
        (ctx->epoll_fd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
        what = "eventfd/epoll_create1";
        goto fail_errno;
    }
    int watched[4] = {ctx->cm_channel->fd, ctx->dev.comp_channel->fd, ctx->wake_fd,
                      ctx->dev.verbs->async_fd};
    for (int i = 0; i < 4; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = watched[i]};
        if (epoll_ctl(ctx->epoll_fd, EPOLL_CTL_ADD, watched[i], &ev) != 0) {
            what = "epoll_ctl";
            goto fail_errno;
        }
    }
    return ctx;

fail_errno:
    mcr_rdma_set_err(err, errlen, "%s: %s: %s", ctx->dev.name[0] ? ctx->dev.name : "rdma", what,
                     strerror(errno));
fail:
    mcr_rdma_ctx_destroy(ctx);
    return NULL;
}

void mcr_rdma_ctx_destroy(struct mcr_rdma_ctx *ctx)
{
    if (ctx == NULL)
        return;
    ctx->destroying = true;
    mcr_rdma_ctx_adopt_pending(ctx); /* refuses connections still queued */
    while (ctx->listeners != NULL)
        ctx->listeners->destroy_now(ctx->listeners);
    while (ctx->endpoints != NULL)
        ctx->endpoints->impl->destroy_now(ctx->endpoints->ep);
    for (unsigned i = ctx->nkept; i-- > 0;) /* nothing polls the queue any more */
        free(ctx->kept[i]);
    free(ctx->kept);
    for (uint32_t i = 0; i < ctx->repost_count; i++)
        mcr_rdma_pool_put(&ctx->recv_pool, ctx->repost[i].buf_index);
    ctx->repost_count = 0;
    if (ctx->epoll_fd >= 0)
        close(ctx->epoll_fd);
    if (ctx->wake_fd >= 0)
        close(ctx->wake_fd);
    if (ctx->cm_channel != NULL)
        rdma_destroy_event_channel(ctx->cm_channel);
    free(ctx->send_ops);
    mcr_rdma_pool_destroy(&ctx->send_pool);
    if (ctx->srq != NULL)
        ibv_destroy_srq(ctx->srq); /* before its buffers are deregistered */
    mcr_rdma_pool_destroy(&ctx->recv_pool);
    mcr_rdma_device_close(&ctx->dev); /* its completion queue, protection domain, device */
    if (ctx->device_channel != NULL)
        rdma_destroy_event_channel(ctx->device_channel);
    if (ctx->inbox_lock_ready)
        pthread_mutex_destroy(&ctx->inbox_lock);
    free(ctx);
}

int mcr_rdma_ctx_fd(const struct mcr_rdma_ctx *ctx)
{
    return ctx->epoll_fd;
}

struct ibv_pd *mcr_rdma_ctx_pd(const struct mcr_rdma_ctx *ctx)
{
    return ctx->dev.pd;
}

bool mcr_rdma_ctx_has_windows(const struct mcr_rdma_ctx *ctx)
{
    return ctx->windows;
}

const char *mcr_rdma_ctx_device_name(const struct mcr_rdma_ctx *ctx)
{
    return ctx->dev.name;
}

const struct mcr_rdma_ctx_opts *mcr_rdma_ctx_options(const struct mcr_rdma_ctx *ctx)
{
    return &ctx->opts;
}

void mcr_rdma_ctx_stats(const struct mcr_rdma_ctx *ctx, struct mcr_rdma_ctx_stats *out)
{
    *out = ctx->stats;
    out->send_bufs_free = mcr_rdma_pool_unused(&ctx->send_pool);
    out->recv_bufs_free = mcr_rdma_pool_unused(&ctx->recv_pool);
    out->registered_bytes = mcr_rdma_pool_registered_bytes(&ctx->recv_pool) +
                            mcr_rdma_pool_registered_bytes(&ctx->send_pool);
    out->recv_deferred = ctx->repost_count;
    out->recv_window = ctx->opts.recv_window != 0 ? ctx->recv_window : ctx->opts.recv_bufs;
}

/* ---- endpoint and listener registry ---------------------------------- */

void mcr_rdma_ctx_link_ep(struct mcr_rdma_ctx *ctx, struct mcr_rdma_ep_link *link)
{
    link->serial = ctx->next_serial++;
    link->prev = NULL;
    link->next = ctx->endpoints;
    if (ctx->endpoints != NULL)
        ctx->endpoints->prev = link;
    ctx->endpoints = link;
    ctx->stats.endpoints++;
}

void mcr_rdma_ctx_set_qp(struct mcr_rdma_ctx *ctx, struct mcr_rdma_ep_link *link, uint32_t qp_num)
{
    struct mcr_rdma_ep_link **bucket = &ctx->by_qp[qp_num % MCR_RDMA_QP_BUCKETS];
    link->qp_num = qp_num;
    link->has_qp = true;
    link->hash_next = *bucket;
    *bucket = link;
}

void mcr_rdma_ctx_unlink_ep(struct mcr_rdma_ctx *ctx, struct mcr_rdma_ep_link *link)
{
    for (uint32_t i = 0; i < ctx->repost_count; i++)
        if (ctx->repost[i].owner == link)
            ctx->repost[i].owner = NULL; /* its buffers still go back */
    if (link->has_qp) {
        struct mcr_rdma_ep_link **p = &ctx->by_qp[link->qp_num % MCR_RDMA_QP_BUCKETS];
        while (*p != NULL && *p != link)
            p = &(*p)->hash_next;
        if (*p == link)
            *p = link->hash_next;
        link->has_qp = false;
    }
    if (link->batch_listed) {
        struct mcr_rdma_ep_link **p = &ctx->batch_list;
        while (*p != NULL && *p != link)
            p = &(*p)->batch_next;
        if (*p == link)
            *p = link->batch_next;
        link->batch_listed = false;
    }
    if (link->prev != NULL)
        link->prev->next = link->next;
    else
        ctx->endpoints = link->next;
    if (link->next != NULL)
        link->next->prev = link->prev;
    ctx->stats.endpoints--;
}

void mcr_rdma_ctx_link_listener(struct mcr_rdma_ctx *ctx, struct mcr_rdma_listener_link *link)
{
    link->prev = NULL;
    link->next = ctx->listeners;
    if (ctx->listeners != NULL)
        ctx->listeners->prev = link;
    ctx->listeners = link;
    ctx->stats.listeners++;
}

void mcr_rdma_ctx_unlink_listener(struct mcr_rdma_ctx *ctx, struct mcr_rdma_listener_link *link)
{
    if (link->prev != NULL)
        link->prev->next = link->next;
    else
        ctx->listeners = link->next;
    if (link->next != NULL)
        link->next->prev = link->prev;
    ctx->stats.listeners--;
}

static struct mcr_rdma_ep_link *find_qp(struct mcr_rdma_ctx *ctx, uint32_t qp_num)
{
    struct mcr_rdma_ep_link *l = ctx->by_qp[qp_num % MCR_RDMA_QP_BUCKETS];
    while (l != NULL && l->qp_num != qp_num)
        l = l->hash_next;
    return l;
}

/* ---- event dispatch ---------------------------------------------------- */

/* Frees endpoints whose close has completed. Cheap when nothing is closing. */
static void reap_endpoints(struct mcr_rdma_ctx *ctx, bool check_deadlines)
{
    if (!ctx->reap_pending)
        return;
    ctx->reap_pending = false;
    struct mcr_rdma_ep_link *link = ctx->endpoints, *next;
    for (; link != NULL; link = next) {
        next = link->next;
        link->impl->try_reap(link->ep, check_deadlines);
    }
}

static void reap(struct mcr_rdma_ctx *ctx)
{
    reap_endpoints(ctx, true);
}

void mcr_rdma_ctx_schedule_reap(struct mcr_rdma_ctx *ctx)
{
    ctx->reap_pending = true;
}

void mcr_rdma_ctx_free_after_endpoints(struct mcr_rdma_ctx *ctx, void *mem)
{
    void **grown = realloc(ctx->kept, (ctx->nkept + 1) * sizeof(*grown));
    if (grown == NULL)
        return; /* kept for good */
    ctx->kept = grown;
    ctx->kept[ctx->nkept++] = mem;
}

bool mcr_rdma_ctx_wants_reap(const struct mcr_rdma_ctx *ctx)
{
    return ctx->reap_pending;
}

bool mcr_rdma_ctx_reserve_credits(struct mcr_rdma_ctx *ctx, uint32_t credits)
{
    unsigned cur = atomic_load(&ctx->admitted_credits);
    do {
        if (cur + credits > ctx->opts.recv_bufs)
            return false;
    } while (!atomic_compare_exchange_weak(&ctx->admitted_credits, &cur, cur + credits));
    return true;
}

uint32_t mcr_rdma_ctx_credits_left(struct mcr_rdma_ctx *ctx)
{
    unsigned cur = atomic_load(&ctx->admitted_credits);
    return cur < ctx->opts.recv_bufs ? ctx->opts.recv_bufs - cur : 0;
}

void mcr_rdma_ctx_release_credits(struct mcr_rdma_ctx *ctx, uint32_t credits)
{
    atomic_fetch_sub(&ctx->admitted_credits, credits);
}

void mcr_rdma_ctx_hand_over(struct mcr_rdma_ctx *ctx, struct mcr_rdma_ep_link *link)
{
    link->inbox_next = NULL;
    pthread_mutex_lock(&ctx->inbox_lock);
    if (ctx->inbox_tail != NULL)
        ctx->inbox_tail->inbox_next = link;
    else
        ctx->inbox_head = link;
    ctx->inbox_tail = link;
    atomic_store(&ctx->inbox_nonempty, true);
    pthread_mutex_unlock(&ctx->inbox_lock);
    uint64_t one = 1;
    if (write(ctx->wake_fd, &one, sizeof(one)) < 0) {
        /* counter saturated: the context is awake already */
    }
}

void mcr_rdma_ctx_adopt_pending(struct mcr_rdma_ctx *ctx)
{
    uint64_t count;
    if (read(ctx->wake_fd, &count, sizeof(count)) < 0) {
        /* nothing signalled (EAGAIN) */
    }
    if (!atomic_load(&ctx->inbox_nonempty))
        return;
    pthread_mutex_lock(&ctx->inbox_lock);
    struct mcr_rdma_ep_link *link = ctx->inbox_head;
    ctx->inbox_head = ctx->inbox_tail = NULL;
    atomic_store(&ctx->inbox_nonempty, false);
    pthread_mutex_unlock(&ctx->inbox_lock);
    while (link != NULL) {
        struct mcr_rdma_ep_link *next = link->inbox_next;
        link->impl->adopt(link->ep);
        link = next;
    }
}

int mcr_rdma_ctx_dispatch_cm(struct mcr_rdma_ctx *ctx)
{
    int handled = 0;
    mcr_rdma_ctx_adopt_pending(ctx);
    struct rdma_cm_event *ev;
    while (rdma_get_cm_event(ctx->cm_channel, &ev) == 0) {
        struct rdma_cm_id *owner_id =
            ev->event == RDMA_CM_EVENT_CONNECT_REQUEST ? ev->listen_id : ev->id;
        struct mcr_rdma_cm_owner *owner = owner_id ? owner_id->context : NULL;
        struct rdma_cm_id *to_destroy = NULL;
        if (owner != NULL)
            to_destroy = owner->on_cm_event(owner, ev);
        rdma_ack_cm_event(ev);
        if (to_destroy != NULL)
            rdma_destroy_id(to_destroy);
        if (owner != NULL && owner->after_ack != NULL)
            owner->after_ack(owner);
        handled++;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK)
        return -errno;
    return handled;
}

static int handle_cm(struct mcr_rdma_ctx *ctx)
{
    int handled = mcr_rdma_ctx_dispatch_cm(ctx);
    reap(ctx);
    return handled;
}

static void dispatch_wc(struct mcr_rdma_ctx *ctx, const struct ibv_wc *wc)
{
    if (wc->status != IBV_WC_SUCCESS && wc->status != IBV_WC_WR_FLUSH_ERR) {
        ctx->stats.wc_errors++;
        if (wc->status == IBV_WC_RNR_RETRY_EXC_ERR)
            ctx->stats.rnr_errors++;
    }
    if (wc->wr_id & MCR_RDMA_WR_RECV) {
        uint32_t idx = (uint32_t)(wc->wr_id & ~MCR_RDMA_WR_RECV);
        if (--ctx->stats.recv_posted == 0)
            ctx->stats.recv_queue_emptied++;
        widen_recv_window(ctx);
        if (ctx->destroying) {
            mcr_rdma_pool_put(&ctx->recv_pool, idx);
            return;
        }
        struct mcr_rdma_ep_link *link =
            wc->status != IBV_WC_WR_FLUSH_ERR ? find_qp(ctx, wc->qp_num) : NULL;
        if (link != NULL)
            link->impl->on_recv(link->ep, idx, wc);
        else if (mcr_rdma_ctx_repost_recv(ctx, idx) != 0)
            mcr_rdma_pool_put(&ctx->recv_pool, idx);
        return;
    }
    if (wc->wr_id & MCR_RDMA_WR_UNSIGNALED) {
        struct mcr_rdma_ep_link *link = find_qp(ctx, wc->qp_num); /* NULL: freed since */
        if (link != NULL && link->impl->on_unsignaled_wc != NULL)
            link->impl->on_unsignaled_wc(link->ep, wc);
        return;
    }
    struct mcr_rdma_op *op = (struct mcr_rdma_op *)(uintptr_t)wc->wr_id;
    op->impl->on_send_wc(op->ep, op, wc);
}

/* The completions one poll found. Never inlined: its instructions are the
 * work of a poll that found something, apart from the idle polls
 * (benchmarks/rdma-instructions counts them by this name). */
__attribute__((noinline)) static void rdma_ctx_dispatch_wcs(struct mcr_rdma_ctx *ctx,
                                                            const struct ibv_wc *wcs, int n)
{
    for (int i = 0; i < n; i++)
        dispatch_wc(ctx, &wcs[i]);
}

/* Dispatches every completion in the queue; their number or -EIO. */
static int drain_cq(struct mcr_rdma_ctx *ctx)
{
    struct ibv_wc wcs[32];
    int total = 0, n;
    while ((n = ibv_poll_cq(ctx->dev.cq, 32, wcs)) > 0) {
        rdma_ctx_dispatch_wcs(ctx, wcs, n);
        total += n;
        if (n < 32)
            return total; /* the queue was empty: what lands now is the next poll's */
    }
    return n < 0 ? -EIO : total;
}

int mcr_rdma_ctx_poll_cq(struct mcr_rdma_ctx *ctx)
{
    if (!ctx->destroying)
        mcr_rdma_ctx_adopt_pending(ctx); /* know every QP before its completions */
    return drain_cq(ctx);
}

/* Affiliated asynchronous events (e.g. "last WQE reached" when a QP on the
 * shared receive queue enters the error state) need no action here: closing
 * is driven by CM events and completions. They are read and acknowledged so
 * they do not pile up in the kernel. The one acted on: the shared receive
 * queue fell below its limit (arm_srq_limit). */
static void drain_async_events(struct mcr_rdma_ctx *ctx)
{
    struct ibv_async_event ev;
    while (ibv_get_async_event(ctx->dev.verbs, &ev) == 0) {
        if (ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED) {
            /* before the acknowledgement, which the queue's destruction waits for */
            struct mcr_rdma_ctx *owner = ev.element.srq->srq_context;
            atomic_store(&owner->srq_low, true);
            uint64_t one = 1;
            if (owner != ctx && write(owner->wake_fd, &one, sizeof(one)) < 0) {
                /* counter saturated: the owner is awake already */
            }
        }
        ibv_ack_async_event(&ev);
    }
}

/* The device reported the shared receive queue low (arm_srq_limit), and
 * disarmed the limit. */
static void take_srq_low(struct mcr_rdma_ctx *ctx)
{
    if (!atomic_load_explicit(&ctx->srq_low, memory_order_relaxed) ||
        !atomic_exchange(&ctx->srq_low, false))
        return;
    ctx->srq_limit_armed = false;
    grow_recv_window(ctx);
}

/* Asks for an event at the next completion, then takes the completions
 * that arrived before the request. Returns those or a negative errno. */
static int arm_cq(struct mcr_rdma_ctx *ctx)
{
    if (!ctx->batching)
        mcr_rdma_ctx_flush_reposts(ctx); /* nothing may wait while the owner sleeps */
    if (ibv_req_notify_cq(ctx->dev.cq, 0) != 0)
        return -EIO;
    ctx->armed = true;
    int n = mcr_rdma_ctx_poll_cq(ctx);
    if (n > 0 && !ctx->batching)
        mcr_rdma_ctx_flush_reposts(ctx); /* those that poll took, before a sleep too */
    return n;
}

/* Which of the context's descriptors have something, from one epoll_wait
 * of up to timeout_ms (0: no waiting, -1: until one has): reading each of
 * them would cost a system call per descriptor per wake-up, most of them
 * for nothing (EAGAIN). Interrupted: none; failed otherwise: every one
 * (each is then read until EAGAIN). */
enum { READY_CM = 1, READY_COMP = 2, READY_WAKE = 4, READY_ASYNC = 8 };

static unsigned ready_fds(struct mcr_rdma_ctx *ctx, int timeout_ms)
{
    struct epoll_event evs[4];
    int n = epoll_wait(ctx->epoll_fd, evs, 4, timeout_ms);
    if (n < 0)
        return errno == EINTR ? 0 : READY_CM | READY_COMP | READY_WAKE | READY_ASYNC;
    unsigned ready = 0;
    for (int i = 0; i < n; i++) {
        int fd = evs[i].data.fd;
        ready |= fd == ctx->cm_channel->fd         ? READY_CM
                 : fd == ctx->dev.comp_channel->fd ? READY_COMP
                 : fd == ctx->wake_fd              ? READY_WAKE
                                                   : READY_ASYNC;
    }
    return ready;
}

static int handle_cq(struct mcr_rdma_ctx *ctx, unsigned ready)
{
    if (ready & READY_ASYNC)
        drain_async_events(ctx);
    take_srq_low(ctx);
    if (ready & READY_COMP) {
        /* one event per arming; another one left shows at the next wait */
        struct ibv_cq *ev_cq;
        void *ev_ctx;
        if (ibv_get_cq_event(ctx->dev.comp_channel, &ev_cq, &ev_ctx) == 0)
            ibv_ack_cq_events(ev_cq, 1);
        ctx->armed = false;
    }
    int handled = mcr_rdma_ctx_poll_cq(ctx);
    if (handled < 0)
        return handled;
    /* the owner polls: no event (and no system call) per completion; or
     * the queue is still armed: no completion came since it was */
    if (ctx->polling || ctx->armed) {
        reap(ctx);
        return handled;
    }
    int more = arm_cq(ctx);
    reap(ctx);
    return more < 0 ? more : handled + more;
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int mcr_rdma_ctx_poll(struct mcr_rdma_ctx *ctx)
{
    /* adopting (a system call on the wake-up eventfd) only when something waits */
    if (!ctx->destroying && atomic_load(&ctx->inbox_nonempty))
        mcr_rdma_ctx_adopt_pending(ctx);
    int handled = drain_cq(ctx);
    if (handled == 0 && !ctx->batching)
        flush_reposts_unless_held(ctx); /* idle: off the path to any reply */
    reap_endpoints(ctx, false);         /* endpoints whose last completions this poll took */
    return handled;
}

int mcr_rdma_ctx_set_polling(struct mcr_rdma_ctx *ctx, bool polling)
{
    ctx->polling = polling;
    if (!polling && !ctx->batching)
        mcr_rdma_ctx_flush_reposts(ctx); /* none held back once polling stops */
    if (polling || ctx->armed)
        return 0;
    int n = arm_cq(ctx);
    reap(ctx);
    return n;
}

void mcr_rdma_ctx_batch_begin(struct mcr_rdma_ctx *ctx)
{
    ctx->batching = true;
}

void mcr_rdma_ctx_batch_add(struct mcr_rdma_ctx *ctx, struct mcr_rdma_ep_link *link)
{
    if (link->batch_listed)
        return;
    link->batch_listed = true;
    link->batch_next = ctx->batch_list;
    ctx->batch_list = link;
}

void mcr_rdma_ctx_batch_end(struct mcr_rdma_ctx *ctx)
{
    ctx->batching = false;
    /* each endpoint leaves the list before it posts: a failing post may
     * close it, and nothing it calls back may post in a batch again */
    while (ctx->batch_list != NULL) {
        struct mcr_rdma_ep_link *link = ctx->batch_list;
        ctx->batch_list = link->batch_next;
        link->batch_next = NULL;
        link->batch_listed = false;
        link->impl->post_batch(link->ep);
    }
    flush_reposts_unless_held(ctx); /* after the replies: off their path */
}

/* Handles what the descriptors in `ready` (READY_*) have, and the
 * completion queue. */
static int handle_ready(struct mcr_rdma_ctx *ctx, unsigned ready)
{
    int cm = 0;
    if (ready & (READY_CM | READY_WAKE)) {
        cm = handle_cm(ctx);
        if (cm < 0)
            return cm;
    }
    int cq = handle_cq(ctx, ready);
    if (!ctx->batching)
        flush_reposts_unless_held(ctx);
    return cq < 0 ? cq : cm + cq;
}

int mcr_rdma_ctx_handle_events(struct mcr_rdma_ctx *ctx)
{
    return handle_ready(ctx, ready_fds(ctx, 0));
}

int mcr_rdma_ctx_progress(struct mcr_rdma_ctx *ctx, int timeout_ms)
{
    int handled = 0;
    if (ctx->opts.busy_poll_us > 0) {
        uint64_t until = now_us() + ctx->opts.busy_poll_us;
        do {
            int n = mcr_rdma_ctx_poll_cq(ctx);
            if (n < 0)
                return n;
            handled += n;
        } while (handled == 0 && now_us() < until);
        if (handled > 0) {
            int n = ready_fds(ctx, 0) & (READY_CM | READY_WAKE) ? handle_cm(ctx) : 0;
            return n < 0 ? n : handled + n;
        }
    }
    if (!ctx->armed) { /* polling owner: sleeping needs an event for the next completion */
        int n = arm_cq(ctx);
        if (n != 0) {
            reap(ctx);
            return n < 0 ? n : handled + n;
        }
    }
    int n = handle_ready(ctx, ready_fds(ctx, timeout_ms)); /* the wait tells what is ready */
    return n < 0 ? n : handled + n;
}
