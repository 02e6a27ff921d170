/*
 * t/test_storage_flash.c: unit tests of the storage engine's flash tier, printing TAP: the read
 * check of a record read in pieces, where a read finds a record (write buffers or the file), sets
 * that wait or park for the flash writer instead of evicting (flat and segmented LRU), and the
 * page the slab mover hands the class of flash headers. Built only with liburing. Each group
 * starts a fresh engine (t/storage_harness.h) and a flash tier on a temporary file.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/flash.h"
#include "server/flash_internal.h"
#include "server/items.h"
#include "server/slabs.h"
#include "t/rdma/tap.h"
#include "t/storage_harness.h"

/* What the kernel's readv does: the record's bytes across rd's pieces. */
static void scatter(struct flash_read *rd, const char *rec, size_t len)
{
    for (unsigned i = 0; i < rd->niov && len > 0; i++) {
        size_t n = rd->iov[i].iov_len < len ? rd->iov[i].iov_len : len;
        memcpy(rd->iov[i].iov_base, rec, n);
        rec += n;
        len -= n;
    }
}

/* A read of the record rec (len bytes, at page 0 offset 0) into value
 * pieces of the given lengths: 1 ok, 0 not read, -1 corrupt; *same: the
 * pieces hold value. */
static int read_in_pieces(const char *rec, size_t len, int res, const char *key, const char *value,
                          size_t nbytes, const size_t *cuts, unsigned ncuts, bool *same)
{
    struct flash_read rd;
    memset(&rd, 0, sizeof(rd));
    memcpy(&rd.loc.check, rec + 4, 4);
    rd.loc.len = (uint32_t)len;
    rd.nkey = strlen(key);
    memcpy(rd.key, key, rd.nkey);
    rd.nbytes = nbytes;
    char *buf = malloc(nbytes);
    struct iovec pieces[16];
    size_t at = 0;
    for (unsigned i = 0; i < ncuts; i++) {
        pieces[i] = (struct iovec){buf + at, cuts[i]};
        at += cuts[i];
    }
    if (!buf || !flash_read_target(&rd, pieces, ncuts)) {
        free(buf);
        return -2;
    }
    scatter(&rd, rec, len);
    flash_read_finish(&rd, res);
    *same = memcmp(buf, value, nbytes) == 0;
    flash_read_free(&rd);
    free(buf);
    return rd.ok ? 1 : rd.corrupt ? -1 : 0;
}

/* Whether rd's record at page offset `offset` is copied from a write
 * buffer into buf (rd's value pieces) and checks as value. */
static bool copied_at(struct flash_read *rd, uint64_t offset, char *buf, const char *value)
{
    int fd;
    uint64_t off;
    rd->loc.offset = offset;
    memset(buf, 0, rd->nbytes);
    enum flash_place place = flash_read_locate(rd, &fd, &off);
    flash_read_finish(rd, (int)rd->loc.len);
    return place == FLASH_PLACE_COPIED && rd->ok && memcmp(buf, value, rd->nbytes) == 0;
}

/* Where a read finds a record (flash_read_locate): in the buffer being
 * filled, in the one being written, or, once its write moved the page's
 * fill past it, in the file; copies from a buffer land in the read's
 * pieces and check as a read from the file would. The tier's state is set
 * by hand on a page the idle I/O thread leaves alone (no write pending). */
