/*
 * tokenize.h: splitting a command line into tokens the way memcached does,
 * shared by the text and meta engines. Knows no commands.
 */
#ifndef MCR_TOKENIZE_H
#define MCR_TOKENIZE_H

#include <stddef.h>

struct token {
    char *value;
    size_t length;
};

/* Splits line[0..len) on ' ' in place (each token NUL-terminated). At most
 * max_tokens-1 tokens are split off; a final token of length 0 ends the
 * list: its value is NULL when the line was used up, or points at the
 * unsplit rest when max_tokens-1 tokens were found. Returns the count,
 * the final token included. line[len] must be writable. */
size_t tokenize(char *line, size_t len, struct token *tokens, size_t max_tokens);

#endif
