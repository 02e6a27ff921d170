/*
 * proto_meta.h: memcached 1.6's meta commands (mg, ms, md, ma, mn, me) on a
 * text connection. The text engine hands each line starting with a
 * two-letter "m?" command to proto_meta_handle (proto_text.h's
 * proto_text_meta_handler); replies use conn.h's ordered response queue and
 * items go through items.h. Never touches sockets or storage internals.
 */
#ifndef MCR_PROTO_META_H
#define MCR_PROTO_META_H

#include <stddef.h>

#include "conn.h"

/* Handles one meta command line (see proto_text.h for the contract). */
enum proto_status proto_meta_handle(struct conn *c, char *line, size_t line_len, size_t consumed);

/* Frees the meta protocol's side state (shutdown, after the workers). */
void proto_meta_shutdown(void);

#endif
