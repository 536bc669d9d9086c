#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "agent/metadata.h"

static void check_invalid(json_t *md, const char *want)
{
    char msg[1024] = "";

    assert_int_equal(metadata_validate(md, msg, sizeof(msg)), -EINVAL);
    assert_string_equal(msg, want);
    json_decref(md);
}

static void test_validate_matches_envd(void **state)
{
    char msg[256];
    char key[300], want[400];
    json_t *md;

    assert_int_equal(metadata_validate(NULL, msg, sizeof(msg)), 0);
    md = json_pack("{s:s, s:s}", "team", "ai", "run-id", "");
    assert_int_equal(metadata_validate(md, msg, sizeof(msg)), 0);
    json_decref(md);

    check_invalid(json_pack("{s:s}", "", "x"), "metadata key must not be empty");
    memset(key, 'k', 247);
    key[247] = '\0';
    snprintf(want, sizeof(want), "metadata key \"%s\" exceeds 246 bytes", key);
    check_invalid(json_pack("{s:s}", key, "x"), want);
    key[246] = '\0';
    md = json_pack("{s:s}", key, "x");
    assert_int_equal(metadata_validate(md, msg, sizeof(msg)), 0);
    json_decref(md);
    check_invalid(json_pack("{s:s}", "a\tb", "x"),
                  "metadata key contains non-printable-ASCII byte 0x09 at offset 1");
    check_invalid(
        json_pack("{s:s}", "k", "caf\xc3\xa9"),
        "metadata value for key \"k\" contains non-printable-ASCII byte 0xc3 at offset 3");

    /* 4096 bytes of prefix + key + value is the budget, not one byte more. */
    {
        char v[4096];
        memset(v, 'v', sizeof(v));
        v[4096 - 9 - 1] = '\0';
        md = json_pack("{s:s}", "k", v);
        assert_int_equal(metadata_validate(md, msg, sizeof(msg)), 0);
        json_decref(md);
        v[4096 - 9 - 1] = 'v';
        v[4096 - 9] = '\0';
        check_invalid(json_pack("{s:s}", "k", v), "total metadata size 4097 exceeds 4096 bytes");
    }
}

static void test_write_replaces_only_e2b_namespace(void **state)
{
    char path[] = "./test-metadata-XXXXXX";
    int fd = mkstemp(path);
    json_t *md, *got;
    char buf[16];

    assert_true(fd >= 0);
    if (fsetxattr(fd, "user.other", "keep", 4, 0) < 0) {
        close(fd);
        unlink(path);
        skip(); /* no user xattrs here (a tmpfs build dir) */
    }
    md = json_pack("{s:s, s:s}", "a", "1", "b", "2");
    assert_int_equal(metadata_write(fd, md), 0);
    json_decref(md);
    got = metadata_read(path);
    assert_non_null(got);
    assert_int_equal(json_object_size(got), 2);
    assert_string_equal(json_string_value(json_object_get(got, "a")), "1");
    json_decref(got);
    assert_int_equal(fgetxattr(fd, "user.e2b.a", buf, sizeof(buf)), 1);

    /* a new set replaces the old one; the empty set clears it; user.other stays */
    md = json_pack("{s:s}", "b", "3");
    assert_int_equal(metadata_write(fd, md), 0);
    json_decref(md);
    got = metadata_read(path);
    assert_int_equal(json_object_size(got), 1);
    assert_string_equal(json_string_value(json_object_get(got, "b")), "3");
    json_decref(got);
    assert_int_equal(metadata_write(fd, NULL), 0);
    assert_null(metadata_read(path));
    assert_int_equal(fgetxattr(fd, "user.other", buf, sizeof(buf)), 4);

    /* set by hand: a value that is not UTF-8 is skipped, the rest is reported */
    assert_int_equal(fsetxattr(fd, "user.e2b.bad", "\xff\xfe", 2, 0), 0);
    assert_int_equal(fsetxattr(fd, "user.e2b.good", "ok", 2, 0), 0);
    got = metadata_read(path);
    assert_int_equal(json_object_size(got), 1);
    assert_string_equal(json_string_value(json_object_get(got, "good")), "ok");
    json_decref(got);

    md = json_pack("{s:s}", "", "x");
    assert_int_equal(metadata_write(fd, md), -EINVAL);
    json_decref(md);
    close(fd);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validate_matches_envd),
        cmocka_unit_test(test_write_replaces_only_e2b_namespace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
