/* Table-driven base64; decode is strict about the alphabet. */
#include "basic/base64.h"

#include <errno.h>
#include <stdint.h>

static const char enc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_encoded_len(size_t n)
{
    return (n + 2) / 3 * 4;
}

void base64_encode(const void *in, size_t n, char *out)
{
    const uint8_t *p = in;
    size_t i, o = 0;

    for (i = 0; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        out[o++] = enc[v >> 18 & 63];
        out[o++] = enc[v >> 12 & 63];
        out[o++] = enc[v >> 6 & 63];
        out[o++] = enc[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        out[o++] = enc[v >> 18 & 63];
        out[o++] = enc[v >> 12 & 63];
        out[o++] = i + 1 < n ? enc[v >> 6 & 63] : '=';
        out[o++] = '=';
    }
    out[o] = '\0';
}

static int dec(char c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    if (c == '+' || c == '-') {
        return 62;
    }
    if (c == '/' || c == '_') {
        return 63;
    }
    return -1;
}

long base64_decode(const char *in, size_t n, void *out)
{
    uint8_t *o = out;
    uint32_t acc = 0;
    size_t len = 0;
    int bits = 0;

    while (n > 0 && in[n - 1] == '=') {
        n--;
    }
    if (n % 4 == 1) {
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        int v = dec(in[i]);
        if (v < 0) {
            return -EINVAL;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[len++] = (uint8_t)(acc >> bits);
        }
    }
    return (long)len;
}
