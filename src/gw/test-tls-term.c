/*
 * Unit tests for egress TLS termination (tls-term.h): real handshakes in
 * memory (a BIO pair) between tls_term_server() and a client that trusts
 * only the egress CA, and between tls_term_client() and a server whose
 * leaf a test CA (src/shared/ca.c in another directory) minted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "basic/fileio.h"
#include "basic/macro.h"
#include "gw/tls-term.h"
#include "shared/ca.h"

static char tmpdir[64];
static char gwdir[128], updir[128];

static int setup(void **state)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/test-tls-term-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    snprintf(gwdir, sizeof(gwdir), "%s/gw", tmpdir);
    snprintf(updir, sizeof(updir), "%s/upstream-ca", tmpdir);
    assert_int_equal(mkdir(updir, 0700), 0);
    return 0;
}

static int teardown(void **state)
{
    rm_rf(tmpdir);
    return 0;
}

/* Drives both ends over a BIO pair until both finish or one fails. 1 = both done. */
static int handshake(SSL *client, SSL *server)
{
    BIO *a, *b;
    bool c_done = false, s_done = false;

    assert_int_equal(BIO_new_bio_pair(&a, 0, &b, 0), 1);
    SSL_set_bio(client, a, a);
    SSL_set_bio(server, b, b);
    for (int i = 0; i < 100 && !(c_done && s_done); i++) {
        if (!c_done) {
            int r = SSL_do_handshake(client);
            if (r == 1) {
                c_done = true;
            } else if (SSL_get_error(client, r) != SSL_ERROR_WANT_READ) {
                return 0;
            }
        }
        if (!s_done) {
            int r = SSL_do_handshake(server);
            if (r == 1) {
                s_done = true;
            } else if (SSL_get_error(server, r) != SSL_ERROR_WANT_READ) {
                /* let the client read the alert */
                SSL_do_handshake(client);
                return 0;
            }
        }
    }
    return c_done && s_done;
}

static void exchange(SSL *client, SSL *server)
{
    char buf[64];

    assert_int_equal(SSL_write(client, "GET / HTTP/1.1\r\n", 16), 16);
    assert_int_equal(SSL_read(server, buf, sizeof(buf)), 16);
    assert_memory_equal(buf, "GET / HTTP/1.1\r\n", 16);
    assert_int_equal(SSL_write(server, "HTTP/1.1 200 OK\r\n", 17), 17);
    assert_int_equal(SSL_read(client, buf, sizeof(buf)), 17);
}

/* A guest: trusts only the egress CA (its PEM, as the caBundle carries it). */
static SSL *guest_client(const struct tls_term *t, const char *sni, const char *alpn,
                         size_t alpn_len, int max_version)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    BIO *bio = BIO_new_mem_buf(tls_term_ca_pem(t), -1);
    X509 *ca = PEM_read_bio_X509(bio, NULL, NULL, NULL);
    SSL *ssl;

    assert_non_null(ca);
    assert_int_equal(X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca), 1);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if (max_version) {
        SSL_CTX_set_max_proto_version(ctx, max_version);
    }
    ssl = SSL_new(ctx);
    assert_non_null(ssl);
    SSL_set_tlsext_host_name(ssl, sni);
    assert_int_equal(SSL_set1_host(ssl, sni), 1);
    if (alpn) {
        assert_int_equal(SSL_set_alpn_protos(ssl, (const uint8_t *)alpn, (unsigned)alpn_len), 0);
    }
    SSL_set_connect_state(ssl);
    SSL_CTX_free(ctx); /* the SSL keeps a reference */
    X509_free(ca);
    BIO_free(bio);
    return ssl;
}

