/*
 * flash.c: the flash tier's store and its I/O thread. Owns the ext_path
 * files and their pages, the write buffers of memcached's page buckets
 * filled from COLD tails (and by compaction, flash_compact.c), the I/O
 * thread's io_uring ring its writes and compaction reads go through,
 * page reclamation (the oldest page is dropped when none is free) and the
 * extstore counters (their stats lines: flash_stats.c). A record's layout,
 * its place and the checks of value reads: flash_record.c; the reads
 * themselves go through the workers' own rings (flash_reader.c).
 */
#include "flash.h"
#include "flash_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "slabs.h"

#define SELECT_BATCH 64
#define WRITER_INTERVAL_US 50000 /* longest wait between writer passes */
#define WRITER_BUSY_US 500       /* the wait after a pass that took values */
#define FREE_PAGES_TARGET 3      /* free chunks a class at the limit keeps, in pages */

struct flash_counters flash_counters;

struct flash_tier tier = {
    .lock = PTHREAD_MUTEX_INITIALIZER, .passes_cond = PTHREAD_COND_INITIALIZER, .wake_fd = -1};

void flash_count(enum flash_counter which)
{
    flash_add(&flash_counters.gets[which], 1);
}

bool flash_running(void)
{
    return __atomic_load_n(&tier.running, __ATOMIC_ACQUIRE);
}

static void wake(void)
{
    uint64_t one = 1;
    if (tier.wake_fd >= 0 && write(tier.wake_fd, &one, sizeof(one)) < 0) {
        /* the counter is saturated: the thread is awake anyway */
    }
}

void flash_io_queued(int delta)
{
    flash_add(&flash_counters.io_queue, (uint64_t)(int64_t)delta);
}

#ifdef HAVE_LIBURING

/* user_data of the ring's completions: the wake poll, compaction's read
 * (flash_ring_read); a bucket's write has the bucket's address */
static char wake_token, compact_read_token;

static void arm_wake_poll(void)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&tier.ring);
    if (!sqe) {
        io_uring_submit(&tier.ring);
        sqe = io_uring_get_sqe(&tier.ring);
    }
    io_uring_prep_poll_add(sqe, tier.wake_fd, POLLIN);
    io_uring_sqe_set_data(sqe, &wake_token);
    io_uring_submit(&tier.ring);
}

static struct io_uring_sqe *next_sqe(void)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&tier.ring);
    if (!sqe) {
        io_uring_submit(&tier.ring);
        sqe = io_uring_get_sqe(&tier.ring);
    }
    return sqe;
}

static void write_done(struct wbucket *b, int res);
static void submit_bucket(unsigned bucket, bool wait);

/* Handles one completion: a write or compaction's read that completed
 * counts as progress (the thread's next pass may go on with what waited
 * for it). */
static void handle_cqe(struct io_uring_cqe *cqe)
{
    void *data = io_uring_cqe_get_data(cqe);
    int res = cqe->res;
    io_uring_cqe_seen(&tier.ring, cqe);
    if (data == &wake_token) {
        uint64_t n;
        if (read(tier.wake_fd, &n, sizeof(n)) < 0) {
            /* nothing was pending */
        }
        arm_wake_poll();
        /* an allocation ran out of chunks: the writer's pass comes now */
        if (__atomic_exchange_n(&tier.room_wanted, false, __ATOMIC_ACQ_REL))
            tier.io_progress = true;
        return;
    }
    tier.io_progress = true;
    if (data == &compact_read_token)
        flash_compact_read_done(res);
    else
        write_done(data, res);
}

void flash_ring_wait_for(bool (*cond)(const void *), const void *arg)
{
    while (!cond(arg)) {
        struct io_uring_cqe *cqe;
        if (io_uring_wait_cqe(&tier.ring, &cqe) == 0)
            handle_cqe(cqe);
    }
}

void flash_ring_read(int fd, char *buf, size_t len, uint64_t off)
{
    struct io_uring_sqe *sqe = next_sqe();
    io_uring_prep_read(sqe, fd, buf, (unsigned)len, off);
    io_uring_sqe_set_data(sqe, &compact_read_token);
    io_uring_submit(&tier.ring);
}

static void release_rescues(struct pending *pend, size_t *n)
{
    for (size_t i = *n; i-- > 0;)
        item_release(pend[i].it);
    *n = 0;
}

/* A written rescue: its header is pointed at the copy if it still points
 * at the old place, which then stops counting. */
