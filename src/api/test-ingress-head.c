/*
 * Unit tests for the ingress head parser (ingress-head.h): request heads,
 * routing by Host and by E2B headers, Accept, the token and query helpers,
 * the heads we forward, response heads and request body framing.
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
    size_t end = ingress_head_find_end(text, len, NULL);
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

static void test_ingress_head_find_end(void **state)
{
    const char *h = "GET / HTTP/1.1\r\nHost: x\r\n\r\nBODY";
    size_t resume = 0;

    assert_int_equal(ingress_head_find_end(h, strlen(h), NULL), strlen(h) - 4);
    /* Byte by byte with resume gives the same answer, and 0 before. */
    for (size_t i = 1; i < strlen(h) - 4; i++) {
        assert_int_equal(ingress_head_find_end(h, i, &resume), 0);
    }
    assert_int_equal(ingress_head_find_end(h, strlen(h), &resume), strlen(h) - 4);
    /* Bare LF ends are found (so they can be refused), and leading empty lines. */
    assert_int_equal(ingress_head_find_end("GET / HTTP/1.1\nHost: x\n\n", 24, NULL), 24);
    assert_int_equal(ingress_head_find_end("\r\nGET / HTTP/1.0\r\n\r\n", 20, NULL), 20);
    assert_int_equal(ingress_head_find_end("GET / HTTP/1.1\r\nHost: x\r\n", 25, NULL), 0);
    assert_int_equal(ingress_head_find_end("", 0, NULL), 0);
}

static void test_ingress_head_request_line(void **state)
{
    struct ingress_head_request req;

    assert_int_equal(
        parse("POST /files?path=%2Fa&signature=v1_x HTTP/1.1\r\nHost: h\r\n\r\n", &req), 0);
    assert_true(ingress_head_span_eq(req.method, "POST"));
    assert_true(ingress_head_span_eq(req.path, "/files"));
    assert_true(ingress_head_span_eq(req.query, "path=%2Fa&signature=v1_x"));
    assert_true(ingress_head_query_has(&req, "signature"));
    assert_true(ingress_head_query_has(&req, "path"));
    assert_false(ingress_head_query_has(&req, "sig"));
    assert_false(req.http10);

    assert_int_equal(parse("GET /health#frag HTTP/1.0\r\n\r\n", &req), 0);
    assert_true(req.http10);
    assert_true(ingress_head_span_eq(req.path, "/health"));
    assert_null(req.query.p);
    assert_null(req.host.p);

    /* Absolute form: the authority is the host. */
    assert_int_equal(
        parse("GET http://8000-" ID ".space.test/x?y HTTP/1.1\r\nHost: other\r\n\r\n", &req), 0);
    assert_true(ingress_head_span_eq(req.host, "8000-" ID ".space.test"));
    assert_true(ingress_head_span_eq(req.path, "/x"));
    assert_int_equal(parse("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", &req), 0);
    assert_true(ingress_head_span_eq(req.path, "*"));

    assert_int_equal(parse("GET * HTTP/1.1\r\nHost: h\r\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("CONNECT h:443 HTTP/1.1\r\nHost: h\r\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("GET http://user@h/ HTTP/1.1\r\nHost: h\r\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("GET / HTTP/2.0\r\nHost: h\r\n\r\n", &req), -EPROTONOSUPPORT);
    assert_int_equal(parse("GET / HTTX/1.1\r\nHost: h\r\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("GET  / HTTP/1.1\r\nHost: h\r\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("GET / HTTP/1.1 \r\nHost: h\r\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("G@T / HTTP/1.1\r\nHost: h\r\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("GET /\x01 HTTP/1.1\r\nHost: h\r\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("GET\r\n\r\n", &req), -EBADMSG);
}

static void test_ingress_head_fields(void **state)
{
    struct ingress_head_request req;

    assert_int_equal(parse("GET / HTTP/1.1\r\nhOsT:   h:80 \r\nX-ACCESS-TOKEN: tok\r\n"
                           "accept: application/json\r\nContent-Length: 12\r\n\r\n",
                           &req),
                     0);
    assert_true(ingress_head_span_eq(req.host, "h:80"));
    assert_true(ingress_head_span_eq(req.access_token, "tok"));
    assert_true(ingress_head_span_eq(req.accept, "application/json"));
    assert_true(req.has_content_length);
    assert_int_equal(req.content_length, 12);

    /* Missing Host on 1.1, duplicates that matter, smuggling shapes. */
    assert_int_equal(parse("GET / HTTP/1.1\r\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\nX-Access-Token: a\r\n"
                           "X-Access-Token: b\r\n\r\n",
                           &req),
                     -EBADMSG);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\nE2b-Sandbox-Id: a\r\n"
                           "e2b-sandbox-id: a\r\n\r\n",
                           &req),
                     -EBADMSG);
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n",
                           &req),
                     -EBADMSG);
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n"
                           "Content-Length: 2\r\n\r\n",
                           &req),
                     -EBADMSG);
    /* Even an equal second Content-Length (RFC 9112 6.3 allows merging; a proxy must not). */
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n"
                           "Content-Length: 2\r\n\r\n",
                           &req),
                     -EBADMSG);
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nX-J: 1\r\n"
                           "Content-Length: 2\r\n\r\n",
                           &req),
                     -EBADMSG);
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2, 2\r\n\r\n", &req),
                     -EBADMSG);
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
                           "Content-Length: 2\r\n\r\n",
                           &req),
                     -EBADMSG);
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +2\r\n\r\n", &req),
                     -EBADMSG);
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999"
                           "\r\n\r\n",
                           &req),
                     -EBADMSG);
    assert_int_equal(
        parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", &req),
        -EOPNOTSUPP);
    assert_int_equal(parse("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", &req),
                     -EBADMSG);
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n",
                           &req),
                     -EBADMSG);
    assert_int_equal(
        parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n", &req), 0);
    assert_true(req.chunked);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost : a\r\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\nX: a\001b\r\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\nnocolon\r\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\n: empty\r\n\r\n", &req), -EBADMSG);
    /* obs-text and HTAB are fine in values. */
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\nX: caf\xc3\xa9\tok\r\n\r\n", &req), 0);

    /* Upgrade needs both the header and the Connection option. */
    assert_int_equal(parse("GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n"
                           "Connection: keep-alive, Upgrade\r\n\r\n",
                           &req),
                     0);
    assert_true(req.upgrade);
    assert_int_equal(parse("GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n", &req), 0);
    assert_false(req.upgrade);
    assert_int_equal(parse("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\n\r\n", &req), 0);
    assert_false(req.upgrade);
}

