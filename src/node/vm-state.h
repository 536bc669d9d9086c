#pragma once
/*
 * The lifecycle of one VM on this node, as data: every state, whether a
 * worker owns the VM while it is in it (transitional), and the states it may
 * move to. Only the event loop changes a VM's state (vm_set_state() asserts
 * both the row and the thread); workers report results in their job structs.
 *
 *   from         to                         who
 *   creating     running | stopped          create job (stopped: it failed and cleaned up)
 *   running      stopping | pausing | suspending
 *   stopping     stopped                    destroy job (kill, reap, create failure)
 *   pausing      paused | running           (pause issue)
 *   paused       resuming | stopping
 *   resuming     running | paused
 *   suspending   suspended | running        suspend job: snapshot to disk, VMM stopped
 *   suspended    restoring | stopping       no VMM; the snapshot and the disk stay
 *   restoring    running | suspended        restore job (suspended: it failed)
 *   stopped      -                          terminal: the VM is gone
 *
 * Strings exist only at the boundaries (the node API, instance.json).
 */
#include <stdbool.h>

enum vm_state {
    VM_CREATING,
    VM_RUNNING,
    VM_STOPPING,
    VM_STOPPED,
    VM_PAUSING,
    VM_PAUSED,
    VM_RESUMING,
    VM_SUSPENDING,
    VM_SUSPENDED,
    VM_RESTORING,
    _VM_STATE_MAX,
    _VM_STATE_INVALID = -22,
};

const char *vm_state_to_string(enum vm_state s);
enum vm_state vm_state_from_string(const char *s);
/* True when the table has a row from -> to. */
bool vm_state_can_transition(enum vm_state from, enum vm_state to);
/* True while a worker owns the VM (creating, stopping, pausing, ...). */
bool vm_state_is_transitional(enum vm_state s);
/* True in a state no transition leaves. */
bool vm_state_is_terminal(enum vm_state s);

/*
 * The thread allowed to change states (the event loop's); set once by the
 * manager. Until it is set (unit tests) every thread counts as the owner.
 */
void vm_state_set_owner_thread(void);
bool vm_state_on_owner_thread(void);
