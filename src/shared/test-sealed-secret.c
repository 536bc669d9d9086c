/*
 * Unit tests for sealed secrets (sealed-secret.h) in a temporary directory:
 * keygen's files and modes (and that it never overwrites), round trips of
 * empty, binary and largest values, and every way an open must fail cleanly:
 * another aad, another key, truncated, a flipped bit anywhere, a bad prefix,
 * bad base64, an oversize value.
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
#include <unistd.h>

#include <openssl/pem.h>

#include "basic/base64.h"
#include "basic/fileio.h"
#include "shared/sealed-secret.h"

static char tmpdir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/test-sealed-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    rm_rf(tmpdir);
    return 0;
}

static void path_of(char *buf, size_t n, const char *dir, const char *name)
{
    snprintf(buf, n, "%s/%s", dir, name);
}

static mode_t file_mode(const char *name)
{
    char p[128];
    struct stat st;
    path_of(p, sizeof(p), tmpdir, name);
    assert_int_equal(stat(p, &st), 0);
    return st.st_mode & 07777;
}

static char *slurp(const char *name)
{
    char p[128], *s = NULL;
    size_t n;
    path_of(p, sizeof(p), tmpdir, name);
    assert_int_equal(read_file(p, 1 << 16, &s, &n), 0);
    return s;
}

static void load_pair(const char *dir, EVP_PKEY **pub, EVP_PKEY **priv)
{
    char p[128];
    path_of(p, sizeof(p), dir, SEALED_SECRET_PUB_FILE);
    assert_int_equal(sealed_secret_load_public(p, pub), 0);
    path_of(p, sizeof(p), dir, SEALED_SECRET_KEY_FILE);
    assert_int_equal(sealed_secret_load_private(p, priv), 0);
}

static void test_keygen_files(void **state)
{
    (void)state;
    mode_t old = umask(0);
    assert_int_equal(sealed_secret_keygen(tmpdir), 0);
    umask(old);
    assert_int_equal(file_mode(SEALED_SECRET_KEY_FILE), 0600);
    assert_int_equal(file_mode(SEALED_SECRET_PUB_FILE), 0644);

    char *key = slurp(SEALED_SECRET_KEY_FILE), *pub = slurp(SEALED_SECRET_PUB_FILE);
    assert_non_null(strstr(key, "-----BEGIN PRIVATE KEY-----"));
    assert_non_null(strstr(pub, "-----BEGIN PUBLIC KEY-----"));

    /* Again: both exist, nothing changes. */
    assert_int_equal(sealed_secret_keygen(tmpdir), 0);
    char *key2 = slurp(SEALED_SECRET_KEY_FILE), *pub2 = slurp(SEALED_SECRET_PUB_FILE);
    assert_string_equal(key, key2);
    assert_string_equal(pub, pub2);

    /* A lost .pub is written again from the key, the same one. */
    char p[128];
    path_of(p, sizeof(p), tmpdir, SEALED_SECRET_PUB_FILE);
    assert_int_equal(unlink(p), 0);
    assert_int_equal(sealed_secret_keygen(tmpdir), 0);
    char *pub3 = slurp(SEALED_SECRET_PUB_FILE);
    assert_string_equal(pub, pub3);

    /* A .pub without its key is never replaced. */
    path_of(p, sizeof(p), tmpdir, SEALED_SECRET_KEY_FILE);
    assert_int_equal(unlink(p), 0);
    assert_int_equal(sealed_secret_keygen(tmpdir), -EINVAL);
    char *pub4 = slurp(SEALED_SECRET_PUB_FILE);
    assert_string_equal(pub, pub4);
    assert_int_equal(access(p, F_OK), -1);

    free(key);
    free(key2);
    free(pub);
    free(pub2);
    free(pub3);
    free(pub4);
}

static void test_keygen_mismatch(void **state)
{
    (void)state;
    char other[80], p[128], q[128];
    snprintf(other, sizeof(other), "%s/other", tmpdir);
    assert_int_equal(mkdir(other, 0700), 0);
    assert_int_equal(sealed_secret_keygen(tmpdir), 0);
    assert_int_equal(sealed_secret_keygen(other), 0);
    /* Another pair's public key beside our private key. */
    path_of(p, sizeof(p), other, SEALED_SECRET_PUB_FILE);
    path_of(q, sizeof(q), tmpdir, SEALED_SECRET_PUB_FILE);
    assert_int_equal(rename(p, q), 0);
    assert_int_equal(sealed_secret_keygen(tmpdir), -EINVAL);
    /* A missing directory. */
    snprintf(other, sizeof(other), "%s/absent", tmpdir);
    assert_int_equal(sealed_secret_keygen(other), -ENOENT);
}

