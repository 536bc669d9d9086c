#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <string.h>
#include <unistd.h>

#include "node/jail.h"

static bool has(const struct jail_files *f, const char *path)
{
    for (size_t i = 0; i < f->n; i++) {
        if (strcmp(f->paths[i], path) == 0) {
            return true;
        }
    }
    return false;
}

/* A dynamic binary brings its loader and libc; adding twice adds nothing. */
static void test_files_resolve_elf(void **state)
{
    struct jail_files f = { 0 };
    assert_int_equal(jail_files_add_elf(&f, "/bin/sh"), 0);
    assert_true(has(&f, "/bin/sh"));
    assert_true(has(&f, "/lib64/ld-linux-x86-64.so.2"));
    bool libc = false;
    for (size_t i = 0; i < f.n; i++) {
        libc = libc || strstr(f.paths[i], "/libc.so.6") != NULL;
    }
    assert_true(libc);
    size_t n = f.n;
    assert_int_equal(jail_files_add_elf(&f, "/bin/sh"), 0);
    assert_int_equal(f.n, n);
    assert_int_equal(jail_files_add(&f, "relative"), -EINVAL);
    assert_int_equal(jail_files_add(&f, "/nonexistent/file"), -ENOENT);
    jail_files_done(&f);
    assert_int_equal(f.n, 0);
}

/* Every name on the deny list is a syscall libseccomp knows on this arch (a typo would be
 * skipped silently by the filter builder). */
static void test_denied_names_resolve(void **state)
{
    size_t n = 0;
    for (size_t i = 0; jail_denied_syscalls[i]; i++, n++) {
        assert_int_not_equal(seccomp_syscall_resolve_name(jail_denied_syscalls[i]),
                             __NR_SCMP_ERROR);
    }
    assert_true(n >= 40);
}

static void test_spawn_refuses_bad_specs(void **state)
{
    const char *argv[] = { "/bin/true", NULL };
    struct jail_spec spec;
    pid_t pid;

    struct jail_config cfg = { .enabled = true };
    assert_int_equal(jail_init(&cfg), 0);
    jail_vmm_spec_init(&spec);
    spec.path = "/bin/true";
    spec.netns_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    spec.uid = spec.gid = 0; /* never root */
    assert_int_equal(jail_spawn(&spec, argv, &pid, NULL), -EINVAL);
    spec.uid = spec.gid = 900000 + 4094;
    spec.path = "true"; /* never a PATH lookup */
    assert_int_equal(jail_spawn(&spec, argv, &pid, NULL), -EINVAL);
    spec.path = "/bin/true";
    int bad = 1;
    spec.keep_fds = &bad; /* stdio is not a kept descriptor */
    spec.n_keep_fds = 1;
    assert_int_equal(jail_spawn(&spec, argv, &pid, NULL), -EINVAL);
    close(spec.netns_fd);
    spec.netns_fd = -1; /* never our own netns */
    spec.n_keep_fds = 0;
    assert_int_equal(jail_spawn(&spec, argv, &pid, NULL), -EINVAL);
    jail_done();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_files_resolve_elf),
        cmocka_unit_test(test_denied_names_resolve),
        cmocka_unit_test(test_spawn_refuses_bad_specs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
