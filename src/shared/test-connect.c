#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "shared/connect.h"

static void test_connect_codes_match_wire(void **state)
{
    assert_string_equal(connect_code_to_string(CONNECT_NOT_FOUND), "not_found");
    assert_int_equal(connect_code_to_http_status(CONNECT_NOT_FOUND), 404);
    assert_int_equal(connect_code_to_http_status(CONNECT_CANCELED), 499);
    assert_int_equal(connect_code_to_http_status(CONNECT_UNAUTHENTICATED), 401);
    assert_int_equal(connect_code_to_http_status(CONNECT_FAILED_PRECONDITION), 400);
    assert_int_equal(connect_code_from_string("deadline_exceeded"), CONNECT_DEADLINE_EXCEEDED);
    assert_int_equal(connect_code_from_string("nope"), _CONNECT_CODE_INVALID);
    assert_int_equal(connect_code_from_errno(-ENOENT), CONNECT_NOT_FOUND);
    for (int i = 0; i < _CONNECT_CODE_MAX; i++) {
        assert_int_equal(connect_code_from_string(connect_code_to_string(i)), i);
    }
}

static void test_connect_envelope_roundtrip(void **state)
{
    uint8_t buf[64];
    const uint8_t *payload;
    uint32_t len;
    size_t used;
    uint8_t flags;

    connect_envelope_header(CONNECT_FLAG_END_STREAM, 2, buf);
    memcpy(buf + 5, "{}", 2);
    assert_int_equal(connect_envelope_parse(buf, 4, 100, &flags, &payload, &len, &used), 0);
    assert_int_equal(connect_envelope_parse(buf, 6, 100, &flags, &payload, &len, &used), 0);
    assert_int_equal(connect_envelope_parse(buf, 7, 100, &flags, &payload, &len, &used), 1);
    assert_int_equal(flags, CONNECT_FLAG_END_STREAM);
    assert_int_equal(len, 2);
    assert_int_equal(used, 7);
    assert_memory_equal(payload, "{}", 2);
}

static void test_connect_envelope_rejects(void **state)
{
    uint8_t buf[8] = { 0x01, 0, 0, 0, 1, 'x' };
    const uint8_t *payload;
    uint32_t len;
    size_t used;
    uint8_t flags;

    assert_int_equal(connect_envelope_parse(buf, 6, 100, &flags, &payload, &len, &used), -EPROTO);
    connect_envelope_header(0, 0xffffffffu, buf);
    assert_int_equal(
        connect_envelope_parse(buf, 8, CONNECT_MAX_MESSAGE, &flags, &payload, &len, &used),
        -EMSGSIZE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_connect_codes_match_wire),
        cmocka_unit_test(test_connect_envelope_roundtrip),
        cmocka_unit_test(test_connect_envelope_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
