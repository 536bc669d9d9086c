/* Snapshot manifests: checksums independent of sparseness, and every corruption detected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/fileio.h"
#include "node/snapshot.h"

#define KEY "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static char dir[64];

static void put(const char *name, off_t size, off_t at, const void *data, size_t n)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, size), 0);
    assert_int_equal(pwrite(fd, data, n, at), (ssize_t)n);
    close(fd);
}

static int verify(const char **why)
{
    int fd = -1;
    int r = snapshot_verify(dir, KEY, &fd, why);
    if (r == 0) {
        /* Sealed: nobody can change what restores map. */
        assert_true(fcntl(fd, F_GET_SEALS) & F_SEAL_WRITE);
        assert_int_equal(write(fd, "x", 1), -1);
        char page[4096];
        assert_int_equal(pread(fd, page, sizeof(page), 3 << 20), (ssize_t)sizeof(page));
        assert_int_equal(page[0], 'M');
        close(fd);
    }
    return r;
}

static int setup(void **state)
{
    static char page[4096];
    snprintf(dir, sizeof(dir), "/tmp/test-snapshot-XXXXXX");
    assert_non_null(mkdtemp(dir));
    memset(page, 'M', sizeof(page));
    put("memory", 8 << 20, 3 << 20, page, sizeof(page)); /* sparse: one page of data */
    memset(page, 'V', sizeof(page));
    put("vmstate", 4096, 0, page, sizeof(page));
    memset(page, 'D', sizeof(page));
    put("rootfs.ext4", 4 << 20, 1 << 20, page, sizeof(page));
    assert_int_equal(snapshot_manifest_write(dir, KEY, "base", 1, 8), 0);
    return 0;
}

static int teardown(void **state)
{
    rm_rf(dir);
    return 0;
}

static void test_sound_snapshot_verifies(void **state)
{
    const char *why = NULL;
    assert_int_equal(verify(&why), 0);
}

static void test_dense_copy_has_the_same_checksum(void **state)
{
    /* The same bytes with the zeros written out (cp without --sparse): still sound. */
    static char zero[1 << 20];
    char path[128];
    snprintf(path, sizeof(path), "%s/memory", dir);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    assert_int_equal(pwrite(fd, zero, sizeof(zero), 0), (ssize_t)sizeof(zero));
    close(fd);
    const char *why = NULL;
    assert_int_equal(verify(&why), 0);
}

static void test_truncated_memory_is_bad(void **state)
{
    char path[128];
    const char *why = NULL;
    snprintf(path, sizeof(path), "%s/memory", dir);
    assert_int_equal(truncate(path, 4 << 20), 0);
    assert_int_equal(verify(&why), -EBADMSG);
    assert_non_null(strstr(why, "size"));
}

static void test_flipped_byte_is_bad(void **state)
{
    const char *why = NULL;
    put("vmstate", 4096, 100, "W", 1);
    assert_int_equal(verify(&why), -EBADMSG);
    assert_non_null(strstr(why, "checksum"));
}

static void test_missing_file_or_manifest(void **state)
{
    char path[128];
    const char *why = NULL;
    int fd = -1;
    assert_int_equal(snapshot_verify(dir, "f" KEY, &fd, &why), -EBADMSG); /* other key */
    snprintf(path, sizeof(path), "%s/rootfs.ext4", dir);
    unlink(path);
    assert_int_equal(verify(&why), -EBADMSG);
    snprintf(path, sizeof(path), "%s/manifest.json", dir);
    unlink(path);
    assert_int_equal(verify(&why), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sound_snapshot_verifies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dense_copy_has_the_same_checksum, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_memory_is_bad, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flipped_byte_is_bad, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_file_or_manifest, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
