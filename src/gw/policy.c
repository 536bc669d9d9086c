/*
 * Egress policy model (policy.h): entry parsing, JSON shapes, checks.
 * Lists are small (at most POLICY_ENTRIES_MAX) and checked linearly; a
 * check is a few hundred comparisons at worst, far below a connect.
 */
#include "gw/policy.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <time.h>

#include "basic/macro.h"
#include "basic/parse-util.h"
#include "shared/sealed-secret.h"

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

struct policy_inject {
    struct entry host;                         /* ENTRY_NAME or ENTRY_WILDCARD, no ports */
    char method[POLICY_INJECT_METHOD_MAX + 1]; /* "" = any */
    char *path_prefix;                         /* NULL = any */
    char header[POLICY_INJECT_HEADER_MAX + 1];
    char *value; /* as given, rendered back */
    struct policy_inject_part *parts;
    size_t n_parts;
    char *names;        /* the secret parts' NUL-terminated names */
    char *expires_text; /* as given; NULL = never */
    uint64_t expires_usec;
    unsigned rate;
    bool plain_http;
};

struct secret_entry {
    char name[POLICY_SECRET_NAME_MAX + 1];
    char *sealed;
};

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
    struct policy_inject *inject; /* native only */
    size_t n_inject;
    char (*refs)[POLICY_SECRET_NAME_MAX + 1]; /* distinct names the rules reference */
    size_t n_refs;
    struct secret_entry *secrets; /* the "secrets" map (with_secrets only) */
    size_t n_secrets;
    bool has_secrets;
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
        for (size_t i = 0; i < p->n_inject; i++) {
            struct policy_inject *r = &p->inject[i];

            free(r->path_prefix);
            free(r->value);
            free(r->parts);
            free(r->names);
            free(r->expires_text);
        }
        free(p->inject);
        free(p->refs);
        for (size_t i = 0; i < p->n_secrets; i++) {
            free(p->secrets[i].sealed);
        }
        free(p->secrets);
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

/* ---- credential injection: "inject" rules and the "secrets" map ---- */

static bool name_matches(const struct entry *e, const char *name);

bool policy_secret_name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;

    if (n == 0 || n > POLICY_SECRET_NAME_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-')) {
            return false;
        }
    }
    return true;
}

/* RFC 7230 tchar. */
static bool tchar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c));
}

static bool header_forbidden(const char *h)
{
    /* Hop-by-hop (RFC 7230 6.1, and the old Proxy-Connection and Keep-Alive), and
     * what frames the request: replacing them would change its meaning, not its credentials. */
    static const char *const no[] = {
        "connection", "keep-alive",     "proxy-connection",  "proxy-authenticate",
        "te",         "trailer",        "transfer-encoding", "upgrade",
        "host",       "content-length",
    };

    for (size_t i = 0; i < ARRAY_SIZE(no); i++) {
        if (strcasecmp(h, no[i]) == 0) {
            return true;
        }
    }
    return false;
}

static int digits(const char *s, size_t n, int *ret)
{
    int v = 0;

    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -EINVAL;
        }
        v = v * 10 + (s[i] - '0');
    }
    *ret = v;
    return 0;
}

