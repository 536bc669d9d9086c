#pragma once
/*
 * HTTP/1.x message heads as the ingress proxy sees them: the client's
 * request head (routing, token, body framing, the head we forward) and the
 * sandbox's response head (status, the head we pass back). Both are hostile
 * input (style.md R18): everything is bounded by INGRESS_HEAD_MAX, the
 * parsers never allocate and never read past the given length, and
 * fuzz-ingress-head.c drives every entry point.
 *
 * Pure functions over byte buffers: no I/O, no logging. Spans point into
 * the caller's buffer and are valid as long as it is.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "basic/strbuf.h"
#include "shared/sandbox-id.h"

#define INGRESS_HEAD_MAX (64u * 1024) /* request or response head, empty line included */
#define INGRESS_HEAD_MAX_FIELDS 256   /* header lines in a request or response head */

/* A run of bytes inside a head; not NUL-terminated. p is NULL when absent. */
struct ingress_head_span {
    const char *p;
    size_t n;
};

struct ingress_head_request {
    struct ingress_head_span method, target, version;
    struct ingress_head_span path;  /* target up to '?' or '#'; "*" for OPTIONS *, empty for
                                       an absolute-form target without a path */
    struct ingress_head_span query; /* after '?', up to '#'; p NULL without '?' */
    bool http10;
    /* Host header, or the authority of an absolute-form target (which wins, RFC 9112 3.2.2). */
    struct ingress_head_span host;
    struct ingress_head_span sandbox_id;   /* E2b-Sandbox-Id */
    struct ingress_head_span sandbox_port; /* E2b-Sandbox-Port */
    struct ingress_head_span access_token; /* X-Access-Token */
    struct ingress_head_span accept;       /* the first Accept header */
    bool upgrade; /* an Upgrade header and "upgrade" among the Connection options */
    bool chunked; /* Transfer-Encoding: chunked */
    bool has_content_length;
    uint64_t content_length;
    size_t head_len;
};

/*
 * Looks for the end of a head (the first empty line; up to two empty lines
 * before the request line are skipped, RFC 9112 2.2). Any LF ends a line
 * here, so a head with bare LF ends is found (and then refused by the
 * parsers, which want CRLF). Returns the head's length including the empty line, or 0 while it
 * is incomplete. resume (may be NULL) makes repeated calls on a growing
 * buffer linear: start it at 0 and pass it back unchanged each time.
 */
size_t ingress_head_find_end(const char *buf, size_t len, size_t *resume);

/*
 * Parses a complete request head (len from ingress_head_find_end()).
 * Returns 0, or: -EBADMSG malformed (400), -E2BIG too many fields (431),
 * -EPROTONOSUPPORT not HTTP/1.0 or 1.1 (505), -EOPNOTSUPP a transfer coding
 * other than chunked (501). *ret is written only on success.
 */
int ingress_head_parse_request(const char *buf, size_t len, struct ingress_head_request *ret);

/*
 * Picks the target sandbox and port (e2b-compat.md 4.1). Routing headers
 * (E2b-Sandbox-Id + E2b-Sandbox-Port, both required) are used when the Host
 * is an IP address, "localhost" or "sandbox.*", or does not route by
 * itself; otherwise the Host must be "<port>-<id>.<domain>", domain matched
 * case-insensitively, the id lowercased. Returns 0, or -EINVAL with
 * *ret_error (may be NULL) set to a static message for the 400 answer.
 */
int ingress_head_route(const struct ingress_head_request *req, const char *domain,
                       char ret_id[SANDBOX_ID_LEN + 1], uint16_t *ret_port, const char **ret_error);

/*
 * True when the Accept header prefers text/html over application/json
 * (browsers); false without Accept, for equal preference and for JSON.
 */
bool ingress_head_prefers_html(const struct ingress_head_request *req);

/* True when the query has a parameter called name with a non-empty value. */
bool ingress_head_query_has(const struct ingress_head_request *req, const char *name);

/* True when span equals s exactly. */
bool ingress_head_span_eq(struct ingress_head_span span, const char *s);

/*
 * Appends the head to forward upstream. For an upgrade request every field
 * is kept; otherwise Connection, Keep-Alive, Proxy-Connection and Upgrade
 * are dropped and "Connection: close" is added (one request per upstream
 * connection). The result parses again to the same request; -E2BIG when it
 * would exceed INGRESS_HEAD_MAX or INGRESS_HEAD_MAX_FIELDS. Returns 0,
 * -E2BIG or -ENOMEM.
 */
int ingress_head_rewrite_request(const char *buf, const struct ingress_head_request *req,
                                 struct strbuf *out);

struct ingress_head_response {
    unsigned status; /* 100..599 */
    size_t head_len;
    bool chunked;   /* Transfer-Encoding ends in chunked */
    bool until_eof; /* Transfer-Encoding without chunked: the body ends at EOF */
    bool has_content_length;
    uint64_t content_length;
};

/*
 * Parses a complete response head (len from ingress_head_find_end()): an
 * HTTP/1.x status line and well-formed field lines, with its framing.
 * Returns 0 or -EBADMSG (also for Content-Length together with
 * Transfer-Encoding, or a second Content-Length); *ret is written only on
 * success.
 */
int ingress_head_parse_response(const char *buf, size_t len, struct ingress_head_response *ret);

/*
 * Appends the response head (head_len bytes of buf, parsed before) with
 * Connection, Keep-Alive and Proxy-Connection replaced by "Connection: close".
 */
int ingress_head_rewrite_response(const char *buf, size_t head_len, struct strbuf *out);

/*
 * Body framing (RFC 9112 6): finds where the first request's body ends so
 * that nothing after it reaches the sandbox, and where the response ends so
 * that the exchange can close. Bytes are never modified or kept; only their
 * count matters.
 */
struct ingress_head_body {
    int kind;  /* none, length, chunked */
    int state; /* chunked parser state */
    uint64_t remaining;
    size_t line_len;
    unsigned digits, trailer_lines;
    bool cr;
    bool done;
};

void ingress_head_body_init(struct ingress_head_body *b, const struct ingress_head_request *req);
/* For the body after a final response head; head_request: the request was HEAD. */
void ingress_head_body_init_response(struct ingress_head_body *b,
                                     const struct ingress_head_response *resp, bool head_request);
/*
 * Consumes bytes that follow the head: returns how many of the len bytes
 * belong to the body (b->done is set once it is complete; the rest of data
 * is not part of this message), or -EBADMSG for broken chunked framing.
 * A body that ends at EOF takes everything and is never done.
 */
ssize_t ingress_head_body_feed(struct ingress_head_body *b, const char *data, size_t len);
