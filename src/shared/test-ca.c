/*
 * Unit tests for the deployment CA (ca.h) in a temporary directory: file
 * creation and modes, reloading the same CA, leaves that verify against it
 * (X509_verify_cert with the CA as the only trust anchor), their SAN
 * contents, hostname checks, validity, the cache, and bad names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/x509v3.h>

#include "basic/fileio.h"
#include "shared/ca.h"

static char tmpdir[64];

static int setup(void **state)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/test-ca-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    return 0;
}

static int teardown(void **state)
{
    rm_rf(tmpdir);
    return 0;
}

static mode_t file_mode(const char *name)
{
    char p[128];
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", tmpdir, name);
    assert_int_equal(stat(p, &st), 0);
    return st.st_mode & 07777;
}

/* X509_verify_cert(leaf) with only the CA trusted, at time t (0: now). */
static int verify(X509 *ca, X509 *leaf, time_t t)
{
    X509_STORE *store = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    assert_non_null(store);
    assert_non_null(ctx);
    assert_int_equal(X509_STORE_add_cert(store, ca), 1);
    assert_int_equal(X509_STORE_CTX_init(ctx, store, leaf, NULL), 1);
    X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
    if (t) {
        X509_STORE_CTX_set_time(ctx, 0, t);
    }
    int ok = X509_verify_cert(ctx);
    int err = X509_STORE_CTX_get_error(ctx);
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    return ok == 1 ? 0 : err;
}

static void test_create_and_reload(void **state)
{
    struct ca *ca = NULL, *again = NULL;

    assert_int_equal(ca_open(tmpdir, &ca), 0);
    assert_int_equal(file_mode(CA_KEY_FILE), 0600);
    assert_int_equal(file_mode(CA_CERT_FILE), 0644);
    assert_non_null(strstr(ca_cert_path(ca), CA_CERT_FILE));
    /* A CA, self-signed. */
    assert_int_equal(X509_check_ca(ca_cert(ca)), 1);
    assert_int_equal(X509_check_issued(ca_cert(ca), ca_cert(ca)), X509_V_OK);

    assert_int_equal(ca_open(tmpdir, &again), 0);
    assert_int_equal(X509_cmp(ca_cert(ca), ca_cert(again)), 0);
    ca_free(again);
    ca_free(ca);
}

static void test_key_without_cert_is_an_error(void **state)
{
    struct ca *ca = NULL;
    char p[128];

    assert_int_equal(ca_open(tmpdir, &ca), 0);
    ca_free(ca);
    snprintf(p, sizeof(p), "%s/%s", tmpdir, CA_CERT_FILE);
    assert_int_equal(unlink(p), 0);
    ca = NULL;
    assert_true(ca_open(tmpdir, &ca) < 0);
    assert_null(ca);
    /* Never replaced behind the user's back. */
    assert_int_equal(access(p, F_OK), -1);
}

static void test_leaf_verifies(void **state)
{
    const char *names[] = { "*.space.test", "space.test", "127.0.0.1" };
    struct ca *ca = NULL;
    X509 *cert = NULL;
    EVP_PKEY *key = NULL;

    assert_int_equal(ca_open(tmpdir, &ca), 0);
    assert_int_equal(ca_issue_leaf(ca, names, 3, &cert, &key), 0);
    assert_int_equal(X509_check_private_key(cert, key), 1);
    assert_int_equal(verify(ca_cert(ca), cert, 0), 0);
    assert_int_equal(X509_check_ca(cert), 0);

    /* SAN: exactly the names, as DNS and IP entries. */
    GENERAL_NAMES *gens = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
    assert_non_null(gens);
    assert_int_equal(sk_GENERAL_NAME_num(gens), 3);
    const GENERAL_NAME *g0 = sk_GENERAL_NAME_value(gens, 0);
    assert_int_equal(g0->type, GEN_DNS);
    assert_string_equal((const char *)ASN1_STRING_get0_data(g0->d.dNSName), "*.space.test");
    const GENERAL_NAME *g1 = sk_GENERAL_NAME_value(gens, 1);
    assert_int_equal(g1->type, GEN_DNS);
    assert_string_equal((const char *)ASN1_STRING_get0_data(g1->d.dNSName), "space.test");
    assert_int_equal(sk_GENERAL_NAME_value(gens, 2)->type, GEN_IPADD);
    GENERAL_NAMES_free(gens);

    /* What a TLS client checks. */
    assert_int_equal(X509_check_host(cert, "49983-abc.space.test", 0, 0, NULL), 1);
    assert_int_equal(X509_check_host(cert, "space.test", 0, 0, NULL), 1);
    assert_int_not_equal(X509_check_host(cert, "a.b.space.test", 0, 0, NULL), 1);
    assert_int_not_equal(X509_check_host(cert, "other.test", 0, 0, NULL), 1);
    assert_int_equal(X509_check_ip_asc(cert, "127.0.0.1", 0), 1);

    /* Expiry: valid now, CA_LEAF_VALID_DAYS from now, not a day after. */
    time_t now = time(NULL);
    int day;
    int sec;
    assert_int_equal(ASN1_TIME_diff(&day, &sec, NULL, X509_get0_notAfter(cert)), 1);
    assert_true(day >= CA_LEAF_VALID_DAYS - 1 && day <= CA_LEAF_VALID_DAYS);
    assert_int_equal(verify(ca_cert(ca), cert, now + (CA_LEAF_VALID_DAYS - 1) * 86400), 0);
    assert_int_equal(verify(ca_cert(ca), cert, now + (CA_LEAF_VALID_DAYS + 1) * 86400),
                     X509_V_ERR_CERT_HAS_EXPIRED);
    assert_int_equal(verify(ca_cert(ca), cert, now - 86400), X509_V_ERR_CERT_NOT_YET_VALID);

    X509_free(cert);
    EVP_PKEY_free(key);
    ca_free(ca);
}

