/*
 * flash_record.c: a value's record on flash, from the reading side: its
 * layout and check, where a record is (its page in a file, or still in
 * a write buffer of flash.c's writer) and whether what a read returned is
 * the record the item's header expects. The reads themselves go through
 * the workers' rings (flash_reader.c).
 *
 * A record on flash: magic (4 bytes), check (4), value length (4), key
 * length (1), 3 bytes of padding, the key, the value, padded to 8 bytes.
 * The check (flash_record_check) covers everything after itself and is
 * also kept in the item's header in RAM, so a read is served only when the
 * record matches the key, the length and the check the header remembers.
 */
#include "flash.h"
#include "flash_internal.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The record check: four independent lanes of one multiply per 8-byte
 * word, so a worker checks a 128 KiB value at several bytes per cycle
 * (the key hash, assoc_hash, is one serial chain of three multiplies per
 * word: it measured 4.5 times slower on 128 KiB records). A changed word
 * always changes its lane (each step is a bijection of the lane); the
 * lanes and the length meet in a final avalanche. */
#define CHECK_M1 0x9E3779B185EBCA87ULL
#define CHECK_M2 0xC2B2AE3D27D4EB4FULL

static inline uint64_t check_rotl(uint64_t v, unsigned r)
{
    return (v << r) | (v >> (64 - r));
}

static inline uint64_t check_step(uint64_t lane, uint64_t w)
{
    return check_rotl(lane ^ w, 29) * CHECK_M1;
}

struct check_state {
    uint64_t lane[4];
    unsigned char part[32]; /* a block split between pieces */
    size_t npart;
};

static void check_init(struct check_state *st)
{
    st->lane[0] = CHECK_M2;
    st->lane[1] = CHECK_M1;
    st->lane[2] = ~CHECK_M2;
    st->lane[3] = ~CHECK_M1;
    st->npart = 0;
}

static inline void check_block(struct check_state *st, const unsigned char *p)
{
    uint64_t w[4];
    memcpy(w, p, 32);
    for (unsigned i = 0; i < 4; i++)
        st->lane[i] = check_step(st->lane[i], w[i]);
}

static void check_feed(struct check_state *st, const void *data, size_t n)
{
    const unsigned char *p = data;
    if (st->npart > 0) {
        size_t take = 32 - st->npart < n ? 32 - st->npart : n;
        memcpy(st->part + st->npart, p, take);
        st->npart += take;
        p += take;
        n -= take;
        if (st->npart < 32)
            return;
        check_block(st, st->part);
        st->npart = 0;
    }
    for (; n >= 32; n -= 32, p += 32)
        check_block(st, p);
    memcpy(st->part, p, n);
    st->npart = n;
}

/* len: the bytes fed */
static uint32_t check_end(struct check_state *st, size_t len)
{
    const unsigned char *p = st->part;
    size_t n = st->npart;
    for (unsigned i = 0; n > 0; i++) {
        uint64_t w = 0;
        size_t take = n < 8 ? n : 8;
        memcpy(&w, p, take);
        st->lane[i] = check_step(st->lane[i], w ^ ((uint64_t)take << 56));
        p += take;
        n -= take;
    }
    uint64_t h = (uint64_t)(len + 8) * CHECK_M2;
    for (unsigned i = 0; i < 4; i++)
        h = check_rotl(h ^ st->lane[i], 27) * CHECK_M1;
    h ^= h >> 33;
    h *= CHECK_M2;
    h ^= h >> 29;
    return (uint32_t)(h ^ (h >> 32));
}

uint32_t flash_record_check(const char *record, size_t len)
{
    struct check_state st;
    check_init(&st);
    check_feed(&st, record + 8, len - 8);
    return check_end(&st, len - 8);
}

size_t flash_record_size(size_t nkey, size_t nbytes)
{
    return (RECORD_HEADER + nkey + nbytes + 7) & ~(size_t)7;
}

void flash_read_free(struct flash_read *rd)
{
    if (rd->iov != rd->iov_own)
        free(rd->iov);
    rd->iov = NULL;
    rd->niov = 0;
}

bool flash_read_target(struct flash_read *rd, const struct iovec *value, unsigned n)
{
    rd->iov = rd->iov_own;
    if (n + 2 > FLASH_READ_IOV && !(rd->iov = malloc((n + 2) * sizeof(*rd->iov))))
        return false;
    rd->iov[0] = (struct iovec){rd->head, FLASH_RECORD_HEADER + rd->nkey};
    memcpy(rd->iov + 1, value, n * sizeof(*value));
    rd->niov = n + 1;
    size_t pad =
        flash_record_size(rd->nkey, rd->nbytes) - FLASH_RECORD_HEADER - rd->nkey - rd->nbytes;
    if (pad > 0)
        rd->iov[rd->niov++] = (struct iovec){rd->pad, pad};
    return true;
}

