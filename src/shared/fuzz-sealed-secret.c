/*
 * libFuzzer target for sealed_secret_open() (sealed-secret.h), which space-gw
 * runs on every "secrets" map a policy brings. The first input byte picks the
 * shape: even, the rest is the sealed string as given (prefix, base64,
 * lengths); odd, the rest is the decoded envelope, re-encoded behind "s1.",
 * so the fuzzer reaches the key exchange, the nonce check and GCM. The
 * private key is fixed, so one -seed gives one run; every open must fail
 * cleanly or return at most SEALED_SECRET_MAX_VALUE bytes.
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "basic/base64.h"
#include "shared/sealed-secret.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The key the seed corpus was sealed to (tests/fuzz/fuzz-sealed-secret/README). */
static const uint8_t fixed_key[32] = {
    0x77, 0x07, 0x6d, 0x0a, 0x73, 0x18, 0xa5, 0x7d, 0x3c, 0x16, 0xc1, 0x72, 0x51, 0xb2, 0x66, 0x45,
    0xdf, 0x4c, 0x2f, 0x87, 0xeb, 0xc0, 0x99, 0x2a, 0xb1, 0x77, 0xfb, 0xa5, 0x1d, 0xb9, 0x2c, 0x2a,
};

static EVP_PKEY *priv;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *out = NULL;
    size_t out_n = 0;
    char *s;
    int r;

    if (!priv) {
        priv = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, fixed_key, sizeof(fixed_key));
        assert(priv);
    }
    if (size < 1) {
        return 0;
    }
    if (data[0] & 1) {
        s = malloc(3 + base64_encoded_len(size - 1) + 1);
        assert(s);
        memcpy(s, "s1.", 3);
        base64_encode(data + 1, size - 1, s + 3);
    } else {
        s = malloc(size);
        assert(s);
        memcpy(s, data + 1, size - 1);
        s[size - 1] = 0;
    }
    r = sealed_secret_open(priv, "gh", s, &out, &out_n);
    assert(r == 0 || r == -EBADMSG || r == -EKEYREJECTED);
    if (r == 0) {
        assert(out_n <= SEALED_SECRET_MAX_VALUE);
        assert(out[out_n] == 0);
        free(out);
    } else {
        assert(!out);
    }
    free(s);
    return 0;
}
