#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include <errno.h>

#include "basic/fault.h"

static void test_fault_points(void **state)
{
#if SPACE_FAULT_POINTS
    unsetenv("SPACE_FAULT");
    assert_false(fault_points_armed());
    assert_int_equal(fault_point("create.clone"), 0);
    setenv("SPACE_FAULT", "create.vmm:fail,create.clone:bogus", 1);
    assert_true(fault_points_armed());
    assert_int_equal(fault_point("create.vmm"), -EIO);
    assert_int_equal(fault_point("create.vm"), 0); /* exact names only */
    assert_int_equal(fault_point("create.vmmx"), 0);
    assert_int_equal(fault_point("create.clone"), 0); /* unknown action: ignored */
    setenv("SPACE_FAULT", "*:fail", 1);
    assert_int_equal(fault_point("anything"), -EIO);
    setenv("SPACE_FAULT", "x:exit", 1);
    assert_int_equal(fault_point("y"), 0);
    unsetenv("SPACE_FAULT");
#else
    assert_int_equal(fault_point("create.vmm"), 0);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fault_points),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
