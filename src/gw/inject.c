/*
 * Credential injection (inject.h has the rules): the opened secrets of one
 * policy, a rate bucket per rule, and the request head rewrite.
 */
#include "gw/inject.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "basic/macro.h"
#include "gw/resolved.h"
#include "gw/sandbox.h"
#include "shared/sealed-secret.h"

struct opened {
    char name[POLICY_SECRET_NAME_MAX + 1];
    uint8_t *value;
    size_t len;
};

struct bucket {
    double tokens;
    usec_t at;
};

struct inject {
    struct opened *secrets;
    size_t n_secrets;
    struct bucket *buckets; /* one per rule, policy_inject_get() order */
    size_t n_rules;
};

struct inject *inject_free(struct inject *in)
{
    if (!in) {
        return NULL;
    }
    for (size_t i = 0; i < in->n_secrets; i++) {
        if (in->secrets[i].value) {
            explicit_bzero(in->secrets[i].value, in->secrets[i].len);
            free(in->secrets[i].value);
        }
    }
    free(in->secrets);
    free(in->buckets);
    free(in);
    return NULL;
}

/* A header value takes visible bytes, spaces and tabs (RFC 9110 5.5), nothing that ends a line. */
static bool header_safe(const uint8_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if ((v[i] < 0x20 && v[i] != '\t') || v[i] == 0x7f) {
            return false;
        }
    }
    return true;
}

int inject_new(EVP_PKEY *key, const struct policy *p, struct inject **ret, char *err,
               size_t err_size)
{
    size_t n_refs = policy_secret_ref_count(p), n_rules = policy_inject_count(p);
    struct inject *in;
    int r;

    *ret = NULL;
    if (n_rules == 0 && n_refs == 0) {
        return 0;
    }
    in = calloc(1, sizeof(*in));
    if (!in) {
        return -ENOMEM;
    }
    in->secrets = calloc(n_refs ? n_refs : 1, sizeof(*in->secrets));
    in->buckets = calloc(n_rules ? n_rules : 1, sizeof(*in->buckets));
    in->n_rules = n_rules;
    if (!in->secrets || !in->buckets) {
        inject_free(in);
        return -ENOMEM;
    }
    /* Only what the rules reference: a value nothing uses is never opened. */
    for (size_t i = 0; i < n_refs; i++) {
        const char *name = policy_secret_ref(p, i);
        const char *sealed = policy_secret_sealed(p, name);
        struct opened *o = &in->secrets[i];

        if (!key) {
            snprintf(err, err_size, "secret \"%s\": this gateway has no secrets key", name);
            inject_free(in);
            return -ENOKEY;
        }
        /* policy_parse_native(with_secrets) made sure the map covers every reference. */
        r = sealed ? sealed_secret_open(key, name, sealed, &o->value, &o->len) : -EBADMSG;
        in->n_secrets = i + 1;
        if (r < 0) {
            snprintf(err, err_size, "secret \"%s\": %s", name,
                     r == -EKEYREJECTED ? "sealed to another gateway's key"
                     : r == -EBADMSG    ? "does not open (malformed, tampered or another name)"
                                        : strerror(-r));
            inject_free(in);
            return r;
        }
        snprintf(o->name, sizeof(o->name), "%s", name);
        if (!header_safe(o->value, o->len)) {
            snprintf(err, err_size,
                     "secret \"%s\": its value has control characters (CR, LF, NUL...) and "
                     "cannot go in a header",
                     name);
            inject_free(in);
            return -EINVAL;
        }
    }
    for (size_t i = 0; i < n_rules; i++) {
        in->buckets[i].tokens = -1; /* full at first use */
    }
    *ret = in;
    return 0;
}

static const struct opened *find_secret(const struct inject *in, const char *name)
{
    for (size_t i = 0; in && i < in->n_secrets; i++) {
        if (strcmp(in->secrets[i].name, name) == 0) {
            return &in->secrets[i];
        }
    }
    return NULL;
}

