/* Unit tests for the per-sandbox attribution table: lookup, expiry, the bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "basic/macro.h"
#include "gw/resolved.h"

#define A(a, b, c, d)                                                                              \
    ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)

static void test_lookup(void **state)
{
    struct resolved *r;

    assert_int_equal(resolved_new(0, &r), 0);
    assert_false(resolved_has(r, "a.test", A(1, 2, 3, 4), 0));
    assert_int_equal(resolved_add(r, "a.test", A(1, 2, 3, 4), 100), 0);
    assert_true(resolved_has(r, "a.test", A(1, 2, 3, 4), 99));
    /* Another name at the same address (the CDN case) is not attributed. */
    assert_false(resolved_has(r, "b.test", A(1, 2, 3, 4), 0));
    assert_false(resolved_has(r, "a.test", A(1, 2, 3, 5), 0));
    /* Expired at its time. */
    assert_false(resolved_has(r, "a.test", A(1, 2, 3, 4), 100));
    /* A refresh extends, never shortens. */
    assert_int_equal(resolved_add(r, "a.test", A(1, 2, 3, 4), 200), 0);
    assert_int_equal(resolved_add(r, "a.test", A(1, 2, 3, 4), 150), 0);
    assert_true(resolved_has(r, "a.test", A(1, 2, 3, 4), 199));
    assert_int_equal(resolved_count(r), 1);
    assert_int_equal(resolved_add(r, "", A(1, 2, 3, 4), 1), -EINVAL);
    resolved_free(r);
}

static void test_bound(void **state)
{
    struct resolved *r;
    char name[32];

    assert_int_equal(resolved_new(64, &r), 0);
    for (unsigned i = 0; i < 1000; i++) {
        snprintf(name, sizeof(name), "n%u.test", i);
        assert_int_equal(resolved_add(r, name, A(10, 0, i >> 8, i & 0xff), 1000 + i), 0);
        assert_true(resolved_count(r) <= 64);
    }
    assert_int_equal(resolved_count(r), 64);
    /* The ones expiring first went; the newest stay. */
    assert_true(resolved_has(r, "n999.test", A(10, 0, 3, 999 & 0xff), 0));
    assert_false(resolved_has(r, "n0.test", A(10, 0, 0, 0), 0));
    resolved_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