static void test_new_and_pem(void **state)
{
    struct tls_term *t, *t2;
    struct stat st;
    char p[256];

    assert_int_equal(tls_term_new(gwdir, NULL, &t), 0);
    assert_int_equal(stat(gwdir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    snprintf(p, sizeof(p), "%s/ca.key", gwdir);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_non_null(strstr(tls_term_ca_pem(t), "-----BEGIN CERTIFICATE-----"));
    /* The same CA on the next start: guests already trust it. */
    assert_int_equal(tls_term_new(gwdir, NULL, &t2), 0);
    assert_string_equal(tls_term_ca_pem(t), tls_term_ca_pem(t2));
    tls_term_free(t2);
    assert_null(tls_term_free(t));
    assert_null(tls_term_free(NULL));

    snprintf(p, sizeof(p), "%s/no/such/dir", tmpdir);
    assert_int_equal(tls_term_new(p, NULL, &t), -ENOENT);
    snprintf(p, sizeof(p), "%s/missing.pem", tmpdir);
    assert_int_equal(tls_term_new(gwdir, p, &t), -EINVAL);
    snprintf(p, sizeof(p), "%s/garbage.pem", tmpdir);
    assert_int_equal(write_file_atomic(p, "not a PEM\n", 10), 0);
    assert_int_equal(tls_term_new(gwdir, p, &t), -EINVAL);
}

static void test_server_handshake(void **state)
{
    struct tls_term *t;
    SSL *s, *c;
    const uint8_t *proto;
    unsigned proto_len;

    assert_int_equal(tls_term_new(gwdir, NULL, &t), 0);

    /* A browser-like client offering h2 and http/1.1 gets http/1.1. */
    s = tls_term_server(t, "allowed.test");
    assert_non_null(s);
    c = guest_client(t, "allowed.test", "\x02h2\x08http/1.1", 12, 0);
    assert_int_equal(handshake(c, s), 1);
    assert_int_equal(SSL_get_verify_result(c), X509_V_OK);
    SSL_get0_alpn_selected(c, &proto, &proto_len);
    assert_int_equal(proto_len, 8);
    assert_memory_equal(proto, "http/1.1", 8);
    assert_true(SSL_version(c) >= TLS1_2_VERSION);
    exchange(c, s);
    SSL_free(c);
    SSL_free(s);

    /* The leaf and its context were made once. */
    assert_int_equal(tls_term_ctx_cache_size(t), 1);
    s = tls_term_server(t, "allowed.test");
    SSL *s2 = tls_term_server(t, "allowed.test");
    assert_ptr_equal(SSL_get_SSL_CTX(s), SSL_get_SSL_CTX(s2));
    assert_int_equal(tls_term_ctx_cache_size(t), 1);
    SSL_free(s2);
    /* No ALPN at all: fine, HTTP/1.1 implied. TLS 1.2 is enough. */
    c = guest_client(t, "allowed.test", NULL, 0, TLS1_2_VERSION);
    assert_int_equal(handshake(c, s), 1);
    SSL_get0_alpn_selected(c, &proto, &proto_len);
    assert_int_equal(proto_len, 0);
    assert_int_equal(SSL_version(c), TLS1_2_VERSION);
    exchange(c, s);
    SSL_free(c);
    SSL_free(s);

    /* h2 only: a clean no_application_protocol alert. */
    s = tls_term_server(t, "allowed.test");
    c = guest_client(t, "allowed.test", "\x02h2", 3, 0);
    assert_int_equal(handshake(c, s), 0);
    assert_int_equal(ERR_GET_REASON(ERR_peek_last_error()),
                     SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL);
    ERR_clear_error();
    SSL_free(c);
    SSL_free(s);

    /* TLS 1.1 is refused. */
    s = tls_term_server(t, "allowed.test");
    c = guest_client(t, "allowed.test", NULL, 0, TLS1_1_VERSION);
    assert_int_equal(handshake(c, s), 0);
    ERR_clear_error();
    SSL_free(c);
    SSL_free(s);

    /* The leaf is for that name only. */
    s = tls_term_server(t, "a.allowed.test");
    c = guest_client(t, "allowed.test", NULL, 0, 0);
    assert_int_equal(handshake(c, s), 0);
    assert_int_equal(SSL_get_verify_result(c), X509_V_ERR_HOSTNAME_MISMATCH);
    ERR_clear_error();
    SSL_free(c);
    SSL_free(s);
    assert_int_equal(tls_term_ctx_cache_size(t), 2);

    /* Not host names we would mint for. */
    static const char *bad[] = { "",     "198.18.1.10", "::1",           "Upper.test",
                                 "a..b", "*.test",      "trailing.dot.", "under_score.test" };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        assert_null(tls_term_server(t, bad[i]));
        assert_null(tls_term_client(t, bad[i]));
    }
    assert_null(tls_term_server(t, NULL));
    assert_int_equal(tls_term_ctx_cache_size(t), 2);
    tls_term_free(t);
}

static void test_cache_bound(void **state)
{
    struct tls_term *t;
    char name[64];
    SSL *s;

    assert_int_equal(tls_term_new(gwdir, NULL, &t), 0);
    for (size_t i = 0; i < TLS_TERM_CTX_MAX + 8; i++) {
        snprintf(name, sizeof(name), "n%zu.test", i);
        s = tls_term_server(t, name);
        assert_non_null(s);
        SSL_free(s);
    }
    assert_int_equal(tls_term_ctx_cache_size(t), TLS_TERM_CTX_MAX);
    /* An SSL outlives its context's eviction (it holds a reference). */
    s = tls_term_server(t, "n0.test"); /* evicted: minted again */
    for (size_t i = 0; i < TLS_TERM_CTX_MAX; i++) {
        snprintf(name, sizeof(name), "m%zu.test", i);
        SSL_free(tls_term_server(t, name));
    }
    SSL *c = guest_client(t, "n0.test", NULL, 0, 0);
    assert_int_equal(handshake(c, s), 1);
    SSL_free(c);
    SSL_free(s);
    tls_term_free(t);
}

/* An upstream server context with a leaf from the test CA for names[0..n). */
static SSL_CTX *upstream_ctx(const char *const names[], size_t n)
{
    struct ca *ca;
    X509 *cert;
    EVP_PKEY *key;
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

    assert_int_equal(ca_open(updir, &ca), 0);
    assert_int_equal(ca_issue_leaf(ca, names, n, &cert, &key), 0);
    assert_int_equal(SSL_CTX_use_certificate(ctx, cert), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey(ctx, key), 1);
    X509_free(cert);
    EVP_PKEY_free(key);
    ca_free(ca);
    return ctx;
}

static SSL *upstream_server(const char *const names[], size_t n)
{
    SSL_CTX *ctx = upstream_ctx(names, n);
    SSL *ssl = SSL_new(ctx);

    SSL_set_accept_state(ssl);
    SSL_CTX_free(ctx);
    return ssl;
}

static void test_upstream_verify(void **state)
{
    struct tls_term *t, *untrusting;
    char bundle[256];
    const char *names[] = { "upstream.test", "*.wild.test" };
    SSL *s, *c;

    /* The test CA (created by the first upstream_server()) is the --upstream-ca bundle. */
    s = upstream_server(names, 2);
    snprintf(bundle, sizeof(bundle), "%s/ca.crt", updir);
    assert_int_equal(tls_term_new(gwdir, bundle, &t), 0);
    assert_int_equal(tls_term_new(gwdir, NULL, &untrusting), 0);

    c = tls_term_client(t, "upstream.test");
    assert_non_null(c);
    assert_int_equal(handshake(c, s), 1);
    assert_int_equal(SSL_get_verify_result(c), X509_V_OK);
    assert_string_equal(SSL_get_servername(s, TLSEXT_NAMETYPE_host_name), "upstream.test");
    assert_true(SSL_version(c) >= TLS1_2_VERSION);
    exchange(c, s);
    SSL_free(c);
    SSL_free(s);

    /* A name the certificate covers by wildcard, one label deep only. */
    s = upstream_server(names, 2);
    c = tls_term_client(t, "a.wild.test");
    assert_int_equal(handshake(c, s), 1);
    SSL_free(c);
    SSL_free(s);
    s = upstream_server(names, 2);
    c = tls_term_client(t, "a.b.wild.test");
    assert_int_equal(handshake(c, s), 0);
    assert_int_equal(SSL_get_verify_result(c), X509_V_ERR_HOSTNAME_MISMATCH);
    ERR_clear_error();
    SSL_free(c);
    SSL_free(s);

    /* A trusted certificate for another name. */
    s = upstream_server(names, 2);
    c = tls_term_client(t, "forbidden.test");
    assert_int_equal(handshake(c, s), 0);
    assert_int_equal(SSL_get_verify_result(c), X509_V_ERR_HOSTNAME_MISMATCH);
    ERR_clear_error();
    SSL_free(c);
    SSL_free(s);

    /* The right name from a CA nobody trusts (the system store does not know it). */
    s = upstream_server(names, 2);
    c = tls_term_client(untrusting, "upstream.test");
    assert_int_equal(handshake(c, s), 0);
    assert_int_equal(SSL_get_verify_result(c), X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
    ERR_clear_error();
    SSL_free(c);
    SSL_free(s);

    /* Our own egress leaves are not trusted upstream: the guest cannot loop us back. */
    s = tls_term_server(t, "upstream.test");
    c = tls_term_client(t, "upstream.test");
    assert_int_equal(handshake(c, s), 0);
    assert_int_equal(SSL_get_verify_result(c), X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
    ERR_clear_error();
    SSL_free(c);
    SSL_free(s);

    tls_term_free(untrusting);
    tls_term_free(t);
}

/*
 * The second connection to a name resumes the first one's verified
 * session, and so do the ones after it, though every connection ends
 * without a close_notify (as relayed ones do): TLS 1.3 tickets and TLS 1.2
 * session tickets both.
 */
static void upstream_resume(int server_max_version)
{
    const char *names[] = { "upstream.test", "other.test" };
    struct tls_term *t;
    char bundle[256];
    SSL_CTX *sctx = upstream_ctx(names, 2);

    if (server_max_version) {
        assert_int_equal(SSL_CTX_set_max_proto_version(sctx, server_max_version), 1);
    }
    snprintf(bundle, sizeof(bundle), "%s/ca.crt", updir);
    assert_int_equal(tls_term_new(gwdir, bundle, &t), 0);
    static const struct {
        const char *name;
        bool reused;
    } steps[] = {
        { "upstream.test", false }, { "upstream.test", true }, { "upstream.test", true },
        { "other.test", false },    { "other.test", true },    { "upstream.test", true },
        { "upstream.test", true },
    };
    for (size_t i = 0; i < ARRAY_SIZE(steps); i++) {
        SSL *s = SSL_new(sctx), *c = tls_term_client(t, steps[i].name);

        SSL_set_accept_state(s);
        assert_int_equal(handshake(c, s), 1);
        assert_int_equal(SSL_get_verify_result(c), X509_V_OK);
        if (server_max_version) {
            assert_int_equal(SSL_version(c), server_max_version);
        }
        if (SSL_session_reused(c) != steps[i].reused) {
            fail_msg("step %zu (%s): reused %d", i, steps[i].name, SSL_session_reused(c));
        }
        exchange(c, s); /* the client reads the server's session tickets here */
        SSL_free(c);    /* no SSL_shutdown(): a dirty close */
        SSL_free(s);
    }
    /* A name whose handshake failed leaves nothing to resume. */
    for (int i = 0; i < 2; i++) {
        SSL *s = SSL_new(sctx), *c = tls_term_client(t, "third.test");

        SSL_set_accept_state(s);
        assert_int_equal(handshake(c, s), 0);
        assert_int_equal(SSL_get_verify_result(c), X509_V_ERR_HOSTNAME_MISMATCH);
        assert_false(SSL_session_reused(c));
        ERR_clear_error();
        SSL_free(c);
        SSL_free(s);
    }
    SSL_CTX_free(sctx);
    tls_term_free(t);
}

static void test_upstream_resume(void **state)
{
    upstream_resume(0);
}

static void test_upstream_resume_tls12(void **state)
{
    upstream_resume(TLS1_2_VERSION);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_new_and_pem, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_handshake, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upstream_verify, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upstream_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upstream_resume_tls12, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
