#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shared/json-util.h"

static void test_json_util_getters(void **state)
{
    json_t *o = json_loads("{\"pid\":\"42\",\"n\":7,\"neg\":-1,\"big\":4294967296,"
                           "\"snake_case\":\"s\",\"b\":true,\"nul\":null,\"str\":\"x\"}",
                           0, NULL);
    const char *s = NULL;
    uint32_t u = 0;
    int64_t i = 0;
    bool b = false;

    assert_non_null(o);
    assert_int_equal(json_util_get_u32(o, "pid", NULL, &u), 0);
    assert_int_equal(u, 42);
    assert_int_equal(json_util_get_u32(o, "n", NULL, &u), 0);
    assert_int_equal(u, 7);
    assert_int_equal(json_util_get_u32(o, "neg", NULL, &u), -EINVAL);
    assert_int_equal(json_util_get_u32(o, "big", NULL, &u), -EINVAL);
    assert_int_equal(json_util_get_i64(o, "big", NULL, &i), 0);
    assert_int_equal(i, 4294967296LL);
    assert_int_equal(json_util_get_string(o, "snakeCase", "snake_case", &s), 0);
    assert_string_equal(s, "s");
    assert_int_equal(json_util_get_bool(o, "b", NULL, &b), 0);
    assert_true(b);
    assert_int_equal(json_util_get_bool(o, "str", NULL, &b), -EINVAL);
    assert_int_equal(json_util_get_string(o, "nul", NULL, &s), -ENOENT);
    assert_int_equal(json_util_get_string(o, "missing", NULL, &s), -ENOENT);
    assert_int_equal(json_util_get_u32(o, "str", NULL, &u), -EINVAL);
    json_decref(o);

    /* Reals: whole ones in range are integers; the rest, however large, are refused. */
    o = json_loads("{\"whole\":3.0,\"frac\":2.5,\"huge\":4942e91,\"edge\":9223372036854775808.0,"
                   "\"neg\":-1e300}",
                   0, NULL);
    assert_non_null(o);
    assert_int_equal(json_util_get_i64(o, "whole", NULL, &i), 0);
    assert_int_equal(i, 3);
    assert_int_equal(json_util_get_i64(o, "frac", NULL, &i), -EINVAL);
    assert_int_equal(json_util_get_i64(o, "huge", NULL, &i), -EINVAL);
    assert_int_equal(json_util_get_u32(o, "huge", NULL, &u), -EINVAL);
    assert_int_equal(json_util_get_i64(o, "edge", NULL, &i), -EINVAL);
    assert_int_equal(json_util_get_i64(o, "neg", NULL, &i), -EINVAL);
    json_decref(o);
}

static void test_json_util_bytes(void **state)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:i}", "std", "aGk+Pw==", "url", "aGk-Pw", "bad", "!!",
                          "num", 3);
    void *data = NULL;
    size_t len = 0;

    assert_int_equal(json_util_get_bytes(o, "std", NULL, 100, &data, &len), 0);
    assert_int_equal(len, 4);
    assert_memory_equal(data, "hi>?", 4);
    free(data);
    assert_int_equal(json_util_get_bytes(o, "url", NULL, 100, &data, &len), 0);
    assert_memory_equal(data, "hi>?", 4);
    free(data);
    assert_int_equal(json_util_get_bytes(o, "std", NULL, 2, &data, &len), -E2BIG);
    assert_int_equal(json_util_get_bytes(o, "bad", NULL, 100, &data, &len), -EINVAL);
    assert_int_equal(json_util_get_bytes(o, "num", NULL, 100, &data, &len), -EINVAL);
    json_decref(o);

    o = json_util_bytes("\xff\x00\x01", 3);
    assert_string_equal(json_string_value(o), "/wAB");
    json_decref(o);
}

static void test_json_util_enum(void **state)
{
    static const struct json_util_enum t[] = { { "SIGNAL_SIGKILL", 9 }, { "SIGNAL_SIGTERM", 15 } };
    json_t *o =
        json_pack("{s:s, s:i, s:s, s:i}", "a", "SIGNAL_SIGKILL", "b", 15, "c", "NOPE", "d", 3);
    int v = 0;

    assert_int_equal(json_util_get_enum(o, "a", NULL, t, 2, &v), 0);
    assert_int_equal(v, 9);
    assert_int_equal(json_util_get_enum(o, "b", NULL, t, 2, &v), 0);
    assert_int_equal(v, 15);
    assert_int_equal(json_util_get_enum(o, "c", NULL, t, 2, &v), -EINVAL);
    assert_int_equal(json_util_get_enum(o, "d", NULL, t, 2, &v), -EINVAL);
    json_decref(o);
}

static void test_json_util_string_lossy(void **state)
{
    json_t *j = json_util_string_lossy("a\xff"
                                       "b\xc3\xa9",
                                       5);

    assert_non_null(j);
    assert_string_equal(json_string_value(j), "a\xef\xbf\xbd"
                                              "b\xc3\xa9");
    json_decref(j);
    /* overlong '/' and a lone surrogate are both invalid */
    j = json_util_string_lossy("\xc0\xaf\xed\xa0\x80", 5);
    assert_non_null(j);
    assert_int_equal(json_string_length(j), 3 * 5);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_util_getters),
        cmocka_unit_test(test_json_util_bytes),
        cmocka_unit_test(test_json_util_enum),
        cmocka_unit_test(test_json_util_string_lossy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
