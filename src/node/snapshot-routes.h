#pragma once
/*
 * space-node's snapshot routes (disk-snapshot.h), dispatched from http-api.c:
 *
 *   POST   /v1/sandboxes/{id}/snapshots  {id?, kind?: "disk"|"full"} -> 201 snapshot (200 when
 *                                        id exists for this sandbox: idempotent)
 *   GET    /v1/sandboxes/{id}/snapshots  {snapshots: [...]} of the sandbox, oldest first
 *   POST   /v1/sandboxes/{id}/rollback   {snapshot} -> 200 sandbox (restarted on it)
 *   GET    /v1/snapshots[?sandbox=ID]    {snapshots: [...]}
 *   GET    /v1/snapshots/{sid}           snapshot (its meta.json)
 *   DELETE /v1/snapshots/{sid}           204 (404: none)
 */
#include <event2/http.h>
#include <stdbool.h>

#include "node/manager.h"

/* The /v1/snapshots tree (path starts with "/v1/snapshots"). */
void snapshot_routes_top(struct manager *m, struct evhttp_request *req, const char *path);
/* A sandbox's sub-route rest ("/snapshots", "/rollback"); false: not one of ours. */
bool snapshot_routes_sandbox(struct manager *m, struct evhttp_request *req, struct vm *vm,
                             const char *rest);
