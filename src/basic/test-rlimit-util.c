#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include <sys/resource.h>

#include "basic/rlimit-util.h"

static void test_raise_reaches_hard_limit(void **state)
{
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max > 64) {
        struct rlimit low = { .rlim_cur = 64, .rlim_max = rl.rlim_max };
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    }
    int64_t n = rlimit_nofile_raise();
    assert_true(n >= 1);
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    assert_true(rl.rlim_cur == rl.rlim_max);
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur <= INT32_MAX) {
        assert_int_equal(n, (int64_t)rl.rlim_cur);
    }
}

static void test_conn_cap(void **state)
{
    /* 20000 fds, 256 reserved, a quarter for one listener, 1 fd each */
    assert_int_equal(rlimit_conn_cap(20000, 256, 25, 1, 64), 4936);
    /* the ingress: 2 fds per connection (client + tunnel) */
    assert_int_equal(rlimit_conn_cap(20000, 256, 50, 2, 64), 4936);
    /* tiny limits still leave a usable floor; nonsense shares mean "all" */
    assert_int_equal(rlimit_conn_cap(100, 256, 25, 1, 64), 64);
    assert_int_equal(rlimit_conn_cap(1256, 256, 0, 0, 1), 1000);
    assert_int_equal(rlimit_conn_cap(INT64_MAX, 0, 100, 1, 1), UINT32_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raise_reaches_hard_limit),
        cmocka_unit_test(test_conn_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
