#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/fileio.h"
#include "node/cgroup.h"

static char dir[64];

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/test-cgroup-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    return rm_rf(dir);
}

static void assert_file(const char *rel, const char *want)
{
    char path[512], *text = NULL;
    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    assert_int_equal(read_file(path, 4096, &text, NULL), 0);
    assert_string_equal(text, want);
    free(text);
}

static const struct cgroup_limits limits = {
    .memory_max = 768ull << 20, .cpu_weight = 200, .cpu_quota_pc = 250, .pids_max = 512
};

/* v1: one directory per controller, under our own cgroup in each ("cpu,cpuacct" co-mounted). */
static void test_v1(void **state)
{
    struct cgroup *cg = NULL;
    char path[4096];

    assert_int_equal(cgroup_init_as(CGROUP_V1, dir,
                                    "9:name=systemd:/\n8:pids:/\n4:memory:/outer/inner\n"
                                    "1:cpu,cpuacct:/\n0::/\n"),
                     0);
    assert_int_equal(cgroup_version(), CGROUP_V1);
    assert_int_equal(cgroup_create("iid-1", &limits, &cg), 0);
    assert_file("memory/outer/inner/space/iid-1/memory.limit_in_bytes", "805306368");
    assert_file("cpu/space/iid-1/cpu.shares", "2048");
    assert_file("cpu/space/cpu.shares", "65536");
    assert_file("cpu/space/iid-1/cpu.cfs_period_us", "100000");
    assert_file("cpu/space/iid-1/cpu.cfs_quota_us", "250000");
    assert_file("pids/space/iid-1/pids.max", "512");
    assert_int_equal(cgroup_attach(cg, 4242), 0);
    assert_file("memory/outer/inner/space/iid-1/cgroup.procs", "4242");
    assert_file("pids/space/iid-1/cgroup.procs", "4242");
    assert_int_equal(cgroup_path("iid-1", "pids", path, sizeof(path)), 0);
    assert_true(strstr(path, "/pids/space/iid-1") != NULL);
    assert_int_equal(cgroup_path("iid-1", "blkio", path, sizeof(path)), -EINVAL);
    cgroup_free(cg);
    assert_int_equal(cgroup_remove("iid-1"), 0);
    snprintf(path, sizeof(path), "%s/pids/space/iid-1", dir);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(cgroup_remove("iid-1"), 0); /* gone already: fine */
}

/* v2: one directory, controllers enabled for the children, swap off, OOM kills the group. */
static void test_v2(void **state)
{
    struct cgroup *cg = NULL;

    assert_int_equal(cgroup_init_as(CGROUP_V2, dir, "0::/system.slice/space-node.service\n"), 0);
    assert_int_equal(cgroup_version(), CGROUP_V2);
    assert_file("system.slice/space-node.service/space/cgroup.subtree_control",
                "+memory +cpu +pids");
    assert_file("system.slice/space-node.service/space/cpu.weight", "1000");
    assert_int_equal(cgroup_create("iid-2", &limits, &cg), 0);
    const char *d = "system.slice/space-node.service/space/iid-2/";
    char p[256];
    snprintf(p, sizeof(p), "%smemory.max", d);
    assert_file(p, "805306368");
    snprintf(p, sizeof(p), "%smemory.swap.max", d);
    assert_file(p, "0");
    snprintf(p, sizeof(p), "%smemory.oom.group", d);
    assert_file(p, "1");
    snprintf(p, sizeof(p), "%scpu.weight", d);
    assert_file(p, "200");
    snprintf(p, sizeof(p), "%scpu.max", d);
    assert_file(p, "250000 100000");
    snprintf(p, sizeof(p), "%spids.max", d);
    assert_file(p, "512");
    assert_int_equal(cgroup_attach(cg, 77), 0);
    snprintf(p, sizeof(p), "%scgroup.procs", d);
    assert_file(p, "77");
    cgroup_free(cg);
    assert_int_equal(cgroup_remove("iid-2"), 0);
}

static void test_bad_input(void **state)
{
    struct cgroup *cg = NULL;
    assert_int_equal(cgroup_init_as(CGROUP_V2, dir, "1:cpu:/\n"), -ENOENT); /* no 0:: line */
    assert_int_equal(cgroup_init_as(CGROUP_V1, dir, "0::/\n"), -ENOENT);    /* no memory line */
    assert_int_equal(cgroup_init_as(CGROUP_V2, dir, "0::/\n"), 0);
    assert_int_equal(cgroup_create("../etc", &limits, &cg), -EINVAL);
    assert_int_equal(cgroup_create("", &limits, &cg), -EINVAL);
    assert_int_equal(cgroup_create("a/b", &limits, &cg), -EINVAL);
    assert_int_equal(cgroup_remove(".."), -EINVAL);
    /* None: nothing to create, attach is a no-op. */
    assert_int_equal(cgroup_init_as(CGROUP_NONE, dir, ""), 0);
    assert_int_equal(cgroup_create("x", &limits, &cg), 0);
    assert_null(cg);
    assert_int_equal(cgroup_attach(NULL, 1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_v1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_v2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
