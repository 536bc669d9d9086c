#pragma once
/*
 * space-api -> space-node calls over the node's Unix socket. Blocking: call
 * them from worker jobs only. Each returns 0 or -errno; on an error answer
 * from the node, *ret_status is its HTTP status and *ret_error its message
 * (caller frees; may be NULL).
 */
#include <jansson.h>

#include "api/store.h"

/* Creates sandbox sb on the node (idempotent on sb->id), then sends init_json to its agent;
 * from (may be NULL): restored from that snapshot (a branch) instead of the template.
 * sb->vcpus or sb->memory_mb 0: not sent, the node gives the template's default size.
 * *ret_timings gets the node's per-phase timings (new reference, may be NULL), *ret_vcpus and
 * *ret_memory_mb the size it created (0 when its answer has none). */
int node_client_create(const char *node_socket, const struct store_sandbox *sb,
                       const struct store_snapshot *from, const char *init_json, int *ret_status,
                       char **ret_error, json_t **ret_timings, int64_t *ret_vcpus,
                       int64_t *ret_memory_mb);
/* Hands the node sandbox id's egress policy (network_json as egress.h stores it; NULL = deny
 * all): PUT /v1/sandboxes/{id}/network with the canonical native form. */
int node_client_set_network(const char *node_socket, const char *id, const char *network_json,
                            int *ret_status, char **ret_error);
/* Kills it; a sandbox the node does not know counts as killed. */
int node_client_kill(const char *node_socket, const char *id, int *ret_status, char **ret_error);
/* The node's sandboxes: *ret is a JSON array of node sandbox objects; *ret_failed (may be
 * NULL) the array of those whose VMM ended on its own ({id, reason, message}: the node's
 * "failed"; empty from a node that has none). */
int node_client_list(const char *node_socket, json_t **ret, json_t **ret_failed);
#include "basic/time-util.h"

/* The deadline of ordinary node calls; a template build passes a longer one. */
#define NODE_CLIENT_TIMEOUT (180 * USEC_PER_SEC)

/* Any node route, for pass-through conveniences (exec, templates, template builds). */
int node_client_call(const char *node_socket, const char *method, const char *path, json_t *body,
                     usec_t timeout, int *ret_status, json_t **ret_body);
