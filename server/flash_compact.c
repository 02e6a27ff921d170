/*
 * flash_compact.c: compaction of the flash tier's pages, memcached's
 * ext_compact_under / ext_max_frag / ext_drop_under / ext_drop_unread.
 *
 * Runs on the I/O thread after each writer pass. While no more than
 * compact_under pages are free, the oldest full page whose live bytes fall
 * below page_size * max_frag * (share of pages in use) is read back, a
 * write buffer per pass (so the writer's passes go on between the reads of
 * a page: a burst of sets must not wait for a whole page's compaction),
 * through the ring; every record a live flash
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

/* Handles the whole records in buf (len bytes read at page offset off);
 * returns how many bytes they took, or 0 when buf does not start with a
 * record (the rest of the page is not read). */
static size_t rescue_records(unsigned page, uint32_t version, bool drop_unread, const char *buf,
                             size_t len, uint64_t off, struct compact_tally *t)
{
    size_t at = 0;
    while (at + RECORD_HEADER <= len) {
        const char *rec = buf + at;
        uint32_t magic, check, nbytes;
        memcpy(&magic, rec, 4);
        memcpy(&check, rec + 4, 4);
        memcpy(&nbytes, rec + 8, 4);
        size_t nkey = (unsigned char)rec[12];
        size_t rlen = flash_record_size(nkey, nbytes);
        if (magic != RECORD_MAGIC || nkey == 0 || rlen > tier.cfg.wbuf_size)
            return at; /* not a record: the end of what was written, or damage */
        if (at + rlen > len)
            break; /* continues in the next read */
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
    return at;
}

/* The page being compacted, read one write buffer per step. */
static struct compaction {
    bool active;
    unsigned page;
    uint32_t version;
    bool drop_unread;
    int fd;
    uint64_t base, fill, off; /* the page in its file, its bytes, read so far */
    char *buf;
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
    cur.t = (struct compact_tally){0, 0};
    return true;
}

/* Settles the last rescues and, when every record was looked at, frees
 * the page. */
static void compact_end(bool complete)
{
    flash_flush_bucket(BUCKET_COMPACT);
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
}

/* Reads and handles one write buffer of the page; ends the compaction
 * when the page is done (or was emptied meanwhile, or a read failed). */
static void compact_step(void)
{
    pthread_mutex_lock(&tier.lock);
    bool same = tier.pages[cur.page].version == cur.version;
    pthread_mutex_unlock(&tier.lock);
    if (!same) { /* emptied by deletes meanwhile: nothing left to do */
        compact_end(false);
        return;
    }
    if (cur.off >= cur.fill) {
        compact_end(true);
        return;
    }
    size_t bufsize = tier.cfg.wbuf_size;
    size_t want = cur.fill - cur.off < bufsize ? (size_t)(cur.fill - cur.off) : bufsize;
    if (!flash_ring_io(false, cur.fd, cur.buf, want, cur.base + cur.off)) {
        compact_end(false); /* read error: the page stays as it is */
        return;
    }
    size_t used =
        rescue_records(cur.page, cur.version, cur.drop_unread, cur.buf, want, cur.off, &cur.t);
    if (used == 0) { /* the rest is no record: nothing more to rescue */
        compact_end(true);
        return;
    }
    cur.off += used;
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
    compact_step();
    return cur.active;
}

void flash_compact_abandon(void)
{
    if (!cur.active)
        return;
    pthread_mutex_lock(&tier.lock);
    tier.compacting = tier.npages;
    pthread_mutex_unlock(&tier.lock);
    free(cur.buf);
    cur.buf = NULL;
    cur.active = false;
}

#endif
