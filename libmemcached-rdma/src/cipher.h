/* cipher.h: value encryption for memcached_set_encoding_key: AES-256-CBC
 * with PKCS#7 padding, the key's first 32 bytes (zero-filled when shorter)
 * as the AES key and the IV derived from the whole key by OpenSSL's
 * EVP_BytesToKey (SHA-256, no salt, 5 rounds): the bytes libmemcached 1.1
 * built with OpenSSL writes for keys of 32 bytes or more. No I/O here. */
#ifndef LMR_CIPHER_H
#define LMR_CIPHER_H

#include <stdbool.h>
#include <stddef.h>

struct lmr_cipher;

/* NULL on ENOMEM or an OpenSSL failure. */
struct lmr_cipher *lmr_cipher_new(const char *key, size_t key_length);
struct lmr_cipher *lmr_cipher_copy(const struct lmr_cipher *c);
void lmr_cipher_free(struct lmr_cipher *c);

/* *out: a malloc'd buffer of *out_length bytes plus a NUL. False on ENOMEM
 * or, when decrypting, bytes that are no ciphertext of this key. */
bool lmr_cipher_encrypt(const struct lmr_cipher *c, const char *in, size_t length, char **out,
                        size_t *out_length);
bool lmr_cipher_decrypt(const struct lmr_cipher *c, const char *in, size_t length, char **out,
                        size_t *out_length);

#endif
