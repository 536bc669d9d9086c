/*
 * Unit tests for the egress CA rotation (ca-set.h): the phases, the files
 * each step leaves, their modes, a reopen (a gateway restart) in every
 * phase, the repair of interrupted steps, and through tls-term.h that the
 * leaves come from the CA the phase names.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "basic/fileio.h"
#include "gw/ca-set.h"
#include "gw/tls-term.h"
#include "shared/ca.h"

static char dir[64];

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/test-ca-set-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state)
{
    rm_rf(dir);
    return 0;
}

static bool has(const char *name)
{
    char p[128];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

static unsigned mode_of(const char *name)
{
    char p[128];
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    assert_int_equal(stat(p, &st), 0);
    return st.st_mode & 0777;
}

static size_t n_certs(const char *pem)
{
    size_t n = 0;
    for (const char *p = pem; (p = strstr(p, "BEGIN CERTIFICATE")); p++) {
        n++;
    }
    return n;
}

static struct ca_set *reopen(struct ca_set *s)
{
    struct ca_set *t = NULL;
    ca_set_free(s);
    assert_int_equal(ca_set_open(dir, &t), 0);
    return t;
}

static void test_phases(void **state)
{
    struct ca_set *s = NULL;
    char err[CA_SET_ERROR_MAX], cur[CA_FINGERPRINT_LEN + 1], next[CA_FINGERPRINT_LEN + 1];

    assert_int_equal(ca_set_open(dir, &s), 0);
    assert_int_equal(ca_set_phase(s), CA_PHASE_STABLE);
    assert_int_equal(n_certs(ca_set_bundle(s)), 1);
    assert_int_equal(strlen(ca_set_current_fingerprint(s)), CA_FINGERPRINT_LEN);
    assert_string_equal(ca_set_next_fingerprint(s), "");
    snprintf(cur, sizeof(cur), "%s", ca_set_current_fingerprint(s));

    /* Out of order: refused, with the phase and the next step named. */
    assert_int_equal(ca_set_step(s, CA_STEP_SWITCH, err), -EBUSY);
    assert_non_null(strstr(err, "stable"));
    assert_non_null(strstr(err, "next step: stage"));
    assert_int_equal(ca_set_step(s, CA_STEP_FINISH, err), -EBUSY);
    assert_false(has(CA_NEXT_KEY_FILE));

    /* stage: a second CA, in the bundle, not yet signing. */
    assert_int_equal(ca_set_step(s, CA_STEP_STAGE, err), 1);
    assert_int_equal(ca_set_phase(s), CA_PHASE_STAGED);
    assert_int_equal(n_certs(ca_set_bundle(s)), 2);
    assert_string_equal(ca_set_current_fingerprint(s), cur);
    assert_int_equal(strlen(ca_set_next_fingerprint(s)), CA_FINGERPRINT_LEN);
    assert_string_not_equal(ca_set_next_fingerprint(s), cur);
    snprintf(next, sizeof(next), "%s", ca_set_next_fingerprint(s));
    assert_int_equal(mode_of(CA_NEXT_KEY_FILE), 0600);
    assert_int_equal(mode_of(CA_NEXT_CERT_FILE), 0644);
    assert_false(has(CA_PHASE_FILE));
    assert_ptr_equal(ca_set_signer(s), ca_set_signer(s));
    /* The repeat is a no-op (a lost reply retried); a skip is refused. */
    assert_int_equal(ca_set_step(s, CA_STEP_STAGE, err), 0);
    assert_string_equal(ca_set_next_fingerprint(s), next);
    assert_int_equal(ca_set_step(s, CA_STEP_FINISH, err), -EBUSY);
    assert_non_null(strstr(err, "next step: switch"));

    /* A restart keeps the phase and both CAs. */
    s = reopen(s);
    assert_int_equal(ca_set_phase(s), CA_PHASE_STAGED);
    assert_string_equal(ca_set_current_fingerprint(s), cur);
    assert_string_equal(ca_set_next_fingerprint(s), next);

    /* switch: the next CA signs; the bundle is unchanged. */
    const char *bundle_staged = ca_set_bundle(s);
    char *copy = strdup(bundle_staged);
    assert_int_equal(ca_set_step(s, CA_STEP_SWITCH, err), 1);
    assert_int_equal(ca_set_phase(s), CA_PHASE_SWITCHED);
    assert_string_equal(ca_set_bundle(s), copy);
    free(copy);
    assert_true(has(CA_PHASE_FILE));
    assert_int_equal(ca_set_step(s, CA_STEP_SWITCH, err), 0);
    assert_int_equal(ca_set_step(s, CA_STEP_STAGE, err), -EBUSY);
    s = reopen(s);
    assert_int_equal(ca_set_phase(s), CA_PHASE_SWITCHED);
    assert_string_equal(ca_set_next_fingerprint(s), next);

    /* finish: the next is the current, the old one gone from the bundle and the disk. */
    assert_int_equal(ca_set_step(s, CA_STEP_FINISH, err), 1);
    assert_int_equal(ca_set_phase(s), CA_PHASE_STABLE);
    assert_string_equal(ca_set_current_fingerprint(s), next);
    assert_string_equal(ca_set_next_fingerprint(s), "");
    assert_int_equal(n_certs(ca_set_bundle(s)), 1);
    assert_false(has(CA_NEXT_KEY_FILE));
    assert_false(has(CA_NEXT_CERT_FILE));
    assert_false(has(CA_PHASE_FILE));
    assert_int_equal(mode_of(CA_KEY_FILE), 0600);
    assert_int_equal(mode_of(CA_CERT_FILE), 0644);
    /* finish is not repeatable: nothing tells a repeat from a finish with no rotation. */
    assert_int_equal(ca_set_step(s, CA_STEP_FINISH, err), -EBUSY);
    s = reopen(s);
    assert_int_equal(ca_set_phase(s), CA_PHASE_STABLE);
    assert_string_equal(ca_set_current_fingerprint(s), next);
    ca_set_free(s);
}

