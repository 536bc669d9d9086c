/*
 * Unit tests for the strict HTTP/1.1 parser (http1.h): request heads, the
 * heads we forward, response heads, body framing and decoding, fields,
 * keep-alive and canonical paths.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "shared/http1.h"

#define ID "abcdefghij0123456789"

/* Parses a whole head given as a string; the head must end at the string's end. */
static int parse(const char *text, struct http1_request *req)
{
    size_t len = strlen(text);
    size_t end = http1_find_end(text, len, NULL);
    if (end != len) {
        return end == 0 ? -EAGAIN : -ERANGE;
    }
    return http1_parse_request(text, len, req);
}

static void test_http1_find_end(void **state)
{
    const char *h = "GET / HTTP/1.1\r\nHost: x\r\n\r\nBODY";
    size_t resume = 0;

    assert_int_equal(http1_find_end(h, strlen(h), NULL), strlen(h) - 4);
    /* Byte by byte with resume gives the same answer, and 0 before. */
    for (size_t i = 1; i < strlen(h) - 4; i++) {
        assert_int_equal(http1_find_end(h, i, &resume), 0);
    }
    assert_int_equal(http1_find_end(h, strlen(h), &resume), strlen(h) - 4);
    /* Bare LF ends are found (so they can be refused), and leading empty lines. */
    assert_int_equal(http1_find_end("GET / HTTP/1.1\nHost: x\n\n", 24, NULL), 24);
    assert_int_equal(http1_find_end("\r\nGET / HTTP/1.0\r\n\r\n", 20, NULL), 20);
    assert_int_equal(http1_find_end("GET / HTTP/1.1\r\nHost: x\r\n", 25, NULL), 0);
    assert_int_equal(http1_find_end("", 0, NULL), 0);
}

