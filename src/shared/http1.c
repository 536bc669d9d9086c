/*
 * The strict HTTP/1.1 parser (http1.h has the contract and what "strict"
 * means here).
 *
 * The property the fuzzers check: a head we accept and rewrite parses
 * again, with this parser, to the same message (same framing, same target).
 * So the rewrites refuse (-E2BIG) rather than produce a head past the field
 * or size caps.
 *
 * Chunked bodies are followed by a byte-at-a-time state machine outside
 * chunk data (http1_body_feed()); the bytes are counted, and the payload is
 * handed to a callback for those who want it decoded.
 */
#include "shared/http1.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "basic/macro.h"
#include "basic/parse-util.h"

#define METHOD_MAX 32
#define CHUNK_LINE_MAX 4096 /* size line with extensions, and each trailer line */
#define CHUNK_TRAILER_LINES_MAX 64

enum {
    CHUNK_SIZE,      /* hex digits */
    CHUNK_SIZE_TAIL, /* extensions, up to CRLF */
    CHUNK_DATA,
    CHUNK_DATA_CR, /* the CRLF after the data */
    CHUNK_DATA_LF,
    CHUNK_TRAILER_START,
    CHUNK_TRAILER_LINE,
    CHUNK_LAST_LF, /* CR of the final empty line seen */
};

static bool is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

bool http1_span_eq_ci(struct http1_span s, const char *lit)
{
    size_t n = strlen(lit);
    return s.p && s.n == n && strncasecmp(s.p, lit, n) == 0;
}

bool http1_span_eq(struct http1_span span, const char *s)
{
    size_t n = strlen(s);
    return span.p && span.n == n && memcmp(span.p, s, n) == 0;
}

/* Trims SP and HTAB from both ends. */
static struct http1_span trim_ows(struct http1_span s)
{
    while (s.n > 0 && (s.p[0] == ' ' || s.p[0] == '\t')) {
        s.p++;
        s.n--;
    }
    while (s.n > 0 && (s.p[s.n - 1] == ' ' || s.p[s.n - 1] == '\t')) {
        s.n--;
    }
    return s;
}

/*
 * Takes the next line from [*pos, end): *ret is the line without its LF or
 * CRLF. Returns false when no LF is left. Lenient about line ends: only for
 * finding where a head ends; parsing uses next_line_strict().
 */
static bool next_line(const char **pos, const char *end, struct http1_span *ret)
{
    const char *p = *pos;
    const char *nl = memchr(p, '\n', (size_t)(end - p));

    if (!nl) {
        return false;
    }
    *ret = (struct http1_span){ p, (size_t)(nl - p) };
    if (ret->n > 0 && p[ret->n - 1] == '\r') {
        ret->n--;
    }
    *pos = nl + 1;
    return true;
}

/*
 * Like next_line(), but the line must end in CRLF and hold no other CR.
 * Returns 1, 0 when no LF is left, or -EBADMSG.
 */
static int next_line_strict(const char **pos, const char *end, struct http1_span *ret)
{
    const char *start = *pos;

    if (!next_line(pos, end, ret)) {
        return 0;
    }
    /* next_line() dropped one CR before the LF: it must have been there. */
    if (*pos - start != (ptrdiff_t)ret->n + 2 || memchr(ret->p, '\r', ret->n)) {
        return -EBADMSG;
    }
    return 1;
}

/* Skips at most two empty lines before a start line (RFC 9112 2.2: at least one). */
static const char *skip_empty_lines(const char *p, const char *end)
{
    for (int i = 0; i < 2 && p < end; i++) {
        if (*p == '\r' && p + 1 < end && p[1] == '\n') {
            p += 2;
        } else {
            break;
        }
    }
    return p;
}

size_t http1_find_end(const char *buf, size_t len, size_t *resume)
{
    const char *end = buf + len, *p = skip_empty_lines(buf, end);
    struct http1_span line;

    if (resume && *resume > (size_t)(p - buf) && *resume <= len) {
        p = buf + *resume;
    }
    for (;;) {
        const char *start = p;
        if (!next_line(&p, end, &line)) {
            if (resume) {
                *resume = (size_t)(start - buf);
            }
            return 0;
        }
        if (line.n == 0) {
            return (size_t)(p - buf);
        }
    }
}

/*
 * Splits "name: value": name is a non-empty token directly followed by the
 * colon; value is trimmed and may hold HTAB, visible ASCII and obs-text.
 */