static void test_repair(void **state)
{
    struct ca_set *s = NULL;
    char err[CA_SET_ERROR_MAX], next[CA_FINGERPRINT_LEN + 1], a[128], b[128];

    assert_int_equal(ca_set_open(dir, &s), 0);
    /* A finish cut after its first rename: the next open completes it. */
    assert_int_equal(ca_set_step(s, CA_STEP_STAGE, err), 1);
    assert_int_equal(ca_set_step(s, CA_STEP_SWITCH, err), 1);
    snprintf(next, sizeof(next), "%s", ca_set_next_fingerprint(s));
    snprintf(a, sizeof(a), "%s/%s", dir, CA_NEXT_KEY_FILE);
    snprintf(b, sizeof(b), "%s/%s", dir, CA_KEY_FILE);
    assert_int_equal(rename(a, b), 0);
    s = reopen(s);
    assert_int_equal(ca_set_phase(s), CA_PHASE_STABLE);
    assert_string_equal(ca_set_current_fingerprint(s), next);
    assert_false(has(CA_NEXT_CERT_FILE));
    assert_false(has(CA_PHASE_FILE));

    /* A finish cut after both renames: only the phase file is left. */
    assert_int_equal(ca_set_step(s, CA_STEP_STAGE, err), 1);
    assert_int_equal(ca_set_step(s, CA_STEP_SWITCH, err), 1);
    snprintf(next, sizeof(next), "%s", ca_set_next_fingerprint(s));
    assert_int_equal(rename(a, b), 0);
    snprintf(a, sizeof(a), "%s/%s", dir, CA_NEXT_CERT_FILE);
    snprintf(b, sizeof(b), "%s/%s", dir, CA_CERT_FILE);
    assert_int_equal(rename(a, b), 0);
    s = reopen(s);
    assert_int_equal(ca_set_phase(s), CA_PHASE_STABLE);
    assert_string_equal(ca_set_current_fingerprint(s), next);
    assert_false(has(CA_PHASE_FILE));

    /* A stage cut before its certificate: the key nobody was told of goes. */
    snprintf(a, sizeof(a), "%s/%s", dir, CA_NEXT_KEY_FILE);
    assert_int_equal(write_file_atomic(a, "junk", 4), 0);
    s = reopen(s);
    assert_int_equal(ca_set_phase(s), CA_PHASE_STABLE);
    assert_false(has(CA_NEXT_KEY_FILE));
    assert_int_equal(ca_set_step(s, CA_STEP_STAGE, err), 1);

    /* A next key that does not match its certificate is an error, never replaced. */
    ca_set_free(s);
    snprintf(b, sizeof(b), "%s/%s", dir, CA_KEY_FILE);
    char *other = NULL;
    assert_int_equal(read_file(b, 65536, &other, NULL), 0);
    assert_int_equal(unlink(a), 0);
    assert_int_equal(write_file_atomic(a, other, strlen(other)), 0);
    free(other);
    s = NULL;
    assert_int_equal(ca_set_open(dir, &s), -EINVAL);
    assert_null(s);
}

/* The issuer of the leaf tls_term_server() presents for name, as a fingerprint prefix test. */
static bool leaf_issued_by(struct tls_term *t, X509 *issuer)
{
    SSL *ssl = tls_term_server(t, "example.com");
    X509 *leaf;
    bool ok;

    assert_non_null(ssl);
    leaf = SSL_get_certificate(ssl);
    assert_non_null(leaf);
    ok = X509_check_issued(issuer, leaf) == X509_V_OK;
    SSL_free(ssl);
    return ok;
}

static X509 *cert_file(const char *name)
{
    char p[128];
    X509 *x;
    FILE *f;
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    f = fopen(p, "re");
    assert_non_null(f);
    x = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    assert_non_null(x);
    return x;
}

static void test_signer(void **state)
{
    struct tls_term *t = NULL;
    char err[CA_SET_ERROR_MAX];
    X509 *old, *new;

    assert_int_equal(tls_term_new(dir, NULL, &t), 0);
    old = cert_file(CA_CERT_FILE);
    assert_true(leaf_issued_by(t, old));
    assert_int_equal(tls_term_ca_step(t, CA_STEP_STAGE, err), 1);
    new = cert_file(CA_NEXT_CERT_FILE);
    /* staged: still the current CA (guests without the bundle keep working). */
    assert_true(leaf_issued_by(t, old));
    assert_int_equal(tls_term_ctx_cache_size(t), 1);
    /* switched: the cached leaf is dropped, the next one is the new CA's. */
    assert_int_equal(tls_term_ca_step(t, CA_STEP_SWITCH, err), 1);
    assert_int_equal(tls_term_ctx_cache_size(t), 0);
    assert_true(leaf_issued_by(t, new));
    assert_false(leaf_issued_by(t, old));
    assert_int_equal(tls_term_ca_step(t, CA_STEP_FINISH, err), 1);
    assert_true(leaf_issued_by(t, new));
    assert_int_equal(strstr(tls_term_ca_pem(t), "BEGIN") == NULL, 0);
    /* A restart in any phase keeps signing with the same CA. */
    tls_term_free(t);
    assert_int_equal(tls_term_new(dir, NULL, &t), 0);
    assert_true(leaf_issued_by(t, new));
    X509_free(old);
    X509_free(new);
    tls_term_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_phases, setup, teardown),
        cmocka_unit_test_setup_teardown(test_repair, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signer, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