static void test_ingress_head_too_many_fields(void **state)
{
    struct ingress_head_request req;
    char *text = malloc(INGRESS_HEAD_MAX);
    size_t n = 0;

    assert_non_null(text);
    n += (size_t)snprintf(text + n, INGRESS_HEAD_MAX - n, "GET / HTTP/1.1\r\nHost: h\r\n");
    for (int i = 0; i < INGRESS_HEAD_MAX_FIELDS; i++) {
        n += (size_t)snprintf(text + n, INGRESS_HEAD_MAX - n, "X-%d: v\r\n", i);
    }
    n += (size_t)snprintf(text + n, INGRESS_HEAD_MAX - n, "\r\n");
    assert_int_equal(parse(text, &req), -E2BIG);
    free(text);
}

static void test_ingress_head_oversized(void **state)
{
    struct ingress_head_request req;
    size_t len = INGRESS_HEAD_MAX + 100;
    char *text = malloc(len + 1);

    assert_non_null(text);
    memset(text, 'a', len);
    memcpy(text, "GET / HTTP/1.1\r\nHost: h\r\nX: ", 28);
    memcpy(text + len - 4, "\r\n\r\n", 4);
    text[len] = '\0';
    /* A head that only ends past the cap is found, but refused by the parser. */
    assert_int_equal(ingress_head_find_end(text, len, NULL), len);
    assert_int_equal(ingress_head_parse_request(text, len, &req), -E2BIG);
    free(text);
}

