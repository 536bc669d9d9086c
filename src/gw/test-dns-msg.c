/*
 * Unit tests for the DNS codec: one hand-built packet per rule in
 * dns-msg.h, both directions, and round trips through the builders.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "basic/macro.h"
#include "gw/dns-msg.h"

struct pkt {
    uint8_t b[8192];
    size_t n;
};

static void u8(struct pkt *p, uint8_t v)
{
    p->b[p->n++] = v;
}

static void u16(struct pkt *p, uint16_t v)
{
    u8(p, (uint8_t)(v >> 8));
    u8(p, (uint8_t)v);
}

static void u32(struct pkt *p, uint32_t v)
{
    u16(p, (uint16_t)(v >> 16));
    u16(p, (uint16_t)v);
}

static void raw(struct pkt *p, const void *d, size_t n)
{
    if (n == 0) {
        return;
    }
    memcpy(p->b + p->n, d, n);
    p->n += n;
}

/* Dotted name to labels, no terminator. */
static void labels(struct pkt *p, const char *name)
{
    while (*name) {
        const char *dot = strchr(name, '.');
        size_t l = dot ? (size_t)(dot - name) : strlen(name);

        u8(p, (uint8_t)l);
        raw(p, name, l);
        name += l + (dot ? 1 : 0);
    }
}

static void name(struct pkt *p, const char *n)
{
    labels(p, n);
    u8(p, 0);
}

static void header(struct pkt *p, uint16_t id, uint16_t flags, uint16_t qd, uint16_t an,
                   uint16_t ns, uint16_t ar)
{
    p->n = 0;
    u16(p, id);
    u16(p, flags);
    u16(p, qd);
    u16(p, an);
    u16(p, ns);
    u16(p, ar);
}

static void question(struct pkt *p, const char *n, uint16_t type)
{
    name(p, n);
    u16(p, type);
    u16(p, DNS_CLASS_IN);
}

static void opt(struct pkt *p, uint16_t udp, uint32_t ttl, const void *rdata, uint16_t rdlen)
{
    u8(p, 0);
    u16(p, DNS_TYPE_OPT);
    u16(p, udp);
    u32(p, ttl);
    u16(p, rdlen);
    raw(p, rdata, rdlen);
}

static void simple_query(struct pkt *p, const char *n, uint16_t type)
{
    header(p, 0x1234, DNS_FLAG_RD, 1, 0, 0, 0);
    question(p, n, type);
}

static int parse_q(const struct pkt *p)
{
    struct dns_query q;

    return dns_parse_query(p->b, p->n, &q);
}

static void test_query_ok(void **state)
{
    struct pkt p;
    struct dns_query q;

    simple_query(&p, "WwW.Example.COM", DNS_TYPE_A);
    assert_int_equal(dns_parse_query(p.b, p.n, &q), DNS_OK);
    assert_int_equal(q.id, 0x1234);
    assert_string_equal(q.name, "www.example.com");
    assert_int_equal(q.qtype, DNS_TYPE_A);
    assert_int_equal(q.qclass, DNS_CLASS_IN);
    assert_false(q.has_edns);
    assert_int_equal(dns_query_max_answer(&q), 512);
    /* The question is kept with its original case. */
    assert_int_equal(q.question_len, p.n - DNS_HEADER_LEN);
    assert_memory_equal(q.question, p.b + DNS_HEADER_LEN, q.question_len);

    simple_query(&p, "_dmarc.a-b.example", DNS_TYPE_HTTPS);
    assert_int_equal(dns_parse_query(p.b, p.n, &q), DNS_OK);
    assert_string_equal(q.name, "_dmarc.a-b.example");
}

