/* Snapshot manifests: checksums independent of sparseness, and every corruption detected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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

static void snap_dir(const char *data, const char *name, unsigned vcpus, unsigned mem, time_t mtime)
{
    char d[PATH_MAX], key[65];
    snprintf(d, sizeof(d), "%s/templates/base/snapshots/%s", data, name);
    assert_int_equal(mkdir_p(d, 0700), 0);
    static const char *const files[] = { "memory", "vmstate", "rootfs.ext4" };
    for (size_t i = 0; i < 3; i++) {
        char f[PATH_MAX + 16];
        snprintf(f, sizeof(f), "%s/%s", d, files[i]);
        assert_int_equal(write_file_atomic(f, "x", 1), 0);
    }
    snprintf(key, sizeof(key), "%s", name);
    assert_int_equal(snapshot_manifest_write(d, key, "base", vcpus, mem), 0);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/manifest.json", d);
    struct timespec ts[2] = { { .tv_sec = mtime }, { .tv_sec = mtime } };
    assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static bool snap_exists(const char *data, const char *name)
{
    char d[PATH_MAX];
    snprintf(d, sizeof(d), "%s/templates/base/snapshots/%s", data, name);
    return access(d, F_OK) == 0;
}

/* At start: the stale go (half-built, no manifest, another key), and of the current ones
 * all but the SNAPSHOT_SIZES_MAX newest. */
static void test_cleanup_removes_stale_and_bounds_sizes(void **state)
{
    char data[] = "/tmp/t-snapcl-XXXXXX", path[64], keys[5][65];
    assert_non_null(mkdtemp(data));
    snprintf(path, sizeof(path), "%s/templates/base", data);
    assert_int_equal(mkdir_p(path, 0755), 0);
    snprintf(path, sizeof(path), "%s/templates/base/template.json", data);
    assert_int_equal(write_file_atomic(path, "{\"name\": \"base\"}", 16), 0);
    struct vm_host host = { .data_dir = data };
    for (unsigned i = 0; i < 5; i++) {
        assert_int_equal(snapshot_key_of(&host, "base", 1 + i, 512, keys[i]), 0);
        snap_dir(data, keys[i], 1 + i, 512, 1000000 + i); /* keys[0] the oldest */
    }
    snap_dir(data, KEY, 1, 512, 2000000);        /* a current size, another key */
    snap_dir(data, "half.tmp", 1, 512, 2000000); /* a build cut short */
    snprintf(path, sizeof(path), "%s/templates/base/snapshots/nomanifest", data);
    assert_int_equal(mkdir_p(path, 0700), 0);

    assert_int_equal(snapshot_cleanup(&host), 4);
    assert_false(snap_exists(data, keys[0]));
    for (unsigned i = 1; i < 5; i++) {
        assert_true(snap_exists(data, keys[i]));
    }
    assert_false(snap_exists(data, KEY));
    assert_false(snap_exists(data, "half.tmp"));
    assert_false(snap_exists(data, "nomanifest"));
    assert_int_equal(snapshot_cleanup(&host), 0); /* nothing more to do */
    rm_rf(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sound_snapshot_verifies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dense_copy_has_the_same_checksum, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_memory_is_bad, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flipped_byte_is_bad, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_file_or_manifest, setup, teardown),
        cmocka_unit_test(test_cleanup_removes_stale_and_bounds_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
