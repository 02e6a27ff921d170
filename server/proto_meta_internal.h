/*
 * proto_meta_internal.h: what the meta protocol's two files share:
 * proto_meta_line.c (a request's flags, base64 keys, reply lines) and
 * proto_meta.c (the commands, built on them). Not for other files.
 */
#ifndef MCR_PROTO_META_INTERNAL_H
#define MCR_PROTO_META_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conn.h"
#include "items.h"
#include "tokenize.h"

#define META_MAX_OPT_TOKENS 20 /* more tokens than this: "flags too long" */
#define META_MAX_OPAQUE 32     /* an O token, 'O' included */
#define META_LINE_MAX 1024     /* longest response line we build */

/* A request's flags as meta_preparse reads them. */
struct meta_flags {
    bool has_error;
    bool vivify, value, set_stale, no_reply, has_cas, new_ttl, key_binary, has_recache, no_update;
    char mode;
    rel_time_t exptime, autoviv_exptime, recache_time;
    uint32_t client_flags;
    uint64_t req_cas, delta, initial;
};

/* A reply line being built (without its "\r\n"). */
struct meta_line {
    size_t len;
    char buf[META_LINE_MAX];
};

/* Decodes a base64 key in place; its new length, 0 on malformed input. */
size_t b64_decode_inplace(char *s, size_t len);
/* Parses and checks the flags from tokens[start] on into *of; false with
 * *errstr on error. */
bool meta_preparse(struct token *tokens, size_t start, struct meta_flags *of, const char **errstr);

/* Appending to a reply line: bytes, a string, a flag with a number, the
 * key (as text, or as " k<key>" with " b" when binary), an opaque (false
 * when too long), the remaining TTL (" t..."). */
void line_add(struct meta_line *l, const char *s, size_t n);
void line_str(struct meta_line *l, const char *s);
void line_flag_u64(struct meta_line *l, char flag, uint64_t v);
void line_key_text(struct meta_line *l, const char *key, size_t nkey, bool binary);
void line_key(struct meta_line *l, const char *key, size_t nkey, bool binary);
bool line_opaque(struct meta_line *l, const struct token *tok);
void line_ttl(struct meta_line *l, rel_time_t exptime);
/* mg's miss line (EN with the O and k flags it echoes). */
bool miss_line(struct meta_line *l, const struct token *tokens, size_t ntokens, const char *key,
               size_t nkey, bool key_binary);
/* The TTL an item created by N ends with. */
rel_time_t created_exptime(const struct token *tokens, size_t ntokens, const struct meta_flags *of);

/* Queues the line, then value_it's value when given (its reference passes
 * to the response; miss: the line sent if the value turns out missing). */
void send_line(struct conn *c, const struct meta_line *l, item *value_it,
               const struct meta_line *miss);
/* Queues an error line, whatever q says. */
void send_error(struct conn *c, const char *msg);

#endif
