/* hash_md5.h: the MD5 message digest (RFC 1321), used by the MD5 key hash and
 * by the weighted ketama continuum. Only the one-shot digest; no streaming
 * interface and no other use (MD5 is not a security primitive here). */
#ifndef LMR_HASH_MD5_H
#define LMR_HASH_MD5_H

#include <stddef.h>

enum { LMR_MD5_DIGEST_LEN = 16 };

/* Writes the 16-byte MD5 digest of data[0..len) to digest. */
void lmr_md5_digest(const void *data, size_t len, unsigned char digest[LMR_MD5_DIGEST_LEN]);

#endif
