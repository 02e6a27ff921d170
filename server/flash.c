/*
 * flash.c: the flash tier's store and its I/O thread. Owns the ext_path
 * files and their pages, the write buffer filled from COLD tails, the
 * io_uring ring all flash I/O goes through, page reclamation (the oldest
 * page is dropped when none is free) and the extstore counters.
 *
 * A record on flash: magic (4 bytes), check (4), value length (4), key
 * length (1), 3 bytes of padding, the key, the value, padded to 8 bytes.
 * The check is the engine's key hash over everything after itself, and is
 * also kept in the item's header in RAM, so a read is served only when the
 * record matches the key, the length and the check the header remembers.
 */
#include "flash.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <unistd.h>

#include "assoc.h"
#include "clock.h"
#include "config.h"
#include "slabs.h"

#ifdef HAVE_LIBURING
#include <liburing.h>
#endif

#define RECORD_MAGIC 0x4652434dU /* "MCRF" */
#define RECORD_HEADER 16
#define SELECT_BATCH 64
#define WRITER_INTERVAL_MS 50

enum page_state { PAGE_FREE, PAGE_OPEN, PAGE_FULL };

struct flash_page {
    int fd;
    uint64_t file_off;
    uint32_t version;
    enum page_state state;
    uint64_t fill;                     /* bytes written */
    uint64_t objects;                  /* records written */
    uint64_t live_objects, live_bytes; /* records flash headers still point at */
    uint64_t seq;                      /* order in which pages were opened */
};

/* An item whose value sits in the write buffer until the buffer is written. */
struct pending {
    item *it;
    uint64_t cas;
    struct item_flash_loc loc;
};

static const char *const counter_names[FC_COUNT] = {
    "get_extstore",          "get_aborted_extstore", "get_oom_extstore",
    "recache_from_extstore", "miss_from_extstore",   "badcrc_from_extstore",
};

static struct {
    uint64_t gets[FC_COUNT];
    uint64_t page_allocs, page_evictions, page_reclaims;
    uint64_t objects_evicted, objects_read, objects_written;
    uint64_t bytes_evicted, bytes_written, bytes_read;
    uint64_t io_queue;
} counters;

static struct {
    bool running;
    struct ext_settings cfg;
    int fds[EXT_PATHS_MAX];
    unsigned nfiles;
    struct flash_page *pages;
    unsigned npages;
    unsigned open_page; /* npages: none */
    uint64_t next_seq;
    char *wbuf;
    size_t wfill;
    struct pending *pend;
    size_t npend, pend_cap;
    pthread_t thread;
    pthread_mutex_t lock; /* the read queue, requests, the page table for stats */
    pthread_cond_t passes_cond;
    struct flash_read *rq_head, *rq_tail;
    bool stop;
    uint64_t pass_requests, passes_done;
    int wake_fd;
#ifdef HAVE_LIBURING
    struct io_uring ring;
#endif
    unsigned inflight;
} fl = {.lock = PTHREAD_MUTEX_INITIALIZER, .passes_cond = PTHREAD_COND_INITIALIZER, .wake_fd = -1};

static void add(uint64_t *c, uint64_t n)
{
    __atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

static uint64_t get(const uint64_t *c)
{
    return __atomic_load_n(c, __ATOMIC_RELAXED);
}

void flash_count(enum flash_counter which)
{
    add(&counters.gets[which], 1);
}

bool flash_running(void)
{
    return __atomic_load_n(&fl.running, __ATOMIC_ACQUIRE);
}

void flash_read_free(struct flash_read *rd)
{
    free(rd->record);
    rd->record = NULL;
    rd->value = NULL;
}

static uint32_t record_check(const char *record, size_t len)
{
    return (uint32_t)assoc_hash(record + 8, len - 8);
}

static size_t record_size(size_t nkey, size_t nbytes)
{
    return (RECORD_HEADER + nkey + nbytes + 7) & ~(size_t)7;
}

static void wake(void)
{
    uint64_t one = 1;
    if (fl.wake_fd >= 0 && write(fl.wake_fd, &one, sizeof(one)) < 0) {
        /* the counter is saturated: the thread is awake anyway */
    }
}

void flash_read(struct flash_read *rd)
{
    rd->record = NULL;
    rd->value = NULL;
    rd->ok = rd->corrupt = false;
    rd->next = NULL;
    pthread_mutex_lock(&fl.lock);
    if (!fl.running || fl.stop) {
        pthread_mutex_unlock(&fl.lock);
        rd->done(rd);
        return;
    }
    if (fl.rq_tail)
        fl.rq_tail->next = rd;
    else
        fl.rq_head = rd;
    fl.rq_tail = rd;
    add(&counters.io_queue, 1);
    pthread_mutex_unlock(&fl.lock);
    wake();
}

#ifdef HAVE_LIBURING

/* user_data of the ring's non-read completions */
static char wake_token, write_token;

static void arm_wake_poll(void)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&fl.ring);
    if (!sqe) {
        io_uring_submit(&fl.ring);
        sqe = io_uring_get_sqe(&fl.ring);
    }
    io_uring_prep_poll_add(sqe, fl.wake_fd, POLLIN);
    io_uring_sqe_set_data(sqe, &wake_token);
    io_uring_submit(&fl.ring);
}

