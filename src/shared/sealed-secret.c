/*
 * Sealed secrets (sealed-secret.h): X25519 + HKDF-SHA256 + AES-256-GCM with
 * OpenSSL 3's EVP interfaces, the keypair in two PEM files.
 */
#include "shared/sealed-secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/pem.h>

#include "basic/base64.h"
#include "basic/fd-util.h"

#define KEY_LEN 32
#define NONCE_LEN 12
#define TAG_LEN 16
#define OVERHEAD (KEY_LEN + NONCE_LEN + TAG_LEN)
#define INFO "space-secret-v1"

static bool is_x25519(EVP_PKEY *k)
{
    return k && EVP_PKEY_is_a(k, "X25519");
}

static bool has_private(EVP_PKEY *k)
{
    uint8_t b[KEY_LEN];
    size_t n = sizeof(b);
    bool ok = EVP_PKEY_get_raw_private_key(k, b, &n) == 1 && n == KEY_LEN;

    OPENSSL_cleanse(b, sizeof(b));
    return ok;
}

static int raw_public(EVP_PKEY *k, uint8_t out[KEY_LEN])
{
    size_t n = KEY_LEN;

    if (EVP_PKEY_get_raw_public_key(k, out, &n) != 1 || n != KEY_LEN) {
        return -EIO;
    }
    return 0;
}

/* X25519(own, peer) -> HKDF -> key[32] || nonce[12]. -EBADMSG when the
 * exchange fails (OpenSSL refuses a peer key that gives the all-zero secret). */
static int derive(EVP_PKEY *own, EVP_PKEY *peer, const uint8_t eph_pub[KEY_LEN],
                  const uint8_t recipient_pub[KEY_LEN], uint8_t okm[KEY_LEN + NONCE_LEN])
{
    uint8_t shared[KEY_LEN], salt[2 * KEY_LEN];
    size_t shared_len = sizeof(shared);
    EVP_PKEY_CTX *pctx = EVP_PKEY_CTX_new(own, NULL);
    EVP_KDF *kdf = NULL;
    EVP_KDF_CTX *kctx = NULL;
    int r = -EIO;

    if (!pctx) {
        return -ENOMEM;
    }
    if (EVP_PKEY_derive_init(pctx) != 1 || EVP_PKEY_derive_set_peer(pctx, peer) != 1 ||
        EVP_PKEY_derive(pctx, shared, &shared_len) != 1 || shared_len != sizeof(shared)) {
        r = -EBADMSG;
        goto out;
    }
    memcpy(salt, eph_pub, KEY_LEN);
    memcpy(salt + KEY_LEN, recipient_pub, KEY_LEN);

    kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
    kctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
    if (!kctx) {
        goto out;
    }
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, shared, sizeof(shared)),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, salt, sizeof(salt)),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (char *)INFO, strlen(INFO)),
        OSSL_PARAM_construct_end(),
    };
    if (EVP_KDF_derive(kctx, okm, KEY_LEN + NONCE_LEN, params) != 1) {
        goto out;
    }
    r = 0;
out:
    OPENSSL_cleanse(shared, sizeof(shared));
    EVP_KDF_CTX_free(kctx);
    EVP_KDF_free(kdf);
    EVP_PKEY_CTX_free(pctx);
    return r;
}

/* AES-256-GCM over in[0..n) into out (n bytes); tag read (decrypt) or written. */
static int gcm(bool encrypt, const uint8_t okm[KEY_LEN + NONCE_LEN], const char *aad,
               const uint8_t *in, size_t n, uint8_t *out, uint8_t tag[TAG_LEN])
{
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int len, r = -EIO;

    if (!c) {
        return -ENOMEM;
    }
    if (n > INT32_MAX ||
        EVP_CipherInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL, encrypt ? 1 : 0) != 1 ||
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) != 1 ||
        EVP_CipherInit_ex(c, NULL, NULL, okm, okm + KEY_LEN, -1) != 1 ||
        EVP_CipherUpdate(c, NULL, &len, (const uint8_t *)aad, (int)strlen(aad)) != 1 ||
        EVP_CipherUpdate(c, out, &len, in, (int)n) != 1) {
        goto out;
    }
    if (encrypt) {
        if (EVP_CipherFinal_ex(c, out + len, &len) != 1 ||
            EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, TAG_LEN, tag) != 1) {
            goto out;
        }
    } else {
        if (EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, TAG_LEN, tag) != 1) {
            goto out;
        }
        if (EVP_CipherFinal_ex(c, out + len, &len) != 1) {
            r = -EBADMSG;
            goto out;
        }
    }
    r = 0;
