/*
 * t/storage_harness.h: what the storage engine's unit tests (t/test_storage*.c) share: the
 * engine's default settings and start, values written and read through an item's segments, stores
 * in one call, and stats collected by name. Each program compiles t/storage_harness.c with its own
 * tests.
 */
#ifndef MCR_T_STORAGE_HARNESS_H
#define MCR_T_STORAGE_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "server/items.h"

#define MIB (1024 * 1024)

/* ---- engine set-up ------------------------------------------------------------ */
/* memcached's defaults (-m 64, -f 1.25, -n 48, -I 1m, 4 threads) but the flat LRU (no
 * maintainer, no segments). */
struct storage_config default_config(void);
/* clock_init and storage_init; 0 or storage_init's error, told as a TAP diagnostic. */
int start(const struct storage_config *cfg);

/* ---- test tools -------------------------------------------------------------------- */
/* A repeatable pattern of letters, varied by seed. */
void fill_pattern(char *buf, size_t len, unsigned seed);
/* Allocates, fills and stores; returns the store result (or -1 when the
 * allocation failed, with *why set). */
int store_full(const char *key, const char *val, size_t len, uint32_t flags, rel_time_t exp,
               enum store_op op, uint64_t cas, uint64_t *cas_out, enum alloc_result *why);
/* store_full of a NUL-terminated value, flags 0, no expiry and no cas. */
int store(const char *key, const char *val, enum store_op op);
/* The value joined into a malloc'd, NUL-terminated buffer. */
char *value_of(const item *it);
/* 1 when key holds exactly `expect` (NULL: when key is missing). */
int has_value(const char *key, const char *expect);
/* 1 when key is stored. */
int exists(const char *key);

/* Stats collection into a small list searched by name. */
struct stat_list {
    char names[512][64];
    char values[512][64];
    int n;
};

/* A storage_stats_* callback appending to the stat_list ctx. */
void collect(void *ctx, const char *name, const char *value);
/* The value of the stat name in l, or NULL. */
const char *stat_get(const struct stat_list *l, const char *name);
/* A "stats" figure of the engine; (unsigned long long)-1, told, when it is missing. */
unsigned long long general_stat(const char *name);
/* total_malloced, from "stats slabs" as memcached has it. */
unsigned long long malloced(void);
/* Bytes of pages the classes hold (total_malloced less the pool). */
unsigned long long held(void);

#endif
