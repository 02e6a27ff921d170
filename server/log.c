/*
 * log.c: verbosity-filtered messages to stderr. One atomic integer holds
 * the level so the "verbosity" command may change it while workers log.
 */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

static atomic_int current_verbosity;

void log_set_verbosity(int level)
{
    if (level < 0)
        level = 0;
    if (level > LOG_MAX_VERBOSITY)
        level = LOG_MAX_VERBOSITY;
    atomic_store_explicit(&current_verbosity, level, memory_order_relaxed);
}

int log_verbosity(void)
{
    return atomic_load_explicit(&current_verbosity, memory_order_relaxed);
}

void log_msg(int level, const char *fmt, ...)
{
    if (log_verbosity() < level)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    /* one write per message so lines from several threads do not mix */
    fprintf(stderr, "%s\n", line);
}