out:
    EVP_CIPHER_CTX_free(c);
    return r;
}

int sealed_secret_seal(EVP_PKEY *pub, const char *aad, const void *value, size_t n, char **ret)
{
    uint8_t rpub[KEY_LEN], okm[KEY_LEN + NONCE_LEN];
    uint8_t *blob = NULL;
    EVP_PKEY *eph = NULL;
    char *s = NULL;
    size_t blob_len = OVERHEAD + n;
    int r;

    if (!is_x25519(pub) || !aad || !ret || (n > 0 && !value)) {
        return -EINVAL;
    }
    if (n > SEALED_SECRET_MAX_VALUE) {
        return -E2BIG;
    }
    r = raw_public(pub, rpub);
    if (r < 0) {
        return r;
    }
    blob = malloc(blob_len);
    s = malloc(sizeof(SEALED_SECRET_PREFIX) + base64_encoded_len(blob_len));
    eph = EVP_PKEY_Q_keygen(NULL, NULL, "X25519");
    if (!blob || !s || !eph) {
        r = blob && s ? -EIO : -ENOMEM;
        goto out;
    }
    r = raw_public(eph, blob);
    if (r < 0) {
        goto out;
    }
    r = derive(eph, pub, blob, rpub, okm);
    if (r < 0) {
        r = r == -EBADMSG ? -EINVAL : r; /* our own fresh key: the recipient's is bad */
        goto out;
    }
    memcpy(blob + KEY_LEN, okm + KEY_LEN, NONCE_LEN);
    r = gcm(true, okm, aad, value, n, blob + KEY_LEN + NONCE_LEN, blob + KEY_LEN + NONCE_LEN + n);
    if (r < 0) {
        goto out;
    }
    memcpy(s, SEALED_SECRET_PREFIX, sizeof(SEALED_SECRET_PREFIX) - 1);
    base64_encode(blob, blob_len, s + sizeof(SEALED_SECRET_PREFIX) - 1);
    *ret = s;
    s = NULL;
    r = 0;
out:
    OPENSSL_cleanse(okm, sizeof(okm));
    EVP_PKEY_free(eph);
    free(blob);
    free(s);
    return r;
}

int sealed_secret_open(EVP_PKEY *priv, const char *aad, const char *sealed, uint8_t **ret,
                       size_t *ret_n)
{
    const size_t plen = sizeof(SEALED_SECRET_PREFIX) - 1;
    uint8_t rpub[KEY_LEN], okm[KEY_LEN + NONCE_LEN];
    uint8_t *blob = NULL, *out = NULL;
    EVP_PKEY *eph = NULL;
    size_t len, n;
    long dlen;
    int r;

    if (!is_x25519(priv) || !has_private(priv) || !aad || !sealed || !ret || !ret_n) {
        return -EINVAL;
    }
    if (strncmp(sealed, SEALED_SECRET_PREFIX, plen) != 0) {
        return -EBADMSG;
    }
    len = strnlen(sealed + plen, SEALED_SECRET_MAX_SEALED + 1);
    if (len > SEALED_SECRET_MAX_SEALED - plen) {
        return -EBADMSG;
    }
    blob = malloc(len / 4 * 3 + 3);
    if (!blob) {
        return -ENOMEM;
    }
    dlen = base64_decode(sealed + plen, len, blob);
    if (dlen < (long)OVERHEAD || dlen > (long)(OVERHEAD + SEALED_SECRET_MAX_VALUE)) {
        r = -EBADMSG;
        goto out;
    }
    n = (size_t)dlen - OVERHEAD;
    r = raw_public(priv, rpub);
    if (r < 0) {
        goto out;
    }
    eph = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, blob, KEY_LEN);
    if (!eph) {
        r = -EBADMSG;
        goto out;
    }
    r = derive(priv, eph, blob, rpub, okm);
    if (r < 0) {
        goto out;
    }
    /* Sealed to us, the nonce is the one our derivation gives (header). */
    if (CRYPTO_memcmp(okm + KEY_LEN, blob + KEY_LEN, NONCE_LEN) != 0) {
        r = -EKEYREJECTED;
        goto out;
    }
    out = malloc(n + 1);
    if (!out) {
        r = -ENOMEM;
        goto out;
    }
    r = gcm(false, okm, aad, blob + KEY_LEN + NONCE_LEN, n, out, blob + KEY_LEN + NONCE_LEN + n);
    if (r < 0) {
        OPENSSL_cleanse(out, n + 1);
        free(out);
        out = NULL;
        goto out;
    }
    out[n] = 0;
    *ret = out;
    *ret_n = n;
    out = NULL;
    r = 0;
