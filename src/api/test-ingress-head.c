/*
 * Unit tests for what the ingress reads beyond HTTP/1.1 (ingress-head.h):
 * routing by Host and by E2B headers, Accept, the token and query helpers.
 * The HTTP/1.1 parser itself: src/shared/test-http1.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/ingress-head.h"

#define ID "abcdefghij0123456789"

/* Parses a whole head given as a string; the head must end at the string's end. */
static int parse(const char *text, struct ingress_head_request *req)
{
    size_t len = strlen(text);
    size_t end = http1_find_end(text, len, NULL);
    if (end != len) {
        return end == 0 ? -EAGAIN : -ERANGE;
    }
    return ingress_head_parse_request(text, len, req);
}

static int route(const char *text, char id[SANDBOX_ID_LEN + 1], uint16_t *port, const char **err)
{
    struct ingress_head_request req;
    int r = parse(text, &req);
    if (r < 0) {
        return r;
    }
    return ingress_head_route(&req, "space.test", id, port, err);
}

static void test_ingress_head_route_by_host(void **state)
{
    char id[SANDBOX_ID_LEN + 1];
    uint16_t port = 0;
    const char *err = NULL;

    assert_int_equal(
        route("GET / HTTP/1.1\r\nHost: 8000-" ID ".space.test\r\n\r\n", id, &port, &err), 0);
    assert_string_equal(id, ID);
    assert_int_equal(port, 8000);
    /* Case-insensitive domain and id, a port on the Host, a trailing dot. */
    assert_int_equal(route("GET / HTTP/1.1\r\nHost: 49983-ABCDEFGHIJ0123456789.Space.TEST:443\r\n"
                           "\r\n",
                           id, &port, &err),
                     0);
    assert_string_equal(id, ID);
    assert_int_equal(port, 49983);
    assert_int_equal(route("GET / HTTP/1.1\r\nHost: 1-" ID ".space.test.\r\n\r\n", id, &port, &err),
                     0);
    assert_int_equal(port, 1);

    /* Wrong domain, extra labels, bad ports and ids. */
    assert_int_equal(
        route("GET / HTTP/1.1\r\nHost: 8000-" ID ".other.test\r\n\r\n", id, &port, &err), -EINVAL);
    assert_non_null(err);
    assert_int_equal(
        route("GET / HTTP/1.1\r\nHost: 8000-" ID ".x.space.test\r\n\r\n", id, &port, &err),
        -EINVAL);
    assert_int_equal(
        route("GET / HTTP/1.1\r\nHost: x8000-" ID ".space.test\r\n\r\n", id, &port, &err), -EINVAL);
    assert_int_equal(route("GET / HTTP/1.1\r\nHost: 0-" ID ".space.test\r\n\r\n", id, &port, &err),
                     -EINVAL);
    assert_int_equal(
        route("GET / HTTP/1.1\r\nHost: 65536-" ID ".space.test\r\n\r\n", id, &port, &err), -EINVAL);
    assert_string_equal(err, "invalid sandbox port");
    assert_int_equal(route("GET / HTTP/1.1\r\nHost: 8000-abc.space.test\r\n\r\n", id, &port, &err),
                     -EINVAL);
    assert_int_equal(
        route("GET / HTTP/1.1\r\nHost: 8000-" ID "-x.space.test\r\n\r\n", id, &port, &err),
        -EINVAL);
    assert_int_equal(
        route("GET / HTTP/1.1\r\nHost: 8000" ID ".space.test\r\n\r\n", id, &port, &err), -EINVAL);
    assert_int_equal(route("GET / HTTP/1.1\r\nHost: space.test\r\n\r\n", id, &port, &err), -EINVAL);
    assert_int_equal(
        route("GET / HTTP/1.1\r\nHost: 8000-" ID ".space.test:x\r\n\r\n", id, &port, &err),
        -EINVAL);
    assert_int_equal(route("GET / HTTP/1.1\r\nHost:\r\n\r\n", id, &port, &err), -EINVAL);
}

