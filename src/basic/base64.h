#pragma once
/*
 * Standard base64 with padding (RFC 4648 §4), as proto3 JSON uses for bytes.
 * Lives in basic/ because the guest agent needs it and must not link OpenSSL.
 */
#include <stddef.h>

/* Returns the encoded length for n input bytes (without NUL). */
size_t base64_encoded_len(size_t n);
/* Encodes into out, which must hold base64_encoded_len(n) + 1 bytes. */
void base64_encode(const void *in, size_t n, char *out);
/* Decodes; accepts missing padding. out must hold n / 4 * 3 + 3 bytes.
 * Returns the decoded length or -EINVAL on a bad character or length. */
long base64_decode(const char *in, size_t n, void *out);
