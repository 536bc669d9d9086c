#pragma once
/*
 * A strict HTTP/1.1 parser for messages we pass on or act on: request heads
 * (the ingress, later the egress gateway), response heads (the ingress, the
 * node's client to the guest) and body framing (Content-Length, chunked,
 * close-delimited). One parser, so every hop reads a message the same way.
 *
 * Everything here is hostile input (style.md R18): heads are bounded by
 * HTTP1_HEAD_MAX and HTTP1_MAX_FIELDS, the functions never allocate (but
 * the rewrites, into a strbuf) and never read past the given length.
 * fuzz-http1-request.c and fuzz-http1-response.c drive every entry point.
 *
 * Strict where a lenient reading could make two hops disagree about a
 * message (RFC 9112 11.2, request smuggling): line ends are CRLF only and a
 * CR appears nowhere else; obs-fold, whitespace before the colon, control
 * bytes in values, a second Host, a second Content-Length (even an equal
 * one), Content-Length with Transfer-Encoding and, in requests, any coding
 * but a single "chunked" are refused. The one leniency: up to two empty
 * lines before a request line.
 *
 * Pure functions over byte buffers: no I/O, no logging. Spans point into
 * the caller's buffer and are valid as long as it is.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "basic/strbuf.h"

#define HTTP1_HEAD_MAX (64u * 1024) /* request or response head, empty line included */
#define HTTP1_MAX_FIELDS 256        /* field lines in one head */

/* A run of bytes inside a head; not NUL-terminated. p is NULL when absent. */
struct http1_span {
    const char *p;
    size_t n;
};

/* True when span equals s exactly / ignoring ASCII case. */
bool http1_span_eq(struct http1_span span, const char *s);
bool http1_span_eq_ci(struct http1_span span, const char *s);

/*
 * Looks for the end of a head (the first empty line; up to two CRLFs before
 * the start line are skipped, RFC 9112 2.2). Any LF ends a line here, so a
 * head with bare LF ends is found (and then refused by the parsers).
 * Returns the head's length including the empty line, or 0 while it is
 * incomplete. resume (may be NULL) makes repeated calls on a growing buffer
 * linear: start it at 0 and pass it back unchanged each time.
 */
size_t http1_find_end(const char *buf, size_t len, size_t *resume);

struct http1_request {
    struct http1_span method, target, version;
    struct http1_span path;  /* target up to '?' or '#'; "*" for OPTIONS *, empty for
                                an absolute-form target without a path */
    struct http1_span query; /* after '?', up to '#'; p NULL without '?' */
    bool http10;
    /* Host header, or the authority of an absolute-form target (which wins, RFC 9112 3.2.2). */
    struct http1_span host;
    bool upgrade;    /* an Upgrade header and "upgrade" among the Connection options */
    bool keep_alive; /* the client may send another request (RFC 9112 9.3) */
    bool chunked;    /* Transfer-Encoding: chunked */
    bool has_content_length;
    uint64_t content_length;
    size_t n_fields;
    size_t head_len;
};

/*
 * Parses a complete request head (len from http1_find_end()). Returns 0,
 * or: -EBADMSG malformed (400), -E2BIG too large or too many fields (431),
 * -EPROTONOSUPPORT not HTTP/1.0 or 1.1 (505), -EOPNOTSUPP a transfer coding
 * other than chunked (501). *ret is written only on success.
 */
int http1_parse_request(const char *buf, size_t len, struct http1_request *ret);

/*
 * Iterates the field lines of a head that parsed: start *pos at 0. Returns
 * true with the name and the trimmed value, false after the last one.
 */
bool http1_field_next(const char *buf, size_t head_len, size_t *pos, struct http1_span *ret_name,
                      struct http1_span *ret_value);

/*
 * The value of the field called name (any case) in a parsed head: 1 and
 * *ret_value, 0 when absent (*ret_value zeroed), -EBADMSG when it occurs
 * more than once (a field that routes or authenticates must be unambiguous).
 */
int http1_field_unique(const char *buf, size_t head_len, const char *name,
                       struct http1_span *ret_value);

