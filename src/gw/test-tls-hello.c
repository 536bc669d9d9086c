/*
 * Unit tests for the ClientHello parser (tls-hello.h): real hellos (made
 * by OpenSSL here, and captured from curl, openssl s_client, Python and
 * Node into the fuzz seed corpus, whose directory is argv[1]), each cut at
 * every length and re-split into records of every small size; then one
 * hand-built hello per rule of tls-hello.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "basic/fileio.h"
#include "basic/macro.h"
#include "gw/tls-hello.h"

static const char *corpus_dir = "tests/fuzz/fuzz-tls-hello";

struct buf {
    uint8_t b[TLS_HELLO_MAX + 4096];
    size_t n;
};

static void u8(struct buf *p, uint8_t v)
{
    assert_true(p->n < sizeof(p->b));
    p->b[p->n++] = v;
}

static void u16(struct buf *p, size_t v)
{
    u8(p, (uint8_t)(v >> 8));
    u8(p, (uint8_t)v);
}

static void u24(struct buf *p, size_t v)
{
    u8(p, (uint8_t)(v >> 16));
    u16(p, v & 0xffff);
}

static void raw(struct buf *p, const void *d, size_t n)
{
    assert_true(p->n + n <= sizeof(p->b));
    if (n > 0) {
        memcpy(p->b + p->n, d, n);
    }
    p->n += n;
}

/* ---- real hellos from OpenSSL, through a memory BIO ---- */

/* The first flight of an OpenSSL client: its ClientHello record(s). */
static void openssl_hello(const char *sni, const char *alpn_csv, int max_version, struct buf *out)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl;
    BIO *rbio, *wbio;
    uint8_t alpn[64];
    size_t alpn_len = 0;
    int r;

    assert_non_null(ctx);
    if (max_version) {
        assert_int_equal(SSL_CTX_set_max_proto_version(ctx, max_version), 1);
    }
    ssl = SSL_new(ctx);
    assert_non_null(ssl);
    if (sni) {
        assert_int_equal(SSL_set_tlsext_host_name(ssl, sni), 1);
    }
    for (const char *p = alpn_csv; p && *p;) {
        size_t l = strcspn(p, ",");

        alpn[alpn_len++] = (uint8_t)l;
        memcpy(alpn + alpn_len, p, l);
        alpn_len += l;
        p += l + (p[l] == ',');
    }
    if (alpn_len) {
        assert_int_equal(SSL_set_alpn_protos(ssl, alpn, (unsigned)alpn_len), 0);
    }
    rbio = BIO_new(BIO_s_mem());
    wbio = BIO_new(BIO_s_mem());
    SSL_set_bio(ssl, rbio, wbio);
    SSL_set_connect_state(ssl);
    r = SSL_do_handshake(ssl);
    assert_int_equal(SSL_get_error(ssl, r), SSL_ERROR_WANT_READ);
    out->n = 0;
    r = BIO_read(wbio, out->b, (int)sizeof(out->b));
    assert_true(r > 0);
    out->n = (size_t)r;
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    ERR_clear_error();
}

/*
 * The same handshake bytes in records of `frag` bytes each (the input
 * must be one record holding exactly the ClientHello).
 */
static void refragment(const struct buf *in, size_t frag, struct buf *out)
{
    const uint8_t *hs = in->b + 5;
    size_t n = in->n - 5;

    out->n = 0;
    for (size_t off = 0; off < n; off += frag) {
        size_t l = MIN(frag, n - off);

        u8(out, 22);
        u8(out, 3);
        u8(out, 1);
        u16(out, l);
        raw(out, hs + off, l);
    }
}

/* Every strict prefix asks for more; the whole parses to the same result. */
static void check_prefixes(const struct buf *b, const struct tls_hello *want)
{
    struct tls_hello h;

    for (size_t i = 0; i < b->n; i++) {
        int r = tls_hello_parse(b->b, i, &h);

        if (r != -EAGAIN) {
            fail_msg("prefix of %zu/%zu bytes: %d", i, b->n, r);
        }
    }
    assert_int_equal(tls_hello_parse(b->b, b->n, &h), 0);
    assert_memory_equal(&h, want, sizeof(h));
}

