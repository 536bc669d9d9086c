#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "basic/base64.h"

static void test_base64_roundtrip(void **state)
{
    const char *cases[][2] = {
        { "", "" },        { "f", "Zg==" },        { "fo", "Zm8=" },
        { "foo", "Zm9v" }, { "foob", "Zm9vYg==" }, { "hello\n", "aGVsbG8K" }
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char enc[32], dec[32];
        base64_encode(cases[i][0], strlen(cases[i][0]), enc);
        assert_string_equal(enc, cases[i][1]);
        long n = base64_decode(enc, strlen(enc), dec);
        assert_int_equal(n, (long)strlen(cases[i][0]));
        assert_memory_equal(dec, cases[i][0], (size_t)n);
    }
}

static void test_base64_binary(void **state)
{
    uint8_t in[256], out[260];
    char enc[400];
    for (int i = 0; i < 256; i++) {
        in[i] = (uint8_t)i;
    }
    base64_encode(in, sizeof(in), enc);
    assert_int_equal(strlen(enc), base64_encoded_len(sizeof(in)));
    assert_int_equal(base64_decode(enc, strlen(enc), out), 256);
    assert_memory_equal(in, out, 256);
}

static void test_base64_rejects_garbage(void **state)
{
    char out[16];
    assert_true(base64_decode("Zm9v!", 5, out) < 0);
    assert_true(base64_decode("Z", 1, out) < 0);
    assert_int_equal(base64_decode("Zm8", 3, out), 2); /* missing padding is accepted */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base64_roundtrip),
        cmocka_unit_test(test_base64_binary),
        cmocka_unit_test(test_base64_rejects_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