static void test_flash_buffered_read(const char *rec, size_t len, const char *key,
                                     const char *value, size_t nbytes)
{
    struct wbucket *b = &tier.buckets[BUCKET_DEFAULT];
    struct flash_page *p = &tier.pages[0];
    pthread_mutex_lock(&tier.lock);
    unsigned saved_open = b->open_page;
    b->open_page = 0;
    p->state = PAGE_OPEN;
    p->bucket = BUCKET_DEFAULT;
    p->fill = 4096;
    uint32_t version = p->version;
    memcpy(b->wbuf + 64, rec, len);    /* at page offset 4096 + 64 */
    memset(b->wr_buf, 0, 4096);        /* being written: 4096..8191 */
    memcpy(b->wr_buf + 128, rec, len); /* at page offset 4096 + 128 */
    pthread_mutex_unlock(&tier.lock);

    const size_t odd[] = {5, 700, 1, 294};
    char *buf = malloc(nbytes);
    struct iovec pieces[4];
    size_t at = 0;
    for (unsigned i = 0; i < 4; i++) {
        pieces[i] = (struct iovec){buf + at, odd[i]};
        at += odd[i];
    }
    struct flash_read rd;
    memset(&rd, 0, sizeof(rd));
    memcpy(&rd.loc.check, rec + 4, 4);
    rd.loc.len = (uint32_t)len;
    rd.loc.version = version;
    rd.nkey = strlen(key);
    memcpy(rd.key, key, rd.nkey);
    rd.nbytes = nbytes;
    int fd = -1;
    uint64_t off = 0;
    bool targeted = buf && flash_read_target(&rd, pieces, 4);

    tap_ok(targeted && copied_at(&rd, 4096 + 64, buf, value),
           "a record in the buffer being filled is copied from it and checks");

    pthread_mutex_lock(&tier.lock);
    b->writing = true;
    b->wr_page = 0;
    b->wr_len = 4096;
    pthread_mutex_unlock(&tier.lock);
    tap_ok(targeted && copied_at(&rd, 4096 + 128, buf, value),
           "a record in the buffer being written is copied from it and checks");
    tap_ok(targeted && copied_at(&rd, 8192 + 64, buf, value),
           "the buffer being filled starts after the one being written");

    /* the bucket went on to another page while this one's last write is
     * in flight */
    pthread_mutex_lock(&tier.lock);
    b->open_page = 1;
    pthread_mutex_unlock(&tier.lock);
    tap_ok(targeted && copied_at(&rd, 4096 + 128, buf, value),
           "the last write of a page the bucket has left is still read from its buffer");
    rd.loc.offset = 8192 + 64;
    tap_ok(targeted && flash_read_locate(&rd, &fd, &off) == FLASH_PLACE_NONE,
           "nothing of that page lies after its last write");
    pthread_mutex_lock(&tier.lock);
    b->open_page = 0;
    pthread_mutex_unlock(&tier.lock);

    pthread_mutex_lock(&tier.lock);
    b->writing = false;
    p->fill = 8192; /* the write completed */
    pthread_mutex_unlock(&tier.lock);
    rd.loc.offset = 4096 + 128;
    enum flash_place place = targeted ? flash_read_locate(&rd, &fd, &off) : FLASH_PLACE_NONE;
    tap_ok(place == FLASH_PLACE_FILE && fd == p->fd && off == p->file_off + 4096 + 128,
           "once written, the record is read from the file");
    rd.loc.version = version + 1;
    tap_ok(targeted && flash_read_locate(&rd, &fd, &off) == FLASH_PLACE_NONE,
           "a record of another version of the page is nowhere");
    rd.loc.version = version;
    rd.loc.offset = 8192 + 2 * 1024 * 1024;
    tap_ok(targeted && flash_read_locate(&rd, &fd, &off) == FLASH_PLACE_NONE,
           "nor is one past the buffer being filled");

    pthread_mutex_lock(&tier.lock);
    p->state = PAGE_FREE;
    p->fill = 0;
    b->wr_len = 0;
    b->open_page = saved_open;
    pthread_mutex_unlock(&tier.lock);
    flash_read_free(&rd);
    free(buf);
}

/* The flash tier's read check (flash.h): a record read in pieces (header
 * and key, value pieces of any length, the padding) checks as written;
 * one changed byte, a short read or a stopped tier does not. */