/* Line ends: CRLF only, no CR anywhere else (a proxy must not guess, RFC 9112 2.2). */
static void test_ingress_head_strict_lines(void **state)
{
    struct ingress_head_request req;

    assert_int_equal(parse("GET / HTTP/1.1\nHost: x\n\n", &req), -EBADMSG);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: x\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: x\r\n\n", &req), -EBADMSG);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: x\r\nX: a\rb\r\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("GET /\r HTTP/1.1\r\nHost: x\r\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("GET / HTTP/1.1\r\r\nHost: x\r\n\r\n", &req), -EBADMSG);
    /* A bare LF before the request line is an empty head, and refused. */
    assert_int_equal(ingress_head_find_end("\nGET / HTTP/1.1\r\n\r\n", 19, NULL), 1);
    assert_int_equal(ingress_head_parse_request("\n", 1, &req), -EBADMSG);
    assert_int_equal(parse("\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", &req), 0);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: x\r\nX:\0\r\n\r\n", &req), -EAGAIN);
}

/*
 * What fuzz-ingress-head found: a head at the field cap, with junk fields
 * and repeated Content-Lengths, whose rewrite (+ Connection: close) the
 * parser then refused. The rewrite now refuses instead, and what it does
 * forward parses to the same request.
 */
static void test_ingress_head_rewrite_reparses(void **state)
{
    struct ingress_head_request req, again;
    struct strbuf sb = STRBUF_INIT;
    char *text = malloc(INGRESS_HEAD_MAX);
    size_t n = 0;

    assert_non_null(text);
    n += (size_t)snprintf(text + n, INGRESS_HEAD_MAX - n, "GET / HTTP/1.1\r\nHost: h\r\n");
    for (int i = 0; i < INGRESS_HEAD_MAX_FIELDS - 1; i++) {
        n += (size_t)snprintf(text + n, INGRESS_HEAD_MAX - n, "x:\r\n");
    }
    n += (size_t)snprintf(text + n, INGRESS_HEAD_MAX - n, "\r\n");
    assert_int_equal(parse(text, &req), 0);
    strbuf_init(&sb, 2 * INGRESS_HEAD_MAX);
    assert_int_equal(ingress_head_rewrite_request(text, &req, &sb), -E2BIG);
    strbuf_release(&sb);

    /* One field fewer fits, and re-parses the same. */
    n = 0;
    n += (size_t)snprintf(text + n, INGRESS_HEAD_MAX - n,
                          "POST /p?q HTTP/1.1\r\nHost: h\r\nContent-Length: 7\r\n");
    for (int i = 0; i < INGRESS_HEAD_MAX_FIELDS - 3; i++) {
        n += (size_t)snprintf(text + n, INGRESS_HEAD_MAX - n, "x:\r\n");
    }
    n += (size_t)snprintf(text + n, INGRESS_HEAD_MAX - n, "Connection: x\r\n\r\n");
    assert_int_equal(parse(text, &req), 0);
    strbuf_init(&sb, 2 * INGRESS_HEAD_MAX);
    assert_int_equal(ingress_head_rewrite_request(text, &req, &sb), 0);
    assert_int_equal(ingress_head_find_end(sb.buf, sb.len, NULL), sb.len);
    assert_int_equal(ingress_head_parse_request(sb.buf, sb.len, &again), 0);
    assert_true(again.has_content_length && again.content_length == 7);
    assert_true(ingress_head_span_eq(again.target, "/p?q"));
    strbuf_release(&sb);
    free(text);
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
        req.accept = (struct ingress_head_span){ accept, strlen(accept) };
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
    assert_true(ingress_head_span_eq(req.access_token, "s3cret"));
    assert_int_equal(parse("GET /envs HTTP/1.1\r\nHost: h\r\nX-Access-Token:\r\n\r\n", &req), 0);
    assert_non_null(req.access_token.p);
    assert_int_equal(req.access_token.n, 0);
    assert_int_equal(parse("GET /envs HTTP/1.1\r\nHost: h\r\n\r\n", &req), 0);
    assert_null(req.access_token.p);
    assert_int_equal(parse("GET /files?signature=&path=x HTTP/1.1\r\nHost: h\r\n\r\n", &req), 0);
    assert_false(ingress_head_query_has(&req, "signature"));
}

