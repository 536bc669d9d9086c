/*
 * Unit tests for the egress policy model: entry syntax, both JSON shapes,
 * precedence, wildcards, CIDR edges, ports, the forbidden set, the
 * ceiling and the test net.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <arpa/inet.h>
#include <cmocka.h>

#include "basic/macro.h"
#include "basic/strbuf.h"
#include "gw/policy.h"

static const struct policy_env env_internet = { .ceiling = POLICY_CEILING_INTERNET };

static struct policy *native(const char *text)
{
    json_t *j = json_loads(text, 0, NULL);
    struct policy *p = NULL;
    struct policy_error err = {};
    int r;

    assert_non_null(j);
    r = policy_parse_native(j, true, &p, &err);
    if (r < 0) {
        fail_msg("unexpected error for %s: %s", text, err.message);
    }
    json_decref(j);
    return p;
}

/* Parses an E2B create body {allow_internet_access?, network?}. */
static int e2b_create(const char *text, struct policy **ret, struct policy_error *err)
{
    json_t *j = json_loads(text, 0, NULL);
    int r;

    assert_non_null(j);
    r = policy_parse_e2b(json_object_get(j, "network"), json_object_get(j, "allow_internet_access"),
                         false, ret, err);
    json_decref(j);
    return r;
}

static struct policy *e2b(const char *text)
{
    struct policy *p = NULL;
    struct policy_error err = {};

    if (e2b_create(text, &p, &err) < 0) {
        fail_msg("unexpected error for %s: %s", text, err.message);
    }
    return p;
}

static enum policy_reason addr(const struct policy *p, const struct policy_env *env, const char *ip,
                               uint16_t port)
{
    struct in_addr a;

    assert_int_equal(inet_pton(AF_INET, ip, &a), 1);
    return policy_check_addr(p, env, AF_INET, &a, port);
}

static enum policy_reason name_addr(const struct policy *p, const struct policy_env *env,
                                    const char *name, const char *ip, uint16_t port)
{
    struct in_addr a;

    assert_int_equal(inet_pton(AF_INET, ip, &a), 1);
    return policy_check_name_addr(p, env, name, AF_INET, &a, port);
}

static void test_native_default_deny(void **state)
{
    struct policy *p = native("{}");
    struct policy_env test = env_internet;

    assert_int_equal(policy_check_name(p, &env_internet, "example.com", 0), POLICY_DENY_DEFAULT);
    policy_free(p);
    assert_int_equal(policy_parse_native(NULL, true, &p, NULL), 0);
    assert_int_equal(policy_check_name(p, &env_internet, "example.com", 443), POLICY_DENY_DEFAULT);
    assert_int_equal(policy_env_set_test_net(&test, "198.18.0.0/15"), 0);
    assert_int_equal(addr(p, &test, "198.18.0.1", 80), POLICY_DENY_DEFAULT);
    policy_free(p);

    p = native("{\"internet\": true}");
    assert_int_equal(policy_check_name(p, &env_internet, "example.com", 0), POLICY_ALLOW_INTERNET);
    assert_int_equal(addr(p, &env_internet, "8.8.8.8", 443), POLICY_ALLOW_INTERNET);
    assert_int_equal(addr(p, &test, "198.18.0.1", 80), POLICY_ALLOW_INTERNET);
    policy_free(p);
}

static void test_e2b_defaults(void **state)
{
    struct policy *p;
    json_t *j;

    /* absent = true, as the SDKs send */
    p = e2b("{}");
    assert_int_equal(policy_check_name(p, &env_internet, "pypi.org", 0), POLICY_ALLOW_INTERNET);
    j = policy_e2b_allow_internet(p);
    assert_true(json_is_null(j));
    json_decref(j);
    policy_free(p);

    p = e2b("{\"allow_internet_access\": true}");
    assert_int_equal(addr(p, &env_internet, "1.1.1.1", 443), POLICY_ALLOW_INTERNET);
    j = policy_e2b_allow_internet(p);
    assert_true(json_is_true(j));
    json_decref(j);
    policy_free(p);

    /* false = denyOut 0.0.0.0/0 */
    p = e2b("{\"allow_internet_access\": false}");
    assert_int_equal(policy_check_name(p, &env_internet, "pypi.org", 0), POLICY_DENY_DEFAULT);
    assert_int_equal(addr(p, &env_internet, "1.1.1.1", 443), POLICY_DENY_DEFAULT);
    j = policy_e2b_allow_internet(p);
    assert_true(json_is_false(j));
    json_decref(j);
    policy_free(p);

    /* false, but allowOut still lets the listed name and address through */
    p = e2b("{\"allow_internet_access\": false, \"network\": {\"allowOut\": [\"pypi.org\", "
            "\"1.1.1.0/24\"]}}");
    assert_int_equal(policy_check_name(p, &env_internet, "pypi.org", 0), POLICY_ALLOW_NAME);
    assert_int_equal(policy_check_name(p, &env_internet, "files.pypi.org", 0), POLICY_DENY_DEFAULT);
    assert_int_equal(addr(p, &env_internet, "1.1.1.1", 443), POLICY_ALLOW_CIDR);
    assert_int_equal(addr(p, &env_internet, "1.1.2.1", 443), POLICY_DENY_DEFAULT);
    policy_free(p);
}

static void test_precedence(void **state)
{
    /* The SDK's allow-list idiom: denyOut ALL_TRAFFIC plus allowOut. */
    struct policy *p = e2b("{\"network\": {\"allowOut\": [\"allowed.test\", \"8.8.8.8\"], "
                           "\"denyOut\": [\"0.0.0.0/0\"]}}");

    assert_int_equal(policy_check_name(p, &env_internet, "allowed.test", 0), POLICY_ALLOW_NAME);
    /* A 0.0.0.0/0 deny turns the internet default off for names too. */
    assert_int_equal(policy_check_name(p, &env_internet, "other.test", 0), POLICY_DENY_DEFAULT);
    /* allow wins over deny, for names and addresses */
    assert_int_equal(name_addr(p, &env_internet, "allowed.test", "1.2.3.4", 443),
                     POLICY_ALLOW_NAME);
    assert_int_equal(addr(p, &env_internet, "8.8.8.8", 53), POLICY_ALLOW_CIDR);
    assert_int_equal(addr(p, &env_internet, "8.8.4.4", 443), POLICY_DENY_CIDR);
    assert_int_equal(name_addr(p, &env_internet, "other.test", "1.2.3.4", 443), POLICY_DENY_CIDR);
    policy_free(p);

    /* internet with one range denied */
    p = e2b("{\"network\": {\"denyOut\": [\"1.2.3.0/24\"]}}");
    assert_int_equal(policy_check_name(p, &env_internet, "any.test", 0), POLICY_ALLOW_INTERNET);
    assert_int_equal(name_addr(p, &env_internet, "any.test", "1.2.3.4", 443), POLICY_DENY_CIDR);
    assert_int_equal(name_addr(p, &env_internet, "any.test", "1.2.4.4", 443),
                     POLICY_ALLOW_INTERNET);
    policy_free(p);

    /* native deny by name; an allow entry still wins over it */
    p = native("{\"internet\": true, \"deny\": [\"*.evil.test\", \"evil.test\"], "
               "\"allow\": [\"ok.evil.test\"]}");
    assert_int_equal(policy_check_name(p, &env_internet, "evil.test", 0), POLICY_DENY_NAME);
    assert_int_equal(policy_check_name(p, &env_internet, "a.evil.test", 0), POLICY_DENY_NAME);
    assert_int_equal(policy_check_name(p, &env_internet, "ok.evil.test", 0), POLICY_ALLOW_NAME);
    assert_int_equal(policy_check_name(p, &env_internet, "good.test", 0), POLICY_ALLOW_INTERNET);
    assert_int_equal(name_addr(p, &env_internet, "a.evil.test", "1.1.1.1", 443), POLICY_DENY_NAME);
    policy_free(p);
}

