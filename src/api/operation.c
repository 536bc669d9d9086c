/* The lifecycle table; see operation.h and architecture.md "A sandbox's life". */
#include "api/operation.h"

#include <string.h>

#include "basic/macro.h"

static const char *const sandbox_state_table[_SANDBOX_STATE_MAX] = {
    [SANDBOX_CREATING] = "creating",     [SANDBOX_RUNNING] = "running",
    [SANDBOX_PAUSING] = "pausing",       [SANDBOX_PAUSED] = "paused",
    [SANDBOX_RESUMING] = "resuming",     [SANDBOX_SNAPSHOTTING] = "snapshotting",
    [SANDBOX_SUSPENDING] = "suspending", [SANDBOX_SUSPENDED] = "suspended",
    [SANDBOX_RESTORING] = "restoring",   [SANDBOX_KILLED] = "killed",
};

#define NONE _SANDBOX_STATE_INVALID
#define BIT SANDBOX_STATE_BIT
/* Every state a kill may be asked in: all but killed. */
#define ALIVE ((BIT(_SANDBOX_STATE_MAX) - 1) & ~BIT(SANDBOX_KILLED))

/*
 * The rows the next issues fill in are here already, marked unimplemented,
 * so their states, transitions and busy policy are decided in one place.
 * A row with a transitional state has a failure state: a failed operation
 * never leaves its sandbox in a transitional state (test-operation.c).
 */
static const struct operation_kind_info kind_table[_OPERATION_KIND_MAX] = {
    [OPERATION_KIND_CREATE] = {
        .name = "sandbox.create", .implemented = true, .creates = true, .from = 0,
        .transitional = SANDBOX_CREATING, .on_success = SANDBOX_RUNNING,
        .on_failure = SANDBOX_KILLED, .busy = OPERATION_BUSY_QUEUE,
    },
    /* No transitional state: desired_state "killed" already hides the sandbox from
     * callers. Queued: a kill during a create runs when the create ends. */
    [OPERATION_KIND_KILL] = {
        .name = "sandbox.kill", .implemented = true, .from = ALIVE,
        .transitional = NONE, .on_success = SANDBOX_KILLED, .on_failure = NONE,
        .busy = OPERATION_BUSY_QUEUE,
    },
    [OPERATION_KIND_PAUSE] = {
        .name = "sandbox.pause", .implemented = true, .from = BIT(SANDBOX_RUNNING),
        .transitional = SANDBOX_PAUSING, .on_success = SANDBOX_PAUSED,
        .on_failure = SANDBOX_RUNNING, .busy = OPERATION_BUSY_CONFLICT,
    },
    [OPERATION_KIND_RESUME] = {
        .name = "sandbox.resume", .implemented = true, .from = BIT(SANDBOX_PAUSED),
        .transitional = SANDBOX_RESUMING, .on_success = SANDBOX_RUNNING,
        .on_failure = SANDBOX_PAUSED, .busy = OPERATION_BUSY_CONFLICT,
    },
    /* A snapshot leaves its sandbox as it was; running one at a time is what keeps a
     * pause or kill from cutting it short. */
    [OPERATION_KIND_SNAPSHOT] = {
        .name = "sandbox.snapshot", .implemented = true, .from = BIT(SANDBOX_RUNNING) | BIT(SANDBOX_PAUSED),
        .transitional = NONE, .on_success = NONE, .on_failure = NONE,
        .busy = OPERATION_BUSY_CONFLICT,
    },
    [OPERATION_KIND_SUSPEND] = {
        .name = "sandbox.suspend", .implemented = true, .from = BIT(SANDBOX_RUNNING),
        .transitional = SANDBOX_SUSPENDING, .on_success = SANDBOX_SUSPENDED,
        .on_failure = SANDBOX_RUNNING, .busy = OPERATION_BUSY_CONFLICT,
    },
    [OPERATION_KIND_RESTORE] = {
        .name = "sandbox.restore", .implemented = true, .from = BIT(SANDBOX_SUSPENDED),
        .transitional = SANDBOX_RESTORING, .on_success = SANDBOX_RUNNING,
        .on_failure = SANDBOX_SUSPENDED, .busy = OPERATION_BUSY_CONFLICT,
    },
    /* The new sandboxes are created by their own create operations; the source is
     * only read. */
    [OPERATION_KIND_FORK] = {
        .name = "sandbox.fork",
        .from = BIT(SANDBOX_RUNNING) | BIT(SANDBOX_PAUSED) | BIT(SANDBOX_SUSPENDED),
        .transitional = NONE, .on_success = NONE, .on_failure = NONE,
        .busy = OPERATION_BUSY_CONFLICT,
    },
    /*
     * A live replace of the egress policy (PUT .../network). Store first: the request writes
     * the new policy to the sandbox row and records this operation in one transaction, and
     * the runner sends the node whatever policy the row holds when it runs. So a crash
     * anywhere re-sends it (the operation is re-run, the node's PUT is idempotent), and
     * several replaces queued one after another end with the newest. Queued, not refused:
     * behind a create it runs when the create ends (the create already sent the policy it
     * read), behind another replace it runs after it. No state of its own. The node sync
     * (controller.c) queues one too when the node shows another policy than the row's.
     */
    [OPERATION_KIND_NETWORK] = {
        .name = "sandbox.network", .implemented = true,
        .from = BIT(SANDBOX_CREATING) | BIT(SANDBOX_RUNNING),
        .transitional = NONE, .on_success = NONE, .on_failure = NONE,
        .busy = OPERATION_BUSY_QUEUE,
    },
    /*
     * E2B's pause {memory: false} and resume {memory: false} (e2b-compat.md "pause/connect"):
     * the same states as suspend and restore; the kind is what records that no memory is
     * kept (the node marks its suspend disk-only, so any later restore boots from the disk).
     */
    [OPERATION_KIND_SUSPEND_DISK] = {
        .name = "sandbox.suspend-disk", .implemented = true, .from = BIT(SANDBOX_RUNNING),
        .transitional = SANDBOX_SUSPENDING, .on_success = SANDBOX_SUSPENDED,
        .on_failure = SANDBOX_RUNNING, .busy = OPERATION_BUSY_CONFLICT,
    },
    [OPERATION_KIND_RESTORE_DISK] = {
        .name = "sandbox.restore-disk", .implemented = true, .from = BIT(SANDBOX_SUSPENDED),
        .transitional = SANDBOX_RESTORING, .on_success = SANDBOX_RUNNING,
        .on_failure = SANDBOX_SUSPENDED, .busy = OPERATION_BUSY_CONFLICT,
    },
};

