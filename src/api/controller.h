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
 *   operation: pending --worker starts--> running --node ok--> succeeded
 *                                                 \--node error--> failed
 */
#include <event2/http.h>

#include "api/manager.h"

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
int controller_add_operation(struct manager *m, const char *kind, const char *sandbox_id,
                             char ret_id[33]);
/* Starts workers for pending operations. */
void controller_kick(struct manager *m);
/* Sets desired_state killed and records a kill operation (in its own transaction). */
int controller_request_kill(struct manager *m, const char *sandbox_id, char ret_op_id[33]);

/* Called on the loop when operation op_id has finished (op is borrowed), or with
 * op NULL when timeout passed first. */
typedef void (*controller_wait_fn)(struct manager *m, struct evhttp_request *req,
                                   const struct store_operation *op, void *userdata);
/* Waits for op_id (which may already be finished) without blocking the loop. */
void controller_wait(struct manager *m, const char *op_id, struct evhttp_request *req,
                     usec_t timeout, controller_wait_fn fn, void *userdata);
