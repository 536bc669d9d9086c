#pragma once
/*
 * The route table (style.md §5.3): one static array for the native v1 API
 * and the E2B-compatible API side by side, the auth rule of each, and the
 * single errno -> HTTP status mapping. Handlers live in http-*.c and e2b-*.c.
 */
#include <event2/http.h>
#include <jansson.h>
#include <stdbool.h>

#include "api/manager.h"
#include "basic/time-util.h"

struct request_ctx {
    struct manager *m;
    struct evhttp_request *req;
    const char *id;      /* the {id} path segment, validated when the route names one */
    bool admin;          /* came in on the local Unix socket */
    const char *feature; /* what a 501 route lacks (e2b_not_implemented) */
};

/* The evhttp request callback; userdata is the struct listener it came in on. */
void routes_dispatch(struct evhttp_request *req, void *userdata);

/* HTTP status for a negative errno from the store/controller. */
int routes_status_from_errno(int r);
/* Query parameter (decoded; caller frees) or NULL. */
char *routes_query(struct evhttp_request *req, const char *name);

/* The first key of obj not in known (space-separated names), or NULL. Unknown fields are
 * refused, never ignored (issue 7 "no silent drops"). */
const char *routes_unknown_field(json_t *obj, const char *known);
/* Replies 400 naming the unknown field and returns false when obj has one. */
bool routes_check_fields(struct evhttp_request *req, json_t *obj, const char *what,
                         const char *known);

/* Runs method path (body stolen, may be NULL) against the node on a worker and
 * answers with the node's status and body (http-admin.c). */
void http_relay_to_node(struct request_ctx *c, const char *method, const char *path, json_t *body,
                        usec_t timeout);

/* Native v1 (http-sandboxes.c, http-admin.c). */
void http_sandbox_create(struct request_ctx *c);
void http_sandbox_list(struct request_ctx *c);
void http_sandbox_get(struct request_ctx *c);
void http_sandbox_kill(struct request_ctx *c);
void http_sandbox_timeout(struct request_ctx *c);
void http_sandbox_exec(struct request_ctx *c);
void http_sandbox_pause(struct request_ctx *c);
void http_sandbox_resume(struct request_ctx *c);
void http_sandbox_suspend(struct request_ctx *c);
void http_sandbox_restore(struct request_ctx *c);
void http_operation_get(struct request_ctx *c);
void http_operation_wait(struct request_ctx *c);
void http_templates_list(struct request_ctx *c);
void http_pools_list(struct request_ctx *c);
/* GET /v1/capacity (http-capacity.c) */
void http_capacity(struct request_ctx *c);
/* GET /v1/egress-ca, POST /v1/egress-ca/rotate (admin: the local socket) (http-egress-ca.c) */
void http_egress_ca_get(struct request_ctx *c);
void http_egress_ca_rotate(struct request_ctx *c);
void http_info(struct request_ctx *c);
void http_template_build(struct request_ctx *c);
void http_keys_create(struct request_ctx *c);
void http_keys_list(struct request_ctx *c);
void http_keys_delete(struct request_ctx *c);
/* Egress (http-egress.c). */
void http_sandbox_network(struct request_ctx *c);
void http_sandbox_egress(struct request_ctx *c);
/*
 * Answers a policy replace once its sandbox.network operation op (may be "": queued behind
 * the create, which sends the stored policy itself) has run: native 200 {"network"}, E2B
 * 204; 400 when the node refused the policy, 502 when it failed otherwise, 504 when it
 * took too long (the stored policy stays the one the node is given, on the next attempt).
 */
void http_network_wait(struct request_ctx *c, const char *op, bool e2b);

/* E2B-compatible (e2b-sandboxes.c). */
void e2b_sandbox_create(struct request_ctx *c);
void e2b_sandbox_list_v1(struct request_ctx *c);
void e2b_sandbox_list_v2(struct request_ctx *c);
void e2b_sandbox_get(struct request_ctx *c);
void e2b_sandbox_kill(struct request_ctx *c);
void e2b_sandbox_timeout(struct request_ctx *c);
void e2b_sandbox_refresh(struct request_ctx *c);
void e2b_sandbox_connect(struct request_ctx *c);
void e2b_sandbox_resume(struct request_ctx *c);
void e2b_sandbox_pause(struct request_ctx *c);
void e2b_sandbox_metrics(struct request_ctx *c);
void e2b_sandbox_logs(struct request_ctx *c);
void e2b_sandbox_network(struct request_ctx *c);
void e2b_not_implemented(struct request_ctx *c);
/* E2B's template listing and info, read-only, of the node's templates (http-admin.c). */
void e2b_templates_list(struct request_ctx *c);
void e2b_template_get(struct request_ctx *c);