/* True when a comma-separated field value lists token (any case). */
bool http1_list_has(struct http1_span value, const char *token);

/*
 * True for an origin-form path a router can compare as is: starts with
 * '/', no empty segment ("//"), no "." or ".." segment, no backslash, and
 * percent-escapes only as "%XX" that do not encode '/', '\\', '.' or any
 * other unreserved byte (RFC 3986 6.2.2: those have one canonical form).
 */
bool http1_path_is_canonical(struct http1_span path);

/*
 * Appends the head to forward upstream. For an upgrade request every field
 * is kept; otherwise Connection, Keep-Alive, Proxy-Connection and Upgrade
 * are dropped and "Connection: close" is added (one request per upstream
 * connection). The result parses again to the same request; -E2BIG when it
 * would exceed HTTP1_HEAD_MAX or HTTP1_MAX_FIELDS. Returns 0, -E2BIG or
 * -ENOMEM.
 */
int http1_rewrite_request(const char *buf, const struct http1_request *req, struct strbuf *out);

/*
 * The same rewrite with "Connection: <connection>" ("close" or
 * "keep-alive") added instead, for a proxy that keeps its upstream
 * connection for the next request. An upgrade request still keeps every
 * field as it is (its connection ends with it).
 */
int http1_rewrite_request_conn(const char *buf, const struct http1_request *req,
                               const char *connection, struct strbuf *out);

struct http1_response {
    unsigned status; /* 100..599 */
    bool http10;
    bool close;     /* Connection: close, or HTTP/1.0 without keep-alive */
    bool chunked;   /* Transfer-Encoding ends in chunked */
    bool until_eof; /* Transfer-Encoding without chunked: the body ends at EOF */
    bool has_content_length;
    uint64_t content_length;
    size_t n_fields;
    size_t head_len;
};

/*
 * Parses a complete response head (len from http1_find_end()): an HTTP/1.x
 * status line and well-formed field lines, with its framing. Returns 0 or
 * -EBADMSG (also for Content-Length together with Transfer-Encoding, or a
 * second Content-Length); *ret is written only on success.
 */
int http1_parse_response(const char *buf, size_t len, struct http1_response *ret);

/*
 * Appends the response head (parsed before) with Connection, Keep-Alive
 * and Proxy-Connection replaced by "Connection: <connection>" ("close" or
 * "keep-alive"). Same guarantees and errors as http1_rewrite_request().
 */
int http1_rewrite_response(const char *buf, const struct http1_response *resp,
                           const char *connection, struct strbuf *out);

/*
 * Body framing (RFC 9112 6): where a message's body ends, and (for a
 * client) its payload. The chunked decoder is a byte-at-a-time state
 * machine outside chunk data, as strict as the heads.
 */
enum http1_body_kind {
    HTTP1_BODY_NONE,
    HTTP1_BODY_LENGTH,
    HTTP1_BODY_CHUNKED,
    HTTP1_BODY_UNTIL_EOF,
};

struct http1_body {
    enum http1_body_kind kind;
    int state; /* chunked parser state */
    uint64_t remaining;
    size_t line_len;
    unsigned digits, trailer_lines;
    bool cr;
    bool done;
};

void http1_body_init_request(struct http1_body *b, const struct http1_request *req);
/* For the body after a final response head; head_request: the request was HEAD. */
void http1_body_init_response(struct http1_body *b, const struct http1_response *resp,
                              bool head_request);

/* Payload bytes as they are found; return <0 to stop with that error. */
typedef int (*http1_data_cb)(const char *data, size_t len, void *userdata);

/*
 * Consumes bytes that follow the head: returns how many of the len bytes
 * belong to the body (framing included; b->done is set once it is
 * complete, and the rest is not part of this message), -EBADMSG for broken
 * chunked framing, or cb's error. cb (may be NULL) gets the payload: the
 * body without chunked framing. A body that ends at EOF takes everything
 * and is never done.
 */
ssize_t http1_body_feed(struct http1_body *b, const char *data, size_t len, http1_data_cb cb,
                        void *userdata);
