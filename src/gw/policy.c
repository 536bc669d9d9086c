/*
 * Egress policy model (policy.h): entry parsing, JSON shapes, checks.
 * Lists are small (at most POLICY_ENTRIES_MAX) and checked linearly; a
 * check is a few hundred comparisons at worst, far below a connect.
 */
#include "gw/policy.h"

#include <arpa/inet.h>
#include <stdarg.h>

#include "basic/macro.h"
#include "basic/parse-util.h"

enum entry_kind { ENTRY_NAME, ENTRY_WILDCARD, ENTRY_CIDR4, ENTRY_CIDR6 };

struct port_range {
    uint16_t lo, hi;
};

struct entry {
    enum entry_kind kind;
    char name[POLICY_NAME_MAX + 1]; /* ENTRY_NAME; ENTRY_WILDCARD: the suffix after "*." */
    uint32_t addr, mask;            /* ENTRY_CIDR4, host order */
    uint8_t addr6[16];
    unsigned prefix;
    bool bare_ip; /* written without /LEN: rendered back the same way */
    struct port_range ports[POLICY_PORT_RANGES_MAX];
    size_t n_ports; /* 0 = every port */
};

enum dialect { DIALECT_NATIVE, DIALECT_E2B };

struct policy {
    enum dialect dialect;
    bool internet;      /* the default for anything no entry matches */
    bool names_default; /* internet, and no deny entry covers all of IPv4 */
    int internet_given; /* E2B allow_internet_access: -1 absent, 0, 1 */
    bool has_allow, has_deny;
    struct entry *allow, *deny;
    size_t n_allow, n_deny;
    struct entry *passthrough; /* native only: names the gateway splices without terminating */
    size_t n_passthrough;
};

static const char *const reason_names[_POLICY_REASON_MAX] = {
    [POLICY_ALLOW_NAME] = "allow-name",         [POLICY_ALLOW_CIDR] = "allow-cidr",
    [POLICY_ALLOW_INTERNET] = "allow-internet", [POLICY_DENY_CEILING] = "deny-ceiling",
    [POLICY_DENY_FORBIDDEN] = "deny-forbidden", [POLICY_DENY_IPV6] = "deny-ipv6",
    [POLICY_DENY_BAD_NAME] = "deny-bad-name",   [POLICY_DENY_NAME] = "deny-name",
    [POLICY_DENY_CIDR] = "deny-cidr",           [POLICY_DENY_PORT] = "deny-port",
    [POLICY_DENY_DEFAULT] = "deny-default",
};

const char *policy_reason_str(enum policy_reason r)
{
    if ((unsigned)r >= _POLICY_REASON_MAX) {
        return "unknown";
    }
    return reason_names[r];
}

static const char *const ceiling_names[] = {
    [POLICY_CEILING_DENY] = "deny",
    [POLICY_CEILING_ALLOWLIST] = "allowlist",
    [POLICY_CEILING_INTERNET] = "internet",
};

int policy_ceiling_from_string(const char *s, enum policy_ceiling *ret)
{
    for (size_t i = 0; i < ARRAY_SIZE(ceiling_names); i++) {
        if (s && strcmp(s, ceiling_names[i]) == 0) {
            *ret = (enum policy_ceiling)i;
            return 0;
        }
    }
    return -EINVAL;
}

const char *policy_ceiling_to_string(enum policy_ceiling c)
{
    if ((unsigned)c >= ARRAY_SIZE(ceiling_names)) {
        return "unknown";
    }
    return ceiling_names[c];
}

static uint32_t prefix_mask(unsigned prefix)
{
    return prefix == 0 ? 0 : 0xFFFFFFFFu << (32 - prefix);
}

