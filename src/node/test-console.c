#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/fileio.h"
#include "node/console.h"

#define LINES 200000 /* ~5 MiB of "line NNNNNN\n" */

static void *writer(void *arg)
{
    int fd = *(int *)arg;
    char line[32];
    for (int i = 0; i < LINES; i++) {
        int n = snprintf(line, sizeof(line), "line %06d\n", i);
        assert_int_equal(write_all(fd, line, (size_t)n), 0);
    }
    close_safe(fd);
    return NULL;
}

static void check_log(const char *path, size_t max)
{
    char *data = NULL, last[32];
    size_t len;

    assert_int_equal(read_file(path, 64u << 20, &data, &len), 0);
    assert_true(len <= max);
    assert_true(len > max / 4);
    assert_memory_equal(data, CONSOLE_DROPPED_MARK, strlen(CONSOLE_DROPPED_MARK));
    snprintf(last, sizeof(last), "line %06d\n", LINES - 1);
    assert_string_equal(data + len - strlen(last), last);
    /* What is kept is contiguous: the line before the last one precedes it. */
    snprintf(last, sizeof(last), "line %06d\nline %06d\n", LINES - 2, LINES - 1);
    assert_non_null(strstr(data, last));
    free(data);
}

static void test_pump_keeps_the_newest_output_under_the_cap(void **state)
{
    char path[] = "/tmp/test-console-XXXXXX";
    int p[2], out = mkstemp(path);
    pthread_t t;

    assert_true(out >= 0);
    assert_int_equal(pipe(p), 0);
    assert_int_equal(pthread_create(&t, NULL, writer, &p[1]), 0);
    assert_int_equal(console_pump(p[0], out, CONSOLE_LOG_MAX_MIN), 0);
    pthread_join(t, NULL);
    close_safe(p[0]);
    close_safe(out);
    check_log(path, CONSOLE_LOG_MAX_MIN);
    unlink(path);
    assert_int_equal(console_pump(0, 1, 1000), -EINVAL);
}

static void test_pump_process_as_unprivileged_uid(void **state)
{
    char path[] = "/tmp/test-console-XXXXXX";
    int fd, tmp = mkstemp(path);
    pid_t pid;
    pthread_t t;

    if (geteuid() != 0) {
        skip();
    }
    close_safe(tmp);
    assert_int_equal(console_start(path, 256u << 10, 900201, 900201, &fd, &pid), 0);
    char status[64];
    snprintf(status, sizeof(status), "/proc/%d/status", (int)pid);
    assert_int_equal(pthread_create(&t, NULL, writer, &fd), 0);
    pthread_join(t, NULL); /* the writer closed fd: the pump sees EOF and exits */
    console_reap(pid);
    check_log(path, 256u << 10);
    assert_int_equal(access(status, F_OK), -1);
    unlink(path);
    assert_int_equal(console_start(path, 256u << 10, 0, 0, &fd, &pid), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pump_keeps_the_newest_output_under_the_cap),
        cmocka_unit_test(test_pump_process_as_unprivileged_uid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