static void test_wildcards(void **state)
{
    struct policy *p = native("{\"allow\": [\"*.example.com\", \"Exact.Test.\"]}");

    assert_int_equal(policy_check_name(p, &env_internet, "www.example.com", 0), POLICY_ALLOW_NAME);
    assert_int_equal(policy_check_name(p, &env_internet, "a.b.c.example.com", 0),
                     POLICY_ALLOW_NAME);
    /* not the apex, not a name that merely ends the same */
    assert_int_equal(policy_check_name(p, &env_internet, "example.com", 0), POLICY_DENY_DEFAULT);
    assert_int_equal(policy_check_name(p, &env_internet, "badexample.com", 0), POLICY_DENY_DEFAULT);
    assert_int_equal(policy_check_name(p, &env_internet, "example.com.evil", 0),
                     POLICY_DENY_DEFAULT);
    /* exact entries are normalised: lowercase, trailing dot dropped */
    assert_int_equal(policy_check_name(p, &env_internet, "exact.test", 0), POLICY_ALLOW_NAME);
    assert_int_equal(policy_check_name(p, &env_internet, "www.exact.test", 0), POLICY_DENY_DEFAULT);
    /* checks take normalised names only */
    assert_int_equal(policy_check_name(p, &env_internet, "Exact.test", 0), POLICY_DENY_BAD_NAME);
    assert_int_equal(policy_check_name(p, &env_internet, "exact.test.", 0), POLICY_DENY_BAD_NAME);
    assert_int_equal(policy_check_name(p, &env_internet, "", 0), POLICY_DENY_BAD_NAME);
    assert_int_equal(policy_check_name(p, &env_internet, NULL, 0), POLICY_DENY_BAD_NAME);
    policy_free(p);
}

static void test_cidr_edges(void **state)
{
    struct policy *p = native("{\"allow\": [\"203.0.113.128/25\", \"8.8.8.8\", \"1.0.0.0/31\", "
                              "\"9.9.9.9/0\"], \"deny\": [\"9.0.0.0/8\"]}");
    struct policy_env test = env_internet;
    char nbuf[64];

    (void)nbuf;
    /* /0 allow covers everything public; the forbidden set still applies */
    assert_int_equal(addr(p, &env_internet, "9.1.1.1", 80), POLICY_ALLOW_CIDR);
    assert_int_equal(addr(p, &env_internet, "10.0.0.1", 80), POLICY_DENY_FORBIDDEN);
    policy_free(p);

    p = native("{\"allow\": [\"1.2.3.128/25\", \"8.8.8.8\", \"1.0.0.0/31\"]}");
    assert_int_equal(addr(p, &env_internet, "1.2.3.127", 80), POLICY_DENY_DEFAULT);
    assert_int_equal(addr(p, &env_internet, "1.2.3.128", 80), POLICY_ALLOW_CIDR);
    assert_int_equal(addr(p, &env_internet, "1.2.3.255", 80), POLICY_ALLOW_CIDR);
    assert_int_equal(addr(p, &env_internet, "1.2.4.0", 80), POLICY_DENY_DEFAULT);
    assert_int_equal(addr(p, &env_internet, "8.8.8.8", 80), POLICY_ALLOW_CIDR);
    assert_int_equal(addr(p, &env_internet, "8.8.8.9", 80), POLICY_DENY_DEFAULT);
    assert_int_equal(addr(p, &env_internet, "1.0.0.1", 80), POLICY_ALLOW_CIDR);
    assert_int_equal(addr(p, &env_internet, "1.0.0.2", 80), POLICY_DENY_DEFAULT);
    policy_free(p);

    /* host bits are cleared */
    p = native("{\"allow\": [\"198.18.1.1/15\"]}");
    assert_int_equal(policy_env_set_test_net(&test, "198.18.0.0/15"), 0);
    assert_int_equal(addr(p, &test, "198.19.255.255", 80), POLICY_ALLOW_CIDR);
    assert_int_equal(addr(p, &test, "198.20.0.0", 80), POLICY_DENY_DEFAULT);
    /* without the test net, 198.18/15 is forbidden like any benchmark range */
    assert_int_equal(addr(p, &env_internet, "198.18.0.1", 80), POLICY_DENY_FORBIDDEN);
    policy_free(p);
}

static void test_ports(void **state)
{
    struct policy *p = native("{\"allow\": [\"api.test:443\", \"web.test:80,443,8000-8100\", "
                              "\"1.1.1.1:53\", \"[2001:db8::1]:443\"]}");

    assert_int_equal(name_addr(p, &env_internet, "api.test", "1.2.3.4", 443), POLICY_ALLOW_NAME);
    assert_int_equal(name_addr(p, &env_internet, "api.test", "1.2.3.4", 80), POLICY_DENY_PORT);
    /* DNS has no port: the name resolves, the connection is checked later */
    assert_int_equal(policy_check_name(p, &env_internet, "api.test", 0), POLICY_ALLOW_NAME);
    assert_int_equal(policy_check_name(p, &env_internet, "api.test", 22), POLICY_DENY_PORT);
    assert_int_equal(name_addr(p, &env_internet, "web.test", "1.2.3.4", 8000), POLICY_ALLOW_NAME);
    assert_int_equal(name_addr(p, &env_internet, "web.test", "1.2.3.4", 8100), POLICY_ALLOW_NAME);
    assert_int_equal(name_addr(p, &env_internet, "web.test", "1.2.3.4", 8101), POLICY_DENY_PORT);
    assert_int_equal(name_addr(p, &env_internet, "web.test", "1.2.3.4", 7999), POLICY_DENY_PORT);
    assert_int_equal(addr(p, &env_internet, "1.1.1.1", 53), POLICY_ALLOW_CIDR);
    assert_int_equal(addr(p, &env_internet, "1.1.1.1", 853), POLICY_DENY_PORT);
    policy_free(p);
}