/* RFC 3339 date-time: YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM), in realtime usec. */
static int parse_rfc3339(const char *s, uint64_t *ret)
{
    static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    int Y, M, D, h, m, sec, oh = 0, om = 0, sign = 0;
    size_t n = strlen(s), i = 19;
    struct tm tm = {};
    time_t t;

    if (n < 20 || n > 64 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') ||
        s[13] != ':' || s[16] != ':' || digits(s, 4, &Y) < 0 || digits(s + 5, 2, &M) < 0 ||
        digits(s + 8, 2, &D) < 0 || digits(s + 11, 2, &h) < 0 || digits(s + 14, 2, &m) < 0 ||
        digits(s + 17, 2, &sec) < 0) {
        return -EINVAL;
    }
    if (s[i] == '.') {
        size_t j = ++i;

        while (i < n && s[i] >= '0' && s[i] <= '9') {
            i++;
        }
        if (i == j) {
            return -EINVAL;
        }
    }
    if ((s[i] == 'Z' || s[i] == 'z') && i + 1 == n) {
        sign = 0;
    } else if ((s[i] == '+' || s[i] == '-') && i + 6 == n && s[i + 3] == ':' &&
               digits(s + i + 1, 2, &oh) == 0 && digits(s + i + 4, 2, &om) == 0 && oh <= 23 &&
               om <= 59) {
        sign = s[i] == '+' ? 1 : -1;
    } else {
        return -EINVAL;
    }
    if (Y < 1970 || M < 1 || M > 12 || D < 1 || D > mdays[M - 1] ||
        (M == 2 && D == 29 && !(Y % 4 == 0 && (Y % 100 != 0 || Y % 400 == 0))) || h > 23 ||
        m > 59 || sec > 60) {
        return -EINVAL;
    }
    tm.tm_year = Y - 1900;
    tm.tm_mon = M - 1;
    tm.tm_mday = D;
    tm.tm_hour = h;
    tm.tm_min = m;
    tm.tm_sec = sec > 59 ? 59 : sec; /* a leap second: its second */
    t = timegm(&tm);
    t -= (time_t)sign * (oh * 3600 + om * 60);
    if (t < 0) {
        return -EINVAL;
    }
    *ret = (uint64_t)t * 1000000u;
    return 0;
}

/* Adds name to the policy's distinct references. */
static int add_ref(struct policy *p, const char *name, size_t len)
{
    for (size_t i = 0; i < p->n_refs; i++) {
        if (strlen(p->refs[i]) == len && memcmp(p->refs[i], name, len) == 0) {
            return 0;
        }
    }
    if (p->n_refs == POLICY_SECRETS_MAX) {
        return -E2BIG;
    }
    memcpy(p->refs[p->n_refs], name, len);
    p->refs[p->n_refs][len] = '\0';
    p->n_refs++;
    return 0;
}

/* Splits a value template into literal and secret parts; refuses controls and bad references. */
static int parse_value(struct policy *p, struct policy_inject *r, const char *v, const char **why)
{
    static const struct {
        const char *open, *close;
    } syntax[] = { { "{{secret:", "}}" }, { "${e2b.secrets.", "}" } };
    size_t n = strlen(v), names = 0;

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];

        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            *why = "control character (CR, LF, ...) in value";
            return -EINVAL;
        }
    }
    r->parts = calloc(n + 1, sizeof(*r->parts));
    r->names = malloc(n + 1);
    if (!r->parts || !r->names) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < n;) {
        size_t k, start = i, end = n;

        /* The next reference, if any. */
        for (k = 0; k < ARRAY_SIZE(syntax); k++) {
            const char *at = strstr(v + i, syntax[k].open);

            if (at && (size_t)(at - v) < end) {
                end = (size_t)(at - v);
            }
        }
        if (end > start) {
            r->parts[r->n_parts++] = (struct policy_inject_part){ false, v + start, end - start };
            i = end;
            continue;
        }
        for (k = 0; k < ARRAY_SIZE(syntax); k++) {
            if (strncmp(v + i, syntax[k].open, strlen(syntax[k].open)) == 0) {
                break;
            }
        }
        const char *name = v + i + strlen(syntax[k].open);
        const char *close = strstr(name, syntax[k].close);
        size_t len = close ? (size_t)(close - name) : 0;
        char buf[POLICY_SECRET_NAME_MAX + 1];

        if (!close || len == 0 || len > POLICY_SECRET_NAME_MAX) {
            *why = "invalid secret reference (NAME is [A-Za-z0-9_-]{1,64})";
            return -EINVAL;
        }
        memcpy(buf, name, len);
        buf[len] = '\0';
        if (!policy_secret_name_ok(buf)) {
            *why = "invalid secret reference (NAME is [A-Za-z0-9_-]{1,64})";
            return -EINVAL;
        }
        if (add_ref(p, buf, len) < 0) {
            *why = "more than 64 distinct secrets";
            return -EINVAL;
        }
        memcpy(r->names + names, buf, len + 1);
        r->parts[r->n_parts++] = (struct policy_inject_part){ true, r->names + names, len };
        names += len + 1;
        i = (size_t)(close - v) + strlen(syntax[k].close);
    }
    return 0;
}

