#pragma once
/*
 * API keys: `e2b_` + 40 lowercase hex (the shape E2B SDKs accept, e2b-compat.md §2.1).
 * Only the SHA-256 of a key is stored; the key is shown once, at creation.
 */
#include <stdbool.h>

#include "api/store.h"

#define AUTH_KEY_PREFIX "e2b_"
#define AUTH_KEY_HEX 40
#define AUTH_KEY_LEN (sizeof(AUTH_KEY_PREFIX) - 1 + AUTH_KEY_HEX)

/* Makes a new key named name; *ret_key (caller frees) is the only copy of the secret. */
int auth_key_create(struct store *s, const char *name, char **ret_key,
                    struct store_api_key *ret_row);
/* 0 when key is a valid, stored key (and records its use); -EACCES otherwise. */
int auth_key_verify(struct store *s, const char *key);
/* sha256 hex of data into out (65 bytes). */
void auth_sha256_hex(const char *data, char out[65]);
/* Constant-time string equality (for access tokens). */
bool auth_equal(const char *a, const char *b);