static int split_field(struct http1_span line, struct http1_span *ret_name,
                       struct http1_span *ret_value)
{
    size_t i = 0;

    while (i < line.n && is_tchar((unsigned char)line.p[i])) {
        i++;
    }
    if (i == 0 || i >= line.n || line.p[i] != ':') {
        return -EBADMSG;
    }
    for (size_t k = i + 1; k < line.n; k++) {
        unsigned char c = (unsigned char)line.p[k];
        if (c != '\t' && (c < 0x20 || c == 0x7f)) {
            return -EBADMSG;
        }
    }
    *ret_name = (struct http1_span){ line.p, i };
    *ret_value = trim_ows((struct http1_span){ line.p + i + 1, line.n - i - 1 });
    return 0;
}

/* Sets *slot once; a second occurrence is an error (ambiguous routing or auth). */
static int set_once(struct http1_span *slot, struct http1_span value)
{
    if (slot->p) {
        return -EBADMSG;
    }
    /* Present but empty still counts as present. */
    *slot = (struct http1_span){ value.p ? value.p : "", value.n };
    return 0;
}

bool http1_list_has(struct http1_span value, const char *token)
{
    size_t i = 0;

    while (i < value.n) {
        size_t start = i;
        while (i < value.n && value.p[i] != ',') {
            i++;
        }
        if (http1_span_eq_ci(trim_ows((struct http1_span){ value.p + start, i - start }), token)) {
            return true;
        }
        i++;
    }
    return false;
}

static int parse_content_length(struct http1_span v, uint64_t *ret)
{
    char digits[21];

    if (v.n == 0 || v.n >= sizeof(digits)) {
        return -EBADMSG;
    }
    for (size_t i = 0; i < v.n; i++) {
        if (!is_digit(v.p[i])) {
            return -EBADMSG;
        }
    }
    memcpy(digits, v.p, v.n);
    digits[v.n] = '\0';
    return parse_u64(digits, ret) < 0 ? -EBADMSG : 0;
}

static int parse_target(struct http1_request *req)
{
    struct http1_span t = req->target;
    size_t i, start;

    if (t.n == 1 && t.p[0] == '*') {
        if (!http1_span_eq_ci(req->method, "OPTIONS")) {
            return -EBADMSG;
        }
        req->path = t;
        return 0;
    }
    i = 0;
    if (t.p[0] != '/') {
        size_t scheme = t.n >= 7 && strncasecmp(t.p, "http://", 7) == 0    ? 7
                        : t.n >= 8 && strncasecmp(t.p, "https://", 8) == 0 ? 8
                                                                           : 0;
        if (scheme == 0) {
            return -EBADMSG; /* authority-form (CONNECT) and anything else */
        }
        start = i = scheme;
        while (i < t.n && t.p[i] != '/' && t.p[i] != '?' && t.p[i] != '#') {
            if (t.p[i] == '@') {
                return -EBADMSG; /* userinfo is not allowed in http(s) URIs (RFC 9110 4.2.4) */
            }
            i++;
        }
        if (i == start) {
            return -EBADMSG;
        }
        req->host = (struct http1_span){ t.p + start, i - start };
    }
    start = i;
    while (i < t.n && t.p[i] != '?' && t.p[i] != '#') {
        i++;
    }
    /* Empty for "http://host" (meaning "/"); still a span inside the buffer. */
    req->path = (struct http1_span){ t.p + start, i - start };
    if (i < t.n && t.p[i] == '?') {
        start = ++i;
        while (i < t.n && t.p[i] != '#') {
            i++;
        }
        req->query = (struct http1_span){ t.p + start, i - start };
    }
    return 0;
}

