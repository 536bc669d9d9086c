#pragma once
/*
 * Egress policy model: what one sandbox may reach, and why a connection or
 * DNS query was allowed or denied. Parsed from the API's JSON (native and
 * E2B shapes), rendered back for getInfo, checked by space-gw's DNS proxy
 * and gateway. Pure: no I/O; a policy is immutable once parsed, so a live
 * replace is "parse the new one, swap the pointer, free the old one".
 *
 * Entries (strings, in both JSON shapes):
 *   example.com            that name exactly
 *   *.example.com          any name below example.com, at any depth, but NOT
 *                          example.com itself (as E2B documents for rules);
 *                          list both to get both. A bare "*" is invalid.
 *   198.18.0.7             one IPv4 address (= /32)
 *   198.18.0.0/15          an IPv4 CIDR (host bits are cleared)
 *   2001:db8::/32, ::1     IPv6: parsed so a policy written for both families
 *                          loads, but never allowed (the sandbox has no IPv6)
 *   ENTRY:443              optional ports after a colon: a list and/or ranges,
 *   ENTRY:80,443,8000-8100 at most POLICY_PORT_RANGES_MAX; none = every port.
 *   [2001:db8::1]:443      IPv6 with ports needs brackets
 *
 * Precedence (E2B: "allowed entries always take precedence over denied
 * entries"): an allow entry that matches wins over any deny entry; then a
 * deny entry that matches denies; then the default. Whatever the entries
 * say, these always deny: the operator's ceiling, an address in the
 * forbidden set (policy_addr_is_forbidden()), IPv6, a malformed name.
 *
 * Defaults: the native API denies everything unless "internet": true; the
 * E2B API follows allow_internet_access (absent = true, as in the SDKs;
 * false = denyOut ["0.0.0.0/0"], as E2B documents). "Internet" means any
 * name, and any address outside the forbidden set, over TCP. A deny entry
 * 0.0.0.0/0 turns the internet default off for names too, so the DNS proxy
 * then answers only names an allow entry lists; an allow entry 0.0.0.0/0
 * (E2B's ALL_TRAFFIC, no ports) turns it on. Under the allowlist ceiling a
 * 0.0.0.0/0 allow entry counts for nothing: it would be the internet.
 *
 * Names vs addresses: DNS answers only names (policy_check_name()); CIDR
 * allow entries let the guest connect to those addresses by IP
 * (policy_check_addr()) but never make the DNS proxy forward a name, so a
 * CIDR rule cannot become a DNS tunnel.
 */
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define POLICY_ENTRIES_MAX 256    /* per list */
#define POLICY_PORT_RANGES_MAX 16 /* per entry */
#define POLICY_ENTRY_TEXT_MAX 320 /* longest entry string accepted */
#define POLICY_NAME_MAX 253

/* The operator's cap (`space up --egress-ceiling`), over every sandbox's policy. */
enum policy_ceiling {
    POLICY_CEILING_DENY,      /* nothing leaves */
    POLICY_CEILING_ALLOWLIST, /* only what an allow entry names; "internet" defaults deny */
    POLICY_CEILING_INTERNET,  /* no cap beyond the forbidden set */
};

/* Deployment-wide settings the checks need. Zero-initialised = ceiling deny, no test net. */
struct policy_env {
    enum policy_ceiling ceiling;
    /* `--egress-test-net`: a benchmark/documentation range tests use as their simulated
     * internet (198.18.0.0/15 in tests/); taken out of the forbidden set. */
    bool has_test_net;
    uint32_t test_net;  /* host order, masked */
    uint32_t test_mask; /* host order */
};

int policy_ceiling_from_string(const char *s, enum policy_ceiling *ret);
const char *policy_ceiling_to_string(enum policy_ceiling c);

/*
 * Sets env's test net from "A.B.C.D/LEN". Only ranges inside the
 * benchmark (198.18.0.0/15) or documentation (192.0.2.0/24,
 * 198.51.100.0/24, 203.0.113.0/24) blocks are accepted: never private,
 * loopback, link-local or multicast space. Returns 0 or -EINVAL.
 */
int policy_env_set_test_net(struct policy_env *env, const char *cidr);

/*
 * The always-forbidden IPv4 set, whatever a policy says:
 *   0.0.0.0/8 (this network), 10.0.0.0/8, 100.64.0.0/10 (CGNAT),
 *   127.0.0.0/8 (loopback), 169.254.0.0/16 (link-local, includes the
 *   metadata address 169.254.169.254 and every sandbox's own link),
 *   172.16.0.0/12, 192.0.0.0/24 (IETF protocol assignments), 192.0.2.0/24,
 *   198.51.100.0/24, 203.0.113.0/24 (documentation), 192.168.0.0/16,
 *   198.18.0.0/15 (benchmarking), 224.0.0.0/4 (multicast), 240.0.0.0/4
 *   (reserved, includes the broadcast 255.255.255.255),
 * minus env's test net. addr in host order.
 */
bool policy_addr_is_forbidden(const struct policy_env *env, uint32_t addr);