static void test_flash_read_check(void)
{
    struct storage_config cfg = default_config();
    start(&cfg);
    char path[] = "/tmp/test_storage_flash.XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0)
        close(fd);
    struct ext_settings ext;
    memset(&ext, 0, sizeof(ext));
    ext.paths[0] = (struct ext_path){path, 4u << 20};
    ext.npaths = 1;
    ext.page_size = ext.wbuf_size = 2u << 20;
    ext.item_size = 512;
    ext.item_age = UINT32_MAX;
    ext.max_frag = 0.5;
    char err[256] = "";
    tap_ok(fd >= 0 && flash_start(&ext, err, sizeof(err)) == 0, "flash tier starts on %s %s", path,
           err);

    const char *key = "fr:key";
    size_t nkey = strlen(key), nbytes = 1000;
    size_t len = flash_record_size(nkey, nbytes);
    char *rec = calloc(1, len), value[1000];
    for (size_t i = 0; i < nbytes; i++)
        value[i] = (char)(i * 131 + 7);
    uint32_t magic = RECORD_MAGIC, n32 = (uint32_t)nbytes;
    memcpy(rec, &magic, 4);
    memcpy(rec + 8, &n32, 4);
    rec[12] = (char)nkey;
    memcpy(rec + RECORD_HEADER, key, nkey);
    memcpy(rec + RECORD_HEADER + nkey, value, nbytes);
    uint32_t check = flash_record_check(rec, RECORD_HEADER + nkey + nbytes);
    memcpy(rec + 4, &check, 4);

    bool same = false;
    const size_t whole[] = {1000};
    const size_t odd[] = {5, 700, 1, 294};
    const size_t many[] = {100, 100, 100, 100, 100, 100, 100, 100, 100, 37, 63};
    tap_ok(read_in_pieces(rec, len, (int)len, key, value, nbytes, whole, 1, &same) == 1 && same,
           "a record read whole checks, the value in place");
    tap_ok(read_in_pieces(rec, len, (int)len, key, value, nbytes, odd, 4, &same) == 1 && same,
           "in pieces of 5, 700, 1 and 294 bytes too");
    tap_ok(read_in_pieces(rec, len, (int)len, key, value, nbytes, many, 11, &same) == 1 && same,
           "in more pieces than a read holds itself (11)");
    rec[RECORD_HEADER + nkey + 703] ^= 0x10;
    tap_ok(read_in_pieces(rec, len, (int)len, key, value, nbytes, odd, 4, &same) == -1,
           "one bit changed in the value: corrupt");
    rec[RECORD_HEADER + nkey + 703] ^= 0x10;
    rec[RECORD_HEADER + 1] ^= 1;
    tap_ok(read_in_pieces(rec, len, (int)len, key, value, nbytes, odd, 4, &same) == -1,
           "another key: corrupt");
    rec[RECORD_HEADER + 1] ^= 1;
    tap_ok(read_in_pieces(rec, len, (int)len - 8, key, value, nbytes, odd, 4, &same) == 0 &&
               read_in_pieces(rec, len, -5, key, value, nbytes, odd, 4, &same) == 0,
           "a short or failed read: not read, not corrupt");
    test_flash_buffered_read(rec, len, key, value, nbytes);
    flash_stop();
    tap_ok(read_in_pieces(rec, len, (int)len, key, value, nbytes, odd, 4, &same) == 0,
           "after the tier stopped: not read");
    free(rec);
    unlink(path);
    storage_shutdown();
}

/* The settings of start_flash_file's tier (see there) on path. */
static void flash_file_settings(struct ext_settings *ext, char *path)
{
    memset(ext, 0, sizeof(*ext));
    ext->paths[0] = (struct ext_path){path, 32u << 20};
    ext->npaths = 1;
    ext->page_size = 4u << 20;
    ext->wbuf_size = 2u << 20;
    ext->item_size = 512;
    ext->item_age = UINT32_MAX;
    ext->recache_rate = 2000;
    ext->max_frag = 0.8;
    ext->automove_freeratio = 0.01;
}

