/*
 * growbuf.h: a byte buffer that grows by doubling, for replies assembled
 * before they are queued (stats, dumps). An allocation failure is sticky:
 * later appends do nothing and `oom` tells the caller to answer an error.
 */
#ifndef MCR_GROWBUF_H
#define MCR_GROWBUF_H

#include <stdbool.h>
#include <stddef.h>

struct growbuf {
    char *buf;
    size_t len, cap;
    bool oom;
};

void growbuf_append(struct growbuf *g, const void *data, size_t n);
/* Room for n more bytes at buf + len (the caller writes there and adds
 * what it wrote to len); NULL once out of memory. */
char *growbuf_reserve(struct growbuf *g, size_t n);

#endif
