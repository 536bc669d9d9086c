/*
 * libFuzzer target for response heads and bodies (http1.h): the input is
 * what a sandbox or guest sends back. The rewritten head re-parses to the
 * same framing; the body decoder, fed in one piece and byte by byte, agrees
 * with itself on where the body ends and what its payload is. Build with
 * -Dfuzzers=true and clang.
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "shared/http1.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int collect(const char *data, size_t len, void *userdata)
{
    struct strbuf *sb = userdata;
    /* Payload is part of the input: never more than it. */
    assert(len <= 1u << 20);
    return strbuf_append(sb, data, len);
}

/* Feeds the body in pieces of `step` (0: one piece); returns bytes consumed or <0. */
static ssize_t feed(struct http1_body *b, const char *p, size_t len, size_t step,
                    struct strbuf *payload)
{
    size_t used = 0;
    while (used < len && !b->done) {
        size_t piece = step ? MIN(step, len - used) : len - used;
        ssize_t n = http1_body_feed(b, p + used, piece, collect, payload);
        if (n < 0) {
            return n;
        }
        assert((size_t)n <= piece);
        used += (size_t)n;
        if ((size_t)n < piece) {
            assert(b->done);
        }
    }
    return (ssize_t)used;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    struct http1_response resp, again;
    struct strbuf sb = STRBUF_INIT;
    size_t end = http1_find_end(buf, size, NULL);

    if (end == 0 || http1_parse_response(buf, end, &resp) < 0) {
        return 0;
    }
    assert(resp.status >= 100 && resp.status <= 599 && resp.head_len == end);
    assert(!(resp.chunked && resp.has_content_length));
    strbuf_init(&sb, 2 * HTTP1_HEAD_MAX);
    int rw = http1_rewrite_response(buf, &resp, size % 2 ? "close" : "keep-alive", &sb);
    assert(rw == 0 || rw == -E2BIG);
    if (rw == 0) {
        assert(http1_find_end(sb.buf, sb.len, NULL) == sb.len);
        assert(http1_parse_response(sb.buf, sb.len, &again) == 0);
        assert(again.status == resp.status && again.chunked == resp.chunked &&
               again.until_eof == resp.until_eof &&
               again.has_content_length == resp.has_content_length &&
               again.content_length == resp.content_length);
        assert(again.close == (size % 2 == 1));
    }
    strbuf_release(&sb);

    /* One piece and byte by byte agree on the end and the payload. */
    struct http1_body b1, b2;
    struct strbuf p1 = STRBUF_INIT, p2 = STRBUF_INIT;
    bool head = size % 3 == 0;
    http1_body_init_response(&b1, &resp, head);
    http1_body_init_response(&b2, &resp, head);
    ssize_t n1 = feed(&b1, buf + end, size - end, 0, &p1);
    ssize_t n2 = feed(&b2, buf + end, size - end, 1, &p2);
    assert((n1 < 0) == (n2 < 0));
    if (n1 >= 0) {
        assert(n1 == n2 && b1.done == b2.done);
        assert(p1.len == p2.len && (p1.len == 0 || memcmp(p1.buf, p2.buf, p1.len) == 0));
        assert(p1.len <= (size_t)n1);
    }
    strbuf_release(&p1);
    strbuf_release(&p2);
    return 0;
}