static void test_forbidden(void **state)
{
    static const char *const bad[] = {
        "0.0.0.0",         "0.255.255.255",  "10.0.0.1",        "10.255.255.255",  "100.64.0.1",
        "100.127.255.1",   "127.0.0.1",      "127.255.255.254", "169.254.169.254", "169.254.0.1",
        "172.16.0.1",      "172.31.255.255", "192.0.0.8",       "192.0.2.1",       "192.168.1.1",
        "198.18.0.1",      "198.19.255.255", "198.51.100.1",    "203.0.113.5",     "224.0.0.1",
        "239.255.255.250", "240.0.0.1",      "255.255.255.255",
    };
    static const char *const good[] = { "1.1.1.1",         "8.8.8.8",        "100.63.255.255",
                                        "100.128.0.0",     "172.15.255.255", "172.32.0.0",
                                        "192.167.255.255", "198.17.255.255", "198.20.0.0",
                                        "223.255.255.255" };
    struct policy *p = native("{\"internet\": true, \"allow\": [\"0.0.0.0/0\"]}");
    struct policy_env test = env_internet;

    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        assert_int_equal(addr(p, &env_internet, bad[i], 80), POLICY_DENY_FORBIDDEN);
        /* a name resolving there (DNS rebinding) is no way around it */
        assert_int_equal(name_addr(p, &env_internet, "x.test", bad[i], 80), POLICY_DENY_FORBIDDEN);
    }
    for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
        assert_int_not_equal(addr(p, &env_internet, good[i], 80), POLICY_DENY_FORBIDDEN);
    }
    /* the test net opens only itself */
    assert_int_equal(policy_env_set_test_net(&test, "198.18.0.0/16"), 0);
    assert_int_equal(addr(p, &test, "198.18.5.5", 80), POLICY_ALLOW_CIDR);
    assert_int_equal(addr(p, &test, "198.19.5.5", 80), POLICY_DENY_FORBIDDEN);
    assert_int_equal(addr(p, &test, "169.254.169.254", 80), POLICY_DENY_FORBIDDEN);
    /* IPv6 is never allowed */
    {
        struct in6_addr a6;

        assert_int_equal(inet_pton(AF_INET6, "2001:db8::1", &a6), 1);
        assert_int_equal(policy_check_addr(p, &env_internet, AF_INET6, &a6, 443), POLICY_DENY_IPV6);
        assert_int_equal(policy_check_name_addr(p, &env_internet, "x.test", AF_INET6, &a6, 443),
                         POLICY_DENY_IPV6);
    }
    policy_free(p);
}

static void test_test_net(void **state)
{
    struct policy_env env = {};

    assert_int_equal(policy_env_set_test_net(&env, "198.18.0.0/15"), 0);
    assert_int_equal(policy_env_set_test_net(&env, "198.19.0.0/24"), 0);
    assert_int_equal(policy_env_set_test_net(&env, "192.0.2.0/24"), 0);
    assert_int_equal(policy_env_set_test_net(&env, "203.0.113.0/25"), 0);
    assert_int_equal(policy_env_set_test_net(&env, "198.51.100.7"), 0);
    /* never private, loopback, link-local, or wider than its block */
    assert_int_equal(policy_env_set_test_net(&env, "10.0.0.0/8"), -EINVAL);
    assert_int_equal(policy_env_set_test_net(&env, "127.0.0.0/8"), -EINVAL);
    assert_int_equal(policy_env_set_test_net(&env, "169.254.0.0/16"), -EINVAL);
    assert_int_equal(policy_env_set_test_net(&env, "192.168.0.0/16"), -EINVAL);
    assert_int_equal(policy_env_set_test_net(&env, "198.16.0.0/13"), -EINVAL);
    assert_int_equal(policy_env_set_test_net(&env, "0.0.0.0/0"), -EINVAL);
    assert_int_equal(policy_env_set_test_net(&env, "198.18.0.0/33"), -EINVAL);
    assert_int_equal(policy_env_set_test_net(&env, "junk"), -EINVAL);
    assert_int_equal(policy_env_set_test_net(&env, NULL), -EINVAL);
}

static void test_ceiling(void **state)
{
    struct policy *p = native("{\"internet\": true, \"allow\": [\"ok.test\", \"1.1.1.1\"]}");
    struct policy_env env = {};
    enum policy_ceiling c;

    assert_int_equal(policy_ceiling_from_string("deny", &c), 0);
    assert_int_equal(c, POLICY_CEILING_DENY);
    assert_int_equal(policy_ceiling_from_string("allowlist", &c), 0);
    assert_int_equal(c, POLICY_CEILING_ALLOWLIST);
    assert_int_equal(policy_ceiling_from_string("internet", &c), 0);
    assert_int_equal(c, POLICY_CEILING_INTERNET);
    assert_int_equal(policy_ceiling_from_string("Internet", &c), -EINVAL);
    assert_int_equal(policy_ceiling_from_string(NULL, &c), -EINVAL);
    assert_string_equal(policy_ceiling_to_string(POLICY_CEILING_ALLOWLIST), "allowlist");

    env.ceiling = POLICY_CEILING_DENY;
    assert_int_equal(policy_check_name(p, &env, "ok.test", 0), POLICY_DENY_CEILING);
    assert_int_equal(addr(p, &env, "1.1.1.1", 80), POLICY_DENY_CEILING);
    assert_int_equal(name_addr(p, &env, "ok.test", "1.1.1.1", 80), POLICY_DENY_CEILING);

    env.ceiling = POLICY_CEILING_ALLOWLIST;
    assert_int_equal(policy_check_name(p, &env, "ok.test", 0), POLICY_ALLOW_NAME);
    assert_int_equal(policy_check_name(p, &env, "other.test", 0), POLICY_DENY_CEILING);
    assert_int_equal(addr(p, &env, "1.1.1.1", 80), POLICY_ALLOW_CIDR);
    assert_int_equal(addr(p, &env, "1.1.1.2", 80), POLICY_DENY_CEILING);

    env.ceiling = POLICY_CEILING_INTERNET;
    assert_int_equal(policy_check_name(p, &env, "other.test", 0), POLICY_ALLOW_INTERNET);
    policy_free(p);

    /* allowOut ALL_TRAFFIC is the internet, names included; the allowlist ceiling caps it */
    p = e2b("{\"allow_internet_access\": false, \"network\": {\"allowOut\": [\"0.0.0.0/0\"]}}");
    assert_int_equal(policy_check_name(p, &env, "any.test", 0), POLICY_ALLOW_INTERNET);
    assert_int_equal(addr(p, &env, "1.1.1.2", 80), POLICY_ALLOW_CIDR);
    env.ceiling = POLICY_CEILING_ALLOWLIST;
    assert_int_equal(policy_check_name(p, &env, "any.test", 0), POLICY_DENY_CEILING);
    assert_false(policy_reason_allows(addr(p, &env, "1.1.1.2", 80)));
    assert_false(policy_reason_allows(name_addr(p, &env, "any.test", "1.1.1.2", 80)));
    policy_free(p);
}

static void expect_native_error(const char *text, const char *message)
{
    json_t *j = json_loads(text, JSON_ALLOW_NUL, NULL);
    struct policy *p = NULL;
    struct policy_error err = {};

    assert_non_null(j);
    assert_int_equal(policy_parse_native(j, true, &p, &err), -EINVAL);
    assert_null(p);
    assert_string_equal(err.message, message);
    json_decref(j);
}

static void expect_e2b_error(const char *text, int error, const char *message)
{
    struct policy *p = NULL;
    struct policy_error err = {};

    assert_int_equal(e2b_create(text, &p, &err), error);
    assert_null(p);
    assert_string_equal(err.message, message);
}

