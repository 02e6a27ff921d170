/*
 * flash_compact.c: compaction of the flash tier's pages, memcached's
 * ext_compact_under / ext_max_frag / ext_drop_under / ext_drop_unread.
 *
 * Runs on the I/O thread after each writer pass. While no more than
 * compact_under pages are free, the oldest full page whose live bytes fall
 * below page_size * max_frag * (share of pages in use) is read back a
 * write buffer at a time through the ring, and the thread waits for
 * neither those reads nor the compact bucket's writes (the writer's
 * passes go on meanwhile: a burst of sets must not wait for compaction,
 * or it evicts values the writer has not moved yet); every record a live flash
 * header still points at is copied into the compact bucket's write buffer,
 * and once that buffer is written the header is pointed at the copy under
 * its key's lock (flash.c: settle), so a get or delete running meanwhile
 * sees either place, both valid until the page is freed. When no page is
 * that fragmented, drop_unread is on and no more than drop_under pages are
 * free, the oldest page is compacted anyway and values nobody read since
 * they reached COLD are dropped instead of rewritten. The page is freed at
 * the end; headers still pointing into it miss from then on.
 */
#include <stdlib.h>
#include <string.h>

#include "flash_internal.h"
#include "items.h"

#ifdef HAVE_LIBURING

/* Picks the page to compact, as memcached decides (tier.lock held). */
static bool pick_page(unsigned *page, uint32_t *version, bool *drop_unread)
{
    unsigned nfree = 0;
    for (unsigned i = 0; i < tier.npages; i++)
        if (tier.pages[i].state == PAGE_FREE)
            nfree++;
    if (nfree == tier.npages || nfree > flash_tunable(&tier.cfg.compact_under))
        return false;
    double rate = (1.0 - (double)nfree / tier.npages) * tier.cfg.max_frag;
    uint64_t frag_limit = (uint64_t)((double)tier.cfg.page_size * rate);
    unsigned low = tier.npages, oldest = tier.npages;
    for (unsigned i = 0; i < tier.npages; i++) {
        const struct flash_page *p = &tier.pages[i];
        if (p->state != PAGE_FULL || p->bucket == BUCKET_LOWTTL)
            continue; /* short-lived values empty their pages by themselves */
        if (oldest == tier.npages || p->seq < tier.pages[oldest].seq)
            oldest = i;
        if (p->live_bytes < frag_limit && (low == tier.npages || p->seq < tier.pages[low].seq))
            low = i;
    }
    if (low != tier.npages) {
        *page = low;
        *drop_unread = false;
    } else if (oldest != tier.npages && tier.cfg.drop_unread &&
               nfree <= flash_tunable(&tier.cfg.drop_under)) {
        *page = oldest;
        *drop_unread = true;
    } else {
        return false;
    }
    *version = tier.pages[*page].version;
    return true;
}

struct compact_tally {
    uint64_t lost, skipped;
};

enum rescued {
    RESCUED_ALL,     /* every whole record in the buffer */
    RESCUED_WAIT,    /* stopped before a record: the compact bucket's write first */
    RESCUED_NOT_REC, /* stopped where no record starts */
};

/* Handles the whole records in buf (len bytes read at page offset off)
 * from *at on, advancing *at past each. */
static enum rescued rescue_records(unsigned page, uint32_t version, bool drop_unread,
                                   const char *buf, size_t len, uint64_t off, size_t *at_io,
                                   struct compact_tally *t)
{
    size_t at = *at_io;
    while (at + RECORD_HEADER <= len) {
        const char *rec = buf + at;
        uint32_t magic, check, nbytes;
        memcpy(&magic, rec, 4);
        memcpy(&check, rec + 4, 4);
        memcpy(&nbytes, rec + 8, 4);
        size_t nkey = (unsigned char)rec[12];
        size_t rlen = flash_record_size(nkey, nbytes);
        if (magic != RECORD_MAGIC || nkey == 0 || rlen > tier.cfg.wbuf_size) {
            *at_io = at;
            return RESCUED_NOT_REC; /* the end of what was written, or damage */
        }
        if (at + rlen > len)
            break; /* continues in the next read */
        if (flash_fill_wait(BUCKET_COMPACT, rlen) != FILL_NONE) {
            flash_request_flush(BUCKET_COMPACT);
            *at_io = at;
            return RESCUED_WAIT;
        }
        struct item_flash_loc from = {.page = page,
                                      .version = version,
                                      .offset = off + at,
                                      .len = (uint32_t)rlen,
                                      .check = check};
        item *h = NULL;
        switch (item_flash_hold(rec + RECORD_HEADER, nkey, &from, drop_unread, &h)) {
        case FLASH_HOLD_GONE:
            break;
        case FLASH_HOLD_UNREAD:
            t->skipped++;
            break;
        case FLASH_HOLD_TAKEN:
            /* a damaged record is not carried over: its header misses */
            if (flash_record_check(rec, RECORD_HEADER + nkey + nbytes) != check ||
                !flash_append_rescue(h, rec, rlen, &from)) {
                item_release(h);
                t->lost++;
            }
            break;
        }
        at += rlen;
    }
    *at_io = at;
    return RESCUED_ALL;
}