/* Copies a record waiting in a write buffer into rd's buffers (tier.lock
 * held, so the buffer is not written out and reused meanwhile). */
static void copy_from_wbuf(struct flash_read *rd, const char *rec)
{
    size_t left = rd->loc.len;
    for (unsigned i = 0; i < rd->niov && left > 0; i++) {
        size_t n = rd->iov[i].iov_len < left ? rd->iov[i].iov_len : left;
        memcpy(rd->iov[i].iov_base, rec, n);
        rec += n;
        left -= n;
    }
}

enum flash_place flash_read_locate(struct flash_read *rd, int *fd, uint64_t *off)
{
    const struct item_flash_loc *loc = &rd->loc;
    enum flash_place place = FLASH_PLACE_NONE;
    pthread_mutex_lock(&tier.lock);
    const struct flash_page *p =
        tier.pages && loc->page < tier.npages ? &tier.pages[loc->page] : NULL;
    if (p && !tier.stop && p->state != PAGE_FREE && p->version == loc->version) {
        if (loc->offset + loc->len <= p->fill) {
            *fd = p->fd;
            *off = p->file_off + loc->offset;
            place = FLASH_PLACE_FILE;
        } else if (p->state == PAGE_OPEN) {
            /* the header was linked after its record was copied in whole;
             * a buffer is reused only after the write of its bytes moved
             * p->fill past them, under this lock. The page is its
             * bucket's open page, or the one before whose last write is
             * in flight. */
            const struct wbucket *b = &tier.buckets[p->bucket];
            bool in_flight = b->writing && b->wr_page == loc->page;
            uint64_t filling = p->fill + (in_flight ? b->wr_len : 0);
            if (in_flight && loc->offset >= p->fill && loc->offset + loc->len <= filling) {
                copy_from_wbuf(rd, b->wr_buf + (loc->offset - p->fill));
                place = FLASH_PLACE_COPIED;
            } else if (b->open_page == loc->page && loc->offset >= filling &&
                       loc->offset - filling + loc->len <= tier.cfg.wbuf_size) {
                copy_from_wbuf(rd, b->wbuf + (loc->offset - filling));
                place = FLASH_PLACE_COPIED;
            }
        }
    }
    pthread_mutex_unlock(&tier.lock);
    return place;
}

/* Whether the page loc points into was not reused since loc was taken. */
static bool page_unchanged(const struct item_flash_loc *loc)
{
    pthread_mutex_lock(&tier.lock);
    bool same = tier.pages && loc->page < tier.npages && !tier.stop &&
                tier.pages[loc->page].version == loc->version;
    pthread_mutex_unlock(&tier.lock);
    return same;
}

void flash_read_finish(struct flash_read *rd, int res)
{
    rd->ok = rd->corrupt = false;
    if (res < 0 || (size_t)res != rd->loc.len || !page_unchanged(&rd->loc))
        return;
    const char *rec = rd->head;
    uint32_t magic, check, nbytes;
    memcpy(&magic, rec, 4);
    memcpy(&check, rec + 4, 4);
    memcpy(&nbytes, rec + 8, 4);
    size_t nkey = (unsigned char)rec[12];
    if (magic != RECORD_MAGIC || check != rd->loc.check || nbytes != rd->nbytes ||
        nkey != rd->nkey || memcmp(rec + RECORD_HEADER, rd->key, nkey) != 0) {
        rd->corrupt = true;
        return;
    }
    /* the check covers the header after itself, the key and the value */
    struct check_state st;
    check_init(&st);
    check_feed(&st, rec + 8, RECORD_HEADER - 8 + nkey);
    size_t left = nbytes;
    for (unsigned i = 1; i < rd->niov && left > 0; i++) {
        size_t n = rd->iov[i].iov_len < left ? rd->iov[i].iov_len : left;
        check_feed(&st, rd->iov[i].iov_base, n);
        left -= n;
    }
    if (check_end(&st, RECORD_HEADER - 8 + nkey + nbytes) != check) {
        rd->corrupt = true;
        return;
    }
    rd->ok = true;
    flash_add(&flash_counters.objects_read, 1);
    flash_add(&flash_counters.bytes_read, rd->loc.len);
}
