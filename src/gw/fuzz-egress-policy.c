/*
 * libFuzzer target for the egress policy parser (policy.h). The input is
 * JSON, parsed in the native shape and in both E2B shapes (create and PUT).
 * Whatever parses must render back to JSON that parses again to the same
 * rendering, and every check must return a defined reason; injection rules
 * ("inject", "secrets") must split into valid parts and match totally. Build with
 * -Dfuzzers=true and clang.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "gw/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void poke_checks(const struct policy *p)
{
    static const struct policy_env envs[] = {
        { .ceiling = POLICY_CEILING_DENY },
        { .ceiling = POLICY_CEILING_ALLOWLIST },
        { .ceiling = POLICY_CEILING_INTERNET,
          .has_test_net = true,
          .test_net = 0xC6120000u,
          .test_mask = 0xFFFE0000u },
    };
    static const char *const names[] = { "example.com", "www.example.com", "a.test", "x", "" };
    static const uint32_t addrs[] = { 0x08080808u, 0xC6120001u, 0xA9FEA9FEu, 0x7F000001u, 0 };
    static const uint16_t ports[] = { 0, 80, 443, 8000 };

    static const char *const targets[] = { "/", "/v1/x?a=1", "/v1/../x", "*", "/%2e" };

    /* Injection rules: parts cover the value, names are valid, matching is total. */
    for (size_t i = 0; i < policy_inject_count(p); i++) {
        const struct policy_inject *r = policy_inject_get(p, i);
        const struct policy_inject_part *parts;
        size_t n = policy_inject_parts(r, &parts);

        assert(policy_inject_header(r)[0] != '\0');
        for (size_t k = 0; k < n; k++) {
            assert(!parts[k].secret || policy_secret_name_ok(parts[k].text));
            assert(parts[k].secret || parts[k].len > 0);
        }
        for (size_t h = 0; h < sizeof(names) / sizeof(names[0]); h++) {
            for (size_t t = 0; t < sizeof(targets) / sizeof(targets[0]); t++) {
                (void)policy_inject_matches(r, names[h], "GET", targets[t]);
            }
        }
    }
    for (size_t i = 0; i < policy_secret_ref_count(p); i++) {
        assert(policy_secret_name_ok(policy_secret_ref(p, i)));
        assert(policy_secret_sealed(p, policy_secret_ref(p, i)));
    }

    for (size_t e = 0; e < sizeof(envs) / sizeof(envs[0]); e++) {
        for (size_t n = 0; n < sizeof(names) / sizeof(names[0]); n++) {
            (void)policy_tls_passthrough(p, names[n]);
            for (size_t a = 0; a < sizeof(addrs) / sizeof(addrs[0]); a++) {
                struct in_addr in = { .s_addr = htonl(addrs[a]) };

                for (size_t k = 0; k < sizeof(ports) / sizeof(ports[0]); k++) {
                    enum policy_reason r1 = policy_check_name(p, &envs[e], names[n], ports[k]);
                    enum policy_reason r2 = policy_check_addr(p, &envs[e], AF_INET, &in, ports[k]);
                    enum policy_reason r3 =
                        policy_check_name_addr(p, &envs[e], names[n], AF_INET, &in, ports[k]);

                    assert(r1 < _POLICY_REASON_MAX && r2 < _POLICY_REASON_MAX &&
                           r3 < _POLICY_REASON_MAX);
                    /* the ceiling and the forbidden set always win */
                    if (envs[e].ceiling == POLICY_CEILING_DENY) {
                        assert(!policy_reason_allows(r1) && !policy_reason_allows(r2) &&
                               !policy_reason_allows(r3));
                    }
                    if (envs[e].ceiling == POLICY_CEILING_ALLOWLIST) {
                        assert(r1 != POLICY_ALLOW_INTERNET && r2 != POLICY_ALLOW_INTERNET &&
                               r3 != POLICY_ALLOW_INTERNET);
                    }
                    if (policy_addr_is_forbidden(&envs[e], addrs[a])) {
                        assert(!policy_reason_allows(r2) && !policy_reason_allows(r3));
                    }
                }
            }
        }
    }
}

static void round_trip(json_t *(*render)(const struct policy *), const struct policy *p,
                       int (*parse)(const json_t *, struct policy **))
{
    json_t *j = render(p), *again;
    struct policy *p2 = NULL;

    assert(j);
    assert(parse(j, &p2) == 0);
    again = render(p2);
    assert(again && json_equal(j, again));
    json_decref(again);
    json_decref(j);
    policy_free(p2);
}

static int parse_native(const json_t *j, struct policy **ret)
{
    return policy_parse_native(j, true, ret, NULL);
}

static int parse_e2b(const json_t *j, struct policy **ret)
{
    return policy_parse_e2b(j, NULL, false, ret, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
    struct policy_error err;
    struct policy *p = NULL;

    if (!j) {
        return 0;
    }
    if (policy_parse_native(j, true, &p, &err) == 0) {
        poke_checks(p);
        round_trip(policy_to_native, p, parse_native);
        p = policy_free(p);
    } else {
        assert(err.message[0] != '\0');
    }
    if (json_is_object(j) &&
        policy_parse_e2b(json_object_get(j, "network"), json_object_get(j, "allow_internet_access"),
                         false, &p, &err) == 0) {
        poke_checks(p);
        round_trip(policy_to_e2b_network, p, parse_e2b);
        p = policy_free(p);
    }
    if (policy_parse_e2b(j, NULL, true, &p, &err) == 0) {
        poke_checks(p);
        round_trip(policy_to_e2b_network, p, parse_e2b);
        p = policy_free(p);
    }
    json_decref(j);
    return 0;
}