/* Token bucket: rate per minute, burst = rate. Takes one token; false when there is none. */
static bool bucket_take(struct bucket *b, unsigned rate, usec_t now)
{
    double per_usec = (double)rate / (60.0 * (double)USEC_PER_SEC);

    if (b->tokens < 0) {
        b->tokens = rate;
    } else if (now > b->at) {
        b->tokens += (double)(now - b->at) * per_usec;
        if (b->tokens > rate) {
            b->tokens = rate;
        }
    }
    b->at = now;
    if (b->tokens < 1) {
        return false;
    }
    b->tokens -= 1;
    return true;
}

static bool field_is(const char *line, size_t n, const char *name)
{
    size_t k = strlen(name);

    return n > k && line[k] == ':' && strncasecmp(line, name, k) == 0;
}

/* The rule's value with the secrets in: appended to out as "Header: value\r\n". */
static int append_field(struct inject *in, const struct policy_inject *r, struct strbuf *out,
                        struct strbuf *names)
{
    const struct policy_inject_part *parts;
    size_t n = policy_inject_parts(r, &parts);
    int k = strbuf_appendf(out, "%s: ", policy_inject_header(r));

    for (size_t i = 0; k >= 0 && i < n; i++) {
        if (!parts[i].secret) {
            k = strbuf_append(out, parts[i].text, parts[i].len);
            continue;
        }
        const struct opened *o = find_secret(in, parts[i].text);
        if (!o) {
            return -ENOKEY; /* inject_new() opened every reference: cannot happen */
        }
        k = strbuf_append(out, o->value, o->len);
        /* names is ",a,b,": the audit names each secret once. */
        char tagged[POLICY_SECRET_NAME_MAX + 3];
        snprintf(tagged, sizeof(tagged), ",%s,", o->name);
        if (k >= 0 && !strstr(names->buf, tagged)) {
            k = strbuf_appendf(names, "%s,", o->name);
        }
    }
    return k < 0 ? k : strbuf_appends(out, "\r\n");
}

/* The distinct secret names of one rule's value, comma-joined (NULL: none, or OOM). */
static char *rule_names(const struct policy_inject *r)
{
    const struct policy_inject_part *parts;
    size_t n = policy_inject_parts(r, &parts);
    struct strbuf sb = STRBUF_INIT;

    for (size_t i = 0; i < n; i++) {
        char tagged[POLICY_SECRET_NAME_MAX + 3];

        snprintf(tagged, sizeof(tagged), ",%s,", parts[i].text);
        if (parts[i].secret && (sb.len == 0 || !strstr(sb.buf, tagged))) {
            if (strbuf_appendf(&sb, "%s%s,", sb.len ? "" : ",", parts[i].text) < 0) {
                strbuf_release(&sb);
                return NULL;
            }
        }
    }
    if (sb.len < 2) {
        strbuf_release(&sb);
        return NULL;
    }
    sb.buf[sb.len - 1] = '\0';
    char *s = strdup(sb.buf + 1);
    strbuf_release(&sb);
    return s;
}

/* Wipes a buffer that held secret values, then frees it. */
static void strbuf_wipe(struct strbuf *sb)
{
    if (sb->buf) {
        explicit_bzero(sb->buf, sb->alloc);
    }
    strbuf_release(sb);
}

