/*
 * numbers.h: reading a command's numbers by memcached's rules (its
 * safe_strto* family), shared by the text and meta engines: decimal, the
 * whole token (a blank may follow it), no wrap checks beyond the C
 * library's overflow, negative values refused for the unsigned kinds.
 */
#ifndef MCR_NUMBERS_H
#define MCR_NUMBERS_H

#include <stdbool.h>
#include <stdint.h>

/* 64 bits unsigned. */
bool num_parse_u64(const char *str, uint64_t *out);
/* Read as 64 bits and kept in 32, as memcached stores an unsigned long
 * into its 32-bit fields (4294967297 reads as 1). */
bool num_parse_u32(const char *str, uint32_t *out);
/* Read as a long and kept in 32 bits, with no range check (4294967295
 * reads as -1, 4294967298 as 2), as memcached does. */
bool num_parse_i32(const char *str, int32_t *out);
bool num_parse_double(const char *str, double *out);

#endif
