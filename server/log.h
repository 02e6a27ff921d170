/*
 * log.h: the daemon's diagnostics to stderr, filtered by verbosity
 * (-v errors and warnings, -vv client commands, -vvv internal detail).
 * Owns the current verbosity, which the "verbosity" command changes at run
 * time. Must not be used for protocol replies.
 */
#ifndef MCR_LOG_H
#define MCR_LOG_H

enum log_level {
    LOG_ALWAYS = 0, /* start-up failures and warnings about ignored options */
    LOG_WARN = 1,   /* -v */
    LOG_CMDS = 2,   /* -vv */
    LOG_DEBUG = 3,  /* -vvv */
};

#define LOG_MAX_VERBOSITY 3

void log_set_verbosity(int level);
int log_verbosity(void);
/* True when messages of `level` would be printed (cheap, for hot paths). */
static inline int log_enabled(int level)
{
    return log_verbosity() >= level;
}
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
