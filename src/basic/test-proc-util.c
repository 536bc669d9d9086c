/* proc_kill_uid(): finds a process by its uid alone, and never by uid 0. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "basic/proc-util.h"

#define TEST_UID 899999u /* below the VMM slot uids, above any /etc/subuid range we use */

static void test_refuses_root(void **state)
{
    (void)state;
    assert_int_equal(proc_kill_uid(0, 0, NULL), -EINVAL);
}

static void test_kills_by_uid(void **state)
{
    int pipefd[2], status;
    unsigned n = 0;
    char c;

    (void)state;
    if (geteuid() != 0) {
        skip();
    }
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pipefd[0]);
        if (setgid(TEST_UID) < 0 || setuid(TEST_UID) < 0) {
            _exit(2);
        }
        (void)!write(pipefd[1], "x", 1);
        for (;;) {
            pause();
        }
    }
    close(pipefd[1]);
    assert_int_equal(read(pipefd[0], &c, 1), 1);
    close(pipefd[0]);
    assert_int_equal(proc_kill_uid(TEST_UID, SIGKILL, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    /* Nothing is left with that uid. */
    assert_int_equal(proc_kill_uid(TEST_UID, 0, &n), 0);
    assert_int_equal(n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refuses_root),
        cmocka_unit_test(test_kills_by_uid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
