/*
 * stats_detail.h: memcached's per-prefix statistics ("stats detail on|off|
 * dump", enabled at start-up by -D). A key's prefix is the part before the
 * first -D delimiter (default ':'); keys without it are not counted. For
 * each prefix: gets, get hits, sets and deletes of the text protocol, as
 * memcached counts them. Owns the prefix table and the reply text; knows
 * no connection and no protocol parsing.
 */
#ifndef MCR_STATS_DETAIL_H
#define MCR_STATS_DETAIL_H

#include <stdbool.h>
#include <stddef.h>

/* Whether recording is on (-D, or "stats detail on"). Cheap; call it
 * before the record functions on hot paths. */
bool stats_detail_on(void);

void stats_detail_record_get(const char *key, size_t nkey, bool hit);
void stats_detail_record_set(const char *key, size_t nkey);
void stats_detail_record_delete(const char *key, size_t nkey);

/* The reply to "stats detail <arg>" (arg "" when missing): "OK\r\n" for
 * on/off, the PREFIX lines and "END\r\n" for dump, the usage error
 * otherwise. malloc'd, *len bytes; NULL when out of memory. */
char *stats_detail_reply(const char *arg, size_t *len);

/* "stats detail dump" a chunk at a time (text protocol, streamed as the
 * client reads): fill writes whole PREFIX lines into buf (at most room
 * bytes, room at least a few hundred) and, after the last, "END\r\n" and
 * sets *done. Prefixes added meanwhile may be left out. open returns NULL
 * when out of memory. */
struct stats_detail_cursor;
struct stats_detail_cursor *stats_detail_dump_open(void);
size_t stats_detail_dump_fill(struct stats_detail_cursor *cur, char *buf, size_t room, bool *done);
void stats_detail_dump_close(struct stats_detail_cursor *cur);

/* Forgets every prefix ("stats reset", as memcached). */
void stats_detail_clear(void);
/* Frees the prefix table (at shutdown, after the workers stopped). */
void stats_detail_free(void);

#endif