static struct io_uring_sqe *next_sqe(void)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&fl.ring);
    if (!sqe) {
        io_uring_submit(&fl.ring);
        sqe = io_uring_get_sqe(&fl.ring);
    }
    return sqe;
}

static void finish_read(struct flash_read *rd, int res)
{
    struct flash_page *p = &fl.pages[rd->loc.page];
    if (res == (int)rd->loc.len && p->version == rd->loc.version) {
        const char *rec = rd->record;
        uint32_t magic, check, nbytes;
        memcpy(&magic, rec, 4);
        memcpy(&check, rec + 4, 4);
        memcpy(&nbytes, rec + 8, 4);
        size_t nkey = (unsigned char)rec[12];
        if (magic == RECORD_MAGIC && check == rd->loc.check && nbytes == rd->nbytes &&
            nkey == rd->nkey && record_size(nkey, nbytes) == rd->loc.len &&
            memcmp(rec + RECORD_HEADER, rd->key, nkey) == 0 &&
            record_check(rec, RECORD_HEADER + nkey + nbytes) == check) {
            rd->ok = true;
            rd->value = rec + RECORD_HEADER + nkey;
            add(&counters.objects_read, 1);
            add(&counters.bytes_read, rd->loc.len);
        } else {
            rd->corrupt = true;
        }
    }
    add(&counters.io_queue, (uint64_t)-1);
    rd->done(rd);
}

static void submit_reads(struct flash_read *list)
{
    while (list) {
        struct flash_read *rd = list;
        list = rd->next;
        struct flash_page *p = rd->loc.page < fl.npages ? &fl.pages[rd->loc.page] : NULL;
        if (!p || p->state == PAGE_FREE || p->version != rd->loc.version ||
            rd->loc.offset + rd->loc.len > p->fill || !(rd->record = malloc(rd->loc.len))) {
            add(&counters.io_queue, (uint64_t)-1);
            rd->done(rd);
            continue;
        }
        struct io_uring_sqe *sqe = next_sqe();
        io_uring_prep_read(sqe, p->fd, rd->record, rd->loc.len, p->file_off + rd->loc.offset);
        io_uring_sqe_set_data(sqe, rd);
        fl.inflight++;
    }
    io_uring_submit(&fl.ring);
}

/* Handles one completion; returns the result when it was the write's. */
static bool handle_cqe(struct io_uring_cqe *cqe, int *write_res)
{
    void *data = io_uring_cqe_get_data(cqe);
    int res = cqe->res;
    io_uring_cqe_seen(&fl.ring, cqe);
    if (data == &wake_token) {
        uint64_t n;
        if (read(fl.wake_fd, &n, sizeof(n)) < 0) {
            /* nothing was pending */
        }
        arm_wake_poll();
        return false;
    }
    if (data == &write_token) {
        *write_res = res;
        return true;
    }
    fl.inflight--;
    finish_read(data, res);
    return false;
}

static void take_reads(void)
{
    pthread_mutex_lock(&fl.lock);
    struct flash_read *list = fl.rq_head;
    fl.rq_head = fl.rq_tail = NULL;
    pthread_mutex_unlock(&fl.lock);
    if (list)
        submit_reads(list);
}

/* Writes len bytes at off of fd through the ring, serving reads meanwhile. */
static bool ring_write(int fd, const char *buf, size_t len, uint64_t off)
{
    while (len > 0) {
        struct io_uring_sqe *sqe = next_sqe();
        io_uring_prep_write(sqe, fd, buf, (unsigned)len, off);
        io_uring_sqe_set_data(sqe, &write_token);
        io_uring_submit(&fl.ring);
        int res = 0;
        bool got = false;
        while (!got) {
            struct io_uring_cqe *cqe;
            if (io_uring_wait_cqe(&fl.ring, &cqe) != 0)
                continue;
            got = handle_cqe(cqe, &res);
            take_reads();
        }
        if (res <= 0)
            return false;
        buf += res;
        len -= (size_t)res;
        off += (uint64_t)res;
    }
    return true;
}