static void test_http1_request_line(void **state)
{
    struct http1_request req;

    assert_int_equal(
        parse("POST /files?path=%2Fa&signature=v1_x HTTP/1.1\r\nHost: h\r\n\r\n", &req), 0);
    assert_true(http1_span_eq(req.method, "POST"));
    assert_true(http1_span_eq(req.path, "/files"));
    assert_true(http1_span_eq(req.query, "path=%2Fa&signature=v1_x"));
    assert_false(req.http10);

    assert_int_equal(parse("GET /health#frag HTTP/1.0\r\n\r\n", &req), 0);
    assert_true(req.http10);
    assert_true(http1_span_eq(req.path, "/health"));
    assert_null(req.query.p);
    assert_null(req.host.p);

    /* Absolute form: the authority is the host. */
    assert_int_equal(
        parse("GET http://8000-" ID ".space.test/x?y HTTP/1.1\r\nHost: other\r\n\r\n", &req), 0);
    assert_true(http1_span_eq(req.host, "8000-" ID ".space.test"));
    assert_true(http1_span_eq(req.path, "/x"));
    assert_int_equal(parse("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", &req), 0);
    assert_true(http1_span_eq(req.path, "*"));

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

static void test_http1_fields(void **state)
{
    struct http1_request req;

    assert_int_equal(parse("GET / HTTP/1.1\r\nhOsT:   h:80 \r\nX-ACCESS-TOKEN: tok\r\n"
                           "accept: application/json\r\nContent-Length: 12\r\n\r\n",
                           &req),
                     0);
    assert_true(http1_span_eq(req.host, "h:80"));
    assert_true(req.has_content_length);
    assert_int_equal(req.content_length, 12);

    /* Missing Host on 1.1, duplicates that matter, smuggling shapes. */
    assert_int_equal(parse("GET / HTTP/1.1\r\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", &req), -EBADMSG);
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

static void test_http1_too_many_fields(void **state)
{
    struct http1_request req;
    char *text = malloc(HTTP1_HEAD_MAX);
    size_t n = 0;

    assert_non_null(text);
    n += (size_t)snprintf(text + n, HTTP1_HEAD_MAX - n, "GET / HTTP/1.1\r\nHost: h\r\n");
    for (int i = 0; i < HTTP1_MAX_FIELDS; i++) {
        n += (size_t)snprintf(text + n, HTTP1_HEAD_MAX - n, "X-%d: v\r\n", i);
    }
    n += (size_t)snprintf(text + n, HTTP1_HEAD_MAX - n, "\r\n");
    assert_int_equal(parse(text, &req), -E2BIG);
    free(text);
}

static void test_http1_oversized(void **state)
{
    struct http1_request req;
    size_t len = HTTP1_HEAD_MAX + 100;
    char *text = malloc(len + 1);

    assert_non_null(text);
    memset(text, 'a', len);
    memcpy(text, "GET / HTTP/1.1\r\nHost: h\r\nX: ", 28);
    memcpy(text + len - 4, "\r\n\r\n", 4);
    text[len] = '\0';
    /* A head that only ends past the cap is found, but refused by the parser. */
    assert_int_equal(http1_find_end(text, len, NULL), len);
    assert_int_equal(http1_parse_request(text, len, &req), -E2BIG);
    free(text);
}

/* Line ends: CRLF only, no CR anywhere else (a proxy must not guess, RFC 9112 2.2). */
static void test_http1_strict_lines(void **state)
{
    struct http1_request req;

    assert_int_equal(parse("GET / HTTP/1.1\nHost: x\n\n", &req), -EBADMSG);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: x\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: x\r\n\n", &req), -EBADMSG);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: x\r\nX: a\rb\r\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("GET /\r HTTP/1.1\r\nHost: x\r\n\r\n", &req), -EBADMSG);
    assert_int_equal(parse("GET / HTTP/1.1\r\r\nHost: x\r\n\r\n", &req), -EBADMSG);
    /* A bare LF before the request line is an empty head, and refused. */
    assert_int_equal(http1_find_end("\nGET / HTTP/1.1\r\n\r\n", 19, NULL), 1);
    assert_int_equal(http1_parse_request("\n", 1, &req), -EBADMSG);
    assert_int_equal(parse("\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", &req), 0);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: x\r\nX:\0\r\n\r\n", &req), -EAGAIN);
}

/*
 * What fuzz-ingress-head found: a head at the field cap, with junk fields
 * and repeated Content-Lengths, whose rewrite (+ Connection: close) the
 * parser then refused. The rewrite now refuses instead, and what it does
 * forward parses to the same request.
 */
static void test_http1_rewrite_reparses(void **state)
{
    struct http1_request req, again;
    struct strbuf sb = STRBUF_INIT;
    char *text = malloc(HTTP1_HEAD_MAX);
    size_t n = 0;

    assert_non_null(text);
    n += (size_t)snprintf(text + n, HTTP1_HEAD_MAX - n, "GET / HTTP/1.1\r\nHost: h\r\n");
    for (int i = 0; i < HTTP1_MAX_FIELDS - 1; i++) {
        n += (size_t)snprintf(text + n, HTTP1_HEAD_MAX - n, "x:\r\n");
    }
    n += (size_t)snprintf(text + n, HTTP1_HEAD_MAX - n, "\r\n");
    assert_int_equal(parse(text, &req), 0);
    strbuf_init(&sb, 2 * HTTP1_HEAD_MAX);
    assert_int_equal(http1_rewrite_request(text, &req, &sb), -E2BIG);
    strbuf_release(&sb);

    /* One field fewer fits, and re-parses the same. */
    n = 0;
    n += (size_t)snprintf(text + n, HTTP1_HEAD_MAX - n,
                          "POST /p?q HTTP/1.1\r\nHost: h\r\nContent-Length: 7\r\n");
    for (int i = 0; i < HTTP1_MAX_FIELDS - 3; i++) {
        n += (size_t)snprintf(text + n, HTTP1_HEAD_MAX - n, "x:\r\n");
    }
    n += (size_t)snprintf(text + n, HTTP1_HEAD_MAX - n, "Connection: x\r\n\r\n");
    assert_int_equal(parse(text, &req), 0);
    strbuf_init(&sb, 2 * HTTP1_HEAD_MAX);
    assert_int_equal(http1_rewrite_request(text, &req, &sb), 0);
    assert_int_equal(http1_find_end(sb.buf, sb.len, NULL), sb.len);
    assert_int_equal(http1_parse_request(sb.buf, sb.len, &again), 0);
    assert_true(again.has_content_length && again.content_length == 7);
    assert_true(http1_span_eq(again.target, "/p?q"));
    strbuf_release(&sb);
    free(text);
}

static char *rewrite(const char *text)
{
    struct http1_request req;
    struct strbuf sb = STRBUF_INIT;

    assert_int_equal(parse(text, &req), 0);
    assert_int_equal(http1_rewrite_request(text, &req, &sb), 0);
    return strbuf_detach(&sb, NULL);
}

static void test_http1_rewrite(void **state)
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
    struct http1_response r;
    struct strbuf sb = STRBUF_INIT;
    assert_int_equal(http1_parse_response(resp, strlen(resp), &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(http1_rewrite_response(resp, &r, "close", &sb), 0);
    assert_string_equal(sb.buf,
                        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n");
    strbuf_release(&sb);
}

/* The keep-alive variant: the same fields dropped, "keep-alive" said, still re-parses. */
static void test_http1_rewrite_request_conn(void **state)
{
    const char *text = "GET /x HTTP/1.1\r\nHost: h\r\nConnection: close, x-a\r\n"
                       "Proxy-Connection: keep-alive\r\nKeep-Alive: 5\r\nUpgrade: h2c\r\n"
                       "X-A: 1\r\n\r\n";
    struct http1_request req, again;
    struct strbuf sb = STRBUF_INIT;

    assert_int_equal(parse(text, &req), 0);
    assert_false(req.keep_alive);
    assert_int_equal(http1_rewrite_request_conn(text, &req, "keep-alive", &sb), 0);
    assert_string_equal(sb.buf,
                        "GET /x HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nConnection: keep-alive\r\n\r\n");
    assert_int_equal(http1_find_end(sb.buf, sb.len, NULL), sb.len);
    assert_int_equal(http1_parse_request(sb.buf, sb.len, &again), 0);
    assert_true(again.keep_alive);
    assert_true(http1_span_eq(again.host, "h"));
    strbuf_release(&sb);

    /* HTTP/1.0: keep-alive only when said, and the rewrite says it. */
    text = "GET / HTTP/1.0\r\nHost: h\r\n\r\n";
    assert_int_equal(parse(text, &req), 0);
    assert_false(req.keep_alive);
    assert_int_equal(http1_rewrite_request_conn(text, &req, "keep-alive", &sb), 0);
    assert_int_equal(http1_parse_request(sb.buf, sb.len, &again), 0);
    assert_true(again.keep_alive);
    strbuf_release(&sb);

    /* "close" is http1_rewrite_request() exactly. */
    text = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\n";
    assert_int_equal(parse(text, &req), 0);
    assert_int_equal(http1_rewrite_request_conn(text, &req, "close", &sb), 0);
    char *plain = rewrite(text);
    assert_string_equal(sb.buf, plain);
    free(plain);
    strbuf_release(&sb);

    /* An upgrade keeps its fields whatever is asked. */
    text = "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
    assert_int_equal(parse(text, &req), 0);
    assert_int_equal(http1_rewrite_request_conn(text, &req, "keep-alive", &sb), 0);
    assert_string_equal(sb.buf, text);
    strbuf_release(&sb);
}

static void test_http1_response(void **state)
{
    struct http1_response r;

#define RESP(s, want) assert_int_equal(http1_parse_response(s, strlen(s), &r), want)
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

static void test_http1_response_framing(void **state)
{
    struct http1_response r;
    struct http1_body b;
    const char *s;

    s = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n";
    assert_int_equal(http1_parse_response(s, strlen(s), &r), 0);
    http1_body_init_response(&b, &r, false);
    assert_int_equal(http1_body_feed(&b, "abcdef", 6, NULL, NULL), 3);
    assert_true(b.done);
    http1_body_init_response(&b, &r, true); /* HEAD */
    assert_true(b.done);

    s = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
    assert_int_equal(http1_parse_response(s, strlen(s), &r), 0);
    assert_true(r.chunked);
    http1_body_init_response(&b, &r, false);
    assert_int_equal(http1_body_feed(&b, "1\r\na\r\n0\r\n\r\nxx", 13, NULL, NULL), 11);
    assert_true(b.done);

    /* Without framing the body runs to EOF. */
    s = "HTTP/1.0 200 OK\r\n\r\n";
    assert_int_equal(http1_parse_response(s, strlen(s), &r), 0);
    http1_body_init_response(&b, &r, false);
    assert_int_equal(http1_body_feed(&b, "0\r\n\r\n", 5, NULL, NULL), 5);
    assert_false(b.done);
    s = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n";
    assert_int_equal(http1_parse_response(s, strlen(s), &r), 0);
    http1_body_init_response(&b, &r, false);
    assert_false(b.done);

    /* No body after 204 and 304, whatever the head says. */
    s = "HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n";
    assert_int_equal(http1_parse_response(s, strlen(s), &r), 0);
    http1_body_init_response(&b, &r, false);
    assert_true(b.done);
    s = "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_int_equal(http1_parse_response(s, strlen(s), &r), 0);
    http1_body_init_response(&b, &r, false);
    assert_true(b.done);
}

static ssize_t feed_all(struct http1_body *b, const char *s, bool bytewise)
{
    size_t len = strlen(s), used = 0;
    if (!bytewise) {
        return http1_body_feed(b, s, len, NULL, NULL);
    }
    while (used < len && !b->done) {
        ssize_t n = http1_body_feed(b, s + used, 1, NULL, NULL);
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

static void test_http1_body(void **state)
{
    struct http1_request req;
    struct http1_body b;

    /* No body: nothing belongs to it. */
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: h\r\n\r\n", &req), 0);
    http1_body_init_request(&b, &req);
    assert_true(b.done);
    assert_int_equal(http1_body_feed(&b, "GET /next", 9, NULL, NULL), 0);

    /* Content-Length counts exactly. */
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n", &req), 0);
    http1_body_init_request(&b, &req);
    assert_false(b.done);
    assert_int_equal(http1_body_feed(&b, "abc", 3, NULL, NULL), 3);
    assert_int_equal(http1_body_feed(&b, "deGET /", 7, NULL, NULL), 2);
    assert_true(b.done);

    /* Chunked, in one piece and byte by byte, with extensions and trailers. */
    const char *chunked = "5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n";
    assert_int_equal(
        parse("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n", &req), 0);
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        char buf[128];
        snprintf(buf, sizeof(buf), "%sGET /smuggled HTTP/1.1\r\n", chunked);
        http1_body_init_request(&b, &req);
        assert_int_equal(feed_all(&b, buf, bytewise), (ssize_t)strlen(chunked));
        assert_true(b.done);
    }
    /* Broken framing, bare LF and whitespace included (strict: RFC 9112 7.1). */
    static const char *const bad[] = {
        "x\r\n",
        "\r\n",
        "5\r\nhelloX",
        "1x\r\n",
        "1\r\r\n",
        "10000000000000000\r\n",
        "0\r\nX\r\r\n",
        "3\nabc\n0\n\n",
        "3\r\nabc\n",
        "3 \r\nabc\r\n",
        "0\r\n\n",
        "0\r\n folded\r\n",
        "1;a\001\r\nx\r\n",
        "0\r\nX: 1\n\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        http1_body_init_request(&b, &req);
        assert_int_equal(feed_all(&b, bad[i], false), -EBADMSG);
    }
}

static void test_http1_keep_alive(void **state)
{
    struct http1_request req;
    struct http1_response r;

    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: h\r\n\r\n", &req), 0);
    assert_true(req.keep_alive);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: x, Close\r\n\r\n", &req), 0);
    assert_false(req.keep_alive);
    assert_int_equal(parse("GET / HTTP/1.0\r\n\r\n", &req), 0);
    assert_false(req.keep_alive);
    assert_int_equal(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &req), 0);
    assert_true(req.keep_alive);

#define RESP(s) http1_parse_response(s, strlen(s), &r)
    assert_int_equal(RESP("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), 0);
    assert_false(r.close);
    assert_int_equal(RESP("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"), 0);
    assert_true(r.close);
    assert_int_equal(RESP("HTTP/1.0 200 OK\r\n\r\n"), 0);
    assert_true(r.close && r.http10);
#undef RESP
}

static void test_http1_field_lookup(void **state)
{
    const char *h = "GET / HTTP/1.1\r\nHost: h\r\nX-A:  1 \r\nx-a: 2\r\nX-B:\r\n\r\n";
    struct http1_span name, value;
    size_t pos = 0, n = 0;

    while (http1_field_next(h, strlen(h), &pos, &name, &value)) {
        n++;
    }
    assert_int_equal(n, 4);
    assert_int_equal(http1_field_unique(h, strlen(h), "x-a", &value), -EBADMSG);
    assert_int_equal(http1_field_unique(h, strlen(h), "HOST", &value), 1);
    assert_true(http1_span_eq(value, "h"));
    assert_int_equal(http1_field_unique(h, strlen(h), "X-B", &value), 1);
    assert_non_null(value.p);
    assert_int_equal(value.n, 0);
    assert_int_equal(http1_field_unique(h, strlen(h), "X-C", &value), 0);
    assert_null(value.p);
    assert_true(http1_list_has((struct http1_span){ "a, Upgrade ,b", 13 }, "upgrade"));
    assert_false(http1_list_has((struct http1_span){ "a, Upgrades", 11 }, "upgrade"));
}

static bool canonical(const char *path)
{
    return http1_path_is_canonical((struct http1_span){ path, strlen(path) });
}

static void test_http1_canonical_path(void **state)
{
    assert_true(canonical("/"));
    assert_true(canonical("/init"));
    assert_true(canonical("/files/"));
    assert_true(canonical("/process.Process/Start"));
    assert_true(canonical("/a%20b"));
    assert_true(canonical("/.well-known/x"));
    assert_false(canonical(""));
    assert_false(canonical("*"));
    assert_false(canonical("init"));
    assert_false(canonical("//x/init"));
    assert_false(canonical("/x//init"));
    assert_false(canonical("/./init"));
    assert_false(canonical("/x/../init"));
    assert_false(canonical("/x/.."));
    assert_false(canonical("/x/."));
    assert_false(canonical("/%2Finit"));
    assert_false(canonical("/%2finit"));
    assert_false(canonical("/%69nit"));
    assert_false(canonical("/%2e/init"));
    assert_false(canonical("/%5Cinit"));
    assert_false(canonical("/\\init"));
    assert_false(canonical("/a%2"));
    assert_false(canonical("/a%zz"));
}

static int collect(const char *data, size_t len, void *userdata)
{
    return strbuf_append(userdata, data, len);
}

/* The decoder a client uses: payload only, strict framing, any split. */
static void test_http1_body_decode(void **state)
{
    const char *body = "5;x=1\r\nhello\r\n6\r\n world\r\n0\r\nT: 1\r\n\r\nNEXT";
    const char *head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    struct http1_response r;
    struct http1_body b;

    assert_int_equal(http1_parse_response(head, strlen(head), &r), 0);
    for (size_t step = 1; step <= strlen(body); step++) {
        struct strbuf sb = STRBUF_INIT;
        size_t used = 0, len = strlen(body);
        http1_body_init_response(&b, &r, false);
        while (used < len && !b.done) {
            ssize_t n = http1_body_feed(&b, body + used, MIN(step, len - used), collect, &sb);
            assert_true(n >= 0);
            used += (size_t)n;
        }
        assert_true(b.done);
        assert_int_equal(used, len - 4);
        assert_int_equal(sb.len, 11);
        assert_memory_equal(sb.buf, "hello world", 11);
        strbuf_release(&sb);
    }
    /* An incomplete body is never done. */
    http1_body_init_response(&b, &r, false);
    assert_int_equal(http1_body_feed(&b, "5\r\nhello\r\n", 10, NULL, NULL), 10);
    assert_false(b.done);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http1_find_end),
        cmocka_unit_test(test_http1_request_line),
        cmocka_unit_test(test_http1_fields),
        cmocka_unit_test(test_http1_too_many_fields),
        cmocka_unit_test(test_http1_oversized),
        cmocka_unit_test(test_http1_strict_lines),
        cmocka_unit_test(test_http1_rewrite_reparses),
        cmocka_unit_test(test_http1_rewrite),
        cmocka_unit_test(test_http1_rewrite_request_conn),
        cmocka_unit_test(test_http1_response),
        cmocka_unit_test(test_http1_response_framing),
        cmocka_unit_test(test_http1_body),
        cmocka_unit_test(test_http1_keep_alive),
        cmocka_unit_test(test_http1_field_lookup),
        cmocka_unit_test(test_http1_canonical_path),
        cmocka_unit_test(test_http1_body_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
