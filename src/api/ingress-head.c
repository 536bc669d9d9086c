/*
 * What the ingress reads from a request head beyond HTTP/1.1 itself
 * (ingress-head.h): E2B's routing and token headers, routing by Host,
 * Accept and the query. The HTTP/1.1 parsing is src/shared/http1.c.
 */
#include "api/ingress-head.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "basic/macro.h"

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
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

int ingress_head_parse_request(const char *buf, size_t len, struct ingress_head_request *ret)
{
    struct ingress_head_request req = { 0 };
    struct http1_span name, value;
    size_t pos = 0;
    int r;

    r = http1_parse_request(buf, len, &req.http);
    if (r < 0) {
        return r;
    }
    /* Routing and authentication must be unambiguous: each at most once. */
    if (http1_field_unique(buf, len, "E2b-Sandbox-Id", &req.sandbox_id) < 0 ||
        http1_field_unique(buf, len, "E2b-Sandbox-Port", &req.sandbox_port) < 0 ||
        http1_field_unique(buf, len, "X-Access-Token", &req.access_token) < 0 ||
        http1_field_unique(buf, len, INGRESS_TRAFFIC_TOKEN_HEADER, &req.traffic_token) < 0) {
        return -EBADMSG;
    }
    while (!req.accept.p && http1_field_next(buf, len, &pos, &name, &value)) {
        if (http1_span_eq_ci(name, "Accept")) {
            req.accept = value;
        }
    }
    *ret = req;
    return 0;
}

/* ---- routing ---- */

static bool is_ipv4(struct http1_span s)
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
static int parse_port(struct http1_span s, uint16_t *ret)
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

static int copy_id(struct http1_span s, bool lower, char ret[SANDBOX_ID_LEN + 1])
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
static int route_by_host(struct http1_span hostname, const char *domain,
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
    if (parse_port((struct http1_span){ hostname.p, port_len }, ret_port) < 0) {
        return -ERANGE;
    }
    return copy_id((struct http1_span){ dash + 1, label - port_len - 1 }, true, ret_id);
}

int ingress_head_route(const struct ingress_head_request *req, const char *domain,
                       char ret_id[SANDBOX_ID_LEN + 1], uint16_t *ret_port, const char **ret_error)
{
    struct http1_span hostname = req->http.host;
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
            struct http1_span port_part = { colon + 1,
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
    bool local = ip || http1_span_eq_ci(hostname, "localhost");
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
static int parse_qvalue(struct http1_span v)
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
static int range_match(struct http1_span range, const char *type, const char *subtype)
{
    const char *slash = memchr(range.p, '/', range.n);
    if (!slash) {
        return 0;
    }
    struct http1_span t = { range.p, (size_t)(slash - range.p) };
    struct http1_span s = { slash + 1, range.n - t.n - 1 };
    if (http1_span_eq_ci(t, "*") && http1_span_eq_ci(s, "*")) {
        return 1;
    }
    if (!http1_span_eq_ci(t, type)) {
        return 0;
    }
    return http1_span_eq_ci(s, "*") ? 2 : http1_span_eq_ci(s, subtype) ? 3 : 0;
}

bool ingress_head_prefers_html(const struct ingress_head_request *req)
{
    struct http1_span a = req->accept;
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
        struct http1_span item = { a.p + start, i - start };
        i++;
        const char *semi = memchr(item.p, ';', item.n);
        struct http1_span range =
            trim_ows((struct http1_span){ item.p, semi ? (size_t)(semi - item.p) : item.n });
        int qv = 1000;
        /* Parameters: only q matters. */
        while (semi) {
            const char *param = semi + 1;
            size_t left = item.n - (size_t)(param - item.p);
            semi = memchr(param, ';', left);
            struct http1_span pv =
                trim_ows((struct http1_span){ param, semi ? (size_t)(semi - param) : left });
            if (pv.n >= 2 && (pv.p[0] == 'q' || pv.p[0] == 'Q') && pv.p[1] == '=') {
                qv = parse_qvalue((struct http1_span){ pv.p + 2, pv.n - 2 });
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
    struct http1_span qs = req->http.query;
    size_t n = strlen(name), i = 0;

    while (qs.p && i < qs.n) {
        size_t start = i;
        while (i < qs.n && qs.p[i] != '&') {
            i++;
        }
        struct http1_span param = { qs.p + start, i - start };
        i++;
        if (param.n > n + 1 && memcmp(param.p, name, n) == 0 && param.p[n] == '=') {
            return true;
        }
    }
    return false;
}
