#pragma once
/*
 * The decision for one HTTP request on the egress gateway, as a pure
 * function of the parsed head, the policy, the sandbox's DNS attribution and
 * the destination the guest chose (gateway.c does the I/O around it).
 *
 * Rules, in order (the first that fails decides, with the token in
 * parentheses as the audit reason):
 *   1. CONNECT is refused ("connect"): a tunnel would carry anything.
 *   2. There must be a host ("no-host"); an absolute-form target's
 *      authority must equal the Host header when both are given
 *      ("host-mismatch"): one request, one name.
 *   3. Over terminated TLS the host must equal the SNI ("host-mismatch").
 *   4. An IPv6 literal is denied ("deny-ipv6"). An IPv4 literal must be the
 *      destination itself ("host-mismatch") and then goes by the address
 *      rules (policy_check_addr(): a CIDR allow entry, or the internet).
 *   5. A name goes by policy_check_name_addr() for the destination and port,
 *      and the destination must be an address the DNS proxy gave this
 *      sandbox for that name ("unresolved-destination") — unless a CIDR
 *      allow entry covers the destination anyway (then it is reachable by
 *      raw TCP, and attribution adds nothing).
 * The port in a Host header is not checked against the destination port:
 * the gateway dials the destination the guest chose, whatever the header.
 */
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "basic/time-util.h"
#include "gw/policy.h"
#include "shared/http1.h"

struct resolved;

struct http_gate_input {
    const struct policy *policy;
    const struct policy_env *env;
    const struct resolved *resolved;
    struct in_addr dst;
    uint16_t port;
    const char *sni; /* terminated TLS: the ClientHello's SNI; NULL for plain HTTP */
    usec_t now;
};

struct http_gate_result {
    bool allow;
    const char *reason;             /* policy_reason_str() or a gateway token (static) */
    char host[POLICY_NAME_MAX + 1]; /* normalised name or IPv4 literal ("" when none) */
};

void http_gate_check(const struct http_gate_input *in, const char *head,
                     const struct http1_request *req, struct http_gate_result *out);

/*
 * Rule 5 alone, for a normalised name (a ClientHello's SNI before the
 * handshake): allowed for in->dst and in->port, and attributed to it.
 * Fills out->allow and out->reason (out->host is left alone).
 */
void http_gate_check_name(const struct http_gate_input *in, const char *name,
                          struct http_gate_result *out);
