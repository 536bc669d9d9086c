/*
 * Unit tests for credential injection (inject.h): secrets opened with a real
 * key (and refused when they do not open), then request heads rewritten by
 * the rules: replaced fields, literal placeholders from the guest, the
 * host/method/path scope, plain HTTP, attribution, expiry, rate, names.
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "basic/strbuf.h"
#include "gw/inject.h"
#include "gw/resolved.h"
#include "shared/sealed-secret.h"

#define TOKEN "ghp_s3cr3t_T0KEN"
#define NOW (1000 * USEC_PER_SEC)
#define REALTIME ((usec_t)1796256000 * USEC_PER_SEC - USEC_PER_SEC) /* 2026-12-02T23:59:59Z */

static EVP_PKEY *key, *other_key;
static struct resolved *resolved;

static int setup(void **state)
{
    (void)state;
    key = EVP_PKEY_Q_keygen(NULL, NULL, "X25519");
    other_key = EVP_PKEY_Q_keygen(NULL, NULL, "X25519");
    assert_non_null(key);
    assert_non_null(other_key);
    assert_int_equal(resolved_new(0, &resolved), 0);
    assert_int_equal(resolved_add(resolved, "api.example.test", inet_addr("198.18.1.10"),
                                  NOW + 60 * USEC_PER_SEC),
                     0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    EVP_PKEY_free(key);
    EVP_PKEY_free(other_key);
    resolved = resolved_free(resolved);
    return 0;
}

static char *seal(EVP_PKEY *k, const char *name, const char *value)
{
    char *s = NULL;
    assert_int_equal(sealed_secret_seal(k, name, value, strlen(value), &s), 0);
    return s;
}

/* A policy from text with "%s" replaced by the "secrets" map (each "NAME=VALUE" sealed). */
static struct policy *policy_with(const char *rules, const char *const *secrets, EVP_PKEY *k)
{
    struct strbuf sb = STRBUF_INIT, map = STRBUF_INIT;
    struct policy_error err = {};
    struct policy *p = NULL;

    strbuf_appends(&map, "{");
    for (size_t i = 0; secrets && secrets[i]; i++) {
        const char *eq = strchr(secrets[i], '=');
        char name[80];
        snprintf(name, sizeof(name), "%.*s", (int)(eq - secrets[i]), secrets[i]);
        char *s = seal(k, name, eq + 1);
        strbuf_appendf(&map, "%s\"%s\": \"%s\"", i ? "," : "", name, s);
        free(s);
    }
    strbuf_appends(&map, "}");
    strbuf_appendf(&sb,
                   "{\"allow\": [\"api.example.test\", \"198.18.0.0/15\"], \"inject\": [%s],"
                   " \"secrets\": %s}",
                   rules, map.buf);
    json_t *j = json_loads(sb.buf, 0, NULL);
    assert_non_null(j);
    if (policy_parse_native(j, true, &p, &err) < 0) {
        fail_msg("policy: %s (%s)", err.message, sb.buf);
    }
    json_decref(j);
    strbuf_release(&sb);
    strbuf_release(&map);
    return p;
}

static const char *const gh[] = { "gh=" TOKEN, NULL };
#define GH_RULE                                                                                    \
    "{\"host\": \"api.example.test\", \"header\": \"Authorization\","                              \
    " \"value\": \"Bearer {{secret:gh}}\"}"

struct result {
    int r;
    char head[4096];
    char *names;
    const char *reason;
};

/* Runs the rules on a head "METHOD TARGET HTTP/1.1\r\nHost: HOST\r\n<extra>\r\n". */
static struct result run(struct inject *in, const struct policy *p, const char *sni,
                         const char *host, const char *dst, const char *method, const char *target,
                         const char *extra, usec_t realtime)
{
    struct result res = {};
    struct strbuf head = STRBUF_INIT;
    struct inject_request rq = {
        .policy = p,
        .resolved = resolved,
        .sni = sni,
        .host = host,
        .method = { method, strlen(method) },
        .target = { target, strlen(target) },
        .now = NOW,
        .realtime = realtime ? realtime : REALTIME,
    };
    rq.dst.s_addr = inet_addr(dst);
    strbuf_appendf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", method, target, host, extra);
    res.r = inject_rewrite(in, &rq, &head, &res.names, &res.reason);
    snprintf(res.head, sizeof(res.head), "%s", head.buf);
    strbuf_release(&head);
    return res;
}

static unsigned count(const char *hay, const char *needle)
{
    unsigned n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++) {
        n++;
    }
    return n;
}