static void settle(struct pending *pd)
{
    if (item_flash_repoint(pd->it, pd->cas, &pd->from, &pd->loc)) {
        flash_forget(&pd->from);
        flash_add(&flash_counters.compact_rescues, 1);
        flash_add(&flash_counters.objects_written, 1); /* memcached counts rewrites too */
    } else {
        flash_forget(&pd->loc); /* deleted or changed meanwhile: nothing lost */
    }
}

static void drop_page(unsigned page);

/* The page offset where a bucket's filling buffer starts. */
static uint64_t filling_base(const struct wbucket *b)
{
    bool in_flight = b->writing && b->wr_page == b->open_page;
    return tier.pages[b->open_page].fill + (in_flight ? b->wr_len : 0);
}

/* Asks for the rest of a bucket's write. */
static void write_rest(struct wbucket *b)
{
    const struct flash_page *p = &tier.pages[b->wr_page];
    struct io_uring_sqe *sqe = next_sqe();
    io_uring_prep_write(sqe, p->fd, b->wr_buf + b->wr_done, (unsigned)(b->wr_len - b->wr_done),
                        p->file_off + p->fill + b->wr_done);
    io_uring_sqe_set_data(sqe, b);
    io_uring_submit(&tier.ring);
}

/* A bucket's write completed (res bytes, or -errno). Once the whole buffer
 * is written its records are read from the file and its rescues settle,
 * and a page the bucket has left since (this was its last write) is full.
 * A failed write drops its page: the headers pointing into it (in this
 * buffer, the one being filled when it is the same page, or written
 * before) miss from then on, as after any page drop. */
static void write_done(struct wbucket *b, int res)
{
    if (res > 0) {
        b->wr_done += (size_t)res;
        if (b->wr_done < b->wr_len) {
            write_rest(b);
            return;
        }
    } else {
        fprintf(stderr, "flash: write to page %u failed; the values in it are lost\n", b->wr_page);
        bool same_page = b->wr_page == b->open_page;
        flash_add(&flash_counters.compact_lost, b->wr_npend + (same_page ? b->npend : 0));
        pthread_mutex_lock(&tier.lock);
        drop_page(b->wr_page);
        b->writing = false;
        b->flush_after = false;
        if (same_page) {
            b->open_page = tier.npages;
            b->wfill = 0;
        }
        pthread_mutex_unlock(&tier.lock);
        release_rescues(b->wr_pend, &b->wr_npend);
        if (same_page)
            release_rescues(b->pend, &b->npend);
        return;
    }
    struct flash_page *p = &tier.pages[b->wr_page];
    pthread_mutex_lock(&tier.lock);
    if (b->wr_page != b->open_page)
        p->state = PAGE_FULL; /* its last write */
    p->fill += b->wr_len;
    p->objects += b->wr_npend;
    /* counted live first: a header may be freed as soon as it points here */
    for (size_t i = 0; i < b->wr_npend; i++) {
        p->live_objects++;
        p->live_bytes += b->wr_pend[i].loc.len;
    }
    b->writing = false;
    pthread_mutex_unlock(&tier.lock);
    flash_add(&flash_counters.bytes_written, b->wr_len);
    for (size_t i = 0; i < b->wr_npend; i++)
        settle(&b->wr_pend[i]);
    release_rescues(b->wr_pend, &b->wr_npend);
    if (b->flush_after) { /* the filling buffer was asked to follow */
        b->flush_after = false;
        submit_bucket((unsigned)(b - tier.buckets), false);
    }
}

static bool bucket_idle(const void *arg)
{
    return !((const struct wbucket *)arg)->writing;
}

/* Starts the write of a bucket's buffer to its open page; the other
 * buffer takes the next records. The values taken from RAM were replaced
 * by their headers when they were copied in (append_record); until their
 * write completes, reads copy them from the buffers (flash_read_locate).
 * With a write of the bucket still in flight it is waited for first, or,
 * unless wait, nothing is started. */