static void test_query_edns(void **state)
{
    static const uint8_t cookie[] = { 0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8 };
    struct pkt p;
    struct dns_query q;
    uint8_t big[DNS_OPT_RDATA_MAX + 4] = {};

    header(&p, 1, DNS_FLAG_RD, 1, 0, 0, 1);
    question(&p, "example.com", DNS_TYPE_AAAA);
    opt(&p, 4096, 0x8000, cookie, sizeof(cookie));
    assert_int_equal(dns_parse_query(p.b, p.n, &q), DNS_OK);
    assert_true(q.has_edns);
    assert_true(q.edns_do);
    assert_int_equal(q.edns_udp_size, DNS_EDNS_UDP_SIZE);
    assert_int_equal(dns_query_max_answer(&q), DNS_EDNS_UDP_SIZE);

    /* udp size below 512 reads as 512 */
    header(&p, 1, 0, 1, 0, 0, 1);
    question(&p, "example.com", DNS_TYPE_A);
    opt(&p, 100, 0, NULL, 0);
    assert_int_equal(dns_parse_query(p.b, p.n, &q), DNS_OK);
    assert_int_equal(q.edns_udp_size, 512);
    assert_false(q.edns_do);

    /* version 1 */
    header(&p, 1, 0, 1, 0, 0, 1);
    question(&p, "example.com", DNS_TYPE_A);
    opt(&p, 1232, 0x00010000, NULL, 0);
    assert_int_equal(parse_q(&p), -DNS_E_OPT_VERSION);

    /* an option longer than the rdata */
    header(&p, 1, 0, 1, 0, 0, 1);
    question(&p, "example.com", DNS_TYPE_A);
    opt(&p, 1232, 0, (const uint8_t[]){ 0, 10, 0, 9, 1, 2, 3, 4 }, 8);
    assert_int_equal(parse_q(&p), -DNS_E_OPT);

    /* a partial option header */
    header(&p, 1, 0, 1, 0, 0, 1);
    question(&p, "example.com", DNS_TYPE_A);
    opt(&p, 1232, 0, (const uint8_t[]){ 0, 10, 0 }, 3);
    assert_int_equal(parse_q(&p), -DNS_E_OPT);

    /* options over the bound */
    header(&p, 1, 0, 1, 0, 0, 1);
    question(&p, "example.com", DNS_TYPE_A);
    big[0] = 0xFF;
    big[2] = (uint8_t)(DNS_OPT_RDATA_MAX >> 8);
    big[3] = (uint8_t)DNS_OPT_RDATA_MAX;
    opt(&p, 1232, 0, big, sizeof(big));
    assert_int_equal(parse_q(&p), -DNS_E_OPT);

    /* rdata past the end */
    header(&p, 1, 0, 1, 0, 0, 1);
    question(&p, "example.com", DNS_TYPE_A);
    opt(&p, 1232, 0, cookie, sizeof(cookie));
    p.b[p.n - sizeof(cookie) - 1] = 40;
    assert_int_equal(parse_q(&p), -DNS_E_TRUNCATED);

    /* an OPT with a name */
    header(&p, 1, 0, 1, 0, 0, 1);
    question(&p, "example.com", DNS_TYPE_A);
    name(&p, "x");
    u16(&p, DNS_TYPE_OPT);
    u16(&p, 1232);
    u32(&p, 0);
    u16(&p, 0);
    assert_int_equal(parse_q(&p), -DNS_E_SECTIONS);

    /* an additional record that is not OPT */
    header(&p, 1, 0, 1, 0, 0, 1);
    question(&p, "example.com", DNS_TYPE_A);
    u8(&p, 0);
    u16(&p, DNS_TYPE_A);
    u16(&p, 1);
    u32(&p, 0);
    u16(&p, 4);
    u32(&p, 0x01020304);
    assert_int_equal(parse_q(&p), -DNS_E_SECTIONS);
}

static void test_query_header(void **state)
{
    struct pkt p;

    simple_query(&p, "example.com", DNS_TYPE_A);
    p.b[2] |= 0x80; /* QR */
    assert_int_equal(parse_q(&p), -DNS_E_NOT_QUERY);
    simple_query(&p, "example.com", DNS_TYPE_A);
    p.b[2] |= 0x28; /* opcode 5 (UPDATE) */
    assert_int_equal(parse_q(&p), -DNS_E_OPCODE);
    simple_query(&p, "example.com", DNS_TYPE_A);
    p.b[2] |= 0x02; /* TC */
    assert_int_equal(parse_q(&p), -DNS_E_FLAGS);
    simple_query(&p, "example.com", DNS_TYPE_A);
    p.b[3] |= 0x40; /* Z */
    assert_int_equal(parse_q(&p), -DNS_E_FLAGS);
    simple_query(&p, "example.com", DNS_TYPE_A);
    p.b[3] |= 0x03; /* RCODE */
    assert_int_equal(parse_q(&p), -DNS_E_FLAGS);

    header(&p, 1, 0, 0, 0, 0, 0);
    assert_int_equal(parse_q(&p), -DNS_E_QDCOUNT);
    header(&p, 1, 0, 2, 0, 0, 0);
    question(&p, "a.example", DNS_TYPE_A);
    question(&p, "b.example", DNS_TYPE_A);
    assert_int_equal(parse_q(&p), -DNS_E_QDCOUNT);
    header(&p, 1, 0, 1, 1, 0, 0);
    question(&p, "a.example", DNS_TYPE_A);
    assert_int_equal(parse_q(&p), -DNS_E_SECTIONS);
    header(&p, 1, 0, 1, 0, 1, 0);
    question(&p, "a.example", DNS_TYPE_A);
    assert_int_equal(parse_q(&p), -DNS_E_SECTIONS);
    header(&p, 1, 0, 1, 0, 0, 2);
    question(&p, "a.example", DNS_TYPE_A);
    assert_int_equal(parse_q(&p), -DNS_E_SECTIONS);

    simple_query(&p, "example.com", DNS_TYPE_A);
    u8(&p, 0);
    assert_int_equal(parse_q(&p), -DNS_E_TRAILING);

    p.n = DNS_MSG_MAX + 1;
    assert_int_equal(parse_q(&p), -DNS_E_TOO_BIG);
}

