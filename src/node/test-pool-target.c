#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "node/pool-target.h"

#define SEC USEC_PER_SEC

static void test_empty_rate_is_zero(void **state)
{
    struct pool_rate r;
    pool_rate_init(&r, 60 * SEC);
    assert_int_equal(pool_rate_count(&r, 0), 0);
    assert_int_equal(pool_rate_count(&r, 1000 * SEC), 0);
    assert_true(pool_rate_per_minute(&r, 1000 * SEC) == 0.0);
}

static void test_burst_counts_then_expires(void **state)
{
    struct pool_rate r;
    usec_t t0 = 5000 * SEC; /* any monotonic origin */
    pool_rate_init(&r, 60 * SEC);
    for (int i = 0; i < 6; i++) {
        pool_rate_add(&r, t0 + (usec_t)i * 100 * USEC_PER_MSEC);
    }
    assert_int_equal(pool_rate_count(&r, t0 + SEC), 6);
    assert_true(pool_rate_per_minute(&r, t0 + SEC) == 6.0);
    /* Still inside the window. */
    assert_int_equal(pool_rate_count(&r, t0 + 50 * SEC), 6);
    /* A window (plus a bucket) later, gone. */
    assert_int_equal(pool_rate_count(&r, t0 + 66 * SEC), 0);
}

static void test_sliding_window_drops_old_buckets_only(void **state)
{
    struct pool_rate r;
    usec_t t0 = 0;                /* zero is a valid time */
    pool_rate_init(&r, 60 * SEC); /* 5 s buckets */
    pool_rate_add(&r, t0);
    pool_rate_add(&r, t0 + 30 * SEC);
    pool_rate_add(&r, t0 + 30 * SEC);
    assert_int_equal(pool_rate_count(&r, t0 + 31 * SEC), 3);
    /* The first one leaves the window, the two later ones stay. */
    assert_int_equal(pool_rate_count(&r, t0 + 61 * SEC), 2);
    assert_int_equal(pool_rate_count(&r, t0 + 91 * SEC), 0);
    /* And counting starts again after a long quiet. */
    pool_rate_add(&r, t0 + 10000 * SEC);
    assert_int_equal(pool_rate_count(&r, t0 + 10000 * SEC), 1);
}

static void test_clock_that_does_not_move(void **state)
{
    struct pool_rate r;
    pool_rate_init(&r, 60 * SEC);
    for (int i = 0; i < 1000; i++) {
        pool_rate_add(&r, 42 * SEC);
    }
    assert_int_equal(pool_rate_count(&r, 42 * SEC), 1000);
}

static void test_tiny_window(void **state)
{
    struct pool_rate r;
    pool_rate_init(&r, 0); /* raised to one microsecond per bucket */
    pool_rate_add(&r, 7);
    assert_int_equal(pool_rate_count(&r, 7), 1);
    assert_int_equal(pool_rate_count(&r, 7 + POOL_RATE_BUCKETS + 1), 0);
}

static void test_target_clamps(void **state)
{
    /* demand, min, max, level, room */
    assert_int_equal(pool_target(0, 2, 8, 2, 100), 2);  /* quiet: the floor */
    assert_int_equal(pool_target(5, 2, 8, 2, 100), 5);  /* follows demand */
    assert_int_equal(pool_target(50, 2, 8, 2, 100), 8); /* up to the ceiling */
    assert_int_equal(pool_target(5, 2, 1, 0, 100), 2);  /* max below min: min */
    assert_int_equal(pool_target(0, 0, 0, 0, 100), 0);  /* off */
}

static void test_target_within_budget(void **state)
{
    /* Room for one more on top of the two there are. */
    assert_int_equal(pool_target(6, 2, 8, 2, 1), 3);
    /* No room: what is there stays, nothing more, even under the floor. */
    assert_int_equal(pool_target(6, 2, 8, 1, 0), 1);
    assert_int_equal(pool_target(0, 2, 8, 0, 0), 0);
    /* A shrinking pool (level above target) is not held up by the budget. */
    assert_int_equal(pool_target(0, 1, 8, 5, 0), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_rate_is_zero),
        cmocka_unit_test(test_burst_counts_then_expires),
        cmocka_unit_test(test_sliding_window_drops_old_buckets_only),
        cmocka_unit_test(test_clock_that_does_not_move),
        cmocka_unit_test(test_tiny_window),
        cmocka_unit_test(test_target_clamps),
        cmocka_unit_test(test_target_within_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