static void check_real(const struct buf *b, const char *sni, bool h11, bool h2)
{
    struct tls_hello h, want = { .offers_http11 = h11, .offers_h2 = h2 };
    struct buf split;

    if (sni) {
        want.has_sni = true;
        snprintf(want.sni, sizeof(want.sni), "%s", sni);
    }
    assert_int_equal(tls_hello_parse(b->b, b->n, &h), 0);
    assert_int_equal(h.has_sni, want.has_sni);
    assert_string_equal(h.sni, want.sni);
    assert_int_equal(h.offers_http11, h11);
    assert_int_equal(h.offers_h2, h2);
    assert_false(h.has_ech);
    check_prefixes(b, &want);
    /* Bytes after the ClientHello's record (early data, say) are not looked at. */
    struct buf more = *b;
    raw(&more, "\x17\x03\x03\x00\x01x", 6);
    assert_int_equal(tls_hello_parse(more.b, more.n, &h), 0);
    /* The same message over many records, down to one byte each. */
    for (size_t frag = 1; frag <= 64; frag++) {
        refragment(b, frag, &split);
        if (split.n > TLS_HELLO_MAX) {
            assert_int_equal(tls_hello_parse(split.b, split.n, &h), -E2BIG);
            continue;
        }
        if (frag <= 3 || frag == 64) {
            check_prefixes(&split, &want);
        } else {
            assert_int_equal(tls_hello_parse(split.b, split.n, &h), 0);
            assert_memory_equal(&h, &want, sizeof(h));
            assert_int_equal(tls_hello_parse(split.b, split.n - 1, &h), -EAGAIN);
        }
    }
}

static void test_openssl_hellos(void **state)
{
    struct buf b;

    openssl_hello("allowed.test", "http/1.1", 0, &b);
    check_real(&b, "allowed.test", true, false);
    openssl_hello("Pypi.ORG.", "h2,http/1.1", 0, &b);
    check_real(&b, "pypi.org", true, true);
    openssl_hello("only-h2.example", "h2", TLS1_2_VERSION, &b);
    check_real(&b, "only-h2.example", false, true);
    openssl_hello(NULL, NULL, 0, &b);
    check_real(&b, NULL, false, false);
    /* OpenSSL sends what it is given: an address is no usable SNI. */
    openssl_hello("198.18.1.10", "http/1.1", 0, &b);
    check_real(&b, NULL, true, false);
    /* A long name, near the 253-byte limit. */
    char longname[254];
    memset(longname, 'a', 253);
    for (size_t i = 63; i < 253; i += 64) {
        longname[i] = '.';
    }
    longname[253] = '\0';
    openssl_hello(longname, "http/1.1", 0, &b);
    check_real(&b, longname, true, false);
}

/* ---- hellos captured from real clients (the fuzz seed corpus) ---- */

static void load_seed(const char *name, struct buf *b)
{
    char path[512];
    char *data = NULL;
    size_t n = 0;

    snprintf(path, sizeof(path), "%s/%s", corpus_dir, name);
    if (read_file(path, sizeof(b->b), &data, &n) < 0) {
        fail_msg("cannot read %s", path);
    }
    assert_true(n <= sizeof(b->b));
    memcpy(b->b, data, n);
    b->n = n;
    free(data);
}

