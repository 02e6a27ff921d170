/*
 * proto_text_internal.h: what the text protocol's two files share:
 * proto_text.c (line parsing, retrieval, storage, arithmetic, delete,
 * touch, dispatch, -Y authentication) and proto_text_admin.c (the
 * administration commands it dispatches to). Not for other files.
 */
#ifndef MCR_PROTO_TEXT_INTERNAL_H
#define MCR_PROTO_TEXT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "conn.h"
#include "tokenize.h"

/* Queues str as a reply line unless noreply (logged at -vv either way). */
void out_string(struct conn *c, bool noreply, const char *str);
/* Whether the token before the final one (tokenize.h) is "noreply". */
bool set_noreply_maybe(struct token *tokens, size_t ntokens);

/* The administration commands (proto_text_admin.c), each given the whole
 * tokenized line (tokens[0] is the command; ntokens counts the final token);
 * those that can end the connection or stream return PROTO_CLOSE then. */
void process_flush_all(struct conn *c, struct token *tokens, size_t ntokens);
void process_verbosity(struct conn *c, struct token *tokens, size_t ntokens);
void process_memlimit(struct conn *c, struct token *tokens, size_t ntokens);
enum proto_status process_lru_crawler(struct conn *c, struct token *tokens, size_t ntokens);
enum proto_status process_watch(struct conn *c, struct token *tokens, size_t ntokens);
void process_slabs(struct conn *c, struct token *tokens, size_t ntokens);
void process_lru(struct conn *c, struct token *tokens, size_t ntokens);
enum proto_status process_shutdown(struct conn *c, struct token *tokens, size_t ntokens);
void process_stats(struct conn *c, struct token *tokens, size_t ntokens);
void process_refresh_certs(struct conn *c, struct token *tokens, size_t ntokens);

#endif
