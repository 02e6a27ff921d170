/*
 * flash_reader.c: a worker's own io_uring ring for reads of flash values
 * (see flash_reader.h). Owns the ring, the eventfd its completions signal,
 * the loop events (completions signalled; the end of a round, where reads
 * are submitted and completions taken; the next round) and the reads that
 * needed no ring (no record found, or the record copied from a write
 * buffer), which complete from the loop like the others.
 */
#include "flash_reader.h"

#include <errno.h>
#include <limits.h>
#include <event2/event.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "config.h"
#include "log.h"

#ifdef HAVE_LIBURING
#include <liburing.h>

#define READER_RING_ENTRIES 256
/* completions handled per loop round; the rest wait for the next round,
 * after that round's socket work */
#define READER_REAP_PER_ROUND 32

struct flash_reader {
    struct io_uring ring;
    bool deferred;               /* IORING_SETUP_DEFER_TASKRUN: completion work runs when asked */
    bool edge;                   /* done_ev is edge-triggered: the eventfd is never read */
    int done_fd;                 /* eventfd the ring signals when completions wait */
    struct event *done_ev;       /* done_fd signalled */
    struct event *round_ev;      /* made active: submit and reap at the end of this round */
    struct event *next_ev;       /* zero timer: reap more in the next round */
    bool round_active;           /* round_ev is active */
    unsigned inflight;           /* reads in the ring (queued or submitted) */
    struct flash_read *ringless; /* reads that needed no ring: done() from the loop */
    struct flash_read **ringless_tail;
};

/* Runs rd's done() with the outcome of its read. */
static void complete(struct flash_read *rd, int res)
{
    if (rd->queued)
        flash_io_queued(-1);
    rd->queued = false;
    flash_read_finish(rd, res);
    rd->done(rd);
}

/* Runs done() of up to max completed reads; true when more wait. */
static bool reap(struct flash_reader *rdr, unsigned max)
{
    struct io_uring_cqe *cqe;
    for (unsigned n = 0; n < max; n++) {
        if (io_uring_peek_cqe(&rdr->ring, &cqe) != 0)
            return false;
        struct flash_read *rd = io_uring_cqe_get_data(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&rdr->ring, cqe);
        rdr->inflight--;
        complete(rd, res);
    }
    return io_uring_cq_ready(&rdr->ring) > 0;
}

/* done() of the reads that needed no ring (they may queue new reads). */
static void run_ringless(struct flash_reader *rdr)
{
    while (rdr->ringless) {
        struct flash_read *rd = rdr->ringless;
        rdr->ringless = rd->next;
        if (!rdr->ringless)
            rdr->ringless_tail = &rdr->ringless;
        complete(rd, rd->res);
    }
}

/* Asks for round_cb once the events already active in this loop round
 * (socket reads and writes) have run: event_active() queues it behind
 * them. */
static void want_round(struct flash_reader *rdr)
{
    if (!rdr->round_active) {
        rdr->round_active = true;
        event_active(rdr->round_ev, EV_TIMEOUT, 0);
    }
}

/* The end of a loop round with flash work: one io_uring_enter submits the
 * reads the round queued and, on a deferred ring, runs the completion
 * work of the reads the device finished (the copy into the fresh items);
 * then up to READER_REAP_PER_ROUND replies go. */
static void round_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct flash_reader *rdr = arg;
    rdr->round_active = false;
    int rc =
        rdr->deferred ? io_uring_submit_and_get_events(&rdr->ring) : io_uring_submit(&rdr->ring);
    run_ringless(rdr);
    bool more = reap(rdr, READER_REAP_PER_ROUND);
    if (rc < 0 && rdr->inflight > 0 && io_uring_sq_ready(&rdr->ring) > 0)
        more = true; /* the kernel was busy: once more next round */
    if (more) {
        static const struct timeval now = {0, 0};
        evtimer_add(rdr->next_ev, &now);
    }
}

/* The ring signalled completions (or, deferred, completion work): they
 * are taken at the end of this round, after the socket work. */
static void done_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct flash_reader *rdr = arg;
    if (!rdr->edge) {
        uint64_t n;
        if (read(fd, &n, sizeof(n)) < 0) {
            /* nothing pending: another round took it */
        }
    }
    want_round(rdr);
}

static void next_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    want_round(arg);
}

/* A ring whose completion work runs only when the worker asks
 * (DEFER_TASKRUN, which needs SINGLE_ISSUER: Linux 6.1), else one that
 * runs it at the worker's next system call without interrupting it
 * (COOP_TASKRUN: 5.19), else a plain one. */
static int ring_init(struct flash_reader *rdr)
{
    static const unsigned tries[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
        IORING_SETUP_COOP_TASKRUN,
        0,
    };
    int rc = -EINVAL;
    for (unsigned i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
        struct io_uring_params p;
        memset(&p, 0, sizeof(p));
        p.flags = tries[i];
        rc = io_uring_queue_init_params(READER_RING_ENTRIES, &rdr->ring, &p);
        if (rc == 0) {
            rdr->deferred = (tries[i] & IORING_SETUP_DEFER_TASKRUN) != 0;
            return 0;
        }
        if (rc != -EINVAL)
            break;
    }
    return rc;
}

