/*
 * tokenize.c: memcached's command-line tokenizer, shared by the text and
 * meta engines. Knows no commands.
 */
#include "tokenize.h"

/* memcached's tokenizer: splits on ' '; a final token with value NULL ends
 * the list, or, when MAX_TOKENS-1 were found, points at the unsplit rest. */
size_t tokenize(char *command, size_t len, struct token *tokens, size_t max_tokens)
{
    char *s = command, *e = command;
    size_t ntokens = 0;
    for (size_t i = 0; i < len; i++, e++) {
        if (*e != ' ')
            continue;
        if (s != e) {
            tokens[ntokens].value = s;
            tokens[ntokens].length = (size_t)(e - s);
            ntokens++;
            *e = '\0';
            if (ntokens == max_tokens - 1) {
                e++;
                s = e;
                break;
            }
        }
        s = e + 1;
    }
    if (s != e) {
        tokens[ntokens].value = s;
        tokens[ntokens].length = (size_t)(e - s);
        ntokens++;
    }
    tokens[ntokens].value = *e == '\0' ? NULL : e;
    tokens[ntokens].length = 0;
    ntokens++;
    return ntokens;
}
