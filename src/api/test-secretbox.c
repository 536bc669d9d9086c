/*
 * secretbox.h: sealing round trips, and every way a sealed value can be
 * wrong (another key, other associated data, changed bytes, junk) is an
 * error, never a crash or a wrong plaintext; the key file's rules.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/secretbox.h"
#include "basic/fileio.h"
#include "basic/macro.h"

static char tmpdir[4096];

static void key_fill(uint8_t fill, struct secretbox_key *ret)
{
    uint8_t bytes[SECRETBOX_KEY_LEN];

    memset(bytes, fill, sizeof(bytes));
    secretbox_key_from_bytes(bytes, ret);
}

static void test_round_trip(void **state)
{
    static const char *const texts[] = { "", "t", "0123456789abcdef0123456789abcdef",
                                         "日本語 \x01\x7f end" };
    struct secretbox_key key;
    char *sealed = NULL, *again = NULL, *plain = NULL;

    (void)state;
    key_fill(1, &key);
    assert_int_equal(strlen(key.id), SECRETBOX_KEY_ID_LEN);
    for (size_t i = 0; i < ARRAY_SIZE(texts); i++) {
        assert_int_equal(secretbox_seal(&key, "aad:sb1", texts[i], &sealed), 0);
        assert_true(strncmp(sealed, "v1.", 3) == 0);
        assert_int_equal(strncmp(sealed + 3, key.id, SECRETBOX_KEY_ID_LEN), 0);
        if (strlen(texts[i]) > 8) { /* a short text may occur in base64 by chance */
            assert_null(strstr(sealed, texts[i]));
        }
        assert_int_equal(secretbox_open(&key, "aad:sb1", sealed, &plain), 0);
        assert_string_equal(plain, texts[i]);
        free(plain);
        /* A fresh nonce each time: sealing twice never gives the same text. */
        assert_int_equal(secretbox_seal(&key, "aad:sb1", texts[i], &again), 0);
        assert_string_not_equal(sealed, again);
        free(again);
        free(sealed);
    }
}

static void test_wrong_key_and_aad(void **state)
{
    struct secretbox_key key, other, same_id;
    char *sealed = NULL, *plain = NULL, id[SECRETBOX_KEY_ID_LEN + 1];

    (void)state;
    key_fill(1, &key);
    key_fill(2, &other);
    assert_string_not_equal(key.id, other.id);
    assert_int_equal(secretbox_seal(&key, "aad:sb1", "secret", &sealed), 0);
    assert_int_equal(secretbox_sealed_key_id(sealed, id), 0);
    assert_string_equal(id, key.id);
    assert_int_equal(secretbox_open(&other, "aad:sb1", sealed, &plain), -EKEYREJECTED);
    /* Another key that claims the same id still fails the tag. */
    same_id = other;
    memcpy(same_id.id, key.id, sizeof(key.id));
    assert_int_equal(secretbox_open(&same_id, "aad:sb1", sealed, &plain), -EBADMSG);
    assert_int_equal(secretbox_open(&key, "aad:sb2", sealed, &plain), -EBADMSG);
    assert_int_equal(secretbox_open(&key, "", sealed, &plain), -EBADMSG);
    assert_null(plain);
    free(sealed);
}

static void test_tampered(void **state)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=";
    struct secretbox_key key;
    char *sealed = NULL, *plain = NULL;
    size_t body;

    (void)state;
    key_fill(1, &key);
    assert_int_equal(secretbox_seal(&key, "aad", "a-token-worth-keeping", &sealed), 0);
    body = 3 + SECRETBOX_KEY_ID_LEN + 1;
    /* Every base64 character changed to every other one (and to '='): none opens. */
    for (size_t i = body; sealed[i]; i++) {
        char was = sealed[i];

        for (const char *c = b64; *c; c++) {
            if (*c == was) {
                continue;
            }
            sealed[i] = *c;
            /* Even a change only in the last character's unused low bits: one spelling. */
            assert_int_equal(secretbox_open(&key, "aad", sealed, &plain), -EBADMSG);
        }
        sealed[i] = was;
    }
    /* Truncated at every length. */
    for (size_t n = strlen(sealed); n-- > 0;) {
        sealed[n] = '\0';
        int r = secretbox_open(&key, "aad", sealed, &plain);
        if (r != -EBADMSG && r != -EKEYREJECTED) {
            fail_msg("truncated to %zu: %d", n, r);
        }
    }
    assert_null(plain);
    free(sealed);
}