static void test_query_truncated(void **state)
{
    struct pkt p;
    size_t full;

    header(&p, 1, 0, 1, 0, 0, 1);
    question(&p, "www.example.com", DNS_TYPE_A);
    opt(&p, 1232, 0, (const uint8_t[]){ 0, 10, 0, 2, 1, 2 }, 6);
    full = p.n;
    assert_int_equal(parse_q(&p), DNS_OK);
    /* Every proper prefix fails, and with an error, not a crash. */
    for (p.n = 0; p.n < full; p.n++) {
        assert_true(parse_q(&p) < 0);
    }
}

static void test_query_names(void **state)
{
    struct pkt p;
    char l63[64], l64[65], longname[300];

    /* compression pointer: there is nothing earlier in a query to point at */
    header(&p, 1, 0, 1, 0, 0, 0);
    u8(&p, 3);
    raw(&p, "www", 3);
    u16(&p, 0xC00C);
    u16(&p, 1);
    u16(&p, 1);
    assert_int_equal(parse_q(&p), -DNS_E_COMPRESSION);

    /* 0x40 and 0x80 label types */
    header(&p, 1, 0, 1, 0, 0, 0);
    u8(&p, 0x41);
    u8(&p, 'a');
    u8(&p, 0);
    u16(&p, 1);
    u16(&p, 1);
    assert_int_equal(parse_q(&p), -DNS_E_LABEL_TYPE);
    p.b[12] = 0x81;
    assert_int_equal(parse_q(&p), -DNS_E_LABEL_TYPE);

    /* a '.' inside a label would alias "a.b" the name; NUL, space, high bytes */
    static const uint8_t bad_chars[] = { '.', 0, ' ', 0x80, '*', '/' };

    for (const uint8_t *bad = bad_chars; bad < bad_chars + sizeof(bad_chars); bad++) {
        header(&p, 1, 0, 1, 0, 0, 0);
        u8(&p, 3);
        u8(&p, 'a');
        u8(&p, *bad);
        u8(&p, 'b');
        name(&p, "example");
        u16(&p, 1);
        u16(&p, 1);
        assert_int_equal(parse_q(&p), -DNS_E_LABEL_CHARS);
    }

    /* 63-byte labels are fine; the length byte cannot say 64 without being a label type */
    memset(l63, 'a', 63);
    l63[63] = '\0';
    snprintf(longname, sizeof(longname), "%s.example", l63);
    simple_query(&p, longname, DNS_TYPE_A);
    assert_int_equal(parse_q(&p), DNS_OK);
    memset(l64, 'a', 64);
    l64[64] = '\0';
    (void)l64;

    /* 253 presentation bytes (255 on the wire) pass, one more fails */
    snprintf(longname, sizeof(longname), "%s.%s.%s.%.61s", l63, l63, l63, l63);
    assert_int_equal(strlen(longname), 253);
    simple_query(&p, longname, DNS_TYPE_A);
    assert_int_equal(parse_q(&p), DNS_OK);
    snprintf(longname, sizeof(longname), "%s.%s.%s.%.62s", l63, l63, l63, l63);
    simple_query(&p, longname, DNS_TYPE_A);
    assert_int_equal(parse_q(&p), -DNS_E_NAME_TOO_LONG);

    /* the root */
    header(&p, 1, 0, 1, 0, 0, 0);
    u8(&p, 0);
    u16(&p, DNS_TYPE_A);
    u16(&p, DNS_CLASS_IN);
    assert_int_equal(parse_q(&p), -DNS_E_ROOT);
}

