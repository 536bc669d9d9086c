/* Unit tests for the audit queue: order, batches within bounds, the drop record. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>

#include "basic/macro.h"
#include "gw/audit.h"

static void push_n(struct audit *a, unsigned from, unsigned n)
{
    for (unsigned i = from; i < from + n; i++) {
        json_t *rec = audit_record_new("sbx", "dns");
        json_object_set_new(rec, "n", json_integer(i));
        assert_int_equal(audit_push(a, rec), 0);
    }
}

static json_t *records_of(const struct strbuf *sb)
{
    json_t *o = json_loadb(sb->buf, sb->len, 0, NULL);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "type")), "audit");
    json_t *recs = json_incref(json_object_get(o, "records"));
    json_decref(o);
    return recs;
}

static void test_order_and_batches(void **state)
{
    struct audit *a;
    struct strbuf sb = STRBUF_INIT;

    assert_int_equal(audit_new(0, &a), 0);
    assert_int_equal(audit_batch(a, 256, 65536, &sb), 0);
    assert_int_equal(sb.len, 0);
    push_n(a, 0, 600);
    assert_int_equal(audit_batch(a, 256, 65536, &sb), 256);
    json_t *recs = records_of(&sb);
    assert_int_equal(json_array_size(recs), 256);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(recs, 0), "n")), 0);
    assert_string_equal(json_string_value(json_object_get(json_array_get(recs, 0), "proto")),
                        "dns");
    json_decref(recs);
    /* Not committed: the same batch again. */
    assert_int_equal(audit_batch(a, 256, 65536, &sb), 256);
    audit_commit(a, 256);
    assert_int_equal(audit_pending(a), 344);
    /* A byte bound cuts the batch short, and it still parses. */
    int n = audit_batch(a, 256, 1000, &sb);
    assert_true(n > 0 && n < 256);
    assert_true(sb.len <= 1000);
    recs = records_of(&sb);
    assert_int_equal(json_array_size(recs), (size_t)n);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(recs, 0), "n")), 256);
    json_decref(recs);
    strbuf_release(&sb);
    audit_free(a);
}

static void test_drop(void **state)
{
    struct audit *a;
    struct strbuf sb = STRBUF_INIT;

    assert_int_equal(audit_new(10, &a), 0);
    push_n(a, 0, 25);
    assert_int_equal(audit_pending(a), 10);
    assert_int_equal(audit_dropped_total(a), 15);
    assert_int_equal(audit_batch(a, 256, 65536, &sb), 10);
    json_t *recs = records_of(&sb);
    assert_int_equal(json_array_size(recs), 11);
    json_t *first = json_array_get(recs, 0);
    assert_string_equal(json_string_value(json_object_get(first, "reason")), "audit-dropped");
    assert_int_equal(json_integer_value(json_object_get(first, "count")), 15);
    /* The newest are kept. */
    assert_int_equal(json_integer_value(json_object_get(json_array_get(recs, 1), "n")), 15);
    json_decref(recs);
    /* The drop record counts against the record bound. */
    assert_int_equal(audit_batch(a, 5, 65536, &sb), 4);
    recs = records_of(&sb);
    assert_int_equal(json_array_size(recs), 5);
    json_decref(recs);
    audit_commit(a, 4);
    assert_int_equal(audit_batch(a, 256, 65536, &sb), 6);
    audit_commit(a, 6);
    assert_int_equal(audit_batch(a, 256, 65536, &sb), 0);
    assert_int_equal(sb.len, 0);
    /* A record that can never fit a datagram is dropped and counted, not stuck. */
    json_t *big = audit_record_new("sbx", "http");
    char huge[3000];
    memset(huge, 'a', sizeof(huge) - 1);
    huge[sizeof(huge) - 1] = '\0';
    json_object_set_new(big, "host", json_string(huge));
    assert_int_equal(audit_push(a, big), 0);
    assert_int_equal(audit_batch(a, 256, 1000, &sb), 0);
    recs = records_of(&sb);
    assert_int_equal(json_array_size(recs), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(recs, 0), "count")), 1);
    json_decref(recs);
    audit_commit(a, 0);
    assert_int_equal(audit_pending(a), 0);
    strbuf_release(&sb);
    audit_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_batches),
        cmocka_unit_test(test_drop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