static void submit_bucket(unsigned bucket, bool wait)
{
    struct wbucket *b = &tier.buckets[bucket];
    if (b->wfill == 0 || (b->writing && !wait))
        return;
    flash_ring_wait_for(bucket_idle, b);
    if (b->wfill == 0) /* written meanwhile, or the write before failed and took these along */
        return;
    pthread_mutex_lock(&tier.lock);
    char *buf = b->wr_buf;
    b->wr_buf = b->wbuf;
    b->wbuf = buf;
    struct pending *pend = b->wr_pend;
    size_t cap = b->wr_pend_cap;
    b->wr_pend = b->pend;
    b->wr_pend_cap = b->pend_cap;
    b->wr_npend = b->npend;
    b->pend = pend;
    b->pend_cap = cap;
    b->npend = 0;
    b->wr_page = b->open_page;
    b->wr_len = b->wfill;
    b->wr_done = 0;
    b->wfill = 0;
    b->writing = true;
    pthread_mutex_unlock(&tier.lock);
    write_rest(b);
}

void flash_flush_bucket(unsigned bucket)
{
    submit_bucket(bucket, true);
    flash_ring_wait_for(bucket_idle, &tier.buckets[bucket]);
}

void flash_request_flush(unsigned bucket)
{
    struct wbucket *b = &tier.buckets[bucket];
    if (b->writing)
        b->flush_after = true;
    else
        submit_bucket(bucket, false);
}

enum flash_fill_wait flash_fill_wait(unsigned bucket, size_t len)
{
    const struct wbucket *b = &tier.buckets[bucket];
    if (b->open_page == tier.npages || filling_base(b) + b->wfill + len > tier.cfg.page_size)
        return b->wfill > 0 && b->writing ? FILL_PAGE : FILL_NONE;
    return b->wfill + len > tier.cfg.wbuf_size && b->writing ? FILL_BUFFER : FILL_NONE;
}

/* The oldest full page compaction is not reading (npages: none); tier.lock
 * held. */
static unsigned oldest_full_page(void)
{
    unsigned pick = tier.npages;
    for (unsigned i = 0; i < tier.npages; i++)
        if (tier.pages[i].state == PAGE_FULL && i != tier.compacting &&
            (pick == tier.npages || tier.pages[i].seq < tier.pages[pick].seq))
            pick = i;
    return pick;
}

/* Drops a full page with the records still in it (tier.lock held): its
 * version changes, so every header pointing into it misses from now on. */
static void drop_page(unsigned page)
{
    struct flash_page *p = &tier.pages[page];
    flash_add(&flash_counters.page_evictions, 1);
    flash_add(&flash_counters.objects_evicted, p->live_objects);
    flash_add(&flash_counters.bytes_evicted, p->live_bytes);
    p->state = PAGE_FREE;
    p->version++;
    p->live_objects = p->live_bytes = 0;
}

static bool any_free_page(void)
{
    for (unsigned i = 0; i < tier.npages; i++)
        if (tier.pages[i].state == PAGE_FREE && i != tier.compacting)
            return true;
    return false;
}

/* Opens a page for a bucket: a free one, else the oldest full one that
 * compaction is not reading is dropped. As memcached's extstore, a page is
 * always kept free: when opening took the last free page, the oldest full
 * page is dropped at once, so the next bucket that needs a page never
 * waits. False when there is no page to open. */
static bool open_next_page(unsigned bucket)
{
    struct wbucket *b = &tier.buckets[bucket];
    pthread_mutex_lock(&tier.lock);
    /* a page whose last write is in flight is full once it completes
     * (write_done); until then it is neither dropped nor compacted */
    if (b->open_page < tier.npages && !(b->writing && b->wr_page == b->open_page))
        tier.pages[b->open_page].state = PAGE_FULL;
    b->open_page = tier.npages;
    unsigned pick = tier.npages;
    for (unsigned i = 0; i < tier.npages && pick == tier.npages; i++)
        if (tier.pages[i].state == PAGE_FREE && i != tier.compacting)
            pick = i;
    if (pick == tier.npages) {
        pick = oldest_full_page();
        if (pick == tier.npages) {
            pthread_mutex_unlock(&tier.lock);
            return false;
        }
        drop_page(pick);
    }
    struct flash_page *p = &tier.pages[pick];
    p->version++; /* headers pointing at the old contents now miss */
    p->state = PAGE_OPEN;
    p->bucket = bucket;
    p->fill = 0;
    p->objects = 0;
    p->live_objects = p->live_bytes = 0;
    p->seq = ++tier.next_seq;
    b->open_page = pick;
    if (!any_free_page()) {
        unsigned oldest = oldest_full_page();
        if (oldest != tier.npages)
            drop_page(oldest);
    }
    pthread_mutex_unlock(&tier.lock);
    flash_add(&flash_counters.page_allocs, 1);
    return true;
}

