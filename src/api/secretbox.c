/*
 * AES-256-GCM sealing of the secrets the store must give back (secretbox.h),
 * with OpenSSL's EVP interface, and the key file that holds the key.
 *
 * Why GCM with a random nonce: one key seals at most a few million values
 * over a deployment's life (one per sandbox), far below the 2^32 seals at
 * which random 96-bit nonces start to risk a collision, and GCM's tag makes
 * any change to the ciphertext, nonce or associated data fail to open. The
 * key file is created once with O_EXCL so two processes starting together
 * never each write their own key under one name.
 */
#include "api/secretbox.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/base64.h"
#include "basic/fd-util.h"
#include "basic/macro.h"
#include "basic/random-util.h"

#define NONCE_LEN 12
#define TAG_LEN 16
#define PREFIX "v1."

void secretbox_key_from_bytes(const uint8_t bytes[SECRETBOX_KEY_LEN], struct secretbox_key *ret)
{
    static const char label[] = "space-store-key-id"; /* hashed with its NUL */
    static const char hex[] = "0123456789abcdef";
    uint8_t in[sizeof(label) + SECRETBOX_KEY_LEN], md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;

    memcpy(ret->bytes, bytes, SECRETBOX_KEY_LEN);
    memcpy(in, label, sizeof(label));
    memcpy(in + sizeof(label), bytes, SECRETBOX_KEY_LEN);
    (void)EVP_Digest(in, sizeof(in), md, &n, EVP_sha256(), NULL);
    OPENSSL_cleanse(in, sizeof(in));
    for (size_t i = 0; i < SECRETBOX_KEY_ID_LEN / 2; i++) {
        ret->id[2 * i] = hex[md[i] >> 4];
        ret->id[2 * i + 1] = hex[md[i] & 15];
    }
    ret->id[SECRETBOX_KEY_ID_LEN] = '\0';
}

void secretbox_key_wipe(struct secretbox_key *key)
{
    if (key) {
        OPENSSL_cleanse(key, sizeof(*key));
    }
}

static int key_create(const char *path)
{
    uint8_t bytes[SECRETBOX_KEY_LEN];
    int fd, r;

    r = random_bytes(bytes, sizeof(bytes));
    if (r < 0) {
        return r;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        r = -errno;
        OPENSSL_cleanse(bytes, sizeof(bytes));
        return r; /* -EEXIST: another process made it first; the caller reads that one */
    }
    r = write_all(fd, bytes, sizeof(bytes));
    if (r >= 0) {
        r = NERRNO(fsync(fd));
    }
    OPENSSL_cleanse(bytes, sizeof(bytes));
    close_safe(fd);
    if (r < 0) {
        unlink(path);
    }
    return r;
}

int secretbox_key_load(const char *path, bool create, struct secretbox_key *ret)
{
    uint8_t bytes[SECRETBOX_KEY_LEN + 1];
    struct stat st;
    ssize_t n;
    int fd, r;

    if (!path || !ret) {
        return -EINVAL;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT && create) {
        r = key_create(path);
        if (r < 0 && r != -EEXIST) {
            return r;
        }
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    }
    if (fd < 0) {
        return -errno;
    }
    if (fstat(fd, &st) < 0) {
        r = -errno;
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        r = -EINVAL;
        goto out;
    }
    if (st.st_mode & 0077) {
        r = -EPERM;
        goto out;
    }
    /* One byte more than a key, to tell "32 bytes" from "at least 32". */
    n = read(fd, bytes, sizeof(bytes));
    while (n >= 0 && n < (ssize_t)sizeof(bytes)) {
        ssize_t m = read(fd, bytes + n, sizeof(bytes) - (size_t)n);
        if (m <= 0) {
            if (m < 0) {
                n = -1;
            }
            break;
        }
        n += m;
    }
    if (n < 0) {
        r = -errno;
    } else if (n != SECRETBOX_KEY_LEN) {
        r = -EINVAL;
    } else {
        secretbox_key_from_bytes(bytes, ret);
        r = 0;
    }
out:
    OPENSSL_cleanse(bytes, sizeof(bytes));
    close_safe(fd);
    return r;
}

int secretbox_seal(const struct secretbox_key *key, const char *aad, const char *plaintext,
                   char **ret)
{
    EVP_CIPHER_CTX *ctx = NULL;
    uint8_t *raw = NULL;
    char *out = NULL;
    size_t len, raw_len, prefix_len;
    int n = 0, r = -EIO;

    if (!key || !aad || !plaintext || !ret) {
        return -EINVAL;
    }
    len = strlen(plaintext);
    if (len > SECRETBOX_MAX_PLAINTEXT || strlen(aad) > SECRETBOX_MAX_PLAINTEXT) {
        return -EINVAL;
    }
    raw_len = NONCE_LEN + len + TAG_LEN;
    raw = malloc(raw_len);
    prefix_len = strlen(PREFIX) + SECRETBOX_KEY_ID_LEN + 1;
    out = malloc(prefix_len + base64_encoded_len(raw_len) + 1);
    ctx = EVP_CIPHER_CTX_new();
    if (!raw || !out || !ctx) {
        r = -ENOMEM;
        goto out;
    }
    r = random_bytes(raw, NONCE_LEN);
    if (r < 0) {
        goto out;
    }
    r = -EIO;
    if (EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) != 1 ||
        EVP_EncryptInit_ex(ctx, NULL, NULL, key->bytes, raw) != 1 ||
        EVP_EncryptUpdate(ctx, NULL, &n, (const uint8_t *)aad, (int)strlen(aad)) != 1 ||
        (len > 0 &&
         EVP_EncryptUpdate(ctx, raw + NONCE_LEN, &n, (const uint8_t *)plaintext, (int)len) != 1) ||
        EVP_EncryptFinal_ex(ctx, raw + NONCE_LEN + len, &n) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_LEN, raw + NONCE_LEN + len) != 1) {
        goto out;
    }
    snprintf(out, prefix_len + 1, PREFIX "%s.", key->id);
    base64_encode(raw, raw_len, out + prefix_len);
    *ret = TAKE_PTR(out);
    r = 0;
