#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/fileio.h"

static void test_fileio_atomic_roundtrip(void **state)
{
    char dir[] = "/tmp/test-fileio-XXXXXX";
    char path[128], sub[128];
    char *data = NULL;
    size_t len;

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/a/b/c", dir);
    assert_int_equal(mkdir_p(path, 0755), 0);
    snprintf(path, sizeof(path), "%s/a/state.json", dir);
    assert_int_equal(write_file_atomic(path, "{\"x\":1}", 7), 0);
    assert_int_equal(read_file(path, 1024, &data, &len), 0);
    assert_int_equal(len, 7);
    assert_string_equal(data, "{\"x\":1}");
    free(data);
    assert_int_equal(read_file(path, 3, &data, &len), -EFBIG);

    snprintf(sub, sizeof(sub), "%s/a/link", dir);
    assert_int_equal(symlink("/etc", sub), 0);
    assert_int_equal(rm_rf(dir), 0);
    assert_int_equal(access(dir, F_OK), -1);
    assert_int_equal(access("/etc/passwd", F_OK), 0); /* symlink not followed */
}

struct seen {
    off_t at[8];
    size_t n;
};

static int record_page(const uint8_t *page, size_t len, off_t at, void *userdata)
{
    struct seen *s = userdata;
    assert_int_equal(len, 4096);
    assert_int_equal(page[0], 0x5a);
    assert_true(s->n < 8);
    s->at[s->n++] = at;
    return 0;
}

static int stop_walk(const uint8_t *page, size_t len, off_t at, void *userdata)
{
    (void)page, (void)len, (void)at, (void)userdata;
    return -ECANCELED;
}

/* Holes and zero pages are skipped; data pages come in order; fn's error stops the walk. */
static void test_fileio_nonzero_pages(void **state)
{
    (void)state;
    char path[] = "/tmp/test-fileio-pages-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    uint8_t page[4096] = { 0x5a };
    uint8_t zero[4096] = { 0 };
    uint64_t size = 64 << 20;
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    assert_int_equal(pwrite_all(fd, page, sizeof(page), 4096), 0);
    assert_int_equal(pwrite_all(fd, zero, sizeof(zero), 8192), 0); /* data, but zero */
    assert_int_equal(pwrite_all(fd, page, sizeof(page), 12288), 0);
    assert_int_equal(pwrite_all(fd, page, sizeof(page), (off_t)(size - 4096)), 0);

    struct seen s = { 0 };
    assert_int_equal(for_each_nonzero_page(fd, size, record_page, &s), 0);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.at[0], 4096);
    assert_int_equal(s.at[1], 12288);
    assert_int_equal(s.at[2], (off_t)(size - 4096));
    assert_int_equal(for_each_nonzero_page(fd, size, stop_walk, NULL), -ECANCELED);
    close(fd);
}

/* The replace without fsync: same content, no temp file left, an existing file replaced. */
static void test_fileio_atomic_nosync(void **state)
{
    char dir[] = "/tmp/test-fileio-XXXXXX";
    char path[128], tmp[160];
    char *data = NULL;
    size_t len;

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/hostname", dir);
    assert_int_equal(write_file_atomic_nosync(path, "old\n", 4), 0);
    assert_int_equal(write_file_atomic_nosync(path, "sandbox\n", 8), 0);
    assert_int_equal(read_file(path, 1024, &data, &len), 0);
    assert_int_equal(len, 8);
    assert_string_equal(data, "sandbox\n");
    free(data);
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    assert_int_equal(access(tmp, F_OK), -1);
    snprintf(path, sizeof(path), "%s/missing/file", dir);
    assert_int_equal(write_file_atomic_nosync(path, "x", 1), -ENOENT);
    assert_int_equal(rm_rf(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fileio_atomic_roundtrip),
        cmocka_unit_test(test_fileio_nonzero_pages),
        cmocka_unit_test(test_fileio_atomic_nosync),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