void flash_page_close(unsigned page, uint32_t version)
{
    pthread_mutex_lock(&tier.lock);
    struct flash_page *p = &tier.pages[page];
    if (p->state == PAGE_FULL && p->version == version) {
        p->state = PAGE_FREE;
        p->version++;
        p->live_objects = p->live_bytes = 0;
        flash_add(&flash_counters.page_reclaims, 1);
    }
    pthread_mutex_unlock(&tier.lock);
}

static bool memory_full(void)
{
    struct slabs_global_stats g;
    slabs_global_stats(&g);
    size_t reserve = (size_t)((double)g.mem_limit * tier.cfg.automove_freeratio);
    /* the pool holds the rest of -m (prefilled): only pages classes hold count */
    return g.held_bytes + reserve >= g.mem_limit;
}

static bool eligible(const item *it, bool full, rel_time_t now)
{
    if (item_on_flash(it) || item_nbytes(it) < flash_tunable(&tier.cfg.item_size))
        return false;
    rel_time_t exp = item_exptime(it);
    if (exp != 0 && exp <= now)
        return false;
    rel_time_t last = item_last_access(it);
    unsigned age = flash_tunable(&tier.cfg.item_age);
    bool old = age != UINT32_MAX && now >= last && now - last >= age;
    return full || old;
}

/* memcached's choice: values expiring within ext_low_ttl share pages,
 * so do values larger than a slab chunk. */
static unsigned bucket_of(const item *it, rel_time_t now)
{
    rel_time_t exp = item_exptime(it);
    if (exp != 0 && exp - now < flash_tunable(&tier.cfg.low_ttl))
        return BUCKET_LOWTTL;
    return item_value_nseg(it) > 1 ? BUCKET_CHUNKED : BUCKET_DEFAULT;
}

/* Room for a len-byte record in a bucket's buffer (flushing and changing
 * pages first as needed); *loc gets its place. False when the record
 * cannot be placed. */
static bool reserve(unsigned bucket, size_t len, struct item_flash_loc *loc)
{
    struct wbucket *b = &tier.buckets[bucket];
    if (len > tier.cfg.wbuf_size)
        return false;
    if (b->wfill + len > tier.cfg.wbuf_size)
        submit_bucket(bucket, true);
    if (b->open_page == tier.npages || filling_base(b) + b->wfill + len > tier.cfg.page_size) {
        /* the page's last buffer goes (after the write in flight before
         * it); the next page is filled meanwhile */
        submit_bucket(bucket, true);
        if (!open_next_page(bucket))
            return false;
    }
    loc->page = b->open_page;
    loc->version = tier.pages[b->open_page].version;
    loc->offset = filling_base(b) + b->wfill;
    loc->len = (uint32_t)len;
    b->wfill += len;
    return true;
}

static char *buffered_record(unsigned bucket, const struct item_flash_loc *loc)
{
    const struct wbucket *b = &tier.buckets[bucket];
    return b->wbuf + (loc->offset - filling_base(b));
}

/* A record just copied into its bucket's buffer counts as used from now
 * on (before its header is linked: a header may be freed at once). */
static void count_buffered(const struct item_flash_loc *loc)
{
    pthread_mutex_lock(&tier.lock);
    struct flash_page *p = &tier.pages[loc->page];
    p->objects++;
    p->live_objects++;
    p->live_bytes += loc->len;
    pthread_mutex_unlock(&tier.lock);
}

/* Copies it's value into its bucket's buffer and replaces the item by its
 * flash header at once, as memcached's extstore does: its RAM is free
 * before the buffer is written, so sets arriving meanwhile take that
 * memory instead of evicting values on their way to flash. Until the
 * write, reads of the value copy it from the buffer. Drops the caller's
 * reference. */
