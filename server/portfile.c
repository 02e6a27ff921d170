/* portfile.c: the MEMCACHED_PORT_FILENAME port file (see portfile.h). */
#include "portfile.h"

#include <stdlib.h>

void portfile_open(struct portfile *pf)
{
    pf->f = NULL;
    pf->lockname[0] = '\0';
    pf->name = getenv("MEMCACHED_PORT_FILENAME");
    if (!pf->name)
        return;
    snprintf(pf->lockname, sizeof(pf->lockname), "%s.lck", pf->name);
    pf->f = fopen(pf->lockname, "a");
}

void portfile_close(struct portfile *pf, bool complete)
{
    if (!pf->f)
        return;
    fclose(pf->f);
    pf->f = NULL;
    if (complete)
        rename(pf->lockname, pf->name);
}
