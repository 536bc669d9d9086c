#pragma once
/* SHA-256 (FIPS 180-4) for /files signatures: the guest agent does not link OpenSSL. */
#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_SIZE 32

struct sha256 {
    uint32_t h[8];
    uint64_t len;
    uint8_t buf[64];
    size_t used;
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
void sha256_final(struct sha256 *s, uint8_t out[SHA256_DIGEST_SIZE]);
void sha256_digest(const void *data, size_t len, uint8_t out[SHA256_DIGEST_SIZE]);