static void append_record(item *it, unsigned bucket)
{
    size_t nkey = item_nkey(it), nbytes = item_nbytes(it);
    size_t len = flash_record_size(nkey, nbytes);
    uint64_t cas = item_unique(it);
    struct item_flash_loc loc;
    if (!reserve(bucket, len, &loc)) {
        item_release(it);
        return;
    }
    char *rec = buffered_record(bucket, &loc);
    uint32_t magic = RECORD_MAGIC, n32 = (uint32_t)nbytes;
    memcpy(rec, &magic, 4);
    memcpy(rec + 8, &n32, 4);
    rec[12] = (char)nkey;
    memset(rec + 13, 0, 3);
    memcpy(rec + RECORD_HEADER, item_key(it), nkey);
    size_t at = RECORD_HEADER + nkey;
    for (unsigned i = 0; i < item_value_nseg(it); i++) {
        struct iovec seg = item_value_seg(it, i);
        memcpy(rec + at, seg.iov_base, seg.iov_len);
        at += seg.iov_len;
    }
    memset(rec + at, 0, len - at);
    uint32_t check = flash_record_check(rec, RECORD_HEADER + nkey + nbytes);
    memcpy(rec + 4, &check, 4);
    loc.check = check;
    count_buffered(&loc);
    if (item_move_to_flash(it, cas, &loc))
        flash_add(&flash_counters.objects_written, 1);
    else
        flash_forget(&loc); /* stored, read twice or deleted meanwhile */
    item_release(it);
}

bool flash_append_rescue(item *h, const char *record, size_t len, const struct item_flash_loc *from)
{
    struct item_flash_loc loc;
    if (!reserve(BUCKET_COMPACT, len, &loc)) /* may swap the buffers and their lists */
        return false;
    struct wbucket *b = &tier.buckets[BUCKET_COMPACT];
    if (b->npend == b->pend_cap) {
        size_t cap = b->pend_cap ? b->pend_cap * 2 : 256;
        struct pending *np = realloc(b->pend, cap * sizeof(*np));
        if (!np)
            return false; /* the space taken stays unused: nothing points at it */
        b->pend = np;
        b->pend_cap = cap;
    }
    memcpy(buffered_record(BUCKET_COMPACT, &loc), record, len);
    loc.check = from->check;
    b->pend[b->npend++] =
        (struct pending){.it = h, .cas = item_unique(h), .loc = loc, .from = *from};
    return true;
}

/* How many more chunks of class cls the writer should free now: as
 * memcached's extstore, a class whose memory is at the limit keeps
 * FREE_PAGES_TARGET pages' worth of chunks free by moving its COLD tail
 * to flash, and no more (the rest of its items stay RAM hits). */
static size_t class_shortfall(unsigned cls)
{
    struct slabs_class_stats st;
    slabs_class_stats(cls, &st);
    size_t target = st.chunks_per_page * FREE_PAGES_TARGET;
    return st.total_pages == 0 || st.free_chunks >= target ? 0 : target - st.free_chunks;
}

/* One pass over every class's COLD tail; true when it took a full batch
 * somewhere (there may be more to take). *wrote: whether it took any. A
 * buffer is written out when it is full, or when a pass takes nothing
 * (the values it holds are already headers in RAM and are read from the
 * buffer meanwhile, so a burst of sets does not wait for the device on
 * every pass). */
static bool writer_pass(bool *wrote)
{
    *wrote = false;
    bool full = memory_full();
    bool aging = flash_tunable(&tier.cfg.item_age) != UINT32_MAX;
    enum flash_fill_wait filled[BUCKET_COUNT] = {FILL_NONE};
    bool more = false;
    if (full || aging) {
        rel_time_t now = clock_now();
        unsigned largest = slabs_largest_class();
        size_t item_size = flash_tunable(&tier.cfg.item_size);
        for (unsigned cls = 1; cls <= largest; cls++) {
            if (slabs_class_size(cls) < item_size)
                continue; /* too small for a value that goes to flash */
            size_t want = full ? class_shortfall(cls) : 0;
            if (want == 0 && !aging)
                continue;
            /* only as many as the class needs (the rest would be
             * referenced for nothing), unless aging takes any old one */
            unsigned max = aging || want >= SELECT_BATCH ? SELECT_BATCH : (unsigned)want;
            item *sel[SELECT_BATCH];
            unsigned n = storage_cold_select(cls, max, sel);
            unsigned taken = 0;
            for (unsigned i = 0; i < n; i++) {
                unsigned bucket = bucket_of(sel[i], now);
                enum flash_fill_wait wait = FILL_NONE;
                if (!eligible(sel[i], taken < want, now)) {
                    item_release(sel[i]);
                } else if ((wait = flash_fill_wait(
                                bucket, flash_record_size(item_nkey(sel[i]),
                                                          item_nbytes(sel[i])))) != FILL_NONE) {
                    /* let these go and take them again on the pass
                     * the write's completion brings (the thread waits
                     * on its ring meanwhile, compaction goes on) */
                    for (unsigned j = i; j < n; j++)
                        item_release(sel[j]);
                    if (wait > filled[bucket])
                        filled[bucket] = wait;
                    break;
                } else {
                    append_record(sel[i], bucket);
                    taken++;
                }
            }
            /* under memory pressure, as memcached's writer: while a pass
             * moves values, the next follows at once (sets may be
             * using up the chunks it freed) */
            if (taken == SELECT_BATCH || (full && taken > 0))
                more = true;
            if (taken > 0)
                *wrote = true;
        }
    }
    /* a bucket that made the writer stop, and every buffer after a pass
     * that moved nothing, is written as soon as the bucket's write in
     * flight completes (without waiting for it here) */
    bool held_up = false; /* by a write in flight: the completion brings the next pass */
    for (unsigned b = 0; b < BUCKET_COUNT; b++) {
        held_up |= filled[b] != FILL_NONE;
        if (filled[b] != FILL_NONE || !*wrote)
            flash_request_flush(b);
    }
    if (!held_up)
        __atomic_fetch_add(&tier.writer_passes, 1, __ATOMIC_RELEASE);
    __atomic_fetch_add(&tier.writer_pass_ends, 1, __ATOMIC_RELEASE);
    return more;
}

