/* t/libmc/keyspace.c: virtual buckets (memcached_bucket_set), hashkit
 * objects (memcached_get_hashkit / memcached_set_hashkit) and encrypted
 * values (memcached_set_encoding_key) over three real servers
 * ($MC_SERVER). The ciphertext on the server is checked against OpenSSL
 * directly. Also built against Debian's libmemcached (keyspace_ref,
 * REFERENCE_LIBMEMCACHED defined): every check not marked OURS holds there,
 * which makes the placement and the stored bytes the same in both. */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmemcached/memcached.h>

#include "server.h"
#include "tap.h"
#include "test_util.h"

enum { SERVERS = 3 };

static memcached_st *client(struct test_server *s, int n)
{
    memcached_st *memc = memcached_create(NULL);
    for (int i = 0; i < n; i++)
        memcached_server_add(memc, "127.0.0.1", (in_port_t)s[i].port);
    return memc;
}

/* Index of the server that holds key, -1 none, -2 several. */
static int holder(struct test_server *s, const char *key)
{
    int found = -1;
    for (int i = 0; i < SERVERS; i++) {
        memcached_st *one = client(s + i, 1);
        if (memcached_exist(one, key, strlen(key)) == MEMCACHED_SUCCESS)
            found = found == -1 ? i : -2;
        memcached_free(one);
    }
    return found;
}

static int index_of(struct test_server *s, const memcached_instance_st *srv)
{
    for (int i = 0; srv != NULL && i < SERVERS; i++)
        if (memcached_server_port(srv) == s[i].port)
            return i;
    return -1;
}

static void buckets(struct test_server *s)
{
    memcached_st *memc = client(s, SERVERS);
    const uint32_t hosts[8] = {2, 0, 1, 2, 2, 1, 0, 0};
    is_rc(memcached_bucket_set(NULL, hosts, NULL, 8, 0), MEMCACHED_INVALID_ARGUMENTS,
          "bucket_set: no memcached_st");
    is_rc(memcached_bucket_set(memc, NULL, NULL, 8, 0), MEMCACHED_INVALID_ARGUMENTS,
          "bucket_set: no host map");
    is_rc(memcached_bucket_set(memc, hosts, NULL, 0, 0), MEMCACHED_INVALID_ARGUMENTS,
          "bucket_set: no buckets");
    ok(memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_DISTRIBUTION) ==
           MEMCACHED_DISTRIBUTION_MODULA,
       "refused calls leave the distribution");
    is_rc(memcached_bucket_set(memc, hosts, NULL, 8, 1), MEMCACHED_SUCCESS, "bucket_set");
    ok(memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_DISTRIBUTION) ==
           MEMCACHED_DISTRIBUTION_VIRTUAL_BUCKET,
       "the distribution is VIRTUAL_BUCKET");
    int placed = 0, stored = 0, used[SERVERS] = {0};
    enum { KEYS = 40 };
    for (int k = 0; k < KEYS; k++) {
        char key[32];
        snprintf(key, sizeof(key), "bucket-key-%d", k);
        uint32_t hash = memcached_generate_hash_value(key, strlen(key), MEMCACHED_HASH_DEFAULT);
        int want = (int)hosts[hash & 7];
        memcached_return_t rc;
        placed += index_of(s, memcached_server_by_key(memc, key, strlen(key), &rc)) == want;
        memcached_set(memc, key, strlen(key), "v", 1, 0, 0);
        int at = holder(s, key);
        stored += at == want;
        if (at >= 0)
            used[at]++;
    }
    ok(placed == KEYS, "server_by_key follows the host map (%d of %d)", placed, KEYS);
    ok(stored == KEYS, "sets land on the host map's server (%d of %d)", stored, KEYS);
    ok(used[0] > 0 && used[1] > 0 && used[2] > 0, "every server of the map takes keys");
    memcached_st *copy = memcached_clone(NULL, memc);
    memcached_return_t rc;
    if (OURS) /* libmemcached's clone drops the table (then masks by the server count) */
        ok(index_of(s, memcached_server_by_key(copy, "bucket-key-3", 12, &rc)) ==
               index_of(s, memcached_server_by_key(memc, "bucket-key-3", 12, &rc)),
           "a clone keeps the buckets");
    memcached_free(copy);
    memcached_free(memc);
}