/* "A.B.C.D" or "A.B.C.D/LEN" (LEN 0-32); inet_pton refuses leading zeros and short forms. */
static int parse_cidr4(const char *s, uint32_t *ret_addr, unsigned *ret_prefix, bool *ret_bare)
{
    char buf[INET_ADDRSTRLEN + 4];
    const char *slash = strchr(s, '/');
    size_t n = slash ? (size_t)(slash - s) : strlen(s);
    struct in_addr a;
    uint32_t prefix = 32;

    if (n >= INET_ADDRSTRLEN) {
        return -EINVAL;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (inet_pton(AF_INET, buf, &a) != 1) {
        return -EINVAL;
    }
    if (slash) {
        if (strlen(slash + 1) > 2 || parse_u32(slash + 1, &prefix) < 0 || prefix > 32 ||
            (slash[1] == '0' && slash[2] != '\0')) {
            return -EINVAL;
        }
    }
    *ret_addr = ntohl(a.s_addr);
    *ret_prefix = prefix;
    *ret_bare = !slash;
    return 0;
}

static int parse_cidr6(const char *s, uint8_t ret_addr[16], unsigned *ret_prefix, bool *ret_bare)
{
    char buf[INET6_ADDRSTRLEN + 4];
    const char *slash = strchr(s, '/');
    size_t n = slash ? (size_t)(slash - s) : strlen(s);
    uint32_t prefix = 128;

    if (n >= INET6_ADDRSTRLEN) {
        return -EINVAL;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (inet_pton(AF_INET6, buf, ret_addr) != 1) {
        return -EINVAL;
    }
    if (slash) {
        if (strlen(slash + 1) > 3 || parse_u32(slash + 1, &prefix) < 0 || prefix > 128 ||
            (slash[1] == '0' && slash[2] != '\0')) {
            return -EINVAL;
        }
    }
    *ret_prefix = prefix;
    *ret_bare = !slash;
    return 0;
}

int policy_env_set_test_net(struct policy_env *env, const char *cidr)
{
    static const struct {
        uint32_t net;
        unsigned prefix;
    } ok[] = {
        { 0xC6120000u, 15 }, /* 198.18.0.0/15 */
        { 0xC0000200u, 24 }, /* 192.0.2.0/24 */
        { 0xC6336400u, 24 }, /* 198.51.100.0/24 */
        { 0xCB007100u, 24 }, /* 203.0.113.0/24 */
    };
    uint32_t addr;
    unsigned prefix;
    bool bare;

    if (!cidr || parse_cidr4(cidr, &addr, &prefix, &bare) < 0) {
        return -EINVAL;
    }
    for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
        if (prefix >= ok[i].prefix && (addr & prefix_mask(ok[i].prefix)) == ok[i].net) {
            env->has_test_net = true;
            env->test_mask = prefix_mask(prefix);
            env->test_net = addr & env->test_mask;
            return 0;
        }
    }
    return -EINVAL;
}

bool policy_addr_is_forbidden(const struct policy_env *env, uint32_t addr)
{
    static const struct {
        uint32_t net;
        unsigned prefix;
    } forbidden[] = {
        { 0x00000000u, 8 },  { 0x0A000000u, 8 },  { 0x64400000u, 10 }, { 0x7F000000u, 8 },
        { 0xA9FE0000u, 16 }, { 0xAC100000u, 12 }, { 0xC0000000u, 24 }, { 0xC0000200u, 24 },
        { 0xC0A80000u, 16 }, { 0xC6120000u, 15 }, { 0xC6336400u, 24 }, { 0xCB007100u, 24 },
        { 0xE0000000u, 4 },  { 0xF0000000u, 4 },
    };

    if (env && env->has_test_net && (addr & env->test_mask) == env->test_net) {
        return false;
    }
    for (size_t i = 0; i < ARRAY_SIZE(forbidden); i++) {
        if ((addr & prefix_mask(forbidden[i].prefix)) == forbidden[i].net) {
            return true;
        }
    }
    return false;
}

static bool label_char_ok(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Like policy_normalize_name(), with a reason for the error message. */
static int normalize_name(const char *name, char *out, const char **why)
{
    size_t n = strlen(name), label = 0;

    if (n > 0 && name[n - 1] == '.') {
        n--;
    }
    if (n == 0) {
        *why = "empty host name";
        return -EINVAL;
    }
    if (n > POLICY_NAME_MAX) {
        *why = "host name longer than 253 bytes";
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        char c = name[i];

        if (c >= 'A' && c <= 'Z') {
            c = (char)(c + ('a' - 'A'));
        }
        if (c == '.') {
            if (label == 0) {
                *why = "empty label in host name";
                return -EINVAL;
            }
            label = 0;
        } else if (!label_char_ok(c)) {
            *why = "invalid character in host name";
            return -EINVAL;
        } else if (++label > 63) {
            *why = "label longer than 63 bytes in host name";
            return -EINVAL;
        }
        out[i] = c;
    }
    if (label == 0) {
        *why = "empty label in host name";
        return -EINVAL;
    }
    out[n] = '\0';
    return 0;
}

int policy_normalize_name(const char *name, char *out)
{
    const char *why;

    return name ? normalize_name(name, out, &why) : -EINVAL;
}

/* "80", "80,443", "8000-8100,443". */
static int parse_ports(const char *s, struct entry *e, const char **why)
{
    const char *p = s;

    *why = "invalid port list";
    if (*p == '\0') {
        return -EINVAL;
    }
    while (*p) {
        char buf[16];
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char *dash;
        uint32_t lo, hi;

        if (n == 0 || n >= sizeof(buf)) {
            return -EINVAL;
        }
        if (e->n_ports == POLICY_PORT_RANGES_MAX) {
            *why = "more than 16 port ranges";
            return -EINVAL;
        }
        memcpy(buf, p, n);
        buf[n] = '\0';
        dash = strchr(buf, '-');
        if (dash) {
            *dash = '\0';
        }
        if (parse_u32(buf, &lo) < 0 || (dash && parse_u32(dash + 1, &hi) < 0)) {
            return -EINVAL;
        }
        if (!dash) {
            hi = lo;
        }
        if (lo == 0 || lo > 65535 || hi > 65535 || hi < lo) {
            *why = "port out of range (1-65535, low-high)";
            return -EINVAL;
        }
        e->ports[e->n_ports++] = (struct port_range){ (uint16_t)lo, (uint16_t)hi };
        p += n;
        if (*p == ',') {
            p++;
            if (*p == '\0') {
                return -EINVAL;
            }
        }
    }
    return 0;
}

static int parse_entry(const char *s, bool names_ok, struct entry *e, const char **why)
{
    char host[POLICY_ENTRY_TEXT_MAX + 1];
    const char *ports = NULL;
    size_t n = strlen(s);
    bool bracket = false;
    int r;

    *e = (struct entry){};
    if (n == 0) {
        *why = "empty entry";
        return -EINVAL;
    }
    if (n > POLICY_ENTRY_TEXT_MAX) {
        *why = "entry too long";
        return -EINVAL;
    }
    /* Split off ":PORTS": "[v6]:p", or a single colon (more than one = bare IPv6). */
    if (s[0] == '[') {
        const char *close = strchr(s, ']');

        if (!close || (close[1] != '\0' && close[1] != ':')) {
            *why = "unbalanced brackets";
            return -EINVAL;
        }
        memcpy(host, s + 1, (size_t)(close - s - 1));
        host[close - s - 1] = '\0';
        if (close[1] == ':') {
            ports = close + 2;
        }
        bracket = true;
    } else {
        const char *colon = strchr(s, ':');

        if (colon && !strchr(colon + 1, ':')) {
            memcpy(host, s, (size_t)(colon - s));
            host[colon - s] = '\0';
            ports = colon + 1;
        } else {
            memcpy(host, s, n + 1);
        }
    }
    if (ports) {
        r = parse_ports(ports, e, why);
        if (r < 0) {
            return r;
        }
    }
    if (strchr(host, ':')) {
        r = parse_cidr6(host, e->addr6, &e->prefix, &e->bare_ip);
        if (r < 0) {
            *why = "invalid IPv6 address or CIDR";
            return r;
        }
        e->kind = ENTRY_CIDR6;
        return 0;
    }
    if (bracket) {
        *why = "brackets are for IPv6 addresses";
        return -EINVAL;
    }
    /* Digits, dots and a slash only: an IPv4 entry, so a bad one is not read as a name. */
    if (host[0] != '\0' && strspn(host, "0123456789./") == strlen(host)) {
        r = parse_cidr4(host, &e->addr, &e->prefix, &e->bare_ip);
        if (r < 0) {
            *why = "invalid IPv4 address or CIDR";
            return r;
        }
        e->kind = ENTRY_CIDR4;
        e->mask = prefix_mask(e->prefix);
        e->addr &= e->mask;
        return 0;
    }
    if (!names_ok) {
        *why = "host names are not supported here (use an IP address or CIDR)";
        return -EINVAL;
    }
    if (host[0] == '*') {
        if (host[1] != '.') {
            *why = "a wildcard must be \"*.\" followed by a name";
            return -EINVAL;
        }
        r = normalize_name(host + 2, e->name, why);
        if (r < 0) {
            return r;
        }
        e->kind = ENTRY_WILDCARD;
        return 0;
    }
    r = normalize_name(host, e->name, why);
    if (r < 0) {
        return r;
    }
    e->kind = ENTRY_NAME;
    return 0;
}

static void set_error(struct policy_error *err, const char *fmt, ...) _printf_(2, 3);
static void set_error(struct policy_error *err, const char *fmt, ...)
{
    va_list ap;

    if (!err) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
}

static int parse_list(const json_t *arr, const char *field, bool names_ok, struct entry **ret,
                      size_t *ret_n, struct policy_error *err)
{
    size_t n;
    struct entry *v;

    if (!json_is_array(arr)) {
        set_error(err, "%s: must be an array of strings", field);
        return -EINVAL;
    }
    n = json_array_size(arr);
    if (n > POLICY_ENTRIES_MAX) {
        set_error(err, "%s: more than %d entries", field, POLICY_ENTRIES_MAX);
        return -EINVAL;
    }
    v = calloc(n ? n : 1, sizeof(*v));
    if (!v) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *j = json_array_get(arr, i);
        const char *s, *why = "invalid entry";

        if (!json_is_string(j)) {
            set_error(err, "%s[%zu]: must be a string", field, i);
            free(v);
            return -EINVAL;
        }
        s = json_string_value(j);
        if (strlen(s) != json_string_length(j) || parse_entry(s, names_ok, &v[i], &why) < 0) {
            if (strlen(s) != json_string_length(j)) {
                why = "NUL byte in entry";
            }
            set_error(err, "%s[%zu]: \"%.*s\": %s", field, i, POLICY_ENTRY_TEXT_MAX, s, why);
            free(v);
            return -EINVAL;
        }
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

static bool covers_all(const struct entry *e)
{
    return e->kind == ENTRY_CIDR4 && e->prefix == 0 && e->n_ports == 0;
}

/* Names have no address at DNS time: they resolve by default when the internet is on and
 * not denied wholesale, or when every address is allowed (allowOut ALL_TRAFFIC). */
static void finish(struct policy *p)
{
    bool deny_all = false, allow_all = false;

    for (size_t i = 0; i < p->n_deny; i++) {
        deny_all = deny_all || covers_all(&p->deny[i]);
    }
    for (size_t i = 0; i < p->n_allow; i++) {
        allow_all = allow_all || covers_all(&p->allow[i]);
    }
    p->names_default = (p->internet && !deny_all) || allow_all;
}

static struct policy *policy_new(enum dialect d)
{
    struct policy *p = calloc(1, sizeof(*p));

    if (p) {
        p->dialect = d;
        p->internet_given = -1;
    }
    return p;
}

struct policy *policy_free(struct policy *p)
{
    if (p) {
        free(p->allow);
        free(p->deny);
        free(p->passthrough);
        free(p);
    }
    return NULL;
}

/* "passthrough": names and "*." wildcards only, no ports: it says how an allowed TLS
 * connection is relayed, never whether it is allowed (policy_tls_passthrough()). */
static int parse_passthrough(const json_t *arr, struct policy *p, struct policy_error *err)
{
    int r = parse_list(arr, "passthrough", true, &p->passthrough, &p->n_passthrough, err);

    if (r < 0) {
        return r;
    }
    for (size_t i = 0; i < p->n_passthrough; i++) {
        const struct entry *e = &p->passthrough[i];
        const char *s = json_string_value(json_array_get(arr, i));

        if ((e->kind != ENTRY_NAME && e->kind != ENTRY_WILDCARD) || e->n_ports > 0) {
            set_error(err,
                      "passthrough[%zu]: \"%.*s\": only host names and \"*.\" wildcards, "
                      "without ports",
                      i, POLICY_ENTRY_TEXT_MAX, s);
            return -EINVAL;
        }
    }
    return 0;
}

int policy_parse_native(const json_t *json, struct policy **ret, struct policy_error *err)
{
    struct policy *p;
    const char *key;
    json_t *v;
    int r = 0;

    if (json && !json_is_object(json)) {
        set_error(err, "network policy must be an object");
        return -EINVAL;
    }
    p = policy_new(DIALECT_NATIVE);
    if (!p) {
        return -ENOMEM;
    }
    if (json) {
        json_object_foreach ((json_t *)json, key, v) {
            if (strcmp(key, "internet") == 0) {
                if (!json_is_boolean(v)) {
                    set_error(err, "internet: must be a boolean");
                    r = -EINVAL;
                    break;
                }
                p->internet = json_is_true(v);
            } else if (strcmp(key, "allow") == 0) {
                r = parse_list(v, "allow", true, &p->allow, &p->n_allow, err);
                p->has_allow = r >= 0;
            } else if (strcmp(key, "deny") == 0) {
                r = parse_list(v, "deny", true, &p->deny, &p->n_deny, err);
                p->has_deny = r >= 0;
            } else if (strcmp(key, "passthrough") == 0) {
                r = parse_passthrough(v, p, err);
            } else {
                set_error(err, "%.64s: unknown field", key);
                r = -EINVAL;
            }
            if (r < 0) {
                break;
            }
        }
    }
    if (r < 0) {
        policy_free(p);
        return r;
    }
    finish(p);
    *ret = p;
    return 0;
}

int policy_parse_e2b(const json_t *network, const json_t *allow_internet, bool put,
                     struct policy **ret, struct policy_error *err)
{
    struct policy *p;
    const char *key;
    json_t *v;
    int r = 0;

    if (network && !json_is_object(network)) {
        set_error(err, "network: must be an object");
        return -EINVAL;
    }
    if (allow_internet && !json_is_boolean(allow_internet) && !json_is_null(allow_internet)) {
        set_error(err, "allow_internet_access: must be a boolean");
        return -EINVAL;
    }
    p = policy_new(DIALECT_E2B);
    if (!p) {
        return -ENOMEM;
    }
    if (allow_internet && json_is_boolean(allow_internet)) {
        p->internet_given = json_is_true(allow_internet);
    }
    if (network) {
        json_object_foreach ((json_t *)network, key, v) {
            if (strcmp(key, "allowOut") == 0) {
                r = json_is_null(v) ? 0
                                    : parse_list(v, "allowOut", true, &p->allow, &p->n_allow, err);
                p->has_allow = r >= 0 && !json_is_null(v);
            } else if (strcmp(key, "denyOut") == 0) {
                r = json_is_null(v) ? 0
                                    : parse_list(v, "denyOut", false, &p->deny, &p->n_deny, err);
                p->has_deny = r >= 0 && !json_is_null(v);
            } else if (put && strcmp(key, "allow_internet_access") == 0) {
                if (json_is_boolean(v)) {
                    p->internet_given = json_is_true(v);
                } else if (!json_is_null(v)) {
                    set_error(err, "allow_internet_access: must be a boolean");
                    r = -EINVAL;
                }
            } else if (strcmp(key, "rules") == 0 || strcmp(key, "egressProxy") == 0) {
                if (json_is_null(v)) {
                    continue;
                }
                set_error(err, "network.%s: not supported by this server", key);
                r = -EOPNOTSUPP;
            } else if (!put &&
                       (strcmp(key, "allowPublicTraffic") == 0 ||
                        strcmp(key, "maskRequestHost") == 0 || strcmp(key, "httpsPorts") == 0)) {
                continue; /* ingress settings: the caller's business */
            } else {
                set_error(err, "network.%.64s: unknown field", key);
                r = -EINVAL;
            }
            if (r < 0) {
                break;
            }
        }
    }
    if (r < 0) {
        policy_free(p);
        return r;
    }
    p->internet = p->internet_given != 0;
    finish(p);
    *ret = p;
    return 0;
}

static json_t *render_entry(const struct entry *e)
{
    char buf[POLICY_ENTRY_TEXT_MAX + 64 + POLICY_PORT_RANGES_MAX * 12];
    char addr[INET6_ADDRSTRLEN];
    size_t n = 0;

    switch (e->kind) {
    case ENTRY_NAME:
        n = (size_t)snprintf(buf, sizeof(buf), "%s", e->name);
        break;
    case ENTRY_WILDCARD:
        n = (size_t)snprintf(buf, sizeof(buf), "*.%s", e->name);
        break;
    case ENTRY_CIDR4: {
        struct in_addr a = { .s_addr = htonl(e->addr) };

        inet_ntop(AF_INET, &a, addr, sizeof(addr));
        n = e->bare_ip ? (size_t)snprintf(buf, sizeof(buf), "%s", addr)
                       : (size_t)snprintf(buf, sizeof(buf), "%s/%u", addr, e->prefix);
        break;
    }
    case ENTRY_CIDR6:
        inet_ntop(AF_INET6, e->addr6, addr, sizeof(addr));
        if (e->n_ports) {
            n = e->bare_ip ? (size_t)snprintf(buf, sizeof(buf), "[%s]", addr)
                           : (size_t)snprintf(buf, sizeof(buf), "[%s/%u]", addr, e->prefix);
        } else {
            n = e->bare_ip ? (size_t)snprintf(buf, sizeof(buf), "%s", addr)
                           : (size_t)snprintf(buf, sizeof(buf), "%s/%u", addr, e->prefix);
        }
        break;
    }
    for (size_t i = 0; i < e->n_ports && n < sizeof(buf); i++) {
        const struct port_range *r = &e->ports[i];

        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%c%u", i == 0 ? ':' : ',', r->lo);
        if (r->hi != r->lo && n < sizeof(buf)) {
            n += (size_t)snprintf(buf + n, sizeof(buf) - n, "-%u", r->hi);
        }
    }
    return json_string(buf);
}

static json_t *render_list(const struct entry *v, size_t n)
{
    json_t *arr = json_array();

    if (!arr) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (json_array_append_new(arr, render_entry(&v[i])) < 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

json_t *policy_to_e2b_network(const struct policy *p)
{
    json_t *o = json_object();

    if (!o) {
        return NULL;
    }
    if ((p->has_allow &&
         json_object_set_new(o, "allowOut", render_list(p->allow, p->n_allow)) < 0) ||
        (p->has_deny && json_object_set_new(o, "denyOut", render_list(p->deny, p->n_deny)) < 0)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *policy_e2b_allow_internet(const struct policy *p)
{
    return p->internet_given < 0 ? json_null() : json_boolean(p->internet_given);
}

json_t *policy_to_native(const struct policy *p)
{
    json_t *o = json_object();

    if (!o) {
        return NULL;
    }
    if (json_object_set_new(o, "internet", json_boolean(p->internet)) < 0 ||
        json_object_set_new(o, "allow", render_list(p->allow, p->n_allow)) < 0 ||
        json_object_set_new(o, "deny", render_list(p->deny, p->n_deny)) < 0 ||
        /* Only when set, so policies without it keep the canonical form they had. */
        (p->n_passthrough > 0 &&
         json_object_set_new(o, "passthrough", render_list(p->passthrough, p->n_passthrough)) <
             0)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- checks ---- */

static bool name_matches(const struct entry *e, const char *name)
{
    size_t n, s;

    if (e->kind == ENTRY_NAME) {
        return strcmp(e->name, name) == 0;
    }
    if (e->kind != ENTRY_WILDCARD) {
        return false;
    }
    /* "*.example.com": "x.example.com", "a.b.example.com"; not "example.com", "xexample.com". */
    n = strlen(name);
    s = strlen(e->name);
    return n > s + 1 && name[n - s - 1] == '.' && strcmp(name + n - s, e->name) == 0;
}

static bool port_matches(const struct entry *e, uint16_t port)
{
    if (e->n_ports == 0 || port == 0) {
        return true;
    }
    for (size_t i = 0; i < e->n_ports; i++) {
        if (port >= e->ports[i].lo && port <= e->ports[i].hi) {
            return true;
        }
    }
    return false;
}

/* Match flags for one list. */
enum { M_NONE = 0, M_PORT_MISS = 1, M_HIT = 2 };

static int match_name(const struct entry *v, size_t n, const char *name, uint16_t port)
{
    int m = M_NONE;

    for (size_t i = 0; i < n; i++) {
        if (name_matches(&v[i], name)) {
            if (port_matches(&v[i], port)) {
                return M_HIT;
            }
            m = M_PORT_MISS;
        }
    }
    return m;
}

/* skip_all: the allowlist ceiling does not let a 0.0.0.0/0 allow entry be the internet. */
static int match_addr4(const struct entry *v, size_t n, uint32_t addr, uint16_t port, bool skip_all)
{
    int m = M_NONE;

    for (size_t i = 0; i < n; i++) {
        if (skip_all && v[i].prefix == 0) {
            continue;
        }
        if (v[i].kind == ENTRY_CIDR4 && (addr & v[i].mask) == v[i].addr) {
            if (port_matches(&v[i], port)) {
                return M_HIT;
            }
            m = M_PORT_MISS;
        }
    }
    return m;
}

static enum policy_reason fallback(const struct policy *p, const struct policy_env *env,
                                   bool internet, bool port_miss)
{
    if (internet) {
        return env->ceiling == POLICY_CEILING_INTERNET ? POLICY_ALLOW_INTERNET
                                                       : POLICY_DENY_CEILING;
    }
    return port_miss ? POLICY_DENY_PORT : POLICY_DENY_DEFAULT;
}

enum policy_reason policy_check_name(const struct policy *p, const struct policy_env *env,
                                     const char *name, uint16_t port)
{
    char norm[POLICY_NAME_MAX + 1];
    int m;

    if (env->ceiling == POLICY_CEILING_DENY) {
        return POLICY_DENY_CEILING;
    }
    if (!name || policy_normalize_name(name, norm) < 0 || strcmp(norm, name) != 0) {
        return POLICY_DENY_BAD_NAME;
    }
    m = match_name(p->allow, p->n_allow, name, port);
    if (m == M_HIT) {
        return POLICY_ALLOW_NAME;
    }
    if (match_name(p->deny, p->n_deny, name, port) == M_HIT) {
        return POLICY_DENY_NAME;
    }
    return fallback(p, env, p->names_default, m == M_PORT_MISS);
}

enum policy_reason policy_check_addr(const struct policy *p, const struct policy_env *env,
                                     int family, const void *addr, uint16_t port)
{
    uint32_t a;
    int m;

    if (env->ceiling == POLICY_CEILING_DENY) {
        return POLICY_DENY_CEILING;
    }
    if (family != AF_INET || !addr) {
        return POLICY_DENY_IPV6;
    }
    a = ntohl(((const struct in_addr *)addr)->s_addr);
    if (policy_addr_is_forbidden(env, a)) {
        return POLICY_DENY_FORBIDDEN;
    }
    m = match_addr4(p->allow, p->n_allow, a, port, env->ceiling == POLICY_CEILING_ALLOWLIST);
    if (m == M_HIT) {
        return POLICY_ALLOW_CIDR;
    }
    if (match_addr4(p->deny, p->n_deny, a, port, false) == M_HIT) {
        return POLICY_DENY_CIDR;
    }
    return fallback(p, env, p->internet, m == M_PORT_MISS);
}

enum policy_reason policy_check_name_addr(const struct policy *p, const struct policy_env *env,
                                          const char *name, int family, const void *addr,
                                          uint16_t port)
{
    char norm[POLICY_NAME_MAX + 1];
    uint32_t a;
    int mn, ma;

    if (env->ceiling == POLICY_CEILING_DENY) {
        return POLICY_DENY_CEILING;
    }
    if (!name || policy_normalize_name(name, norm) < 0 || strcmp(norm, name) != 0) {
        return POLICY_DENY_BAD_NAME;
    }
    if (family != AF_INET || !addr) {
        return POLICY_DENY_IPV6;
    }
    a = ntohl(((const struct in_addr *)addr)->s_addr);
    if (policy_addr_is_forbidden(env, a)) {
        return POLICY_DENY_FORBIDDEN;
    }
    mn = match_name(p->allow, p->n_allow, name, port);
    if (mn == M_HIT) {
        return POLICY_ALLOW_NAME;
    }
    ma = match_addr4(p->allow, p->n_allow, a, port, env->ceiling == POLICY_CEILING_ALLOWLIST);
    if (ma == M_HIT) {
        return POLICY_ALLOW_CIDR;
    }
    if (match_name(p->deny, p->n_deny, name, port) == M_HIT) {
        return POLICY_DENY_NAME;
    }
    if (match_addr4(p->deny, p->n_deny, a, port, false) == M_HIT) {
        return POLICY_DENY_CIDR;
    }
    return fallback(p, env, p->internet, mn == M_PORT_MISS || ma == M_PORT_MISS);
}

bool policy_tls_passthrough(const struct policy *p, const char *name)
{
    if (!p || !name) {
        return false;
    }
    for (size_t i = 0; i < p->n_passthrough; i++) {
        if (name_matches(&p->passthrough[i], name)) {
            return true;
        }
    }
    return false;
}