/* Set on the I/O thread: its own allocations (flash headers) never wait
 * for the writer, which is itself. */
static __thread bool on_io_thread;

static void *io_thread(void *arg)
{
    (void)arg;
    on_io_thread = true;
    arm_wake_poll();
    bool more = false;
    uint64_t last_pass_us = clock_monotonic_us();
    /* the writer looks again soon after a pass that wrote (memory is
     * filling: a burst of sets must not evict what flash could keep),
     * backing off to WRITER_INTERVAL_US while there is nothing to write */
    unsigned interval_us = WRITER_INTERVAL_US;
    for (;;) {
        pthread_mutex_lock(&tier.lock);
        bool stop = tier.stop;
        uint64_t requests = tier.pass_requests;
        pthread_mutex_unlock(&tier.lock);
        if (stop)
            break;
        if (more || requests != tier.passes_done) {
            last_pass_us = clock_monotonic_us();
            tier.io_progress = false;
            bool wrote;
            more = writer_pass(&wrote);
            interval_us = wrote ? WRITER_BUSY_US
                                : (interval_us * 2 > WRITER_INTERVAL_US ? WRITER_INTERVAL_US
                                                                        : interval_us * 2);
            /* compaction's steps wait for nothing: its reads and the
             * compact bucket's writes complete on the ring meanwhile */
            if (flash_compact_pass())
                more = true;
            if (requests != tier.passes_done) /* flash_write_now: everything written */
                for (unsigned b = 0; b < BUCKET_COUNT; b++)
                    flash_flush_bucket(b);
            pthread_mutex_lock(&tier.lock);
            tier.passes_done = requests;
            pthread_cond_broadcast(&tier.passes_cond);
            pthread_mutex_unlock(&tier.lock);
            if (more || tier.io_progress) /* completions came in the pass */
                continue;
        }
        struct __kernel_timespec ts = {0, (long long)interval_us * 1000LL};
        struct io_uring_cqe *cqe;
        int rc = io_uring_wait_cqe_timeout(&tier.ring, &cqe, &ts);
        if (rc == -ETIME) {
            more = true; /* time for a writer pass */
            continue;
        }
        tier.io_progress = false;
        while (rc == 0) {
            handle_cqe(cqe);
            rc = io_uring_peek_cqe(&tier.ring, &cqe);
        }
        /* a completed write or read lets what waited for it go on at
         * once; wakes must not keep the writer from its turn */
        more = tier.io_progress || clock_monotonic_us() - last_pass_us >= interval_us;
    }
    flash_compact_abandon();
    for (unsigned b = 0; b < BUCKET_COUNT; b++) /* the writes in flight end first */
        flash_ring_wait_for(bucket_idle, &tier.buckets[b]);
    return NULL;
}

bool flash_room_wanted(size_t chunk_size)
{
    if (!flash_running() || chunk_size < flash_tunable(&tier.cfg.item_size) || on_io_thread)
        return false; /* the writer takes no values of this class */
    if (!__atomic_exchange_n(&tier.room_wanted, true, __ATOMIC_ACQ_REL))
        wake();
    return true;
}

void flash_room_mark(struct flash_room_mark *m)
{
    m->passes = __atomic_load_n(&tier.writer_passes, __ATOMIC_ACQUIRE);
    m->moved = flash_get(&flash_counters.objects_written);
    m->activity = __atomic_load_n(&tier.writer_pass_ends, __ATOMIC_ACQUIRE) + m->moved;
}