static void test_captured_hellos(void **state)
{
    static const struct {
        const char *file, *sni;
        bool h11, h2;
    } seeds[] = {
        { "seed-curl-allowed.test", "allowed.test", true, true },
        { "seed-curl-http1-tls12", "example.com", true, false },
        { "seed-curl-ip", NULL, true, true }, /* curl sends no SNI for an address */
        { "seed-openssl-s_client", "pypi.org", true, true },
        { "seed-openssl-nosni", NULL, false, false },
        { "seed-python-ssl", "files.pythonhosted.org", true, false },
        { "seed-node-https", "registry.npmjs.org", false, false },
    };
    struct buf b;

    for (size_t i = 0; i < ARRAY_SIZE(seeds); i++) {
        load_seed(seeds[i].file, &b);
        check_real(&b, seeds[i].sni, seeds[i].h11, seeds[i].h2);
    }
}

/* ---- hand-built hellos, one per rule ---- */

struct spec {
    uint16_t record_version, legacy_version;
    size_t session_id_len;
    size_t suites_len; /* bytes */
    const char *compression;
    size_t compression_len;
    bool no_extensions;
    struct buf ext;       /* raw extension bytes (type, length, data)... */
    size_t ext_len_delta; /* added to the extensions' length field */
    const char *trailer;  /* bytes after the extensions, inside the message */
};

static void spec_init(struct spec *s)
{
    *s = (struct spec){
        .record_version = 0x0301,
        .legacy_version = 0x0303,
        .session_id_len = 32,
        .suites_len = 4,
        .compression = "\0",
        .compression_len = 1,
    };
}

static void ext_add(struct spec *s, uint16_t type, const void *data, size_t n)
{
    u16(&s->ext, type);
    u16(&s->ext, n);
    raw(&s->ext, data, n);
}

static void ext_sni(struct spec *s, const char *name)
{
    struct buf d = { .n = 0 };
    size_t l = strlen(name);

    u16(&d, l + 3);
    u8(&d, 0);
    u16(&d, l);
    raw(&d, name, l);
    ext_add(s, 0, d.b, d.n);
}

/* The handshake message (header + body) for s. */
static void build_msg(const struct spec *s, struct buf *m)
{
    struct buf body = { .n = 0 };
    uint8_t zero[64] = { 0 };

    u16(&body, s->legacy_version);
    raw(&body, zero, 32);
    u8(&body, (uint8_t)s->session_id_len);
    for (size_t i = 0; i < s->session_id_len; i++) {
        u8(&body, 0x5a);
    }
    u16(&body, s->suites_len);
    for (size_t i = 0; i < s->suites_len; i++) {
        u8(&body, i % 2 ? 0x01 : 0x13);
    }
    u8(&body, (uint8_t)s->compression_len);
    raw(&body, s->compression, s->compression_len);
    if (!s->no_extensions) {
        u16(&body, s->ext.n + s->ext_len_delta);
        raw(&body, s->ext.b, s->ext.n);
    }
    if (s->trailer) {
        raw(&body, s->trailer, strlen(s->trailer));
    }
    m->n = 0;
    u8(m, 1);
    u24(m, body.n);
    raw(m, body.b, body.n);
}

static void build(const struct spec *s, struct buf *out)
{
    struct buf m;

    build_msg(s, &m);
    out->n = 0;
    u8(out, 22);
    u16(out, s->record_version);
    u16(out, m.n);
    raw(out, m.b, m.n);
}

static int parse_spec(const struct spec *s, struct tls_hello *h)
{
    struct buf b;

    build(s, &b);
    return tls_hello_parse(b.b, b.n, h);
}

static void test_minimal(void **state)
{
    struct spec s;
    struct tls_hello h;
    struct buf b;

    spec_init(&s);
    s.no_extensions = true;
    assert_int_equal(parse_spec(&s, &h), 0);
    assert_false(h.has_sni);
    spec_init(&s);
    assert_int_equal(parse_spec(&s, &h), 0); /* an empty extensions block */

    spec_init(&s);
    ext_sni(&s, "allowed.test");
    build(&s, &b);
    struct tls_hello want = { .has_sni = true, .sni = "allowed.test" };
    check_prefixes(&b, &want);
    assert_int_equal(tls_hello_parse(NULL, 0, &h), -EAGAIN);
}