/* Starts a flash tier on a new 32 MiB file named after the template
 * path (memcached's defaults but for the sizes; values of 512 bytes and
 * more go to flash, smaller chunks hold their headers). */
static bool start_flash_file(char *path)
{
    int fd = mkstemp(path);
    if (fd >= 0)
        close(fd);
    struct ext_settings ext;
    flash_file_settings(&ext, path);
    char err[256] = "";
    bool started = fd >= 0 && flash_start(&ext, err, sizeof(err)) == 0;
    tap_ok(started, "flash tier starts on %s %s", path, err);
    return started;
}

/* n sets of len-byte values (keys PREFIX:i, val as scratch) as a
 * connection makes them: an allocation that would wait returns at once
 * (ALLOC_FLASH_WAIT) and is asked again 0.5 ms later; counts the parks,
 * the sets stored and those whose wait gave up. */
static void parkable_burst(const char *prefix, int n, char *val, size_t len, int *parks,
                           int *stored, int *gave_up)
{
    char key[32];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "%s:%d", prefix, i);
        struct alloc_wait w = {0};
        enum alloc_result why;
        item *it;
        while (!(it = item_alloc_parkable(key, strlen(key), 0, 0, len, &w, &why)) &&
               why == ALLOC_FLASH_WAIT) {
            (*parks)++;
            struct timespec later = {0, 500 * 1000};
            nanosleep(&later, NULL);
        }
        *gave_up += w.gave_up;
        if (!it)
            continue;
        fill_pattern(val, len, (unsigned)i);
        item_value_write(it, val, len);
        *stored += item_store(it, STORE_SET, 0, NULL) == STORE_STORED;
        item_release(it);
    }
}

/* The room-wait tests' engine: -m 8, no slab mover, the flat or the
 * segmented LRU (without its maintainer), waits for the writer bounded
 * by a minute, and a flash tier on a new file from the template path;
 * whether the tier started. room_wait_end undoes it. */
static bool room_wait_start(bool segmented, char *path)
{
    struct storage_config cfg = default_config();
    cfg.maxbytes = 8 * MIB;
    cfg.slab_automove_off = true;
    cfg.lru_segmented = segmented;
    start(&cfg);
    item_alloc_flash_wait_limits(60000000, 60000000, 60000000);
    return start_flash_file(path);
}

static void room_wait_end(bool started, const char *path)
{
    if (started)
        flash_stop();
    unlink(path);
    item_alloc_flash_wait_limits(0, 0, 0);
    storage_shutdown();
}

/* A burst of 128 KiB sets, back to back, into -m 8 with a flash tier:
 * the value class has a few dozen chunks and the writer keeps 18 of them
 * free, so the sets outrun it. A set that finds no free chunk waits for
 * the writer to move COLD's tail to flash instead of evicting a value
 * flash would keep: no key is lost while flash has room. The wait's
 * bounds are widened to a minute, so that an I/O thread kept off the
 * CPU for a while (a loaded machine, a sanitizer build) only makes the
 * sets slower: the wait still ends only when the writer freed a chunk or
 * found nothing to move. Without the wait the sets evict. */