bool flash_room_stalled(const struct flash_room_mark *m)
{
    uint64_t passes = __atomic_load_n(&tier.writer_passes, __ATOMIC_ACQUIRE);
    return passes >= m->passes + 2 && flash_get(&flash_counters.objects_written) == m->moved;
}

void flash_write_now(void)
{
    if (!flash_running())
        return;
    pthread_mutex_lock(&tier.lock);
    uint64_t want = ++tier.pass_requests;
    pthread_mutex_unlock(&tier.lock);
    wake();
    pthread_mutex_lock(&tier.lock);
    while (tier.passes_done < want && !tier.stop)
        pthread_cond_wait(&tier.passes_cond, &tier.lock);
    pthread_mutex_unlock(&tier.lock);
}

static void free_buckets(void)
{
    for (unsigned i = BUCKET_COUNT; i-- > 0;) {
        struct wbucket *b = &tier.buckets[i];
        release_rescues(b->wr_pend, &b->wr_npend);
        release_rescues(b->pend, &b->npend);
        free(b->wr_pend);
        free(b->pend);
        free(b->wr_buf);
        free(b->wbuf);
        *b = (struct wbucket){.open_page = tier.npages};
    }
}

static void close_files(void)
{
    for (unsigned i = tier.nfiles; i-- > 0;)
        close(tier.fds[i]);
    tier.nfiles = 0;
}

int flash_start(struct ext_settings *cfg, char *errbuf, size_t errlen)
{
    tier.cfg = *cfg;
    uint64_t total_pages = 0;
    for (unsigned i = 0; i < cfg->npaths; i++) {
        int fd = open(cfg->paths[i].path, O_RDWR | O_CREAT, 0600);
        if (fd < 0) {
            snprintf(errbuf, errlen, "failed to open file %s: %s", cfg->paths[i].path,
                     strerror(errno));
            close_files();
            return -1;
        }
        tier.fds[tier.nfiles++] = fd;
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) { /* another server uses it */
            snprintf(errbuf, errlen, "failed to open file\nextstore open: %s", strerror(errno));
            close_files();
            return -1;
        }
        /* reads are of single records at random places: no readahead, so
         * a read costs the device only the record's own blocks */
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
        total_pages += cfg->paths[i].size / cfg->page_size;
    }
    if (total_pages == 0)
        total_pages = 1; /* memcached keeps one page even when the file is smaller */
    tier.pages = calloc(total_pages, sizeof(*tier.pages));
    bool buffers = true;
    for (unsigned b = 0; b < BUCKET_COUNT; b++) {
        tier.buckets[b].wbuf = malloc(cfg->wbuf_size);
        tier.buckets[b].wr_buf = malloc(cfg->wbuf_size);
        buffers = buffers && tier.buckets[b].wbuf && tier.buckets[b].wr_buf;
    }
    if (!tier.pages || !buffers) {
        snprintf(errbuf, errlen, "out of memory for %llu pages", (unsigned long long)total_pages);
        goto fail_mem;
    }
    unsigned n = 0;
    for (unsigned i = 0; i < cfg->npaths; i++) {
        uint64_t per = cfg->paths[i].size / cfg->page_size;
        if (per == 0 && n == 0 && i + 1 == cfg->npaths)
            per = 1;
        for (uint64_t k = 0; k < per; k++, n++) {
            tier.pages[n].fd = tier.fds[i];
            tier.pages[n].file_off = k * cfg->page_size;
        }
    }
    tier.npages = n;
    tier.compacting = n;
    for (unsigned b = 0; b < BUCKET_COUNT; b++)
        tier.buckets[b].open_page = n;
    /* as memcached: 0 means a quarter of the pages */
    if (cfg->compact_under == 0) {
        cfg->compact_under = tier.cfg.compact_under = n / 4;
        cfg->drop_under = tier.cfg.drop_under = n / 4;
    }
    tier.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (tier.wake_fd < 0) {
        snprintf(errbuf, errlen, "eventfd: %s", strerror(errno));
        goto fail_mem;
    }
    int rc = io_uring_queue_init(256, &tier.ring, 0);
    if (rc < 0) {
        snprintf(errbuf, errlen, "io_uring: %s", strerror(-rc));
        goto fail_fd;
    }
    slabs_prefill_pool(); /* as memcached with extstore */
    tier.stop = false;
    __atomic_store_n(&tier.running, true, __ATOMIC_RELEASE);
    if (pthread_create(&tier.thread, NULL, io_thread, NULL) != 0) {
        __atomic_store_n(&tier.running, false, __ATOMIC_RELEASE);
        snprintf(errbuf, errlen, "cannot start the I/O thread");
        goto fail_ring;
    }
    return 0;