const char *sandbox_state_to_string(enum sandbox_state s)
{
    return s >= 0 && s < _SANDBOX_STATE_MAX ? sandbox_state_table[s] : NULL;
}

enum sandbox_state sandbox_state_from_string(const char *s)
{
    for (int i = 0; s && i < _SANDBOX_STATE_MAX; i++) {
        if (strcmp(sandbox_state_table[i], s) == 0) {
            return (enum sandbox_state)i;
        }
    }
    return _SANDBOX_STATE_INVALID;
}

const struct operation_kind_info *operation_kind_info(enum operation_kind k)
{
    return k >= 0 && k < _OPERATION_KIND_MAX ? &kind_table[k] : NULL;
}

const char *operation_kind_to_string(enum operation_kind k)
{
    const struct operation_kind_info *info = operation_kind_info(k);
    return info ? info->name : NULL;
}

enum operation_kind operation_kind_from_string(const char *s)
{
    for (int i = 0; s && i < _OPERATION_KIND_MAX; i++) {
        if (strcmp(kind_table[i].name, s) == 0) {
            return (enum operation_kind)i;
        }
    }
    return _OPERATION_KIND_INVALID;
}

int operation_check_start(enum operation_kind kind, enum sandbox_state from)
{
    const struct operation_kind_info *info = operation_kind_info(kind);

    if (!info || info->creates || from < 0 || from >= _SANDBOX_STATE_MAX) {
        return -EINVAL;
    }
    if (!info->implemented) {
        return -EOPNOTSUPP;
    }
    if (from == SANDBOX_KILLED) {
        return -ENOENT;
    }
    return (info->from & SANDBOX_STATE_BIT(from)) ? 0 : -EBUSY;
}

bool operation_transition_is_valid(enum operation_kind kind, enum sandbox_state from,
                                   enum sandbox_state to)
{
    const struct operation_kind_info *info = operation_kind_info(kind);
    bool from_ok;

    if (!info || from < 0 || from >= _SANDBOX_STATE_MAX || to < 0 || to >= _SANDBOX_STATE_MAX) {
        return false;
    }
    /* Writing the state it already has changes nothing (a kill of a sandbox whose create
     * failed finds it killed already). */
    if (to == from) {
        return true;
    }
    from_ok = (info->from & SANDBOX_STATE_BIT(from)) || from == info->transitional ||
              (info->creates && from == SANDBOX_CREATING);
    return from_ok &&
           (to == info->transitional || to == info->on_success || to == info->on_failure);
}
