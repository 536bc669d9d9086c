/*
 * libFuzzer target for the tunnel protocol's lines (tunnel-proto.h): a
 * request line that parses formats back to the same bytes, and a reply
 * that parses has a status in range and a message inside the line.
 */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "shared/tunnel-proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *line = (const char *)data;
    char id[SANDBOX_ID_LEN + 1], buf[TUNNEL_PROTO_LINE_MAX];
    uint16_t port = 0;
    int status = -1;
    const char *msg = NULL;
    size_t msg_len = 0;

    if (tunnel_proto_parse_request(line, size, id, &port) == 0) {
        assert(sandbox_id_is_valid(id) && port > 0);
        int n = tunnel_proto_format_request(buf, sizeof(buf), id, port);
        assert(n > 0);
        size_t len = size > 0 && line[size - 1] == '\r' ? size - 1 : size;
        assert((size_t)n == len + 1 && memcmp(buf, line, len) == 0);
    }
    if (tunnel_proto_parse_reply(line, size, &status, &msg, &msg_len) == 0) {
        assert(status == 0 || (status >= 400 && status <= 599));
        assert(msg >= line && msg + msg_len == line + size);
    }
    return 0;
}