static void test_query_type_class(void **state)
{
    static const uint16_t bad[] = { 0, DNS_TYPE_OPT, 249, 250, 251, 252, 253, 254, DNS_TYPE_ANY };
    static const uint16_t good[] = { DNS_TYPE_A,     DNS_TYPE_AAAA, DNS_TYPE_CNAME, 15, 16, 33,
                                     DNS_TYPE_HTTPS, 256,           65535 };
    struct pkt p;

    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        simple_query(&p, "example.com", bad[i]);
        assert_int_equal(parse_q(&p), -DNS_E_QTYPE);
    }
    for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
        simple_query(&p, "example.com", good[i]);
        assert_int_equal(parse_q(&p), DNS_OK);
    }
    header(&p, 1, 0, 1, 0, 0, 0);
    name(&p, "example.com");
    u16(&p, DNS_TYPE_A);
    u16(&p, 3); /* CHAOS */
    assert_int_equal(parse_q(&p), -DNS_E_QCLASS);
}

/* ---- replies ---- */

static void rr_head(struct pkt *p, uint16_t ptr_or_0, const char *n, uint16_t type, uint32_t ttl,
                    uint16_t rdlen)
{
    if (ptr_or_0) {
        u16(p, 0xC000 | ptr_or_0);
    } else {
        name(p, n);
    }
    u16(p, type);
    u16(p, DNS_CLASS_IN);
    u32(p, ttl);
    u16(p, rdlen);
}

static void reply_start(struct pkt *p, uint16_t id, const char *qn, uint16_t qtype, uint16_t an,
                        uint16_t ns, uint16_t ar)
{
    header(p, id, DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA, 1, an, ns, ar);
    question(p, qn, qtype);
}

static void a_rr(struct pkt *p, uint16_t ptr, uint32_t ttl, uint32_t addr)
{
    rr_head(p, ptr, NULL, DNS_TYPE_A, ttl, 4);
    u32(p, addr);
}

/* www.example.com CNAME cdn.example.net; cdn.example.net A x2 plus HTTPS; poison A for
 * evil.example; authority NS; additional OPT. */
static void build_cdn_reply(struct pkt *p)
{
    size_t target;

    reply_start(p, 0xBEEF, "www.example.com", DNS_TYPE_A, 5, 1, 1);
    rr_head(p, 12, NULL, DNS_TYPE_CNAME, 300, 17);
    target = p->n;
    name(p, "cdn.example.net");
    a_rr(p, (uint16_t)target, 60, 0xC6120001);
    a_rr(p, (uint16_t)target, 0x80000000u, 0xC6120002);
    rr_head(p, (uint16_t)target, NULL, DNS_TYPE_HTTPS, 60, 3);
    u16(p, 1);
    u8(p, 0);
    rr_head(p, 0, "evil.example", DNS_TYPE_A, 60, 4);
    u32(p, 0x7F000001);
    rr_head(p, 0, "example.com", 2 /* NS */, 60, 2);
    u16(p, 0xC000 | 12);
    opt(p, 1232, 0, NULL, 0);
}

static void test_reply_cdn(void **state)
{
    struct pkt p;
    struct dns_reply r;

    build_cdn_reply(&p);
    assert_int_equal(dns_parse_reply(p.b, p.n, &r), DNS_OK);
    assert_int_equal(r.id, 0xBEEF);
    assert_int_equal(r.rcode, DNS_RCODE_NOERROR);
    assert_string_equal(r.qname, "www.example.com");
    assert_int_equal(r.n_answers, 4); /* CNAME, 2 A, evil A */
    assert_int_equal(r.n_svcb_stripped, 1);
    assert_string_equal(r.answers[0].name, "www.example.com");
    assert_string_equal(r.answers[0].cname, "cdn.example.net");
    assert_string_equal(r.answers[1].name, "cdn.example.net");
    assert_int_equal(r.answers[1].ttl, 60);
    assert_int_equal(r.answers[2].ttl, 0); /* top bit set */
    assert_true(dns_reply_matches(&r, 0xBEEF, "www.example.com", DNS_TYPE_A, DNS_CLASS_IN));
    assert_false(dns_reply_matches(&r, 0xBEEE, "www.example.com", DNS_TYPE_A, DNS_CLASS_IN));
    assert_false(dns_reply_matches(&r, 0xBEEF, "www.example.org", DNS_TYPE_A, DNS_CLASS_IN));
    assert_false(dns_reply_matches(&r, 0xBEEF, "www.example.com", DNS_TYPE_AAAA, DNS_CLASS_IN));
    assert_int_equal(dns_reply_min_ttl(&r), 0);

    /* prefixes fail cleanly */
    for (size_t full = p.n, n = 0; n < full; n++) {
        assert_true(dns_parse_reply(p.b, n, &r) < 0);
    }
}

