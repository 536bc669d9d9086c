/*
 * Unit tests for the blocking client's response reading (http-client.h):
 * a socketpair stands in for the guest, with the reply written before the
 * request is sent. The client must frame replies as strictly as the
 * ingress: a chunked stream cut short is an error, never a short body.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/strbuf.h"
#include "shared/http-client.h"

static int collect(const void *data, size_t len, void *userdata)
{
    return strbuf_append(userdata, data, len);
}

/* Sends reply as the server (then EOF), runs one GET; *body gets the payload. */
static int exchange(const char *reply, int *status, struct strbuf *body)
{
    struct http_request req = { .method = "GET", .path = "/x" };
    int sv[2];
    int r;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(write(sv[1], reply, strlen(reply)), (ssize_t)strlen(reply));
    assert_int_equal(shutdown(sv[1], SHUT_WR), 0);
    r = http_client_request(sv[0], &req, now_monotonic() + 5 * USEC_PER_SEC, status, NULL, collect,
                            body);
    close(sv[0]);
    close(sv[1]);
    return r;
}

static void test_http_client_framing(void **state)
{
    struct strbuf body = STRBUF_INIT;
    int status = 0;

    assert_int_equal(
        exchange("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA", &status, &body), 0);
    assert_int_equal(status, 200);
    assert_int_equal(body.len, 5);
    body.len = 0;
    assert_int_equal(
        exchange("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n3;x\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
                 &status, &body),
        0);
    assert_int_equal(status, 201);
    assert_int_equal(body.len, 5);
    assert_memory_equal(body.buf, "abcde", 5);
    body.len = 0;
    assert_int_equal(exchange("HTTP/1.0 200 OK\r\n\r\nto eof", &status, &body), 0);
    assert_int_equal(body.len, 6);
    strbuf_release(&body);
}

static void test_http_client_strict(void **state)
{
    static const char *const bad[] = {
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",  /* no last chunk */
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\n0\n\n", /* bare LF */
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3x\r\nabc\r\n0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.1 200 OK\nContent-Length: 0\n\n",
        "HTTP/1.1 101 Switching Protocols\r\n\r\n",
        "HTTP/1.1 200 OK\r\n",
        "garbage\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct strbuf body = STRBUF_INIT;
        int status = 0;
        assert_int_equal(exchange(bad[i], &status, &body), -EPROTO);
        strbuf_release(&body);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http_client_framing),
        cmocka_unit_test(test_http_client_strict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
