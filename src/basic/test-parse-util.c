#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>

#include "basic/parse-util.h"

static void test_parse_u64_strict(void **state)
{
    uint64_t v = 7;
    assert_int_equal(parse_u64("42", &v), 0);
    assert_int_equal(v, 42);
    assert_int_equal(parse_u64("18446744073709551615", &v), 0);
    assert_int_equal(parse_u64("18446744073709551616", &v), -ERANGE);
    assert_int_equal(parse_u64("", &v), -EINVAL);
    assert_int_equal(parse_u64("-1", &v), -EINVAL);
    assert_int_equal(parse_u64(" 1", &v), -EINVAL);
    assert_int_equal(parse_u64("1x", &v), -EINVAL);
}

static void test_parse_u32_range(void **state)
{
    uint32_t v;
    assert_int_equal(parse_u32("4294967295", &v), 0);
    assert_int_equal(parse_u32("4294967296", &v), -ERANGE);
}

static void test_parse_i64_sign(void **state)
{
    int64_t v;
    assert_int_equal(parse_i64("-5", &v), 0);
    assert_int_equal(v, -5);
    assert_int_equal(parse_i64("--5", &v), -EINVAL);
}

static void test_parse_size_units(void **state)
{
    uint64_t v;
    assert_int_equal(parse_size("512", &v), 0);
    assert_int_equal(v, 512);
    assert_int_equal(parse_size("256M", &v), 0);
    assert_int_equal(v, 256ULL << 20);
    assert_int_equal(parse_size("2GiB", &v), 0);
    assert_int_equal(v, 2ULL << 30);
    assert_int_equal(parse_size("2X", &v), -EINVAL);
    assert_int_equal(parse_size("99999999999999999999G", &v), -ERANGE);
    assert_int_equal(parse_size("17179869184G", &v), -ERANGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_u64_strict),
        cmocka_unit_test(test_parse_u32_range),
        cmocka_unit_test(test_parse_i64_sign),
        cmocka_unit_test(test_parse_size_units),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
