#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/fileio.h"
#include "node/cgroup.h"
#include "node/death.h"

/* W_EXITCODE/W_STOPCODE layouts as waitpid() fills them. */
#define EXITED(code) ((code) << 8)
#define SIGNALED(sig) (sig)

static void test_oom_counter(void **state)
{
    uint64_t v = 7;
    (void)state;
    /* v2 memory.events */
    assert_int_equal(
        death_parse_oom_kills("low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 1\n", &v),
        0);
    assert_int_equal(v, 1);
    /* v1 memory.oom_control */
    assert_int_equal(death_parse_oom_kills("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", &v), 0);
    assert_int_equal(v, 3);
    assert_int_equal(death_parse_oom_kills("oom_kill 0", &v), 0);
    assert_int_equal(v, 0);
    /* a kernel without the counter, and garbage */
    assert_int_equal(death_parse_oom_kills("oom_kill_disable 0\nunder_oom 0\n", &v), -EINVAL);
    assert_int_equal(death_parse_oom_kills("oom_kill x\n", &v), -EINVAL);
    assert_int_equal(death_parse_oom_kills("oom_kill 3x\n", &v), -EINVAL);
    assert_int_equal(death_parse_oom_kills("oom_kill 99999999999999999999999\n", &v), -EINVAL);
    assert_int_equal(death_parse_oom_kills("", &v), -EINVAL);
}

