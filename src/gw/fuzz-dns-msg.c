/*
 * libFuzzer target for the DNS codec (dns-msg.h). The input is parsed as a
 * guest query and as an upstream reply. Every query that parses must give
 * an error answer and an upstream query that re-parse; every reply that
 * parses is rebuilt against a query for its question, and the rebuilt
 * answer must re-parse, match the query, and carry only chain records with
 * clamped TTLs. Build with -Dfuzzers=true and clang.
 */
#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "gw/dns-msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_query(const uint8_t *data, size_t size)
{
    struct dns_query q, q2;
    struct dns_reply r;
    uint8_t out[DNS_MSG_MAX];
    ssize_t n;

    if (dns_parse_query(data, size, &q) != DNS_OK) {
        return;
    }
    assert(strlen(q.name) > 0 && strlen(q.name) <= DNS_NAME_MAX);
    for (const char *c = q.name; *c; c++) {
        assert(!(*c >= 'A' && *c <= 'Z'));
    }
    n = dns_build_error(&q, DNS_RCODE_REFUSED, out, dns_query_max_answer(&q));
    assert(n > 0);
    assert(dns_parse_reply(out, (size_t)n, &r) == DNS_OK);
    assert(dns_reply_matches(&r, q.id, q.name, q.qtype, q.qclass));
    assert(r.rcode == DNS_RCODE_REFUSED && r.n_answers == 0);

    n = dns_build_query(q.name, q.qtype, (uint16_t)~q.id, out, sizeof(out));
    assert(n > 0);
    assert(dns_parse_query(out, (size_t)n, &q2) == DNS_OK);
    assert(strcmp(q2.name, q.name) == 0 && q2.qtype == q.qtype && q2.id == (uint16_t)~q.id);
}

struct chain_check {
    const struct dns_reply *reply;
    uint32_t lo, hi;
    bool seen[DNS_ANSWERS_MAX];
};

static void chain_cb(const struct dns_answer *a, void *userdata)
{
    struct chain_check *c = userdata;

    assert(a->ttl >= c->lo && a->ttl <= c->hi);
    c->seen[a - c->reply->answers] = true;
}

static void check_reply(const uint8_t *data, size_t size)
{
    struct dns_reply r, back;
    struct dns_query q;
    uint8_t qbuf[DNS_MSG_MAX], out[DNS_MSG_MAX];
    struct chain_check c = { .lo = 10, .hi = 300 };
    ssize_t n;

    if (dns_parse_reply(data, size, &r) != DNS_OK) {
        return;
    }
    assert(r.n_answers <= DNS_ANSWERS_MAX);
    /* Only questions a guest could have asked get rebuilt answers. */
    n = dns_build_query(r.qname, r.qtype, r.id, qbuf, sizeof(qbuf));
    if (n < 0 || r.qclass != DNS_CLASS_IN) {
        return;
    }
    assert(dns_parse_query(qbuf, (size_t)n, &q) == DNS_OK);
    assert(dns_reply_matches(&r, q.id, q.name, q.qtype, q.qclass));
    for (size_t lim = 512; lim <= DNS_EDNS_UDP_SIZE; lim += DNS_EDNS_UDP_SIZE - 512) {
        n = dns_build_reply(&q, &r, c.lo, c.hi, out, lim);
        assert(n > 0 && (size_t)n <= lim);
        assert(dns_parse_reply(out, (size_t)n, &back) == DNS_OK);
        assert(dns_reply_matches(&back, q.id, q.name, q.qtype, q.qclass));
        assert(back.n_svcb_stripped == 0 && back.n_skipped == 0);
        memset(c.seen, 0, sizeof(c.seen));
        c.reply = &back;
        dns_reply_foreach_chain(&back, chain_cb, &c);
        /* everything in the rebuilt answer is on its chain */
        for (size_t i = 0; i < back.n_answers; i++) {
            assert(c.seen[i]);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_query(data, size);
    check_reply(data, size);
    return 0;
}
