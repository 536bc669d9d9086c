/* Unit tests for the DNS proxy's answer cache: hits, TTL ageing, expiry, what is not kept, bound.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "basic/macro.h"
#include "gw/dns-cache.h"

static struct dns_reply reply, got; /* large: off the stack */

static void reply_init(const char *qname)
{
    memset(&reply, 0, sizeof(reply));
    reply.flags = DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA;
    snprintf(reply.qname, sizeof(reply.qname), "%s", qname);
    reply.qtype = DNS_TYPE_A;
    reply.qclass = DNS_CLASS_IN;
}

static void add_a(const char *owner, uint8_t last, uint32_t ttl)
{
    struct dns_answer *a = &reply.answers[reply.n_answers++];
    snprintf(a->name, sizeof(a->name), "%s", owner);
    a->type = DNS_TYPE_A;
    a->ttl = ttl;
    a->a[0] = 198, a->a[1] = 18, a->a[2] = 1, a->a[3] = last;
}

static void add_cname(const char *owner, const char *target, uint32_t ttl)
{
    struct dns_answer *a = &reply.answers[reply.n_answers++];
    snprintf(a->name, sizeof(a->name), "%s", owner);
    a->type = DNS_TYPE_CNAME;
    a->ttl = ttl;
    snprintf(a->cname, sizeof(a->cname), "%s", target);
}

static void test_hit_and_age(void **state)
{
    struct dns_cache *c;
    usec_t t0 = 1000 * USEC_PER_SEC;

    assert_int_equal(dns_cache_new(0, &c), 0);
    reply_init("www.a.test");
    add_cname("www.a.test", "cdn.a.test", 100);
    add_a("cdn.a.test", 1, 30);
    add_a("cdn.a.test", 2, 1000); /* clamped to 300 */
    add_a("other.test", 9, 60);   /* not on the chain: never kept */
    assert_int_equal(dns_cache_put(c, &reply, 5, 300, t0), 1);
    assert_int_equal(dns_cache_count(c), 1);

    assert_false(dns_cache_get(c, "www.a.test", DNS_TYPE_AAAA, t0, &got));
    assert_false(dns_cache_get(c, "a.test", DNS_TYPE_A, t0, &got));
    assert_true(dns_cache_get(c, "www.a.test", DNS_TYPE_A, t0 + 10 * USEC_PER_SEC, &got));
    assert_string_equal(got.qname, "www.a.test");
    assert_int_equal(got.qtype, DNS_TYPE_A);
    assert_int_equal(got.qclass, DNS_CLASS_IN);
    assert_int_equal(got.rcode, DNS_RCODE_NOERROR);
    assert_int_equal(got.n_answers, 3);
    assert_int_equal(got.answers[0].type, DNS_TYPE_CNAME);
    assert_string_equal(got.answers[0].cname, "cdn.a.test");
    assert_int_equal(got.answers[0].ttl, 90);
    assert_int_equal(got.answers[1].ttl, 20);
    assert_int_equal(got.answers[2].ttl, 290);
    assert_int_equal(got.answers[2].a[3], 2);
    /* What the proxy builds from it re-walks to the same chain. */
    assert_int_equal(dns_reply_min_ttl(&got), 20);

    /* Lives as long as its smallest TTL, and at least 1 s is left on every record. */
    assert_true(dns_cache_get(c, "www.a.test", DNS_TYPE_A, t0 + 29 * USEC_PER_SEC + 999999, &got));
    assert_int_equal(got.answers[1].ttl, 1);
    assert_false(dns_cache_get(c, "www.a.test", DNS_TYPE_A, t0 + 30 * USEC_PER_SEC, &got));
    /* A clock that went back is no hit either. */
    assert_false(dns_cache_get(c, "www.a.test", DNS_TYPE_A, t0 - 1, &got));

    /* A new answer replaces the old one. */
    reply_init("www.a.test");
    add_a("www.a.test", 7, 1); /* clamped up to 5 */
    assert_int_equal(dns_cache_put(c, &reply, 5, 300, t0 + 40 * USEC_PER_SEC), 1);
    assert_int_equal(dns_cache_count(c), 1);
    assert_true(dns_cache_get(c, "www.a.test", DNS_TYPE_A, t0 + 40 * USEC_PER_SEC, &got));
    assert_int_equal(got.n_answers, 1);
    assert_int_equal(got.answers[0].a[3], 7);
    assert_int_equal(got.answers[0].ttl, 5);
    dns_cache_clear(c);
    assert_int_equal(dns_cache_count(c), 0);
    assert_false(dns_cache_get(c, "www.a.test", DNS_TYPE_A, t0 + 40 * USEC_PER_SEC, &got));
    dns_cache_free(c);
}

static void test_not_cacheable(void **state)
{
    struct dns_cache *c;

    assert_int_equal(dns_cache_new(0, &c), 0);
    reply_init("a.test");
    reply.rcode = DNS_RCODE_NXDOMAIN;
    assert_int_equal(dns_cache_put(c, &reply, 5, 300, 0), 0);
    reply_init("a.test"); /* NOERROR, no records */
    assert_int_equal(dns_cache_put(c, &reply, 5, 300, 0), 0);
    reply_init("a.test"); /* a chain that ends without an address */
    add_cname("a.test", "b.test", 60);
    assert_int_equal(dns_cache_put(c, &reply, 5, 300, 0), 0);
    reply_init("a.test"); /* truncated */
    add_a("a.test", 1, 60);
    reply.flags |= DNS_FLAG_TC;
    assert_int_equal(dns_cache_put(c, &reply, 5, 300, 0), 0);
    reply_init("a.test"); /* more records than an entry holds */
    for (int i = 0; i <= DNS_CACHE_RECORDS; i++) {
        add_a("a.test", (uint8_t)i, 60);
    }
    assert_int_equal(dns_cache_put(c, &reply, 5, 300, 0), 0);
    reply_init("a.test"); /* bad bounds */
    add_a("a.test", 1, 60);
    assert_int_equal(dns_cache_put(c, &reply, 0, 300, 0), 0);
    assert_int_equal(dns_cache_put(c, &reply, 10, 5, 0), 0);
    assert_int_equal(dns_cache_count(c), 0);
    dns_cache_free(c);
}

static void test_bound(void **state)
{
    struct dns_cache *c;
    char name[32];

    assert_int_equal(dns_cache_new(4, &c), 0);
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof(name), "n%d.test", i);
        reply_init(name);
        add_a(name, (uint8_t)i, (uint32_t)(100 + i));
        assert_int_equal(dns_cache_put(c, &reply, 5, 300, 0), 1);
    }
    /* Full: the one expiring first (n0) goes. */
    reply_init("new.test");
    add_a("new.test", 9, 200);
    assert_int_equal(dns_cache_put(c, &reply, 5, 300, 0), 1);
    assert_int_equal(dns_cache_count(c), 4);
    assert_false(dns_cache_get(c, "n0.test", DNS_TYPE_A, 0, &got));
    assert_true(dns_cache_get(c, "n1.test", DNS_TYPE_A, 0, &got));
    assert_true(dns_cache_get(c, "new.test", DNS_TYPE_A, 0, &got));
    dns_cache_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hit_and_age),
        cmocka_unit_test(test_not_cacheable),
        cmocka_unit_test(test_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
