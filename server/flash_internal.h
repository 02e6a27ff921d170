/*
 * flash_internal.h: the flash tier's state shared by its I/O thread's two
 * halves: flash.c (files, pages, write buffers, read checks, reclamation, stats)
 * and flash_compact.c (compaction). Nothing outside the tier includes it.
 */
#ifndef MCR_FLASH_INTERNAL_H
#define MCR_FLASH_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "flash.h"

#ifdef HAVE_LIBURING
#include <liburing.h>
#endif

#define RECORD_MAGIC 0x4652434dU /* "MCRF" */
#define RECORD_HEADER FLASH_RECORD_HEADER

enum page_state { PAGE_FREE, PAGE_OPEN, PAGE_FULL };

/* memcached's page buckets: values of one kind share pages, so pages of
 * short-lived values empty together and rescued values do not mix with
 * new ones. */
enum flash_bucket { BUCKET_DEFAULT, BUCKET_COMPACT, BUCKET_CHUNKED, BUCKET_LOWTTL, BUCKET_COUNT };

struct flash_page {
    int fd;
    uint64_t file_off;
    uint32_t version;
    enum page_state state;
    unsigned bucket;
    uint64_t fill;                     /* bytes written */
    uint64_t objects;                  /* records written */
    uint64_t live_objects, live_bytes; /* records flash headers still point at */
    uint64_t seq;                      /* order in which pages were opened */
};

/* A record compaction rescues, waiting in the compact bucket's buffer for
 * its write: it, its flash header (referenced), is pointed from `from` to
 * loc once the buffer is written. (Values leaving RAM need no entry: their
 * headers point at the buffered record at once.) */
struct pending {
    item *it;
    uint64_t cas;
    struct item_flash_loc loc;
    struct item_flash_loc from;
};

/* One bucket's open page and its two write buffers: the I/O thread fills
 * one while the other is being written (at most one write in flight per
 * bucket, at its page's fill: to the open page, or the last write of the
 * page before, which stays open until that write completes). The fields
 * readers use (open_page, wbuf, writing, wr_page, wr_buf, wr_len) change
 * under tier.lock. */
struct wbucket {
    unsigned open_page; /* npages: none */
    char *wbuf;         /* being filled */
    size_t wfill;
    struct pending *pend; /* the compact bucket's rescues in wbuf */
    size_t npend, pend_cap;
    bool writing;     /* wr_buf's first wr_len bytes are being written to wr_page */
    unsigned wr_page; /* open_page, or the one before (its last write) */
    bool flush_after; /* wbuf is written as soon as that write completes */
    char *wr_buf;
    size_t wr_len, wr_done;
    struct pending *wr_pend; /* the rescues in wr_buf */
    size_t wr_npend, wr_pend_cap;
};

struct flash_counters {
    uint64_t gets[FC_COUNT];
    uint64_t page_allocs, page_evictions, page_reclaims;
    uint64_t objects_evicted, objects_read, objects_written;
    uint64_t bytes_evicted, bytes_written, bytes_read;
    uint64_t compact_lost, compact_rescues, compact_skipped;
    uint64_t io_queue;
};

struct flash_tier {
    bool running;
    struct ext_settings cfg; /* tunables changed by "extstore" are read atomically */
    int fds[EXT_PATHS_MAX];
    unsigned nfiles;
    struct flash_page *pages;
    unsigned npages;
    uint64_t next_seq;
    struct wbucket buckets[BUCKET_COUNT];
    unsigned compacting; /* the page compaction reads; npages: none */
    pthread_t thread;
    pthread_mutex_t lock; /* pass requests, the page table */
    pthread_cond_t passes_cond;
    bool stop;
    uint64_t pass_requests, passes_done;
    int wake_fd;
    bool io_progress;          /* I/O thread: a write or read completed since it was cleared */
    bool room_wanted;          /* an allocation found its class without free chunks (atomic) */
    uint64_t writer_passes;    /* writer passes not held up by a write (atomic) */
    uint64_t writer_pass_ends; /* every writer pass, held up or not (atomic) */
#ifdef HAVE_LIBURING
    struct io_uring ring;
#endif
};

extern struct flash_tier tier;
extern struct flash_counters flash_counters;

static inline void flash_add(uint64_t *c, uint64_t n)
{
    __atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

static inline uint64_t flash_get(const uint64_t *c)
{
    return __atomic_load_n(c, __ATOMIC_RELAXED);
}

static inline unsigned flash_tunable(const unsigned *v)
{
    return __atomic_load_n(v, __ATOMIC_RELAXED);
}

size_t flash_record_size(size_t nkey, size_t nbytes);
/* The check of a record: over everything after the check itself. */
uint32_t flash_record_check(const char *record, size_t len);

/* I/O thread only: asks the ring for a read of len bytes at off of fd
 * into buf; its completion calls flash_compact_read_done (the only
 * reader). */
void flash_ring_read(int fd, char *buf, size_t len, uint64_t off);
/* I/O thread only: handles the ring's completions until cond(arg). */
void flash_ring_wait_for(bool (*cond)(const void *), const void *arg);
/* What placing a len-byte record in a bucket's buffer would first have to
 * wait for: nothing, the write in flight before the full buffer can go
 * (FILL_BUFFER), or the bucket's writes before it changes pages
 * (FILL_PAGE). The I/O thread waits for neither: the writer must not
 * wait while it holds items of a COLD tail (the slab mover's page drains
 * wait for them), and neither the writer nor compaction may hold the
 * other up, or sets evict values the writer has not moved yet. (A full
 * buffer with no write in flight, or a new page with nothing buffered or
 * in flight, costs no wait.) */
enum flash_fill_wait { FILL_NONE, FILL_BUFFER, FILL_PAGE };
enum flash_fill_wait flash_fill_wait(unsigned bucket, size_t len);
/* Has the bucket's filling buffer written now, or as soon as its write in
 * flight completes. */
void flash_request_flush(unsigned bucket);
/* Copies a record compaction rescues (len bytes, as read) into the compact
 * bucket's buffer for header h (referenced; the buffer keeps the
 * reference). When the buffer is written, h is pointed at the copy if it
 * still points at `from`. False when there is no room (nothing kept). */
bool flash_append_rescue(item *h, const char *record, size_t len,
                         const struct item_flash_loc *from);
/* Writes a bucket's buffer out and waits until it and the write before it
 * are done (their rescues settled). I/O thread only. */
void flash_flush_bucket(unsigned bucket);
/* Frees page (still of `version`) after compaction: headers still
 * pointing into it miss from now on. */
void flash_page_close(unsigned page, uint32_t version);

/* flash_compact.c: one step of compaction: starts on a page when the
 * settings call for it, asks for the read of its next write buffer, and
 * rescues the records of a completed read until the compact bucket would
 * have to wait for its write; true when there is more to do at once
 * (false while it waits for the ring). I/O thread only. */
bool flash_compact_pass(void);
/* The ring completed compaction's read (res bytes, or -errno). */
void flash_compact_read_done(int res);
/* The I/O thread stops: a compaction under way is dropped (its page stays
 * as it is; the rescues waiting in the compact bucket are released with
 * the buckets). */
void flash_compact_abandon(void);

#endif
