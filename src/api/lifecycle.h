#pragma once
/*
 * Sandbox lifecycle verbs shared by the native and the E2B handlers: they
 * validate, record intent + operation in one transaction, and kick the
 * controller. Handlers only parse and render.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/manager.h"
#include "api/operation.h"
#include "api/store.h"
#include "basic/macro.h"
#include "shared/sandbox-id.h"

struct lifecycle_create_params {
    const char *id; /* the sandbox's id (secrets named after it exist already); NULL = new */
    const char *template_id;
    int64_t vcpus, memory_mb, disk_mb;
    int64_t timeout_s;        /* 0: no end time */
    json_t *metadata;         /* object of strings, borrowed; may be NULL */
    json_t *env;              /* object of strings, borrowed; may be NULL */
    bool private_traffic;     /* user ports demand the traffic access token (E2B
                                 network.allowPublicTraffic: false) */
    const char *network_json; /* egress policy as egress.h stores it; NULL = deny all */
    bool auto_pause;          /* suspended at its end time instead of killed (E2B autoPause) */
    bool auto_resume;         /* ingress traffic wakes it (E2B lifecycle.autoResume) */
    bool auto_pause_disk;     /* that suspend keeps no memory (E2B autoPauseMemory: false) */
    int64_t net_bps, disk_bps, disk_iops; /* its own I/O limits; 0: the node's */
};

/* Checks an object of string values (metadata, envVars); a message for 400 otherwise. */
const char *lifecycle_check_string_map(json_t *j, const char *name);

/* -EAGAIN at capacity, -EINVAL bad params. ret_id: SANDBOX_ID_LEN + 1; ret_op: 33. */
int lifecycle_create(struct manager *m, const struct lifecycle_create_params *p, char *ret_id,
                     char *ret_op);
/* The sandbox if it is alive (not killed and not being killed), else -ENOENT. */
int lifecycle_get_live(struct manager *m, const char *id, struct store_sandbox *ret);
/* Sandboxes creating or running in the store (what --max-sandboxes counts); 0 on error. */
size_t lifecycle_count_live(struct manager *m);
/* The HTTP status for a failed create operation: the node's 400 (a limit beyond its own,
 * e.g. disk_bps over --disk-bps), 404 (unknown template), 503
 * (no capacity: its budgets, capacity.h, or a full worker pool) and 504 (guest never ready)
 * pass through; anything else is 500. */
int lifecycle_create_failed_status(const struct store_operation *op);
/*
 * The capacity error: `status` (the native API's 503, E2B's 429, which its SDK retries) with
 * Retry-After and {code: status, error_code: "capacity", message} (docs/e2b-compat.md §11).
 */
void lifecycle_reply_capacity(struct evhttp_request *req, int status, const char *fmt, ...)
    _printf_(3, 4);
/*
 * Replaces the egress policy of a live sandbox: stores network_json (egress.h) and queues a
 * sandbox.network operation that hands it to the node, in one transaction (see
 * controller_request_network()). ret_op (33 bytes) as controller_request().
 */
int lifecycle_set_network(struct manager *m, const char *id, const char *network_json,
                          char ret_op[33], enum sandbox_state *ret_state);
/* Sets end_at = now + timeout_s (extend_only: never earlier than it is). For a paused or
 * suspended sandbox, whose clock stands still, it sets the lifetime it gets back when it runs
 * again (remaining_us) instead. */
int lifecycle_set_timeout(struct manager *m, const char *id, int64_t timeout_s, bool extend_only);

/*
 * Answers a failed controller_request(kind) with the status and {code, message} the
 * table implies: 404 gone, 409 naming the sandbox's current state ("sandbox 'x' is
 * creating; sandbox.pause must wait until its current operation ends"), 501 naming
 * the kind, else routes_status_from_errno().
 */
void lifecycle_reply_request_error(struct evhttp_request *req, int r, const char *id,
                                   enum operation_kind kind, enum sandbox_state state);
