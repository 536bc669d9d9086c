#pragma once
/*
 * Secrets the platform must hand back (envd access tokens), sealed at rest
 * (docs/security.md "Tokens at rest"): AES-256-GCM under a per-deployment
 * key that never enters the database, a fresh random 96-bit nonce per seal,
 * and associated data that names where the value lives (the store passes
 * the column and the row's sandbox id), so a sealed value copied into
 * another row does not open.
 *
 * Sealed text: "v1." KEYID "." BASE64(nonce[12] || ciphertext || tag[16]),
 * KEYID 16 hex chars naming the key (the first 8 bytes of
 * SHA-256("space-store-key-id\0" || key)), so a value sealed under another
 * key is told apart from a damaged one. Opening checks everything and fails
 * with an error, never a crash: -EKEYREJECTED for another key, -EBADMSG for
 * anything malformed, tampered or sealed with other associated data.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SECRETBOX_KEY_LEN 32
#define SECRETBOX_KEY_ID_LEN 16 /* hex chars */
/* The longest plaintext seal/open accept: tokens are short; keeps every size bounded. */
#define SECRETBOX_MAX_PLAINTEXT 4096

struct secretbox_key {
    uint8_t bytes[SECRETBOX_KEY_LEN];
    char id[SECRETBOX_KEY_ID_LEN + 1];
};

/* Builds a key from 32 bytes (computes its id). */
void secretbox_key_from_bytes(const uint8_t bytes[SECRETBOX_KEY_LEN], struct secretbox_key *ret);
/*
 * Reads a key file: exactly 32 bytes, a regular file that neither group nor
 * others may read (-EPERM otherwise: a key anyone can read protects nothing).
 * With create, a missing file is made (0600, O_EXCL, 32 bytes of getrandom(),
 * fsynced); without it a missing file is -ENOENT. -EINVAL for any other size.
 */
int secretbox_key_load(const char *path, bool create, struct secretbox_key *ret);
/* Wipes the key (OPENSSL_cleanse). */
void secretbox_key_wipe(struct secretbox_key *key);

/* Seals NUL-terminated plaintext; *ret is heap text (free()). -EINVAL when too long. */
int secretbox_seal(const struct secretbox_key *key, const char *aad, const char *plaintext,
                   char **ret);
/* Opens what secretbox_seal() made with the same key and aad; *ret is heap text (free()). */
int secretbox_open(const struct secretbox_key *key, const char *aad, const char *sealed,
                   char **ret);
/* Writes the key id a sealed text names into out (17 bytes); -EBADMSG when it names none. */
int secretbox_sealed_key_id(const char *sealed, char out[SECRETBOX_KEY_ID_LEN + 1]);