/* The page being compacted, read one write buffer at a time. */
static struct compaction {
    bool active;
    unsigned page;
    uint32_t version;
    bool drop_unread;
    int fd;
    uint64_t base, fill, off; /* the page in its file, its bytes, handled so far */
    char *buf;
    bool reading;          /* a read of buf is in flight */
    bool read_failed;      /* ... and it failed */
    size_t want, got;      /* that read: its length, the bytes it brought */
    size_t at;             /* buf's records handled before this offset */
    bool ending, complete; /* waiting for the last rescues' write; the page is done */
    struct compact_tally t;
} cur;

static bool compact_begin(unsigned page, uint32_t version, bool drop_unread)
{
    cur.buf = malloc(tier.cfg.wbuf_size);
    if (!cur.buf)
        return false;
    pthread_mutex_lock(&tier.lock);
    tier.compacting = page;
    const struct flash_page *p = &tier.pages[page];
    cur.fd = p->fd;
    cur.base = p->file_off;
    cur.fill = p->fill;
    pthread_mutex_unlock(&tier.lock);
    cur.active = true;
    cur.page = page;
    cur.version = version;
    cur.drop_unread = drop_unread;
    cur.off = 0;
    cur.reading = cur.read_failed = cur.ending = false;
    cur.want = cur.got = cur.at = 0;
    cur.t = (struct compact_tally){0, 0};
    return true;
}

static void compact_end(bool complete)
{
    cur.ending = true;
    cur.complete = complete;
}

/* Once the last rescues' buffer is written (they settled), frees the page
 * when every record was looked at; false while the write is pending. */
static bool compact_finish(void)
{
    const struct wbucket *b = &tier.buckets[BUCKET_COMPACT];
    if (b->writing || b->wfill > 0) {
        flash_request_flush(BUCKET_COMPACT);
        return false;
    }
    bool complete = cur.complete;
    flash_add(&flash_counters.compact_lost, cur.t.lost);
    flash_add(&flash_counters.compact_skipped, cur.t.skipped);
    if (complete)
        flash_page_close(cur.page, cur.version);
    pthread_mutex_lock(&tier.lock);
    tier.compacting = tier.npages;
    pthread_mutex_unlock(&tier.lock);
    free(cur.buf);
    cur.buf = NULL;
    cur.active = false;
    return true;
}

void flash_compact_read_done(int res)
{
    if (res <= 0) {
        cur.reading = false;
        cur.read_failed = true;
        return;
    }
    cur.got += (size_t)res;
    if (cur.got < cur.want) /* the rest of a short read */
        flash_ring_read(cur.fd, cur.buf + cur.got, cur.want - cur.got,
                        cur.base + cur.off + cur.got);
    else
        cur.reading = false;
}

/* Asks for the next write buffer of the page, or handles the one read;
 * ends the compaction when the page is done (or was emptied meanwhile,
 * or a read failed). True when there is more to do at once. */
static bool compact_step(void)
{
    if (cur.reading)
        return false; /* its completion brings the next pass */
    pthread_mutex_lock(&tier.lock);
    bool same = tier.pages[cur.page].version == cur.version;
    pthread_mutex_unlock(&tier.lock);
    if (!same) { /* emptied by deletes meanwhile: nothing left to do */
        compact_end(false);
        return true;
    }
    if (cur.read_failed) {
        compact_end(false); /* read error: the page stays as it is */
        return true;
    }
    if (cur.want == 0) { /* nothing read yet at cur.off */
        if (cur.off >= cur.fill) {
            compact_end(true);
            return true;
        }
        size_t bufsize = tier.cfg.wbuf_size;
        cur.want = cur.fill - cur.off < bufsize ? (size_t)(cur.fill - cur.off) : bufsize;
        cur.got = cur.at = 0;
        cur.reading = true;
        flash_ring_read(cur.fd, cur.buf, cur.want, cur.base + cur.off);
        return false;
    }
    enum rescued r = rescue_records(cur.page, cur.version, cur.drop_unread, cur.buf, cur.want,
                                    cur.off, &cur.at, &cur.t);
    if (r == RESCUED_WAIT)
        return false;  /* the compact bucket's write completion brings the next pass */
    if (cur.at == 0) { /* the rest is no record: nothing more to rescue */
        compact_end(true);
        return true;
    }
    cur.off += cur.at;
    cur.want = cur.at = 0;
    if (r == RESCUED_NOT_REC)
        compact_end(true);
    return true;
}

bool flash_compact_pass(void)
{
    if (!cur.active) {
        unsigned page;
        uint32_t version;
        bool drop_unread;
        pthread_mutex_lock(&tier.lock);
        bool due = pick_page(&page, &version, &drop_unread);
        pthread_mutex_unlock(&tier.lock);
        if (!due || !compact_begin(page, version, drop_unread))
            return false;
    }
    if (cur.ending)
        return compact_finish(); /* the next page at once */
    return compact_step();
}

static bool read_settled(const void *arg)
{
    (void)arg;
    return !cur.reading;
}

void flash_compact_abandon(void)
{
    if (!cur.active)
        return;
    flash_ring_wait_for(read_settled, NULL); /* the kernel writes into buf until then */
    pthread_mutex_lock(&tier.lock);
    tier.compacting = tier.npages;
    pthread_mutex_unlock(&tier.lock);
    free(cur.buf);
    cur.buf = NULL;
    cur.active = false;
}

#endif
