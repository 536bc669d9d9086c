/*
 * libFuzzer target for request heads (http1.h): the input is what a client
 * sends, a request head and then body bytes. Checks every contract: lengths
 * and spans stay inside the input, incremental search agrees with one pass,
 * and the smuggling property: what a proxy forwards (the rewrite) re-parses
 * to the same request. Build with -Dfuzzers=true and clang.
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "shared/http1.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_span(struct http1_span s, const char *buf, size_t len)
{
    if (s.p && s.n > 0) {
        assert(s.p >= buf && s.p + s.n <= buf + len);
    }
}

static bool span_same(struct http1_span a, struct http1_span b)
{
    return !a.p == !b.p && a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    struct http1_request req, again;
    struct http1_body body;
    struct strbuf sb = STRBUF_INIT;
    struct http1_span name, value;
    size_t resume = 0, end = 0, pos = 0, fields = 0;

    for (size_t i = 0; i <= size && end == 0; i += 1 + i / 3) {
        end = http1_find_end(buf, MIN(i, size), &resume);
    }
    if (end == 0) {
        end = http1_find_end(buf, size, &resume);
    }
    assert(end == http1_find_end(buf, size, NULL));
    assert(end <= size);
    if (end == 0 || http1_parse_request(buf, end, &req) < 0) {
        return 0;
    }
    assert(req.head_len == end && req.n_fields <= HTTP1_MAX_FIELDS);
    check_span(req.method, buf, end);
    check_span(req.target, buf, end);
    check_span(req.path, buf, end);
    check_span(req.query, buf, end);
    check_span(req.host, buf, end);
    while (http1_field_next(buf, end, &pos, &name, &value)) {
        check_span(name, buf, end);
        check_span(value, buf, end);
        fields++;
    }
    assert(fields == req.n_fields);
    (void)http1_path_is_canonical(req.path);
    (void)http1_field_unique(buf, end, "host", &value);

    strbuf_init(&sb, 2 * HTTP1_HEAD_MAX);
    int rw = http1_rewrite_request(buf, &req, &sb);
    assert(rw == 0 || rw == -E2BIG);
    if (rw == 0) {
        assert(http1_find_end(sb.buf, sb.len, NULL) == sb.len);
        assert(http1_parse_request(sb.buf, sb.len, &again) == 0);
        assert(span_same(again.method, req.method) && span_same(again.target, req.target));
        assert(span_same(again.host, req.host) && span_same(again.path, req.path));
        assert(again.http10 == req.http10 && again.upgrade == req.upgrade);
        assert(again.chunked == req.chunked && again.has_content_length == req.has_content_length &&
               again.content_length == req.content_length);
        assert(req.upgrade || !again.keep_alive);
    }
    strbuf_release(&sb);

    /* The body framing consumes at most what it is given, in any split. */
    size_t left = size - end, used = 0;
    const char *p = buf + end;
    http1_body_init_request(&body, &req);
    while (used < left && !body.done) {
        size_t piece = MIN(left - used, (size_t)1 + (uint8_t)p[used] % 7);
        ssize_t n = http1_body_feed(&body, p + used, piece, NULL, NULL);
        if (n < 0) {
            break;
        }
        assert((size_t)n <= piece);
        used += (size_t)n;
        if ((size_t)n < piece) {
            assert(body.done);
        }
    }
    return 0;
}
