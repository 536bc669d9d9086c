/*
 * HTTP/1.x head parsing for the ingress proxy (see ingress-head.h).
 *
 * Strict where a lenient reading could make us and the sandbox disagree
 * about a message (RFC 9112 11.2, request smuggling): obs-fold, whitespace
 * before the colon, control bytes in values, duplicate Host or routing
 * headers, Content-Length together with Transfer-Encoding, conflicting
 * Content-Lengths and transfer codings other than a single "chunked" are
 * all refused, and so are a second Content-Length (even an equal one), a
 * line end other than CRLF and a CR anywhere else (RFC 9112 2.2 lets a
 * recipient accept bare LF; a proxy must not, since the next hop may read it
 * differently). Lenient only where it costs nothing: up to two empty lines
 * before the request line.
 *
 * The property the fuzzer checks: a head we accept and rewrite parses again,
 * with this parser, to the same request (same framing, same routing). So the
 * rewrite refuses (-E2BIG) rather than produce a head past the field or size
 * caps.
 *
 * Chunked bodies are followed by a byte-at-a-time state machine that only
 * counts (ingress_head_body_feed()); the bytes are forwarded unchanged.
 */
#include "api/ingress-head.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "basic/macro.h"
#include "basic/parse-util.h"

#define METHOD_MAX 32
#define CHUNK_LINE_MAX 4096 /* size line with extensions, and each trailer line */
#define CHUNK_TRAILER_LINES_MAX 64

enum { BODY_NONE, BODY_LENGTH, BODY_CHUNKED, BODY_UNTIL_EOF };