static void test_flash_room_wait(void)
{
    char path[] = "/tmp/test_storage_room.XXXXXX";
    bool started = room_wait_start(false, path); /* flat: every item in COLD */

    enum { N = 150, LEN = 128 * 1024 };
    char *val = malloc(LEN), key[32];
    int fails = 0;
    for (int i = 0; started && val && i < N; i++) {
        fill_pattern(val, LEN, (unsigned)i);
        snprintf(key, sizeof(key), "rw:%d", i);
        if (store_full(key, val, LEN, 0, 0, STORE_SET, 0, NULL, NULL) != STORE_STORED)
            fails++;
    }
    tap_ok(started && fails == 0, "%d sets of 128 KiB into -m 8 all store (%d failed)", N, fails);
    unsigned long long evicted = general_stat("evictions");
    tap_ok(evicted == 0, "none evicted: the sets waited for the writer (%llu evicted)", evicted);
    int present = 0, on_flash = 0, intact = 0, in_ram = 0;
    for (int i = 0; started && val && i < N; i++) {
        snprintf(key, sizeof(key), "rw:%d", i);
        item *it = item_peek(key, strlen(key));
        if (!it)
            continue;
        present++;
        if (item_on_flash(it)) {
            on_flash++;
        } else {
            in_ram++;
            fill_pattern(val, LEN, (unsigned)i);
            char *v = value_of(it);
            intact += item_nbytes(it) == LEN && memcmp(v, val, LEN) == 0;
            free(v);
        }
        item_release(it);
    }
    tap_ok(present == N, "every key is kept (%d of %d, %d on flash)", present, N, on_flash);
    tap_ok(on_flash > 0 && intact == in_ram, "values went to flash, those in RAM intact (%d of %d)",
           intact, in_ram);
    /* the same burst as a connection makes it: an allocation that would
     * wait returns at once (ALLOC_FLASH_WAIT) and is asked again later */
    int parks = 0, stored = 0, gave_up = 0;
    if (started && val)
        parkable_burst("rp", N, val, LEN, &parks, &stored, &gave_up);
    evicted = general_stat("evictions");
    tap_ok(stored == N && evicted == 0 && gave_up == 0,
           "%d parkable sets store (%d), none evicted (%llu) nor gave up waiting (%d): they "
           "parked %d times",
           N, stored, evicted, gave_up, parks);
    /* a set that parked, then finds its wait over (the writer no longer
     * takes its class's values) and no free chunk of its class, gives up
     * waiting and evicts */
    struct alloc_wait w = {0};
    enum alloc_result why = ALLOC_OK;
    item *it = NULL;
    int sets = 0;
    for (; started && val && sets < 4 * N; sets++) {
        snprintf(key, sizeof(key), "rg:%d", sets);
        w = (struct alloc_wait){0};
        if (!(it = item_alloc_parkable(key, strlen(key), 0, 0, LEN, &w, &why)))
            break;
        item_store(it, STORE_SET, 0, NULL);
        item_release(it);
    }
    bool waits = !it && why == ALLOC_FLASH_WAIT && w.started;
    struct ext_settings ext;
    flash_file_settings(&ext, path);
    ext.item_size = UINT32_MAX;
    flash_tune(&ext);
    flash_write_now(); /* its pass in flight, if any, has ended */
    void *held[256];
    size_t nheld = 0;
    while (waits && nheld < sizeof(held) / sizeof(*held) && (held[nheld] = slabs_alloc(w.cls)))
        nheld++;
    evicted = general_stat("evictions");
    it = waits ? item_alloc_parkable(key, strlen(key), 0, 0, LEN, &w, &why) : NULL;
    unsigned long long evicted_after = general_stat("evictions");
    tap_ok(waits && it && w.gave_up && evicted_after > evicted,
           "a set parked after %d sets (%d), its class's %zu free chunks taken, it gives up "
           "waiting (%d) and evicts (%llu -> %llu)",
           sets, waits, nheld, w.gave_up, evicted, evicted_after);
    if (it)
        item_release(it);
    while (nheld > 0)
        slabs_free(held[--nheld], w.cls);
    ext.item_size = 512;
    flash_tune(&ext);
    free(val);
    room_wait_end(started, path);
}

/* The same parkable burst into a fresh segmented LRU without its
 * maintainer: new items stay in HOT and COLD, the writer's source, is
 * empty, so a set that finds no free chunk moves HOT's tail into COLD
 * and parks while the writer takes those values to flash, instead of
 * evicting (before, 16 of 64 such sets over TCP evicted every time). */