static void test_sni_names(void **state)
{
    static const struct {
        const char *name, *want; /* NULL = no usable SNI */
    } cases[] = {
        { "Allowed.TEST.", "allowed.test" },
        { "a_b-c.example", "a_b-c.example" },
        { "xn--bcher-kva.example", "xn--bcher-kva.example" },
        { "1.2.3.4", NULL },
        { "198.18.1.10.", NULL },
        { "example.123", NULL },
        { "0x7f000001", NULL },
        { "127.0x1", NULL },
        { "::1", NULL },
        { "[::1]", NULL },
        { "bad..name", NULL },
        { ".", NULL },
        { "-", "-" }, /* as policy_normalize_name() takes it; no entry matches it */
        { "has space.example", NULL },
        { "tab\t.example", NULL },
        { "bücher.example", NULL },
        { "*.example.com", NULL },
        { "a.0x", NULL },
        { "a.0xg", "a.0xg" },
        { "3com.example", "3com.example" },
    };
    struct spec s;
    struct tls_hello h;

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        spec_init(&s);
        ext_sni(&s, cases[i].name);
        assert_int_equal(parse_spec(&s, &h), 0);
        if (cases[i].want) {
            assert_true(h.has_sni);
            assert_string_equal(h.sni, cases[i].want);
        } else {
            if (h.has_sni) {
                fail_msg("'%s' gave SNI '%s'", cases[i].name, h.sni);
            }
            assert_string_equal(h.sni, "");
        }
    }

    /* 64-byte label, 254-byte name, NUL inside: unusable, not malformed. */
    char n[300];
    memset(n, 'a', 64);
    memcpy(n + 64, ".example", sizeof(".example"));
    spec_init(&s);
    ext_sni(&s, n);
    assert_int_equal(parse_spec(&s, &h), 0);
    assert_false(h.has_sni);
    memset(n, 'a', 254);
    for (size_t i = 60; i < 254; i += 61) {
        n[i] = '.';
    }
    n[254] = '\0';
    spec_init(&s);
    ext_sni(&s, n);
    assert_int_equal(parse_spec(&s, &h), 0);
    assert_false(h.has_sni);
    n[299] = '\0';
    memset(n, 'b', 299);
    spec_init(&s);
    ext_sni(&s, n);
    assert_int_equal(parse_spec(&s, &h), 0);
    assert_false(h.has_sni);

    spec_init(&s);
    {
        struct buf d = { .n = 0 };
        u16(&d, 3 + 12);
        u8(&d, 0);
        u16(&d, 12);
        raw(&d, "evil\0allowed", 12);
        ext_add(&s, 0, d.b, d.n);
    }
    assert_int_equal(parse_spec(&s, &h), 0);
    assert_false(h.has_sni);
}

static void test_sni_malformed(void **state)
{
    struct spec s;
    struct tls_hello h;
    struct buf d;

    /* Two names. */
    spec_init(&s);
    d.n = 0;
    u16(&d, 2 * (3 + 5));
    u8(&d, 0);
    u16(&d, 5);
    raw(&d, "a.com", 5);
    u8(&d, 0);
    u16(&d, 5);
    raw(&d, "b.com", 5);
    ext_add(&s, 0, d.b, d.n);
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);

    /* Another name type. */
    spec_init(&s);
    d.n = 0;
    u16(&d, 3 + 5);
    u8(&d, 1);
    u16(&d, 5);
    raw(&d, "a.com", 5);
    ext_add(&s, 0, d.b, d.n);
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);

    /* List length too short, too long, empty; empty name; empty extension. */
    static const size_t list_lens[] = { 7, 9, 0 };
    for (size_t i = 0; i < ARRAY_SIZE(list_lens); i++) {
        spec_init(&s);
        d.n = 0;
        u16(&d, list_lens[i]);
        u8(&d, 0);
        u16(&d, 5);
        raw(&d, "a.com", 5);
        ext_add(&s, 0, d.b, d.n);
        assert_int_equal(parse_spec(&s, &h), -EBADMSG);
    }
    spec_init(&s);
    ext_add(&s, 0, "\x00\x03\x00\x00\x00", 5);
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);
    spec_init(&s);
    ext_add(&s, 0, "", 0);
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);

    /* Duplicate server_name. */
    spec_init(&s);
    ext_sni(&s, "allowed.test");
    ext_sni(&s, "forbidden.test");
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);
}