enum {
    CHUNK_SIZE,      /* hex digits */
    CHUNK_SIZE_TAIL, /* whitespace and extensions, up to LF */
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

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool span_eq_ci(struct ingress_head_span s, const char *lit)
{
    size_t n = strlen(lit);
    return s.p && s.n == n && strncasecmp(s.p, lit, n) == 0;
}

bool ingress_head_span_eq(struct ingress_head_span span, const char *s)
{
    size_t n = strlen(s);
    return span.p && span.n == n && memcmp(span.p, s, n) == 0;
}

/* Trims SP and HTAB from both ends. */
static struct ingress_head_span trim_ows(struct ingress_head_span s)
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
static bool next_line(const char **pos, const char *end, struct ingress_head_span *ret)
{
    const char *p = *pos;
    const char *nl = memchr(p, '\n', (size_t)(end - p));

    if (!nl) {
        return false;
    }
    *ret = (struct ingress_head_span){ p, (size_t)(nl - p) };
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
static int next_line_strict(const char **pos, const char *end, struct ingress_head_span *ret)
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

size_t ingress_head_find_end(const char *buf, size_t len, size_t *resume)
{
    const char *end = buf + len, *p = skip_empty_lines(buf, end);
    struct ingress_head_span line;

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
static int split_field(struct ingress_head_span line, struct ingress_head_span *ret_name,
                       struct ingress_head_span *ret_value)
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
    *ret_name = (struct ingress_head_span){ line.p, i };
    *ret_value = trim_ows((struct ingress_head_span){ line.p + i + 1, line.n - i - 1 });
    return 0;
}

/* Sets *slot once; a second occurrence is an error (ambiguous routing or auth). */
static int set_once(struct ingress_head_span *slot, struct ingress_head_span value)
{
    if (slot->p) {
        return -EBADMSG;
    }
    /* Present but empty still counts as present. */
    *slot = (struct ingress_head_span){ value.p ? value.p : "", value.n };
    return 0;
}

static bool list_has_token(struct ingress_head_span value, const char *token)
{
    size_t i = 0;

    while (i < value.n) {
        size_t start = i;
        while (i < value.n && value.p[i] != ',') {
            i++;
        }
        if (span_eq_ci(trim_ows((struct ingress_head_span){ value.p + start, i - start }), token)) {
            return true;
        }
        i++;
    }
    return false;
}

static int parse_content_length(struct ingress_head_span v, uint64_t *ret)
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

static int parse_target(struct ingress_head_request *req)
{
    struct ingress_head_span t = req->target;
    size_t i, start;

    if (t.n == 1 && t.p[0] == '*') {
        if (!span_eq_ci(req->method, "OPTIONS")) {
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
        req->host = (struct ingress_head_span){ t.p + start, i - start };
    }
    start = i;
    while (i < t.n && t.p[i] != '?' && t.p[i] != '#') {
        i++;
    }
    /* Empty for "http://host" (meaning "/"); still a span inside the buffer. */
    req->path = (struct ingress_head_span){ t.p + start, i - start };
    if (i < t.n && t.p[i] == '?') {
        start = ++i;
        while (i < t.n && t.p[i] != '#') {
            i++;
        }
        req->query = (struct ingress_head_span){ t.p + start, i - start };
    }
    return 0;
}

static int parse_request_line(struct ingress_head_span line, struct ingress_head_request *req)
{
    size_t i = 0, start;

    while (i < line.n && is_tchar((unsigned char)line.p[i])) {
        i++;
    }
    if (i == 0 || i > METHOD_MAX || i >= line.n || line.p[i] != ' ') {
        return -EBADMSG;
    }
    req->method = (struct ingress_head_span){ line.p, i };
    start = ++i;
    while (i < line.n && (unsigned char)line.p[i] > 0x20 && (unsigned char)line.p[i] != 0x7f) {
        i++;
    }
    if (i == start || i >= line.n || line.p[i] != ' ') {
        return -EBADMSG;
    }
    req->target = (struct ingress_head_span){ line.p + start, i - start };
    req->version = (struct ingress_head_span){ line.p + i + 1, line.n - i - 1 };
    if (ingress_head_span_eq(req->version, "HTTP/1.1")) {
        req->http10 = false;
    } else if (ingress_head_span_eq(req->version, "HTTP/1.0")) {
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

int ingress_head_parse_request(const char *buf, size_t len, struct ingress_head_request *ret)
{
    struct ingress_head_request req = { .head_len = len };
    struct ingress_head_span line, name, value, host = { 0 };
    const char *end = buf + len, *p = skip_empty_lines(buf, end);
    bool connection_upgrade = false, has_upgrade = false, has_te = false;
    size_t fields = 0;
    int r;

    if (len > INGRESS_HEAD_MAX) {
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
        if (++fields > INGRESS_HEAD_MAX_FIELDS) {
            return -E2BIG;
        }
        r = split_field(line, &name, &value);
        if (r < 0) {
            return r;
        }
        if (span_eq_ci(name, "Host")) {
            r = set_once(&host, value);
        } else if (span_eq_ci(name, "E2b-Sandbox-Id")) {
            r = set_once(&req.sandbox_id, value);
        } else if (span_eq_ci(name, "E2b-Sandbox-Port")) {
            r = set_once(&req.sandbox_port, value);
        } else if (span_eq_ci(name, "X-Access-Token")) {
            r = set_once(&req.access_token, value);
        } else if (span_eq_ci(name, "Accept")) {
            if (!req.accept.p) {
                req.accept = value;
            }
        } else if (span_eq_ci(name, "Connection")) {
            connection_upgrade = connection_upgrade || list_has_token(value, "upgrade");
        } else if (span_eq_ci(name, "Upgrade")) {
            has_upgrade = has_upgrade || value.n > 0;
        } else if (span_eq_ci(name, "Transfer-Encoding")) {
            if (has_te) {
                return -EBADMSG;
            }
            has_te = true;
            if (!span_eq_ci(value, "chunked")) {
                return -EOPNOTSUPP;
            }
            req.chunked = true;
        } else if (span_eq_ci(name, "Content-Length")) {
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
    *ret = req;
    return 0;
}

/* ---- routing ---- */

static bool is_ipv4(struct ingress_head_span s)
{
    unsigned parts = 0, digits = 0;

    for (size_t i = 0; i < s.n; i++) {
        if (is_digit(s.p[i]) && digits < 3) {
            digits++;
        } else if (s.p[i] == '.' && digits > 0 && parts < 3) {
            parts++;
            digits = 0;
        } else {
            return false;
        }
    }
    return parts == 3 && digits > 0;
}

/* Decimal 1..65535 without sign or leading garbage. */
static int parse_port(struct ingress_head_span s, uint16_t *ret)
{
    uint32_t v = 0;

    if (s.n == 0 || s.n > 5) {
        return -EINVAL;
    }
    for (size_t i = 0; i < s.n; i++) {
        if (!is_digit(s.p[i])) {
            return -EINVAL;
        }
        v = v * 10 + (uint32_t)(s.p[i] - '0');
    }
    if (v == 0 || v > 65535) {
        return -EINVAL;
    }
    *ret = (uint16_t)v;
    return 0;
}

static int copy_id(struct ingress_head_span s, bool lower, char ret[SANDBOX_ID_LEN + 1])
{
    char id[SANDBOX_ID_LEN + 1];

    if (s.n != SANDBOX_ID_LEN) {
        return -EINVAL;
    }
    for (size_t i = 0; i < s.n; i++) {
        char c = s.p[i];
        id[i] = lower && c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
    }
    id[s.n] = '\0';
    if (!sandbox_id_is_valid(id)) {
        return -EINVAL;
    }
    memcpy(ret, id, sizeof(id));
    return 0;
}

/* "<port>-<id>.<domain>": the first label must be all of "<port>-<id>". */
static int route_by_host(struct ingress_head_span hostname, const char *domain,
                         char ret_id[SANDBOX_ID_LEN + 1], uint16_t *ret_port)
{
    size_t dn = strlen(domain), label;
    const char *dash;

    if (dn == 0 || hostname.n <= dn + 1 ||
        strncasecmp(hostname.p + hostname.n - dn, domain, dn) != 0 ||
        hostname.p[hostname.n - dn - 1] != '.') {
        return -EINVAL;
    }
    label = hostname.n - dn - 1;
    if (memchr(hostname.p, '.', label)) {
        return -EINVAL;
    }
    dash = memchr(hostname.p, '-', label);
    if (!dash) {
        return -EINVAL;
    }
    size_t port_len = (size_t)(dash - hostname.p);
    if (parse_port((struct ingress_head_span){ hostname.p, port_len }, ret_port) < 0) {
        return -ERANGE;
    }
    return copy_id((struct ingress_head_span){ dash + 1, label - port_len - 1 }, true, ret_id);
}

int ingress_head_route(const struct ingress_head_request *req, const char *domain,
                       char ret_id[SANDBOX_ID_LEN + 1], uint16_t *ret_port, const char **ret_error)
{
    struct ingress_head_span hostname = req->host;
    bool ip = false, by_headers;
    char id[SANDBOX_ID_LEN + 1];
    uint16_t port = 0;
    const char *error = NULL;
    int r;

    /* Strip ":port", "[v6]" brackets and one trailing dot. */
    if (hostname.p && hostname.n > 0 && hostname.p[0] == '[') {
        const char *close = memchr(hostname.p, ']', hostname.n);
        size_t rest = close ? hostname.n - (size_t)(close - hostname.p) - 1 : 0;
        if (!close || (rest > 0 && close[1] != ':')) {
            error = "invalid host";
        }
        ip = true;
        hostname.n = close ? (size_t)(close - hostname.p) + 1 : hostname.n;
    } else if (hostname.p) {
        const char *colon = memchr(hostname.p, ':', hostname.n);
        if (colon) {
            struct ingress_head_span port_part = { colon + 1,
                                                   hostname.n - (size_t)(colon - hostname.p) - 1 };
            for (size_t i = 0; i < port_part.n; i++) {
                if (!is_digit(port_part.p[i])) {
                    error = "invalid host";
                }
            }
            hostname.n = (size_t)(colon - hostname.p);
        }
        if (hostname.n > 0 && hostname.p[hostname.n - 1] == '.') {
            hostname.n--;
        }
        ip = is_ipv4(hostname);
    }

    bool has_headers = req->sandbox_id.p || req->sandbox_port.p;
    bool local = ip || span_eq_ci(hostname, "localhost");
    bool shared = hostname.p && hostname.n > 8 && strncasecmp(hostname.p, "sandbox.", 8) == 0;

    r = -EINVAL;
    if (!error && hostname.p && !local) {
        r = route_by_host(hostname, domain, id, &port);
    }
    by_headers = has_headers && (local || shared || r < 0);
    if (by_headers) {
        if (!req->sandbox_id.p || !req->sandbox_port.p) {
            error = "missing header: E2b-Sandbox-Id and E2b-Sandbox-Port go together";
        } else if (parse_port(req->sandbox_port, &port) < 0) {
            error = "invalid sandbox port";
        } else if (copy_id(req->sandbox_id, false, id) < 0) {
            error = "invalid sandbox id";
        } else {
            error = NULL;
        }
    } else if (!error && r == -ERANGE) {
        error = "invalid sandbox port";
    } else if (!error && r < 0) {
        error = "invalid host: expected <port>-<sandbox id>.<domain>";
    }
    if (error) {
        if (ret_error) {
            *ret_error = error;
        }
        return -EINVAL;
    }
    memcpy(ret_id, id, sizeof(id));
    *ret_port = port;
    return 0;
}

/* ---- Accept ---- */

/* q=0.xyz as 0..1000; -1 when the parameter is malformed. */
static int parse_qvalue(struct ingress_head_span v)
{
    int q = 0, scale = 100;

    if (v.n == 0 || (v.p[0] != '0' && v.p[0] != '1') || v.n > 5 || (v.n > 1 && v.p[1] != '.')) {
        return -1;
    }
    for (size_t i = 2; i < v.n; i++) {
        if (!is_digit(v.p[i]) || (v.p[0] == '1' && v.p[i] != '0')) {
            return -1;
        }
        q += (v.p[i] - '0') * scale;
        scale /= 10;
    }
    return v.p[0] == '1' ? 1000 : q;
}

/*
 * For one media range: how specifically it matches type/subtype (3 exact,
 * 2 type/ *, 1 * / *, 0 not at all).
 */
static int range_match(struct ingress_head_span range, const char *type, const char *subtype)
{
    const char *slash = memchr(range.p, '/', range.n);
    if (!slash) {
        return 0;
    }
    struct ingress_head_span t = { range.p, (size_t)(slash - range.p) };
    struct ingress_head_span s = { slash + 1, range.n - t.n - 1 };
    if (span_eq_ci(t, "*") && span_eq_ci(s, "*")) {
        return 1;
    }
    if (!span_eq_ci(t, type)) {
        return 0;
    }
    return span_eq_ci(s, "*") ? 2 : span_eq_ci(s, subtype) ? 3 : 0;
}

bool ingress_head_prefers_html(const struct ingress_head_request *req)
{
    struct ingress_head_span a = req->accept;
    int best[2] = { 0, 0 }, q[2] = { 0, 0 }; /* [0] html, [1] json */
    size_t i = 0;

    if (!a.p) {
        return false;
    }
    while (i < a.n) {
        size_t start = i;
        while (i < a.n && a.p[i] != ',') {
            i++;
        }
        struct ingress_head_span item = { a.p + start, i - start };
        i++;
        const char *semi = memchr(item.p, ';', item.n);
        struct ingress_head_span range =
            trim_ows((struct ingress_head_span){ item.p, semi ? (size_t)(semi - item.p) : item.n });
        int qv = 1000;
        /* Parameters: only q matters. */
        while (semi) {
            const char *param = semi + 1;
            size_t left = item.n - (size_t)(param - item.p);
            semi = memchr(param, ';', left);
            struct ingress_head_span pv =
                trim_ows((struct ingress_head_span){ param, semi ? (size_t)(semi - param) : left });
            if (pv.n >= 2 && (pv.p[0] == 'q' || pv.p[0] == 'Q') && pv.p[1] == '=') {
                qv = parse_qvalue((struct ingress_head_span){ pv.p + 2, pv.n - 2 });
            }
        }
        if (qv < 0) {
            continue;
        }
        int m[2] = { range_match(range, "text", "html"),
                     range_match(range, "application", "json") };
        for (size_t k = 0; k < 2; k++) {
            if (m[k] > best[k]) {
                best[k] = m[k];
                q[k] = qv;
            }
        }
    }
    return q[0] > q[1];
}

bool ingress_head_query_has(const struct ingress_head_request *req, const char *name)
{
    struct ingress_head_span qs = req->query;
    size_t n = strlen(name), i = 0;

    while (qs.p && i < qs.n) {
        size_t start = i;
        while (i < qs.n && qs.p[i] != '&') {
            i++;
        }
        struct ingress_head_span param = { qs.p + start, i - start };
        i++;
        if (param.n > n + 1 && memcmp(param.p, name, n) == 0 && param.p[n] == '=') {
            return true;
        }
    }
    return false;
}

/* ---- rewriting ---- */

static bool is_hop_by_hop(struct ingress_head_span name, bool keep_upgrade)
{
    return span_eq_ci(name, "Keep-Alive") || span_eq_ci(name, "Proxy-Connection") ||
           (!keep_upgrade && (span_eq_ci(name, "Connection") || span_eq_ci(name, "Upgrade")));
}

/*
 * Copies the start line and every field line but the hop-by-hop ones, with
 * CRLF line ends. -E2BIG when the result would exceed the field or size
 * caps: what we forward must parse again (see the top of the file).
 */
static int rewrite_head(const char *buf, size_t len, bool keep_upgrade, struct strbuf *out)
{
    const char *end = buf + len, *p = skip_empty_lines(buf, end);
    struct ingress_head_span line, name, value;
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
        r = strbuf_appends(out, "Connection: close\r\n");
    }
    if (r >= 0) {
        r = strbuf_append(out, "\r\n", 2);
    }
    if (r >= 0 && (fields > INGRESS_HEAD_MAX_FIELDS || out->len - start > INGRESS_HEAD_MAX)) {
        r = -E2BIG;
    }
    return r < 0 ? r : 0;
}

int ingress_head_rewrite_request(const char *buf, const struct ingress_head_request *req,
                                 struct strbuf *out)
{
    return rewrite_head(buf, req->head_len, req->upgrade, out);
}

int ingress_head_parse_response(const char *buf, size_t len, struct ingress_head_response *ret)
{
    struct ingress_head_span line, name, value;
    const char *p = buf, *end = buf + len;
    struct ingress_head_response resp = { .head_len = len };
    uint32_t status = 0;
    size_t fields = 0;
    bool has_te = false;

    if (len > INGRESS_HEAD_MAX || next_line_strict(&p, end, &line) <= 0 || line.n < 12 ||
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
        if (line.p[0] == ' ' || line.p[0] == '\t' ||
            ++fields > INGRESS_HEAD_MAX_FIELDS || split_field(line, &name, &value) < 0) {
            return -EBADMSG; /* obs-fold, too many fields, malformed */
        }
        if (span_eq_ci(name, "Transfer-Encoding")) {
            /* Framing is chunked when chunked is the last coding (RFC 9112 6.3). */
            struct ingress_head_span last = value;
            const char *comma = last.n ? memrchr(last.p, ',', last.n) : NULL;
            if (comma) {
                last = trim_ows(
                    (struct ingress_head_span){ comma + 1, last.n - (size_t)(comma + 1 - last.p) });
            }
            has_te = true;
            resp.chunked = span_eq_ci(last, "chunked");
        } else if (span_eq_ci(name, "Content-Length")) {
            uint64_t n;
            if (resp.has_content_length || parse_content_length(value, &n) < 0) {
                return -EBADMSG;
            }
            resp.has_content_length = true;
            resp.content_length = n;
        }
    }
    /* Both framings at once is how responses get smuggled: refused. */
    if (p != end || (has_te && resp.has_content_length)) {
        return -EBADMSG;
    }
    resp.status = status;
    resp.until_eof = has_te && !resp.chunked;
    *ret = resp;
    return 0;
}

int ingress_head_rewrite_response(const char *buf, size_t head_len, struct strbuf *out)
{
    return rewrite_head(buf, head_len, false, out);
}

/* ---- body framing ---- */

void ingress_head_body_init(struct ingress_head_body *b, const struct ingress_head_request *req)
{
    *b = (struct ingress_head_body){ .kind = BODY_NONE };
    if (req->chunked) {
        b->kind = BODY_CHUNKED;
        b->state = CHUNK_SIZE;
    } else if (req->has_content_length && req->content_length > 0) {
        b->kind = BODY_LENGTH;
        b->remaining = req->content_length;
    }
    b->done = b->kind == BODY_NONE;
}

void ingress_head_body_init_response(struct ingress_head_body *b,
                                     const struct ingress_head_response *resp, bool head_request)
{
    *b = (struct ingress_head_body){ .kind = BODY_UNTIL_EOF };
    /* RFC 9112 6.3: no body after HEAD, 1xx, 204 and 304, whatever the head says. */
    if (head_request || resp->status < 200 || resp->status == 204 || resp->status == 304) {
        b->kind = BODY_NONE;
    } else if (resp->chunked) {
        b->kind = BODY_CHUNKED;
        b->state = CHUNK_SIZE;
    } else if (resp->has_content_length && !resp->until_eof) {
        b->kind = resp->content_length > 0 ? BODY_LENGTH : BODY_NONE;
        b->remaining = resp->content_length;
    }
    b->done = b->kind == BODY_NONE;
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

/*
 * The rest of a chunk-size line (extensions) or a trailer line: HTAB and
 * visible bytes, ended by CRLF; a CR anywhere else or a bare LF is refused.
 */
static int line_byte(struct ingress_head_body *b, char c, int next_state)
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
static int chunk_byte(struct ingress_head_body *b, char c)
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

ssize_t ingress_head_body_feed(struct ingress_head_body *b, const char *data, size_t len)
{
    size_t used = 0;

    if (b->kind == BODY_UNTIL_EOF) {
        return (ssize_t)len;
    }
    while (used < len && !b->done) {
        if (b->kind == BODY_LENGTH) {
            size_t take = (size_t)MIN((uint64_t)(len - used), b->remaining);
            used += take;
            b->remaining -= take;
            b->done = b->remaining == 0;
        } else if (b->state == CHUNK_DATA) {
            size_t take = (size_t)MIN((uint64_t)(len - used), b->remaining);
            used += take;
            b->remaining -= take;
            if (b->remaining == 0) {
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
