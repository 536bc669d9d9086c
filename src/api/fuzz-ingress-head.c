/*
 * libFuzzer target for what the ingress reads beyond HTTP/1.1
 * (ingress-head.h): E2B's routing and token headers, Host routing, Accept.
 * Asserts the ingress' half of the smuggling property: the head it forwards
 * (http1_rewrite_request()) re-parses to a request that routes to the same
 * sandbox and port with the same token. The HTTP/1.1 parser has its own
 * targets (src/shared/fuzz-http1-*.c). Build with -Dfuzzers=true and clang.
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/ingress-head.h"

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
    struct ingress_head_request req, again;
    struct strbuf sb = STRBUF_INIT;
    char id[SANDBOX_ID_LEN + 1], id2[SANDBOX_ID_LEN + 1];
    uint16_t port = 0, port2 = 0;
    const char *err = NULL;
    size_t end = http1_find_end(buf, size, NULL);

    if (end == 0 || ingress_head_parse_request(buf, end, &req) < 0) {
        return 0;
    }
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

    strbuf_init(&sb, 2 * HTTP1_HEAD_MAX);
    int rw = http1_rewrite_request(buf, &req.http, &sb);
    assert(rw == 0 || rw == -E2BIG);
    if (rw == 0) {
        assert(ingress_head_parse_request(sb.buf, sb.len, &again) == 0);
        assert(span_same(again.access_token, req.access_token));
        assert(span_same(again.sandbox_id, req.sandbox_id));
        assert(span_same(again.sandbox_port, req.sandbox_port));
        assert(again.http.chunked == req.http.chunked &&
               again.http.content_length == req.http.content_length);
        assert(ingress_head_route(&again, "space.test", id2, &port2, NULL) == routed);
        if (routed == 0) {
            assert(strcmp(id, id2) == 0 && port == port2);
        }
    }
    strbuf_release(&sb);
    return 0;
}
