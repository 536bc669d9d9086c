/*
 * The tunnel protocol's lines (tunnel-proto.h). Strict: exact keywords,
 * single spaces, decimal ports 1..65535 without sign or leading zeros.
 */
#include "shared/tunnel-proto.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int parse_decimal(const char *p, size_t n, uint32_t max, uint32_t *ret)
{
    uint32_t v = 0;

    if (n == 0 || n > 5 || (p[0] == '0' && n > 1)) {
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return -EINVAL;
        }
        v = v * 10 + (uint32_t)(p[i] - '0');
    }
    if (v > max) {
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

int tunnel_proto_format_request(char *buf, size_t size, const char *id, uint16_t port)
{
    if (!sandbox_id_is_valid(id) || port == 0) {
        return -EINVAL;
    }
    int n = snprintf(buf, size, "TUNNEL %s %u\n", id, (unsigned)port);
    return n < 0 || (size_t)n >= size ? -ENOBUFS : n;
}

int tunnel_proto_parse_request(const char *line, size_t len, char ret_id[SANDBOX_ID_LEN + 1],
                               uint16_t *ret_port)
{
    char id[SANDBOX_ID_LEN + 1];
    uint32_t port;

    if (len > 0 && line[len - 1] == '\r') {
        len--;
    }
    if (len < 7 || memcmp(line, "TUNNEL ", 7) != 0) {
        return -EBADMSG;
    }
    const char *p = line + 7, *end = line + len;
    const char *space = memchr(p, ' ', (size_t)(end - p));
    if (!space) {
        return -EBADMSG;
    }
    if ((size_t)(space - p) != SANDBOX_ID_LEN) {
        return -EINVAL;
    }
    memcpy(id, p, SANDBOX_ID_LEN);
    id[SANDBOX_ID_LEN] = '\0';
    if (!sandbox_id_is_valid(id) ||
        parse_decimal(space + 1, (size_t)(end - space - 1), 65535, &port) < 0 || port == 0) {
        return -EINVAL;
    }
    memcpy(ret_id, id, sizeof(id));
    *ret_port = (uint16_t)port;
    return 0;
}

int tunnel_proto_parse_reply(const char *line, size_t len, int *ret_status,
                             const char **ret_message, size_t *ret_message_len)
{
    uint32_t status;
    size_t skip = len > 8 ? 8 : len;

    if (len == 2 && memcmp(line, "OK", 2) == 0) {
        *ret_status = 0;
        skip = len;
    } else if (len < 7 || memcmp(line, "ERR ", 4) != 0 ||
               parse_decimal(line + 4, 3, 599, &status) < 0 || status < 400 ||
               (len > 7 && line[7] != ' ')) {
        return -EBADMSG;
    } else {
        *ret_status = (int)status;
    }
    if (ret_message) {
        *ret_message = line + skip;
    }
    if (ret_message_len) {
        *ret_message_len = len - skip;
    }
    return 0;
}
