#pragma once
/*
 * Sealed secrets: values encrypted to space-gw's public key, so the api
 * (which stores them) cannot read them back, the node (which carries them in
 * a policy) cannot either, and only space-gw, holding the private key, opens
 * them.
 *
 *   <dir>/secrets.key  X25519 private key, PEM PKCS#8, 0600, created with O_EXCL
 *   <dir>/secrets.pub  its SubjectPublicKeyInfo PEM, 0644
 *
 * The sealed form is one printable string:
 *
 *   "s1." BASE64(eph_pub[32] || nonce[12] || ciphertext || tag[16])
 *
 * eph_pub is a fresh X25519 key per seal; the 44 bytes of
 * HKDF-SHA256(ikm = X25519(eph, recipient), salt = eph_pub || recipient_pub,
 * info = "space-secret-v1") are the AES-256-GCM key (32) and nonce (12), as
 * HPKE derives its base nonce. Both are unique per seal because eph is; the
 * nonce is also written out, so that the opener can tell "sealed to another
 * key" (its own derivation gives another nonce) from "tampered" (the tag
 * fails). The GCM additional data is aad: the secret's name as it appears in
 * the policy's "secrets" map, so a sealed value cannot be moved to another
 * name.
 *
 * No state: safe from any thread.
 */
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#define SEALED_SECRET_MAX_VALUE 16384 /* plaintext bytes; api answers 413 above it */
#define SEALED_SECRET_PREFIX "s1."
#define SEALED_SECRET_KEY_FILE "secrets.key"
#define SEALED_SECRET_PUB_FILE "secrets.pub"
/* The longest sealed string (without NUL) for the largest value. */
#define SEALED_SECRET_MAX_SEALED                                                                   \
    (sizeof(SEALED_SECRET_PREFIX) - 1 + (32 + 12 + SEALED_SECRET_MAX_VALUE + 16 + 2) / 3 * 4)

/*
 * Creates dir/secrets.key (0600) and dir/secrets.pub (0644) unless both
 * exist; never overwrites. A key without its .pub gets the .pub written from
 * it; a .pub without its key, or a pair that does not match, is -EINVAL
 * (sealed values may already exist for that public key). Returns 0,
 * -EINVAL, -EIO (OpenSSL failed) or -errno.
 */
int sealed_secret_keygen(const char *dir);

/* Loads an X25519 public (SPKI PEM) or private (PKCS#8 PEM) key; *ret is a new
 * reference (EVP_PKEY_free). Returns 0, -EINVAL (not an X25519 key) or -errno. */
int sealed_secret_load_public(const char *path, EVP_PKEY **ret);
int sealed_secret_load_private(const char *path, EVP_PKEY **ret);

/*
 * Seals value[0..n) to pub (an X25519 public or private key) under aad (a
 * NUL-terminated name, not NULL). *ret is a malloc'd NUL-terminated string.
 * Returns 0, -EINVAL (bad key or aad), -E2BIG (n > SEALED_SECRET_MAX_VALUE),
 * -ENOMEM or -EIO.
 */
int sealed_secret_seal(EVP_PKEY *pub, const char *aad, const void *value, size_t n, char **ret);

/*
 * Opens sealed with priv under aad. On success *ret is a malloc'd copy of the
 * value (one NUL byte after it, not counted in *ret_n) which callers
 * explicit_bzero() when done. Returns 0, -EBADMSG for anything malformed
 * (prefix, base64, length, an invalid ephemeral key), tampered or sealed under
 * another aad, -EKEYREJECTED when it was sealed to another key (an altered
 * eph_pub or nonce looks the same: both fail the nonce check), -EINVAL for a
 * NULL argument or a priv that is not an X25519 private key, -ENOMEM or -EIO.
 */
int sealed_secret_open(EVP_PKEY *priv, const char *aad, const char *sealed, uint8_t **ret,
                       size_t *ret_n);