static const char *string_field(const json_t *o, const char *key, size_t max, const char **why)
{
    const json_t *v = json_object_get(o, key);

    if (!v) {
        return NULL;
    }
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
        *why = "must be a string without NUL bytes";
        return "";
    }
    if (json_string_length(v) > max) {
        *why = "too long";
        return "";
    }
    return json_string_value(v);
}

static int parse_rule(struct policy *p, const json_t *o, struct policy_inject *r, const char **what,
                      const char **why)
{
    const char *key, *s;
    json_t *v;
    int k;

    if (!json_is_object(o)) {
        *what = "";
        *why = "must be an object";
        return -EINVAL;
    }
    json_object_foreach ((json_t *)o, key, v) {
        static const char *const known[] = { "host",  "method",    "pathPrefix",    "header",
                                             "value", "expiresAt", "ratePerMinute", "plainHttp" };
        bool ok = false;

        for (size_t i = 0; i < ARRAY_SIZE(known); i++) {
            ok = ok || strcmp(key, known[i]) == 0;
        }
        if (!ok) {
            *what = key;
            *why = "unknown field";
            return -EINVAL;
        }
    }

    *what = "host";
    *why = NULL;
    s = string_field(o, "host", POLICY_ENTRY_TEXT_MAX, why);
    if (*why) {
        return -EINVAL;
    }
    if (!s) {
        *why = "missing";
        return -EINVAL;
    }
    if (parse_entry(s, true, &r->host, why) < 0) {
        return -EINVAL;
    }
    if ((r->host.kind != ENTRY_NAME && r->host.kind != ENTRY_WILDCARD) || r->host.n_ports > 0) {
        *why = "must be a host name or a \"*.\" wildcard, without a port";
        return -EINVAL;
    }

    *what = "method";
    s = string_field(o, "method", POLICY_INJECT_METHOD_MAX, why);
    if (*why) {
        return -EINVAL;
    }
    if (s) {
        if (*s == '\0') {
            *why = "empty";
            return -EINVAL;
        }
        for (const char *c = s; *c; c++) {
            if (!tchar(*c) || (*c >= 'a' && *c <= 'z')) {
                *why = "must be an uppercase token (GET, POST, ...)";
                return -EINVAL;
            }
        }
        snprintf(r->method, sizeof(r->method), "%s", s);
    }

    *what = "pathPrefix";
    s = string_field(o, "pathPrefix", POLICY_INJECT_PATH_MAX, why);
    if (*why) {
        return -EINVAL;
    }
    if (s) {
        if (s[0] != '/') {
            *why = "must start with \"/\"";
            return -EINVAL;
        }
        for (const char *c = s; *c; c++) {
            if ((unsigned char)*c <= 0x20 || *c == 0x7f || *c == '#') {
                *why = "no spaces, controls or \"#\"";
                return -EINVAL;
            }
        }
        r->path_prefix = strdup(s);
        if (!r->path_prefix) {
            return -ENOMEM;
        }
    }

    *what = "header";
    s = string_field(o, "header", POLICY_INJECT_HEADER_MAX, why);
    if (*why) {
        return -EINVAL;
    }
    if (!s || *s == '\0') {
        *why = "missing";
        return -EINVAL;
    }
    for (const char *c = s; *c; c++) {
        if (!tchar(*c)) {
            *why = "not a valid header name (RFC 7230 token)";
            return -EINVAL;
        }
    }
    if (header_forbidden(s)) {
        *why = "hop-by-hop, Host and framing headers cannot be injected";
        return -EINVAL;
    }
    snprintf(r->header, sizeof(r->header), "%s", s);

    *what = "value";
    s = string_field(o, "value", POLICY_INJECT_VALUE_MAX, why);
    if (*why) {
        return -EINVAL;
    }
    if (!s) {
        *why = "missing";
        return -EINVAL;
    }
    r->value = strdup(s);
    if (!r->value) {
        return -ENOMEM;
    }
    k = parse_value(p, r, r->value, why);
    if (k < 0) {
        return k;
    }

    *what = "expiresAt";
    s = string_field(o, "expiresAt", 64, why);
    if (*why) {
        return -EINVAL;
    }
    if (s) {
        if (parse_rfc3339(s, &r->expires_usec) < 0) {
            *why = "must be an RFC 3339 time (2026-12-03T00:00:00Z)";
            return -EINVAL;
        }
        r->expires_text = strdup(s);
        if (!r->expires_text) {
            return -ENOMEM;
        }
    }

    *what = "ratePerMinute";
    v = json_object_get(o, "ratePerMinute");
    if (v) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > POLICY_INJECT_RATE_MAX) {
            *why = "must be an integer from 1 to 1000000";
            return -EINVAL;
        }
        r->rate = (unsigned)json_integer_value(v);
    }

    *what = "plainHttp";
    v = json_object_get(o, "plainHttp");
    if (v) {
        if (!json_is_boolean(v)) {
            *why = "must be a boolean";
            return -EINVAL;
        }
        r->plain_http = json_is_true(v);
    }
    return 0;
}

