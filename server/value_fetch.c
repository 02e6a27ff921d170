/*
 * value_fetch.c: attaching an item's value to a response, reading it from
 * flash first when the item is a flash header (see value_fetch.h).
 */
#include "value_fetch.h"

#include <stdlib.h>
#include <string.h>

#include "flash.h"
#include "log.h"
#include "thread.h"

struct value_fetch {
    struct flash_read rd; /* first: the flash callback gets this */
    struct conn *c;
    struct resp *r;
    item *header;
    bool crlf;
    size_t miss_len;
    char miss[RESP_HEAD_MAX];
};

static void send_miss(struct resp *r, const char *miss, size_t miss_len)
{
    memcpy(r->head, miss, miss_len);
    r->head_len = (uint16_t)miss_len;
    r->it = NULL;
}

/* A fresh unlinked item holding the value read. */
static item *value_item(const struct value_fetch *f)
{
    enum alloc_result why;
    item *it = item_alloc(f->rd.key, f->rd.nkey, item_flags(f->header), item_exptime(f->header),
                          f->rd.nbytes, &why);
    if (!it)
        return NULL;
    size_t at = 0;
    for (unsigned i = 0; i < item_value_nseg(it); i++) {
        struct iovec seg = item_value_seg(it, i);
        memcpy(seg.iov_base, f->rd.value + at, seg.iov_len);
        at += seg.iov_len;
    }
    return it;
}

static void complete_on_worker(struct worker *w, void *arg)
{
    (void)w;
    struct value_fetch *f = arg;
    item *it = NULL;
    if (f->rd.ok) {
        it = value_item(f);
        if (!it)
            flash_count(FC_GET_OOM);
    } else {
        if (f->rd.corrupt) {
            flash_count(FC_BADCRC);
            log_msg(LOG_WARN, "flash: record of key %.*s does not match; answered as a miss",
                    (int)f->rd.nkey, f->rd.key);
        }
        flash_count(FC_MISS);
    }
    if (it)
        resp_set_item(f->r, it, f->crlf);
    else
        send_miss(f->r, f->miss, f->miss_len);
    flash_read_free(&f->rd);
    item_release(f->header);
    conn_resp_complete(f->c, f->r);
    free(f);
}

/* On the I/O thread (or the caller's, when the tier is stopped). */
static void read_done(struct flash_read *rd)
{
    struct value_fetch *f = (struct value_fetch *)rd;
    if (worker_call(f->c->worker, complete_on_worker, f) != 0)
        log_msg(LOG_WARN, "flash: cannot hand a read back to its worker");
}

void conn_resp_set_value(struct conn *c, struct resp *r, item *it, bool crlf, const char *miss,
                         size_t miss_len)
{
    if (!item_on_flash(it)) {
        resp_set_item(r, it, crlf);
        return;
    }
    flash_count(FC_GET_EXTSTORE);
    if (miss_len > RESP_HEAD_MAX)
        miss_len = 0;
    struct value_fetch *f = malloc(sizeof(*f));
    if (!f) {
        flash_count(FC_GET_ABORTED);
        send_miss(r, miss, miss_len);
        item_release(it);
        return;
    }
    f->c = c;
    f->r = r;
    f->header = it;
    f->crlf = crlf;
    f->miss_len = miss_len;
    memcpy(f->miss, miss, miss_len);
    item_flash_where(it, &f->rd.loc);
    f->rd.nkey = item_nkey(it);
    memcpy(f->rd.key, item_key(it), f->rd.nkey);
    f->rd.nbytes = item_nbytes(it);
    f->rd.done = read_done;
    resp_park(c, r);
    flash_read(&f->rd);
}
