/* Rolling snapshot policies and retention (rolling-retention.h): parsing and thinning. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "api/rolling-retention.h"

#define S 1000000LL
#define HOUR (3600 * S)
#define DAY (24 * HOUR)

static int parse(const char *text, int64_t min_period, struct rolling_policy *p, char *err)
{
    json_error_t e;
    json_t *obj = json_loads(text, 0, &e);
    int r;

    assert_non_null(obj);
    r = rolling_policy_parse(obj, min_period, p, err, 256);
    json_decref(obj);
    return r;
}

static void test_parse_defaults(void **state)
{
    struct rolling_policy p;
    char err[256];

    (void)state;
    assert_int_equal(parse("{\"disk_every_s\": 600}", 60, &p, err), 0);
    assert_int_equal(p.disk_every_s, 600);
    assert_int_equal(p.full_every_s, 0);
    assert_int_equal(p.max_bytes, 0);
    assert_int_equal(p.n_tiers, 3);
    assert_int_equal(p.tiers[0].every_s, 0);
    assert_int_equal(p.tiers[0].for_s, 3600);
    assert_int_equal(p.tiers[2].every_s, 86400);

    json_t *j = rolling_policy_to_json(&p);
    struct rolling_policy q;
    assert_non_null(j);
    assert_int_equal(rolling_policy_parse(j, 60, &q, err, sizeof(err)), 0);
    assert_memory_equal(&p, &q, sizeof(p));
    json_decref(j);

    assert_int_equal(
        parse("{\"disk_every_s\": 60, \"full_every_s\": 3600, \"max_bytes\": 1000, "
              "\"tiers\": [{\"keep_all_s\": 600}, {\"every_s\": 600, \"for_s\": 3600}]}",
              60, &p, err),
        0);
    assert_int_equal(p.n_tiers, 2);
    assert_int_equal(p.tiers[1].every_s, 600);
    assert_int_equal(p.max_bytes, 1000);
    /* The test-only minimum lets a period of seconds through. */
    assert_int_equal(parse("{\"disk_every_s\": 2, \"tiers\": [{\"keep_all_s\": 4}]}", 1, &p, err),
                     0);
}

static void test_parse_refuses(void **state)
{
    static const char *const bad[] = {
        "[]",
        "{}",
        "{\"disk_every_s\": 0}",
        "{\"disk_every_s\": 59}",
        "{\"disk_every_s\": 600, \"full_every_s\": 10}",
        "{\"disk_every_s\": \"600\"}",
        "{\"disk_every_s\": 600.5}",
        "{\"disk_every_s\": -60}",
        "{\"disk_every_s\": 600, \"color\": 1}",
        "{\"disk_every_s\": 600, \"max_bytes\": -1}",
        "{\"disk_every_s\": 600, \"tiers\": []}",
        "{\"disk_every_s\": 600, \"tiers\": {}}",
        "{\"disk_every_s\": 600, \"tiers\": [1]}",
        "{\"disk_every_s\": 600, \"tiers\": [{}]}",
        "{\"disk_every_s\": 600, \"tiers\": [{\"keep_all_s\": 10}]}",
        "{\"disk_every_s\": 600, \"tiers\": [{\"keep_all_s\": 600, \"every_s\": 60}]}",
        "{\"disk_every_s\": 600, \"tiers\": [{\"every_s\": 600}]}",
        "{\"disk_every_s\": 600, \"tiers\": [{\"every_s\": 600, \"for_s\": 300}]}",
        "{\"disk_every_s\": 600, \"tiers\": [{\"every_s\": 600, \"for_s\": 6000, \"x\": 1}]}",
        /* More than ROLLING_TIER_KEEP_MAX kept by one tier. */
        "{\"disk_every_s\": 60, \"tiers\": [{\"keep_all_s\": 600000}]}",
        "{\"disk_every_s\": 60, \"tiers\": [{\"every_s\": 60, \"for_s\": 600000}]}",
        /* Reaching back more than a year. */
        "{\"disk_every_s\": 86400, \"tiers\": [{\"every_s\": 86400, \"for_s\": 31622400}, "
        "{\"every_s\": 86400, \"for_s\": 86400}]}",
        "{\"disk_every_s\": 60, \"tiers\": [{\"keep_all_s\": 60}, {\"keep_all_s\": 60}, "
        "{\"keep_all_s\": 60}, {\"keep_all_s\": 60}, {\"keep_all_s\": 60}, {\"keep_all_s\": 60}, "
        "{\"keep_all_s\": 60}, {\"keep_all_s\": 60}, {\"keep_all_s\": 60}]}",
    };
    struct rolling_policy p;
    char err[256];

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        if (parse(bad[i], 60, &p, err) != -EINVAL) {
            fail_msg("accepted: %s", bad[i]);
        }
        assert_true(err[0] != '\0');
    }
    assert_int_equal(rolling_policy_parse(NULL, 60, &p, err, sizeof(err)), -EINVAL);
}