out:
    OPENSSL_cleanse(okm, sizeof(okm));
    if (blob) {
        /* The ciphertext only, but keep no trace of what passed here. */
        OPENSSL_cleanse(blob, len / 4 * 3 + 3);
    }
    free(blob);
    EVP_PKEY_free(eph);
    return r;
}

static int load(const char *path, bool private, EVP_PKEY **ret)
{
    EVP_PKEY *k;
    FILE *f;

    if (!path || !ret) {
        return -EINVAL;
    }
    f = fopen(path, "re");
    if (!f) {
        return -errno;
    }
    k = private ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : PEM_read_PUBKEY(f, NULL, NULL, NULL);
    fclose(f);
    if (!is_x25519(k)) {
        EVP_PKEY_free(k);
        return -EINVAL;
    }
    *ret = k;
    return 0;
}

int sealed_secret_load_public(const char *path, EVP_PKEY **ret)
{
    return load(path, false, ret);
}

int sealed_secret_load_private(const char *path, EVP_PKEY **ret)
{
    return load(path, true, ret);
}

/* Writes k (private or its public half) to a new file of that mode; never replaces one. */
static int write_new(const char *path, EVP_PKEY *k, bool private, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    FILE *f;
    int ok;

    if (fd < 0) {
        return -errno;
    }
    if (fchmod(fd, mode) < 0) { /* whatever the umask */
        int r = -errno;
        close_safe(fd);
        (void)unlink(path);
        return r;
    }
    f = fdopen(fd, "w");
    if (!f) {
        int r = -errno;
        close_safe(fd);
        (void)unlink(path);
        return r;
    }
    ok = private ? PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL) : PEM_write_PUBKEY(f, k);
    if (ok != 1 || fflush(f) != 0 || fsync(fileno(f)) < 0) {
        fclose(f);
        (void)unlink(path);
        return -EIO;
    }
    fclose(f);
    return 0;
}

static bool same_public(EVP_PKEY *a, EVP_PKEY *b)
{
    uint8_t x[KEY_LEN], y[KEY_LEN];

    return raw_public(a, x) == 0 && raw_public(b, y) == 0 && memcmp(x, y, KEY_LEN) == 0;
}

int sealed_secret_keygen(const char *dir)
{
    char key_path[4096], pub_path[4096];
    EVP_PKEY *key = NULL, *pub = NULL;
    int r;

    if (!dir || snprintf(key_path, sizeof(key_path), "%s/%s", dir, SEALED_SECRET_KEY_FILE) >=
                    (int)sizeof(key_path)) {
        return -EINVAL;
    }
    snprintf(pub_path, sizeof(pub_path), "%s/%s", dir, SEALED_SECRET_PUB_FILE);

    if (access(key_path, F_OK) < 0) {
        if (errno != ENOENT) {
            return -errno;
        }
        if (access(pub_path, F_OK) == 0) {
            return -EINVAL; /* a public key whose private half is gone: never replace it */
        }
        key = EVP_PKEY_Q_keygen(NULL, NULL, "X25519");
        if (!key) {
            return -EIO;
        }
        /* The key first, exclusively: a racing process loads ours instead. */
        r = write_new(key_path, key, true, 0600);
        EVP_PKEY_free(key);
        key = NULL;
        if (r < 0 && r != -EEXIST) {
            return r;
        }
    }
    r = sealed_secret_load_private(key_path, &key);
    if (r < 0) {
        return r;
    }
    r = write_new(pub_path, key, false, 0644);
    if (r == -EEXIST) {
        r = sealed_secret_load_public(pub_path, &pub);
        if (r == 0 && !same_public(key, pub)) {
            r = -EINVAL;
        }
    }
    EVP_PKEY_free(pub);
    EVP_PKEY_free(key);
    return r;
}
