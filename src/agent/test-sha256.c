#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "agent/files-http.h"
#include "agent/sha256.h"

static void hex(const uint8_t *d, char *out)
{
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++) {
        snprintf(out + 2 * i, 3, "%02x", d[i]);
    }
}

static void test_sha256_vectors(void **state)
{
    uint8_t d[SHA256_DIGEST_SIZE];
    char h[65];
    char million[1000];
    struct sha256 s;

    sha256_digest("", 0, d);
    hex(d, h);
    assert_string_equal(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha256_digest("abc", 3, d);
    hex(d, h);
    assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sha256_digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, d);
    hex(d, h);
    assert_string_equal(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    memset(million, 'a', sizeof(million));
    sha256_init(&s);
    for (int i = 0; i < 1000; i++) {
        sha256_update(&s, million, sizeof(million));
    }
    sha256_final(&s, d);
    hex(d, h);
    assert_string_equal(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_files_signature_shape(void **state)
{
    char sig[64];

    /* "v1_" + base64 without padding of 32 bytes: 43 characters. */
    files_signature("/home/user/a.txt", "read", "user", "token", NULL, sig);
    assert_int_equal(strlen(sig), 3 + 43);
    assert_memory_equal(sig, "v1_", 3);
    assert_null(strchr(sig, '='));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_files_signature_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