static void release_pending(void)
{
    for (size_t i = fl.npend; i-- > 0;)
        item_release(fl.pend[i].it);
    fl.npend = 0;
    fl.wfill = 0;
}

/* Writes the buffer to the open page and swaps its items to headers. */
static void flush_wbuf(void)
{
    if (fl.wfill == 0)
        return;
    struct flash_page *p = &fl.pages[fl.open_page];
    if (!ring_write(p->fd, fl.wbuf, fl.wfill, p->file_off + p->fill)) {
        fprintf(stderr, "flash: write to page %u failed; %zu values stay in RAM\n", fl.open_page,
                fl.npend);
        release_pending();
        return;
    }
    pthread_mutex_lock(&fl.lock);
    p->fill += fl.wfill;
    p->objects += fl.npend;
    pthread_mutex_unlock(&fl.lock);
    add(&counters.bytes_written, fl.wfill);
    for (size_t i = 0; i < fl.npend; i++) {
        /* counted live first: the header may be freed as soon as it is linked */
        pthread_mutex_lock(&fl.lock);
        p->live_objects++;
        p->live_bytes += fl.pend[i].loc.len;
        pthread_mutex_unlock(&fl.lock);
        if (item_move_to_flash(fl.pend[i].it, fl.pend[i].cas, &fl.pend[i].loc))
            add(&counters.objects_written, 1);
        else
            flash_forget(&fl.pend[i].loc);
    }
    release_pending();
}

/* Opens a page for writing: a free one, else the oldest is dropped. */
static void open_next_page(void)
{
    pthread_mutex_lock(&fl.lock);
    if (fl.open_page < fl.npages)
        fl.pages[fl.open_page].state = PAGE_FULL;
    unsigned pick = fl.npages;
    for (unsigned i = 0; i < fl.npages && pick == fl.npages; i++)
        if (fl.pages[i].state == PAGE_FREE)
            pick = i;
    if (pick == fl.npages) {
        for (unsigned i = 0; i < fl.npages; i++)
            if (pick == fl.npages || fl.pages[i].seq < fl.pages[pick].seq)
                pick = i;
        struct flash_page *old = &fl.pages[pick];
        add(&counters.page_evictions, 1);
        add(&counters.objects_evicted, old->objects);
        add(&counters.bytes_evicted, old->fill);
    }
    struct flash_page *p = &fl.pages[pick];
    p->version++; /* headers pointing at the old contents now miss */
    p->state = PAGE_OPEN;
    p->fill = 0;
    p->objects = 0;
    p->live_objects = p->live_bytes = 0;
    p->seq = ++fl.next_seq;
    fl.open_page = pick;
    pthread_mutex_unlock(&fl.lock);
    add(&counters.page_allocs, 1);
}

static bool memory_full(void)
{
    struct slabs_global_stats g;
    slabs_global_stats(&g);
    size_t reserve = (size_t)((double)g.mem_limit * fl.cfg.automove_freeratio);
    return g.pool_pages == 0 && g.total_malloced + reserve >= g.mem_limit;
}

static unsigned tunable(const unsigned *v)
{
    return __atomic_load_n(v, __ATOMIC_RELAXED);
}

static bool eligible(const item *it, bool full, rel_time_t now)
{
    if (item_on_flash(it) || item_nbytes(it) < tunable(&fl.cfg.item_size))
        return false;
    rel_time_t exp = item_exptime(it);
    if (exp != 0 && (exp <= now || exp - now <= tunable(&fl.cfg.low_ttl)))
        return false;
    rel_time_t last = item_last_access(it);
    unsigned age = tunable(&fl.cfg.item_age);
    bool old = age != UINT32_MAX && now >= last && now - last >= age;
    return full || old;
}

/* Copies it's value into the buffer (flushing and changing pages first as
 * needed); keeps the caller's reference until the buffer is written. */