static void test_invalid_entries(void **state)
{
    char big[600];

    expect_native_error("[]", "network policy must be an object");
    expect_native_error("{\"internet\": 1}", "internet: must be a boolean");
    expect_native_error("{\"allow\": \"a.test\"}", "allow: must be an array of strings");
    expect_native_error("{\"allow\": [1]}", "allow[0]: must be a string");
    expect_native_error("{\"colour\": []}", "colour: unknown field");
    expect_native_error("{\"allow\": [\"ok.test\", \"\"]}", "allow[1]: \"\": empty entry");
    expect_native_error("{\"allow\": [\"a..b\"]}", "allow[0]: \"a..b\": empty label in host name");
    expect_native_error("{\"allow\": [\".a\"]}", "allow[0]: \".a\": empty label in host name");
    expect_native_error("{\"allow\": [\"a b.test\"]}",
                        "allow[0]: \"a b.test\": invalid character in host name");
    expect_native_error("{\"allow\": [\"*\"]}",
                        "allow[0]: \"*\": a wildcard must be \"*.\" followed by a name");
    expect_native_error("{\"allow\": [\"*example.com\"]}",
                        "allow[0]: \"*example.com\": a wildcard must be \"*.\" followed by a name");
    expect_native_error("{\"allow\": [\"a.*.example.com\"]}",
                        "allow[0]: \"a.*.example.com\": invalid character in host name");
    expect_native_error("{\"allow\": [\"*.*.com\"]}",
                        "allow[0]: \"*.*.com\": invalid character in host name");
    expect_native_error("{\"deny\": [\"1.2.3\"]}",
                        "deny[0]: \"1.2.3\": invalid IPv4 address or CIDR");
    expect_native_error("{\"deny\": [\"1.2.3.4/33\"]}",
                        "deny[0]: \"1.2.3.4/33\": invalid IPv4 address or CIDR");
    expect_native_error("{\"deny\": [\"1.2.3.4/\"]}",
                        "deny[0]: \"1.2.3.4/\": invalid IPv4 address or CIDR");
    expect_native_error("{\"deny\": [\"1.2.3.4/08\"]}",
                        "deny[0]: \"1.2.3.4/08\": invalid IPv4 address or CIDR");
    expect_native_error("{\"deny\": [\"01.2.3.4\"]}",
                        "deny[0]: \"01.2.3.4\": invalid IPv4 address or CIDR");
    expect_native_error("{\"deny\": [\"256.1.1.1\"]}",
                        "deny[0]: \"256.1.1.1\": invalid IPv4 address or CIDR");
    expect_native_error("{\"deny\": [\"2001:db8::/129\"]}",
                        "deny[0]: \"2001:db8::/129\": invalid IPv6 address or CIDR");
    expect_native_error("{\"deny\": [\"[1.2.3.4]:80\"]}",
                        "deny[0]: \"[1.2.3.4]:80\": brackets are for IPv6 addresses");
    expect_native_error("{\"deny\": [\"[::1\"]}", "deny[0]: \"[::1\": unbalanced brackets");
    expect_native_error("{\"allow\": [\"a.test:\"]}", "allow[0]: \"a.test:\": invalid port list");
    expect_native_error("{\"allow\": [\"a.test:0\"]}",
                        "allow[0]: \"a.test:0\": port out of range (1-65535, low-high)");
    expect_native_error("{\"allow\": [\"a.test:65536\"]}",
                        "allow[0]: \"a.test:65536\": port out of range (1-65535, low-high)");
    expect_native_error("{\"allow\": [\"a.test:90-80\"]}",
                        "allow[0]: \"a.test:90-80\": port out of range (1-65535, low-high)");
    expect_native_error("{\"allow\": [\"a.test:80,\"]}",
                        "allow[0]: \"a.test:80,\": invalid port list");
    expect_native_error("{\"allow\": [\"a.test:+80\"]}",
                        "allow[0]: \"a.test:+80\": invalid port list");
    expect_native_error("{\"allow\": [\"a.test:1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17\"]}",
                        "allow[0]: \"a.test:1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17\": "
                        "more than 16 port ranges");
    expect_native_error("{\"allow\": [\"a.test\\u0000.evil\"]}",
                        "allow[0]: \"a.test\": NUL byte in entry");

    /* one label of 64 */
    memset(big, 'a', 64);
    snprintf(big + 64, sizeof(big) - 64, ".test");
    {
        char text[700], msg[800];

        snprintf(text, sizeof(text), "{\"allow\": [\"%s\"]}", big);
        snprintf(msg, sizeof(msg), "allow[0]: \"%s\": label longer than 63 bytes in host name",
                 big);
        expect_native_error(text, msg);
        /* a 254-byte name */
        memset(big, 'a', 254);
        for (int i = 63; i < 254; i += 64) {
            big[i] = '.';
        }
        big[254] = '\0';
        snprintf(text, sizeof(text), "{\"allow\": [\"%s\"]}", big);
        snprintf(msg, sizeof(msg), "allow[0]: \"%s\": host name longer than 253 bytes", big);
        expect_native_error(text, msg);
    }

    /* E2B shape */
    expect_e2b_error("{\"network\": {\"denyOut\": [\"evil.test\"]}}", -EINVAL,
                     "denyOut[0]: \"evil.test\": host names are not supported here (use an IP "
                     "address or CIDR)");
    expect_e2b_error("{\"network\": {\"allowOut\": [\"ok.test\", 7]}}", -EINVAL,
                     "allowOut[1]: must be a string");
    expect_e2b_error("{\"network\": {\"rules\": {\"api.test\": []}}}", -EOPNOTSUPP,
                     "network.rules: not supported by this server");
    expect_e2b_error("{\"network\": {\"egressProxy\": {\"address\": \"x:1\"}}}", -EOPNOTSUPP,
                     "network.egressProxy: not supported by this server");
    expect_e2b_error("{\"network\": {\"allowout\": []}}", -EINVAL,
                     "network.allowout: unknown field");
    expect_e2b_error("{\"network\": []}", -EINVAL, "network: must be an object");
    expect_e2b_error("{\"allow_internet_access\": \"yes\"}", -EINVAL,
                     "allow_internet_access: must be a boolean");
    /* a create body's ingress settings are the caller's, and pass here */
    {
        struct policy *p =
            e2b("{\"network\": {\"allowPublicTraffic\": false, \"httpsPorts\": [8443],"
                " \"maskRequestHost\": \"x\", \"rules\": null}}");
        policy_free(p);
    }
}

static void test_too_many(void **state)
{
    json_t *arr = json_array(), *o;
    struct policy *p = NULL;
    struct policy_error err = {};

    for (int i = 0; i <= POLICY_ENTRIES_MAX; i++) {
        json_array_append_new(arr, json_string("a.test"));
    }
    o = json_pack("{s:o}", "allow", arr);
    assert_int_equal(policy_parse_native(o, true, &p, &err), -EINVAL);
    assert_string_equal(err.message, "allow: more than 256 entries");
    json_array_remove(arr, 0);
    assert_int_equal(policy_parse_native(o, true, &p, &err), 0);
    policy_free(p);
    json_decref(o);
}