out:
    EVP_CIPHER_CTX_free(ctx);
    if (raw) {
        OPENSSL_cleanse(raw, raw_len);
    }
    free(raw);
    free(out);
    return r;
}

/* Splits "v1.KEYID.B64" and checks its shape; *ret_b64 points into sealed. */
static int parse_sealed(const char *sealed, char id[SECRETBOX_KEY_ID_LEN + 1], const char **ret_b64)
{
    const char *p;

    if (!sealed || strncmp(sealed, PREFIX, strlen(PREFIX)) != 0) {
        return -EBADMSG;
    }
    p = sealed + strlen(PREFIX);
    for (size_t i = 0; i < SECRETBOX_KEY_ID_LEN; i++) {
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f'))) {
            return -EBADMSG;
        }
    }
    if (p[SECRETBOX_KEY_ID_LEN] != '.') {
        return -EBADMSG;
    }
    memcpy(id, p, SECRETBOX_KEY_ID_LEN);
    id[SECRETBOX_KEY_ID_LEN] = '\0';
    *ret_b64 = p + SECRETBOX_KEY_ID_LEN + 1;
    return 0;
}

int secretbox_sealed_key_id(const char *sealed, char out[SECRETBOX_KEY_ID_LEN + 1])
{
    const char *b64;

    return parse_sealed(sealed, out, &b64);
}

int secretbox_open(const struct secretbox_key *key, const char *aad, const char *sealed, char **ret)
{
    char id[SECRETBOX_KEY_ID_LEN + 1];
    EVP_CIPHER_CTX *ctx = NULL;
    const char *b64;
    uint8_t *raw = NULL;
    char *plain = NULL;
    size_t b64_len, len = 0;
    long raw_len;
    int n = 0, r;

    if (!key || !aad || !sealed || !ret) {
        return -EINVAL;
    }
    r = parse_sealed(sealed, id, &b64);
    if (r < 0) {
        return r;
    }
    if (strcmp(id, key->id) != 0) {
        return -EKEYREJECTED;
    }
    b64_len = strlen(b64);
    if (b64_len > base64_encoded_len(NONCE_LEN + SECRETBOX_MAX_PLAINTEXT + TAG_LEN) ||
        strlen(aad) > SECRETBOX_MAX_PLAINTEXT) {
        return -EBADMSG;
    }
    raw = malloc(b64_len / 4 * 3 + 3);
    if (!raw) {
        return -ENOMEM;
    }
    raw_len = base64_decode(b64, b64_len, raw);
    r = -EBADMSG;
    if (raw_len < NONCE_LEN + TAG_LEN) {
        goto out;
    }
    /* One spelling per value: the decoder forgives missing padding and stray low bits,
     * we do not (re-encoding must give the text back). */
    plain = malloc(base64_encoded_len((size_t)raw_len) + 1);
    if (!plain) {
        r = -ENOMEM;
        goto out;
    }
    base64_encode(raw, (size_t)raw_len, plain);
    if (strcmp(plain, b64) != 0) {
        goto out;
    }
    free(plain);
    plain = NULL;
    len = (size_t)raw_len - NONCE_LEN - TAG_LEN;
    plain = malloc(len + 1);
    ctx = EVP_CIPHER_CTX_new();
    if (!plain || !ctx) {
        r = -ENOMEM;
        goto out;
    }
    if (EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) != 1 ||
        EVP_DecryptInit_ex(ctx, NULL, NULL, key->bytes, raw) != 1 ||
        EVP_DecryptUpdate(ctx, NULL, &n, (const uint8_t *)aad, (int)strlen(aad)) != 1 ||
        (len > 0 && EVP_DecryptUpdate(ctx, (uint8_t *)plain, &n, raw + NONCE_LEN, (int)len) != 1) ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_LEN, raw + NONCE_LEN + len) != 1 ||
        EVP_DecryptFinal_ex(ctx, (uint8_t *)plain + len, &n) != 1) {
        goto out; /* the tag did not match: another key, other aad, or changed bytes */
    }
    plain[len] = '\0';
    /* The store keeps text: a NUL inside would silently shorten the secret. */
    if (strlen(plain) != len) {
        goto out;
    }
    *ret = TAKE_PTR(plain);
    r = 0;
out:
    EVP_CIPHER_CTX_free(ctx);
    if (plain) {
        OPENSSL_cleanse(plain, len + 1);
    }
    free(plain);
    free(raw);
    return r;
}
