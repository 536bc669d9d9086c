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
#include "node/failed-list.h"

static struct failure failure(unsigned i)
{
    struct failure f = { .reason = i % 2 ? DEATH_PANIC : DEATH_OOM, .at = 1000 + i };
    snprintf(f.sandbox_id, sizeof(f.sandbox_id), "sb%018u", i);
    snprintf(f.iid, sizeof(f.iid), "iid%09u", i);
    snprintf(f.message, sizeof(f.message), "message %u", i);
    return f;
}

static void test_ring(void **state)
{
    struct failed_list l = { 0 };
    (void)state;

    assert_null(failed_list_at(&l, 0));
    for (unsigned i = 0; i < FAILED_LIST_MAX + 3; i++) {
        struct failure f = failure(i);
        failed_list_add(&l, &f);
    }
    /* the oldest three dropped, order kept */
    assert_int_equal(l.n, FAILED_LIST_MAX);
    assert_int_equal(failed_list_at(&l, 0)->at, 1003);
    assert_int_equal(failed_list_at(&l, FAILED_LIST_MAX - 1)->at, 1000 + FAILED_LIST_MAX + 2);
    assert_null(failed_list_at(&l, FAILED_LIST_MAX));
    struct failure f = failure(2);
    assert_null(failed_list_find(&l, f.sandbox_id));
    f = failure(10);
    assert_string_equal(failed_list_find(&l, f.sandbox_id)->message, "message 10");
}

static void test_save_load(void **state)
{
    char dir[] = "/tmp/test-failed-list-XXXXXX", path[64];
    struct failed_list l = { 0 }, back;
    (void)state;

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/" FAILED_LIST_FILE, dir);
    assert_int_equal(failed_list_load(&back, path), -ENOENT);
    for (unsigned i = 0; i < FAILED_LIST_MAX + 5; i++) {
        struct failure f = failure(i);
        failed_list_add(&l, &f);
    }
    assert_int_equal(failed_list_save(&l, path), 0);
    assert_int_equal(failed_list_load(&back, path), 0);
    assert_int_equal(back.n, l.n);
    for (size_t i = 0; i < l.n; i++) {
        assert_memory_equal(failed_list_at(&back, i), failed_list_at(&l, i),
                            sizeof(struct failure));
    }

    /* damaged: the list starts empty, never half read */
    static const char *const bad[] = {
        "",
        "{}",
        "[1]",
        "[{\"id\":\"x\"}]",
        /* an unknown field, a bad reason, a bad id, an over-long message */
        "[{\"id\":\"sb000000000000000001\",\"instance_id\":\"iid000000001\",\"reason\":\"oom\","
        "\"message\":\"m\",\"at_us\":1,\"extra\":1}]",
        "[{\"id\":\"sb000000000000000001\",\"instance_id\":\"iid000000001\",\"reason\":\"boom\","
        "\"message\":\"m\",\"at_us\":1}]",
        "[{\"id\":\"../x\",\"instance_id\":\"iid000000001\",\"reason\":\"oom\","
        "\"message\":\"m\",\"at_us\":1}]",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(write_file_atomic(path, bad[i], strlen(bad[i])), 0);
        back.n = 7;
        assert_int_equal(failed_list_load(&back, path), -EINVAL);
        assert_int_equal(back.n, 0);
    }
    char *longmsg = malloc(DEATH_MESSAGE_MAX + 200);
    assert_non_null(longmsg);
    int n = snprintf(longmsg, DEATH_MESSAGE_MAX + 200,
                     "[{\"id\":\"sb000000000000000001\",\"instance_id\":\"iid000000001\","
                     "\"reason\":\"oom\",\"at_us\":1,\"message\":\"");
    memset(longmsg + n, 'a', DEATH_MESSAGE_MAX);
    strcpy(longmsg + n + DEATH_MESSAGE_MAX, "\"}]");
    assert_int_equal(write_file_atomic(path, longmsg, strlen(longmsg)), 0);
    assert_int_equal(failed_list_load(&back, path), -EINVAL);
    free(longmsg);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring),
        cmocka_unit_test(test_save_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
