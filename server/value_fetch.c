/*
 * value_fetch.c: attaching an item's value to a response, reading it from
 * flash first when the item is a flash header (see value_fetch.h).
 */
#include "value_fetch.h"

#include <stdlib.h>
#include <string.h>

#include "flash.h"
#include "flash_reader.h"
#include "log.h"
#include "thread.h"

struct value_fetch {
    struct flash_read rd; /* first: the flash callback gets this */
    struct conn *c;
    struct resp *r;
    item *header;
    item *fresh; /* unlinked item the value is read into, allocated up front */
    bool crlf;
    bool retried;
    size_t miss_len;
    char miss[RESP_HEAD_MAX];
};

static void send_miss(struct resp *r, const char *miss, size_t miss_len)
{
    memcpy(r->head, miss, miss_len);
    r->head_len = (uint16_t)miss_len;
    r->it = NULL;
}

/* memcached's ext_recache_rate: one in that many values read from flash
 * whose header was read twice lately goes back into RAM, in the header's
 * place (counted per worker thread, as memcached counts per connection). */
#define RECACHE_WITHIN 60 /* seconds: memcached's ITEM_UPDATE_INTERVAL */
static _Thread_local unsigned recache_counter;

static void maybe_recache(item *header, item *fresh)
{
    unsigned rate = flash_recache_rate();
    if (rate > 0 && item_flash_recache(header, fresh, RECACHE_WITHIN, &recache_counter, rate))
        flash_count(FC_RECACHE);
}

/* A read that found its page reused while compaction moved the record
 * (the header points elsewhere now) is made once more at the new place. */
static bool retry_moved(struct value_fetch *f)
{
    if (f->retried || f->rd.ok || f->rd.corrupt || resp_cancelled(f->r))
        return false;
    struct item_flash_loc now;
    item_flash_where(f->header, &now);
    if (now.page == f->rd.loc.page && now.version == f->rd.loc.version &&
        now.offset == f->rd.loc.offset)
        return false;
    f->retried = true;
    f->rd.loc = now;
    flash_reader_read(f->c->worker->flash_reader, &f->rd);
    return true;
}

/* On the connection's worker, from its loop (flash_reader.h), the record
 * checked (flash_read_finish). */
static void read_done(struct flash_read *rd)
{
    struct value_fetch *f = (struct value_fetch *)rd;
    if (retry_moved(f))
        return;
    if (resp_cancelled(f->r)) {
        /* counted by count_abort when the request failed */
    } else if (f->rd.ok) { /* the value was read into f->fresh */
        maybe_recache(f->header, f->fresh);
        resp_set_item(f->r, f->fresh, f->crlf);
        f->fresh = NULL;
    } else {
        if (f->rd.corrupt) {
            flash_count(FC_BADCRC);
            log_msg(LOG_WARN, "flash: record of key %.*s does not match; answered as a miss",
                    (int)f->rd.nkey, f->rd.key);
        }
        flash_count(FC_MISS);
        item_flash_drop(f->header, &f->rd.loc);
        send_miss(f->r, f->miss, f->miss_len);
    }
    if (f->fresh)
        item_release(f->fresh);
    flash_read_free(&f->rd);
    item_release(f->header);
    conn_resp_complete(f->c, f->r);
    free(f);
}

/* The request failed after this read was queued (memcached counts it then). */
static void count_abort(struct resp *r)
{
    (void)r;
    flash_count(FC_GET_ABORTED);
}

/* The worker's read ring, made at its first flash read. */
static struct flash_reader *reader_of(struct worker *w)
{
    if (!w->flash_reader) {
        w->flash_reader = flash_reader_new(w->base);
        if (w->flash_reader)
            w->flash_reader_free = flash_reader_free;
    }
    return w->flash_reader;
}

bool conn_resp_set_value(struct conn *c, struct resp *r, item *it, bool crlf, const char *miss,
                         size_t miss_len)
{
    if (!item_on_flash(it)) {
        resp_set_item(r, it, crlf);
        return true;
    }
    flash_count(FC_GET_EXTSTORE);
    if (miss_len > RESP_HEAD_MAX)
        miss_len = 0;
    struct flash_reader *rdr = reader_of(c->worker);
    struct value_fetch *f = rdr ? malloc(sizeof(*f)) : NULL;
    if (!f) {
        flash_count(FC_GET_ABORTED);
        send_miss(r, miss, miss_len);
        item_release(it);
        return true;
    }
    /* the memory for the value is taken now, as memcached does: when there
     * is none, the request fails instead of waiting for a read */
    enum alloc_result why;
    f->fresh = item_alloc(item_key(it), item_nkey(it), item_flags(it), item_exptime(it),
                          item_nbytes(it), &why);
    if (!f->fresh) {
        flash_count(FC_GET_OOM);
        send_miss(r, miss, miss_len);
        item_release(it);
        free(f);
        return false;
    }
    f->c = c;
    f->r = r;
    f->header = it;
    f->crlf = crlf;
    f->retried = false;
    f->miss_len = miss_len;
    memcpy(f->miss, miss, miss_len);
    item_flash_where(it, &f->rd.loc);
    f->rd.nkey = item_nkey(it);
    memcpy(f->rd.key, item_key(it), f->rd.nkey);
    f->rd.nbytes = item_nbytes(it);
    f->rd.done = read_done;
    struct iovec value[FLASH_READ_IOV];
    unsigned nseg = item_value_nseg(f->fresh);
    struct iovec *segs = nseg <= FLASH_READ_IOV ? value : malloc(nseg * sizeof(*segs));
    if (segs)
        for (unsigned i = 0; i < nseg; i++)
            segs[i] = item_value_seg(f->fresh, i);
    bool targeted = segs && flash_read_target(&f->rd, segs, nseg);
    if (segs != value)
        free(segs);
    if (!targeted) {
        flash_count(FC_GET_ABORTED);
        send_miss(r, miss, miss_len);
        item_release(f->fresh);
        item_release(it);
        free(f);
        return true;
    }
    r->on_cancel = count_abort;
    resp_park(c, r);
    flash_reader_read(rdr, &f->rd);
    return true;
}