static int parse_inject(const json_t *arr, struct policy *p, struct policy_error *err)
{
    size_t n;

    if (!json_is_array(arr)) {
        set_error(err, "inject: must be an array of rules");
        return -EINVAL;
    }
    n = json_array_size(arr);
    if (n > POLICY_INJECT_MAX) {
        set_error(err, "inject: more than %d rules", POLICY_INJECT_MAX);
        return -EINVAL;
    }
    p->inject = calloc(n ? n : 1, sizeof(*p->inject));
    p->refs = calloc(POLICY_SECRETS_MAX, sizeof(*p->refs));
    if (!p->inject || !p->refs) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const char *what = "", *why = "invalid rule";
        int r = parse_rule(p, json_array_get(arr, i), &p->inject[i], &what, &why);

        p->n_inject = i + 1; /* what parse_rule() allocated is freed with the policy */
        if (r == -ENOMEM) {
            return r;
        }
        if (r < 0) {
            set_error(err, "inject[%zu]%s%.64s: %s", i, what[0] ? "." : "", what, why);
            return r;
        }
    }
    return 0;
}

static int parse_secrets(const json_t *o, struct policy *p, struct policy_error *err)
{
    const char *key;
    json_t *v;
    size_t i = 0;

    if (!json_is_object(o)) {
        set_error(err, "secrets: must be an object of sealed values");
        return -EINVAL;
    }
    if (json_object_size(o) > POLICY_SECRETS_MAX) {
        set_error(err, "secrets: more than %d entries", POLICY_SECRETS_MAX);
        return -EINVAL;
    }
    p->secrets = calloc(json_object_size(o) + 1, sizeof(*p->secrets));
    if (!p->secrets) {
        return -ENOMEM;
    }
    p->has_secrets = true;
    json_object_foreach ((json_t *)o, key, v) {
        const char *s = json_is_string(v) ? json_string_value(v) : NULL;

        if (!policy_secret_name_ok(key)) {
            set_error(err, "secrets.%.64s: invalid name (NAME is [A-Za-z0-9_-]{1,64})", key);
            return -EINVAL;
        }
        if (!s || strlen(s) != json_string_length(v) ||
            strncmp(s, SEALED_SECRET_PREFIX, strlen(SEALED_SECRET_PREFIX)) != 0 ||
            strlen(s) > SEALED_SECRET_MAX_SEALED) {
            set_error(err, "secrets.%s: must be a sealed value (\"s1....\")", key);
            return -EINVAL;
        }
        snprintf(p->secrets[i].name, sizeof(p->secrets[i].name), "%s", key);
        p->secrets[i].sealed = strdup(s);
        if (!p->secrets[i].sealed) {
            return -ENOMEM;
        }
        p->n_secrets = ++i;
    }
    return 0;
}

/* May traffic to the rule's host leave at all? An allow entry covers it, or the internet
 * default does (and no deny entry names it). The gateway's checks still run per request. */
