#pragma once
/*
 * The control plane's view of a sandbox (a store_sandbox row) and how it is
 * shown on the wire, natively and E2B-style (e2b-compat.md §3.2).
 *
 * States (observed, `state` column) and what moves them are the lifecycle
 * table in operation.h (enum sandbox_state; the strings below are the
 * store's and the API's spelling of its values). Today:
 *   creating --create op ok--> running --kill op--> killed
 *   creating --create op failed--> killed (error set)
 *   running --node lost it (reconcile)--> killed (error set)
 * desired_state is "running" until a kill (API call, timeout) sets "killed";
 * the controller (controller.c) drives state toward it.
 */
#include <jansson.h>
#include <stdint.h>

#include "api/store.h"

#define SANDBOX_STATE_CREATING "creating"
#define SANDBOX_STATE_RUNNING "running"
#define SANDBOX_STATE_KILLED "killed"

/* The envd version reported to E2B clients (≥ 0.6.4 enables every SDK feature, §6.8). */
#define SANDBOX_ENVD_VERSION "0.6.4"
#define SANDBOX_CLIENT_ID "space"
/* Every sandbox's disk: the template image's size (tools/template-build.sh IMAGE_SIZE). A
 * create asking another is refused until disks can grow. */
#define SANDBOX_DISK_MB 2048

/* RFC 3339 UTC with microseconds, e.g. 2026-11-30T08:00:00.123456Z. */
void sandbox_format_time(int64_t usec, char buf[40]);
/* Parses RFC 3339 (Z or ±hh:mm offset, optional fraction). */
int sandbox_parse_time(const char *s, int64_t *ret_usec);

/* E2B `Sandbox` (create/connect response). */
json_t *sandbox_to_e2b(const struct store_sandbox *sb, const char *domain);
/* E2B's name for a state: "running", "paused" (also pausing, resuming, suspending,
 * suspended, restoring) or "killed". */
const char *sandbox_e2b_state(const char *state);
/* E2B `SandboxDetail` / `ListedSandbox` (the same fields serve both). */
json_t *sandbox_to_e2b_detail(const struct store_sandbox *sb, const char *domain);
/* The native v1 representation. */
json_t *sandbox_to_json(const struct store_sandbox *sb);