static struct rolling_policy tiers3(void)
{
    return (struct rolling_policy){
        .disk_every_s = 600,
        .tiers = { { 0, 3600 }, { 3600, 86400 }, { 86400, 7 * 86400 } },
        .n_tiers = 3,
    };
}

/* Every 10 minutes for 10 days: the last hour whole, hourly for a day, daily for a week. */
static void test_retention_tiers(void **state)
{
    struct rolling_policy p = tiers3();
    enum { N = 6 * 24 * 10 };
    static struct rolling_item items[N];
    int64_t now = 1000 * DAY; /* a day boundary: buckets line up with the bands */
    size_t kept = 0, in_hour = 0, in_day = 0, in_week = 0;

    (void)state;
    for (size_t i = 0; i < N; i++) {
        items[i] = (struct rolling_item){ .created_at = now - (int64_t)i * 600 * S, .bytes = 1 };
    }
    size_t marked = rolling_retention(&p, items, N, now);
    for (size_t i = 0; i < N; i++) {
        int64_t age = now - items[i].created_at;
        if (items[i].drop) {
            continue;
        }
        kept++;
        if (age < HOUR) {
            in_hour++;
        } else if (age < HOUR + DAY) {
            in_day++;
        } else {
            assert_true(age < HOUR + DAY + 7 * DAY);
            in_week++;
        }
    }
    assert_int_equal(marked + kept, N);
    assert_int_equal(in_hour, 6);
    /* One per hour bucket in the day band (its edges may cut a bucket: 24 or 25). */
    assert_in_range(in_day, 24, 25);
    assert_in_range(in_week, 7, 8);
    /* The newest always stays; the oldest (10 days) is past every band. */
    assert_false(items[0].drop);
    assert_true(items[N - 1].drop);

    /* A second pass over what is left marks nothing more: thinning is stable. */
    static struct rolling_item left[N];
    size_t m = 0;
    for (size_t i = 0; i < N; i++) {
        if (!items[i].drop) {
            left[m++] = (struct rolling_item){ .created_at = items[i].created_at, .bytes = 1 };
        }
    }
    assert_int_equal(rolling_retention(&p, left, m, now), 0);
}

static void test_retention_bytes(void **state)
{
    struct rolling_policy p = { .disk_every_s = 60, .tiers = { { 0, 3600 } }, .n_tiers = 1 };
    struct rolling_item items[5];
    int64_t now = 100 * DAY;

    (void)state;
    for (size_t i = 0; i < 5; i++) {
        items[i] = (struct rolling_item){ .created_at = now - (int64_t)i * 60 * S, .bytes = 100 };
    }
    p.max_bytes = 250;
    assert_int_equal(rolling_retention(&p, items, 5, now), 3);
    assert_false(items[0].drop);
    assert_false(items[1].drop);
    assert_true(items[2].drop && items[3].drop && items[4].drop);

    /* No bound: all five are in the keep-all band. */
    for (size_t i = 0; i < 5; i++) {
        items[i].drop = false;
    }
    p.max_bytes = 0;
    assert_int_equal(rolling_retention(&p, items, 5, now), 0);

    /* One larger than the bound goes too: the bound is a bound. */
    p.max_bytes = 50;
    assert_int_equal(rolling_retention(&p, items, 5, now), 5);
}

static void test_retention_edges(void **state)
{
    struct rolling_policy p = { .disk_every_s = 60, .tiers = { { 0, 60 } }, .n_tiers = 1 };
    struct rolling_item items[3] = {
        { .created_at = 1000 * S + 5 * S, .bytes = 1 }, /* from the future: a clock step */
        { .created_at = 1000 * S - 59 * S, .bytes = 1 },
        { .created_at = 1000 * S - 60 * S, .bytes = 1, .drop = true }, /* already marked */
    };

    (void)state;
    assert_int_equal(rolling_retention(&p, items, 3, 1000 * S), 0);
    assert_false(items[0].drop);
    assert_false(items[1].drop);
    assert_true(items[2].drop);
    assert_int_equal(rolling_retention(&p, NULL, 0, 0), 0);
    /* No tiers at all keeps nothing. */
    p.n_tiers = 0;
    items[0].drop = items[1].drop = false;
    assert_int_equal(rolling_retention(&p, items, 2, 1000 * S), 2);
}

static void test_retention_total(void **state)
{
    struct rolling_item items[4] = {
        { .created_at = 4, .bytes = 10 },
        { .created_at = 3, .bytes = 10, .drop = true },
        { .created_at = 2, .bytes = 10 },
        { .created_at = 1, .bytes = 10 },
    };

    (void)state;
    assert_int_equal(rolling_retention_total(items, 4, 25), 1);
    assert_false(items[0].drop);
    assert_false(items[2].drop);
    assert_true(items[3].drop);
    assert_int_equal(rolling_retention_total(items, 4, 25), 0);
    assert_int_equal(rolling_retention_total(items, 4, 0), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_defaults),  cmocka_unit_test(test_parse_refuses),
        cmocka_unit_test(test_retention_tiers), cmocka_unit_test(test_retention_bytes),
        cmocka_unit_test(test_retention_edges), cmocka_unit_test(test_retention_total),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
