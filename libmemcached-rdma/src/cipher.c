/* cipher.c: memcached_set_encoding_key and the value encryption behind it
 * (cipher.h). */
#include "cipher.h"

#include <limits.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

#define CIPHER_KEY_BYTES 32
#define CIPHER_IV_BYTES 16
#define CIPHER_KDF_ROUNDS 5

struct lmr_cipher {
    unsigned char key[CIPHER_KEY_BYTES];
    unsigned char iv[CIPHER_IV_BYTES];
};

struct lmr_cipher *lmr_cipher_new(const char *key, size_t key_length)
{
    if (key_length > INT_MAX)
        return NULL;
    struct lmr_cipher *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    unsigned char derived_key[EVP_MAX_KEY_LENGTH];
    unsigned char derived_iv[EVP_MAX_IV_LENGTH];
    if (EVP_BytesToKey(EVP_aes_256_cbc(), EVP_sha256(), NULL, (const unsigned char *)key,
                       (int)key_length, CIPHER_KDF_ROUNDS, derived_key,
                       derived_iv) != CIPHER_KEY_BYTES) {
        free(c);
        return NULL;
    }
    /* libmemcached keys AES with the caller's bytes themselves (reading 32
     * of them whatever the length), the derived key going unused */
    memcpy(c->key, key, key_length < CIPHER_KEY_BYTES ? key_length : CIPHER_KEY_BYTES);
    memcpy(c->iv, derived_iv, CIPHER_IV_BYTES);
    return c;
}

struct lmr_cipher *lmr_cipher_copy(const struct lmr_cipher *c)
{
    struct lmr_cipher *copy = malloc(sizeof(*copy));
    if (copy != NULL)
        memcpy(copy, c, sizeof(*copy));
    return copy;
}

void lmr_cipher_free(struct lmr_cipher *c)
{
    if (c != NULL)
        memset(c, 0, sizeof(*c));
    free(c);
}

/* One pass of AES-256-CBC in either direction. */
static bool run(const struct lmr_cipher *c, bool encrypt, const char *in, size_t length, char **out,
                size_t *out_length)
{
    *out = NULL;
    *out_length = 0;
    if (length > INT_MAX - 2 * CIPHER_IV_BYTES)
        return false;
    char *buf = malloc(length + CIPHER_IV_BYTES + 1);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int done = 0, last = 0;
    bool ok =
        buf != NULL && ctx != NULL &&
        EVP_CipherInit_ex(ctx, EVP_aes_256_cbc(), NULL, c->key, c->iv, encrypt ? 1 : 0) == 1 &&
        EVP_CipherUpdate(ctx, (unsigned char *)buf, &done, (const unsigned char *)in,
                         (int)length) == 1 &&
        EVP_CipherFinal_ex(ctx, (unsigned char *)buf + done, &last) == 1;
    EVP_CIPHER_CTX_free(ctx);
    if (!ok) {
        free(buf);
        return false;
    }
    buf[done + last] = '\0';
    *out = buf;
    *out_length = (size_t)done + (size_t)last;
    return true;
}

bool lmr_cipher_encrypt(const struct lmr_cipher *c, const char *in, size_t length, char **out,
                        size_t *out_length)
{
    return run(c, true, in, length, out, out_length);
}

bool lmr_cipher_decrypt(const struct lmr_cipher *c, const char *in, size_t length, char **out,
                        size_t *out_length)
{
    if (length == 0 || length % CIPHER_IV_BYTES != 0)
        return false;
    return run(c, false, in, length, out, out_length);
}

memcached_return_t memcached_set_encoding_key(memcached_st *ptr, const char *str, size_t length)
{
    struct lmr_client *c = lmr_client_of(ptr);
    if (c == NULL)
        return MEMCACHED_INVALID_ARGUMENTS;
    struct lmr_cipher *cipher = NULL;
    if (str != NULL && length > 0) {
        cipher = lmr_cipher_new(str, length);
        if (cipher == NULL)
            return lmr_client_result(c, MEMCACHED_MEMORY_ALLOCATION_FAILURE,
                                     "the encoding key could not be set up");
    }
    lmr_cipher_free(c->cipher);
    c->cipher = cipher;
    return lmr_client_result(c, MEMCACHED_SUCCESS, NULL);
}
