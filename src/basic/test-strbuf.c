#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include <errno.h>

#include "basic/strbuf.h"

static void test_strbuf_append_and_cap(void **state)
{
    struct strbuf sb;
    strbuf_init(&sb, 8);
    assert_int_equal(strbuf_appends(&sb, "abcd"), 0);
    assert_int_equal(strbuf_appendf(&sb, "%d", 123), 0);
    assert_string_equal(sb.buf, "abcd123");
    assert_int_equal(strbuf_appends(&sb, "xy"), -E2BIG);
    assert_string_equal(sb.buf, "abcd123"); /* unchanged on failure */
    strbuf_consume(&sb, 2);
    assert_string_equal(sb.buf, "cd123");
    size_t len;
    char *p = strbuf_detach(&sb, &len);
    assert_int_equal(len, 5);
    assert_string_equal(p, "cd123");
    free(p);
    strbuf_release(&sb);
}

static void test_strbuf_detach_empty(void **state)
{
    struct strbuf sb = STRBUF_INIT;
    char *p = strbuf_detach(&sb, NULL);
    assert_non_null(p);
    assert_string_equal(p, "");
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strbuf_append_and_cap),
        cmocka_unit_test(test_strbuf_detach_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
