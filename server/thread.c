/*
 * thread.c: worker threads, each an event loop over its own connections,
 * plus the cross-thread message queue (an eventfd wakes the loop) and the
 * per-worker pool of response objects. Knows nothing about sockets or
 * protocols: new connections arrive as worker_call() messages from the
 * listener.
 */
#include "thread.h"

#include <errno.h>
#include <event2/event.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "conn.h"
#include "log.h"
#include "settings.h"

#define RESP_POOL_KEEP 1024 /* response objects a worker keeps for reuse */

struct worker_msg {
    struct worker_msg *next;
    worker_fn fn;
    void *arg;
};

/* ---- messages -------------------------------------------------------------------- */
int worker_call(struct worker *w, worker_fn fn, void *arg)
{
    struct worker_msg *m = malloc(sizeof(*m));
    if (!m)
        return -1;
    m->next = NULL;
    m->fn = fn;
    m->arg = arg;
    pthread_mutex_lock(&w->msg_lock);
    if (w->msg_tail)
        w->msg_tail->next = m;
    else
        w->msg_head = m;
    w->msg_tail = m;
    pthread_mutex_unlock(&w->msg_lock);
    uint64_t one = 1;
    ssize_t n;
    do {
        n = write(w->wake_fd, &one, sizeof(one));
    } while (n < 0 && errno == EINTR);
    return 0;
}

static void run_messages(struct worker *w)
{
    pthread_mutex_lock(&w->msg_lock);
    struct worker_msg *m = w->msg_head;
    w->msg_head = w->msg_tail = NULL;
    pthread_mutex_unlock(&w->msg_lock);
    while (m) {
        struct worker_msg *next = m->next;
        m->fn(w, m->arg);
        free(m);
        m = next;
    }
}

static void wake_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    uint64_t count;
    ssize_t n = read(fd, &count, sizeof(count));
    (void)n;
    run_messages(arg);
}

/* ---- idle connections (-o idle_timeout) --------------------------------------------- */
static void idle_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct worker *w = arg;
    rel_time_t now = clock_now();
    struct conn *c = w->conns;
    while (c) {
        struct conn *next = c->wnext;
        if (c->state == CONN_PARSE && c->nresp == 0 && c->rlen == 0 &&
            strcmp(c->tp->name, "udp") != 0 && /* UDP connections live until shutdown */
            !c->watching &&                    /* a log stream, as in memcached */
            now - c->last_cmd_time > settings.idle_timeout) {
            log_msg(LOG_CMDS, "<%d closing idle connection", c->fd);
            c->close_reason = CLOSE_IDLE_TIMEOUT;
            STAT_INCR(&w->stats, idle_kicks);
            conn_close(c);
        }
        c = next;
    }
}

/* ---- response pool ---------------------------------------------------------------- */
bool worker_mem_charge(struct worker *w, size_t n)
{
    if (w->mem_limit && n > w->mem_limit - w->mem_held)
        return false;
    w->mem_held += n;
    return true;
}

void worker_mem_uncharge(struct worker *w, size_t n)
{
    w->mem_held -= n;
}

struct resp *worker_resp_get(struct worker *w)
{
    if (!worker_mem_charge(w, sizeof(struct resp)))
        return NULL;
    struct resp *r = w->resp_pool;
    if (r) {
        w->resp_pool = r->next;
        w->resp_pool_len--;
    } else {
        r = malloc(sizeof(*r));
        if (!r) {
            worker_mem_uncharge(w, sizeof(struct resp));
            return NULL;
        }
        STAT_INCR(&w->stats, response_obj_count);
    }
    r->next = NULL;
    r->stream = NULL;
    r->stream_ctx = NULL;
    r->stream_done = false;
    r->it = NULL;
    r->heap = NULL;
    r->tail = NULL;
    r->heap_len = 0;
    r->sent = 0;
    r->tail_len = 0;
    r->head_len = 0;
    r->it_trailer = 0;
    r->parked = false;
    r->cancelled = false;
    r->on_cancel = NULL;
    return r;
}

void worker_resp_put(struct worker *w, struct resp *r)
{
    worker_mem_uncharge(w, sizeof(struct resp));
    if (w->resp_pool_len >= RESP_POOL_KEEP) {
        free(r);
        STAT_SUB(&w->stats, response_obj_count, 1);
        return;
    }
    r->next = w->resp_pool;
    w->resp_pool = r;
    w->resp_pool_len++;
}

/* ---- read buffer cache ------------------------------------------------------------ */
char *worker_rbuf_get(struct worker *w)
{
    if (!worker_mem_charge(w, WORKER_RBUF_SIZE)) {
        STAT_INCR(&w->stats, read_buf_oom);
        return NULL;
    }
    if (w->rbuf_cached > 0) {
        STAT_SUB(&w->stats, read_buf_bytes_free, WORKER_RBUF_SIZE);
        return w->rbuf_cache[--w->rbuf_cached];
    }
    char *buf = malloc(WORKER_RBUF_SIZE);
    if (!buf) {
        worker_mem_uncharge(w, WORKER_RBUF_SIZE);
        STAT_INCR(&w->stats, read_buf_oom);
        return NULL;
    }
    STAT_INCR(&w->stats, read_buf_count);
    STAT_ADD(&w->stats, read_buf_bytes, WORKER_RBUF_SIZE);
    return buf;
}

