#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/nft.h"

static const struct nft_sandbox plan = {
    .tap = "tap0",
    .guest_ip = "169.254.0.2",
    .guest_mac = "02:00:00:00:00:02",
    .host_ip = "169.254.0.1",
    .dns_port = 53,
    .gateway_port = 15001,
};

static void test_ruleset_names_the_plan(void **state)
{
    char *r = NULL;
    assert_int_equal(nft_sandbox_ruleset(&plan, &r), 0);
    /* Anti-spoofing on the tap's ingress, by MAC, ARP sender and IPv4 source. */
    assert_non_null(strstr(r, "hook ingress device \"tap0\""));
    assert_non_null(
        strstr(r, "ether saddr != 02:00:00:00:00:02 counter name \"spoofed_mac\" drop"));
    assert_non_null(strstr(r, "arp saddr ip != 169.254.0.2 counter name \"spoofed_arp\" drop"));
    assert_non_null(strstr(r, "ip saddr != 169.254.0.2 counter name \"spoofed_ip\" drop"));
    assert_non_null(strstr(r, "counter name \"not_ipv4\" drop"));
    /* Default drop everywhere; the only allowed pair is host side <-> guest. */
    assert_non_null(strstr(r, "oifname \"tap0\" ip saddr 169.254.0.1 ip daddr 169.254.0.2 accept"));
    assert_non_null(strstr(r, "chain guest_services"));
    assert_non_null(strstr(r, "hook forward priority filter; policy drop;"));
    /* Egress: guest TCP to anywhere but the host side goes to the gateway, which input
     * accepts only through the redirect; DNS only to the proxy; the rest counted. */
    assert_non_null(strstr(r, "type nat hook prerouting priority dstnat;"));
    assert_non_null(strstr(
        r, "iifname \"tap0\" ip daddr != 169.254.0.1 meta l4proto tcp redirect to :15001\n"));
    assert_non_null(strstr(r, "tcp dport 15001 ct status dnat accept\n"));
    assert_non_null(strstr(r, "ip daddr 169.254.0.1 udp dport 53 accept\n"));
    assert_non_null(strstr(r, "tcp dport 15001 counter name \"guest_direct\" drop\n"));
    assert_non_null(strstr(r, "meta l4proto udp counter name \"guest_udp\" drop\n"));
    assert_non_null(strstr(r, "meta l4proto icmp counter name \"guest_icmp\" drop\n"));
    /* The prerouting filter runs after conntrack (-200) and before the redirect (-100). */
    assert_non_null(strstr(r, "type filter hook prerouting priority -150; policy accept;"));
    for (const char *c = "guest_direct\0guest_udp\0guest_icmp\0spoofed_mac\0"
                         "guest_new\0";
         *c; c += strlen(c) + 1) {
        char decl[64];
        snprintf(decl, sizeof(decl), "counter %s {}", c);
        assert_non_null(strstr(r, decl));
    }
    /* Re-applying replaces both tables in the same transaction. */
    assert_non_null(strstr(r, "delete table netdev space\n"));
    assert_non_null(strstr(r, "delete table inet space\n"));
    free(r);
}

static void test_ruleset_refuses_what_is_not_an_address(void **state)
{
    char *r = NULL;
    struct nft_sandbox bad = plan;
    bad.guest_ip = "1.2.3.4 accept; drop";
    assert_int_equal(nft_sandbox_ruleset(&bad, &r), -EINVAL);
    bad = plan;
    bad.tap = "tap0\"";
    assert_int_equal(nft_sandbox_ruleset(&bad, &r), -EINVAL);
    bad = plan;
    bad.gateway_port = 0;
    assert_int_equal(nft_sandbox_ruleset(&bad, &r), -EINVAL);
    bad = plan;
    bad.host_ip = "";
    assert_int_equal(nft_sandbox_ruleset(&bad, &r), -EINVAL);
    assert_null(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ruleset_names_the_plan),
        cmocka_unit_test(test_ruleset_refuses_what_is_not_an_address),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
