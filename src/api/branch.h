#pragma once
/*
 * Branching a live sandbox into N (issue 12; architecture.md "A sandbox's life", "Branching a
 * live sandbox"): native POST /v1/sandboxes/{id}/branch and E2B POST /sandboxes/{id}/fork.
 *
 * Not an operation of its own but three steps the handler drives without blocking the loop:
 * one full snapshot of the parent (a sandbox.snapshot operation: memory and disk at one
 * instant, the parent runs on), then `count` creates from it (each a sandbox.create restoring
 * it under its own identity: id, hostname, token, RNG reseed, machine-id), waited on one after
 * the other (they run side by side), then the snapshot removed. A restore reads the whole
 * memory image into the new VM and copies the disk, so once a branch's create has succeeded
 * it needs nothing of the snapshot; a create still running when the wait gives up (504) does,
 * and the snapshot is kept then (branch_tick() removes it once no create reads it).
 *
 * Each branch succeeds or fails on its own: the answer is 201 with one entry per requested
 * branch, {"sandbox": ...} or {"error": {code, message}}; capacity refusals are entries
 * (503 native, 429 E2B, which its SDK maps to RateLimitError). A branch inherits the parent's
 * metadata, env, egress policy, traffic privacy and auto-pause/auto-resume; its template is
 * the parent's template (not the snapshot, which is gone).
 */
#include "api/routes.h"

/*
 * The intermediate snapshot is named BRANCH_SNAPSHOT_PREFIX + its id: a name no caller can
 * give (a leading '.' is refused), so what a crash of space-api between the snapshot and its
 * removal left behind is recognized, and swept by branch_tick().
 */
#define BRANCH_SNAPSHOT_PREFIX ".branch-"

/* The largest count one request may ask for (400 beyond). */
#define BRANCH_MAX 16

/*
 * The controller's tick (every BRANCH_SWEEP_EVERY): removes the complete intermediate
 * snapshots older than BRANCH_SWEEP_GRACE that no create is restoring (no sandbox of that
 * template still creating): left by a space-api that died mid-branch. The grace covers a
 * replica that learns of the snapshot's end only on its own tick and records the creates then.
 */
void branch_tick(struct manager *m);

void http_sandbox_branch(struct request_ctx *c);
void e2b_sandbox_fork(struct request_ctx *c);