struct flash_reader *flash_reader_new(struct event_base *base)
{
    struct flash_reader *rdr = calloc(1, sizeof(*rdr));
    if (!rdr) {
        log_msg(LOG_WARN, "flash: no memory for a read ring");
        return NULL;
    }
    rdr->ringless_tail = &rdr->ringless;
    int rc = ring_init(rdr);
    if (rc < 0) {
        log_msg(LOG_WARN, "flash: cannot make a read ring: %s", strerror(-rc));
        goto fail_alloc;
    }
    rdr->done_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (rdr->done_fd < 0) {
        log_msg(LOG_WARN, "flash: eventfd: %s", strerror(errno));
        goto fail_ring;
    }
    rc = io_uring_register_eventfd(&rdr->ring, rdr->done_fd);
    if (rc < 0) {
        log_msg(LOG_WARN, "flash: cannot register the read ring's eventfd: %s", strerror(-rc));
        goto fail_fd;
    }
    /* edge-triggered, every signal is an edge and the counter is never
     * read (it stops at its maximum, 2^64 - 2, and still signals) */
    rdr->edge = (event_base_get_features(base) & EV_FEATURE_ET) != 0;
    rdr->done_ev =
        event_new(base, rdr->done_fd, EV_READ | EV_PERSIST | (rdr->edge ? EV_ET : 0), done_cb, rdr);
    if (!rdr->done_ev || event_add(rdr->done_ev, NULL) != 0)
        goto fail_events;
    rdr->round_ev = event_new(base, -1, 0, round_cb, rdr);
    if (!rdr->round_ev)
        goto fail_events;
    rdr->next_ev = evtimer_new(base, next_cb, rdr);
    if (!rdr->next_ev)
        goto fail_events;
    return rdr;

fail_events:
    log_msg(LOG_WARN, "flash: cannot add the read ring's events");
    if (rdr->round_ev)
        event_free(rdr->round_ev);
    if (rdr->done_ev)
        event_free(rdr->done_ev);
fail_fd:
    close(rdr->done_fd);
fail_ring:
    io_uring_queue_exit(&rdr->ring);
fail_alloc:
    free(rdr);
    return NULL;
}

void flash_reader_read(struct flash_reader *rdr, struct flash_read *rd)
{
    rd->ok = rd->corrupt = rd->queued = false;
    rd->next = NULL;
    rd->res = -ENOENT;
    int fd;
    uint64_t off;
    struct io_uring_sqe *sqe = NULL;
    switch (flash_read_locate(rd, &fd, &off)) {
    case FLASH_PLACE_FILE:
        sqe = io_uring_get_sqe(&rdr->ring);
        if (!sqe) { /* the queue is full: submit what it holds */
            io_uring_submit(&rdr->ring);
            sqe = io_uring_get_sqe(&rdr->ring);
        }
        rd->res = -EAGAIN; /* when there is still no room */
        break;
    case FLASH_PLACE_COPIED:
        rd->res = (int)rd->loc.len;
        break;
    case FLASH_PLACE_NONE:
        break;
    }
    if (sqe) {
        io_uring_prep_readv(sqe, fd, rd->iov, rd->niov, off);
        io_uring_sqe_set_data(sqe, rd);
        rdr->inflight++;
        rd->queued = true;
        flash_io_queued(1);
    } else {
        *rdr->ringless_tail = rd;
        rdr->ringless_tail = &rd->next;
    }
    want_round(rdr);
}

void flash_reader_free(struct flash_reader *rdr)
{
    if (!rdr)
        return;
    while (rdr->ringless || rdr->inflight > 0) {
        io_uring_submit(&rdr->ring);
        run_ringless(rdr);
        struct io_uring_cqe *cqe;
        if (rdr->inflight > 0 && io_uring_wait_cqe(&rdr->ring, &cqe) == 0)
            reap(rdr, UINT_MAX);
    }
    event_free(rdr->next_ev);
    event_free(rdr->round_ev);
    event_free(rdr->done_ev);
    close(rdr->done_fd);
    io_uring_queue_exit(&rdr->ring);
    free(rdr);
}

#else /* no liburing: flash_start() refuses to start, so no value is on flash */

struct flash_reader *flash_reader_new(struct event_base *base)
{
    (void)base;
    log_msg(LOG_WARN, "flash: this build has no io_uring (liburing)");
    return NULL;
}

void flash_reader_free(struct flash_reader *rdr)
{
    (void)rdr;
}

void flash_reader_read(struct flash_reader *rdr, struct flash_read *rd)
{
    (void)rdr;
    (void)rd;
}

#endif
