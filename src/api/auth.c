/* API key creation and verification over the store; SHA-256 from OpenSSL. */
#include "api/auth.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

#include "basic/macro.h"
#include "basic/random-util.h"
#include "basic/time-util.h"

void auth_sha256_hex(const char *data, char out[65])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[32];
    unsigned int n = 0;

    EVP_Digest(data, strlen(data), md, &n, EVP_sha256(), NULL);
    for (unsigned i = 0; i < 32; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[64] = '\0';
}

bool auth_equal(const char *a, const char *b)
{
    size_t n = strlen(a);
    return n == strlen(b) && CRYPTO_memcmp(a, b, n) == 0;
}

int auth_key_create(struct store *s, const char *name, char **ret_key,
                    struct store_api_key *ret_row)
{
    char hex[AUTH_KEY_HEX + 1], key[AUTH_KEY_LEN + 1], hash[65], id[33], prefix[16];
    int r;

    r = random_hex(hex, AUTH_KEY_HEX / 2);
    if (r >= 0) {
        r = random_hex(id, 16);
    }
    if (r < 0) {
        return r;
    }
    snprintf(key, sizeof(key), AUTH_KEY_PREFIX "%s", hex);
    snprintf(prefix, sizeof(prefix), "%.12s", key);
    auth_sha256_hex(key, hash);
    struct store_api_key row = { .id = id,
                                 .name = (char *)name,
                                 .prefix = prefix,
                                 .hash = hash,
                                 .created_at = (int64_t)now_realtime() };
    r = store_api_key_insert(s, &row);
    if (r < 0) {
        return r;
    }
    *ret_key = strdup(key);
    if (!*ret_key) {
        return -ENOMEM;
    }
    if (ret_row) {
        *ret_row = (struct store_api_key){ .id = strdup(id),
                                           .name = strdup(name),
                                           .prefix = strdup(prefix),
                                           .hash = strdup(hash),
                                           .created_at = row.created_at };
    }
    return 0;
}

int auth_key_verify(struct store *s, const char *key)
{
    struct store_api_key row = { 0 };
    char hash[65];
    int r;

    if (!key || strlen(key) != AUTH_KEY_LEN || strncmp(key, AUTH_KEY_PREFIX, 4) != 0) {
        return -EACCES;
    }
    auth_sha256_hex(key, hash);
    r = store_api_key_get_by_hash(s, hash, &row);
    if (r < 0) {
        return r == -ENOENT ? -EACCES : r;
    }
    /* A write per request would cap the API at the store's commit rate: record use at
     * most once a minute per key. */
    int64_t now = (int64_t)now_realtime();
    if (now - row.last_used_at > 60 * (int64_t)USEC_PER_SEC) {
        (void)store_api_key_touch(s, row.id, now);
    }
    store_api_key_release(&row);
    return 0;
}
