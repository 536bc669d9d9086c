#pragma once
/*
 * Snapshots of sandboxes on the api side (issue 12; architecture.md "A sandbox's life",
 * "Snapshots and branches, api side"): taking one is a sandbox.snapshot operation whose
 * snapshot row flips to complete only after the node committed the files (store.h); listing
 * reads the store; deleting removes the node's files, then the row. A create whose template
 * id names a complete snapshot restores that snapshot into a new sandbox (a branch): see
 * snapshots_resolve_create(). Native routes (http) and E2B's (e2b) both live here.
 */
#include <stdbool.h>

#include "api/lifecycle.h"
#include "api/routes.h"

/*
 * When template_id names a snapshot: 1, with p's template_id, vcpus and memory_mb set to
 * what a create from it must use (the template_id stays the snapshot's id: E2B shows it
 * so). 0 when it names none (an ordinary template). -EBUSY: the snapshot is not complete
 * (pending or being deleted: not restorable, 409); -EMEDIUMTYPE: a disk snapshot (no memory
 * to restore, 400); -ENOENT is never returned.
 */
int snapshots_resolve_create(struct manager *m, const char *template_id,
                             struct lifecycle_create_params *p);

/*
 * Removes snapshot id: its row "deleting" (no create restores it from then on), the node's
 * files on a worker, then the row. done runs on the loop with 0, -EREMOTEIO when the node
 * failed (unreachable or an error: the row stays "deleting" and a DELETE finishes it), or the
 * store's error. A negative return: nothing was started and done will not run.
 */
typedef void (*snapshots_removed_fn)(struct manager *m, const char *id, int r, void *userdata);
int snapshots_remove(struct manager *m, const char *id, snapshots_removed_fn done, void *userdata);

/* Native v1. */
void http_snapshot_create(struct request_ctx *c);
void http_snapshot_list(struct request_ctx *c);
void http_snapshot_get(struct request_ctx *c);
void http_snapshot_delete(struct request_ctx *c);
/* E2B: POST /sandboxes/{id}/snapshots, GET /snapshots, DELETE /templates/{id}. */
void e2b_snapshot_create(struct request_ctx *c);
void e2b_snapshot_list(struct request_ctx *c);
void e2b_template_delete(struct request_ctx *c);