static void append_record(item *it)
{
    size_t nkey = item_nkey(it), nbytes = item_nbytes(it);
    size_t len = record_size(nkey, nbytes);
    if (len > fl.cfg.wbuf_size) {
        item_release(it);
        return;
    }
    if (fl.wfill + len > fl.cfg.wbuf_size)
        flush_wbuf();
    if (fl.open_page == fl.npages ||
        fl.pages[fl.open_page].fill + fl.wfill + len > fl.cfg.page_size) {
        flush_wbuf();
        open_next_page();
    }
    if (fl.npend == fl.pend_cap) {
        size_t cap = fl.pend_cap ? fl.pend_cap * 2 : 256;
        struct pending *np = realloc(fl.pend, cap * sizeof(*np));
        if (!np) {
            item_release(it);
            return;
        }
        fl.pend = np;
        fl.pend_cap = cap;
    }
    char *rec = fl.wbuf + fl.wfill;
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
    uint32_t check = record_check(rec, RECORD_HEADER + nkey + nbytes);
    memcpy(rec + 4, &check, 4);
    struct pending *pd = &fl.pend[fl.npend++];
    pd->it = it;
    pd->cas = item_unique(it);
    pd->loc.page = fl.open_page;
    pd->loc.version = fl.pages[fl.open_page].version;
    pd->loc.offset = fl.pages[fl.open_page].fill + fl.wfill;
    pd->loc.len = (uint32_t)len;
    pd->loc.check = check;
    fl.wfill += len;
}

/* One pass over every class's COLD tail; true when it wrote a full batch
 * somewhere (there may be more to write). */
static bool writer_pass(void)
{
    bool full = memory_full();
    if (!full && tunable(&fl.cfg.item_age) == UINT32_MAX)
        return false;
    rel_time_t now = clock_now();
    bool more = false;
    unsigned largest = slabs_largest_class();
    for (unsigned cls = 1; cls <= largest; cls++) {
        item *sel[SELECT_BATCH];
        unsigned n = storage_cold_select(cls, SELECT_BATCH, sel);
        unsigned taken = 0;
        for (unsigned i = 0; i < n; i++) {
            if (eligible(sel[i], full, now)) {
                append_record(sel[i]);
                taken++;
            } else {
                item_release(sel[i]);
            }
        }
        if (taken == SELECT_BATCH)
            more = true;
    }
    flush_wbuf();
    return more;
}

static void *io_thread(void *arg)
{
    (void)arg;
    arm_wake_poll();
    bool more = false;
    for (;;) {
        pthread_mutex_lock(&fl.lock);
        bool stop = fl.stop;
        uint64_t requests = fl.pass_requests;
        pthread_mutex_unlock(&fl.lock);
        if (stop && fl.inflight == 0)
            break;
        take_reads();
        if (!stop && (more || requests != fl.passes_done)) {
            more = writer_pass();
            pthread_mutex_lock(&fl.lock);
            fl.passes_done = requests;
            pthread_cond_broadcast(&fl.passes_cond);
            pthread_mutex_unlock(&fl.lock);
            if (more)
                continue;
        }
        struct __kernel_timespec ts = {0, WRITER_INTERVAL_MS * 1000000L};
        struct io_uring_cqe *cqe;
        int rc = io_uring_wait_cqe_timeout(&fl.ring, &cqe, &ts);
        if (rc == -ETIME) {
            more = true; /* time for a writer pass */
            continue;
        }
        int ignored;
        while (rc == 0) {
            handle_cqe(cqe, &ignored);
            rc = io_uring_peek_cqe(&fl.ring, &cqe);
        }
    }
    return NULL;
}

void flash_write_now(void)
{
    if (!flash_running())
        return;
    pthread_mutex_lock(&fl.lock);
    uint64_t want = ++fl.pass_requests;
    pthread_mutex_unlock(&fl.lock);
    wake();
    pthread_mutex_lock(&fl.lock);
    while (fl.passes_done < want && !fl.stop)
        pthread_cond_wait(&fl.passes_cond, &fl.lock);
    pthread_mutex_unlock(&fl.lock);
}

static void close_files(void)
{
    for (unsigned i = fl.nfiles; i-- > 0;)
        close(fl.fds[i]);
    fl.nfiles = 0;
}