static void test_alpn_ech(void **state)
{
    struct spec s;
    struct tls_hello h;

    spec_init(&s);
    ext_add(&s, 16, "\x00\x0c\x02h2\x08http/1.1", 14);
    assert_int_equal(parse_spec(&s, &h), 0);
    assert_true(h.offers_h2 && h.offers_http11);

    spec_init(&s);
    ext_add(&s, 16, "\x00\x0a\x08http/1.0\x00", 12); /* empty name */
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);
    spec_init(&s);
    ext_add(&s, 16, "\x00\x00", 2);
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);
    spec_init(&s);
    ext_add(&s, 16, "\x00\x04\x02h2", 5); /* list longer than the extension */
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);
    spec_init(&s);
    ext_add(&s, 16, "\x00\x03\x03h2x", 6); /* extension longer than the list */
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);
    spec_init(&s);
    ext_add(&s, 16, "\x00\x03\x05h2x", 6); /* name longer than the list */
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);
    spec_init(&s);
    ext_add(&s, 16, "\x00\x03\x02h2", 5);
    ext_add(&s, 16, "\x00\x03\x02h2", 5);
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);
    spec_init(&s);
    ext_add(&s, 16, "\x00\x0c\x02H2\x08HTTP/1.1", 14);
    assert_int_equal(parse_spec(&s, &h), 0);
    assert_false(h.offers_h2 || h.offers_http11); /* protocol ids are exact bytes */

    spec_init(&s);
    ext_sni(&s, "public.example");
    ext_add(&s, 0xfe0d, "\x00\x00\x01\x00\x01", 5);
    assert_int_equal(parse_spec(&s, &h), 0);
    assert_true(h.has_ech && h.has_sni);
    spec_init(&s);
    ext_add(&s, 0xfe0d, "", 0);
    ext_add(&s, 0xfe0d, "", 0);
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);
}

static void test_body_rules(void **state)
{
    struct spec s;
    struct tls_hello h;

    static const uint16_t bad_versions[] = { 0x0300, 0x0304, 0x0200, 0x7f1c, 0xfefd };
    for (size_t i = 0; i < ARRAY_SIZE(bad_versions); i++) {
        spec_init(&s);
        s.legacy_version = bad_versions[i];
        assert_int_equal(parse_spec(&s, &h), -EBADMSG);
    }
    spec_init(&s);
    s.legacy_version = 0x0301;
    assert_int_equal(parse_spec(&s, &h), 0);

    spec_init(&s);
    s.session_id_len = 33;
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);
    spec_init(&s);
    s.session_id_len = 0;
    assert_int_equal(parse_spec(&s, &h), 0);

    spec_init(&s);
    s.suites_len = 3;
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);
    spec_init(&s);
    s.suites_len = 0;
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);

    spec_init(&s);
    s.compression = "\x01";
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);
    spec_init(&s);
    s.compression_len = 0;
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);
    spec_init(&s);
    s.compression = "\x01\x00";
    s.compression_len = 2;
    assert_int_equal(parse_spec(&s, &h), 0);

    /* The extensions' length must end the message exactly. */
    spec_init(&s);
    ext_sni(&s, "a.com");
    s.ext_len_delta = 1;
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);
    spec_init(&s);
    ext_sni(&s, "a.com");
    s.trailer = "x";
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);
    spec_init(&s);
    ext_sni(&s, "a.com");
    s.ext_len_delta = (size_t)-1;
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);
    /* An extension longer than what is left; a lone byte where a type should be. */
    spec_init(&s);
    ext_add(&s, 0x1234, "ab", 2);
    s.ext.b[3] = 9;
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);
    spec_init(&s);
    u8(&s.ext, 0);
    assert_int_equal(parse_spec(&s, &h), -EBADMSG);
    /* Unknown extensions are skipped; GREASE too. */
    spec_init(&s);
    ext_add(&s, 0x0a0a, "", 0);
    ext_add(&s, 0xffff, "\x01\x02\x03", 3);
    ext_sni(&s, "a.com");
    assert_int_equal(parse_spec(&s, &h), 0);
    assert_string_equal(h.sni, "a.com");
}