static char *rewrite(const char *text)
{
    struct ingress_head_request req;
    struct strbuf sb = STRBUF_INIT;

    assert_int_equal(parse(text, &req), 0);
    assert_int_equal(ingress_head_rewrite_request(text, &req, &sb), 0);
    return strbuf_detach(&sb, NULL);
}

static void test_ingress_head_rewrite(void **state)
{
    char *out = rewrite("POST /x HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\n"
                        "Keep-Alive: 5\r\nUpgrade: h2c\r\nX-A: 1\r\n\r\n");
    assert_string_equal(out, "POST /x HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nConnection: close\r\n\r\n");
    free(out);

    out = rewrite("GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: k\r\n\r\n");
    assert_string_equal(out, "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
                             "Connection: Upgrade\r\nSec-WebSocket-Key: k\r\n\r\n");
    free(out);

    const char *resp = "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n";
    struct ingress_head_response r;
    struct strbuf sb = STRBUF_INIT;
    assert_int_equal(ingress_head_parse_response(resp, strlen(resp), &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ingress_head_rewrite_response(resp, r.head_len, &sb), 0);
    assert_string_equal(sb.buf,
                        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n");
    strbuf_release(&sb);
}

static void test_ingress_head_response(void **state)
{
    struct ingress_head_response r;

#define RESP(s, want) assert_int_equal(ingress_head_parse_response(s, strlen(s), &r), want)
    RESP("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", 0);
    assert_int_equal(r.status, 101);
    RESP("HTTP/1.0 204\r\n\r\n", 0);
    assert_int_equal(r.status, 204);
    RESP("HTTP/1.1 100 Continue\r\n\r\n", 0);
    assert_int_equal(r.status, 100);
    RESP("HTTP/1.1 100 Continue\n\n", -EBADMSG);
    RESP("HTTP/1.1 200 OK\r\nX: 1\n\r\n", -EBADMSG);
    RESP("HTTP/1.1 200 O\rK\r\n\r\n", -EBADMSG);
    RESP("HTTP/1.1 200 O\001K\r\n\r\n", -EBADMSG);
    RESP("HTTP/1.1 200 OK\r\nX: 1\r\n folded\r\n\r\n", -EBADMSG);
    RESP("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", -EBADMSG);
    RESP("HTTP/1.1 099 Low\r\n\r\n", -EBADMSG);
    RESP("HTTP/1.1 600 High\r\n\r\n", -EBADMSG);
    RESP("HTTP/2 200\r\n\r\n", -EBADMSG);
    RESP("HTTP/1.1 20x OK\r\n\r\n", -EBADMSG);
    RESP("HTTP/1.1 200OK\r\n\r\n", -EBADMSG);
    RESP("SSH-2.0-OpenSSH\r\n\r\n", -EBADMSG);
    RESP("HTTP/1.1 200 OK\r\nbad header\r\n\r\n", -EBADMSG);
    RESP("HTTP/1.1 200 OK\r\n", -EBADMSG);
    RESP("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", -EBADMSG);
    RESP("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", -EBADMSG);
    RESP("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", -EBADMSG);
#undef RESP
}

static void test_ingress_head_response_framing(void **state)
{
    struct ingress_head_response r;
    struct ingress_head_body b;
    const char *s;

    s = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n";
    assert_int_equal(ingress_head_parse_response(s, strlen(s), &r), 0);
    ingress_head_body_init_response(&b, &r, false);
    assert_int_equal(ingress_head_body_feed(&b, "abcdef", 6), 3);
    assert_true(b.done);
    ingress_head_body_init_response(&b, &r, true); /* HEAD */
    assert_true(b.done);

    s = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
    assert_int_equal(ingress_head_parse_response(s, strlen(s), &r), 0);
    assert_true(r.chunked);
    ingress_head_body_init_response(&b, &r, false);
    assert_int_equal(ingress_head_body_feed(&b, "1\r\na\r\n0\r\n\r\nxx", 13), 11);
    assert_true(b.done);

    /* Without framing the body runs to EOF. */
    s = "HTTP/1.0 200 OK\r\n\r\n";
    assert_int_equal(ingress_head_parse_response(s, strlen(s), &r), 0);
    ingress_head_body_init_response(&b, &r, false);
    assert_int_equal(ingress_head_body_feed(&b, "0\r\n\r\n", 5), 5);
    assert_false(b.done);
    s = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n";
    assert_int_equal(ingress_head_parse_response(s, strlen(s), &r), 0);
    ingress_head_body_init_response(&b, &r, false);
    assert_false(b.done);

    /* No body after 204 and 304, whatever the head says. */
    s = "HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n";
    assert_int_equal(ingress_head_parse_response(s, strlen(s), &r), 0);
    ingress_head_body_init_response(&b, &r, false);
    assert_true(b.done);
    s = "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_int_equal(ingress_head_parse_response(s, strlen(s), &r), 0);
    ingress_head_body_init_response(&b, &r, false);
    assert_true(b.done);
}

static ssize_t feed_all(struct ingress_head_body *b, const char *s, bool bytewise)
{
    size_t len = strlen(s), used = 0;
    if (!bytewise) {
        return ingress_head_body_feed(b, s, len);
    }
    while (used < len && !b->done) {
        ssize_t n = ingress_head_body_feed(b, s + used, 1);
        if (n < 0) {
            return n;
        }
        used += (size_t)n;
        if (n == 0) {
            break;
        }
    }
    return (ssize_t)used;
}

static void test_ingress_head_body(void **state)
{
    struct ingress_head_request req;
    struct ingress_head_body b;

    /* No body: nothing belongs to it. */
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: h\r\n\r\n", &req), 0);
    ingress_head_body_init(&b, &req);
    assert_true(b.done);
    assert_int_equal(ingress_head_body_feed(&b, "GET /next", 9), 0);

    /* Content-Length counts exactly. */
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n", &req), 0);
    ingress_head_body_init(&b, &req);
    assert_false(b.done);
    assert_int_equal(ingress_head_body_feed(&b, "abc", 3), 3);
    assert_int_equal(ingress_head_body_feed(&b, "deGET /", 7), 2);
    assert_true(b.done);

    /* Chunked, in one piece and byte by byte, with extensions and trailers. */
    const char *chunked = "5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n";
    assert_int_equal(
        parse("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n", &req), 0);
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        char buf[128];
        snprintf(buf, sizeof(buf), "%sGET /smuggled HTTP/1.1\r\n", chunked);
        ingress_head_body_init(&b, &req);
        assert_int_equal(feed_all(&b, buf, bytewise), (ssize_t)strlen(chunked));
        assert_true(b.done);
    }
    /* Broken framing, bare LF and whitespace included (strict: RFC 9112 7.1). */
    static const char *const bad[] = {
        "x\r\n",          "\r\n",           "5\r\nhelloX",    "1x\r\n",
        "1\r\r\n",        "10000000000000000\r\n",             "0\r\nX\r\r\n",
        "3\nabc\n0\n\n",   "3\r\nabc\n",      "3 \r\nabc\r\n",  "0\r\n\n",
        "0\r\n folded\r\n", "1;a\001\r\nx\r\n", "0\r\nX: 1\n\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ingress_head_body_init(&b, &req);
        assert_int_equal(feed_all(&b, bad[i], false), -EBADMSG);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ingress_head_find_end),
        cmocka_unit_test(test_ingress_head_request_line),
        cmocka_unit_test(test_ingress_head_fields),
        cmocka_unit_test(test_ingress_head_too_many_fields),
        cmocka_unit_test(test_ingress_head_oversized),
        cmocka_unit_test(test_ingress_head_strict_lines),
        cmocka_unit_test(test_ingress_head_rewrite_reparses),
        cmocka_unit_test(test_ingress_head_route_by_host),
        cmocka_unit_test(test_ingress_head_route_by_headers),
        cmocka_unit_test(test_ingress_head_accept),
        cmocka_unit_test(test_ingress_head_token),
        cmocka_unit_test(test_ingress_head_rewrite),
        cmocka_unit_test(test_ingress_head_response),
        cmocka_unit_test(test_ingress_head_response_framing),
        cmocka_unit_test(test_ingress_head_body),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