static uint32_t calls;
static uint32_t by_last_digit(const char *key, size_t length, void *context)
{
    (*(uint32_t *)context)++;
    return length > 0 ? (uint32_t)(key[length - 1] - '0') : 0;
}

static void hashkit(struct test_server *s)
{
    memcached_st *memc = client(s, SERVERS);
    const hashkit_st *kit = memcached_get_hashkit(memc);
    ok(kit != NULL && kit->base_hash.function != NULL, "get_hashkit gives the key hash");
    if (kit != NULL && kit->base_hash.function != NULL)
        ok(kit->base_hash.function("some-key", 8, kit->base_hash.context) ==
               memcached_generate_hash_value("some-key", 8, MEMCACHED_HASH_DEFAULT),
           "its function is the default hash");
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_HASH, MEMCACHED_HASH_FNV1A_32);
    kit = memcached_get_hashkit(memc);
    ok(kit->base_hash.function("some-key", 8, kit->base_hash.context) ==
           memcached_generate_hash_value("some-key", 8, MEMCACHED_HASH_FNV1A_32),
       "after HASH=FNV1A_32 it is FNV1A_32");

    hashkit_st mine;
    memset(&mine, 0, sizeof(mine));
    mine.base_hash.function = by_last_digit;
    mine.base_hash.context = &calls;
    mine.distribution_hash = mine.base_hash;
    mine.flags.is_base_same_distributed = true;
    is_rc(memcached_set_hashkit(memc, &mine), MEMCACHED_SUCCESS, "set_hashkit with a function");
    ok(memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_HASH) == MEMCACHED_HASH_CUSTOM,
       "HASH reads CUSTOM");
    int placed = 0;
    uint32_t before = calls;
    for (int d = 0; d < 9; d++) {
        char key[16];
        snprintf(key, sizeof(key), "hk-%d", d);
        memcached_set(memc, key, strlen(key), "v", 1, 0, 0);
        placed += holder(s, key) == d % SERVERS;
    }
    ok(placed == 9, "keys go where the function says, modulo the servers (%d of 9)", placed);
    ok(calls > before, "the function gets its context");
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_HASH, MEMCACHED_HASH_DEFAULT);
    ok(memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_HASH) == MEMCACHED_HASH_DEFAULT,
       "setting HASH replaces the function");
    memcached_free(memc);
}

static const char long_key[] = "0123456789abcdef0123456789ABCDEF-and-more"; /* 41 bytes */

/* What the server should hold for plain under long_key (OpenSSL directly). */
static size_t expected_cipher(const char *plain, size_t length, unsigned char *out)
{
    unsigned char derived[EVP_MAX_KEY_LENGTH], iv[EVP_MAX_IV_LENGTH];
    EVP_BytesToKey(EVP_aes_256_cbc(), EVP_sha256(), NULL, (const unsigned char *)long_key,
                   (int)strlen(long_key), 5, derived, iv);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int n = 0, last = 0;
    EVP_EncryptInit_ex(ctx, EVP_aes_256_cbc(), NULL, (const unsigned char *)long_key, iv);
    EVP_EncryptUpdate(ctx, out, &n, (const unsigned char *)plain, (int)length);
    EVP_EncryptFinal_ex(ctx, out + n, &last);
    EVP_CIPHER_CTX_free(ctx);
    return (size_t)(n + last);
}