static void test_put_body(void **state)
{
    json_t *j =
        json_loads("{\"allowOut\": [\"ok.test\"], \"allow_internet_access\": false}", 0, NULL);
    struct policy *p = NULL;
    struct policy_error err = {};
    json_t *b;

    assert_int_equal(policy_parse_e2b(j, NULL, true, &p, &err), 0);
    assert_int_equal(policy_check_name(p, &env_internet, "other.test", 0), POLICY_DENY_DEFAULT);
    assert_int_equal(policy_check_name(p, &env_internet, "ok.test", 0), POLICY_ALLOW_NAME);
    b = policy_e2b_allow_internet(p);
    assert_true(json_is_false(b));
    json_decref(b);
    policy_free(p);
    json_decref(j);

    /* a PUT body is not a create body: no ingress settings */
    j = json_loads("{\"httpsPorts\": [443]}", 0, NULL);
    assert_int_equal(policy_parse_e2b(j, NULL, true, &p, &err), -EINVAL);
    assert_string_equal(err.message, "network.httpsPorts: unknown field");
    json_decref(j);
    /* and allow_internet_access is not a network field on create */
    expect_e2b_error("{\"network\": {\"allow_internet_access\": true}}", -EINVAL,
                     "network.allow_internet_access: unknown field");
}