static void test_ingress_head_route_by_headers(void **state)
{
    char id[SANDBOX_ID_LEN + 1];
    uint16_t port = 0;
    const char *err = NULL;

    /* Local hosts and sandbox.<domain> route by the headers. */
    assert_int_equal(route("GET / HTTP/1.1\r\nHost: 127.0.0.1:3002\r\nE2b-Sandbox-Id: " ID "\r\n"
                           "E2b-Sandbox-Port: 49983\r\n\r\n",
                           id, &port, &err),
                     0);
    assert_string_equal(id, ID);
    assert_int_equal(port, 49983);
    assert_int_equal(route("GET / HTTP/1.1\r\nHost: localhost\r\ne2b-sandbox-id: " ID "\r\n"
                           "e2b-sandbox-port: 8080\r\n\r\n",
                           id, &port, &err),
                     0);
    assert_int_equal(port, 8080);
    assert_int_equal(route("GET / HTTP/1.1\r\nHost: [::1]:80\r\nE2b-Sandbox-Id: " ID "\r\n"
                           "E2b-Sandbox-Port: 7\r\n\r\n",
                           id, &port, &err),
                     0);
    assert_int_equal(port, 7);
    assert_int_equal(route("GET / HTTP/1.1\r\nHost: sandbox.space.test\r\nE2b-Sandbox-Id: " ID
                           "\r\nE2b-Sandbox-Port: 9\r\n\r\n",
                           id, &port, &err),
                     0);
    assert_int_equal(port, 9);
    /* HTTP/1.0 without a Host. */
    assert_int_equal(route("GET / HTTP/1.0\r\nE2b-Sandbox-Id: " ID
                           "\r\nE2b-Sandbox-Port: 9\r\n\r\n",
                           id, &port, &err),
                     0);
    /* A Host that routes by itself wins over the headers (E2B host.go). */
    assert_int_equal(
        route("GET / HTTP/1.1\r\nHost: 8000-" ID ".space.test\r\n"
              "E2b-Sandbox-Id: zzzzzzzzzzzzzzzzzzzz\r\nE2b-Sandbox-Port: 49983\r\n\r\n",
              id, &port, &err),
        0);
    assert_string_equal(id, ID);
    assert_int_equal(port, 8000);
    /* A Host that does not route falls back to the headers. */
    assert_int_equal(route("GET / HTTP/1.1\r\nHost: proxy.example\r\nE2b-Sandbox-Id: " ID "\r\n"
                           "E2b-Sandbox-Port: 8000\r\n\r\n",
                           id, &port, &err),
                     0);

    /* Both headers are required; values are checked; ids are not lowercased. */
    assert_int_equal(route("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nE2b-Sandbox-Id: " ID "\r\n\r\n",
                           id, &port, &err),
                     -EINVAL);
    assert_non_null(strstr(err, "missing header"));
    assert_int_equal(
        route("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nE2b-Sandbox-Port: 1\r\n\r\n", id, &port, &err),
        -EINVAL);
    assert_int_equal(route("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nE2b-Sandbox-Id: " ID "\r\n"
                           "E2b-Sandbox-Port: 1x\r\n\r\n",
                           id, &port, &err),
                     -EINVAL);
    assert_string_equal(err, "invalid sandbox port");
    assert_int_equal(route("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                           "E2b-Sandbox-Id: ABCDEFGHIJ0123456789\r\nE2b-Sandbox-Port: 1\r\n\r\n",
                           id, &port, &err),
                     -EINVAL);
    assert_string_equal(err, "invalid sandbox id");
    /* Local host without headers has nothing to route by. */
    assert_int_equal(route("GET / HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n", id, &port, &err),
                     -EINVAL);
}

static bool prefers_html(const char *accept)
{
    struct ingress_head_request req = { 0 };
    if (accept) {
        req.accept = (struct http1_span){ accept, strlen(accept) };
    }
    return ingress_head_prefers_html(&req);
}

static void test_ingress_head_accept(void **state)
{
    assert_false(prefers_html(NULL));
    assert_false(prefers_html("*/*"));
    assert_false(prefers_html("application/json"));
    assert_false(prefers_html("application/json, text/html"));
    assert_false(prefers_html("text/html;q=0.5, application/json"));
    assert_true(prefers_html("text/html"));
    assert_true(prefers_html("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"));
    assert_true(prefers_html("TEXT/HTML; charset=utf-8, application/json;q=0.1"));
    assert_true(prefers_html("text/*, application/json;q=0.5"));
    assert_false(prefers_html("text/html;q=0"));
    assert_false(prefers_html("text/html;q=bogus"));
    assert_false(prefers_html(""));
    assert_false(prefers_html(",,;;"));
}

static void test_ingress_head_token(void **state)
{
    struct ingress_head_request req;

    assert_int_equal(
        parse("GET /envs HTTP/1.1\r\nHost: h\r\nX-Access-Token:  s3cret \r\n\r\n", &req), 0);
    assert_true(http1_span_eq(req.access_token, "s3cret"));
    assert_int_equal(parse("GET /envs HTTP/1.1\r\nHost: h\r\nX-Access-Token:\r\n\r\n", &req), 0);
    assert_non_null(req.access_token.p);
    assert_int_equal(req.access_token.n, 0);
    assert_int_equal(parse("GET /envs HTTP/1.1\r\nHost: h\r\n\r\n", &req), 0);
    assert_null(req.access_token.p);
    assert_int_equal(parse("GET /files?signature=&path=x HTTP/1.1\r\nHost: h\r\n\r\n", &req), 0);
    assert_false(ingress_head_query_has(&req, "signature"));
}

/* E2B's routing and token headers: each at most once; Accept: the first. */
static void test_ingress_head_e2b_fields(void **state)
{
    struct ingress_head_request req;

    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: h\r\nX-ACCESS-TOKEN: tok\r\n"
                           "accept: application/json\r\nAccept: text/html\r\n\r\n",
                           &req),
                     0);
    assert_true(http1_span_eq(req.access_token, "tok"));
    assert_true(http1_span_eq(req.accept, "application/json"));
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\nX-Access-Token: a\r\n"
                           "X-Access-Token: b\r\n\r\n",
                           &req),
                     -EBADMSG);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\nE2b-Sandbox-Id: a\r\n"
                           "e2b-sandbox-id: a\r\n\r\n",
                           &req),
                     -EBADMSG);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\nE2b-Sandbox-Port: 1\r\n"
                           "E2b-Sandbox-Port: 1\r\n\r\n",
                           &req),
                     -EBADMSG);
    /* The HTTP/1.1 errors come through unchanged. */
    assert_int_equal(parse("GET / HTTP/2.0\r\nHost: a\r\n\r\n", &req), -EPROTONOSUPPORT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ingress_head_route_by_host),
        cmocka_unit_test(test_ingress_head_route_by_headers),
        cmocka_unit_test(test_ingress_head_accept),
        cmocka_unit_test(test_ingress_head_token),
        cmocka_unit_test(test_ingress_head_e2b_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