static int parse_request_line(struct http1_span line, struct http1_request *req)
{
    size_t i = 0, start;

    while (i < line.n && is_tchar((unsigned char)line.p[i])) {
        i++;
    }
    if (i == 0 || i > METHOD_MAX || i >= line.n || line.p[i] != ' ') {
        return -EBADMSG;
    }
    req->method = (struct http1_span){ line.p, i };
    start = ++i;
    while (i < line.n && (unsigned char)line.p[i] > 0x20 && (unsigned char)line.p[i] != 0x7f) {
        i++;
    }
    if (i == start || i >= line.n || line.p[i] != ' ') {
        return -EBADMSG;
    }
    req->target = (struct http1_span){ line.p + start, i - start };
    req->version = (struct http1_span){ line.p + i + 1, line.n - i - 1 };
    if (http1_span_eq(req->version, "HTTP/1.1")) {
        req->http10 = false;
    } else if (http1_span_eq(req->version, "HTTP/1.0")) {
        req->http10 = true;
    } else if (req->version.n == 8 && memcmp(req->version.p, "HTTP/", 5) == 0 &&
               is_digit(req->version.p[5]) && req->version.p[6] == '.' &&
               is_digit(req->version.p[7])) {
        return -EPROTONOSUPPORT;
    } else {
        return -EBADMSG;
    }
    return parse_target(req);
}

int http1_parse_request(const char *buf, size_t len, struct http1_request *ret)
{
    struct http1_request req = { .head_len = len };
    struct http1_span line, name, value, host = { 0 };
    const char *end = buf + len, *p = skip_empty_lines(buf, end);
    bool connection_upgrade = false, has_upgrade = false, has_te = false;
    bool connection_close = false, connection_keep_alive = false;
    size_t fields = 0;
    int r;

    if (len > HTTP1_HEAD_MAX) {
        return -E2BIG;
    }
    if (next_line_strict(&p, end, &line) <= 0) {
        return -EBADMSG;
    }
    r = parse_request_line(line, &req);
    if (r < 0) {
        return r;
    }
    for (;;) {
        if (next_line_strict(&p, end, &line) <= 0) {
            return -EBADMSG; /* no empty line, or a bad line end */
        }
        if (line.n == 0) {
            break;
        }
        if (line.p[0] == ' ' || line.p[0] == '\t') {
            return -EBADMSG; /* obs-fold */
        }
        if (++fields > HTTP1_MAX_FIELDS) {
            return -E2BIG;
        }
        r = split_field(line, &name, &value);
        if (r < 0) {
            return r;
        }
        if (http1_span_eq_ci(name, "Host")) {
            r = set_once(&host, value);
        } else if (http1_span_eq_ci(name, "Connection")) {
            connection_upgrade = connection_upgrade || http1_list_has(value, "upgrade");
            connection_close = connection_close || http1_list_has(value, "close");
            connection_keep_alive = connection_keep_alive || http1_list_has(value, "keep-alive");
        } else if (http1_span_eq_ci(name, "Upgrade")) {
            has_upgrade = has_upgrade || value.n > 0;
        } else if (http1_span_eq_ci(name, "Transfer-Encoding")) {
            if (has_te) {
                return -EBADMSG;
            }
            has_te = true;
            if (!http1_span_eq_ci(value, "chunked")) {
                return -EOPNOTSUPP;
            }
            req.chunked = true;
        } else if (http1_span_eq_ci(name, "Content-Length")) {
            uint64_t n = 0;
            /* Even an equal second one: the next hop may combine them into "5, 5". */
            r = req.has_content_length ? -EBADMSG : parse_content_length(value, &n);
            req.has_content_length = true;
            req.content_length = n;
        }
        if (r < 0) {
            return r;
        }
    }
    if (p != end) {
        return -EBADMSG; /* len was not the head's length */
    }
    if ((req.chunked && (req.has_content_length || req.http10)) || (!host.p && !req.http10)) {
        return -EBADMSG;
    }
    if (!req.host.p) {
        req.host = host;
    }
    req.upgrade = has_upgrade && connection_upgrade;
    /* RFC 9112 9.3: 1.1 persists unless "close"; 1.0 only with "keep-alive". */
    req.keep_alive = !connection_close && (!req.http10 || connection_keep_alive);
    req.n_fields = fields;
    *ret = req;
    return 0;
}

/* ---- fields of a parsed head ---- */

bool http1_field_next(const char *buf, size_t head_len, size_t *pos, struct http1_span *ret_name,
                      struct http1_span *ret_value)
{
    const char *end = buf + head_len, *p;
    struct http1_span line;

    if (*pos == 0) {
        /* Skip the start line. */
        p = skip_empty_lines(buf, end);
        if (!next_line(&p, end, &line)) {
            return false;
        }
    } else {
        p = buf + MIN(*pos, head_len);
    }
    while (next_line(&p, end, &line) && line.n > 0) {
        *pos = (size_t)(p - buf);
        if (split_field(line, ret_name, ret_value) >= 0) {
            return true;
        }
    }
    *pos = head_len;
    return false;
}

