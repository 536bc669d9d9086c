/* The lifecycle table (operation.h): its strings, its invariants, its transitions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "api/operation.h"

static void test_operation_strings_roundtrip(void **state)
{
    for (int s = 0; s < _SANDBOX_STATE_MAX; s++) {
        const char *name = sandbox_state_to_string((enum sandbox_state)s);

        assert_non_null(name);
        assert_int_equal(sandbox_state_from_string(name), s);
    }
    for (int k = 0; k < _OPERATION_KIND_MAX; k++) {
        const char *name = operation_kind_to_string((enum operation_kind)k);

        assert_non_null(name);
        assert_int_equal(operation_kind_from_string(name), k);
    }
    assert_int_equal(sandbox_state_from_string("Running"), _SANDBOX_STATE_INVALID);
    assert_int_equal(sandbox_state_from_string(NULL), _SANDBOX_STATE_INVALID);
    assert_int_equal(operation_kind_from_string("sandbox.reboot"), _OPERATION_KIND_INVALID);
    assert_null(sandbox_state_to_string(_SANDBOX_STATE_MAX));
    assert_null(operation_kind_to_string(_OPERATION_KIND_INVALID));
    /* The strings the store already holds keep their meaning. */
    assert_string_equal(operation_kind_to_string(OPERATION_KIND_CREATE), "sandbox.create");
    assert_string_equal(operation_kind_to_string(OPERATION_KIND_KILL), "sandbox.kill");
    assert_string_equal(operation_kind_to_string(OPERATION_KIND_NETWORK), "sandbox.network");
    assert_string_equal(sandbox_state_to_string(SANDBOX_CREATING), "creating");
    assert_string_equal(sandbox_state_to_string(SANDBOX_RUNNING), "running");
    assert_string_equal(sandbox_state_to_string(SANDBOX_KILLED), "killed");
}

static void test_operation_table_invariants(void **state)
{
    for (int k = 0; k < _OPERATION_KIND_MAX; k++) {
        const struct operation_kind_info *info = operation_kind_info((enum operation_kind)k);

        assert_non_null(info);
        /* Nothing starts from killed; only create has no source state. */
        assert_false(info->from & SANDBOX_STATE_BIT(SANDBOX_KILLED));
        assert_true(info->creates == (info->from == 0));
        /* A failure never leaves a sandbox in a transitional state. */
        if (info->transitional != _SANDBOX_STATE_INVALID) {
            assert_true(info->on_failure != _SANDBOX_STATE_INVALID);
            assert_true(info->on_success != info->transitional);
        }
    }
    /* create, kill, pause and resume run today; the rest are rows for the next issues. */
    assert_true(operation_kind_info(OPERATION_KIND_CREATE)->implemented);
    assert_true(operation_kind_info(OPERATION_KIND_KILL)->implemented);
    assert_true(operation_kind_info(OPERATION_KIND_PAUSE)->implemented);
    assert_true(operation_kind_info(OPERATION_KIND_RESUME)->implemented);
    assert_true(operation_kind_info(OPERATION_KIND_SUSPEND)->implemented);
    assert_true(operation_kind_info(OPERATION_KIND_RESTORE)->implemented);
    /* A snapshot (issue 12) runs and changes no state: its row in snapshots does. */
    assert_true(operation_kind_info(OPERATION_KIND_SNAPSHOT)->implemented);
    assert_int_equal(operation_kind_info(OPERATION_KIND_SNAPSHOT)->on_success,
                     _SANDBOX_STATE_INVALID);
    assert_int_equal(operation_check_start(OPERATION_KIND_SNAPSHOT, SANDBOX_PAUSED), 0);
    assert_int_equal(operation_check_start(OPERATION_KIND_SNAPSHOT, SANDBOX_SUSPENDED), -EBUSY);
    assert_false(operation_kind_info(OPERATION_KIND_FORK)->implemented);
    /* The egress policy's live replace (issue 9) runs, and changes no state. */
    assert_true(operation_kind_info(OPERATION_KIND_NETWORK)->implemented);
    assert_int_equal(operation_kind_info(OPERATION_KIND_NETWORK)->on_success,
                     _SANDBOX_STATE_INVALID);
}

