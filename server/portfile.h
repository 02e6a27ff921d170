/* portfile.h: the port file memcached writes when MEMCACHED_PORT_FILENAME
 * is set: every listener appends its line to NAME.lck, and the last one to
 * open renames it to NAME, so the file appears complete. */
#ifndef MCR_PORTFILE_H
#define MCR_PORTFILE_H

#include <stdbool.h>
#include <stdio.h>

struct portfile {
    FILE *f; /* NULL when the variable is not set (or NAME.lck cannot open) */
    const char *name;
    char lockname[4096];
};

/* Opens NAME.lck for appending when MEMCACHED_PORT_FILENAME names a file. */
void portfile_open(struct portfile *pf);
/* Closes it; `complete` renames NAME.lck to NAME (the last listeners). */
void portfile_close(struct portfile *pf, bool complete);

#endif
