#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "agent/identity.h"
#include "basic/base64.h"

static int parse(const char *text, struct identity *id)
{
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    const char *why = NULL;
    assert_non_null(j);
    int r = identity_parse(j, id, &why);
    if (r < 0) {
        assert_non_null(why);
    } else {
        /* Borrowed strings: the test only compares them before the decref. */
        if (id->hostname) {
            assert_true(strlen(id->hostname) > 0);
        }
    }
    json_decref(j);
    return r;
}

static void test_absent_fields_are_unset(void **state)
{
    struct identity id;
    assert_int_equal(parse("{\"accessToken\":\"x\"}", &id), 0);
    assert_null(id.hostname);
    assert_null(id.machine_id);
    assert_int_equal(id.entropy_len, 0);
}

static void test_valid_fields(void **state)
{
    struct identity id;
    unsigned char raw[64];
    char b64[128], text[512];
    for (size_t i = 0; i < sizeof(raw); i++) {
        raw[i] = (unsigned char)i;
    }
    base64_encode(raw, sizeof(raw), b64);
    snprintf(text, sizeof(text),
             "{\"hostname\":\"sbx-1\",\"machineId\":\"0123456789abcdef0123456789abcdef\","
             "\"entropy\":\"%s\"}",
             b64);
    assert_int_equal(parse(text, &id), 0);
    assert_int_equal(id.entropy_len, 64);
    assert_memory_equal(id.entropy, raw, 64);
    identity_release(&id);
    assert_int_equal(id.entropy_len, 0);
}

static void test_bad_fields_are_refused(void **state)
{
    struct identity id;
    static const char *const bad[] = {
        "{\"hostname\":\"\"}",
        "{\"hostname\":\"-x\"}",
        "{\"hostname\":\"a.b\"}",
        "{\"hostname\":\"a b\"}",
        "{\"hostname\":7}",
        "{\"hostname\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
        "{\"machineId\":\"0123456789ABCDEF0123456789abcdef\"}",
        "{\"machineId\":\"0123456789abcdef\"}",
        "{\"machineId\":\"00000000000000000000000000000000\"}",
        "{\"entropy\":\"AAAA\"}", /* 3 bytes: too little */
        "{\"entropy\":\"not base64!\"}",
        "{\"entropy\":42}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(parse(bad[i], &id), -EINVAL);
        assert_int_equal(id.entropy_len, 0);
    }
}

static void test_entropy_too_long_is_refused(void **state)
{
    struct identity id;
    static unsigned char raw[IDENTITY_ENTROPY_MAX + 1];
    static char b64[1024], text[1200];
    base64_encode(raw, sizeof(raw), b64);
    snprintf(text, sizeof(text), "{\"entropy\":\"%s\"}", b64);
    assert_int_equal(parse(text, &id), -EINVAL);
    base64_encode(raw, IDENTITY_ENTROPY_MAX, b64);
    snprintf(text, sizeof(text), "{\"entropy\":\"%s\"}", b64);
    assert_int_equal(parse(text, &id), 0);
    assert_int_equal(id.entropy_len, IDENTITY_ENTROPY_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_absent_fields_are_unset),
        cmocka_unit_test(test_valid_fields),
        cmocka_unit_test(test_bad_fields_are_refused),
        cmocka_unit_test(test_entropy_too_long_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
