#pragma once
/*
 * The egress audit log's way into the store (docs/architecture.md
 * "Network"): the controller's tick pulls each node's ring of space-gw
 * decisions (GET /v1/egress-audit?after=SEQ&limit=N, on a worker, as the
 * other node calls) and writes them to the store's egress_audit table; GET
 * /v1/sandboxes/{id}/egress reads them from there (http-egress.c).
 *
 * The cursor (the node's epoch and the last seq stored) lives in memory
 * only: a restarted space-api starts again at the oldest record the node
 * still holds, and the store skips every record it has already (its source
 * key is unique), so nothing is stored twice and nothing the ring still
 * holds is lost. A new epoch (the node restarted) starts over at 0.
 *
 * Retention, on the tick, every EGRESS_AUDIT_PRUNE_USEC: records older than
 * EGRESS_AUDIT_KEEP_USEC (7 days) are dropped, and each sandbox that got
 * records since the last run keeps only its newest EGRESS_AUDIT_KEEP_PER_SANDBOX
 * (100,000). Killed sandboxes keep theirs until then.
 */
#include "api/manager.h"

#define EGRESS_AUDIT_KEEP_USEC (7 * 24 * 3600 * USEC_PER_SEC)
#define EGRESS_AUDIT_KEEP_PER_SANDBOX 100000
#define EGRESS_AUDIT_PRUNE_USEC (60 * USEC_PER_SEC)
/* Records per pull; a full page is followed by the next pull at once. */
#define EGRESS_AUDIT_PULL_LIMIT 2000

/* From the controller's tick: starts a pull unless one runs, and prunes when due. */
void egress_audit_tick(struct manager *m);
/* Frees the puller's state (m->egress_audit) once no pull runs any more. */
void egress_audit_free(struct manager *m);