static void test_reply_pointers(void **state)
{
    struct pkt p;
    struct dns_reply r;
    size_t at;

    /* forward pointer */
    reply_start(&p, 1, "example.com", DNS_TYPE_A, 1, 0, 0);
    a_rr(&p, 200, 60, 1);
    assert_int_equal(dns_parse_reply(p.b, p.n, &r), -DNS_E_POINTER);
    /* pointer into the header */
    reply_start(&p, 1, "example.com", DNS_TYPE_A, 1, 0, 0);
    a_rr(&p, 4, 60, 1);
    assert_int_equal(dns_parse_reply(p.b, p.n, &r), -DNS_E_POINTER);
    /* pointer to itself */
    reply_start(&p, 1, "example.com", DNS_TYPE_A, 1, 0, 0);
    a_rr(&p, (uint16_t)p.n, 60, 1);
    assert_int_equal(dns_parse_reply(p.b, p.n, &r), -DNS_E_POINTER);
    /* a loop: x -> y, y -> x (y is earlier, so x is a forward jump from y) */
    reply_start(&p, 1, "example.com", DNS_TYPE_A, 2, 0, 0);
    at = p.n;
    u8(&p, 1);
    u8(&p, 'a');
    u16(&p, (uint16_t)(0xC000 | (at + 8))); /* forward: refused */
    u16(&p, 1);
    u16(&p, 1);
    u32(&p, 0);
    u16(&p, 0);
    assert_true(dns_parse_reply(p.b, p.n, &r) < 0);
    /* a label then a pointer back into the same name */
    reply_start(&p, 1, "example.com", DNS_TYPE_A, 1, 0, 0);
    at = p.n;
    u8(&p, 1);
    u8(&p, 'a');
    u16(&p, (uint16_t)(0xC000 | at));
    u16(&p, 1);
    u16(&p, 1);
    u32(&p, 0);
    u16(&p, 4);
    u32(&p, 0);
    assert_int_equal(dns_parse_reply(p.b, p.n, &r), -DNS_E_POINTER);
    /* a legitimate chain of two backward pointers */
    reply_start(&p, 1, "example.com", DNS_TYPE_A, 2, 0, 0);
    at = p.n;
    u8(&p, 3);
    raw(&p, "www", 3);
    u16(&p, 0xC000 | 12);
    u16(&p, DNS_TYPE_CNAME);
    u16(&p, 1);
    u32(&p, 5);
    u16(&p, 2);
    u16(&p, 0xC000 | 12);
    u8(&p, 1);
    u8(&p, 'x');
    u16(&p, (uint16_t)(0xC000 | at));
    u16(&p, DNS_TYPE_A);
    u16(&p, 1);
    u32(&p, 5);
    u16(&p, 4);
    u32(&p, 0x01020304);
    assert_int_equal(dns_parse_reply(p.b, p.n, &r), DNS_OK);
    assert_string_equal(r.answers[0].name, "www.example.com");
    assert_string_equal(r.answers[0].cname, "example.com");
    assert_string_equal(r.answers[1].name, "x.www.example.com");
    /* compression in the question of a reply */
    header(&p, 1, DNS_FLAG_QR, 1, 0, 0, 0);
    u16(&p, 0xC000 | 12);
    u16(&p, 1);
    u16(&p, 1);
    assert_int_equal(dns_parse_reply(p.b, p.n, &r), -DNS_E_COMPRESSION);
}

