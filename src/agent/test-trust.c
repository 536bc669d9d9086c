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
#include <unistd.h>

#include "agent/trust.h"
#include "basic/fileio.h"
#include "basic/strbuf.h"

static const char cert1[] = "-----BEGIN CERTIFICATE-----\n"
                            "MIIBfzCCASWgAwIBAgIUHCdFQMmWoOdGQsSspjpEysJWUy8wCgYIKoZIzj0EAwIw\n"
                            "FTETMBEGA1UEAwwKdGVzdC10cnVzdDAeFw0yNjEyMDEyMzUxNDZaFw0zNjExMjgy\n"
                            "MzUxNDZaMBUxEzARBgNVBAMMCnRlc3QtdHJ1c3QwWTATBgcqhkjOPQIBBggqhkjO\n"
                            "PQMBBwNCAATzTs9tEzt53E1FEjjuEvCYFdPjlkQQKwA7r4O++Y/jA7iYWYaZIFCt\n"
                            "+R+UD2R7MkfEcQc7t6sTxE8+ng2Vp7uxo1MwUTAdBgNVHQ4EFgQUE5D2oB0hgCbi\n"
                            "+RtJFFoJe8ZxGQ8wHwYDVR0jBBgwFoAUE5D2oB0hgCbi+RtJFFoJe8ZxGQ8wDwYD\n"
                            "VR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiEAp9w2ex6aIs/Q6d0imvnx\n"
                            "orxQw4THM8nQL2bi6laSFDsCICbsfm1ZBgTDgw4gW7xcIcJyNuAnMeV30WgtL0Wr\n"
                            "+9Fb\n"
                            "-----END CERTIFICATE-----\n";

static const char cert2[] = "-----BEGIN CERTIFICATE-----\n"
                            "MIIBgzCCASmgAwIBAgIUYxqt0kvP8Jtq4zTCljcnQ2U0bjIwCgYIKoZIzj0EAwIw\n"
                            "FzEVMBMGA1UEAwwMdGVzdC10cnVzdC0yMB4XDTI2MTIwMTIzNTE0NloXDTM2MTEy\n"
                            "ODIzNTE0NlowFzEVMBMGA1UEAwwMdGVzdC10cnVzdC0yMFkwEwYHKoZIzj0CAQYI\n"
                            "KoZIzj0DAQcDQgAEd7L8HgkOUkT4taMnXbqiUNj0Fh0bmMfVImJpwzIDKYkVnVe2\n"
                            "0F3ek/HU1xIEnyD+oMrNKm83CvT4DQMDzrKCw6NTMFEwHQYDVR0OBBYEFM6/EBFn\n"
                            "LoeDax4yaf0Fjmh7IkHcMB8GA1UdIwQYMBaAFM6/EBFnLoeDax4yaf0Fjmh7IkHc\n"
                            "MA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIhAJ6/xYnEkfM8+0cZ\n"
                            "OExpWilCIsoqKtRHBBUOboWdmtsuAiBlL59JCPjb/t4ppvC/zf7gbCn6IqY+ag+P\n"
                            "eX7cINKRyQ==\n"
                            "-----END CERTIFICATE-----\n";

static int check(const char *pem, const char **why)
{
    return trust_check_bundle(pem, strlen(pem), why);
}

static void test_check_accepts_certificates_only(void **state)
{
    char buf[4096];
    const char *why;

    (void)state;
    assert_int_equal(check(cert1, &why), 0);
    snprintf(buf, sizeof(buf), "\n%s\r\n%s  \n", cert1, cert2);
    assert_int_equal(check(buf, &why), 0);

    assert_int_equal(check("", &why), -EBADMSG);
    assert_string_equal(why, "caBundle holds no certificate");
    assert_int_equal(check(" \n", &why), -EBADMSG);
    snprintf(buf, sizeof(buf), "junk\n%s", cert1);
    assert_int_equal(check(buf, &why), -EBADMSG);
    assert_string_equal(why, "caBundle must hold only PEM CERTIFICATE blocks");
    snprintf(buf, sizeof(buf), "%sjunk\n", cert1);
    assert_int_equal(check(buf, &why), -EBADMSG);
    /* A private key is not a certificate: it must never land in a world-readable file. */
    assert_int_equal(check("-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0w"
                           "\n-----END PRIVATE KEY-----\n",
                           &why),
                     -EBADMSG);
    assert_int_equal(check("-----BEGIN CERTIFICATE-----\nMIIB\n", &why), -EBADMSG);
    assert_string_equal(why, "caBundle: a CERTIFICATE block has no END line");
    assert_int_equal(
        check("-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n", &why),
        -EBADMSG);
    assert_string_equal(why, "caBundle: a certificate's body is not base64");
    /* Base64 of text, not DER. */
    assert_int_equal(
        check("-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n", &why),
        -EBADMSG);
    assert_string_equal(why, "caBundle: a block is not a DER certificate");
    /* Two BEGIN lines (the second is inside the first block's body). */
    snprintf(buf, sizeof(buf), "-----BEGIN CERTIFICATE-----\n%s", cert1);
    assert_int_equal(check(buf, &why), -EBADMSG);
    /* Embedded NUL. */
    memcpy(buf, cert1, sizeof(cert1));
    assert_int_equal(trust_check_bundle(buf, sizeof(cert1), &why), -EBADMSG);
}