fail_ring:
    io_uring_queue_exit(&tier.ring);
fail_fd:
    close(tier.wake_fd);
    tier.wake_fd = -1;
fail_mem:
    free_buckets();
    free(tier.pages);
    tier.pages = NULL;
    close_files();
    return -1;
}

void flash_stop(void)
{
    if (!flash_running())
        return;
    pthread_mutex_lock(&tier.lock);
    tier.stop = true;
    pthread_cond_broadcast(&tier.passes_cond);
    pthread_mutex_unlock(&tier.lock);
    wake();
    pthread_join(tier.thread, NULL);
    __atomic_store_n(&tier.running, false, __ATOMIC_RELEASE);
    io_uring_queue_exit(&tier.ring);
    close(tier.wake_fd);
    tier.wake_fd = -1;
    free_buckets();
    pthread_mutex_lock(&tier.lock); /* flash_forget() may run in other threads */
    struct flash_page *pages = tier.pages;
    tier.pages = NULL;
    tier.npages = 0;
    pthread_mutex_unlock(&tier.lock);
    free(pages);
    close_files();
}

#else /* no liburing */

int flash_start(struct ext_settings *cfg, char *errbuf, size_t errlen)
{
    (void)cfg;
    snprintf(errbuf, errlen, "this build has no io_uring (liburing)");
    return -1;
}

void flash_stop(void) {}

void flash_write_now(void) {}

bool flash_room_wanted(size_t chunk_size)
{
    (void)chunk_size;
    return false;
}

void flash_room_mark(struct flash_room_mark *m)
{
    m->passes = m->moved = m->activity = 0;
}

bool flash_room_stalled(const struct flash_room_mark *m)
{
    (void)m;
    return true;
}

#endif

void flash_forget(const struct item_flash_loc *loc)
{
    pthread_mutex_lock(&tier.lock);
    struct flash_page *p = tier.pages && loc->page < tier.npages ? &tier.pages[loc->page] : NULL;
    if (p && p->state != PAGE_FREE && p->version == loc->version && p->live_objects > 0) {
        p->live_objects--;
        p->live_bytes -= loc->len <= p->live_bytes ? loc->len : p->live_bytes;
        if (p->live_objects == 0 && p->state == PAGE_FULL) {
            p->state = PAGE_FREE;
            p->version++;
            flash_add(&flash_counters.page_reclaims, 1);
        }
    }
    pthread_mutex_unlock(&tier.lock);
}

void flash_tune(const struct ext_settings *cfg)
{
    __atomic_store_n(&tier.cfg.item_size, cfg->item_size, __ATOMIC_RELAXED);
    __atomic_store_n(&tier.cfg.item_age, cfg->item_age, __ATOMIC_RELAXED);
    __atomic_store_n(&tier.cfg.low_ttl, cfg->low_ttl, __ATOMIC_RELAXED);
    __atomic_store_n(&tier.cfg.recache_rate, cfg->recache_rate, __ATOMIC_RELAXED);
    __atomic_store_n(&tier.cfg.compact_under, cfg->compact_under, __ATOMIC_RELAXED);
    __atomic_store_n(&tier.cfg.drop_under, cfg->drop_under, __ATOMIC_RELAXED);
    pthread_mutex_lock(&tier.lock);
    tier.cfg.max_frag = cfg->max_frag;
    tier.cfg.drop_unread = cfg->drop_unread;
    pthread_mutex_unlock(&tier.lock);
}

bool flash_header_class_short(size_t chunk_size)
{
    if (!flash_running() || chunk_size >= flash_tunable(&tier.cfg.item_size))
        return false;
    unsigned free_pages = 0;
    pthread_mutex_lock(&tier.lock);
    for (unsigned i = 0; i < tier.npages; i++)
        if (tier.pages[i].state == PAGE_FREE)
            free_pages++;
    pthread_mutex_unlock(&tier.lock);
    return free_pages > 1;
}

unsigned flash_recache_rate(void)
{
    return flash_tunable(&tier.cfg.recache_rate);
}