static void test_reply_rdata(void **state)
{
    struct pkt p;
    struct dns_reply r;

    reply_start(&p, 1, "example.com", DNS_TYPE_A, 1, 0, 0);
    rr_head(&p, 12, NULL, DNS_TYPE_A, 60, 5);
    u32(&p, 0);
    u8(&p, 0);
    assert_int_equal(dns_parse_reply(p.b, p.n, &r), -DNS_E_RDATA);
    reply_start(&p, 1, "example.com", DNS_TYPE_AAAA, 1, 0, 0);
    rr_head(&p, 12, NULL, DNS_TYPE_AAAA, 60, 4);
    u32(&p, 0);
    assert_int_equal(dns_parse_reply(p.b, p.n, &r), -DNS_E_RDATA);
    /* CNAME rdata with a byte after the name */
    reply_start(&p, 1, "example.com", DNS_TYPE_A, 1, 0, 0);
    rr_head(&p, 12, NULL, DNS_TYPE_CNAME, 60, 4);
    u16(&p, 0xC000 | 12);
    u16(&p, 0);
    assert_int_equal(dns_parse_reply(p.b, p.n, &r), -DNS_E_RDATA);
    /* CNAME whose name runs past its rdata */
    reply_start(&p, 1, "example.com", DNS_TYPE_A, 1, 0, 0);
    rr_head(&p, 12, NULL, DNS_TYPE_CNAME, 60, 2);
    name(&p, "abc");
    assert_true(dns_parse_reply(p.b, p.n, &r) < 0);
    /* rdata past the end */
    reply_start(&p, 1, "example.com", DNS_TYPE_A, 1, 0, 0);
    rr_head(&p, 12, NULL, DNS_TYPE_A, 60, 4);
    u16(&p, 0);
    assert_int_equal(dns_parse_reply(p.b, p.n, &r), -DNS_E_TRUNCATED);
    /* a query is not a reply */
    simple_query(&p, "example.com", DNS_TYPE_A);
    assert_int_equal(dns_parse_reply(p.b, p.n, &r), -DNS_E_NOT_QUERY);
    /* trailing bytes */
    reply_start(&p, 1, "example.com", DNS_TYPE_A, 1, 0, 0);
    a_rr(&p, 12, 60, 1);
    u8(&p, 0);
    assert_int_equal(dns_parse_reply(p.b, p.n, &r), -DNS_E_TRAILING);
    /* two OPT records; an OPT in the authority section */
    reply_start(&p, 1, "example.com", DNS_TYPE_A, 0, 0, 2);
    opt(&p, 1232, 0, NULL, 0);
    opt(&p, 1232, 0, NULL, 0);
    assert_int_equal(dns_parse_reply(p.b, p.n, &r), -DNS_E_OPT);
    reply_start(&p, 1, "example.com", DNS_TYPE_A, 0, 1, 0);
    opt(&p, 1232, 0, NULL, 0);
    assert_int_equal(dns_parse_reply(p.b, p.n, &r), -DNS_E_OPT);
    /* too many records */
    reply_start(&p, 1, "example.com", DNS_TYPE_A, DNS_RECORDS_MAX, 1, 0);
    assert_int_equal(dns_parse_reply(p.b, p.n, &r), -DNS_E_TOO_MANY_RECORDS);
}

static void test_reply_limits(void **state)
{
    struct pkt p;
    struct dns_reply r;

    /* more A records than we keep: the rest are counted as skipped */
    reply_start(&p, 1, "example.com", DNS_TYPE_A, DNS_ANSWERS_MAX + 3, 0, 0);
    for (unsigned i = 0; i < DNS_ANSWERS_MAX + 3; i++) {
        a_rr(&p, 12, 60, 0xC6120000 + i);
    }
    assert_int_equal(dns_parse_reply(p.b, p.n, &r), DNS_OK);
    assert_int_equal(r.n_answers, DNS_ANSWERS_MAX);
    assert_int_equal(r.n_skipped, 3);
    /* other classes and types and odd owner names are skipped */
    reply_start(&p, 1, "example.com", DNS_TYPE_A, 3, 0, 0);
    u16(&p, 0xC000 | 12);
    u16(&p, DNS_TYPE_A);
    u16(&p, 3);
    u32(&p, 1);
    u16(&p, 4);
    u32(&p, 1);
    rr_head(&p, 12, NULL, 16 /* TXT */, 60, 2);
    u8(&p, 1);
    u8(&p, 'x');
    u8(&p, 3);
    raw(&p, "a b", 3);
    u16(&p, 0xC000 | 12);
    u16(&p, DNS_TYPE_A);
    u16(&p, 1);
    u32(&p, 1);
    u16(&p, 4);
    u32(&p, 1);
    assert_int_equal(dns_parse_reply(p.b, p.n, &r), DNS_OK);
    assert_int_equal(r.n_answers, 0);
    assert_int_equal(r.n_skipped, 3);
}

struct collect {
    char names[16][DNS_NAME_MAX + 1];
    uint16_t types[16];
    size_t n;
};

static void collect_cb(const struct dns_answer *a, void *userdata)
{
    struct collect *c = userdata;

    snprintf(c->names[c->n], sizeof(c->names[0]), "%s", a->name);
    c->types[c->n++] = a->type;
}