static void test_records(void **state)
{
    struct spec s;
    struct tls_hello h;
    struct buf b, m;

    spec_init(&s);
    ext_sni(&s, "allowed.test");
    build(&s, &b);

    /* Anything but a handshake record, from its first byte. */
    static const uint8_t bad_first[] = { 20, 21, 23, 24, 0x80, 0x16 ^ 0xff, 'G' };
    for (size_t i = 0; i < ARRAY_SIZE(bad_first); i++) {
        assert_int_equal(tls_hello_parse(&bad_first[i], 1, &h), -EBADMSG);
    }
    assert_int_equal(tls_hello_parse((const uint8_t *)"GET / HTTP/1.1\r\n", 16, &h), -EBADMSG);
    assert_int_equal(tls_hello_parse((const uint8_t *)"\x16\x02", 2, &h), -EBADMSG);
    assert_int_equal(tls_hello_parse((const uint8_t *)"\x16\x03\x00", 3, &h), -EBADMSG);
    assert_int_equal(tls_hello_parse((const uint8_t *)"\x16\x03\x04", 4, &h), -EBADMSG);
    assert_int_equal(tls_hello_parse((const uint8_t *)"\x16\x03\x03\x00", 4, &h), -EAGAIN);
    assert_int_equal(tls_hello_parse((const uint8_t *)"\x16\x03\x03\x00\x00", 5, &h), -EBADMSG);
    assert_int_equal(tls_hello_parse((const uint8_t *)"\x16\x03\x03\x40\x01", 5, &h), -EBADMSG);
    /* A full-size record cannot fit in TLS_HELLO_MAX with its header. */
    assert_int_equal(tls_hello_parse((const uint8_t *)"\x16\x03\x03\x40\x00", 5, &h), -E2BIG);
    assert_int_equal(tls_hello_parse((const uint8_t *)"\x16\x03\x03\x3f\xfb", 5, &h), -EAGAIN);
    /* Another handshake type, seen in its first byte. */
    assert_int_equal(tls_hello_parse((const uint8_t *)"\x16\x03\x01\x00\x10\x02", 6, &h), -EBADMSG);
    /* A record version 3.3 is fine too. */
    b.b[2] = 3;
    assert_int_equal(tls_hello_parse(b.b, b.n, &h), 0);

    /* A record that holds more than the ClientHello: malformed at once. */
    build_msg(&s, &m);
    b.n = 0;
    u8(&b, 22);
    u16(&b, 0x0301);
    u16(&b, m.n + 4);
    raw(&b, m.b, m.n);
    assert_int_equal(tls_hello_parse(b.b, 9, &h), -EBADMSG);
    raw(&b, "\x0b\x00\x00\x00", 4);
    assert_int_equal(tls_hello_parse(b.b, b.n, &h), -EBADMSG);

    /* A change_cipher_spec (or anything) between the fragments. */
    b.n = 0;
    u8(&b, 22);
    u16(&b, 0x0301);
    u16(&b, 10);
    raw(&b, m.b, 10);
    raw(&b, "\x14\x03\x03\x00\x01\x01", 6);
    assert_int_equal(tls_hello_parse(b.b, b.n, &h), -EBADMSG);
    assert_int_equal(tls_hello_parse(b.b, b.n - 6, &h), -EAGAIN);
    /* A malformed body is seen before the rest arrives. */
    spec_init(&s);
    s.legacy_version = 0x0200;
    build(&s, &b);
    assert_int_equal(tls_hello_parse(b.b, 11, &h), -EBADMSG);
    assert_int_equal(tls_hello_parse(b.b, 10, &h), -EAGAIN);
}

