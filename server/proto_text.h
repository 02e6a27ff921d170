/*
 * proto_text.h: the memcached text ("ASCII") protocol engine: storage,
 * retrieval, arithmetic, touch, delete, flush_all, stats and the admin
 * commands, with memcached 1.6's replies. Uses conn.h's engine interface
 * and items.h; never touches sockets.
 */
#ifndef MCR_PROTO_TEXT_H
#define MCR_PROTO_TEXT_H

#include <stddef.h>

#include "conn.h"

extern const struct proto_engine proto_text_engine;

/* Meta commands (two-letter commands starting with 'm': mg, ms, md, ma, mn,
 * me) on a text connection are handed to this function when it is set.
 * line points at the request (without "\r\n", NUL-terminated), line_len is
 * its length, consumed the number of read-buffer bytes the line occupies
 * (with its "\r\n"); the handler consumes them itself (conn_consume) and
 * may then start receiving a value (conn_read_value, then set
 * c->value.on_done). Unset, meta commands answer "ERROR". */
typedef enum proto_status (*proto_meta_fn)(struct conn *c, char *line, size_t line_len,
                                           size_t consumed);
extern proto_meta_fn proto_text_meta_handler;

#endif
