#pragma once
/*
 * Rolling snapshots on the api side (issue 12; architecture.md "A sandbox's life", "Rolling
 * snapshots"): a sandbox's policy (rolling-retention.h) is a row of the store; the
 * controller's tick takes the turns that are due as ordinary sandbox.snapshot operations whose
 * snapshot's source is "rolling", and deletes, with the ordinary snapshot removal, the rolling
 * snapshots retention no longer keeps. User snapshots are never deleted here.
 *
 * A turn is taken by the replica whose compare-and-set moves its due time forward
 * (store_snapshot_policy_advance()): two replicas on one database never both take it. Only a
 * running sandbox is snapshotted; a turn that finds it paused, suspended or busy with another
 * operation is skipped (the next one is a period later). Retention runs every
 * ROLLING_RETENTION_EVERY over every complete rolling snapshot: each sandbox's by its policy
 * (the default tiers once the policy is gone with its sandbox), then all of them together by
 * the api-wide --rolling-max-bytes, oldest first.
 */
#include <stdbool.h>

#include <jansson.h>

#include "api/rolling-retention.h"
#include "api/routes.h"

#define ROLLING_RETENTION_EVERY (5 * USEC_PER_SEC)
#define ROLLING_SWEEP_EVERY (10 * USEC_PER_SEC)
/* Retention's deletions started in one pass (the rest wait for the next). */
#define ROLLING_DELETES_MAX 16
/* The api-wide bound's default: 16 GiB. */
#define ROLLING_MAX_BYTES_DEFAULT (16LL << 30)

/*
 * Parses a policy object with this api's minimum period (400's message in err); for a create
 * request's "snapshots" field and the PUT route.
 */
int rolling_parse(struct manager *m, const json_t *obj, struct rolling_policy *ret, char *err,
                  size_t n);
/* Stores p as sandbox_id's policy, its first turns a period from now. */
int rolling_set(struct manager *m, const char *sandbox_id, const struct rolling_policy *p);

/* The controller's tick: due turns, then (every ROLLING_RETENTION_EVERY) retention. */
void rolling_tick(struct manager *m);

/* PUT/GET/DELETE /v1/sandboxes/{id}/snapshot-policy. */
void http_snapshot_policy_put(struct request_ctx *c);
void http_snapshot_policy_get(struct request_ctx *c);
void http_snapshot_policy_delete(struct request_ctx *c);
