#pragma once
/*
 * What the ingress proxy reads from a client's request head beyond
 * HTTP/1.1 itself: E2B's routing headers and token, routing by Host, and
 * Accept and query helpers. The HTTP/1.1 parser, response heads, rewrites
 * and body framing are src/shared/http1.h. Hostile input, like there: no
 * allocation, spans into the caller's buffer, fuzz-ingress-head.c drives it.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shared/http1.h"
#include "shared/sandbox-id.h"

/* E2B's header for the traffic access token of a sandbox with private user ports. */
#define INGRESS_TRAFFIC_TOKEN_HEADER "e2b-traffic-access-token"

struct ingress_head_request {
    struct http1_request http;
    struct http1_span sandbox_id;    /* E2b-Sandbox-Id */
    struct http1_span sandbox_port;  /* E2b-Sandbox-Port */
    struct http1_span access_token;  /* X-Access-Token */
    struct http1_span traffic_token; /* e2b-traffic-access-token (INGRESS_TRAFFIC_TOKEN_HEADER) */
    struct http1_span accept;        /* the first Accept header */
};

/*
 * http1_parse_request() plus the E2B fields: a second E2b-Sandbox-Id,
 * E2b-Sandbox-Port, X-Access-Token or e2b-traffic-access-token is -EBADMSG.
 * Same errors otherwise.
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