static bool rule_host_allowed(const struct policy *p, const struct entry *h)
{
    for (size_t i = 0; i < p->n_allow; i++) {
        const struct entry *a = &p->allow[i];

        if (h->kind == ENTRY_NAME && name_matches(a, h->name)) {
            return true;
        }
        if (h->kind == ENTRY_WILDCARD && a->kind == ENTRY_WILDCARD) {
            size_t n = strlen(h->name), s = strlen(a->name);

            if (strcmp(h->name, a->name) == 0 ||
                (n > s + 1 && h->name[n - s - 1] == '.' && strcmp(h->name + n - s, a->name) == 0)) {
                return true;
            }
        }
    }
    if (!p->names_default) {
        return false;
    }
    for (size_t i = 0; i < p->n_deny; i++) {
        if (h->kind == ENTRY_NAME && name_matches(&p->deny[i], h->name)) {
            return false;
        }
    }
    return true;
}

/* Is b's suffix a (or below a), "x.test" vs "test"? */
static bool suffix_within(const char *b, const char *a)
{
    size_t n = strlen(b), s = strlen(a);

    return strcmp(a, b) == 0 || (n > s + 1 && b[n - s - 1] == '.' && strcmp(b + n - s, a) == 0);
}

/* Could one name match both entries (names and "*." wildcards)? */
static bool entries_overlap(const struct entry *a, const struct entry *b)
{
    if (a->kind == ENTRY_NAME && b->kind == ENTRY_NAME) {
        return strcmp(a->name, b->name) == 0;
    }
    if (a->kind == ENTRY_NAME) {
        return name_matches(b, a->name);
    }
    if (b->kind == ENTRY_NAME) {
        return name_matches(a, b->name);
    }
    return suffix_within(a->name, b->name) || suffix_within(b->name, a->name);
}

/* After every field: the rules' hosts against the lists, the references against the map. */
static int check_inject(const struct policy *p, bool with_secrets, struct policy_error *err)
{
    for (size_t i = 0; i < p->n_inject; i++) {
        const struct entry *h = &p->inject[i].host;

        for (size_t k = 0; k < p->n_passthrough; k++) {
            if (entries_overlap(h, &p->passthrough[k])) {
                set_error(err,
                          "inject[%zu].host: \"%s%s\" is also on the passthrough list, which "
                          "is never terminated: nothing could be injected there",
                          i, h->kind == ENTRY_WILDCARD ? "*." : "", h->name);
                return -EINVAL;
            }
        }

        if (!rule_host_allowed(p, h)) {
            set_error(err, "inject[%zu].host: \"%s%s\" is not allowed by this policy (allow it)", i,
                      h->kind == ENTRY_WILDCARD ? "*." : "", h->name);
            return -EINVAL;
        }
    }
    if (!with_secrets) {
        return 0;
    }
    for (size_t i = 0; i < p->n_refs; i++) {
        if (!policy_secret_sealed(p, p->refs[i])) {
            set_error(err, "secret \"%s\": referenced by a rule but not in \"secrets\"",
                      p->refs[i]);
            return -EINVAL;
        }
    }
    return 0;
}

int policy_parse_native(const json_t *json, bool with_secrets, struct policy **ret,
                        struct policy_error *err)
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
            } else if (strcmp(key, "inject") == 0) {
                r = parse_inject(v, p, err);
            } else if (strcmp(key, "secrets") == 0) {
                if (!with_secrets) {
                    set_error(err,
                              "secrets are not part of a policy; create them with /v1/secrets");
                    r = -EINVAL;
                } else {
                    r = parse_secrets(v, p, err);
                }
            } else {
                set_error(err, "%.64s: unknown field", key);
                r = -EINVAL;
            }
            if (r < 0) {
                break;
            }
        }
    }
    if (r >= 0) {
        finish(p);
        r = check_inject(p, with_secrets, err);
    }
    if (r < 0) {
        policy_free(p);
        return r;
    }
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

