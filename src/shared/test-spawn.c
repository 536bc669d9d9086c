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

#include "basic/fd-util.h"
#include "shared/spawn.h"

/* Runs a shell line with opts' privilege fields; returns its output (caller frees). */
static char *run_as(const struct spawn_opts *base, const char *line, int *ret_status)
{
    int out[2];
    char buf[8192];
    size_t len = 0;
    pid_t pid;
    ssize_t n;

    assert_int_equal(pipe2(out, O_CLOEXEC), 0);
    const char *argv[] = { "/bin/sh", "-c", line, NULL };
    struct spawn_opts opts = *base;
    opts.argv = argv;
    opts.stdin_fd = -1;
    opts.stdout_fd = out[1];
    opts.stderr_fd = out[1];
    opts.netns_fd = -1;
    assert_int_equal(spawn_start(&opts, &pid), 0);
    close_safe(out[1]);
    while ((n = read(out[0], buf + len, sizeof(buf) - 1 - len)) > 0) {
        len += (size_t)n;
    }
    buf[len] = '\0';
    close_safe(out[0]);
    *ret_status = spawn_wait(pid);
    return strdup(buf);
}

static void test_drop_privileges(void **state)
{
    int status, keep;
    char line[256];

    if (geteuid() != 0) {
        skip();
    }
    keep = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true(keep >= 3);
    gid_t groups[] = { 900124 };
    struct spawn_opts opts = { .drop_privileges = true,
                               .uid = 900123,
                               .gid = 900123,
                               .groups = groups,
                               .n_groups = 1,
                               .pass_fds = &keep,
                               .n_pass_fds = 1 };
    snprintf(line, sizeof(line),
             "grep -E '^(Uid|Gid|Groups|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status;"
             " test -e /proc/self/fd/%d && echo passed",
             keep);
    char *out = run_as(&opts, line, &status);
    assert_int_equal(status, 0);
    assert_non_null(strstr(out, "Uid:\t900123\t900123\t900123\t900123"));
    assert_non_null(strstr(out, "Gid:\t900123\t900123\t900123\t900123"));
    assert_non_null(strstr(out, "Groups:\t900124"));
    assert_non_null(strstr(out, "CapInh:\t0000000000000000"));
    assert_non_null(strstr(out, "CapPrm:\t0000000000000000"));
    assert_non_null(strstr(out, "CapEff:\t0000000000000000"));
    assert_non_null(strstr(out, "CapBnd:\t0000000000000000"));
    assert_non_null(strstr(out, "CapAmb:\t0000000000000000"));
    assert_non_null(strstr(out, "NoNewPrivs:\t1"));
    assert_non_null(strstr(out, "passed"));
    free(out);
    close_safe(keep);

    /* uid 0 is refused up front; a low fd cannot be passed. */
    pid_t pid;
    const char *argv[] = { "true", NULL };
    struct spawn_opts root = { .argv = argv, .drop_privileges = true, .uid = 0, .gid = 5 };
    assert_int_equal(spawn_start(&root, &pid), -EINVAL);
    int low = 1;
    struct spawn_opts lowfd = { .argv = argv, .pass_fds = &low, .n_pass_fds = 1 };
    assert_int_equal(spawn_start(&lowfd, &pid), -EINVAL);
}

static void test_fds_not_passed_are_closed(void **state)
{
    int status, other = open("/dev/null", O_RDONLY | O_CLOEXEC);
    char line[128];
    struct spawn_opts opts = { 0 };

    snprintf(line, sizeof(line), "test -e /proc/self/fd/%d && echo leaked || echo closed", other);
    char *out = run_as(&opts, line, &status);
    assert_string_equal(out, "closed\n");
    free(out);
    close_safe(other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drop_privileges),
        cmocka_unit_test(test_fds_not_passed_are_closed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
