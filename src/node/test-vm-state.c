#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include "node/vm-state.h"

static void test_names_round_trip(void **state)
{
    for (int s = 0; s < _VM_STATE_MAX; s++) {
        const char *name = vm_state_to_string((enum vm_state)s);
        assert_string_not_equal(name, "invalid");
        assert_int_equal(vm_state_from_string(name), s);
    }
    assert_int_equal(vm_state_from_string("killing"), _VM_STATE_INVALID);
    assert_int_equal(vm_state_from_string(NULL), _VM_STATE_INVALID);
    assert_string_equal(vm_state_to_string(_VM_STATE_INVALID), "invalid");
    assert_string_equal(vm_state_to_string(_VM_STATE_MAX), "invalid");
}

static void test_create_and_kill_paths(void **state)
{
    assert_true(vm_state_can_transition(VM_CREATING, VM_RUNNING));
    assert_true(vm_state_can_transition(VM_CREATING, VM_STOPPED)); /* failed, cleaned up */
    assert_true(vm_state_can_transition(VM_RUNNING, VM_STOPPING));
    assert_true(vm_state_can_transition(VM_STOPPING, VM_STOPPED));
    /* A kill while creating must wait: the create job owns the vm. */
    assert_false(vm_state_can_transition(VM_CREATING, VM_STOPPING));
    assert_false(vm_state_can_transition(VM_RUNNING, VM_CREATING));
    assert_false(vm_state_can_transition(VM_STOPPING, VM_RUNNING));
    assert_false(vm_state_can_transition(VM_RUNNING, VM_RUNNING));
}

static void test_future_rows(void **state)
{
    assert_true(vm_state_can_transition(VM_RUNNING, VM_PAUSING));
    assert_true(vm_state_can_transition(VM_PAUSING, VM_PAUSED));
    assert_true(vm_state_can_transition(VM_PAUSING, VM_RUNNING));
    assert_true(vm_state_can_transition(VM_PAUSED, VM_RESUMING));
    assert_true(vm_state_can_transition(VM_RESUMING, VM_RUNNING));
    assert_true(vm_state_can_transition(VM_PAUSED, VM_STOPPING));
    assert_true(vm_state_can_transition(VM_RUNNING, VM_SUSPENDING));
    assert_true(vm_state_can_transition(VM_SUSPENDING, VM_SUSPENDED));
    assert_true(vm_state_can_transition(VM_SUSPENDED, VM_RESTORING));
    assert_true(vm_state_can_transition(VM_RESTORING, VM_RUNNING));
    assert_true(vm_state_can_transition(VM_RESTORING, VM_SUSPENDED)); /* a failed restore */
    assert_true(vm_state_can_transition(VM_SUSPENDED, VM_STOPPING));
    assert_false(vm_state_can_transition(VM_SUSPENDED, VM_RESUMING)); /* no VMM to resume */
    assert_false(vm_state_can_transition(VM_PAUSED, VM_RUNNING));     /* only through resuming */
    assert_false(vm_state_can_transition(VM_SUSPENDED, VM_RUNNING));
}

static void test_terminal_and_transitional(void **state)
{
    for (int to = 0; to < _VM_STATE_MAX; to++) {
        assert_false(vm_state_can_transition(VM_STOPPED, (enum vm_state)to));
    }
    assert_true(vm_state_is_terminal(VM_STOPPED));
    /* Every state but stopped is left by some row, and everything reaches stopped. */
    for (int s = 0; s < _VM_STATE_MAX; s++) {
        if (s == VM_STOPPED) {
            continue;
        }
        assert_false(vm_state_is_terminal((enum vm_state)s));
        bool reach[_VM_STATE_MAX] = { false };
        reach[s] = true;
        for (int round = 0; round < _VM_STATE_MAX; round++) {
            for (int a = 0; a < _VM_STATE_MAX; a++) {
                for (int b = 0; reach[a] && b < _VM_STATE_MAX; b++) {
                    reach[b] |= vm_state_can_transition((enum vm_state)a, (enum vm_state)b);
                }
            }
        }
        assert_true(reach[VM_STOPPED]);
    }
    const enum vm_state busy[] = { VM_CREATING, VM_STOPPING,   VM_PAUSING,
                                   VM_RESUMING, VM_SUSPENDING, VM_RESTORING };
    for (size_t i = 0; i < sizeof(busy) / sizeof(busy[0]); i++) {
        assert_true(vm_state_is_transitional(busy[i]));
    }
    assert_false(vm_state_is_transitional(VM_RUNNING));
    assert_false(vm_state_is_transitional(VM_PAUSED));
    assert_false(vm_state_can_transition(_VM_STATE_INVALID, VM_RUNNING));
    assert_false(vm_state_can_transition(VM_RUNNING, _VM_STATE_MAX));
}

static void *other_thread(void *arg)
{
    *(bool *)arg = vm_state_on_owner_thread();
    return NULL;
}

static void test_owner_thread(void **state)
{
    pthread_t t;
    bool on_owner = false;

    assert_true(vm_state_on_owner_thread()); /* unset: anyone */
    vm_state_set_owner_thread();
    assert_true(vm_state_on_owner_thread());
    assert_int_equal(pthread_create(&t, NULL, other_thread, &on_owner), 0);
    pthread_join(t, NULL);
    assert_false(on_owner);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_round_trip), cmocka_unit_test(test_create_and_kill_paths),
        cmocka_unit_test(test_future_rows),      cmocka_unit_test(test_terminal_and_transitional),
        cmocka_unit_test(test_owner_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
