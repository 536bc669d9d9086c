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
 * and the snapshot is kept then (it is listed, and deleted like any other).
 *
 * Each branch succeeds or fails on its own: the answer is 201 with one entry per requested
 * branch, {"sandbox": ...} or {"error": {code, message}}; capacity refusals are entries
 * (503 native, 429 E2B, which its SDK maps to RateLimitError). A branch inherits the parent's
 * metadata, env, egress policy, traffic privacy and auto-pause/auto-resume; its template is
 * the parent's template (not the snapshot, which is gone).
 */
#include "api/routes.h"

/* The largest count one request may ask for (400 beyond). */
#define BRANCH_MAX 16

void http_sandbox_branch(struct request_ctx *c);
void e2b_sandbox_fork(struct request_ctx *c);
