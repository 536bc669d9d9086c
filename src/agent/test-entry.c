#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/entry.h"

static void check_mode(mode_t mode, const char *want)
{
    char out[16];

    entry_mode_string(mode, out);
    assert_string_equal(out, want);
}

static void test_entry_mode_string_matches_go(void **state)
{
    check_mode(S_IFREG | 0644, "-rw-r--r--");
    check_mode(S_IFDIR | 0755, "drwxr-xr-x");
    check_mode(S_IFLNK | 0777, "Lrwxrwxrwx");
    check_mode(S_IFDIR | 01777, "dtrwxrwxrwx");
    check_mode(S_IFCHR | 0666, "Dcrw-rw-rw-");
    check_mode(S_IFBLK | 0660, "Drw-rw----");
    check_mode(S_IFIFO | 0600, "prw-------");
    check_mode(S_IFSOCK | 0755, "Srwxr-xr-x");
    check_mode(S_IFREG | 04755, "urwxr-xr-x");
    check_mode(S_IFREG | 02755, "grwxr-xr-x");
    check_mode(S_IFREG | 0, "----------");
}

static void test_entry_timestamp(void **state)
{
    char out[40];
    struct timespec ts = { .tv_sec = 1700000000, .tv_nsec = 0 };

    entry_timestamp(&ts, out);
    assert_string_equal(out, "2023-11-14T22:13:20Z");
    ts.tv_nsec = 500000000;
    entry_timestamp(&ts, out);
    assert_string_equal(out, "2023-11-14T22:13:20.500Z");
    ts.tv_nsec = 123456000;
    entry_timestamp(&ts, out);
    assert_string_equal(out, "2023-11-14T22:13:20.123456Z");
    ts.tv_nsec = 1;
    entry_timestamp(&ts, out);
    assert_string_equal(out, "2023-11-14T22:13:20.000000001Z");
}

static void test_entry_info_file_and_symlink(void **state)
{
    char dir[] = "/tmp/test-entry-XXXXXX";
    char file[64], link[64], dangling[64];
    json_t *e = NULL;
    FILE *f;

    assert_non_null(mkdtemp(dir));
    snprintf(file, sizeof(file), "%s/f.txt", dir);
    snprintf(link, sizeof(link), "%s/l", dir);
    snprintf(dangling, sizeof(dangling), "%s/d", dir);
    f = fopen(file, "w");
    assert_non_null(f);
    fputs("hello", f);
    fclose(f);
    assert_int_equal(chmod(file, 0640), 0);
    assert_int_equal(symlink("f.txt", link), 0);
    assert_int_equal(symlink("nowhere", dangling), 0);

    assert_int_equal(entry_info(file, &e), 0);
    assert_string_equal(json_string_value(json_object_get(e, "name")), "f.txt");
    assert_string_equal(json_string_value(json_object_get(e, "type")), "FILE_TYPE_FILE");
    assert_string_equal(json_string_value(json_object_get(e, "size")), "5");
    assert_int_equal(json_integer_value(json_object_get(e, "mode")), 0640);
    assert_string_equal(json_string_value(json_object_get(e, "permissions")), "-rw-r-----");
    assert_null(json_object_get(e, "symlinkTarget"));
    json_decref(e);

    assert_int_equal(entry_info(link, &e), 0);
    assert_string_equal(json_string_value(json_object_get(e, "type")), "FILE_TYPE_FILE");
    assert_string_equal(json_string_value(json_object_get(e, "permissions")), "Lrwxrwxrwx");
    assert_string_equal(json_string_value(json_object_get(e, "symlinkTarget")), file);
    assert_int_equal(json_integer_value(json_object_get(e, "mode")), 0640);
    json_decref(e);

    assert_int_equal(entry_info(dangling, &e), 0);
    assert_null(json_object_get(e, "type"));
    assert_string_equal(json_string_value(json_object_get(e, "symlinkTarget")), dangling);
    json_decref(e);

    assert_int_equal(entry_info("/nonexistent/x", &e), -ENOENT);
    unlink(link);
    unlink(dangling);
    unlink(file);
    rmdir(dir);
}

static void test_entry_mkdir_owned(void **state)
{
    char dir[] = "/tmp/test-entry-XXXXXX";
    char deep[96], file[96], below[128];
    struct stat st;

    assert_non_null(mkdtemp(dir));
    snprintf(deep, sizeof(deep), "%s/a/b/c", dir);
    assert_int_equal(entry_mkdir_owned(deep, getuid(), getgid()), 0);
    assert_int_equal(stat(deep, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(entry_mkdir_owned(deep, getuid(), getgid()), 0);
    snprintf(file, sizeof(file), "%s/a/file", dir);
    fclose(fopen(file, "w"));
    snprintf(below, sizeof(below), "%s/x", file);
    assert_int_equal(entry_mkdir_owned(below, getuid(), getgid()), -ENOTDIR);
    unlink(file);
    rmdir(deep);
    snprintf(deep, sizeof(deep), "%s/a/b", dir);
    rmdir(deep);
    snprintf(deep, sizeof(deep), "%s/a", dir);
    rmdir(deep);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entry_mode_string_matches_go),
        cmocka_unit_test(test_entry_timestamp),
        cmocka_unit_test(test_entry_info_file_and_symlink),
        cmocka_unit_test(test_entry_mkdir_owned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
