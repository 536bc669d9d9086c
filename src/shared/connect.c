/*
 * Connect framing and the error-code tables of e2b-compat.md §6.1. The string
 * names and HTTP statuses are the ones the E2B SDKs map to their error types,
 * so they must not drift: test-connect.c pins every one.
 */
#include "shared/connect.h"

#include <errno.h>
#include <string.h>

#include "basic/macro.h"

static const struct {
    const char *name;
    int http;
} codes[_CONNECT_CODE_MAX] = {
    [CONNECT_CANCELED] = { "canceled", 499 },
    [CONNECT_UNKNOWN] = { "unknown", 500 },
    [CONNECT_INVALID_ARGUMENT] = { "invalid_argument", 400 },
    [CONNECT_DEADLINE_EXCEEDED] = { "deadline_exceeded", 504 },
    [CONNECT_NOT_FOUND] = { "not_found", 404 },
    [CONNECT_ALREADY_EXISTS] = { "already_exists", 409 },
    [CONNECT_PERMISSION_DENIED] = { "permission_denied", 403 },
    [CONNECT_RESOURCE_EXHAUSTED] = { "resource_exhausted", 429 },
    [CONNECT_FAILED_PRECONDITION] = { "failed_precondition", 400 },
    [CONNECT_ABORTED] = { "aborted", 409 },
    [CONNECT_OUT_OF_RANGE] = { "out_of_range", 400 },
    [CONNECT_UNIMPLEMENTED] = { "unimplemented", 501 },
    [CONNECT_INTERNAL] = { "internal", 500 },
    [CONNECT_UNAVAILABLE] = { "unavailable", 503 },
    [CONNECT_DATA_LOSS] = { "data_loss", 500 },
    [CONNECT_UNAUTHENTICATED] = { "unauthenticated", 401 },
};

const char *connect_code_to_string(enum connect_code code)
{
    if (code < 0 || code >= _CONNECT_CODE_MAX) {
        return "unknown";
    }
    return codes[code].name;
}

enum connect_code connect_code_from_string(const char *s)
{
    for (int i = 0; i < _CONNECT_CODE_MAX; i++) {
        if (strcmp(s, codes[i].name) == 0) {
            return (enum connect_code)i;
        }
    }
    return _CONNECT_CODE_INVALID;
}

int connect_code_to_http_status(enum connect_code code)
{
    if (code < 0 || code >= _CONNECT_CODE_MAX) {
        return 500;
    }
    return codes[code].http;
}

enum connect_code connect_code_from_errno(int error)
{
    switch (error < 0 ? -error : error) {
    case ENOENT:
    case ESRCH:
        return CONNECT_NOT_FOUND;
    case EEXIST:
        return CONNECT_ALREADY_EXISTS;
    case EACCES:
    case EPERM:
        return CONNECT_PERMISSION_DENIED;
    case EINVAL:
    case ENOTDIR:
    case EISDIR:
    case ENAMETOOLONG:
    case ELOOP:
        return CONNECT_INVALID_ARGUMENT;
    case ENOSPC:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case E2BIG:
        return CONNECT_RESOURCE_EXHAUSTED;
    case ETIMEDOUT:
        return CONNECT_DEADLINE_EXCEEDED;
    case EOPNOTSUPP:
        return CONNECT_UNIMPLEMENTED;
    case ECANCELED:
        return CONNECT_CANCELED;
    case EAGAIN:
        return CONNECT_UNAVAILABLE;
    default:
        return CONNECT_INTERNAL;
    }
}

void connect_envelope_header(uint8_t flags, uint32_t len, uint8_t out[CONNECT_ENVELOPE_HEADER])
{
    out[0] = flags;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
}

int connect_envelope_parse(const uint8_t *buf, size_t len, size_t max, uint8_t *ret_flags,
                           const uint8_t **ret_payload, uint32_t *ret_len, size_t *ret_consumed)
{
    uint32_t n;

    if (len < CONNECT_ENVELOPE_HEADER) {
        return 0;
    }
    if (buf[0] & ~CONNECT_FLAG_END_STREAM) {
        return -EPROTO;
    }
    n = (uint32_t)buf[1] << 24 | (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 8 | buf[4];
    if (n > max) {
        return -EMSGSIZE;
    }
    if (len - CONNECT_ENVELOPE_HEADER < n) {
        return 0;
    }
    *ret_flags = buf[0];
    *ret_payload = buf + CONNECT_ENVELOPE_HEADER;
    *ret_len = n;
    *ret_consumed = CONNECT_ENVELOPE_HEADER + (size_t)n;
    return 1;
}
