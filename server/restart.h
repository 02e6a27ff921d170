/*
 * restart.h: warm restart (-e <file>). A graceful stop (SIGUSR1, "shutdown
 * graceful") writes every item held in memory to <file> and a small
 * metadata file, <file>.meta; the next start with the same -e and the same
 * memory settings loads them again, with their CAS uniques, flags, expiry
 * and last access time, and the clock resumed so that relative expiry
 * times stay right. doc/storage.md explains the design.
 */
#ifndef MCR_RESTART_H
#define MCR_RESTART_H

#include <stdbool.h>

struct settings;

enum restart_plan {
    RESTART_COLD,   /* start with an empty cache (reason logged) */
    RESTART_WARM,   /* restart_load() will load the saved items */
    RESTART_REFUSE, /* the metadata file is unreadable: do not start
                     * (memcached 1.6.18 refuses to start then too) */
};

/* Before storage_init: checks that <file> can be written, reads
 * <file>.meta (and removes it, so that it is used at most once) and
 * compares it with s. For RESTART_WARM the clock has been resumed and
 * *hashpower holds the hash table size to start with. */
enum restart_plan restart_prepare(const struct settings *s, unsigned *hashpower);

/* After storage_init, before serving: loads the items saved in <file>
 * (checked whole first; a damaged file loads nothing), then empties
 * <file>. Logs how many were loaded. */
void restart_load(const struct settings *s);

/* At a graceful stop, once no worker serves any more: writes every item
 * in memory to <file>, then <file>.meta. Values on flash (-o ext_path) are
 * not saved. 0 on success; -1 (logged) leaves no metadata file behind. */
int restart_save(const struct settings *s);

#endif
