/*
 * flash_reader.c: a worker's own io_uring ring for reads of flash values
 * (see flash_reader.h). Owns the ring, the eventfd its completions signal,
 * the two loop events (completions; the batched submission) and the reads
 * that found no record, which complete from the loop like the others.
 */
#include "flash_reader.h"

#include <errno.h>
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

struct flash_reader {
    struct io_uring ring;
    int done_fd;               /* eventfd the ring signals per completion */
    struct event *done_ev;     /* done_fd readable */
    struct event *submit_ev;   /* made active when reads wait for submission */
    bool submit_active;        /* submit_ev is active */
    unsigned inflight;         /* reads in the ring (queued or submitted) */
    struct flash_read *unread; /* reads that found no record: done() from the loop */
    struct flash_read **unread_tail;
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

static void reap(struct flash_reader *rdr)
{
    struct io_uring_cqe *cqe;
    while (io_uring_peek_cqe(&rdr->ring, &cqe) == 0) {
        struct flash_read *rd = io_uring_cqe_get_data(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&rdr->ring, cqe);
        rdr->inflight--;
        complete(rd, res);
    }
}

/* done() of the reads that found no record (they may queue new reads). */
static void run_unread(struct flash_reader *rdr)
{
    while (rdr->unread) {
        struct flash_read *rd = rdr->unread;
        rdr->unread = rd->next;
        if (!rdr->unread)
            rdr->unread_tail = &rdr->unread;
        complete(rd, -ENOENT);
    }
}

static void want_submit(struct flash_reader *rdr)
{
    if (!rdr->submit_active) {
        rdr->submit_active = true;
        event_active(rdr->submit_ev, EV_TIMEOUT, 0);
    }
}

/* End of the loop round that queued reads: one io_uring_enter for all of
 * them; reads the page cache served completed within it. */
static void submit_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct flash_reader *rdr = arg;
    rdr->submit_active = false;
    int rc = io_uring_submit(&rdr->ring);
    run_unread(rdr);
    reap(rdr);
    if (rc < 0 && rdr->inflight > 0 && io_uring_sq_ready(&rdr->ring) > 0)
        want_submit(rdr); /* the kernel was busy: once more next round */
}

static void done_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct flash_reader *rdr = arg;
    uint64_t n;
    if (read(fd, &n, sizeof(n)) < 0) {
        /* nothing pending: another round reaped it */
    }
    reap(rdr);
}

struct flash_reader *flash_reader_new(struct event_base *base)
{
    struct flash_reader *rdr = calloc(1, sizeof(*rdr));
    if (!rdr) {
        log_msg(LOG_WARN, "flash: no memory for a read ring");
        return NULL;
    }
    rdr->unread_tail = &rdr->unread;
    int rc = io_uring_queue_init(READER_RING_ENTRIES, &rdr->ring, 0);
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
    rdr->done_ev = event_new(base, rdr->done_fd, EV_READ | EV_PERSIST, done_cb, rdr);
    if (!rdr->done_ev || event_add(rdr->done_ev, NULL) != 0)
        goto fail_done_ev;
    rdr->submit_ev = event_new(base, -1, 0, submit_cb, rdr);
    if (!rdr->submit_ev)
        goto fail_done_ev;
    return rdr;

fail_done_ev:
    log_msg(LOG_WARN, "flash: cannot add the read ring's events");
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
    int fd;
    uint64_t off;
    struct io_uring_sqe *sqe = NULL;
    if (flash_read_locate(&rd->loc, &fd, &off)) {
        sqe = io_uring_get_sqe(&rdr->ring);
        if (!sqe) { /* the queue is full: submit what it holds */
            io_uring_submit(&rdr->ring);
            sqe = io_uring_get_sqe(&rdr->ring);
        }
    }
    if (sqe) {
        io_uring_prep_readv(sqe, fd, rd->iov, rd->niov, off);
        io_uring_sqe_set_data(sqe, rd);
        rdr->inflight++;
        rd->queued = true;
        flash_io_queued(1);
    } else {
        *rdr->unread_tail = rd;
        rdr->unread_tail = &rd->next;
    }
    want_submit(rdr);
}

void flash_reader_free(struct flash_reader *rdr)
{
    if (!rdr)
        return;
    while (rdr->unread || rdr->inflight > 0) {
        io_uring_submit(&rdr->ring);
        run_unread(rdr);
        struct io_uring_cqe *cqe;
        if (rdr->inflight > 0 && io_uring_wait_cqe(&rdr->ring, &cqe) == 0)
            reap(rdr);
    }
    event_free(rdr->submit_ev);
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
