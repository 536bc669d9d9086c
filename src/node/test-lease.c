#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/fileio.h"
#include "node/lease.h"

static char dir[64];

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/test-lease-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    return rm_rf(dir);
}

static bool stale_if_dead(const char *owner, void *userdata)
{
    return strcmp(owner, (const char *)userdata) == 0;
}

static void test_lowest_free_and_reuse(void **state)
{
    unsigned a, b, c, again;
    assert_int_equal(lease_acquire(dir, 4, "aaa", NULL, NULL, &a), 0);
    assert_int_equal(lease_acquire(dir, 4, "bbb", NULL, NULL, &b), 0);
    assert_int_equal(a, 0);
    assert_int_equal(b, 1);
    /* Asking again returns the same number (create is idempotent). */
    assert_int_equal(lease_acquire(dir, 4, "aaa", NULL, NULL, &again), 0);
    assert_int_equal(again, 0);
    assert_int_equal(lease_find(dir, "bbb", &again), 0);
    assert_int_equal(again, 1);
    /* A released number is the lowest free one again. */
    assert_int_equal(lease_release(dir, "aaa"), 0);
    assert_int_equal(lease_find(dir, "aaa", &again), -ENOENT);
    assert_int_equal(lease_acquire(dir, 4, "ccc", NULL, NULL, &c), 0);
    assert_int_equal(c, 0);
    assert_int_equal(lease_release(dir, "nobody"), 0);
    assert_int_equal(lease_release(dir, "bbb"), 0);
    assert_int_equal(lease_release(dir, "ccc"), 0);
}

static void test_full_then_stale(void **state)
{
    unsigned n;
    assert_int_equal(lease_acquire(dir, 2, "one", NULL, NULL, &n), 0);
    assert_int_equal(lease_acquire(dir, 2, "two", NULL, NULL, &n), 0);
    assert_int_equal(lease_acquire(dir, 2, "three", NULL, NULL, &n), -ENOSPC);
    /* Only a lease the callback calls abandoned is taken over. */
    assert_int_equal(lease_acquire(dir, 2, "three", stale_if_dead, "two", &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(lease_find(dir, "two", &n), -ENOENT);
    assert_int_equal(lease_find(dir, "three", &n), 0);
    assert_int_equal(n, 1);
    /* Releasing a lost lease must not drop the new owner's. */
    assert_int_equal(lease_release(dir, "two"), 0);
    assert_int_equal(lease_find(dir, "three", &n), 0);
}

static void test_dead_writers_leftovers_are_removed(void **state)
{
    char path[128];
    unsigned n;
    snprintf(path, sizeof(path), "%s/3.tmp.999", dir);
    assert_int_equal(write_file_atomic(path, "x", 1), 0);
    assert_int_equal(lease_acquire(dir, 4, "aaa", NULL, NULL, &n), 0);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(lease_release(dir, "aaa"), 0);
}

static void test_bad_owner(void **state)
{
    unsigned n;
    char big[200];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(lease_acquire(dir, 2, "", NULL, NULL, &n), -EINVAL);
    assert_int_equal(lease_acquire(dir, 2, "a\nb", NULL, NULL, &n), -EINVAL);
    assert_int_equal(lease_acquire(dir, 2, big, NULL, NULL, &n), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lowest_free_and_reuse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_then_stale, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_writers_leftovers_are_removed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_owner, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
