#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/egress-audit.h"

static void push_n(struct egress_audit *a, int from, int n)
{
    for (int i = from; i < from + n; i++) {
        json_t *r = json_pack("{s:s, s:i, s:i}", "proto", "dns", "i", i, "seq", 999);
        assert_int_equal(egress_audit_push(a, r), 0);
        json_decref(r);
    }
}

static json_t *records(json_t *reply)
{
    return json_object_get(reply, "records");
}

static json_int_t field(json_t *reply, size_t i, const char *key)
{
    return json_integer_value(json_object_get(json_array_get(records(reply), i), key));
}

static void test_sequence_and_paging(void **state)
{
    struct egress_audit *a = NULL;
    json_t *r;

    assert_int_equal(egress_audit_new(16, 1 << 20, &a), 0);
    assert_int_equal(strlen(egress_audit_epoch(a)), 32);
    r = egress_audit_read(a, 0, 10);
    assert_int_equal(json_array_size(records(r)), 0);
    assert_int_equal(json_integer_value(json_object_get(r, "next")), 0);
    json_decref(r);

    push_n(a, 1, 5);
    assert_int_equal(egress_audit_last_seq(a), 5);
    r = egress_audit_read(a, 0, 3);
    assert_string_equal(json_string_value(json_object_get(r, "epoch")), egress_audit_epoch(a));
    assert_int_equal(json_array_size(records(r)), 3);
    /* Our numbers, not the sender's. */
    assert_int_equal(field(r, 0, "seq"), 1);
    assert_int_equal(field(r, 0, "i"), 1);
    assert_int_equal(field(r, 2, "seq"), 3);
    assert_int_equal(json_integer_value(json_object_get(r, "next")), 3);
    json_decref(r);
    r = egress_audit_read(a, 3, 100);
    assert_int_equal(json_array_size(records(r)), 2);
    assert_int_equal(field(r, 1, "seq"), 5);
    assert_int_equal(json_integer_value(json_object_get(r, "next")), 5);
    json_decref(r);
    /* Caught up: nothing, cursor unchanged. */
    r = egress_audit_read(a, 5, 100);
    assert_int_equal(json_array_size(records(r)), 0);
    assert_int_equal(json_integer_value(json_object_get(r, "next")), 5);
    json_decref(r);
    /* A cursor of another epoch beyond ours: told where we are. */
    r = egress_audit_read(a, 1000, 100);
    assert_int_equal(json_array_size(records(r)), 0);
    assert_int_equal(json_integer_value(json_object_get(r, "next")), 5);
    json_decref(r);
    json_t *s = json_string("x");
    assert_int_equal(egress_audit_push(a, s), -EINVAL);
    json_decref(s);
    egress_audit_free(a);
}

static void test_overflow_is_counted(void **state)
{
    struct egress_audit *a = NULL;
    json_t *r;

    assert_int_equal(egress_audit_new(4, 1 << 20, &a), 0);
    push_n(a, 1, 10); /* keeps 7..10 */
    assert_int_equal(egress_audit_dropped(a), 6);
    r = egress_audit_read(a, 0, 100);
    assert_int_equal(json_array_size(records(r)), 5);
    assert_string_equal(json_string_value(json_object_get(json_array_get(records(r), 0), "reason")),
                        "audit-dropped");
    assert_int_equal(field(r, 0, "count"), 6);
    assert_int_equal(field(r, 0, "seq"), 6);
    assert_int_equal(field(r, 1, "seq"), 7);
    assert_int_equal(field(r, 1, "i"), 7);
    assert_int_equal(field(r, 4, "seq"), 10);
    json_decref(r);
    /* A puller that had read up to 4 lost 5 and 6 only. */
    r = egress_audit_read(a, 4, 1);
    assert_int_equal(json_array_size(records(r)), 1);
    assert_int_equal(field(r, 0, "count"), 2);
    assert_int_equal(json_integer_value(json_object_get(r, "next")), 6);
    json_decref(r);
    /* ...and continuing from the marker loses nothing more. */
    r = egress_audit_read(a, 6, 2);
    assert_int_equal(field(r, 0, "seq"), 7);
    assert_int_equal(field(r, 1, "seq"), 8);
    json_decref(r);
    egress_audit_free(a);
}

static void test_byte_bound(void **state)
{
    struct egress_audit *a = NULL;
    char big[200];

    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(egress_audit_new(1000, 16 * 256, &a), 0);
    for (int i = 0; i < 100; i++) {
        json_t *r = json_pack("{s:s}", "name", big);
        assert_int_equal(egress_audit_push(a, r), 0);
        json_decref(r);
    }
    /* About 210 bytes each: at most 4096 bytes kept. */
    assert_true(egress_audit_dropped(a) >= 80);
    assert_int_equal(egress_audit_last_seq(a), 100);
    /* One record over a 16th of the budget is refused, not allowed to flush the ring. */
    char huge[400];
    memset(huge, 'b', sizeof(huge) - 1);
    huge[sizeof(huge) - 1] = '\0';
    json_t *r = json_pack("{s:s}", "name", huge);
    assert_int_equal(egress_audit_push(a, r), -E2BIG);
    json_decref(r);
    egress_audit_free(a);
}

static void test_full_size_ring(void **state)
{
    struct egress_audit *a = NULL;
    json_t *r;

    assert_int_equal(egress_audit_new(EGRESS_AUDIT_MAX, EGRESS_AUDIT_MAX_BYTES, &a), 0);
    push_n(a, 1, (int)EGRESS_AUDIT_MAX + 10);
    assert_int_equal(egress_audit_dropped(a), 10);
    r = egress_audit_read(a, 0, EGRESS_AUDIT_LIMIT_MAX);
    assert_int_equal(json_array_size(records(r)), EGRESS_AUDIT_LIMIT_MAX);
    assert_int_equal(field(r, 0, "count"), 10);
    assert_int_equal(field(r, 1, "seq"), 11);
    json_decref(r);
    egress_audit_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sequence_and_paging),
        cmocka_unit_test(test_overflow_is_counted),
        cmocka_unit_test(test_byte_bound),
        cmocka_unit_test(test_full_size_ring),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