static void test_open(void **state)
{
    struct inject *in = NULL;
    char err[INJECT_ERROR_MAX] = "";
    struct policy *p = policy_with(GH_RULE, gh, key);

    assert_int_equal(inject_new(key, p, &in, err, sizeof(err)), 0);
    assert_non_null(in);
    in = inject_free(in);
    /* Another gateway's key, no key. */
    assert_int_equal(inject_new(other_key, p, &in, err, sizeof(err)), -EKEYREJECTED);
    assert_string_equal(err, "secret \"gh\": sealed to another gateway's key");
    assert_null(in);
    assert_int_equal(inject_new(NULL, p, &in, err, sizeof(err)), -ENOKEY);
    assert_string_equal(err, "secret \"gh\": this gateway has no secrets key");
    policy_free(p);

    /* Sealed under another name: moved from "other" to "gh". */
    char *s = seal(key, "other", TOKEN), text[1024];
    snprintf(text, sizeof(text),
             "{\"allow\": [\"api.example.test\"], \"inject\": [" GH_RULE "],"
             " \"secrets\": {\"gh\": \"%s\"}}",
             s);
    free(s);
    json_t *j = json_loads(text, 0, NULL);
    struct policy_error perr;
    assert_int_equal(policy_parse_native(j, true, &p, &perr), 0);
    json_decref(j);
    assert_int_equal(inject_new(key, p, &in, err, sizeof(err)), -EBADMSG);
    assert_string_equal(err, "secret \"gh\": does not open (malformed, tampered or another name)");
    policy_free(p);

    /* A value that would end the header line. */
    const char *crlf[] = { "gh=a\r\nX-Evil: 1", NULL };
    p = policy_with(GH_RULE, crlf, key);
    assert_int_equal(inject_new(key, p, &in, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "secret \"gh\": its value has control characters (CR, LF, NUL...) "
                             "and cannot go in a header");
    policy_free(p);

    /* No rules, no secrets: no state. */
    p = policy_with("", NULL, key);
    in = (struct inject *)1;
    assert_int_equal(inject_new(key, p, &in, err, sizeof(err)), 0);
    assert_null(in);
    policy_free(p);
}

static void test_rewrite(void **state)
{
    struct inject *in = NULL;
    char err[INJECT_ERROR_MAX];
    struct policy *p = policy_with(GH_RULE, gh, key);
    struct result r;

    assert_int_equal(inject_new(key, p, &in, err, sizeof(err)), 0);
    /* The guest's copies (two of them, any case) go; one field of ours comes. */
    r = run(in, p, "api.example.test", "api.example.test", "198.18.1.10", "GET", "/user",
            "authorization: Bearer guess\r\nAccept: */*\r\nAUTHORIZATION: x\r\n", 0);
    assert_int_equal(r.r, 1);
    assert_string_equal(r.head, "GET /user HTTP/1.1\r\nHost: api.example.test\r\n"
                                "Accept: */*\r\nAuthorization: Bearer " TOKEN "\r\n\r\n");
    assert_string_equal(r.names, "gh");
    free(r.names);
    /* Without a field from the guest. */
    r = run(in, p, "api.example.test", "api.example.test", "198.18.1.10", "POST", "/", "", 0);
    assert_int_equal(r.r, 1);
    assert_int_equal(count(r.head, TOKEN), 1);
    free(r.names);
    /* "Authorization-Extra" is another field: kept. */
    r = run(in, p, "api.example.test", "api.example.test", "198.18.1.10", "GET", "/",
            "Authorization-Extra: {{secret:gh}}\r\n", 0);
    assert_int_equal(r.r, 1);
    assert_non_null(strstr(r.head, "Authorization-Extra: {{secret:gh}}\r\n"));
    free(r.names);

    /* Another host: no rule, head untouched, and a guest placeholder stays literal. */
    r = run(in, p, "other.test", "other.test", "198.18.1.10", "GET", "/",
            "Authorization: Bearer {{secret:gh}}\r\nX-A: ${e2b.secrets.gh}\r\n", 0);
    assert_int_equal(r.r, 0);
    assert_null(r.names);
    assert_non_null(strstr(r.head, "Authorization: Bearer {{secret:gh}}\r\n"));
    assert_null(strstr(r.head, TOKEN));

    /* Plain HTTP to the rule's host: denied, never sent without the opt-in. */
    r = run(in, p, NULL, "api.example.test", "198.18.1.10", "GET", "/", "", 0);
    assert_int_equal(r.r, -EACCES);
    assert_string_equal(r.reason, "inject-plain-http");
    assert_null(strstr(r.head, TOKEN));
    /* A destination the DNS proxy did not give for that name (a CIDR entry allows it). */
    r = run(in, p, "api.example.test", "api.example.test", "198.18.1.11", "GET", "/", "", 0);
    assert_int_equal(r.r, -EACCES);
    assert_string_equal(r.reason, "inject-unattributed");
    /* SNI and Host differ (the gate denies it before; inject refuses on its own too). */
    r = run(in, p, "other.test", "api.example.test", "198.18.1.10", "GET", "/", "", 0);
    assert_int_equal(r.r, -EACCES);
    assert_string_equal(r.reason, "inject-host-mismatch");
    inject_free(in);
    policy_free(p);
}

static void test_scope(void **state)
{
    struct inject *in = NULL;
    char err[INJECT_ERROR_MAX];
    const char *const two[] = { "gh=" TOKEN, "k=K3Y", NULL };
    struct policy *p = policy_with(
        "{\"host\": \"api.example.test\", \"method\": \"POST\", \"pathPrefix\": \"/v1/\","
        " \"header\": \"Authorization\", \"value\": \"Bearer {{secret:gh}}\","
        " \"expiresAt\": \"2026-12-03T00:00:00Z\", \"plainHttp\": true},"
        "{\"host\": \"api.example.test\", \"header\": \"authorization\", \"value\": \"never\"},"
        "{\"host\": \"api.example.test\", \"header\": \"X-Key\","
        " \"value\": \"${e2b.secrets.k}/{{secret:gh}}/${e2b.secrets.k}\"}",
        two, key);
    struct result r;

    assert_int_equal(inject_new(key, p, &in, err, sizeof(err)), 0);
    r = run(in, p, "api.example.test", "api.example.test", "198.18.1.10", "POST", "/v1/x", "", 0);
    assert_int_equal(r.r, 1);
    assert_non_null(strstr(r.head, "\r\nAuthorization: Bearer " TOKEN "\r\n"));
    assert_null(strstr(r.head, "never")); /* the first rule for a header wins */
    assert_non_null(strstr(r.head, "\r\nX-Key: K3Y/" TOKEN "/K3Y\r\n"));
    assert_string_equal(r.names, "gh,k");
    free(r.names);
    /* Another method or path: the first rule is out, the second fires. */
    r = run(in, p, "api.example.test", "api.example.test", "198.18.1.10", "GET", "/v1/x", "", 0);
    assert_int_equal(r.r, 1);
    assert_non_null(strstr(r.head, "\r\nauthorization: never\r\n"));
    free(r.names);
    r = run(in, p, "api.example.test", "api.example.test", "198.18.1.10", "POST", "/v1/../x", "",
            0);
    assert_non_null(strstr(r.head, "\r\nauthorization: never\r\n"));
    free(r.names);
    /* Expired: the rule is gone. */
    r = run(in, p, "api.example.test", "api.example.test", "198.18.1.10", "POST", "/v1/x", "",
            (usec_t)1796256000 * USEC_PER_SEC);
    assert_int_equal(r.r, 1);
    assert_non_null(strstr(r.head, "\r\nauthorization: never\r\n"));
    free(r.names);
    /* Plain HTTP: the opt-in rule fires; the others (no opt-in) deny. */
    r = run(in, p, NULL, "api.example.test", "198.18.1.10", "POST", "/v1/x", "", 0);
    assert_int_equal(r.r, -EACCES);
    assert_string_equal(r.reason, "inject-plain-http");
    inject_free(in);
    policy_free(p);

    p = policy_with("{\"host\": \"api.example.test\", \"header\": \"A\", \"value\": "
                    "\"{{secret:gh}}\", \"plainHttp\": true}",
                    gh, key);
    assert_int_equal(inject_new(key, p, &in, err, sizeof(err)), 0);
    r = run(in, p, NULL, "api.example.test", "198.18.1.10", "GET", "/", "", 0);
    assert_int_equal(r.r, 1);
    assert_non_null(strstr(r.head, "\r\nA: " TOKEN "\r\n"));
    free(r.names);
    inject_free(in);
    policy_free(p);
}

static void test_rate(void **state)
{
    struct inject *in = NULL;
    char err[INJECT_ERROR_MAX];
    struct policy *p = policy_with("{\"host\": \"api.example.test\", \"header\": \"A\", \"value\": "
                                   "\"{{secret:gh}}\", \"ratePerMinute\": 3}",
                                   gh, key);
    struct result r;

    assert_int_equal(inject_new(key, p, &in, err, sizeof(err)), 0);
    for (int i = 0; i < 3; i++) {
        r = run(in, p, "api.example.test", "api.example.test", "198.18.1.10", "GET", "/", "", 0);
        assert_int_equal(r.r, 1);
        free(r.names);
    }
    r = run(in, p, "api.example.test", "api.example.test", "198.18.1.10", "GET", "/", "", 0);
    assert_int_equal(r.r, -EDQUOT);
    assert_string_equal(r.reason, "inject-rate-limit");
    assert_string_equal(r.names, "gh");
    free(r.names);
    assert_null(strstr(r.head, TOKEN));
    /* A request the rule does not cover is not counted, nor limited. */
    r = run(in, p, "other.test", "other.test", "198.18.1.10", "GET", "/", "", 0);
    assert_int_equal(r.r, 0);
    inject_free(in);
    policy_free(p);
}

static void test_too_large(void **state)
{
    struct inject *in = NULL;
    char err[INJECT_ERROR_MAX];
    char *big = malloc(SEALED_SECRET_MAX_VALUE + 4);
    memcpy(big, "gh=", 3);
    memset(big + 3, 'x', SEALED_SECRET_MAX_VALUE);
    big[SEALED_SECRET_MAX_VALUE + 3] = 0;
    const char *const s[] = { big, NULL };
    /* 4096-byte values of 16 KiB secrets, four of them: past HTTP1_HEAD_MAX. */
    struct strbuf rules = STRBUF_INIT;
    for (int i = 0; i < 5; i++) {
        strbuf_appendf(&rules,
                       "%s{\"host\": \"api.example.test\", \"header\": \"X-%d\", \"value\": "
                       "\"{{secret:gh}}\"}",
                       i ? "," : "", i);
    }
    struct policy *p = policy_with(rules.buf, s, key);
    struct result r;

    assert_int_equal(inject_new(key, p, &in, err, sizeof(err)), 0);
    r = run(in, p, "api.example.test", "api.example.test", "198.18.1.10", "GET", "/", "", 0);
    assert_int_equal(r.r, -E2BIG);
    assert_string_equal(r.reason, "head-too-large");
    assert_string_equal(inject_phrase(431), "Request Header Fields Too Large");
    inject_free(in);
    policy_free(p);
    strbuf_release(&rules);
    free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open), cmocka_unit_test(test_rewrite),   cmocka_unit_test(test_scope),
        cmocka_unit_test(test_rate), cmocka_unit_test(test_too_large),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