/* Why a check came out as it did; the audit log records policy_reason_str(). */
enum policy_reason {
    POLICY_ALLOW_NAME,     /* an allow entry names the host */
    POLICY_ALLOW_CIDR,     /* an allow entry covers the address */
    POLICY_ALLOW_INTERNET, /* no entry matched; the default is internet */
    _POLICY_ALLOW_MAX,
    POLICY_DENY_CEILING = _POLICY_ALLOW_MAX, /* the operator's ceiling */
    POLICY_DENY_FORBIDDEN,                   /* the address is in the forbidden set */
    POLICY_DENY_IPV6,                        /* IPv6 is never allowed */
    POLICY_DENY_BAD_NAME,                    /* not a valid host name */
    POLICY_DENY_NAME,                        /* a deny entry names the host (native API only) */
    POLICY_DENY_CIDR,                        /* a deny entry covers the address */
    POLICY_DENY_PORT,                        /* an allow entry matched, but not for this port */
    POLICY_DENY_DEFAULT,                     /* no entry matched; the default is deny */
    _POLICY_REASON_MAX,
};

static inline bool policy_reason_allows(enum policy_reason r)
{
    return r < _POLICY_ALLOW_MAX;
}
/* "allow-name", "deny-forbidden", ...: stable tokens for logs and the audit API. */
const char *policy_reason_str(enum policy_reason r);

struct policy;

/* Where policy_parse_*() says what was wrong, for a 400 naming the entry. */
struct policy_error {
    char message[POLICY_ENTRY_TEXT_MAX + 128]; /* e.g. allowOut[2]: "a..b": empty label */
};

/*
 * Native API shape: {"internet": bool, "allow": [entry...], "deny": [entry...],
 * "passthrough": [name...], "inject": [rule...], "secrets": {NAME: sealed}},
 * every field optional (default: deny everything), unknown fields refused.
 * "passthrough" takes host names and "*." wildcards only (no addresses, no
 * ports); see policy_tls_passthrough(). "inject" and "secrets": see
 * "Credential injection" below.
 *
 * with_secrets: whether a "secrets" map is accepted. space-gw and space-node
 * (which carry the policy the api sent, secrets added) pass true: the map
 * must then hold every NAME a rule references. The api, parsing what a user
 * gave, passes false: a "secrets" field is refused ("secrets are not part of
 * a policy; create them with /v1/secrets") and the names are left for the
 * caller to look up (policy_secret_ref()).
 *
 * json may be NULL (= {}). Returns 0 and a new policy, or -EINVAL with *err
 * filled (-ENOMEM on allocation failure).
 */
int policy_parse_native(const json_t *json, bool with_secrets, struct policy **ret,
                        struct policy_error *err);

/*
 * E2B shape. network: the create body's "network" object, or the whole
 * PUT /sandboxes/{id}/network body (put = true); may be NULL.
 * allow_internet: the create body's "allow_internet_access" (NULL when
 * absent; a PUT body carries it inside network instead).
 * Keys read: allowOut (names, wildcards, IPs, CIDRs), denyOut (IPs and CIDRs
 * only; E2B does not support names there), allow_internet_access (put).
 * "rules" and "egressProxy" are refused (-EOPNOTSUPP, *err says which):
 * space does not implement them yet. On create, "allowPublicTraffic",
 * "maskRequestHost" and "httpsPorts" are ingress settings and are left to
 * the caller; on PUT they are not part of the body and are refused.
 */
int policy_parse_e2b(const json_t *network, const json_t *allow_internet, bool put,
                     struct policy **ret, struct policy_error *err);

/* Frees p (NULL is fine); returns NULL. */
struct policy *policy_free(struct policy *p);

/*
 * E2B getInfo: the "network" object ({allowOut, denyOut}, only the lists
 * that were given), and allowInternetAccess (true/false as given, or JSON
 * null when it was not set). New references, NULL on OOM.
 */
json_t *policy_to_e2b_network(const struct policy *p);
json_t *policy_e2b_allow_internet(const struct policy *p);
/* Native: {"internet": bool, "allow": [...], "deny": [...]} in canonical form, plus
 * "passthrough": [...], "inject": [...] and "secrets": {...} when they are not
 * empty; re-parses (with the same with_secrets). */
json_t *policy_to_native(const struct policy *p);

/*
 * May the DNS proxy answer `name` (as dns-msg.h normalises it)? port 0 =
 * any port (DNS does not know the port; an entry with ports still lets the
 * name resolve, the connection is checked later).
 */
enum policy_reason policy_check_name(const struct policy *p, const struct policy_env *env,
                                     const char *name, uint16_t port);

/*
 * May the guest connect to this address with no name (a raw IP connect,
 * relayed as plain TCP)? family AF_INET (addr: struct in_addr) or AF_INET6.
 */
enum policy_reason policy_check_addr(const struct policy *p, const struct policy_env *env,
                                     int family, const void *addr, uint16_t port);

/*
 * May the gateway pass a connection for `name` (SNI or Host) to `addr`,
 * an address the DNS proxy resolved for that name for this sandbox (the
 * caller checks that attribution)? Name entries and address entries both
 * count; the forbidden set applies whatever the name says (DNS rebinding
 * to 127.0.0.1 or 169.254.169.254 stays denied).
 */