static void test_leaf_from_reloaded_ca_verifies(void **state)
{
    const char *names[] = { "gw.example" };
    struct ca *ca = NULL, *again = NULL;
    X509 *cert = NULL;
    EVP_PKEY *key = NULL;

    assert_int_equal(ca_open(tmpdir, &ca), 0);
    assert_int_equal(ca_open(tmpdir, &again), 0);
    assert_int_equal(ca_issue_leaf(again, names, 1, &cert, &key), 0);
    assert_int_equal(verify(ca_cert(ca), cert, 0), 0);
    X509_free(cert);
    EVP_PKEY_free(key);
    ca_free(again);
    ca_free(ca);
}

static void test_cache(void **state)
{
    const char *a[] = { "a.example" }, *b[] = { "b.example" };
    struct ca *ca = NULL;
    X509 *c1, *c2, *c3;
    EVP_PKEY *k1, *k2, *k3;

    assert_int_equal(ca_open(tmpdir, &ca), 0);
    assert_int_equal(ca_issue_leaf(ca, a, 1, &c1, &k1), 0);
    assert_int_equal(ca_issue_leaf(ca, a, 1, &c2, &k2), 0);
    assert_ptr_equal(c1, c2); /* cached */
    assert_ptr_equal(k1, k2);
    assert_int_equal(ca_issue_leaf(ca, b, 1, &c3, &k3), 0);
    assert_ptr_not_equal(c1, c3);
    assert_int_equal(ca_cache_size(ca), 2);
    ca_free(ca);
    /* The caller's references outlive the CA. */
    assert_int_equal(X509_check_private_key(c1, k1), 1);
    X509_free(c1);
    X509_free(c2);
    X509_free(c3);
    EVP_PKEY_free(k1);
    EVP_PKEY_free(k2);
    EVP_PKEY_free(k3);
}

static void test_cache_bounded(void **state)
{
    struct ca *ca = NULL;
    char name[64];

    assert_int_equal(ca_open(tmpdir, &ca), 0);
    for (int i = 0; i < CA_CACHE_MAX + 5; i++) {
        const char *names[] = { name };
        X509 *c;
        EVP_PKEY *k;
        snprintf(name, sizeof(name), "h%d.example", i);
        assert_int_equal(ca_issue_leaf(ca, names, 1, &c, &k), 0);
        X509_free(c);
        EVP_PKEY_free(k);
    }
    assert_int_equal(ca_cache_size(ca), CA_CACHE_MAX);
    ca_free(ca);
}

static void test_bad_names(void **state)
{
    const char *bad[] = { "",      "a..b", ".a",  "a.",  "*",   "*.",
                          "a.*.b", "**.a", "a b", "a/b", "a:b", "x\n.y" };
    struct ca *ca = NULL;
    X509 *c = NULL;
    EVP_PKEY *k = NULL;

    assert_int_equal(ca_open(tmpdir, &ca), 0);
    assert_int_equal(ca_issue_leaf(ca, bad, 0, &c, &k), -EINVAL);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *names[] = { "ok.example", bad[i] };
        assert_int_equal(ca_issue_leaf(ca, names, 2, &c, &k), -EINVAL);
    }
    const char *many[CA_NAMES_MAX + 1];
    for (size_t i = 0; i <= CA_NAMES_MAX; i++) {
        many[i] = "ok.example";
    }
    assert_int_equal(ca_issue_leaf(ca, many, CA_NAMES_MAX + 1, &c, &k), -EINVAL);
    assert_int_equal(ca_cache_size(ca), 0);
    ca_free(ca);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_and_reload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key_without_cert_is_an_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leaf_verifies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leaf_from_reloaded_ca_verifies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_names, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