static void test_reply_chain(void **state)
{
    struct pkt p;
    struct dns_reply r;
    struct collect c = {};
    size_t t1, t2;

    build_cdn_reply(&p);
    assert_int_equal(dns_parse_reply(p.b, p.n, &r), DNS_OK);
    dns_reply_foreach_chain(&r, collect_cb, &c);
    /* the poison record for evil.example is not on the chain */
    assert_int_equal(c.n, 3);
    assert_int_equal(c.types[0], DNS_TYPE_CNAME);
    assert_string_equal(c.names[1], "cdn.example.net");
    assert_string_equal(c.names[2], "cdn.example.net");

    /* a CNAME loop a -> b -> a ends when it comes back to a, with no addresses */
    reply_start(&p, 1, "a.example", DNS_TYPE_A, 3, 0, 0);
    rr_head(&p, 12, NULL, DNS_TYPE_CNAME, 60, 11);
    t1 = p.n;
    name(&p, "b.example");
    rr_head(&p, (uint16_t)t1, NULL, DNS_TYPE_CNAME, 60, 2);
    u16(&p, 0xC000 | 12);
    t2 = p.n;
    (void)t2;
    a_rr(&p, 12, 60, 1);
    assert_int_equal(dns_parse_reply(p.b, p.n, &r), DNS_OK);
    memset(&c, 0, sizeof(c));
    dns_reply_foreach_chain(&r, collect_cb, &c);
    assert_int_equal(c.n, 2);
    for (size_t i = 0; i < c.n; i++) {
        assert_int_equal(c.types[i], DNS_TYPE_CNAME);
    }
    /* an A for the asked name next to a CNAME for it is ignored (CNAME wins) */
    assert_int_equal(dns_reply_min_ttl(&r), 60);
}

/* ---- builders ---- */

static void test_build_error(void **state)
{
    struct pkt p;
    struct dns_query q;
    struct dns_reply r;
    uint8_t out[512];
    ssize_t n;

    header(&p, 0x4242, DNS_FLAG_RD | DNS_FLAG_CD, 1, 0, 0, 1);
    question(&p, "Forbidden.Example", DNS_TYPE_A);
    opt(&p, 1232, 0x8000, NULL, 0);
    assert_int_equal(dns_parse_query(p.b, p.n, &q), DNS_OK);
    n = dns_build_error(&q, DNS_RCODE_REFUSED, out, sizeof(out));
    assert_true(n > 0);
    assert_int_equal(dns_parse_reply(out, (size_t)n, &r), DNS_OK);
    assert_int_equal(r.id, 0x4242);
    assert_int_equal(r.rcode, DNS_RCODE_REFUSED);
    assert_true(r.flags & DNS_FLAG_RD);
    assert_true(r.flags & DNS_FLAG_CD);
    assert_true(r.flags & DNS_FLAG_RA);
    assert_false(r.flags & DNS_FLAG_AA);
    assert_true(dns_reply_matches(&r, 0x4242, "forbidden.example", DNS_TYPE_A, DNS_CLASS_IN));
    /* the question keeps the guest's letter case */
    assert_memory_equal(out + DNS_HEADER_LEN, q.question, q.question_len);
    n = dns_build_error(&q, DNS_RCODE_NXDOMAIN, out, sizeof(out));
    assert_int_equal(dns_parse_reply(out, (size_t)n, &r), DNS_OK);
    assert_int_equal(r.rcode, DNS_RCODE_NXDOMAIN);
    assert_int_equal(dns_build_error(&q, DNS_RCODE_REFUSED, out, 20), -DNS_E_BUFFER);
    assert_int_equal(dns_build_error(&q, 16, out, sizeof(out)), -DNS_E_ARGS);
}

static void test_build_query(void **state)
{
    uint8_t out[512];
    struct dns_query q;
    ssize_t n;

    n = dns_build_query("www.example.com", DNS_TYPE_AAAA, 0x7777, out, sizeof(out));
    assert_true(n > 0);
    assert_int_equal(dns_parse_query(out, (size_t)n, &q), DNS_OK);
    assert_int_equal(q.id, 0x7777);
    assert_string_equal(q.name, "www.example.com");
    assert_int_equal(q.qtype, DNS_TYPE_AAAA);
    assert_true(q.has_edns);
    assert_true(q.flags & DNS_FLAG_RD);
    assert_int_equal(dns_build_query("", DNS_TYPE_A, 1, out, sizeof(out)), -DNS_E_ARGS);
    assert_int_equal(dns_build_query("a..b", DNS_TYPE_A, 1, out, sizeof(out)), -DNS_E_ARGS);
    assert_int_equal(dns_build_query("a.b.", DNS_TYPE_A, 1, out, sizeof(out)), -DNS_E_ARGS);
    assert_int_equal(dns_build_query("a b", DNS_TYPE_A, 1, out, sizeof(out)), -DNS_E_ARGS);
    assert_int_equal(dns_build_query("a.b", DNS_TYPE_ANY, 1, out, sizeof(out)), -DNS_E_ARGS);
    assert_int_equal(dns_build_query("a.b", DNS_TYPE_A, 1, out, 16), -DNS_E_BUFFER);
}

