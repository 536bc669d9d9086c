#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "agent/launch.h"
#include "agent/process-rpc.h"

/* Parsed messages stay alive until the end of the test: sr borrows from them. */
static json_t *kept[16];
static size_t n_kept;

static int parse(const char *text, struct start_request *sr)
{
    json_t *j = json_loads(text, 0, NULL);
    const char *err = NULL;
    int r;

    assert_non_null(j);
    assert_true(n_kept < sizeof(kept) / sizeof(kept[0]));
    kept[n_kept++] = j;
    r = process_rpc_parse_start(j, sr, &err);
    if (r < 0) {
        assert_non_null(err);
    }
    return r;
}

static int release_kept(void **state)
{
    for (size_t i = 0; i < n_kept; i++) {
        json_decref(kept[i]);
    }
    n_kept = 0;
    return 0;
}

static void test_process_rpc_parse_start_sdk_shapes(void **state)
{
    struct start_request sr;

    /* commands.run("echo hi", {envs, cwd}) as JS 2.51 sends it */
    assert_int_equal(
        parse("{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"echo hi\"],"
              "\"envs\":{\"A\":\"1\"},\"cwd\":\"/tmp\"},\"stdin\":false}",
              &sr),
        0);
    assert_string_equal(sr.cmd, "/bin/bash");
    assert_int_equal(sr.n_args, 3);
    assert_string_equal(sr.cwd, "/tmp");
    assert_false(sr.stdin_on);
    assert_false(sr.pty);

    /* pty.create({cols:80, rows:24}); stdin absent means enabled */
    assert_int_equal(parse("{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-i\",\"-l\"]},"
                           "\"pty\":{\"size\":{\"cols\":80,\"rows\":24}},\"tag\":\"t\"}",
                           &sr),
                     0);
    assert_true(sr.pty);
    assert_int_equal(sr.cols, 80);
    assert_int_equal(sr.rows, 24);
    assert_true(sr.stdin_on);
    assert_string_equal(sr.tag, "t");
    assert_null(sr.cwd);
}

static void test_process_rpc_parse_start_rejects(void **state)
{
    struct start_request sr;

    assert_int_equal(parse("{}", &sr), -EINVAL);
    assert_int_equal(parse("{\"process\":{\"cmd\":\"\"}}", &sr), -EINVAL);
    assert_int_equal(parse("{\"process\":{\"cmd\":7}}", &sr), -EINVAL);
    assert_int_equal(parse("{\"process\":{\"cmd\":\"x\",\"args\":[1]}}", &sr), -EINVAL);
    assert_int_equal(parse("{\"process\":{\"cmd\":\"x\",\"args\":\"a\"}}", &sr), -EINVAL);
    assert_int_equal(parse("{\"process\":{\"cmd\":\"x\",\"envs\":{\"A=B\":\"c\"}}}", &sr), -EINVAL);
    assert_int_equal(parse("{\"process\":{\"cmd\":\"x\",\"envs\":{\"A\":1}}}", &sr), -EINVAL);
    assert_int_equal(parse("{\"process\":{\"cmd\":\"x\"},\"stdin\":\"yes\"}", &sr), -EINVAL);
    assert_int_equal(
        parse("{\"process\":{\"cmd\":\"x\"},\"pty\":{\"size\":{\"cols\":70000}}}", &sr), -EINVAL);
    /* null is the same as absent in proto3 JSON */
    assert_int_equal(parse("{\"process\":{\"cmd\":\"x\",\"cwd\":null},\"pty\":null}", &sr), 0);
    assert_false(sr.pty);
}

static void test_launch_status_string_matches_go(void **state)
{
    char buf[64];

    launch_status_string(0, buf, sizeof(buf));
    assert_string_equal(buf, "exit status 0");
    launch_status_string(3 << 8, buf, sizeof(buf));
    assert_string_equal(buf, "exit status 3");
    launch_status_string(SIGKILL, buf, sizeof(buf));
    assert_string_equal(buf, "signal: killed");
    launch_status_string(SIGTERM, buf, sizeof(buf));
    assert_string_equal(buf, "signal: terminated");
    launch_status_string(SIGSEGV | 0x80, buf, sizeof(buf));
    assert_string_equal(buf, "signal: segmentation fault (core dumped)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_process_rpc_parse_start_sdk_shapes, release_kept),
        cmocka_unit_test_teardown(test_process_rpc_parse_start_rejects, release_kept),
        cmocka_unit_test(test_launch_status_string_matches_go),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
