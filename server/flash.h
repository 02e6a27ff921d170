/*
 * flash.h: the flash tier (memcached's extstore, -o ext_path). Values of
 * COLD items are written into log-structured pages of the ext_path files
 * by one I/O thread through io_uring; the item in RAM becomes a header
 * holding where the value lies (items.h: item_flash_loc). Reads of such
 * values are made by each worker on its own ring (flash_reader.h) with
 * the place and checks this tier gives (value_fetch.c).
 * See doc/storage.md, "Values on flash".
 */
#ifndef MCR_FLASH_H
#define MCR_FLASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "items.h"
#include "settings_ext.h"

/* Opens the files and starts the I/O thread; 0, or -1 with a message
 * (memcached's "Failed to initialize external storage: ..." text). As
 * memcached, a compact_under of 0 becomes a quarter of the pages, and so
 * does drop_under then (written back into cfg). */
int flash_start(struct ext_settings *cfg, char *errbuf, size_t errlen);
/* Stops the thread and closes the files; reads completing afterwards
 * fail (flash_read_finish), reads asked for afterwards find no record. */
void flash_stop(void);
bool flash_running(void);

/* The bytes of a record before its key (flash.c describes the record). */
#define FLASH_RECORD_HEADER 16
/* iovecs a read holds itself: head, value pieces, pad */
#define FLASH_READ_IOV 8

/* One read of a flash-resident value, straight into the caller's buffers
 * (the fresh item's value). Reads are submitted by the thread that wants
 * the value, on its own ring (flash_reader.h); the tier says where a
 * record lies and checks what was read. The caller fills loc, key, nkey,
 * nbytes and done, then calls flash_read_target(). */
struct flash_read {
    struct flash_read *next; /* the reader's own list */
    struct item_flash_loc loc;
    char key[KEY_MAX_LENGTH];
    size_t nkey, nbytes;
    char head[FLASH_RECORD_HEADER + KEY_MAX_LENGTH]; /* the record's header and key */
    char pad[8];                                     /* the record's padding */
    struct iovec *iov;                               /* head, the caller's value buffers, pad */
    unsigned niov;
    struct iovec iov_own[FLASH_READ_IOV];
    int res;      /* the outcome of a read that needed no ring (flash_read_locate) */
    bool queued;  /* in a ring (extstore_io_queue) */
    bool ok;      /* read and matched key, length and checksum: the value is in place */
    bool corrupt; /* read but did not match (badcrc_from_extstore) */
    void (*done)(struct flash_read *rd);
};
/* The value (nbytes) goes into these n buffers, in order; false when there
 * is no memory for the list. */
bool flash_read_target(struct flash_read *rd, const struct iovec *value, unsigned n);
/* Frees what flash_read_target() allocated. */
void flash_read_free(struct flash_read *rd);
/* Where rd->loc's record lies. FLASH_PLACE_FILE: in its file, at *off of
 * *fd. FLASH_PLACE_COPIED: still in the write buffer waiting for its
 * write; its bytes are already in rd's buffers, as a read of loc.len bytes
 * would have put them. FLASH_PLACE_NONE: the tier is not running or loc
 * names no record any more (page freed or reused). Any thread; rd's
 * buffers are set (flash_read_target). */
enum flash_place { FLASH_PLACE_NONE, FLASH_PLACE_FILE, FLASH_PLACE_COPIED };
enum flash_place flash_read_locate(struct flash_read *rd, int *fd, uint64_t *off);
/* A read of rd->loc into rd->iov ended with res (bytes, or -errno): sets
 * ok or corrupt, or neither (a failed or short read, a page reused
 * meanwhile), and counts it. */
void flash_read_finish(struct flash_read *rd, int res);
/* extstore_io_queue: reads submitted and not completed (+1, -1). */
void flash_io_queued(int delta);

/* A flash header is freed: its record no longer counts as used; a full
 * page left with nothing used is reclaimed (free again). Any thread,
 * engine locks held (the tier's own lock is innermost). */
void flash_forget(const struct item_flash_loc *loc);

/* The "extstore" command changed a setting (item_size, item_age, low_ttl,
 * recache_rate, compact_under, drop_under, max_frag, drop_unread); the
 * I/O thread reads them at its next pass. */
void flash_tune(const struct ext_settings *cfg);
/* ext_recache_rate: one in this many values read twice goes back to RAM
 * (0: none). */
unsigned flash_recache_rate(void);

/* Whether a slab class of chunk_size-byte chunks holds the RAM headers of
 * flash values (its chunks are smaller than ext_item_size) while flash
 * still has room for more values (more than the one page always kept
 * free): the slab mover then gives it pages when it evicts, since each
 * header evicted there loses a value flash could keep. */
bool flash_header_class_short(size_t chunk_size);

/* Called by an allocation that found no free chunk in its slab class,
 * before it evicts: when the writer takes values of that class, its next
 * pass starts at once instead of after its wait, so values leave for
 * flash rather than being evicted while the I/O thread sleeps. Cheap when
 * called again before that pass (one flag). True when the writer takes
 * that class's values (and was woken); false on the I/O thread itself. */
bool flash_room_wanted(size_t chunk_size);

/* The writer's progress as an allocation waiting for room saw it:
 * flash_room_mark() takes it, flash_room_stalled() answers whether two
 * writer passes ended since then, neither held up by a write in flight,
 * without moving a value (the writer finds nothing to move: waiting
 * longer is useless). activity grows with every pass that ends and
 * every value moved: while it stays still the I/O thread is not at work
 * (asleep, or waiting for a CPU). */
struct flash_room_mark {
    uint64_t passes, moved, activity;
};
void flash_room_mark(struct flash_room_mark *m);
bool flash_room_stalled(const struct flash_room_mark *m);

/* Run one writer pass now in the I/O thread and wait for it (tests). */
void flash_write_now(void);

/* Counters kept by the value fetchers (value_fetch.c). */
enum flash_counter {
    FC_GET_EXTSTORE,
    FC_GET_ABORTED,
    FC_GET_OOM,
    FC_RECACHE,
    FC_MISS,
    FC_BADCRC,
    FC_COUNT
};
void flash_count(enum flash_counter which);

/* "stats" lines (get_extstore ... badcrc_from_extstore, then, with the
 * tier running, extstore_*) and "stats extstore". */
typedef void (*flash_emit_fn)(void *ctx, const char *name, const char *value);
void flash_stats_gets(flash_emit_fn emit, void *ctx);
void flash_stats_store(flash_emit_fn emit, void *ctx);
void flash_stats_pages(flash_emit_fn emit, void *ctx);

#endif
