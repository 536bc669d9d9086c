/* The VM state table; see vm-state.h. */
#include "node/vm-state.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "basic/macro.h"

#define S(x) (1u << (x))

static const struct {
    const char *name;
    bool transitional;
    unsigned next; /* bit set of allowed target states */
} states[_VM_STATE_MAX] = {
    [VM_CREATING] = { "creating", true, S(VM_RUNNING) | S(VM_STOPPED) },
    [VM_RUNNING] = { "running", false,
                     S(VM_STOPPING) | S(VM_PAUSING) | S(VM_SUSPENDING) | S(VM_RESTORING) },
    [VM_STOPPING] = { "stopping", true, S(VM_STOPPED) },
    [VM_STOPPED] = { "stopped", false, 0 },
    [VM_PAUSING] = { "pausing", true, S(VM_PAUSED) | S(VM_RUNNING) },
    [VM_PAUSED] = { "paused", false, S(VM_RESUMING) | S(VM_STOPPING) },
    [VM_RESUMING] = { "resuming", true, S(VM_RUNNING) | S(VM_PAUSED) },
    [VM_SUSPENDING] = { "suspending", true, S(VM_SUSPENDED) | S(VM_RUNNING) },
    [VM_SUSPENDED] = { "suspended", false, S(VM_RESTORING) | S(VM_STOPPING) },
    [VM_RESTORING] = { "restoring", true, S(VM_RUNNING) | S(VM_SUSPENDED) | S(VM_STOPPING) },
};

static bool state_valid(enum vm_state s)
{
    return s >= 0 && s < _VM_STATE_MAX;
}

const char *vm_state_to_string(enum vm_state s)
{
    return state_valid(s) ? states[s].name : "invalid";
}

enum vm_state vm_state_from_string(const char *s)
{
    for (int i = 0; s && i < _VM_STATE_MAX; i++) {
        if (strcmp(s, states[i].name) == 0) {
            return (enum vm_state)i;
        }
    }
    return _VM_STATE_INVALID;
}

bool vm_state_can_transition(enum vm_state from, enum vm_state to)
{
    return state_valid(from) && state_valid(to) && (states[from].next & S(to));
}

bool vm_state_is_transitional(enum vm_state s)
{
    return state_valid(s) && states[s].transitional;
}

bool vm_state_is_terminal(enum vm_state s)
{
    return state_valid(s) && states[s].next == 0;
}

static pthread_t owner;
static atomic_bool owner_set;

void vm_state_set_owner_thread(void)
{
    owner = pthread_self();
    atomic_store(&owner_set, true);
}

bool vm_state_on_owner_thread(void)
{
    return !atomic_load(&owner_set) || pthread_equal(owner, pthread_self());
}
