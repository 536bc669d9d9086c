#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "shared/sandbox-id.h"

static void test_sandbox_id_validation(void **state)
{
    char id[SANDBOX_ID_LEN + 1];
    assert_int_equal(sandbox_id_new(id), 0);
    assert_true(sandbox_id_is_valid(id));
    assert_false(sandbox_id_is_valid(NULL));
    assert_false(sandbox_id_is_valid(""));
    assert_false(sandbox_id_is_valid("ABCDEFGHIJKLMNOPQRST"));
    assert_false(sandbox_id_is_valid("abcdefghij/lmnopqrst"));
    assert_false(sandbox_id_is_valid("abcdefghijklmnopqrs"));
    assert_false(sandbox_id_is_valid("../../../../etc/pass"));
    assert_true(sandbox_id_is_valid("abcdefghij0123456789"));
}

static void test_template_name_validation(void **state)
{
    assert_true(template_name_is_valid("base"));
    assert_true(template_name_is_valid("py-3_11"));
    assert_false(template_name_is_valid(""));
    assert_false(template_name_is_valid("-x"));
    assert_false(template_name_is_valid("../x"));
    assert_false(template_name_is_valid("Base"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sandbox_id_validation),
        cmocka_unit_test(test_template_name_validation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
