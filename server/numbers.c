/*
 * numbers.c: memcached's rules for a command's numbers (numbers.h).
 */
#include "numbers.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A number ends the token: at a blank (space, tab, \r, \n, \v, \f) or at
 * the token's end, with at least one character read. */
static bool ends_number(const char *end, const char *start)
{
    return end != start && (isspace((unsigned char)*end) || *end == '\0');
}

/* True when a '-' came before end: strtoull and strtoul accept "-1" as
 * the largest value, which memcached refuses. */
static bool negative(const char *start, const char *end)
{
    return memchr(start, '-', (size_t)(end - start)) != NULL;
}

bool num_parse_u64(const char *str, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(str, &end, 10);
    if (errno == ERANGE || !ends_number(end, str))
        return false;
    if ((long long)v < 0 && negative(str, end))
        return false;
    *out = v;
    return true;
}

bool num_parse_u32(const char *str, uint32_t *out)
{
    uint64_t v;
    if (!num_parse_u64(str, &v))
        return false;
    *out = (uint32_t)v;
    return true;
}

bool num_parse_i32(const char *str, int32_t *out)
{
    char *end;
    errno = 0;
    long v = strtol(str, &end, 10);
    if (errno == ERANGE || !ends_number(end, str))
        return false;
    *out = (int32_t)(uint32_t)(unsigned long)v;
    return true;
}

bool num_parse_double(const char *str, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(str, &end);
    if (errno == ERANGE || !ends_number(end, str))
        return false;
    *out = v;
    return true;
}