static void test_operation_check_start(void **state)
{
    assert_int_equal(operation_check_start(OPERATION_KIND_KILL, SANDBOX_RUNNING), 0);
    assert_int_equal(operation_check_start(OPERATION_KIND_KILL, SANDBOX_CREATING), 0);
    assert_int_equal(operation_check_start(OPERATION_KIND_KILL, SANDBOX_KILLED), -ENOENT);
    /* pause and resume (issue 12): each from its one state; a second pause is a 409. */
    assert_int_equal(operation_check_start(OPERATION_KIND_PAUSE, SANDBOX_RUNNING), 0);
    assert_int_equal(operation_check_start(OPERATION_KIND_PAUSE, SANDBOX_PAUSED), -EBUSY);
    assert_int_equal(operation_check_start(OPERATION_KIND_PAUSE, SANDBOX_CREATING), -EBUSY);
    assert_int_equal(operation_check_start(OPERATION_KIND_PAUSE, SANDBOX_KILLED), -ENOENT);
    assert_int_equal(operation_check_start(OPERATION_KIND_RESUME, SANDBOX_PAUSED), 0);
    assert_int_equal(operation_check_start(OPERATION_KIND_RESUME, SANDBOX_RUNNING), -EBUSY);
    assert_int_equal(operation_check_start(OPERATION_KIND_KILL, SANDBOX_PAUSED), 0);
    /* suspend / restore: a second suspend, or a restore of a running sandbox, is a 409. */
    assert_int_equal(operation_check_start(OPERATION_KIND_SUSPEND, SANDBOX_RUNNING), 0);
    assert_int_equal(operation_check_start(OPERATION_KIND_SUSPEND, SANDBOX_SUSPENDED), -EBUSY);
    assert_int_equal(operation_check_start(OPERATION_KIND_SUSPEND, SANDBOX_PAUSED), -EBUSY);
    assert_int_equal(operation_check_start(OPERATION_KIND_RESTORE, SANDBOX_SUSPENDED), 0);
    assert_int_equal(operation_check_start(OPERATION_KIND_RESTORE, SANDBOX_RUNNING), -EBUSY);
    assert_int_equal(operation_check_start(OPERATION_KIND_KILL, SANDBOX_SUSPENDED), 0);
    assert_int_equal(operation_check_start(OPERATION_KIND_FORK, SANDBOX_RUNNING), -EOPNOTSUPP);
    assert_int_equal(operation_check_start(OPERATION_KIND_CREATE, SANDBOX_RUNNING), -EINVAL);
    assert_int_equal(operation_check_start(_OPERATION_KIND_MAX, SANDBOX_RUNNING), -EINVAL);
    assert_int_equal(operation_check_start(OPERATION_KIND_KILL, _SANDBOX_STATE_INVALID), -EINVAL);
    assert_int_equal(operation_check_start(OPERATION_KIND_NETWORK, SANDBOX_RUNNING), 0);
    assert_int_equal(operation_check_start(OPERATION_KIND_NETWORK, SANDBOX_CREATING), 0);
    assert_int_equal(operation_check_start(OPERATION_KIND_NETWORK, SANDBOX_KILLED), -ENOENT);
    assert_int_equal(operation_check_start(OPERATION_KIND_NETWORK, SANDBOX_PAUSED), -EBUSY);
}

static void test_operation_transitions(void **state)
{
    /* create: creating -> running | killed */
    assert_true(
        operation_transition_is_valid(OPERATION_KIND_CREATE, SANDBOX_CREATING, SANDBOX_RUNNING));
    assert_true(
        operation_transition_is_valid(OPERATION_KIND_CREATE, SANDBOX_CREATING, SANDBOX_KILLED));
    assert_false(
        operation_transition_is_valid(OPERATION_KIND_CREATE, SANDBOX_CREATING, SANDBOX_PAUSED));
    assert_false(
        operation_transition_is_valid(OPERATION_KIND_CREATE, SANDBOX_RUNNING, SANDBOX_KILLED));
    /* kill: anything alive -> killed; killed stays killed */
    for (int s = 0; s < _SANDBOX_STATE_MAX; s++) {
        assert_true(operation_transition_is_valid(OPERATION_KIND_KILL, (enum sandbox_state)s,
                                                  SANDBOX_KILLED));
    }
    assert_false(
        operation_transition_is_valid(OPERATION_KIND_KILL, SANDBOX_KILLED, SANDBOX_RUNNING));
    assert_false(
        operation_transition_is_valid(OPERATION_KIND_KILL, SANDBOX_RUNNING, SANDBOX_PAUSED));
    /* pause (the row the pause issue fills in): running -> pausing -> paused | running */
    assert_true(
        operation_transition_is_valid(OPERATION_KIND_PAUSE, SANDBOX_RUNNING, SANDBOX_PAUSING));
    assert_true(
        operation_transition_is_valid(OPERATION_KIND_PAUSE, SANDBOX_PAUSING, SANDBOX_PAUSED));
    assert_true(
        operation_transition_is_valid(OPERATION_KIND_PAUSE, SANDBOX_PAUSING, SANDBOX_RUNNING));
    assert_false(
        operation_transition_is_valid(OPERATION_KIND_PAUSE, SANDBOX_SUSPENDED, SANDBOX_PAUSED));
    /* restore: suspended -> restoring -> running | suspended */
    assert_true(
        operation_transition_is_valid(OPERATION_KIND_RESTORE, SANDBOX_RESTORING, SANDBOX_RUNNING));
    assert_false(
        operation_transition_is_valid(OPERATION_KIND_RESTORE, SANDBOX_PAUSED, SANDBOX_RUNNING));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_operation_strings_roundtrip),
        cmocka_unit_test(test_operation_table_invariants),
        cmocka_unit_test(test_operation_check_start),
        cmocka_unit_test(test_operation_transitions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