static void test_flash_room_wait_segmented(void)
{
    char path[] = "/tmp/test_storage_hot.XXXXXX";
    bool started = room_wait_start(true, path);
    enum { N = 150, LEN = 128 * 1024 };
    char *val = malloc(LEN), key[32];
    int parks = 0, stored = 0, gave_up = 0;
    if (started && val)
        parkable_burst("hp", N, val, LEN, &parks, &stored, &gave_up);
    unsigned long long evicted = general_stat("evictions");
    tap_ok(started && stored == N && evicted == 0 && gave_up == 0 && parks > 0,
           "segmented, fresh: %d parkable sets store (%d), none evicted (%llu) nor gave up (%d): "
           "they parked %d times",
           N, stored, evicted, gave_up, parks);
    int present = 0, on_flash = 0;
    for (int i = 0; started && i < N; i++) {
        snprintf(key, sizeof(key), "hp:%d", i);
        item *it = item_peek(key, strlen(key));
        if (!it)
            continue;
        present++;
        on_flash += item_on_flash(it);
        item_release(it);
    }
    tap_ok(present == N && on_flash > 0, "segmented: every key is kept (%d of %d, %d on flash)",
           present, N, on_flash);
    free(val);
    room_wait_end(started, path);
}

/* The class of flash headers (chunks smaller than ext_item_size) that
 * evicts while flash has room gets a page from the class holding the
 * most, handed straight to it: the page never sits in the pool, where an
 * allocation of another class (a set waiting for the flash writer polls
 * for a chunk) would take it first. */
static void test_flash_header_page(void)
{
    struct storage_config cfg = default_config(); /* the mover on */
    cfg.maxbytes = 8 * MIB;
    start(&cfg);
    char path[] = "/tmp/test_storage_hdr.XXXXXX";
    bool started = start_flash_file(path);
    /* values too small for flash: 3 MiB of 300 bytes, then 100-byte ones
     * until their class evicts */
    enum { MEDIUM = 300, SMALL = 100 };
    char *val = malloc(MEDIUM), key[32];
    if (val)
        fill_pattern(val, MEDIUM, 7);
    for (int i = 0; started && val && i < 8000; i++) {
        snprintf(key, sizeof(key), "hm:%d", i);
        store_full(key, val, MEDIUM, 0, 0, STORE_SET, 0, NULL, NULL);
    }
    unsigned small_cls = 0;
    for (int i = 0; started && val && i < 60000 && general_stat("evictions") < 1000; i++) {
        snprintf(key, sizeof(key), "hs:%d", i);
        store_full(key, val, SMALL, 0, 0, STORE_SET, 0, NULL, NULL);
        item *it = small_cls ? NULL : item_peek(key, strlen(key));
        if (it) {
            small_cls = item_slab_class(it);
            item_release(it);
        }
    }
    struct slabs_class_stats before, after;
    slabs_class_stats(small_cls, &before);
    unsigned long long pool = general_stat("slab_global_page_pool");
    tap_ok(started && small_cls > 0 && general_stat("evictions") >= 1000 &&
               flash_header_class_short(before.chunk_size),
           "the class of %zu-byte chunks, a headers' class, evicts (%llu)", before.chunk_size,
           general_stat("evictions"));
    bool moved = storage_slab_move_now();
    slabs_class_stats(small_cls, &after);
    tap_ok(moved && after.total_pages == before.total_pages + 1 &&
               general_stat("slab_global_page_pool") == pool,
           "the mover hands it a page at once (%zu -> %zu pages, pool %llu -> %llu)",
           before.total_pages, after.total_pages, pool, general_stat("slab_global_page_pool"));
    free(val);
    if (started)
        flash_stop();
    unlink(path);
    storage_shutdown();
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_flash_read_check();
    test_flash_room_wait();
    test_flash_room_wait_segmented();
    test_flash_header_page();
    tap_no_plan_end();
    return tap_exit_status();
}