static json_t *render_inject(const struct policy *p)
{
    json_t *arr = json_array();

    for (size_t i = 0; arr && i < p->n_inject; i++) {
        const struct policy_inject *r = &p->inject[i];
        json_t *o = json_object();

        if (!o || json_array_append_new(arr, o) < 0 ||
            json_object_set_new(o, "host", render_entry(&r->host)) < 0 ||
            (r->method[0] && json_object_set_new(o, "method", json_string(r->method)) < 0) ||
            (r->path_prefix &&
             json_object_set_new(o, "pathPrefix", json_string(r->path_prefix)) < 0) ||
            json_object_set_new(o, "header", json_string(r->header)) < 0 ||
            json_object_set_new(o, "value", json_string(r->value)) < 0 ||
            (r->expires_text &&
             json_object_set_new(o, "expiresAt", json_string(r->expires_text)) < 0) ||
            (r->rate && json_object_set_new(o, "ratePerMinute", json_integer(r->rate)) < 0) ||
            (r->plain_http && json_object_set_new(o, "plainHttp", json_true()) < 0)) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static json_t *render_secrets(const struct policy *p)
{
    json_t *o = json_object();

    for (size_t i = 0; o && i < p->n_secrets; i++) {
        if (json_object_set_new(o, p->secrets[i].name, json_string(p->secrets[i].sealed)) < 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
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
             0) ||
        (p->n_inject > 0 && json_object_set_new(o, "inject", render_inject(p)) < 0) ||
        (p->has_secrets && json_object_set_new(o, "secrets", render_secrets(p)) < 0)) {
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

/* ---- injection rules, for the gateway ---- */

size_t policy_inject_count(const struct policy *p)
{
    return p ? p->n_inject : 0;
}

const struct policy_inject *policy_inject_get(const struct policy *p, size_t i)
{
    return p && i < p->n_inject ? &p->inject[i] : NULL;
}

const char *policy_inject_header(const struct policy_inject *r)
{
    return r->header;
}

size_t policy_inject_parts(const struct policy_inject *r, const struct policy_inject_part **ret)
{
    *ret = r->parts;
    return r->n_parts;
}

uint64_t policy_inject_expires_usec(const struct policy_inject *r)
{
    return r->expires_usec;
}

unsigned policy_inject_rate(const struct policy_inject *r)
{
    return r->rate;
}

bool policy_inject_plain_http(const struct policy_inject *r)
{
    return r->plain_http;
}

/* A path another parser could read differently from a plain prefix compare. */
static bool path_ambiguous(const char *target)
{
    size_t n = strcspn(target, "?#");

    for (size_t i = 0; i < n; i++) {
        const char *c = target + i;

        if (*c == '\\') {
            return true;
        }
        if (*c == '%' && i + 2 < n) {
            char a = c[1], b = (char)(c[2] | 0x20); /* hex digits: case does not matter */

            if ((a == '2' && (b == 'e' || b == 'f')) || (a == '5' && b == 'c')) {
                return true;
            }
        }
        if (*c == '/' && c[1] == '.') {
            size_t k = c[2] == '.' ? 3 : 2;

            if (i + k == n || c[k] == '/') {
                return true;
            }
        }
    }
    return false;
}

bool policy_inject_matches(const struct policy_inject *r, const char *host, const char *method,
                           const char *target)
{
    if (!r || !host || !method || !target || !name_matches(&r->host, host)) {
        return false;
    }
    if (r->method[0] && strcmp(r->method, method) != 0) {
        return false;
    }
    if (r->path_prefix) {
        if (target[0] != '/' || path_ambiguous(target) ||
            strncmp(target, r->path_prefix, strlen(r->path_prefix)) != 0) {
            return false;
        }
    }
    return true;
}

size_t policy_secret_ref_count(const struct policy *p)
{
    return p ? p->n_refs : 0;
}

const char *policy_secret_ref(const struct policy *p, size_t i)
{
    return p && i < p->n_refs ? p->refs[i] : NULL;
}

const char *policy_secret_sealed(const struct policy *p, const char *name)
{
    for (size_t i = 0; p && name && i < p->n_secrets; i++) {
        if (strcmp(p->secrets[i].name, name) == 0) {
            return p->secrets[i].sealed;
        }
    }
    return NULL;
}
