/*
 * The per-request egress decision (http-gate.h has the rules).
 */
#include "gw/http-gate.h"

#include <arpa/inet.h>

#include "basic/macro.h"
#include "gw/resolved.h"

static void verdict(struct http_gate_result *out, bool allow, const char *reason)
{
    out->allow = allow;
    out->reason = reason;
}

/* Splits "name[:port]" / "[v6]:port" into the host part; false when malformed. */
static bool host_part(struct http1_span h, char *out, size_t size, bool *is_v6)
{
    size_t n = h.n;

    *is_v6 = false;
    if (n > 0 && h.p[0] == '[') {
        *is_v6 = true;
        return true;
    }
    for (size_t i = 0; i < h.n; i++) {
        if (h.p[i] == ':') {
            n = i;
            /* The port must be digits (1..5 of them): anything else is not a host header. */
            size_t digits = h.n - i - 1;
            if (digits == 0 || digits > 5) {
                return false;
            }
            for (size_t k = i + 1; k < h.n; k++) {
                if (h.p[k] < '0' || h.p[k] > '9') {
                    return false;
                }
            }
            break;
        }
    }
    if (n == 0 || n >= size) {
        return false;
    }
    memcpy(out, h.p, n);
    out[n] = '\0';
    return true;
}

void http_gate_check(const struct http_gate_input *in, const char *head,
                     const struct http1_request *req, struct http_gate_result *out)
{
    char raw[POLICY_NAME_MAX + 2];
    struct in_addr lit;
    bool v6;
    enum policy_reason pr;

    out->host[0] = '\0';
    if (http1_span_eq(req->method, "CONNECT")) {
        return verdict(out, false, "connect");
    }
    if (!req->host.p || req->host.n == 0) {
        return verdict(out, false, "no-host");
    }
    if (!host_part(req->host, raw, sizeof(raw), &v6)) {
        return verdict(out, false, "bad-host");
    }
    if (v6) {
        return verdict(out, false, policy_reason_str(POLICY_DENY_IPV6));
    }
    if (req->target.n > 0 && req->target.p[0] != '/' && !http1_span_eq(req->target, "*")) {
        /* Absolute form: req->host is the target's authority; a Host header must agree. */
        struct http1_span hh;
        char other[POLICY_NAME_MAX + 2], a[POLICY_NAME_MAX + 1], b[POLICY_NAME_MAX + 1];
        if (http1_field_unique(head, req->head_len, "host", &hh) == 1) {
            if (!host_part(hh, other, sizeof(other), &v6) || v6 ||
                policy_normalize_name(other, a) < 0 || policy_normalize_name(raw, b) < 0 ||
                strcmp(a, b) != 0) {
                return verdict(out, false, "host-mismatch");
            }
        }
    }
    if (inet_pton(AF_INET, raw, &lit) == 1) {
        snprintf(out->host, sizeof(out->host), "%s", raw);
        if (lit.s_addr != in->dst.s_addr || in->sni) {
            return verdict(out, false, "host-mismatch");
        }
        pr = policy_check_addr(in->policy, in->env, AF_INET, &in->dst, in->port);
        return verdict(out, policy_reason_allows(pr), policy_reason_str(pr));
    }
    if (policy_normalize_name(raw, out->host) < 0) {
        snprintf(out->host, sizeof(out->host), "%.*s", (int)MIN(strlen(raw), (size_t)64), raw);
        return verdict(out, false, policy_reason_str(POLICY_DENY_BAD_NAME));
    }
    if (in->sni && strcmp(in->sni, out->host) != 0) {
        return verdict(out, false, "host-mismatch");
    }
    http_gate_check_name(in, out->host, out);
}

void http_gate_check_name(const struct http_gate_input *in, const char *name,
                          struct http_gate_result *out)
{
    enum policy_reason pr =
        policy_check_name_addr(in->policy, in->env, name, AF_INET, &in->dst, in->port);

    if (!policy_reason_allows(pr)) {
        return verdict(out, false, policy_reason_str(pr));
    }
    if (!resolved_has(in->resolved, name, in->dst.s_addr, in->now)) {
        enum policy_reason ar = policy_check_addr(in->policy, in->env, AF_INET, &in->dst, in->port);
        if (ar != POLICY_ALLOW_CIDR) {
            return verdict(out, false, "unresolved-destination");
        }
        pr = ar;
    }
    verdict(out, true, policy_reason_str(pr));
}