static void test_check_bounded(void **state)
{
    struct strbuf sb = STRBUF_INIT;
    const char *why;

    (void)state;
    while (sb.len <= TRUST_MAX_BUNDLE) {
        assert_int_equal(strbuf_appends(&sb, cert1), 0);
    }
    assert_int_equal(trust_check_bundle(sb.buf, sb.len, &why), -E2BIG);
    assert_string_equal(why, "caBundle is larger than 64 KiB");
    strbuf_release(&sb);
}

static char *slurp(const char *root, const char *path)
{
    char full[4096], *text = NULL;

    snprintf(full, sizeof(full), "%s%s", root, path);
    assert_int_equal(read_file(full, 1 << 20, &text, NULL), 0);
    return text;
}

static unsigned count(const char *hay, const char *needle)
{
    unsigned n = 0;

    for (const char *p = hay; (p = strstr(p, needle)); p++) {
        n++;
    }
    return n;
}

static void test_install_idempotent_and_replacing(void **state)
{
    char root[] = "/tmp/test-trust-XXXXXX", path[4096];
    const char *system = "# system\n-----BEGIN CERTIFICATE-----\nSYSTEM\n-----END CERTIFICATE-----";
    char *text;
    struct stat st;

    (void)state;
    assert_non_null(mkdtemp(root));
    /* No system bundle yet: it is made. */
    assert_int_equal(trust_install(root, cert1, strlen(cert1)), 0);
    text = slurp(root, TRUST_CERT_PATH);
    assert_string_equal(text, cert1);
    free(text);
    text = slurp(root, TRUST_BUNDLE_PATH);
    assert_non_null(strstr(text, cert1));
    free(text);
    snprintf(path, sizeof(path), "%s%s", root, TRUST_BUNDLE_PATH);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);

    /* An existing bundle (no final newline) keeps its content; repeated installs add once. */
    assert_int_equal(write_file_atomic(path, system, strlen(system)), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(trust_install(root, cert1, strlen(cert1)), 0);
    }
    text = slurp(root, TRUST_BUNDLE_PATH);
    assert_int_equal(strncmp(text, system, strlen(system)), 0);
    assert_int_equal(count(text, cert1), 1);
    assert_int_equal(count(text, "BEGIN CERTIFICATE"), 2);
    free(text);

    /* A new CA replaces the old one (the gateway's data dir was made anew). */
    assert_int_equal(trust_install(root, cert2, strlen(cert2)), 0);
    text = slurp(root, TRUST_BUNDLE_PATH);
    assert_int_equal(count(text, cert1), 0);
    assert_int_equal(count(text, cert2), 1);
    assert_non_null(strstr(text, "SYSTEM"));
    free(text);
    text = slurp(root, TRUST_CERT_PATH);
    assert_string_equal(text, cert2);
    free(text);
    assert_int_equal(rm_rf(root), 0);
}

static void test_env_defaults_do_not_override(void **state)
{
    json_t *env = json_pack("{s:s}", "SSL_CERT_FILE", "/mine.pem");

    (void)state;
    assert_int_equal(trust_env_defaults("/r", env), 0);
    assert_string_equal(json_string_value(json_object_get(env, "SSL_CERT_FILE")), "/mine.pem");
    assert_string_equal(json_string_value(json_object_get(env, "REQUESTS_CA_BUNDLE")),
                        "/r" TRUST_BUNDLE_PATH);
    assert_string_equal(json_string_value(json_object_get(env, "PIP_CERT")),
                        "/r" TRUST_BUNDLE_PATH);
    assert_string_equal(json_string_value(json_object_get(env, "CURL_CA_BUNDLE")),
                        "/r" TRUST_BUNDLE_PATH);
    assert_string_equal(json_string_value(json_object_get(env, "NODE_EXTRA_CA_CERTS")),
                        "/r" TRUST_CERT_PATH);
    json_decref(env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_accepts_certificates_only),
        cmocka_unit_test(test_check_bounded),
        cmocka_unit_test(test_install_idempotent_and_replacing),
        cmocka_unit_test(test_env_defaults_do_not_override),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
