/*
 * thread.h: worker threads. Each worker runs its own libevent event_base
 * and owns the connections handed to it, a pool of response objects and
 * its counters. Other threads reach a worker only through worker_call(),
 * which queues a function to run on the worker's thread. Owns no sockets
 * and no protocol.
 */
#ifndef MCR_THREAD_H
#define MCR_THREAD_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/uio.h>

#include "stats.h"

struct event_base;
struct event;
struct conn;
struct resp;
struct worker_msg;
struct flash_reader;

/* iovecs gathered for one writev */
#define WORKER_IOV_MAX 1024 /* IOV_MAX on Linux */
/* Read buffers: a connection holds one only while it has unparsed bytes;
 * idle connections give theirs back to the worker's cache. */
#define WORKER_RBUF_SIZE (16 * 1024)
#define WORKER_RBUF_CACHE 64

struct worker {
    unsigned id;
    pthread_t thread;
    bool running;
    struct event_base *base;
    int wake_fd; /* eventfd: messages queued */
    struct event *wake_ev;
    struct event *idle_ev; /* -o idle_timeout scan */
    pthread_mutex_t msg_lock;
    struct worker_msg *msg_head, *msg_tail;

    struct worker_stats stats;
    struct conn *conns; /* connections owned by this worker */
    struct resp *resp_pool;
    unsigned resp_pool_len;
    char *rbuf_cache[WORKER_RBUF_CACHE];
    unsigned rbuf_cached;
    size_t mem_limit; /* -o read_buf_mem_limit share, bytes; 0 = none */
    size_t mem_held;  /* read buffers and response objects connections hold */
    struct iovec iov[WORKER_IOV_MAX];
    /* reads of flash values on this worker's own ring (value_fetch.c makes
     * it at the first and sets its destructor, run on the worker's thread
     * when its loop ends, or by worker_destroy for a loop run elsewhere) */
    struct flash_reader *flash_reader;
    void (*flash_reader_free)(struct flash_reader *rdr);
};

typedef void (*worker_fn)(struct worker *w, void *arg);

/* Sets a worker up without starting its thread (tests run its base). */
int worker_init(struct worker *w, unsigned id);
/* Closes its connections and frees it (after worker_stop, if started). */
void worker_destroy(struct worker *w);
int worker_start(struct worker *w);
/* Asks the loop to finish and joins the thread. */
void worker_stop(struct worker *w);
/* Runs fn(w, arg) on w's thread; thread-safe. 0, or -1 (not queued). */
int worker_call(struct worker *w, worker_fn fn, void *arg);

/* ---- response object pool (worker thread only) ------------------------- */
struct resp *worker_resp_get(struct worker *w);
void worker_resp_put(struct worker *w, struct resp *r);

/* ---- read buffers of WORKER_RBUF_SIZE bytes (worker thread only) --------- */
char *worker_rbuf_get(struct worker *w);
void worker_rbuf_put(struct worker *w, char *buf);

/* ---- connection memory under -o read_buf_mem_limit (worker thread only) -
 * The limit is split evenly between the workers (at least one read buffer
 * each). Read buffers (worker_rbuf_get, grown ones too) and response
 * objects (worker_resp_get) held by connections are charged to their
 * worker; buffers and objects kept for reuse are not. worker_mem_charge
 * charges n bytes, or returns false (charging nothing) when that would go
 * past the worker's share. */
bool worker_mem_charge(struct worker *w, size_t n);
void worker_mem_uncharge(struct worker *w, size_t n);

/* ---- the pool of workers the daemon runs ----------------------------------- */
int workers_start(unsigned n);
void workers_stop(void);
unsigned workers_count(void);
struct worker *worker_at(unsigned i);
/* Round robin choice for a new connection. */
struct worker *workers_next(void);

#endif