enum policy_reason policy_check_name_addr(const struct policy *p, const struct policy_env *env,
                                          const char *name, int family, const void *addr,
                                          uint16_t port);

/*
 * Should the gateway relay an allowed TLS connection for `name` (the SNI, as
 * policy_normalize_name() gives it) as it is, spliced to the destination,
 * instead of terminating it? For clients that pin certificates and so
 * refuse the egress CA. It never allows anything: the caller asks only
 * after policy_check_name_addr() allowed the connection and the DNS
 * attribution held. Weaker than terminating: the HTTP Host inside the
 * tunnel is not checked, only the SNI and the attribution. E2B policies
 * never have passthrough names.
 */
bool policy_tls_passthrough(const struct policy *p, const char *name);

/*
 * Validates and normalises a host name the way entries and checks do:
 * lowercase, one trailing dot dropped, labels of 1-63 letters, digits, '-'
 * or '_', at most 253 bytes. out has POLICY_NAME_MAX + 1 bytes. Returns 0
 * or -EINVAL.
 */
int policy_normalize_name(const char *name, char *out);

/*
 * Credential injection (docs/architecture.md "Credentials"). A rule:
 *
 *   {"host": "api.example.test",      exact or "*.suffix" (as entries, no ports
 *                                     or addresses); the policy must allow it
 *                                     (an allow entry covers it, or the
 *                                     internet default does), and no
 *                                     passthrough entry may overlap it
 *    "method": "GET",                 optional: exact, uppercase token, <= 16
 *    "pathPrefix": "/v1/",            optional: starts with "/", <= 1024, no
 *                                     spaces, controls, "#"
 *    "header": "Authorization",       RFC 7230 token <= 64; not hop-by-hop,
 *                                     Host, Content-Length, Transfer-Encoding
 *    "value": "Bearer {{secret:gh}}", literal text and references
 *                                     {{secret:NAME}} or ${e2b.secrets.NAME};
 *                                     no controls but HTAB; <= 4096 bytes
 *    "expiresAt": "2026-12-03T00:00:00Z",  optional RFC 3339
 *    "ratePerMinute": 60,             optional, 1..1000000
 *    "plainHttp": false}              optional opt-in to plain HTTP
 *
 * NAME is [A-Za-z0-9_-]{1,64}; at most POLICY_INJECT_MAX rules. "secrets" is
 * {NAME: "s1...."} (sealed-secret.h; only on the node -> gw wire). A text
 * that starts like a reference but is not a valid one ("{{secret:}}",
 * "${e2b.secrets.a b}") is refused, so what is literal is never in doubt.
 * The gateway expands references only in a rule's value, never in anything
 * the guest sent.
 */
#define POLICY_INJECT_MAX 64
#define POLICY_INJECT_HEADER_MAX 64
#define POLICY_INJECT_VALUE_MAX 4096
#define POLICY_INJECT_PATH_MAX 1024
#define POLICY_INJECT_METHOD_MAX 16
#define POLICY_INJECT_RATE_MAX 1000000
#define POLICY_SECRET_NAME_MAX 64
#define POLICY_SECRETS_MAX 64 /* entries in a "secrets" map */

/* One piece of a rule's value: literal text, or a secret's name. */
struct policy_inject_part {
    bool secret;
    const char *text; /* borrowed from the policy; a name is NUL-terminated */
    size_t len;
};

struct policy_inject;

size_t policy_inject_count(const struct policy *p);
const struct policy_inject *policy_inject_get(const struct policy *p, size_t i);

/* The rule's header name as written (case kept), its value's parts, and its
 * limits: expires_at in realtime microseconds (0 = never), per_minute (0 = none). */
const char *policy_inject_header(const struct policy_inject *r);
size_t policy_inject_parts(const struct policy_inject *r, const struct policy_inject_part **ret);
uint64_t policy_inject_expires_usec(const struct policy_inject *r);
unsigned policy_inject_rate(const struct policy_inject *r);
bool policy_inject_plain_http(const struct policy_inject *r);

/*
 * Does the rule cover a request for host (normalised, policy_normalize_name())
 * with this method and request target (origin-form, "/path?query")? A target
 * that is not origin-form, or whose path holds a dot segment, a backslash or
 * a percent-encoded '.', '/' or '\', never matches a rule with a pathPrefix:
 * the upstream could read it as another path than the prefix check did.
 * Expiry and rate are the caller's (they need the clock and state).
 */
bool policy_inject_matches(const struct policy_inject *r, const char *host, const char *method,
                           const char *target);

/* The distinct secret names the rules reference, in first-use order. */
size_t policy_secret_ref_count(const struct policy *p);
const char *policy_secret_ref(const struct policy *p, size_t i);
/* The sealed value of name in the "secrets" map, or NULL. */
const char *policy_secret_sealed(const struct policy *p, const char *name);
/* Is s a valid secret NAME? */
bool policy_secret_name_ok(const char *s);