/* The counter is read from the file of the layout: v1 memory.oom_control, v2 memory.events. */
static void test_read_oom_kills(void **state)
{
    char tmpl[] = "/tmp/test-death-XXXXXX", path[512];
    struct cgroup_limits limits = { .memory_max = 1 << 20 };
    struct cgroup *cg = NULL;
    uint64_t v = 0;
    (void)state;

    assert_non_null(mkdtemp(tmpl));
    assert_int_equal(cgroup_init_as(CGROUP_V1, tmpl, "4:memory:/\n3:cpu:/\n2:pids:/\n"), 0);
    assert_int_equal(cgroup_create("iid-1", &limits, &cg), 0);
    cgroup_free(cg);
    assert_int_equal(death_read_oom_kills("iid-1", &v), -ENOENT);
    snprintf(path, sizeof(path), "%s/memory/space/iid-1/memory.oom_control", tmpl);
    assert_int_equal(write_file_atomic(path, "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n", 41),
                     0);
    assert_int_equal(death_read_oom_kills("iid-1", &v), 0);
    assert_int_equal(v, 2);
    assert_int_equal(death_read_oom_kills("../x", &v), -EINVAL);
    assert_int_equal(cgroup_remove("iid-1"), 0);

    assert_int_equal(cgroup_init_as(CGROUP_V2, tmpl, "0::/n\n"), 0);
    assert_int_equal(cgroup_create("iid-2", &limits, &cg), 0);
    cgroup_free(cg);
    snprintf(path, sizeof(path), "%s/n/space/iid-2/memory.events", tmpl);
    assert_int_equal(write_file_atomic(path, "oom 1\noom_kill 1\n", 17), 0);
    assert_int_equal(death_read_oom_kills("iid-2", &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(cgroup_remove("iid-2"), 0);
    assert_int_equal(rm_rf(tmpl), 0);
}

static void test_console_panic(void **state)
{
    char msg[64];
    (void)state;
    static const char log[] = "[    1.0] boot\n"
                              "[    3.0] Kernel panic - not syncing: sysrq triggered crash\r\n"
                              "[    3.1] Kernel Offset: disabled\n"
                              "[    3.2] ---[ end Kernel panic - not syncing: sysrq ]---\n";
    assert_true(death_console_panic(log, sizeof(log) - 1, msg, sizeof(msg)));
    assert_string_equal(msg, "Kernel panic - not syncing: sysrq triggered crash");
    assert_false(death_console_panic("all fine\n", 9, msg, sizeof(msg)));
    assert_false(death_console_panic(NULL, 0, msg, sizeof(msg)));
    /* hostile bytes: NULs before it, control bytes inside, a line longer than msg */
    char evil[300];
    memset(evil, 'A', sizeof(evil));
    evil[0] = '\0';
    memcpy(evil + 10, "Kernel panic\x01\x1b[", 15);
    assert_true(death_console_panic(evil, sizeof(evil), msg, sizeof(msg)));
    assert_int_equal(strlen(msg), sizeof(msg) - 1);
    assert_memory_equal(msg, "Kernel panic??[", 15);
    /* cut off in the middle of the key */
    assert_false(death_console_panic("Kernel pan", 10, msg, sizeof(msg)));
}

static void test_console_halted(void **state)
{
    (void)state;
    static const char halt[] = "[    1.0] boot\n[    9.2] reboot: System halted\r\n";
    assert_true(death_console_halted(halt, sizeof(halt) - 1));
    assert_true(death_console_halted("reboot: Power down", 18));
    assert_true(death_console_halted("x\nreboot: Power down\n\n", 22));
    /* only the last line counts: the guest went on after printing it */
    static const char later[] = "reboot: System halted\nlogin: ";
    assert_false(death_console_halted(later, sizeof(later) - 1));
    /* the key inside another word, cut off, or nothing */
    assert_false(death_console_halted("xreboot: Power down", 19));
    assert_false(death_console_halted("reboot: Power dow", 17));
    assert_false(death_console_halted(NULL, 0));
    assert_false(death_console_halted("\n\n", 2));
}

static void test_classify(void **state)
{
    char msg[DEATH_MESSAGE_MAX];
    static const char panic[] = "Kernel panic - not syncing: Fatal exception\n";
    (void)state;

    /* an OOM kill is a SIGKILL: the counter decides */
    struct death_evidence e = {
        .status_known = true, .wait_status = SIGNALED(SIGKILL), .oom_known = true, .oom_kills = 1
    };
    assert_int_equal(death_classify(&e, msg, sizeof(msg)), DEATH_OOM);
    assert_non_null(strstr(msg, "OOM"));
    e.oom_kills = 0;
    assert_int_equal(death_classify(&e, msg, sizeof(msg)), DEATH_VMM_CRASHED);
    assert_non_null(strstr(msg, "signal 9 (KILL)"));
    /* a panic is a clean exit of QEMU (-no-reboot) */
    e = (struct death_evidence){ .status_known = true,
                                 .wait_status = EXITED(0),
                                 .console = panic,
                                 .console_len = sizeof(panic) - 1 };
    assert_int_equal(death_classify(&e, msg, sizeof(msg)), DEATH_PANIC);
    assert_string_equal(msg, "guest kernel panic: Kernel panic - not syncing: Fatal exception");
    e.console = "reboot: Power down\n";
    e.console_len = strlen(e.console);
    assert_int_equal(death_classify(&e, msg, sizeof(msg)), DEATH_SHUTDOWN);
    /* a halted guest: the node killed its VMM */
    e.wait_status = SIGNALED(SIGKILL);
    assert_int_equal(death_classify(&e, msg, sizeof(msg)), DEATH_SHUTDOWN);
    assert_non_null(strstr(msg, "halted"));
    e.wait_status = EXITED(1);
    assert_int_equal(death_classify(&e, msg, sizeof(msg)), DEATH_VMM_CRASHED);
    assert_string_equal(msg, "the VMM exited with status 1");
    e.status_known = false; /* after a node restart: the console still tells a halt */
    assert_int_equal(death_classify(&e, msg, sizeof(msg)), DEATH_SHUTDOWN);
    e.console_len = 0;
    assert_int_equal(death_classify(&e, msg, sizeof(msg)), DEATH_VMM_CRASHED);
    assert_int_equal(death_reason_from_string("oom"), DEATH_OOM);
    assert_int_equal(death_reason_from_string("shutdown"), DEATH_SHUTDOWN);
    assert_int_equal(death_reason_from_string("vmm_crashed"), DEATH_VMM_CRASHED);
    assert_int_equal(death_reason_from_string("crash"), -EINVAL);
    assert_string_equal(death_reason_to_string(DEATH_OOM), "oom");
    assert_string_equal(death_reason_to_string(DEATH_PANIC), "panic");
    assert_string_equal(death_reason_to_string(DEATH_VMM_CRASHED), "vmm_crashed");
    assert_string_equal(death_reason_to_string(DEATH_SHUTDOWN), "shutdown");
    /* a tiny buffer is still a string */
    char tiny[4];
    death_classify(&e, tiny, sizeof(tiny));
    assert_int_equal(strlen(tiny), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oom_counter),   cmocka_unit_test(test_read_oom_kills),
        cmocka_unit_test(test_console_panic), cmocka_unit_test(test_console_halted),
        cmocka_unit_test(test_classify),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
