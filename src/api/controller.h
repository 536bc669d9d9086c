#pragma once
/*
 * The controller drives observed state toward desired state through
 * operations (architecture.md "State"). Mutations record intent and an
 * operation row in one transaction; the controller runs each pending
 * operation on a worker (node calls block), records the outcome, and wakes
 * the HTTP requests waiting on it. Every step is idempotent (the node's
 * create takes our id, kill of an unknown sandbox succeeds), so after a crash
 * controller_start() simply re-runs what was unfinished. A periodic tick
 * enforces timeouts and reconciles the store against the node's own list.
 *
 *   operation: pending --claimed (lease)--> running --node ok--> succeeded
 *                                                   \--node error--> failed
 *              running --lease lapsed (runner died)--> claimed again, attempts + 1
 *
 * Dispatch is by kind, through the lifecycle table (operation.h): a claimed
 * operation moves its sandbox to the kind's transitional state, runs the
 * kind's runner on a worker, and records the kind's success or failure
 * state, each move checked against the table.
 */
#include <event2/http.h>

#include "api/manager.h"
#include "api/operation.h"

/* The store's kind strings of the two kinds that run today (operation.c's table). */
#define OPERATION_CREATE "sandbox.create"
#define OPERATION_KILL "sandbox.kill"

/* Recovers unfinished operations and arms the periodic tick. */
int controller_start(struct manager *m);
void controller_stop(struct manager *m);

/*
 * Records an operation of kind on sandbox_id (call inside the transaction
 * that changed the sandbox row) and writes its id to ret_id (33 bytes).
 * The caller commits, then calls controller_kick().
 */
int controller_add_operation(struct manager *m, enum operation_kind kind, const char *sandbox_id,
                             char ret_id[33]);
/*
 * controller_add_operation() for a new sandbox's create, inserted already
 * leased to this controller when it has room to run one more (*ret_claimed):
 * the caller commits, then calls controller_start_claimed() instead of
 * controller_kick(). One transaction fewer on the create path, and no pass
 * through the queue; a new sandbox has no earlier operation to wait for.
 */
int controller_add_create(struct manager *m, const char *sandbox_id, char ret_id[33],
                          bool *ret_claimed);
/* Starts the operation op_id that controller_add_create() leased to us. */
void controller_start_claimed(struct manager *m, const char *op_id);
/* Claims pending operations and starts workers for them. */
void controller_kick(struct manager *m);
/*
 * Records a request for an operation of kind on a sandbox, after checking it
 * against the lifecycle table (operation_check_start()) and the one-at-a-time
 * rule, in its own transaction; a kill also sets desired_state killed. The
 * handlers' one entry point for every mutating verb but create.
 *   -ENOENT      no such sandbox, or killed / being killed (404)
 *   -EBUSY       not allowed from its state, or another operation runs on it and
 *                the kind's busy policy is "conflict" (409; *ret_state says the state)
 *   -EOPNOTSUPP  a kind the table has but nothing implements yet (501)
 * ret_op_id (33 bytes) gets the operation's id, or "" when it is queued behind a
 * create (the caller need not wait: it runs when the create ends). ret_state may be
 * NULL; when not, it is written whenever the sandbox exists.
 */
int controller_request(struct manager *m, enum operation_kind kind, const char *sandbox_id,
                       char ret_op_id[33], enum sandbox_state *ret_state);
/*
 * controller_request(OPERATION_KIND_NETWORK) with the new egress policy (egress.h text),
 * written to the sandbox row in the same transaction as the operation (store first: see
 * operation.c's row).
 */
int controller_request_network(struct manager *m, const char *sandbox_id, const char *network_json,
                               char ret_op_id[33], enum sandbox_state *ret_state);
/*
 * controller_request(OPERATION_KIND_SNAPSHOT): snap (id, kind, name, created_at, updated_at;
 * the rest is taken from the sandbox) is written "pending" in the operation's transaction,
 * so a name another snapshot of the owner has is -EEXIST (409) and nothing is recorded.
 */
int controller_request_snapshot(struct manager *m, const char *sandbox_id,
                                const struct store_snapshot *snap, char ret_op_id[33],
                                enum sandbox_state *ret_state);
/* controller_request(OPERATION_KIND_KILL). */
int controller_request_kill(struct manager *m, const char *sandbox_id, char ret_op_id[33]);

/* Called on the loop when operation op_id has finished (op is borrowed), or with
 * op NULL when timeout passed first or space-api is stopping (controller_stop()):
 * answer that with controller_reply_unfinished(). */
typedef void (*controller_wait_fn)(struct manager *m, struct evhttp_request *req,
                                   const struct store_operation *op, void *userdata);
/* Waits for op_id (which may already be finished) without blocking the loop. */
void controller_wait(struct manager *m, const char *op_id, struct evhttp_request *req,
                     usec_t timeout, controller_wait_fn fn, void *userdata);
/*
 * The answer to a wait that ended before its operation did: 504 with
 * timeout_message when the wait timed out; 503 (Retry-After) when space-api
 * is stopping, since the operation is not lost: the next start or another
 * replica finishes it.
 */
void controller_reply_unfinished(struct manager *m, struct evhttp_request *req,
                                 const char *timeout_message);
/* The HTTP status the node answered a failed operation with (its result's "status"), or 0
 * when it recorded none: each caller maps it onto its own reply. */
int controller_failed_status(const struct store_operation *op);