static void encryption(struct test_server *s, bool binary)
{
    memcached_st *memc = client(s, 1);
    memcached_st *raw = client(s, 1);
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, binary);
    const char *proto = binary ? "binary" : "text";
    is_rc(memcached_set_encoding_key(memc, long_key, strlen(long_key)), MEMCACHED_SUCCESS,
          "set_encoding_key");
    const char *plain = "a value that spans more than one block";
    is_rc(memcached_set(memc, "secret", 6, plain, strlen(plain), 0, 42), MEMCACHED_SUCCESS, proto);
    size_t length = 0;
    uint32_t flags = 0;
    memcached_return_t rc;
    char *stored = memcached_get(raw, "secret", 6, &length, &flags, &rc);
    unsigned char want[128];
    size_t want_length = expected_cipher(plain, strlen(plain), want);
    ok(stored != NULL && length == want_length && memcmp(stored, want, length) == 0,
       "%s: the server holds AES-256-CBC ciphertext (%zu bytes)", proto, length);
    ok(flags == 42, "%s: flags are stored as given", proto);
    free(stored);
    /* libmemcached encrypts over the binary protocol too but decrypts only
     * text replies: the binary checks of reading are ours */
    bool reads = OURS || !binary;
    char *value = memcached_get(memc, "secret", 6, &length, &flags, &rc);
    if (reads)
        ok(rc == MEMCACHED_SUCCESS && value != NULL && length == strlen(plain) &&
               memcmp(value, plain, length) == 0,
           "%s: get decrypts", proto);
    free(value);
    const char *keys[] = {"secret"};
    size_t key_lengths[] = {6};
    memcached_mget(memc, keys, key_lengths, 1);
    char key[MEMCACHED_MAX_KEY];
    size_t key_length;
    value = memcached_fetch(memc, key, &key_length, &length, &flags, &rc);
    if (reads)
        ok(rc == MEMCACHED_SUCCESS && value != NULL && length == strlen(plain) &&
               memcmp(value, plain, length) == 0,
           "%s: mget and fetch decrypt", proto);
    free(value);
    while ((value = memcached_fetch(memc, key, &key_length, &length, &flags, &rc)) != NULL)
        free(value);
    is_rc(memcached_append(memc, "secret", 6, "x", 1, 0, 0), MEMCACHED_NOT_SUPPORTED,
          "append is not supported while encrypting");
    is_rc(memcached_prepend(memc, "secret", 6, "x", 1, 0, 0), MEMCACHED_NOT_SUPPORTED,
          "prepend neither");
    is_rc(memcached_set(memc, "empty", 5, "", 0, 0, 0), MEMCACHED_SUCCESS,
          "an empty value is stored");
    value = memcached_get(memc, "empty", 5, &length, &flags, &rc);
    if (reads)
        ok(rc == MEMCACHED_SUCCESS && length == 0, "and reads back empty");
    free(value);

    /* a value stored by Debian's libmemcached is the same bytes: written
     * here through the raw client, read through the encrypting one */
    memcached_set(raw, "from-outside", 12, (const char *)want, want_length, 0, 0);
    value = memcached_get(memc, "from-outside", 12, &length, &flags, &rc);
    if (reads)
        ok(value != NULL && length == strlen(plain) && memcmp(value, plain, length) == 0,
           "%s: ciphertext made by OpenSSL directly decrypts", proto);
    free(value);
    if (OURS) {
        memcached_set(raw, "not-cipher", 10, "plain text", 10, 0, 0);
        value = memcached_get(memc, "not-cipher", 10, &length, &flags, &rc);
        ok(value == NULL && rc == MEMCACHED_FAILURE, "%s: a value that is no ciphertext: FAILURE",
           proto);
        free(value);
        memcached_st *copy = memcached_clone(NULL, memc);
        value = memcached_get(copy, "secret", 6, &length, &flags, &rc);
        ok(value != NULL && length == strlen(plain), "a clone keeps the key");
        free(value);
        memcached_free(copy);
        is_rc(memcached_set_encoding_key(memc, NULL, 0), MEMCACHED_SUCCESS, "a NULL key");
        is_rc(memcached_append(memc, "secret", 6, "x", 1, 0, 0), MEMCACHED_SUCCESS,
              "turns encryption off");
    }
    memcached_free(raw);
    memcached_free(memc);
}

int main(void)
{
    struct test_server s[SERVERS];
    for (int i = 0; i < SERVERS; i++)
        if (!test_server_start(&s[i], false)) {
            printf("1..0 # SKIP cannot start the servers\n");
            return 0;
        }
    buckets(s);
    hashkit(s);
    encryption(s, false);
    encryption(s, true);
    for (int i = 0; i < SERVERS; i++)
        test_server_stop(&s[i], false);
    return done_testing();
}