int http1_field_unique(const char *buf, size_t head_len, const char *name,
                       struct http1_span *ret_value)
{
    struct http1_span n, v, found = { 0 };
    size_t pos = 0;

    while (http1_field_next(buf, head_len, &pos, &n, &v)) {
        if (!http1_span_eq_ci(n, name)) {
            continue;
        }
        if (found.p) {
            return -EBADMSG;
        }
        /* Present but empty still counts as present. */
        found = (struct http1_span){ v.p ? v.p : "", v.n };
    }
    *ret_value = found;
    return found.p ? 1 : 0;
}

static bool is_unreserved(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

bool http1_path_is_canonical(struct http1_span path)
{
    if (!path.p || path.n == 0 || path.p[0] != '/') {
        return false;
    }
    for (size_t i = 0; i < path.n; i++) {
        char c = path.p[i];
        if (c == '\\') {
            return false;
        }
        if (c == '%') {
            int hi = i + 2 < path.n ? hex_value(path.p[i + 1]) : -1;
            int lo = i + 2 < path.n ? hex_value(path.p[i + 2]) : -1;
            unsigned char decoded = (unsigned char)(hi * 16 + lo);
            if (hi < 0 || lo < 0 || decoded == '/' || decoded == '\\' || is_unreserved(decoded)) {
                return false;
            }
            i += 2;
            continue;
        }
        if (c != '/') {
            continue;
        }
        /* A segment starts after this slash: "", "." and ".." are not canonical. */
        size_t seg = i + 1, k = seg;
        while (k < path.n && path.p[k] != '/') {
            k++;
        }
        size_t len = k - seg;
        bool last = k == path.n;
        if ((len == 0 && !last) || (len == 1 && path.p[seg] == '.') ||
            (len == 2 && path.p[seg] == '.' && path.p[seg + 1] == '.')) {
            return false;
        }
    }
    return true;
}

/* ---- rewriting ---- */

static bool is_hop_by_hop(struct http1_span name, bool keep_upgrade)
{
    return http1_span_eq_ci(name, "Keep-Alive") || http1_span_eq_ci(name, "Proxy-Connection") ||
           (!keep_upgrade &&
            (http1_span_eq_ci(name, "Connection") || http1_span_eq_ci(name, "Upgrade")));
}

/*
 * Copies the start line and every field line but the hop-by-hop ones, with
 * CRLF line ends. -E2BIG when the result would exceed the field or size
 * caps: what we forward must parse again (see the top of the file).
 */
static int rewrite_head(const char *buf, size_t len, bool keep_upgrade, const char *connection,
                        struct strbuf *out)
{
    const char *end = buf + len, *p = skip_empty_lines(buf, end);
    struct http1_span line, name, value;
    size_t start = out->len, fields = 0;
    int r;

    if (!next_line(&p, end, &line)) {
        return -EBADMSG;
    }
    r = strbuf_append(out, line.p, line.n);
    if (r >= 0) {
        r = strbuf_append(out, "\r\n", 2);
    }
    while (r >= 0 && next_line(&p, end, &line) && line.n > 0) {
        if (split_field(line, &name, &value) < 0 || is_hop_by_hop(name, keep_upgrade)) {
            continue;
        }
        fields++;
        r = strbuf_append(out, line.p, line.n);
        if (r >= 0) {
            r = strbuf_append(out, "\r\n", 2);
        }
    }
    if (r >= 0 && !keep_upgrade) {
        fields++;
        r = strbuf_appendf(out, "Connection: %s\r\n", connection);
    }
    if (r >= 0) {
        r = strbuf_append(out, "\r\n", 2);
    }
    if (r >= 0 && (fields > HTTP1_MAX_FIELDS || out->len - start > HTTP1_HEAD_MAX)) {
        r = -E2BIG;
    }
    return r < 0 ? r : 0;
}

int http1_rewrite_request(const char *buf, const struct http1_request *req, struct strbuf *out)
{
    return http1_rewrite_request_conn(buf, req, "close", out);
}

int http1_rewrite_request_conn(const char *buf, const struct http1_request *req,
                               const char *connection, struct strbuf *out)
{
    return rewrite_head(buf, req->head_len, req->upgrade, connection, out);
}

int http1_parse_response(const char *buf, size_t len, struct http1_response *ret)
{
    struct http1_span line, name, value;
    const char *p = buf, *end = buf + len;
    struct http1_response resp = { .head_len = len };
    uint32_t status = 0;
    size_t fields = 0;
    bool has_te = false, connection_close = false, connection_keep_alive = false;

    if (len > HTTP1_HEAD_MAX || next_line_strict(&p, end, &line) <= 0 || line.n < 12 ||
        memcmp(line.p, "HTTP/1.", 7) != 0 || !is_digit(line.p[7]) || line.p[8] != ' ' ||
        (line.n > 12 && line.p[12] != ' ')) {
        return -EBADMSG;
    }
    for (size_t i = 9; i < 12; i++) {
        if (!is_digit(line.p[i])) {
            return -EBADMSG;
        }
        status = status * 10 + (uint32_t)(line.p[i] - '0');
    }
    if (status < 100 || status > 599) {
        return -EBADMSG;
    }
    resp.http10 = line.p[7] == '0';
    /* reason-phrase: HTAB, SP, VCHAR, obs-text (RFC 9112 4). */
    for (size_t i = 13; i < line.n; i++) {
        unsigned char c = (unsigned char)line.p[i];
        if (c != '\t' && (c < 0x20 || c == 0x7f)) {
            return -EBADMSG;
        }
    }
    for (;;) {
        if (next_line_strict(&p, end, &line) <= 0) {
            return -EBADMSG;
        }
        if (line.n == 0) {
            break;
        }
        if (line.p[0] == ' ' || line.p[0] == '\t' || ++fields > HTTP1_MAX_FIELDS ||
            split_field(line, &name, &value) < 0) {
            return -EBADMSG; /* obs-fold, too many fields, malformed */
        }
        if (http1_span_eq_ci(name, "Transfer-Encoding")) {
            /* Framing is chunked when chunked is the last coding (RFC 9112 6.3). */
            struct http1_span last = value;
            const char *comma = last.n ? memrchr(last.p, ',', last.n) : NULL;
            if (comma) {
                last = trim_ows(
                    (struct http1_span){ comma + 1, last.n - (size_t)(comma + 1 - last.p) });
            }
            has_te = true;
            resp.chunked = http1_span_eq_ci(last, "chunked");
        } else if (http1_span_eq_ci(name, "Content-Length")) {
            uint64_t n = 0;
            if (resp.has_content_length || parse_content_length(value, &n) < 0) {
                return -EBADMSG;
            }
            resp.has_content_length = true;
            resp.content_length = n;
        } else if (http1_span_eq_ci(name, "Connection")) {
            connection_close = connection_close || http1_list_has(value, "close");
            connection_keep_alive = connection_keep_alive || http1_list_has(value, "keep-alive");
        }
    }
    /* Both framings at once is how responses get smuggled: refused. */
    if (p != end || (has_te && resp.has_content_length)) {
        return -EBADMSG;
    }
    resp.status = status;
    resp.until_eof = has_te && !resp.chunked;
    resp.close = connection_close || (resp.http10 && !connection_keep_alive);
    resp.n_fields = fields;
    *ret = resp;
    return 0;
}

int http1_rewrite_response(const char *buf, const struct http1_response *resp,
                           const char *connection, struct strbuf *out)
{
    return rewrite_head(buf, resp->head_len, false, connection, out);
}

/* ---- body framing ---- */

void http1_body_init_request(struct http1_body *b, const struct http1_request *req)
{
    *b = (struct http1_body){ .kind = HTTP1_BODY_NONE };
    if (req->chunked) {
        b->kind = HTTP1_BODY_CHUNKED;
        b->state = CHUNK_SIZE;
    } else if (req->has_content_length && req->content_length > 0) {
        b->kind = HTTP1_BODY_LENGTH;
        b->remaining = req->content_length;
    }
    b->done = b->kind == HTTP1_BODY_NONE;
}

void http1_body_init_response(struct http1_body *b, const struct http1_response *resp,
                              bool head_request)
{
    *b = (struct http1_body){ .kind = HTTP1_BODY_UNTIL_EOF };
    /* RFC 9112 6.3: no body after HEAD, 1xx, 204 and 304, whatever the head says. */
    if (head_request || resp->status < 200 || resp->status == 204 || resp->status == 304) {
        b->kind = HTTP1_BODY_NONE;
    } else if (resp->chunked) {
        b->kind = HTTP1_BODY_CHUNKED;
        b->state = CHUNK_SIZE;
    } else if (resp->has_content_length && !resp->until_eof) {
        b->kind = resp->content_length > 0 ? HTTP1_BODY_LENGTH : HTTP1_BODY_NONE;
        b->remaining = resp->content_length;
    }
    b->done = b->kind == HTTP1_BODY_NONE;
}

/*
 * The rest of a chunk-size line (extensions) or a trailer line: HTAB and
 * visible bytes, ended by CRLF; a CR anywhere else or a bare LF is refused.
 */
static int line_byte(struct http1_body *b, char c, int next_state)
{
    unsigned char u = (unsigned char)c;

    if (b->cr) {
        if (c != '\n') {
            return -EBADMSG;
        }
        b->state = next_state;
        b->cr = false;
        return 0;
    }
    if (c == '\r') {
        b->cr = true;
        return 0;
    }
    if ((u != '\t' && (u < 0x20 || u == 0x7f)) || ++b->line_len > CHUNK_LINE_MAX) {
        return -EBADMSG;
    }
    return 0;
}

/* One byte of chunked framing outside chunk data. Returns 0 or -EBADMSG. */
static int chunk_byte(struct http1_body *b, char c)
{
    int h;

    switch (b->state) {
    case CHUNK_SIZE:
        h = hex_value(c);
        if (h >= 0) {
            if (++b->digits > 15) {
                return -EBADMSG; /* 2^60: no real body, and no overflow */
            }
            b->remaining = b->remaining * 16 + (uint64_t)h;
            return 0;
        }
        /* After the digits: ';' extensions or CRLF; no whitespace (RFC 9112 7.1). */
        if (b->digits == 0 || (c != ';' && c != '\r')) {
            return -EBADMSG;
        }
        b->state = CHUNK_SIZE_TAIL;
        b->line_len = 0;
        return chunk_byte(b, c);
    case CHUNK_SIZE_TAIL:
        return line_byte(b, c, b->remaining > 0 ? CHUNK_DATA : CHUNK_TRAILER_START);
    case CHUNK_DATA_CR:
        if (c != '\r') {
            return -EBADMSG;
        }
        b->state = CHUNK_DATA_LF;
        return 0;
    case CHUNK_DATA_LF:
        if (c != '\n') {
            return -EBADMSG;
        }
        b->state = CHUNK_SIZE;
        b->digits = 0;
        return 0;
    case CHUNK_TRAILER_START:
        if (c == '\r') {
            b->state = CHUNK_LAST_LF;
            return 0;
        }
        /* A trailer field starts with its name: no obs-fold, no bare LF. */
        if (!is_tchar((unsigned char)c) || ++b->trailer_lines > CHUNK_TRAILER_LINES_MAX) {
            return -EBADMSG;
        }
        b->state = CHUNK_TRAILER_LINE;
        b->line_len = 0;
        return chunk_byte(b, c);
    case CHUNK_TRAILER_LINE:
        return line_byte(b, c, CHUNK_TRAILER_START);
    case CHUNK_LAST_LF:
        if (c != '\n') {
            return -EBADMSG;
        }
        b->done = true;
        return 0;
    default:
        return -EBADMSG;
    }
}

ssize_t http1_body_feed(struct http1_body *b, const char *data, size_t len, http1_data_cb cb,
                        void *userdata)
{
    size_t used = 0;
    int r;

    if (b->kind == HTTP1_BODY_UNTIL_EOF) {
        r = cb && len > 0 ? cb(data, len, userdata) : 0;
        return r < 0 ? r : (ssize_t)len;
    }
    while (used < len && !b->done) {
        if (b->kind == HTTP1_BODY_LENGTH || b->state == CHUNK_DATA) {
            size_t take = (size_t)MIN((uint64_t)(len - used), b->remaining);
            r = cb ? cb(data + used, take, userdata) : 0;
            if (r < 0) {
                return r;
            }
            used += take;
            b->remaining -= take;
            if (b->kind == HTTP1_BODY_LENGTH) {
                b->done = b->remaining == 0;
            } else if (b->remaining == 0) {
                b->state = CHUNK_DATA_CR;
            }
        } else {
            if (chunk_byte(b, data[used]) < 0) {
                return -EBADMSG;
            }
            used++;
        }
    }
    return (ssize_t)used;
}