int inject_rewrite(struct inject *in, const struct inject_request *rq, struct strbuf *head,
                   char **ret_names, const char **ret_reason)
{
    size_t n_rules = policy_inject_count(rq->policy);
    const struct policy_inject *fire[POLICY_INJECT_MAX];
    size_t n_fire = 0;
    char method[POLICY_INJECT_METHOD_MAX + 2], *target = NULL;
    struct strbuf out = STRBUF_INIT, names = STRBUF_INIT;
    int r = 0;

    free(*ret_names);
    *ret_names = NULL;
    *ret_reason = NULL;
    if (n_rules == 0) {
        return 0;
    }
    /* A method longer than any rule's matches none of them. */
    snprintf(method, sizeof(method), "%.*s", (int)MIN(rq->method.n, sizeof(method) - 1),
             rq->method.p ? rq->method.p : "");
    target = strndup(rq->target.p ? rq->target.p : "", rq->target.n);
    if (!target) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < n_rules; i++) {
        const struct policy_inject *rule = policy_inject_get(rq->policy, i);
        uint64_t expires = policy_inject_expires_usec(rule);
        bool dup = false;

        if (!policy_inject_matches(rule, rq->host, method, target)) {
            continue;
        }
        if (expires && rq->realtime >= expires) {
            continue; /* gone */
        }
        if (rq->sni ? strcmp(rq->sni, rq->host) != 0 : !policy_inject_plain_http(rule)) {
            *ret_reason = rq->sni ? "inject-host-mismatch" : "inject-plain-http";
            r = -EACCES;
            goto out;
        }
        if (!resolved_has(rq->resolved, rq->host, rq->dst.s_addr, rq->now)) {
            *ret_reason = "inject-unattributed";
            r = -EACCES;
            goto out;
        }
        for (size_t k = 0; k < n_fire; k++) {
            dup = dup || strcasecmp(policy_inject_header(fire[k]), policy_inject_header(rule)) == 0;
        }
        if (dup) {
            continue; /* the first rule for a header wins */
        }
        if (in && policy_inject_rate(rule) &&
            !bucket_take(&in->buckets[i], policy_inject_rate(rule), rq->now)) {
            *ret_reason = "inject-rate-limit";
            *ret_names = rule_names(rule); /* the record says whose limit it was */
            r = -EDQUOT;
            goto out;
        }
        fire[n_fire++] = rule;
    }
    if (n_fire == 0) {
        goto out;
    }
    if (!in) {
        *ret_reason = "inject-no-secrets";
        r = -EACCES;
        goto out;
    }

    /* The request line, then every field but the ones replaced, then the new ones. */
    strbuf_init(&out, HTTP1_HEAD_MAX);
    const char *p = head->buf, *end = head->buf + head->len;
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol || head->len < 4 || memcmp(end - 4, "\r\n\r\n", 4) != 0) {
        r = -EINVAL; /* not a head the gateway wrote: never */
        goto out;
    }
    r = strbuf_append(&out, p, (size_t)(eol + 1 - p));
    for (p = eol + 1; r >= 0 && p < end - 2; p = eol + 1) {
        bool drop = false;

        eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) {
            break;
        }
        for (size_t k = 0; k < n_fire && !drop; k++) {
            drop = field_is(p, (size_t)(eol - p), policy_inject_header(fire[k]));
        }
        if (!drop) {
            r = strbuf_append(&out, p, (size_t)(eol + 1 - p));
        }
    }
    if (r >= 0) {
        r = strbuf_appends(&names, ",");
    }
    for (size_t k = 0; r >= 0 && k < n_fire; k++) {
        r = append_field(in, fire[k], &out, &names);
    }
    if (r >= 0) {
        r = strbuf_appends(&out, "\r\n");
    }
    if (r < 0) {
        *ret_reason = r == -E2BIG ? "head-too-large" : "inject-failed";
        goto out;
    }
    strbuf_release(head); /* the guest's head: nothing of ours in it */
    *head = out;
    out = (struct strbuf)STRBUF_INIT;
    if (names.len > 2) {
        names.buf[names.len - 1] = '\0'; /* ",a,b," -> "a,b" */
        *ret_names = strdup(names.buf + 1);
        if (!*ret_names) {
            r = -ENOMEM;
            goto out;
        }
    }
    r = 1;
out:
    strbuf_wipe(&out);
    strbuf_release(&names);
    free(target);
    return r;
}

int inject_request(struct sandbox *sb, const char *sni, const char *host,
                   const struct http1_request *req, struct in_addr dst, struct strbuf *head,
                   char **ret_names, const char **ret_reason)
{
    struct inject_request rq = {
        .policy = sb->policy,
        .resolved = sb->resolved,
        .sni = sni,
        .host = host,
        .method = req->method,
        .target = req->target,
        .dst = dst,
        .now = now_monotonic(),
        .realtime = now_realtime(),
    };
    int r = inject_rewrite(sb->inject, &rq, head, ret_names, ret_reason);

    if (r >= 0) {
        return 0;
    }
    if (!*ret_reason) {
        *ret_reason = "inject-failed";
    }
    return r == -EACCES ? 403 : r == -EDQUOT ? 429 : r == -E2BIG ? 431 : 500;
}

const char *inject_phrase(int status)
{
    switch (status) {
    case 403:
        return "Forbidden";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    default:
        return "Internal Server Error";
    }
}
