#pragma once
/*
 * Credential injection on the egress gateway (issue 10; docs/architecture.md
 * "Credentials"). A sandbox's policy carries "inject" rules and a "secrets"
 * map of values sealed to space-gw's key (sealed-secret.h, policy.h). When a
 * policy arrives, inject_new() opens every sealed value; the plaintexts live
 * only in this struct (never logged, never written anywhere) and are wiped
 * with explicit_bzero() when the policy is replaced or the sandbox detached.
 *
 * Per request (inject_rewrite(), called by the gateway after http-gate.h
 * allowed the request and its head was rewritten for upstream), a rule
 * fires when all of these hold:
 *   1. the request came over TLS the gateway terminated, its Host equal to
 *      the ClientHello's SNI (or over plain HTTP, for a rule with plainHttp);
 *   2. the rule's host, method and pathPrefix cover it (policy_inject_matches);
 *   3. the rule has not expired (expiresAt; an expired rule is gone);
 *   4. the destination the guest chose is an address the DNS proxy gave
 *      this sandbox for that very name (resolved.h), whatever a CIDR allow
 *      entry would let through;
 * and the request then goes only over the gateway's own upstream TLS, whose
 * chain and name (= the SNI) are verified before a byte of it is written
 * (tls-term.h: OpenSSL sends application data only after the handshake).
 *
 * A request a rule covers by host, method and path but that fails 1 or 4
 * (plain HTTP without opt-in, an unattributed destination) is denied (403,
 * audited "inject-plain-http" / "inject-unattributed"): it would otherwise go
 * without its credentials to where the rule did not mean. Over the rule's
 * ratePerMinute (a token bucket, burst = the rate) it is denied too (429,
 * "inject-rate-limit"). A rule that fires replaces every field of its header
 * name the guest sent with one field of the rule's value; what the guest
 * sent is never expanded, so a guest "{{secret:gh}}" goes out literally.
 * When two rules that fire name the same header, the first one wins.
 *
 * Redirects are the client's business: a 302 to another host is another
 * request (another connection: another SNI) and rules for that host apply
 * to it, or none.
 */
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>

#include <openssl/evp.h>

#include "basic/strbuf.h"
#include "basic/time-util.h"
#include "gw/policy.h"
#include "shared/http1.h"

#define INJECT_ERROR_MAX 256

struct inject;
struct resolved;
struct sandbox;

/*
 * Opens every value in p's "secrets" map with key (the gateway's private
 * key). Returns 0 and a new state (NULL when p has neither rules nor
 * secrets), or a negative errno with err naming the secret that failed:
 * -EBADMSG (malformed, tampered, sealed under another name),
 * -EKEYREJECTED (sealed to another gateway's key), -EINVAL (a value with
 * control characters, which cannot go in a header), -ENOKEY (no key
 * loaded). Nothing is kept on failure.
 */
int inject_new(EVP_PKEY *key, const struct policy *p, struct inject **ret, char *err,
               size_t err_size);

/* Wipes and frees the plaintexts; NULL-safe; returns NULL. */
struct inject *inject_free(struct inject *in);

struct inject_request {
    const struct policy *policy; /* the policy in force, which in was opened for */
    const struct resolved *resolved;
    const char *sni;  /* terminated TLS: the SNI; NULL for plain HTTP */
    const char *host; /* normalised (http-gate.h's result) */
    struct http1_span method, target;
    struct in_addr dst;
    usec_t now;      /* monotonic: attribution and rate */
    usec_t realtime; /* expiry */
};

/*
 * Applies the rules to head (a complete request head, as it goes upstream,
 * rewritten in place). Returns 0 (no rule fired; head unchanged), 1 (head
 * carries the injected fields; *ret_names, malloc'd, the comma-joined
 * secret names for the audit record, or NULL when the values had no
 * secret), or a negative errno with *ret_reason (static): -EACCES (deny
 * 403), -EDQUOT (deny 429), -E2BIG (the head would be too large, 431),
 * -ENOMEM. *ret_names is freed and reset first in every case.
 */
int inject_rewrite(struct inject *in, const struct inject_request *rq, struct strbuf *head,
                   char **ret_names, const char **ret_reason);

/*
 * The gateway's one hook (gateway.c, after the gate and the upstream
 * rewrite): inject_rewrite() for sb's policy and state. Returns 0 to go on
 * or the HTTP status to deny with (403, 429, 431, 500) and *ret_reason;
 * inject_phrase() gives that status' reason phrase.
 */
int inject_request(struct sandbox *sb, const char *sni, const char *host,
                   const struct http1_request *req, struct in_addr dst, struct strbuf *head,
                   char **ret_names, const char **ret_reason);

const char *inject_phrase(int status);
