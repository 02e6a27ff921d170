/*
 * growbuf.c: the doubling byte buffer of growbuf.h. Knows no protocol.
 */
#include "growbuf.h"

#include <stdlib.h>
#include <string.h>

void growbuf_append(struct growbuf *g, const void *data, size_t n)
{
    if (g->oom)
        return;
    if (g->len + n > g->cap) {
        size_t cap = g->cap ? g->cap : 1024;
        while (cap < g->len + n)
            cap *= 2;
        char *b = realloc(g->buf, cap);
        if (!b) {
            g->oom = true;
            return;
        }
        g->buf = b;
        g->cap = cap;
    }
    memcpy(g->buf + g->len, data, n);
    g->len += n;
}