static void test_sizes(void **state)
{
    struct spec s;
    struct tls_hello h;
    struct buf b;
    uint8_t pad[TLS_HELLO_MAX];

    memset(pad, 0, sizeof(pad));
    /* A handshake header announcing more than fits: -E2BIG before the body. */
    assert_int_equal(
        tls_hello_parse((const uint8_t *)"\x16\x03\x01\x40\x00\x01\x00\x40\x00", 9, &h), -E2BIG);
    assert_int_equal(
        tls_hello_parse((const uint8_t *)"\x16\x03\x01\x40\x00\x01\xff\xff\xff", 9, &h), -E2BIG);

    /* One record of exactly TLS_HELLO_MAX bytes parses; one byte more does not. */
    spec_init(&s);
    ext_sni(&s, "allowed.test");
    build(&s, &b);
    size_t padding = TLS_HELLO_MAX - b.n - 4;
    ext_add(&s, 21, pad, padding);
    build(&s, &b);
    assert_int_equal(b.n, TLS_HELLO_MAX);
    assert_int_equal(tls_hello_parse(b.b, b.n, &h), 0);
    assert_string_equal(h.sni, "allowed.test");
    assert_int_equal(tls_hello_parse(b.b, b.n - 1, &h), -EAGAIN);
    spec_init(&s);
    ext_sni(&s, "allowed.test");
    ext_add(&s, 21, pad, padding + 1);
    build(&s, &b);
    assert_int_equal(tls_hello_parse(b.b, 5, &h), -E2BIG);

    /* The same message in two records: five header bytes more, too big. */
    struct buf one = b, two;
    spec_init(&s);
    ext_sni(&s, "allowed.test");
    ext_add(&s, 21, pad, padding);
    build(&s, &one);
    refragment(&one, 8000, &two);
    assert_int_equal(tls_hello_parse(two.b, two.n, &h), -E2BIG);
    assert_int_equal(tls_hello_parse(two.b, 5, &h), -EAGAIN);
    assert_int_equal(tls_hello_parse(two.b, 9, &h), -E2BIG);

    /* Never -EAGAIN with TLS_HELLO_MAX bytes: endless one-byte records. */
    b.n = 0;
    while (b.n + 6 <= TLS_HELLO_MAX + 6) {
        u8(&b, 22);
        u16(&b, 0x0301);
        u16(&b, 1);
        u8(&b, b.n == 5 ? 1 : 0);
    }
    /* handshake header 01 00 00 00 ... says 0 bytes of body: malformed, not endless */
    assert_int_equal(tls_hello_parse(b.b, TLS_HELLO_MAX, &h), -EBADMSG);
    b.n = 0;
    static const uint8_t hdr[] = { 1, 0, 0x30, 0 };
    for (size_t i = 0; b.n + 6 <= TLS_HELLO_MAX + 6; i++) {
        u8(&b, 22);
        u16(&b, 0x0301);
        u16(&b, 1);
        u8(&b, i < 4 ? hdr[i] : (i == 4 ? 3 : 1));
    }
    assert_int_equal(tls_hello_parse(b.b, TLS_HELLO_MAX, &h), -E2BIG);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openssl_hellos), cmocka_unit_test(test_captured_hellos),
        cmocka_unit_test(test_minimal),        cmocka_unit_test(test_sni_names),
        cmocka_unit_test(test_sni_malformed),  cmocka_unit_test(test_alpn_ech),
        cmocka_unit_test(test_body_rules),     cmocka_unit_test(test_records),
        cmocka_unit_test(test_sizes),
    };

    if (argc > 1) {
        corpus_dir = argv[1];
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