int flash_start(const struct ext_settings *cfg, char *errbuf, size_t errlen)
{
    fl.cfg = *cfg;
    uint64_t total_pages = 0;
    for (unsigned i = 0; i < cfg->npaths; i++) {
        int fd = open(cfg->paths[i].path, O_RDWR | O_CREAT, 0600);
        if (fd < 0) {
            snprintf(errbuf, errlen, "failed to open file %s: %s", cfg->paths[i].path,
                     strerror(errno));
            close_files();
            return -1;
        }
        fl.fds[fl.nfiles++] = fd;
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) { /* another server uses it */
            snprintf(errbuf, errlen, "failed to open file\nextstore open: %s", strerror(errno));
            close_files();
            return -1;
        }
        total_pages += cfg->paths[i].size / cfg->page_size;
    }
    if (total_pages == 0)
        total_pages = 1; /* memcached keeps one page even when the file is smaller */
    fl.pages = calloc(total_pages, sizeof(*fl.pages));
    fl.wbuf = malloc(cfg->wbuf_size);
    if (!fl.pages || !fl.wbuf) {
        snprintf(errbuf, errlen, "out of memory for %llu pages", (unsigned long long)total_pages);
        goto fail_mem;
    }
    unsigned n = 0;
    for (unsigned i = 0; i < cfg->npaths; i++) {
        uint64_t per = cfg->paths[i].size / cfg->page_size;
        if (per == 0 && n == 0 && i + 1 == cfg->npaths)
            per = 1;
        for (uint64_t k = 0; k < per; k++, n++) {
            fl.pages[n].fd = fl.fds[i];
            fl.pages[n].file_off = k * cfg->page_size;
        }
    }
    fl.npages = n;
    fl.open_page = n;
    fl.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fl.wake_fd < 0) {
        snprintf(errbuf, errlen, "eventfd: %s", strerror(errno));
        goto fail_mem;
    }
    int rc = io_uring_queue_init(256, &fl.ring, 0);
    if (rc < 0) {
        snprintf(errbuf, errlen, "io_uring: %s", strerror(-rc));
        goto fail_fd;
    }
    slabs_prefill_pool(); /* as memcached with extstore */
    fl.stop = false;
    __atomic_store_n(&fl.running, true, __ATOMIC_RELEASE);
    if (pthread_create(&fl.thread, NULL, io_thread, NULL) != 0) {
        __atomic_store_n(&fl.running, false, __ATOMIC_RELEASE);
        snprintf(errbuf, errlen, "cannot start the I/O thread");
        goto fail_ring;
    }
    return 0;
fail_ring:
    io_uring_queue_exit(&fl.ring);
fail_fd:
    close(fl.wake_fd);
    fl.wake_fd = -1;
fail_mem:
    free(fl.wbuf);
    free(fl.pages);
    fl.wbuf = NULL;
    fl.pages = NULL;
    close_files();
    return -1;
}

void flash_stop(void)
{
    if (!flash_running())
        return;
    pthread_mutex_lock(&fl.lock);
    fl.stop = true;
    pthread_cond_broadcast(&fl.passes_cond);
    pthread_mutex_unlock(&fl.lock);
    wake();
    pthread_join(fl.thread, NULL);
    __atomic_store_n(&fl.running, false, __ATOMIC_RELEASE);
    /* reads queued after the thread's last look fail */
    pthread_mutex_lock(&fl.lock);
    struct flash_read *list = fl.rq_head;
    fl.rq_head = fl.rq_tail = NULL;
    pthread_mutex_unlock(&fl.lock);
    while (list) {
        struct flash_read *rd = list;
        list = rd->next;
        rd->done(rd);
    }
    release_pending();
    free(fl.pend);
    fl.pend = NULL;
    fl.pend_cap = 0;
    io_uring_queue_exit(&fl.ring);
    close(fl.wake_fd);
    fl.wake_fd = -1;
    free(fl.wbuf);
    fl.wbuf = NULL;
    pthread_mutex_lock(&fl.lock); /* flash_forget() may run in other threads */
    struct flash_page *pages = fl.pages;
    fl.pages = NULL;
    fl.npages = 0;
    pthread_mutex_unlock(&fl.lock);
    free(pages);
    close_files();
}

#else /* no liburing */

int flash_start(const struct ext_settings *cfg, char *errbuf, size_t errlen)
{
    (void)cfg;
    snprintf(errbuf, errlen, "this build has no io_uring (liburing)");
    return -1;
}

void flash_stop(void) {}

void flash_write_now(void) {}

#endif

void flash_forget(const struct item_flash_loc *loc)
{
    pthread_mutex_lock(&fl.lock);
    struct flash_page *p = fl.pages && loc->page < fl.npages ? &fl.pages[loc->page] : NULL;
    if (p && p->state != PAGE_FREE && p->version == loc->version && p->live_objects > 0) {
        p->live_objects--;
        p->live_bytes -= loc->len <= p->live_bytes ? loc->len : p->live_bytes;
        if (p->live_objects == 0 && p->state == PAGE_FULL) {
            p->state = PAGE_FREE;
            p->version++;
            add(&counters.page_reclaims, 1);
        }
    }
    pthread_mutex_unlock(&fl.lock);
}