void worker_rbuf_put(struct worker *w, char *buf)
{
    worker_mem_uncharge(w, WORKER_RBUF_SIZE);
    if (w->rbuf_cached < WORKER_RBUF_CACHE) {
        w->rbuf_cache[w->rbuf_cached++] = buf;
        STAT_ADD(&w->stats, read_buf_bytes_free, WORKER_RBUF_SIZE);
        return;
    }
    free(buf);
    STAT_SUB(&w->stats, read_buf_count, 1);
    STAT_SUB(&w->stats, read_buf_bytes, WORKER_RBUF_SIZE);
}

/* ---- one worker ----------------------------------------------------------------------- */
int worker_init(struct worker *w, unsigned id)
{
    memset(w, 0, sizeof(*w));
    w->id = id;
    w->wake_fd = -1;
    if (settings.read_buf_mem_limit > 0) {
        size_t threads = settings.num_threads > 0 ? (size_t)settings.num_threads : 1;
        w->mem_limit = settings.read_buf_mem_limit / threads;
        if (w->mem_limit < WORKER_RBUF_SIZE)
            w->mem_limit = WORKER_RBUF_SIZE;
    }
    if (pthread_mutex_init(&w->msg_lock, NULL) != 0)
        return -1;
    w->base = event_base_new();
    if (!w->base)
        goto fail_lock;
    w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->wake_fd < 0)
        goto fail_base;
    w->wake_ev = event_new(w->base, w->wake_fd, EV_READ | EV_PERSIST, wake_cb, w);
    if (!w->wake_ev || event_add(w->wake_ev, NULL) != 0)
        goto fail_fd;
    if (settings.idle_timeout > 0) {
        w->idle_ev = event_new(w->base, -1, EV_PERSIST, idle_cb, w);
        struct timeval second = {1, 0};
        if (!w->idle_ev || event_add(w->idle_ev, &second) != 0)
            goto fail_wake;
    }
    return 0;

fail_wake:
    if (w->idle_ev)
        event_free(w->idle_ev);
    event_free(w->wake_ev);
fail_fd:
    close(w->wake_fd);
fail_base:
    event_base_free(w->base);
fail_lock:
    pthread_mutex_destroy(&w->msg_lock);
    return -1;
}

void worker_destroy(struct worker *w)
{
    run_messages(w);     /* connections handed over late are adopted, then closed */
    if (w->flash_reader) /* its reads complete into the connections first */
        w->flash_reader_free(w->flash_reader);
    while (w->conns)
        conn_destroy(w->conns);
    while (w->rbuf_cached > 0) {
        free(w->rbuf_cache[--w->rbuf_cached]);
        STAT_SUB(&w->stats, read_buf_count, 1);
        STAT_SUB(&w->stats, read_buf_bytes, WORKER_RBUF_SIZE);
        STAT_SUB(&w->stats, read_buf_bytes_free, WORKER_RBUF_SIZE);
    }
    while (w->resp_pool) {
        struct resp *r = w->resp_pool;
        w->resp_pool = r->next;
        free(r);
        STAT_SUB(&w->stats, response_obj_count, 1);
    }
    if (w->idle_ev)
        event_free(w->idle_ev);
    event_free(w->wake_ev);
    close(w->wake_fd);
    event_base_free(w->base);
    pthread_mutex_destroy(&w->msg_lock);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    event_base_loop(w->base, 0);
    if (w->flash_reader) { /* its ring takes calls from this thread only */
        w->flash_reader_free(w->flash_reader);
        w->flash_reader = NULL;
    }
    return NULL;
}

int worker_start(struct worker *w)
{
    int rc = pthread_create(&w->thread, NULL, worker_main, w);
    if (rc != 0) {
        log_msg(LOG_ALWAYS, "can't create worker thread: %s", strerror(rc));
        return -1;
    }
    w->running = true;
    return 0;
}

static void stop_loop(struct worker *w, void *arg)
{
    (void)arg;
    event_base_loopbreak(w->base);
}

void worker_stop(struct worker *w)
{
    if (!w->running)
        return;
    if (worker_call(w, stop_loop, NULL) != 0)
        event_base_loopbreak(w->base);
    pthread_join(w->thread, NULL);
    w->running = false;
}

/* ---- the pool ------------------------------------------------------------------------- */
static struct worker *pool;
static unsigned pool_size;
static unsigned pool_next;

int workers_start(unsigned n)
{
    pool = calloc(n, sizeof(*pool));
    if (!pool)
        return -1;
    for (unsigned i = 0; i < n; i++) {
        if (worker_init(&pool[i], i) != 0) {
            log_msg(LOG_ALWAYS, "can't set up worker thread %u", i);
            pool_size = i;
            workers_stop();
            return -1;
        }
        pool_size = i + 1;
    }
    for (unsigned i = 0; i < n; i++) {
        if (worker_start(&pool[i]) != 0) {
            workers_stop();
            return -1;
        }
    }
    return 0;
}

void workers_stop(void)
{
    for (unsigned i = 0; i < pool_size; i++)
        worker_stop(&pool[i]);
    for (unsigned i = pool_size; i-- > 0;)
        worker_destroy(&pool[i]);
    free(pool);
    pool = NULL;
    pool_size = 0;
}

unsigned workers_count(void)
{
    return pool_size;
}

struct worker *worker_at(unsigned i)
{
    return i < pool_size ? &pool[i] : NULL;
}

struct worker *workers_next(void)
{
    /* only the listener thread dispatches */
    struct worker *w = &pool[pool_next];
    pool_next = (pool_next + 1) % pool_size;
    return w;
}
