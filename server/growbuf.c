/*
 * growbuf.c: the doubling byte buffer of growbuf.h. Knows no protocol.
 */
#include "growbuf.h"

#include <stdlib.h>
#include <string.h>

char *growbuf_reserve(struct growbuf *g, size_t n)
{
    if (g->oom)
        return NULL;
    if (g->len + n > g->cap) {
        size_t cap = g->cap ? g->cap : 1024;
        while (cap < g->len + n)
            cap *= 2;
        char *b = realloc(g->buf, cap);
        if (!b) {
            g->oom = true;
            return NULL;
        }
        g->buf = b;
        g->cap = cap;
    }
    return g->buf + g->len;
}

void growbuf_append(struct growbuf *g, const void *data, size_t n)
{
    char *at = growbuf_reserve(g, n);
    if (!at)
        return;
    memcpy(at, data, n);
    g->len += n;
}
