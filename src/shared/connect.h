#pragma once
/*
 * Connect RPC framing (https://connectrpc.com/docs/protocol), the envd wire
 * protocol of e2b-compat.md §6.1. Used by the agent (server side) and by the
 * node and api (client side, proxying). Pure functions over byte buffers: no
 * I/O, no allocation except where stated, fuzzed (fuzz-connect.c).
 *
 * A streaming body is a sequence of envelopes: 1 flag byte, 4-byte big-endian
 * length, payload. Flag 0x02 marks the end-of-stream frame; 0x01 (compressed)
 * is never produced and is rejected on input.
 */
#include <stddef.h>
#include <stdint.h>

#define CONNECT_FLAG_COMPRESSED 0x01
#define CONNECT_FLAG_END_STREAM 0x02
#define CONNECT_ENVELOPE_HEADER 5

/* Hard cap on one message (style.md R18): bigger envelopes are rejected before allocation. */
#define CONNECT_MAX_MESSAGE (16u * 1024 * 1024)

enum connect_code {
    CONNECT_CANCELED,
    CONNECT_UNKNOWN,
    CONNECT_INVALID_ARGUMENT,
    CONNECT_DEADLINE_EXCEEDED,
    CONNECT_NOT_FOUND,
    CONNECT_ALREADY_EXISTS,
    CONNECT_PERMISSION_DENIED,
    CONNECT_RESOURCE_EXHAUSTED,
    CONNECT_FAILED_PRECONDITION,
    CONNECT_ABORTED,
    CONNECT_OUT_OF_RANGE,
    CONNECT_UNIMPLEMENTED,
    CONNECT_INTERNAL,
    CONNECT_UNAVAILABLE,
    CONNECT_DATA_LOSS,
    CONNECT_UNAUTHENTICATED,
    _CONNECT_CODE_MAX,
    _CONNECT_CODE_INVALID = -22,
};

/* "not_found", ... exactly as on the wire. */
const char *connect_code_to_string(enum connect_code code);
enum connect_code connect_code_from_string(const char *s);
/* HTTP status for a unary error response with this code. */
int connect_code_to_http_status(enum connect_code code);
/* Maps a negative errno to the closest Connect code (ENOENT -> not_found, ...). */
enum connect_code connect_code_from_errno(int error);

/* Writes the 5-byte envelope header for a payload of len bytes. */
void connect_envelope_header(uint8_t flags, uint32_t len, uint8_t out[CONNECT_ENVELOPE_HEADER]);

/*
 * Parses one envelope at the start of buf.
 * Returns 1 and fills *ret_flags / *ret_payload / *ret_len / *ret_consumed when a whole
 * envelope is present, 0 when more bytes are needed, -EMSGSIZE when the declared length
 * exceeds max, -EPROTO for a compressed or unknown flag.
 * *ret_payload points into buf (borrowed).
 */
int connect_envelope_parse(const uint8_t *buf, size_t len, size_t max, uint8_t *ret_flags,
                           const uint8_t **ret_payload, uint32_t *ret_len, size_t *ret_consumed);
