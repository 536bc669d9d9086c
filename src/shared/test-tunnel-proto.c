/* Unit tests for the tunnel protocol's lines (tunnel-proto.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "shared/tunnel-proto.h"

#define ID "abcdefghij0123456789"

static int parse(const char *line, char id[SANDBOX_ID_LEN + 1], uint16_t *port)
{
    return tunnel_proto_parse_request(line, strlen(line), id, port);
}

static void test_tunnel_proto_request(void **state)
{
    char buf[TUNNEL_PROTO_LINE_MAX], id[SANDBOX_ID_LEN + 1];
    uint16_t port = 0;
    int n = tunnel_proto_format_request(buf, sizeof(buf), ID, 49983);

    assert_int_equal(n, (int)strlen("TUNNEL " ID " 49983\n"));
    assert_string_equal(buf, "TUNNEL " ID " 49983\n");
    buf[n - 1] = '\0';
    assert_int_equal(parse(buf, id, &port), 0);
    assert_string_equal(id, ID);
    assert_int_equal(port, 49983);
    assert_int_equal(parse("TUNNEL " ID " 80\r", id, &port), 0);
    assert_int_equal(port, 80);

    assert_int_equal(tunnel_proto_format_request(buf, 10, ID, 1), -ENOBUFS);
    assert_int_equal(tunnel_proto_format_request(buf, sizeof(buf), "bad", 1), -EINVAL);
    assert_int_equal(tunnel_proto_format_request(buf, sizeof(buf), ID, 0), -EINVAL);
    assert_int_equal(parse("HELLO", id, &port), -EBADMSG);
    assert_int_equal(parse("TUNNEL " ID, id, &port), -EBADMSG);
    assert_int_equal(parse("TUNNEL abc 80", id, &port), -EINVAL);
    assert_int_equal(parse("TUNNEL " ID " 0", id, &port), -EINVAL);
    assert_int_equal(parse("TUNNEL " ID " 65536", id, &port), -EINVAL);
    assert_int_equal(parse("TUNNEL " ID " 080", id, &port), -EINVAL);
    assert_int_equal(parse("TUNNEL " ID " +80", id, &port), -EINVAL);
    assert_int_equal(parse("TUNNEL " ID " 80 x", id, &port), -EINVAL);
    assert_int_equal(parse("TUNNEL " ID "  80", id, &port), -EINVAL);
}

static void test_tunnel_proto_reply(void **state)
{
    const char *msg = NULL;
    size_t len = 0;
    int status = -1;

    assert_int_equal(tunnel_proto_parse_reply("OK", 2, &status, &msg, &len), 0);
    assert_int_equal(status, 0);
    assert_int_equal(tunnel_proto_parse_reply("ERR 404 sandbox not found", 25, &status, &msg, &len),
                     0);
    assert_int_equal(status, 404);
    assert_int_equal(len, 17);
    assert_memory_equal(msg, "sandbox not found", 17);
    assert_int_equal(tunnel_proto_parse_reply("ERR 503", 7, &status, &msg, &len), 0);
    assert_int_equal(status, 503);
    assert_int_equal(tunnel_proto_parse_reply("OK ", 3, &status, &msg, &len), -EBADMSG);
    assert_int_equal(tunnel_proto_parse_reply("ERR 200 x", 9, &status, &msg, &len), -EBADMSG);
    assert_int_equal(tunnel_proto_parse_reply("ERR 40", 6, &status, &msg, &len), -EBADMSG);
    assert_int_equal(tunnel_proto_parse_reply("ERR 4044", 8, &status, &msg, &len), -EBADMSG);
    assert_int_equal(tunnel_proto_parse_reply("", 0, &status, &msg, &len), -EBADMSG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tunnel_proto_request),
        cmocka_unit_test(test_tunnel_proto_reply),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