static void test_junk(void **state)
{
    static const char *const junk[] = {
        "",
        "v1",
        "v1.",
        "v2.0123456789abcdef.AAAA",
        "v1.0123456789ABCDEF.AAAA",
        "v1.0123456789abcdef",
        "v1.0123456789abcdefAAAA",
        "plaintext-token",
    };
    struct secretbox_key key;
    char *plain = NULL, *sealed = NULL, id[SECRETBOX_KEY_ID_LEN + 1];
    char big[SECRETBOX_MAX_PLAINTEXT + 2];

    (void)state;
    key_fill(1, &key);
    for (size_t i = 0; i < ARRAY_SIZE(junk); i++) {
        assert_int_equal(secretbox_open(&key, "aad", junk[i], &plain), -EBADMSG);
    }
    char *s = NULL;
    assert_true(asprintf(&s, "v1.%s.", key.id) > 0);
    assert_int_equal(secretbox_open(&key, "aad", s, &plain), -EBADMSG);
    free(s);
    assert_true(asprintf(&s, "v1.%s.!!!!====", key.id) > 0);
    assert_int_equal(secretbox_open(&key, "aad", s, &plain), -EBADMSG);
    free(s);
    assert_int_equal(secretbox_sealed_key_id("nope", id), -EBADMSG);
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(secretbox_seal(&key, "aad", big, &sealed), -EINVAL);
    assert_int_equal(secretbox_seal(NULL, "aad", "x", &sealed), -EINVAL);
    assert_int_equal(secretbox_open(&key, NULL, "x", &plain), -EINVAL);
    assert_null(plain);
    assert_null(sealed);
}

static void test_key_file(void **state)
{
    struct secretbox_key a, b;
    char path[4200], bad[4200];
    struct stat st;
    int fd;

    (void)state;
    snprintf(path, sizeof(path), "%s/store.key", tmpdir);
    assert_int_equal(secretbox_key_load(path, false, &a), -ENOENT);
    assert_int_equal(secretbox_key_load(path, true, &a), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(st.st_size, SECRETBOX_KEY_LEN);
    /* Loading again (with or without create) gives the same key. */
    assert_int_equal(secretbox_key_load(path, true, &b), 0);
    assert_memory_equal(a.bytes, b.bytes, SECRETBOX_KEY_LEN);
    assert_string_equal(a.id, b.id);
    assert_int_equal(secretbox_key_load(path, false, &b), 0);
    assert_string_equal(a.id, b.id);

    /* Readable by others: refused. */
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(secretbox_key_load(path, false, &b), -EPERM);
    assert_int_equal(chmod(path, 0600), 0);

    /* Wrong sizes: refused. */
    snprintf(bad, sizeof(bad), "%s/short.key", tmpdir);
    assert_int_equal(write_file_atomic(bad, "0123456789", 10), 0);
    assert_int_equal(secretbox_key_load(bad, true, &b), -EINVAL);
    snprintf(bad, sizeof(bad), "%s/long.key", tmpdir);
    fd = open(bad, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "0123456789012345678901234567890123", 33), 33);
    close(fd);
    assert_int_equal(secretbox_key_load(bad, false, &b), -EINVAL);
    /* A directory or a symlink is not a key file. */
    assert_int_equal(secretbox_key_load(tmpdir, false, &b), -EINVAL);
    snprintf(bad, sizeof(bad), "%s/link.key", tmpdir);
    assert_int_equal(symlink(path, bad), 0);
    assert_int_equal(secretbox_key_load(bad, false, &b), -ELOOP);
    secretbox_key_wipe(&a);
    secretbox_key_wipe(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip), cmocka_unit_test(test_wrong_key_and_aad),
        cmocka_unit_test(test_tampered),   cmocka_unit_test(test_junk),
        cmocka_unit_test(test_key_file),
    };
    const char *base = getenv("TMPDIR");
    int r;

    snprintf(tmpdir, sizeof(tmpdir), "%s/test-secretbox-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    r = cmocka_run_group_tests_name("secretbox", tests, NULL, NULL);
    (void)rm_rf(tmpdir);
    return r;
}
