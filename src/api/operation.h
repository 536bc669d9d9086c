#pragma once
/*
 * Lifecycle as data (architecture.md "A sandbox's life"): the sandbox
 * states and the operation kinds that move a sandbox between them, as one
 * table. The controller dispatches by kind through it, the handlers and
 * lifecycle.c validate requests with operation_check_start(), and the
 * controller checks every transition it records with
 * operation_transition_is_valid() (an assertion in debug builds).
 *
 * Enums in memory; the strings ("running", "sandbox.kill") exist only at
 * the store and API boundary (sandbox_state_to_string() and friends).
 *
 * One mutating operation per sandbox at a time: the store claims a
 * sandbox's operations one at a time, in order (store_operation_claim()).
 * A request for a kind whose busy policy is OPERATION_BUSY_CONFLICT, while
 * another operation on that sandbox is unfinished, is refused with 409 and
 * the sandbox's current state; OPERATION_BUSY_QUEUE records it anyway and
 * it runs when the one before it ends.
 */
#include <errno.h>
#include <stdbool.h>

enum sandbox_state {
    SANDBOX_CREATING,
    SANDBOX_RUNNING,
    SANDBOX_PAUSING,
    SANDBOX_PAUSED,
    SANDBOX_RESUMING,
    SANDBOX_SNAPSHOTTING,
    SANDBOX_SUSPENDING,
    SANDBOX_SUSPENDED,
    SANDBOX_RESTORING,
    SANDBOX_KILLED,
    _SANDBOX_STATE_MAX,
    _SANDBOX_STATE_INVALID = -EINVAL,
};

enum operation_kind {
    OPERATION_KIND_CREATE,
    OPERATION_KIND_KILL,
    OPERATION_KIND_PAUSE,
    OPERATION_KIND_RESUME,
    OPERATION_KIND_SNAPSHOT,
    OPERATION_KIND_SUSPEND,
    OPERATION_KIND_RESTORE,
    OPERATION_KIND_FORK,
    OPERATION_KIND_NETWORK,
    OPERATION_KIND_SUSPEND_DISK, /* suspend without memory: restore boots from the disk */
    OPERATION_KIND_RESTORE_DISK, /* restore that drops the memory state: a boot from the disk */
    _OPERATION_KIND_MAX,
    _OPERATION_KIND_INVALID = -EINVAL,
};

enum operation_busy {
    OPERATION_BUSY_CONFLICT, /* another unfinished operation on the sandbox: 409 */
    OPERATION_BUSY_QUEUE,    /* recorded anyway; runs after the ones before it */
};

#define SANDBOX_STATE_BIT(s) (1u << (s))

struct operation_kind_info {
    const char *name;                /* the store's and the native API's kind string */
    bool implemented;                /* false: refused with 501 until its issue fills it in */
    bool creates;                    /* makes the sandbox: no source state */
    unsigned from;                   /* SANDBOX_STATE_BIT()s it may start from */
    enum sandbox_state transitional; /* while it runs; _SANDBOX_STATE_INVALID = unchanged */
    enum sandbox_state on_success;   /* _SANDBOX_STATE_INVALID = unchanged */
    enum sandbox_state on_failure;   /* _SANDBOX_STATE_INVALID = unchanged */
    enum operation_busy busy;
};

const char *sandbox_state_to_string(enum sandbox_state s);
/* _SANDBOX_STATE_INVALID for a string that names no state. */
enum sandbox_state sandbox_state_from_string(const char *s);

const char *operation_kind_to_string(enum operation_kind k);
enum operation_kind operation_kind_from_string(const char *s);
/* The table row of k; NULL outside the enum. */
const struct operation_kind_info *operation_kind_info(enum operation_kind k);

/*
 * Whether kind may start on a sandbox in state from: 0; -EOPNOTSUPP when the
 * kind is not implemented yet (501); -ENOENT when the sandbox is killed (gone
 * for callers); -EBUSY when from is not one of its source states (409).
 * Create has no source state: -EINVAL.
 */
int operation_check_start(enum operation_kind kind, enum sandbox_state from);

/*
 * Whether recording to as the outcome (or the transitional state) of kind,
 * on a sandbox that was in from, is a transition the table allows. The
 * controller asserts it (debug builds) before every state it writes.
 */
bool operation_transition_is_valid(enum operation_kind kind, enum sandbox_state from,
                                   enum sandbox_state to);