static void test_render(void **state)
{
    struct policy *p =
        e2b("{\"allow_internet_access\": false, \"network\": {\"allowOut\": "
            "[\"*.Example.COM\", \"8.8.8.8\", \"198.18.1.1/15\", \"a.test:80,8000-8100\","
            " \"2001:DB8::/32\", \"[2001:db8::1]:443\"], \"denyOut\": [\"0.0.0.0/0\"]}}");
    json_t *n = policy_to_e2b_network(p), *nat, *again;
    char *s = json_dumps(n, JSON_COMPACT | JSON_SORT_KEYS);
    struct policy *p2 = NULL;
    struct policy_error err = {};

    assert_string_equal(s, "{\"allowOut\":[\"*.example.com\",\"8.8.8.8\",\"198.18.0.0/15\","
                           "\"a.test:80,8000-8100\",\"2001:db8::/32\",\"[2001:db8::1]:443\"],"
                           "\"denyOut\":[\"0.0.0.0/0\"]}");
    free(s);
    /* what getInfo renders parses back to the same thing */
    assert_int_equal(policy_parse_e2b(n, NULL, false, &p2, &err), 0);
    again = policy_to_e2b_network(p2);
    assert_true(json_equal(n, again));
    json_decref(again);
    policy_free(p2);
    json_decref(n);

    nat = policy_to_native(p);
    s = json_dumps(nat, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(s, "{\"allow\":[\"*.example.com\",\"8.8.8.8\",\"198.18.0.0/15\","
                           "\"a.test:80,8000-8100\",\"2001:db8::/32\",\"[2001:db8::1]:443\"],"
                           "\"deny\":[\"0.0.0.0/0\"],\"internet\":false}");
    free(s);
    assert_int_equal(policy_parse_native(nat, true, &p2, &err), 0);
    again = policy_to_native(p2);
    assert_true(json_equal(nat, again));
    json_decref(again);
    json_decref(nat);
    policy_free(p2);
    policy_free(p);

    /* only the lists that were given */
    p = e2b("{}");
    n = policy_to_e2b_network(p);
    assert_int_equal(json_object_size(n), 0);
    json_decref(n);
    policy_free(p);
}

static void test_reason_str(void **state)
{
    for (int r = 0; r < _POLICY_REASON_MAX; r++) {
        assert_string_not_equal(policy_reason_str((enum policy_reason)r), "unknown");
        assert_true(policy_reason_allows((enum policy_reason)r) == (r < _POLICY_ALLOW_MAX));
    }
    assert_string_equal(policy_reason_str(POLICY_DENY_FORBIDDEN), "deny-forbidden");
    assert_string_equal(policy_reason_str(_POLICY_REASON_MAX), "unknown");
}

static void test_passthrough(void **state)
{
    struct policy *p = native("{\"allow\": [\"pin.test\", \"*.pinned.test\"], "
                              "\"passthrough\": [\"Pin.Test.\", \"*.pinned.test\", \"off.test\"]}");
    struct policy *q;
    json_t *j;
    char *text;

    assert_true(policy_tls_passthrough(p, "pin.test"));
    assert_true(policy_tls_passthrough(p, "a.b.pinned.test"));
    assert_false(policy_tls_passthrough(p, "pinned.test")); /* "*." is below, as in allow */
    assert_false(policy_tls_passthrough(p, "other.test"));
    assert_false(policy_tls_passthrough(p, NULL));
    /* passthrough never allows: off.test is listed but not allowed */
    assert_true(policy_tls_passthrough(p, "off.test"));
    assert_int_equal(policy_check_name(p, &env_internet, "off.test", 443), POLICY_DENY_DEFAULT);
    assert_int_equal(name_addr(p, &env_internet, "off.test", "8.8.8.8", 443), POLICY_DENY_DEFAULT);
    /* canonical, round-trips */
    j = policy_to_native(p);
    text = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(text, "{\"allow\":[\"pin.test\",\"*.pinned.test\"],\"deny\":[],"
                              "\"internet\":false,\"passthrough\":[\"pin.test\",\"*.pinned.test\","
                              "\"off.test\"]}");
    free(text);
    assert_int_equal(policy_parse_native(j, true, &q, NULL), 0);
    assert_true(policy_tls_passthrough(q, "x.pinned.test"));
    json_decref(j);
    policy_free(q);
    policy_free(p);
    /* absent or empty: not rendered, nothing passes through */
    p = native("{\"internet\": true, \"passthrough\": []}");
    j = policy_to_native(p);
    assert_null(json_object_get(j, "passthrough"));
    assert_false(policy_tls_passthrough(p, "pin.test"));
    json_decref(j);
    policy_free(p);
    /* E2B policies always terminate */
    p = e2b("{\"network\": {\"allowOut\": [\"pin.test\"]}}");
    assert_false(policy_tls_passthrough(p, "pin.test"));
    policy_free(p);

    expect_native_error("{\"passthrough\": \"pin.test\"}",
                        "passthrough: must be an array of strings");
    expect_native_error("{\"passthrough\": [\"ok.test\", 7]}", "passthrough[1]: must be a string");
    expect_native_error("{\"passthrough\": [\"a..b\"]}",
                        "passthrough[0]: \"a..b\": empty label in host name");
    expect_native_error("{\"passthrough\": [\"ok.test\", \"1.2.3.4\"]}",
                        "passthrough[1]: \"1.2.3.4\": only host names and \"*.\" wildcards, "
                        "without ports");
    expect_native_error("{\"passthrough\": [\"198.18.0.0/15\"]}",
                        "passthrough[0]: \"198.18.0.0/15\": only host names and \"*.\" "
                        "wildcards, without ports");
    expect_native_error("{\"passthrough\": [\"pin.test:443\"]}",
                        "passthrough[0]: \"pin.test:443\": only host names and \"*.\" "
                        "wildcards, without ports");
    expect_native_error("{\"passthrough\": [\"2001:db8::1\"]}",
                        "passthrough[0]: \"2001:db8::1\": only host names and \"*.\" "
                        "wildcards, without ports");
    expect_native_error("{\"passthrough\": [\"*\"]}",
                        "passthrough[0]: \"*\": a wildcard must be \"*.\" followed by a name");
}

static void test_normalize(void **state)
{
    char out[POLICY_NAME_MAX + 1];

    assert_int_equal(policy_normalize_name("WWW.Example.com.", out), 0);
    assert_string_equal(out, "www.example.com");
    assert_int_equal(policy_normalize_name("_srv.a-b.test", out), 0);
    assert_int_equal(policy_normalize_name("a..b", out), -EINVAL);
    assert_int_equal(policy_normalize_name(".", out), -EINVAL);
    assert_int_equal(policy_normalize_name("a.b..", out), -EINVAL);
    assert_int_equal(policy_normalize_name("a/b", out), -EINVAL);
    assert_int_equal(policy_normalize_name(NULL, out), -EINVAL);
}

/* ---- credential injection ---- */

#define SEALED "\"s1.AAAA\""
#define ALLOW_API "\"allow\": [\"api.example.test\", \"*.cdn.test\"]"

static void test_inject_parse(void **state)
{
    struct policy *p =
        native("{" ALLOW_API ", \"inject\": ["
               "{\"host\": \"API.example.test.\", \"method\": \"GET\","
               " \"pathPrefix\": \"/v1/\", \"header\": \"Authorization\","
               " \"value\": \"Bearer {{secret:gh}}\","
               " \"expiresAt\": \"2026-12-03T00:00:00Z\", \"ratePerMinute\": 60,"
               " \"plainHttp\": true},"
               "{\"host\": \"*.a.cdn.test\", \"header\": \"X-Key\","
               " \"value\": \"${e2b.secrets.k_2}:{{secret:gh}}-lit\"}],"
               " \"secrets\": {\"gh\": " SEALED ", \"k_2\": " SEALED ", \"unused\": " SEALED "}}");
    const struct policy_inject_part *parts;
    const struct policy_inject *r;

    assert_int_equal(policy_inject_count(p), 2);
    r = policy_inject_get(p, 0);
    assert_string_equal(policy_inject_header(r), "Authorization");
    assert_int_equal(policy_inject_parts(r, &parts), 2);
    assert_false(parts[0].secret);
    assert_int_equal(parts[0].len, 7);
    assert_memory_equal(parts[0].text, "Bearer ", 7);
    assert_true(parts[1].secret);
    assert_string_equal(parts[1].text, "gh");
    assert_int_equal(policy_inject_expires_usec(r), 1796256000ull * 1000000);
    assert_int_equal(policy_inject_rate(r), 60);
    assert_true(policy_inject_plain_http(r));

    r = policy_inject_get(p, 1);
    assert_int_equal(policy_inject_parts(r, &parts), 4);
    assert_string_equal(parts[0].text, "k_2");
    assert_true(parts[0].secret);
    assert_memory_equal(parts[1].text, ":", 1);
    assert_string_equal(parts[2].text, "gh");
    assert_int_equal(parts[3].len, 4);
    assert_int_equal(policy_inject_expires_usec(r), 0);
    assert_int_equal(policy_inject_rate(r), 0);
    assert_false(policy_inject_plain_http(r));
    assert_null(policy_inject_get(p, 2));

    assert_int_equal(policy_secret_ref_count(p), 2);
    assert_string_equal(policy_secret_ref(p, 0), "gh");
    assert_string_equal(policy_secret_ref(p, 1), "k_2");
    assert_null(policy_secret_ref(p, 2));
    assert_string_equal(policy_secret_sealed(p, "gh"), "s1.AAAA");
    assert_string_equal(policy_secret_sealed(p, "unused"), "s1.AAAA");
    assert_null(policy_secret_sealed(p, "GH"));

    /* Renders back (host normalised, fields as given) and re-parses to the same. */
    json_t *j = policy_to_native(p), *again;
    char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    assert_non_null(strstr(text, "{\"expiresAt\":\"2026-12-03T00:00:00Z\",\"header\":"
                                 "\"Authorization\",\"host\":\"api.example.test\",\"method\":"
                                 "\"GET\",\"pathPrefix\":\"/v1/\",\"plainHttp\":true,"
                                 "\"ratePerMinute\":60,\"value\":\"Bearer {{secret:gh}}\"}"));
    assert_non_null(strstr(text, "\"secrets\":{\"gh\":\"s1.AAAA\""));
    struct policy *q = NULL;
    assert_int_equal(policy_parse_native(j, true, &q, NULL), 0);
    again = policy_to_native(q);
    assert_true(json_equal(j, again));
    json_decref(again);
    json_decref(j);
    free(text);
    policy_free(q);
    policy_free(p);

    /* No rules: no "inject" in the rendering; the internet default covers any host. */
    p = native("{\"internet\": true, \"inject\": [{\"host\": \"*.any.test\", \"header\": \"X-A\","
               " \"value\": \"literal only\"}]}");
    assert_int_equal(policy_secret_ref_count(p), 0);
    policy_free(p);
    p = native("{\"allow\": [\"a.test\"], \"inject\": []}");
    j = policy_to_native(p);
    assert_null(json_object_get(j, "inject"));
    assert_null(json_object_get(j, "secrets"));
    json_decref(j);
    policy_free(p);
}

static void test_inject_secrets_flag(void **state)
{
    json_t *j = json_loads("{" ALLOW_API ", \"inject\": [{\"host\": \"api.example.test\","
                           " \"header\": \"Authorization\", \"value\": \"{{secret:gh}}\"}]}",
                           0, NULL);
    struct policy *p = NULL;
    struct policy_error err = {};

    /* The api: no map, the names are its to look up. */
    assert_int_equal(policy_parse_native(j, false, &p, &err), 0);
    assert_int_equal(policy_secret_ref_count(p), 1);
    assert_string_equal(policy_secret_ref(p, 0), "gh");
    p = policy_free(p);
    /* The gateway: the map must cover every name. */
    assert_int_equal(policy_parse_native(j, true, &p, &err), -EINVAL);
    assert_string_equal(err.message, "secret \"gh\": referenced by a rule but not in \"secrets\"");
    json_object_set_new(j, "secrets", json_pack("{s:s}", "other", "s1.AAAA"));
    assert_int_equal(policy_parse_native(j, true, &p, &err), -EINVAL);
    assert_string_equal(err.message, "secret \"gh\": referenced by a rule but not in \"secrets\"");
    /* And the api refuses a map from the user. */
    json_object_set_new(j, "secrets", json_pack("{s:s}", "gh", "s1.AAAA"));
    assert_int_equal(policy_parse_native(j, false, &p, &err), -EINVAL);
    assert_string_equal(err.message,
                        "secrets are not part of a policy; create them with /v1/secrets");
    assert_int_equal(policy_parse_native(j, true, &p, &err), 0);
    policy_free(p);
    json_decref(j);
}

#define RULE(extra) "{" ALLOW_API ", \"inject\": [{\"host\": \"api.example.test\", " extra "}]}"
#define HV "\"header\": \"Authorization\", \"value\": \"x\""

static void test_inject_errors(void **state)
{
    expect_native_error("{\"inject\": {}}", "inject: must be an array of rules");
    expect_native_error("{\"inject\": [1]}", "inject[0]: must be an object");
    expect_native_error(RULE(HV ", \"bogus\": 1"), "inject[0].bogus: unknown field");
    expect_native_error("{" ALLOW_API ", \"inject\": [{" HV "}]}", "inject[0].host: missing");
    expect_native_error("{" ALLOW_API ", \"inject\": [{\"host\": \"a..b\", " HV "}]}",
                        "inject[0].host: empty label in host name");
    expect_native_error("{" ALLOW_API ", \"inject\": [{\"host\": \"198.18.0.1\", " HV "}]}",
                        "inject[0].host: must be a host name or a \"*.\" wildcard, without a port");
    expect_native_error("{" ALLOW_API ", \"inject\": [{\"host\": \"api.example.test:443\", " HV
                        "}]}",
                        "inject[0].host: must be a host name or a \"*.\" wildcard, without a port");
    expect_native_error("{" ALLOW_API ", \"inject\": [{\"host\": 7, " HV "}]}",
                        "inject[0].host: must be a string without NUL bytes");
    expect_native_error("{" ALLOW_API ", \"inject\": [{\"host\": \"other.test\", " HV "}]}",
                        "inject[0].host: \"other.test\" is not allowed by this policy (allow it)");
    expect_native_error("{" ALLOW_API ", \"inject\": [{\"host\": \"*.example.test\", " HV "}]}",
                        "inject[0].host: \"*.example.test\" is not allowed by this policy "
                        "(allow it)");
    expect_native_error("{\"internet\": true, \"deny\": [\"x.test\"], \"inject\": [{\"host\": "
                        "\"x.test\", " HV "}]}",
                        "inject[0].host: \"x.test\" is not allowed by this policy (allow it)");
    expect_native_error("{" ALLOW_API ", \"passthrough\": [\"*.example.test\"], \"inject\": "
                        "[{\"host\": \"api.example.test\", " HV "}]}",
                        "inject[0].host: \"api.example.test\" is also on the passthrough list, "
                        "which is never terminated: nothing could be injected there");
    expect_native_error("{" ALLOW_API ", \"passthrough\": [\"x.a.cdn.test\"], \"inject\": "
                        "[{\"host\": \"*.cdn.test\", " HV "}]}",
                        "inject[0].host: \"*.cdn.test\" is also on the passthrough list, "
                        "which is never terminated: nothing could be injected there");
    expect_native_error("{" ALLOW_API ", \"passthrough\": [\"*.test\"], \"inject\": "
                        "[{\"host\": \"*.cdn.test\", " HV "}]}",
                        "inject[0].host: \"*.cdn.test\" is also on the passthrough list, "
                        "which is never terminated: nothing could be injected there");
    struct policy *ok =
        native("{" ALLOW_API ", \"passthrough\": [\"pin.example.test\", "
               "\"*.other.test\"], \"inject\": [{\"host\": "
               "\"api.example.test\", " HV "}, {\"host\": \"*.cdn.test\", " HV "}]}");
    policy_free(ok);
    expect_native_error(RULE(HV ", \"method\": \"get\""),
                        "inject[0].method: must be an uppercase token (GET, POST, ...)");
    expect_native_error(RULE(HV ", \"method\": \"G T\""),
                        "inject[0].method: must be an uppercase token (GET, POST, ...)");
    expect_native_error(RULE(HV ", \"method\": \"\""), "inject[0].method: empty");
    expect_native_error(RULE(HV ", \"method\": \"ABCDEFGHIJKLMNOPQ\""),
                        "inject[0].method: too long");
    expect_native_error(RULE(HV ", \"pathPrefix\": \"v1/\""),
                        "inject[0].pathPrefix: must start with \"/\"");
    expect_native_error(RULE(HV ", \"pathPrefix\": \"/a b\""),
                        "inject[0].pathPrefix: no spaces, controls or \"#\"");
    expect_native_error(RULE(HV ", \"pathPrefix\": \"/a#b\""),
                        "inject[0].pathPrefix: no spaces, controls or \"#\"");
    expect_native_error(RULE("\"value\": \"x\""), "inject[0].header: missing");
    expect_native_error(RULE("\"header\": \"\", \"value\": \"x\""), "inject[0].header: missing");
    expect_native_error(RULE("\"header\": \"X Y\", \"value\": \"x\""),
                        "inject[0].header: not a valid header name (RFC 7230 token)");
    expect_native_error(RULE("\"header\": \"X:Y\", \"value\": \"x\""),
                        "inject[0].header: not a valid header name (RFC 7230 token)");
    expect_native_error(
        RULE("\"header\": \"X-Aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
             "aaaaaaaaaaaaa\", \"value\": \"x\""),
        "inject[0].header: too long");
    static const char *const hop[] = { "Connection",       "keep-alive",
                                       "Proxy-Connection", "TE",
                                       "Trailer",          "Transfer-Encoding",
                                       "Upgrade",          "HOST",
                                       "Content-Length",   "Proxy-Authenticate" };
    for (size_t i = 0; i < ARRAY_SIZE(hop); i++) {
        char text[512];
        snprintf(text, sizeof(text), RULE("\"header\": \"%s\", \"value\": \"x\""), hop[i]);
        expect_native_error(text,
                            "inject[0].header: hop-by-hop, Host and framing headers cannot be "
                            "injected");
    }
    expect_native_error(RULE("\"header\": \"A\""), "inject[0].value: missing");
    expect_native_error(RULE("\"header\": \"A\", \"value\": \"a\\r\\nX-Evil: 1\""),
                        "inject[0].value: control character (CR, LF, ...) in value");
    expect_native_error(RULE("\"header\": \"A\", \"value\": \"a\\nb\""),
                        "inject[0].value: control character (CR, LF, ...) in value");
    expect_native_error(RULE("\"header\": \"A\", \"value\": \"a\\u0000b\""),
                        "inject[0].value: must be a string without NUL bytes");
    expect_native_error(RULE("\"header\": \"A\", \"value\": \"a\\u007fb\""),
                        "inject[0].value: control character (CR, LF, ...) in value");
    static const char *const refs[] = { "{{secret:}}",       "{{secret:a b}}",  "{{secret:gh",
                                        "{{secret:a.b}}",    "${e2b.secrets.}", "${e2b.secrets.x",
                                        "${e2b.secrets.a/b}" };
    for (size_t i = 0; i < ARRAY_SIZE(refs); i++) {
        char text[512];
        snprintf(text, sizeof(text), RULE("\"header\": \"A\", \"value\": \"Bearer %s\""), refs[i]);
        expect_native_error(text, "inject[0].value: invalid secret reference (NAME is "
                                  "[A-Za-z0-9_-]{1,64})");
    }
    expect_native_error(RULE(HV ", \"expiresAt\": \"tomorrow\""),
                        "inject[0].expiresAt: must be an RFC 3339 time (2026-12-03T00:00:00Z)");
    expect_native_error(RULE(HV ", \"expiresAt\": \"2026-02-29T00:00:00Z\""),
                        "inject[0].expiresAt: must be an RFC 3339 time (2026-12-03T00:00:00Z)");
    expect_native_error(RULE(HV ", \"expiresAt\": \"2026-12-03T00:00:00\""),
                        "inject[0].expiresAt: must be an RFC 3339 time (2026-12-03T00:00:00Z)");
    expect_native_error(RULE(HV ", \"expiresAt\": \"2026-12-03T24:00:00Z\""),
                        "inject[0].expiresAt: must be an RFC 3339 time (2026-12-03T00:00:00Z)");
    expect_native_error(RULE(HV ", \"ratePerMinute\": 0"),
                        "inject[0].ratePerMinute: must be an integer from 1 to 1000000");
    expect_native_error(RULE(HV ", \"ratePerMinute\": 1.5"),
                        "inject[0].ratePerMinute: must be an integer from 1 to 1000000");
    expect_native_error(RULE(HV ", \"ratePerMinute\": 1000001"),
                        "inject[0].ratePerMinute: must be an integer from 1 to 1000000");
    expect_native_error(RULE(HV ", \"plainHttp\": 1"), "inject[0].plainHttp: must be a boolean");
    expect_native_error(RULE(HV "}, {\"host\": \"api.example.test\", \"value\": \"y\""),
                        "inject[1].header: missing");
    expect_native_error("{\"secrets\": []}", "secrets: must be an object of sealed values");
    expect_native_error("{\"secrets\": {\"a b\": " SEALED "}}",
                        "secrets.a b: invalid name (NAME is [A-Za-z0-9_-]{1,64})");
    expect_native_error("{\"secrets\": {\"gh\": \"plaintext\"}}",
                        "secrets.gh: must be a sealed value (\"s1....\")");
    expect_native_error("{\"secrets\": {\"gh\": 5}}",
                        "secrets.gh: must be a sealed value (\"s1....\")");

    /* Bounds: 64 rules, 4096-byte values, 64 distinct names. */
    json_t *rules = json_array(), *o;
    struct policy *p = NULL;
    struct policy_error err = {};
    for (int i = 0; i <= POLICY_INJECT_MAX; i++) {
        json_array_append_new(rules, json_pack("{s:s, s:s, s:s}", "host", "api.example.test",
                                               "header", "A", "value", "v"));
    }
    o = json_pack("{s:[s], s:o}", "allow", "api.example.test", "inject", rules);
    assert_int_equal(policy_parse_native(o, true, &p, &err), -EINVAL);
    assert_string_equal(err.message, "inject: more than 64 rules");
    json_array_remove(rules, 0);
    assert_int_equal(policy_parse_native(o, true, &p, &err), 0);
    p = policy_free(p);

    char value[POLICY_INJECT_VALUE_MAX + 2];
    memset(value, 'v', sizeof(value));
    value[POLICY_INJECT_VALUE_MAX + 1] = 0;
    json_object_set_new(json_array_get(rules, 0), "value", json_string(value));
    assert_int_equal(policy_parse_native(o, true, &p, &err), -EINVAL);
    assert_string_equal(err.message, "inject[0].value: too long");
    value[POLICY_INJECT_VALUE_MAX] = 0;
    json_object_set_new(json_array_get(rules, 0), "value", json_string(value));
    assert_int_equal(policy_parse_native(o, false, &p, &err), 0);
    p = policy_free(p);

    struct strbuf sb = STRBUF_INIT;
    for (int i = 0; i <= POLICY_SECRETS_MAX; i++) {
        strbuf_appendf(&sb, "{{secret:n%d}}", i);
    }
    json_object_set_new(json_array_get(rules, 0), "value", json_string(sb.buf));
    assert_int_equal(policy_parse_native(o, false, &p, &err), -EINVAL);
    assert_string_equal(err.message, "inject[0].value: more than 64 distinct secrets");
    strbuf_release(&sb);
    json_decref(o);
}

static void test_inject_matches(void **state)
{
    struct policy *p = native("{" ALLOW_API ", \"inject\": ["
                              "{\"host\": \"api.example.test\", \"method\": \"POST\","
                              " \"pathPrefix\": \"/v1/\", \"header\": \"A\", \"value\": \"x\"},"
                              "{\"host\": \"*.cdn.test\", \"header\": \"B\", \"value\": \"y\"}]}");
    const struct policy_inject *a = policy_inject_get(p, 0), *b = policy_inject_get(p, 1);

    assert_true(policy_inject_matches(a, "api.example.test", "POST", "/v1/x?q=1"));
    assert_true(policy_inject_matches(a, "api.example.test", "POST", "/v1/"));
    assert_false(policy_inject_matches(a, "api.example.test", "GET", "/v1/x"));
    assert_false(policy_inject_matches(a, "api.example.test", "post", "/v1/x"));
    assert_false(policy_inject_matches(a, "api.example.test", "POST", "/v2/x"));
    assert_false(policy_inject_matches(a, "api.example.test", "POST", "/v1"));
    assert_false(policy_inject_matches(a, "x.api.example.test", "POST", "/v1/x"));
    assert_false(policy_inject_matches(a, "api.example.tes", "POST", "/v1/x"));
    /* Paths another parser could read as outside the prefix. */
    static const char *const tricky[] = { "/v1/../admin",
                                          "/v1/..",
                                          "/v1/./x",
                                          "/v1/%2e%2e/admin",
                                          "/v1/%2E./x",
                                          "/v1/a%2Fb",
                                          "/v1/a%5cb",
                                          "/v1/a\\b",
                                          "https://api.example.test/v1/",
                                          "*" };
    for (size_t i = 0; i < ARRAY_SIZE(tricky); i++) {
        assert_false(policy_inject_matches(a, "api.example.test", "POST", tricky[i]));
    }
    /* Dots that are not segments, and oddities after the query, are fine. */
    assert_true(policy_inject_matches(a, "api.example.test", "POST", "/v1/a.b/..c/.d"));
    assert_true(policy_inject_matches(a, "api.example.test", "POST", "/v1/x?next=/../%2e"));
    /* No method or path: any. The wildcard covers names below the suffix only. */
    assert_true(policy_inject_matches(b, "a.cdn.test", "DELETE", "*"));
    assert_true(policy_inject_matches(b, "a.b.cdn.test", "GET", "/../x"));
    assert_false(policy_inject_matches(b, "cdn.test", "GET", "/"));
    assert_false(policy_inject_matches(NULL, "cdn.test", "GET", "/"));
    policy_free(p);
}

static void test_rfc3339_offsets(void **state)
{
    struct policy *p = native(
        "{" ALLOW_API ", \"inject\": ["
        "{\"host\": \"api.example.test\", " HV ", \"expiresAt\": \"2026-12-03T01:30:00+01:30\"},"
        "{\"host\": \"api.example.test\", " HV ", \"expiresAt\": \"2026-12-02t23:00:00.123z\"},"
        "{\"host\": \"api.example.test\", " HV ", \"expiresAt\": \"2024-02-29T00:00:00-00:00\"}]}");
    assert_int_equal(policy_inject_expires_usec(policy_inject_get(p, 0)), 1796256000ull * 1000000);
    assert_int_equal(policy_inject_expires_usec(policy_inject_get(p, 1)),
                     (1796256000ull - 3600) * 1000000);
    assert_int_equal(policy_inject_expires_usec(policy_inject_get(p, 2)), 1709164800ull * 1000000);
    policy_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_native_default_deny),
        cmocka_unit_test(test_e2b_defaults),
        cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_wildcards),
        cmocka_unit_test(test_cidr_edges),
        cmocka_unit_test(test_ports),
        cmocka_unit_test(test_forbidden),
        cmocka_unit_test(test_test_net),
        cmocka_unit_test(test_ceiling),
        cmocka_unit_test(test_invalid_entries),
        cmocka_unit_test(test_too_many),
        cmocka_unit_test(test_put_body),
        cmocka_unit_test(test_render),
        cmocka_unit_test(test_reason_str),
        cmocka_unit_test(test_passthrough),
        cmocka_unit_test(test_normalize),
        cmocka_unit_test(test_inject_parse),
        cmocka_unit_test(test_inject_secrets_flag),
        cmocka_unit_test(test_inject_errors),
        cmocka_unit_test(test_inject_matches),
        cmocka_unit_test(test_rfc3339_offsets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