static void test_build_reply(void **state)
{
    struct pkt p, qp;
    struct dns_query q;
    struct dns_reply up, back;
    struct collect c = {};
    uint8_t out[1232];
    ssize_t n;

    header(&qp, 0x0101, DNS_FLAG_RD, 1, 0, 0, 0);
    question(&qp, "www.EXAMPLE.com", DNS_TYPE_A);
    assert_int_equal(dns_parse_query(qp.b, qp.n, &q), DNS_OK);
    build_cdn_reply(&p);
    assert_int_equal(dns_parse_reply(p.b, p.n, &up), DNS_OK);

    n = dns_build_reply(&q, &up, 30, 120, out, dns_query_max_answer(&q));
    assert_true(n > 0);
    assert_int_equal(dns_parse_reply(out, (size_t)n, &back), DNS_OK);
    assert_int_equal(back.id, 0x0101);
    assert_false(back.flags & DNS_FLAG_TC);
    assert_int_equal(back.n_svcb_stripped, 0);
    assert_int_equal(back.n_answers, 3); /* no evil.example, no HTTPS */
    assert_int_equal(back.answers[0].type, DNS_TYPE_CNAME);
    assert_int_equal(back.answers[0].ttl, 120); /* 300 clamped */
    assert_int_equal(back.answers[1].ttl, 60);
    assert_int_equal(back.answers[2].ttl, 30); /* 0 clamped */
    assert_string_equal(back.answers[2].name, "cdn.example.net");
    assert_memory_equal(back.answers[1].a, ((const uint8_t[]){ 198, 18, 0, 1 }), 4);
    dns_reply_foreach_chain(&back, collect_cb, &c);
    assert_int_equal(c.n, 3);

    /* too small: what fits, and TC */
    n = dns_build_reply(&q, &up, 30, 120, out, (size_t)q.question_len + DNS_HEADER_LEN + 40);
    assert_true(n > 0);
    assert_int_equal(dns_parse_reply(out, (size_t)n, &back), DNS_OK);
    assert_true(back.flags & DNS_FLAG_TC);
    assert_int_equal(back.n_answers, 1);

    /* SERVFAIL passes through as SERVFAIL, other rcodes become SERVFAIL */
    up.rcode = DNS_RCODE_REFUSED;
    n = dns_build_reply(&q, &up, 30, 120, out, sizeof(out));
    assert_int_equal(dns_parse_reply(out, (size_t)n, &back), DNS_OK);
    assert_int_equal(back.rcode, DNS_RCODE_SERVFAIL);
    assert_int_equal(back.n_answers, 0);
    up.rcode = DNS_RCODE_NOERROR;

    /* mismatched question, or bad clamp */
    assert_int_equal(dns_build_reply(&q, &up, 121, 120, out, sizeof(out)), -DNS_E_ARGS);
    up.qtype = DNS_TYPE_AAAA;
    assert_int_equal(dns_build_reply(&q, &up, 30, 120, out, sizeof(out)), -DNS_E_ARGS);
}

static void test_error_str(void **state)
{
    for (int e = 0; e < _DNS_E_MAX; e++) {
        assert_string_not_equal(dns_error_str(-e), "unknown error");
    }
    assert_string_equal(dns_error_str(-_DNS_E_MAX), "unknown error");
    assert_string_equal(dns_error_str(-DNS_E_POINTER_LOOP), "compression pointer loop");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_query_ok),     cmocka_unit_test(test_query_edns),
        cmocka_unit_test(test_query_header), cmocka_unit_test(test_query_truncated),
        cmocka_unit_test(test_query_names),  cmocka_unit_test(test_query_type_class),
        cmocka_unit_test(test_reply_cdn),    cmocka_unit_test(test_reply_pointers),
        cmocka_unit_test(test_reply_rdata),  cmocka_unit_test(test_reply_limits),
        cmocka_unit_test(test_reply_chain),  cmocka_unit_test(test_build_error),
        cmocka_unit_test(test_build_query),  cmocka_unit_test(test_build_reply),
        cmocka_unit_test(test_error_str),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
