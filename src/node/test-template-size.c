/* A template's default size from template.json: defaults, bounds, wrong types refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>

#include "node/template-size.h"

static int parse(const char *text, struct template_size *s)
{
    const char *why = NULL;
    int r = template_size_parse(text, s, &why);
    assert_true(r == 0 ? why == NULL : why != NULL);
    return r;
}

static void test_default_without_fields(void **state)
{
    struct template_size s = { 0 };
    (void)state;
    assert_int_equal(parse("{\"name\": \"base\", \"kernel_key\": \"k\"}", &s), 0);
    assert_int_equal(s.vcpus, 1);
    assert_int_equal(s.memory_mib, 512);
}

static void test_given(void **state)
{
    struct template_size s = { 0 }, want = { .vcpus = 2, .memory_mib = 768 };
    (void)state;
    assert_int_equal(parse("{\"vcpus\": 2, \"memory_mb\": 768}", &s), 0);
    assert_true(template_size_equal(&s, &want));
    assert_int_equal(parse("{\"memory_mb\": 1024}", &s), 0);
    assert_int_equal(s.vcpus, 1);
    assert_int_equal(s.memory_mib, 1024);
    assert_int_equal(parse("{\"vcpus\": 16, \"memory_mb\": 65536}", &s), 0);
    assert_int_equal(parse("{\"vcpus\": 1, \"memory_mb\": 128}", &s), 0);
}

static void test_refused(void **state)
{
    static const char *const bad[] = {
        "{\"vcpus\": 0}",
        "{\"vcpus\": 17}",
        "{\"vcpus\": -1}",
        "{\"vcpus\": \"2\"}",
        "{\"vcpus\": 2.0}",
        "{\"vcpus\": null}",
        "{\"memory_mb\": 127}",
        "{\"memory_mb\": 65537}",
        "{\"memory_mb\": true}",
        "{\"memory_mb\": 1e3}",
        "{\"vcpus\": 4294967297}",
        "[1, 2]",
        "not json",
        "",
        "{\"vcpus\": 2",
    };
    struct template_size s = { .vcpus = 7, .memory_mib = 7 };
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(parse(bad[i], &s), -EINVAL);
        assert_int_equal(s.vcpus, 7); /* untouched on failure */
    }
    const char *why = NULL;
    assert_int_equal(template_size_parse(NULL, &s, &why), -EINVAL);
}

static void test_load_missing(void **state)
{
    struct template_size s;
    const char *why = NULL;
    (void)state;
    assert_true(template_size_load("/nonexistent-template-dir", &s, &why) == -ENOENT);
    assert_non_null(why);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_without_fields),
        cmocka_unit_test(test_given),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_load_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
