/* Unit tests for the per-request egress decision (http-gate.h's rules, one by one). */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>

#include "basic/macro.h"
#include "gw/http-gate.h"
#include "gw/resolved.h"

struct fixture {
    struct policy *policy;
    struct policy_env env;
    struct resolved *resolved;
};

static struct fixture fx;

static void make_policy(const char *json)
{
    struct policy_error err;
    json_t *j = json_loads(json, 0, NULL);

    policy_free(fx.policy);
    fx.policy = NULL;
    assert_int_equal(policy_parse_native(j, true, &fx.policy, &err), 0);
    json_decref(j);
}

static int setup(void **state)
{
    fx.env.ceiling = POLICY_CEILING_INTERNET;
    assert_int_equal(policy_env_set_test_net(&fx.env, "198.18.0.0/15"), 0);
    assert_int_equal(resolved_new(0, &fx.resolved), 0);
    make_policy("{\"allow\":[\"allowed.test\",\"198.18.5.0/24:80\"]}");
    struct in_addr a;
    inet_pton(AF_INET, "198.18.1.10", &a);
    assert_int_equal(resolved_add(fx.resolved, "allowed.test", a.s_addr, 1000), 0);
    return 0;
}

static int teardown(void **state)
{
    fx.policy = policy_free(fx.policy);
    fx.resolved = resolved_free(fx.resolved);
    return 0;
}

/* Checks head against dst:port (sni may be NULL); returns the result. */
static struct http_gate_result check(const char *head, const char *dst, uint16_t port,
                                     const char *sni)
{
    struct http1_request req;
    struct http_gate_result res;
    struct http_gate_input in = {
        .policy = fx.policy,
        .env = &fx.env,
        .resolved = fx.resolved,
        .port = port,
        .sni = sni,
        .now = 10,
    };

    inet_pton(AF_INET, dst, &in.dst);
    size_t len = strlen(head);
    assert_int_equal(http1_find_end(head, len, NULL), len);
    assert_int_equal(http1_parse_request(head, len, &req), 0);
    http_gate_check(&in, head, &req, &res);
    return res;
}

#define EXPECT(head, dst, port, sni, allow_, reason_)                                              \
    do {                                                                                           \
        struct http_gate_result r_ = check(head, dst, port, sni);                                  \
        if (r_.allow != (allow_) || strcmp(r_.reason, reason_) != 0) {                             \
            fail_msg("%s -> %s %s, want %s %s", head, r_.allow ? "allow" : "deny", r_.reason,      \
                     (allow_) ? "allow" : "deny", reason_);                                        \
        }                                                                                          \
    } while (0)

static void test_rules(void **state)
{
    const char *dst = "198.18.1.10";

    EXPECT("GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", dst, 80, NULL, true, "allow-name");
    EXPECT("GET / HTTP/1.1\r\nHost: ALLOWED.test.:8080\r\n\r\n", dst, 80, NULL, true, "allow-name");
    /* The CDN case: same address, other name. */
    EXPECT("GET / HTTP/1.1\r\nHost: forbidden.test\r\n\r\n", dst, 80, NULL, false, "deny-default");
    /* The allowed name somewhere DNS never sent this sandbox. */
    EXPECT("GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "198.18.1.66", 80, NULL, false,
           "unresolved-destination");
    /* ...unless a CIDR entry covers that address anyway. */
    EXPECT("GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "198.18.5.7", 80, NULL, true,
           "allow-cidr");
    /* Absolute form: the authority decides, and a Host header must agree. */
    EXPECT("GET http://allowed.test/x HTTP/1.1\r\nHost: allowed.test\r\n\r\n", dst, 80, NULL, true,
           "allow-name");
    EXPECT("GET http://forbidden.test/x HTTP/1.1\r\nHost: allowed.test\r\n\r\n", dst, 80, NULL,
           false, "host-mismatch");
    EXPECT("GET http://allowed.test/x HTTP/1.1\r\nHost: forbidden.test\r\n\r\n", dst, 80, NULL,
           false, "host-mismatch");
    /* IP literals: only the destination itself, by the address rules. */
    EXPECT("GET / HTTP/1.1\r\nHost: 198.18.1.10\r\n\r\n", dst, 80, NULL, false, "deny-default");
    EXPECT("GET / HTTP/1.1\r\nHost: 198.18.5.7\r\n\r\n", "198.18.5.7", 80, NULL, true,
           "allow-cidr");
    EXPECT("GET / HTTP/1.1\r\nHost: 198.18.5.7\r\n\r\n", "198.18.5.7", 81, NULL, false,
           "deny-port");
    EXPECT("GET / HTTP/1.1\r\nHost: 198.18.5.8\r\n\r\n", "198.18.5.7", 80, NULL, false,
           "host-mismatch");
    EXPECT("GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", dst, 80, NULL, false, "deny-ipv6");
    EXPECT("GET / HTTP/1.1\r\nHost: allowed.test:x\r\n\r\n", dst, 80, NULL, false, "bad-host");
    EXPECT("GET / HTTP/1.1\r\nHost: a..b\r\n\r\n", dst, 80, NULL, false, "deny-bad-name");
    EXPECT("GET / HTTP/1.0\r\n\r\n", dst, 80, NULL, false, "no-host");
    /* Terminated TLS: Host == SNI. */
    EXPECT("GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", dst, 443, "allowed.test", true,
           "allow-name");
    EXPECT("GET / HTTP/1.1\r\nHost: forbidden.test\r\n\r\n", dst, 443, "allowed.test", false,
           "host-mismatch");
    /* Forbidden addresses stay forbidden whatever the name (DNS rebinding). */
    struct in_addr lo;
    inet_pton(AF_INET, "127.0.0.1", &lo);
    resolved_add(fx.resolved, "allowed.test", lo.s_addr, 1000);
    EXPECT("GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "127.0.0.1", 80, NULL, false,
           "deny-forbidden");
}

static void test_expiry_and_live_policy(void **state)
{
    const char *h = "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
    struct http1_request req;
    struct http_gate_result res;
    struct http_gate_input in = {
        .policy = fx.policy,
        .env = &fx.env,
        .resolved = fx.resolved,
        .port = 80,
        .now = 1000,
    };

    inet_pton(AF_INET, "198.18.1.10", &in.dst);
    assert_int_equal(http1_parse_request(h, strlen(h), &req), 0);
    http_gate_check(&in, h, &req, &res);
    assert_false(res.allow); /* the attribution expired */
    assert_string_equal(res.reason, "unresolved-destination");
    in.now = 10;
    make_policy("{\"allow\":[\"other.test\"]}");
    in.policy = fx.policy;
    http_gate_check(&in, h, &req, &res);
    assert_false(res.allow);
    assert_string_equal(res.reason, "deny-default");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_expiry_and_live_policy),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
