/*
 * libFuzzer target for the ingress head parser (style.md R18). The input is
 * treated as what a client sends (request head, then body bytes) and as
 * what a sandbox sends back (response head), and every entry point's
 * contract is checked: lengths stay inside the input, spans inside the
 * head, rewritten heads parse again with the same routing. Build with
 * -Dfuzzers=true and clang.
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/ingress-head.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_span(struct ingress_head_span s, const char *buf, size_t len)
{
    if (s.p && s.n > 0) {
        assert(s.p >= buf && s.p + s.n <= buf + len);
    }
}

static void fuzz_request(const char *buf, size_t size)
{
    struct ingress_head_request req, again;
    struct ingress_head_body body;
    struct strbuf sb = STRBUF_INIT;
    char id[SANDBOX_ID_LEN + 1], id2[SANDBOX_ID_LEN + 1];
    uint16_t port = 0, port2 = 0;
    const char *err = NULL;
    size_t resume = 0, end = 0;

    /* Incremental search agrees with a single pass. */
    for (size_t i = 0; i <= size && end == 0; i += 1 + i / 3) {
        end = ingress_head_find_end(buf, MIN(i, size), &resume);
    }
    if (end == 0) {
        end = ingress_head_find_end(buf, size, &resume);
    }
    assert(end == ingress_head_find_end(buf, size, NULL));
    assert(end <= size);
    if (end == 0 || ingress_head_parse_request(buf, end, &req) < 0) {
        return;
    }
    check_span(req.method, buf, end);
    check_span(req.target, buf, end);
    check_span(req.path, buf, end);
    check_span(req.query, buf, end);
    check_span(req.host, buf, end);
    check_span(req.sandbox_id, buf, end);
    check_span(req.sandbox_port, buf, end);
    check_span(req.access_token, buf, end);
    check_span(req.accept, buf, end);
    (void)ingress_head_prefers_html(&req);
    (void)ingress_head_query_has(&req, "signature");

    int routed = ingress_head_route(&req, "space.test", id, &port, &err);
    if (routed == 0) {
        assert(sandbox_id_is_valid(id) && port > 0);
    } else {
        assert(routed == -EINVAL && err);
    }

    /*
     * The smuggling property: what we forward re-parses, with the same
     * parser, to the same request (framing, target, routing, token), or the
     * rewrite refuses it as too large. Never a head that parses differently.
     */
    strbuf_init(&sb, INGRESS_HEAD_MAX + 1024);
    int rw = ingress_head_rewrite_request(buf, &req, &sb);
    assert(rw == 0 || rw == -E2BIG);
    if (rw == 0) {
        assert(ingress_head_find_end(sb.buf, sb.len, NULL) == sb.len);
        assert(ingress_head_parse_request(sb.buf, sb.len, &again) == 0);
        assert(again.chunked == req.chunked);
        assert(again.has_content_length == req.has_content_length);
        assert(again.content_length == req.content_length);
        assert(again.http10 == req.http10 && again.upgrade == req.upgrade);
        assert(again.method.n == req.method.n &&
               memcmp(again.method.p, req.method.p, req.method.n) == 0);
        assert(again.target.n == req.target.n &&
               memcmp(again.target.p, req.target.p, req.target.n) == 0);
        assert(again.access_token.n == req.access_token.n && !again.access_token.p == !req.access_token.p);
        int routed2 = ingress_head_route(&again, "space.test", id2, &port2, NULL);
        assert(routed2 == routed);
        if (routed == 0) {
            assert(strcmp(id, id2) == 0 && port == port2);
        }
    }
    strbuf_release(&sb);

    /* The body framing consumes at most what it is given, in any split. */
    size_t left = size - end, used = 0;
    const char *p = buf + end;
    ingress_head_body_init(&body, &req);
    while (used < left && !body.done) {
        size_t piece = MIN(left - used, (size_t)1 + (uint8_t)p[used] % 7);
        ssize_t n = ingress_head_body_feed(&body, p + used, piece);
        if (n < 0) {
            break;
        }
        assert((size_t)n <= piece);
        used += (size_t)n;
        if ((size_t)n < piece) {
            assert(body.done);
        }
    }
}

static void fuzz_response(const char *buf, size_t size)
{
    struct ingress_head_response resp, again;
    struct strbuf sb = STRBUF_INIT;
    size_t end = ingress_head_find_end(buf, size, NULL);

    if (end == 0 || ingress_head_parse_response(buf, end, &resp) < 0) {
        return;
    }
    assert(resp.status >= 100 && resp.status <= 599 && resp.head_len == end);
    int rw = ingress_head_rewrite_response(buf, end, &sb);
    assert(rw == 0 || rw == -E2BIG);
    if (rw == 0) {
        assert(ingress_head_find_end(sb.buf, sb.len, NULL) == sb.len);
        assert(ingress_head_parse_response(sb.buf, sb.len, &again) == 0);
        assert(again.status == resp.status && again.chunked == resp.chunked &&
               again.until_eof == resp.until_eof &&
               again.has_content_length == resp.has_content_length &&
               again.content_length == resp.content_length);
    }
    strbuf_release(&sb);

    /* The response body framing, fed in one piece. */
    struct ingress_head_body body;
    ingress_head_body_init_response(&body, &resp, size % 2 == 0);
    ssize_t n = ingress_head_body_feed(&body, buf + end, size - end);
    assert(n < 0 || (size_t)n <= size - end);
    assert(n < 0 || (size_t)n == size - end || body.done);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_request((const char *)data, size);
    fuzz_response((const char *)data, size);
    return 0;
}