void flash_tune(const struct ext_settings *cfg)
{
    __atomic_store_n(&fl.cfg.item_size, cfg->item_size, __ATOMIC_RELAXED);
    __atomic_store_n(&fl.cfg.item_age, cfg->item_age, __ATOMIC_RELAXED);
    __atomic_store_n(&fl.cfg.low_ttl, cfg->low_ttl, __ATOMIC_RELAXED);
}

/* ---- stats ----------------------------------------------------------------- */
static void emit_u64(flash_emit_fn emit, void *ctx, const char *name, uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
    emit(ctx, name, buf);
}

void flash_stats_gets(flash_emit_fn emit, void *ctx)
{
    if (!flash_running()) /* memcached prints them only with ext_path */
        return;
    for (int i = 0; i < FC_COUNT; i++)
        emit_u64(emit, ctx, counter_names[i], get(&counters.gets[i]));
}

void flash_stats_store(flash_emit_fn emit, void *ctx)
{
    if (!flash_running())
        return;
    uint64_t free_pages = 0, used_pages = 0, objects = 0, bytes = 0;
    pthread_mutex_lock(&fl.lock);
    for (unsigned i = 0; i < fl.npages; i++) {
        if (fl.pages[i].state == PAGE_FREE) {
            free_pages++;
        } else {
            used_pages++;
            objects += fl.pages[i].live_objects;
            bytes += fl.pages[i].live_bytes;
        }
    }
    uint64_t limit = (uint64_t)fl.npages * fl.cfg.page_size;
    pthread_mutex_unlock(&fl.lock);
    emit_u64(emit, ctx, "extstore_compact_lost", 0);
    emit_u64(emit, ctx, "extstore_compact_rescues", 0);
    emit_u64(emit, ctx, "extstore_compact_skipped", 0);
    emit_u64(emit, ctx, "extstore_page_allocs", get(&counters.page_allocs));
    emit_u64(emit, ctx, "extstore_page_evictions", get(&counters.page_evictions));
    emit_u64(emit, ctx, "extstore_page_reclaims", get(&counters.page_reclaims));
    emit_u64(emit, ctx, "extstore_pages_free", free_pages);
    emit_u64(emit, ctx, "extstore_pages_used", used_pages);
    emit_u64(emit, ctx, "extstore_objects_evicted", get(&counters.objects_evicted));
    emit_u64(emit, ctx, "extstore_objects_read", get(&counters.objects_read));
    emit_u64(emit, ctx, "extstore_objects_written", get(&counters.objects_written));
    emit_u64(emit, ctx, "extstore_objects_used", objects);
    emit_u64(emit, ctx, "extstore_bytes_evicted", get(&counters.bytes_evicted));
    emit_u64(emit, ctx, "extstore_bytes_written", get(&counters.bytes_written));
    emit_u64(emit, ctx, "extstore_bytes_read", get(&counters.bytes_read));
    emit_u64(emit, ctx, "extstore_bytes_used", bytes);
    emit_u64(emit, ctx, "extstore_bytes_fragmented", used_pages * fl.cfg.page_size - bytes);
    emit_u64(emit, ctx, "extstore_limit_maxbytes", limit);
    emit_u64(emit, ctx, "extstore_io_queue", get(&counters.io_queue));
}

void flash_stats_pages(flash_emit_fn emit, void *ctx)
{
    if (!flash_running())
        return;
    char name[40];
    pthread_mutex_lock(&fl.lock);
    for (unsigned i = 0; i < fl.npages; i++) {
        const struct flash_page *p = &fl.pages[i];
        bool used = p->state != PAGE_FREE;
        snprintf(name, sizeof(name), "%u:version", i);
        emit_u64(emit, ctx, name, p->version);
        snprintf(name, sizeof(name), "%u:bytes", i);
        emit_u64(emit, ctx, name, used ? p->fill : 0);
        snprintf(name, sizeof(name), "%u:bucket", i);
        emit_u64(emit, ctx, name, 0);
        snprintf(name, sizeof(name), "%u:free_bucket", i);
        emit_u64(emit, ctx, name, 0);
    }
    pthread_mutex_unlock(&fl.lock);
}