static void test_load_refuses_other_keys(void **state)
{
    (void)state;
    char p[128];
    EVP_PKEY *k = (EVP_PKEY *)1;
    path_of(p, sizeof(p), tmpdir, "ec.pem");
    EVP_PKEY *ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    assert_int_equal(PEM_write_PrivateKey(f, ec, NULL, NULL, 0, NULL, NULL), 1);
    assert_int_equal(PEM_write_PUBKEY(f, ec), 1);
    fclose(f);
    EVP_PKEY_free(ec);
    assert_int_equal(sealed_secret_load_private(p, &k), -EINVAL);
    assert_int_equal(sealed_secret_load_public(p, &k), -EINVAL);
    assert_ptr_equal(k, (EVP_PKEY *)1);
    path_of(p, sizeof(p), tmpdir, "absent.pem");
    assert_int_equal(sealed_secret_load_private(p, &k), -ENOENT);
}

static void round_trip(EVP_PKEY *pub, EVP_PKEY *priv, const char *aad, const void *v, size_t n)
{
    char *s = NULL;
    uint8_t *out = NULL;
    size_t out_n = 0;

    assert_int_equal(sealed_secret_seal(pub, aad, v, n, &s), 0);
    assert_true(strncmp(s, "s1.", 3) == 0);
    assert_true(strlen(s) <= SEALED_SECRET_MAX_SEALED);
    assert_int_equal(sealed_secret_open(priv, aad, s, &out, &out_n), 0);
    assert_int_equal(out_n, n);
    assert_memory_equal(out, v, n);
    assert_int_equal(out[n], 0);
    /* The plaintext does not show in the sealed form. */
    if (n >= 8) {
        assert_null(memmem(s, strlen(s), v, n));
    }
    free(out);
    free(s);
}

static void test_round_trip(void **state)
{
    (void)state;
    EVP_PKEY *pub, *priv;
    assert_int_equal(sealed_secret_keygen(tmpdir), 0);
    load_pair(tmpdir, &pub, &priv);

    round_trip(pub, priv, "gh", "ghp_0123456789abcdef", 20);
    round_trip(pub, priv, "", "x", 1);
    round_trip(pub, priv, "empty", "", 0);
    uint8_t bin[256];
    for (size_t i = 0; i < sizeof(bin); i++) {
        bin[i] = (uint8_t)i;
    }
    round_trip(pub, priv, "binary", bin, sizeof(bin));
    uint8_t *big = malloc(SEALED_SECRET_MAX_VALUE);
    assert_non_null(big);
    memset(big, 'A', SEALED_SECRET_MAX_VALUE);
    round_trip(pub, priv, "big", big, SEALED_SECRET_MAX_VALUE);
    /* A private key seals too (it holds its public half). */
    round_trip(priv, priv, "gh", "value", 5);

    /* Two seals of one value differ (a fresh ephemeral key each). */
    char *a, *b;
    assert_int_equal(sealed_secret_seal(pub, "gh", "v", 1, &a), 0);
    assert_int_equal(sealed_secret_seal(pub, "gh", "v", 1, &b), 0);
    assert_string_not_equal(a, b);
    free(a);
    free(b);

    char *s = (char *)1;
    assert_int_equal(sealed_secret_seal(pub, "big", big, SEALED_SECRET_MAX_VALUE + 1, &s), -E2BIG);
    assert_int_equal(sealed_secret_seal(pub, NULL, "v", 1, &s), -EINVAL);
    assert_int_equal(sealed_secret_seal(NULL, "gh", "v", 1, &s), -EINVAL);
    assert_ptr_equal(s, (char *)1);
    free(big);
    EVP_PKEY_free(pub);
    EVP_PKEY_free(priv);
}

/* Opens s expecting error r, *ret left alone. */
static void open_fails(EVP_PKEY *priv, const char *aad, const char *s, int r)
{
    uint8_t *out = (uint8_t *)1;
    size_t n = 77;
    assert_int_equal(sealed_secret_open(priv, aad, s, &out, &n), r);
    assert_ptr_equal(out, (uint8_t *)1);
    assert_int_equal(n, 77);
}

static char *reencode(const uint8_t *blob, size_t n)
{
    char *s = malloc(3 + base64_encoded_len(n) + 1);
    assert_non_null(s);
    memcpy(s, "s1.", 3);
    base64_encode(blob, n, s + 3);
    return s;
}

static void test_open_failures(void **state)
{
    (void)state;
    EVP_PKEY *pub, *priv, *opub, *opriv;
    char other[80];
    snprintf(other, sizeof(other), "%s/other", tmpdir);
    assert_int_equal(mkdir(other, 0700), 0);
    assert_int_equal(sealed_secret_keygen(tmpdir), 0);
    assert_int_equal(sealed_secret_keygen(other), 0);
    load_pair(tmpdir, &pub, &priv);
    load_pair(other, &opub, &opriv);

    char *s;
    assert_int_equal(sealed_secret_seal(pub, "gh", "ghp_secret_token", 16, &s), 0);

    open_fails(priv, "GH", s, -EBADMSG);
    open_fails(priv, "gh2", s, -EBADMSG);
    open_fails(priv, "", s, -EBADMSG);
    open_fails(opriv, "gh", s, -EKEYREJECTED);
    open_fails(pub, "gh", s, -EINVAL); /* a public key cannot open */
    open_fails(NULL, "gh", s, -EINVAL);
    open_fails(priv, NULL, s, -EINVAL);
    open_fails(priv, "gh", NULL, -EINVAL);

    /* Prefixes and encodings. */
    open_fails(priv, "gh", "", -EBADMSG);
    open_fails(priv, "gh", "s1.", -EBADMSG);
    open_fails(priv, "gh", "s2.AAAA", -EBADMSG);
    open_fails(priv, "gh", s + 3, -EBADMSG);
    char *t = strdup(s);
    t[0] = 'S';
    open_fails(priv, "gh", t, -EBADMSG);
    strcpy(t, s);
    t[10] = '*';
    open_fails(priv, "gh", t, -EBADMSG);
    strcpy(t, s);
    t[10] = '\n';
    open_fails(priv, "gh", t, -EBADMSG);

    /* Truncated at every length (dropping only '=' padding is no change). */
    for (size_t i = 0; i < strlen(s); i++) {
        if (strspn(s + i, "=") == strlen(s + i)) {
            continue;
        }
        t[i] = 0;
        open_fails(priv, "gh", t, -EBADMSG);
        strcpy(t, s);
    }
    free(t);

    /* Every bit of the decoded blob flipped: the key/nonce bytes fail the
     * nonce check, the ciphertext and tag the GCM tag. */
    uint8_t blob[256];
    long n = base64_decode(s + 3, strlen(s) - 3, blob);
    assert_int_equal(n, 32 + 12 + 16 + 16);
    for (long i = 0; i < n * 8; i++) {
        blob[i / 8] ^= (uint8_t)(1u << (i % 8));
        char *f = reencode(blob, (size_t)n);
        uint8_t *out = NULL;
        size_t on;
        int r = sealed_secret_open(priv, "gh", f, &out, &on);
        assert_true(r == (i / 8 < 44 ? -EKEYREJECTED : -EBADMSG) ||
                    (i / 8 < 32 && r == -EBADMSG)); /* a low-order eph_pub */
        assert_null(out);
        free(f);
        blob[i / 8] ^= (uint8_t)(1u << (i % 8));
    }
    /* One byte short of the smallest envelope, and an appended byte. */
    char *f = reencode(blob, (size_t)n - 17);
    open_fails(priv, "gh", f, -EBADMSG);
    free(f);
    blob[n] = 0;
    f = reencode(blob, (size_t)n + 1);
    open_fails(priv, "gh", f, -EBADMSG);
    free(f);

    /* An all-zero (low-order) ephemeral key: the exchange itself fails. */
    memset(blob, 0, 32);
    f = reencode(blob, (size_t)n);
    open_fails(priv, "gh", f, -EBADMSG);
    free(f);

    /* Oversize: a valid-looking envelope one byte over the cap, and a long string. */
    size_t big_n = 32 + 12 + SEALED_SECRET_MAX_VALUE + 1 + 16;
    uint8_t *big = calloc(1, big_n);
    assert_non_null(big);
    f = reencode(big, big_n);
    open_fails(priv, "gh", f, -EBADMSG);
    free(f);
    free(big);
    char *huge = malloc(1 << 20);
    assert_non_null(huge);
    memset(huge, 'A', (1 << 20) - 1);
    huge[(1 << 20) - 1] = 0;
    memcpy(huge, "s1.", 3);
    open_fails(priv, "gh", huge, -EBADMSG);
    free(huge);

    free(s);
    EVP_PKEY_free(pub);
    EVP_PKEY_free(priv);
    EVP_PKEY_free(opub);
    EVP_PKEY_free(opriv);
}

/* A value sealed by tests/gw/sealing.py (a second implementation, from the
 * header's description) to RFC 7748's Alice key opens here. */
static void test_known_answer(void **state)
{
    (void)state;
    static const uint8_t alice[32] = {
        0x77, 0x07, 0x6d, 0x0a, 0x73, 0x18, 0xa5, 0x7d, 0x3c, 0x16, 0xc1,
        0x72, 0x51, 0xb2, 0x66, 0x45, 0xdf, 0x4c, 0x2f, 0x87, 0xeb, 0xc0,
        0x99, 0x2a, 0xb1, 0x77, 0xfb, 0xa5, 0x1d, 0xb9, 0x2c, 0x2a,
    };
    const char *sealed =
        "s1.XgSRUGFWvTt+rpjng1PEPJOZKR9L4pZHrh7713YUdGhKKUEWbRwuC8OgKCNEBQUr9Q2yINdC6WPrWn"
        "CDN39FCPXZvVF4G5chon4a3DhavI0=";
    EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, alice, sizeof(alice));
    uint8_t *out = NULL;
    size_t n = 0;
    assert_non_null(k);
    assert_int_equal(sealed_secret_open(k, "gh", sealed, &out, &n), 0);
    assert_int_equal(n, 20);
    assert_memory_equal(out, "ghp_0123456789abcdef", 20);
    free(out);
    open_fails(k, "gx", sealed, -EBADMSG);
    EVP_PKEY_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_keygen_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keygen_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_refuses_other_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_failures, setup, teardown),
        cmocka_unit_test(test_known_answer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
