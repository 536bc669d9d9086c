/*
 * Native v1 sandbox API (docs/api/openapi.yaml). Lifecycle calls return an
 * operation to poll or wait on (202); `?wait=true` waits here instead.
 * exec is a convenience passed through to the node.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/controller.h"
#include "api/egress.h"
#include "api/lifecycle.h"
#include "api/node-client.h"
#include "api/rolling.h"
#include "api/routes.h"
#include "api/sandbox.h"
#include "api/snapshots.h"
#include "api/template-network.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "shared/event-util.h"
#include "shared/http-util.h"

#define WAIT_LIMIT (600 * USEC_PER_SEC)

static bool want_wait(struct evhttp_request *req)
{
    char *w = routes_query(req, "wait");
    bool yes = w && (strcmp(w, "true") == 0 || strcmp(w, "1") == 0);
    free(w);
    return yes;
}

static json_t *operation_to_json(const struct store_operation *op)
{
    json_error_t err;
    json_t *result = op->result_json ? json_loads(op->result_json, 0, &err) : NULL;
    return json_pack("{s:s, s:s, s:s*, s:s, s:s*, s:o, s:I, s:I}", "id", op->id, "kind", op->kind,
                     "sandbox_id", op->sandbox_id, "state", op->state, "error", op->error, "result",
                     result ? result : json_null(), "created_at_us", (json_int_t)op->created_at,
                     "updated_at_us", (json_int_t)op->updated_at);
}

static void reply_sandbox(struct manager *m, struct evhttp_request *req, int status, const char *id)
{
    struct store_sandbox sb = { 0 };
    if (store_sandbox_get(m->store, id, &sb) < 0) {
        http_util_reply_error(req, 404, "sandbox '%s' not found", id);
        return;
    }
    http_util_reply_json(req, status, sandbox_to_json(&sb));
    store_sandbox_release(&sb);
}

static void create_waited(struct manager *m, struct evhttp_request *req,
                          const struct store_operation *op, void *userdata)
{
    if (!op) {
        controller_reply_unfinished(m, req, "sandbox did not start in time");
    } else if (strcmp(op->state, "succeeded") != 0 && lifecycle_create_failed_status(op) == 503) {
        lifecycle_reply_capacity(req, 503, "cannot create sandbox: %s",
                                 op->error ? op->error : "no capacity");
    } else if (strcmp(op->state, "succeeded") != 0) {
        http_util_reply_error(req, lifecycle_create_failed_status(op), "cannot create sandbox: %s",
                              op->error ? op->error : "failed");
    } else {
        reply_sandbox(m, req, 201, op->sandbox_id);
    }
}

static int body_int(struct request_ctx *c, json_t *body, const char *key, int64_t min, int64_t max,
                    int64_t *value)
{
    json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v)) {
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        if (min == max) {
            http_util_reply_error(c->req, 400, "'%s' can only be %lld here", key, (long long)min);
        } else {
            http_util_reply_error(c->req, 400, "'%s' must be an integer between %lld and %lld", key,
                                  (long long)min, (long long)max);
        }
        return -EINVAL;
    }
    *value = json_integer_value(v);
    return 0;
}

void http_sandbox_create(struct request_ctx *c)
{
    char id[SANDBOX_ID_LEN + 1], op[33];
    struct lifecycle_create_params p = {
        /* vcpus, memory_mb 0: the template's default size; the row gets the node's. */
        .template_id = "base",
        .vcpus = 0,
        .memory_mb = 0,
        .disk_mb = SANDBOX_DISK_MB
    };
    json_t *body = http_util_body_json(c->req), *t;
    struct policy_error perr = { { 0 } };
    char *network = NULL;
    const char *bad;
    struct rolling_policy rolling;
    json_t *rolling_json;
    int r;

    if (!body) {
        return;
    }
    if (!routes_check_fields(c->req, body, "the create request",
                             "template snapshot vcpus memory_mb disk_mb timeout_s metadata env "
                             "network auto_pause auto_pause_memory snapshots net_bps disk_bps "
                             "disk_iops")) {
        goto out;
    }
    /* Rolling snapshots (rolling.h): checked before anything is created. */
    rolling_json = json_object_get(body, "snapshots");
    if (rolling_json && !json_is_null(rolling_json)) {
        char err[256];
        if (rolling_parse(c->m, rolling_json, &rolling, err, sizeof(err)) < 0) {
            http_util_reply_error(c->req, 400, "invalid 'snapshots': %s", err);
            goto out;
        }
    } else {
        rolling_json = NULL;
    }
    json_t *ap = json_object_get(body, "auto_pause");
    if (ap && !json_is_boolean(ap)) {
        http_util_reply_error(c->req, 400, "'auto_pause' must be a boolean");
        goto out;
    }
    p.auto_pause = json_is_true(ap);
    /* auto_pause_memory false: that suspend keeps the disk only (a restore boots from it). */
    json_t *apm = json_object_get(body, "auto_pause_memory");
    if (apm && !json_is_boolean(apm)) {
        http_util_reply_error(c->req, 400, "'auto_pause_memory' must be a boolean");
        goto out;
    }
    if (apm && !p.auto_pause) {
        http_util_reply_error(c->req, 400, "'auto_pause_memory' needs 'auto_pause': true");
        goto out;
    }
    p.auto_pause_disk = json_is_false(apm);
    t = json_object_get(body, "template");
    if (t && (!json_is_string(t) || !template_name_is_valid(json_string_value(t)))) {
        http_util_reply_error(c->req, 400, "invalid 'template'");
        goto out;
    }
    if (t) {
        p.template_id = json_string_value(t);
    }
    /* Absent: the template's default if it has one (template-network.h; a policy given
     * here replaces it whole), else deny everything, stored explicitly all the same. */
    r = json_object_get(body, "network") ? 0
                                         : template_network_default(c->m, p.template_id, &network);
    if (r < 0) {
        http_util_reply_error(c->req, 500, "cannot read the network policy of template '%s': %s",
                              p.template_id, strerror(-r));
        goto out;
    }
    if (!network) {
        r = egress_from_native(json_object_get(body, "network"), &network, &perr);
        if (r >= 0) {
            r = egress_check_secrets(c->m, NULL, network, NULL, &perr); /* secrets.h */
        }
    }
    if (r < 0) {
        http_util_reply_error(c->req, routes_status_from_errno(r), "invalid 'network': %s",
                              r == -ENOMEM ? strerror(ENOMEM) : perr.message);
        goto out;
    }
    p.network_json = network;
    if (body_int(c, body, "vcpus", 1, 16, &p.vcpus) < 0 ||
        body_int(c, body, "memory_mb", 128, 65536, &p.memory_mb) < 0 ||
        body_int(c, body, "disk_mb", SANDBOX_DISK_MB, SANDBOX_DISK_MB, &p.disk_mb) < 0 ||
        body_int(c, body, "timeout_s", 0, c->m->max_timeout_s, &p.timeout_s) < 0 ||
        /* The node's own bounds (space-node --help); its maxima it checks itself. */
        body_int(c, body, "net_bps", 4096, 1ll << 40, &p.net_bps) < 0 ||
        body_int(c, body, "disk_bps", 4096, 1ll << 40, &p.disk_bps) < 0 ||
        body_int(c, body, "disk_iops", 10, 10000000, &p.disk_iops) < 0) {
        goto out;
    }
    if ((bad = lifecycle_check_string_map(json_object_get(body, "metadata"), "metadata")) ||
        (bad = lifecycle_check_string_map(json_object_get(body, "env"), "env"))) {
        http_util_reply_error(c->req, 400, "'%s' must be an object of strings", bad);
        goto out;
    }
    p.metadata = json_object_get(body, "metadata");
    p.env = json_object_get(body, "env");
    /* A branch: a new sandbox restored from a full snapshot, its size the snapshot's. */
    json_t *snap = json_object_get(body, "snapshot");
    if (snap) {
        const char *sid = json_string_value(snap);
        if (t || json_object_get(body, "vcpus") || json_object_get(body, "memory_mb")) {
            http_util_reply_error(c->req, 400,
                                  "'snapshot' sets the template, vcpus and memory_mb: give none "
                                  "of them");
            goto out;
        }
        r = sid && sandbox_id_is_valid(sid) ? snapshots_resolve_create(c->m, sid, &p) : 0;
        if (r <= 0) {
            http_util_reply_error(c->req,
                                  r == -EBUSY         ? 409
                                  : r == -EMEDIUMTYPE ? 400
                                  : r == 0            ? 404
                                                      : 500,
                                  "snapshot '%s' %s", sid ? sid : "",
                                  r == -EBUSY         ? "is not complete: it cannot be restored yet"
                                  : r == -EMEDIUMTYPE ? "is a disk snapshot: only full ones are "
                                                        "created from"
                                  : r == 0            ? "not found"
                                                      : strerror(-r));
            goto out;
        }
        p.template_id = sid;
    }
    r = lifecycle_create(c->m, &p, id, op);
    if (r == -EAGAIN) {
        lifecycle_reply_capacity(c->req, 503, "at capacity (%u sandboxes)", c->m->max_sandboxes);
        goto out;
    }
    if (r < 0) {
        http_util_reply_error(c->req, routes_status_from_errno(r), "cannot create sandbox: %s",
                              strerror(-r));
        goto out;
    }
    /* After its row: the policy sweep deletes policies whose sandbox has none. */
    if (rolling_json && (r = rolling_set(c->m, id, &rolling)) < 0) {
        log_sandbox_warning_errno(id, r, "cannot store its snapshot policy: %m");
    }
    if (want_wait(c->req)) {
        controller_wait(c->m, op, c->req, WAIT_LIMIT, create_waited, NULL);
    } else {
        struct store_sandbox sb = { 0 };
        json_t *res = json_pack("{s:s}", "operation_id", op);
        if (store_sandbox_get(c->m->store, id, &sb) >= 0) {
            json_object_set_new(res, "sandbox", sandbox_to_json(&sb));
            store_sandbox_release(&sb);
        }
        http_util_reply_json(c->req, 202, res);
    }
out:
    free(network);
    json_decref(body);
}

void http_sandbox_list(struct request_ctx *c)
{
    char *state = routes_query(c->req, "state"), *md = routes_query(c->req, "metadata");
    char *limit_s = routes_query(c->req, "limit"), *after = routes_query(c->req, "after");
    char *order = routes_query(c->req, "order");
    const char *states[8] = { 0 }, *pairs[2] = { md, NULL };
    struct store_sandbox *list = NULL;
    size_t n = 0, ns = 0;
    uint32_t limit = 100;

    if (state) {
        for (char *s = state, *tok; (tok = strsep(&s, ",")) && ns < ARRAY_SIZE(states) - 1;) {
            states[ns++] = tok;
        }
    }
    if ((limit_s && (parse_u32(limit_s, &limit) < 0 || limit == 0 || limit > 1000)) ||
        (after && !sandbox_id_is_valid(after)) || (md && !strchr(md, '=')) ||
        (order && strcmp(order, "asc") != 0 && strcmp(order, "desc") != 0)) {
        http_util_reply_error(c->req, 400,
                              "invalid query: limit 1..1000, after an id, "
                              "metadata key=value, order asc or desc");
        goto out;
    }
    struct store_sandbox_filter f = { .states = state ? states : NULL,
                                      .metadata = md ? pairs : NULL,
                                      .include_killed = state != NULL,
                                      .after_id = after,
                                      .descending = order && strcmp(order, "desc") == 0,
                                      .limit = limit + 1 };
    int r = store_sandbox_list(c->m->store, &f, &list, &n);
    if (r < 0) {
        http_util_reply_error(c->req, 500, "cannot list sandboxes: %s", strerror(-r));
        goto out;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < n && i < limit; i++) {
        json_array_append_new(arr, sandbox_to_json(&list[i]));
    }
    http_util_reply_json(
        c->req, 200,
        json_pack("{s:o, s:s?}", "sandboxes", arr, "next", n > limit ? list[limit - 1].id : NULL));
out:
    store_sandbox_list_free(list, n);
    free(state);
    free(md);
    free(limit_s);
    free(after);
    free(order);
}

void http_sandbox_get(struct request_ctx *c)
{
    reply_sandbox(c->m, c->req, 200, c->id);
}

static void kill_waited(struct manager *m, struct evhttp_request *req,
                        const struct store_operation *op, void *userdata)
{
    if (!op) {
        controller_reply_unfinished(m, req, "kill did not finish in time");
    } else if (strcmp(op->state, "succeeded") != 0) {
        http_util_reply_error(req, 500, "kill failed: %s", op->error ? op->error : "");
    } else {
        evhttp_send_reply(req, 204, "No Content", NULL);
    }
}

void http_sandbox_kill(struct request_ctx *c)
{
    char op[33];
    int r = controller_request_kill(c->m, c->id, op);

    if (r < 0) {
        http_util_reply_error(c->req, routes_status_from_errno(r), "sandbox '%s' %s", c->id,
                              r == -ENOENT ? "not found" : strerror(-r));
    } else if (!op[0] || !want_wait(c->req)) {
        http_util_reply_json(c->req, 202, json_pack("{s:s?}", "operation_id", op[0] ? op : NULL));
    } else {
        controller_wait(c->m, op, c->req, WAIT_LIMIT, kill_waited, NULL);
    }
}

/* The sandbox as the operation left it, or the operation's error with the node's status. */
static void verb_waited(struct manager *m, struct evhttp_request *req,
                        const struct store_operation *op, void *userdata)
{
    const char *verb = userdata;

    if (!op) {
        controller_reply_unfinished(m, req, "the operation did not finish in time");
        return;
    }
    if (strcmp(op->state, "succeeded") == 0) {
        reply_sandbox(m, req, 200, op->sandbox_id);
        return;
    }
    int status = controller_failed_status(op);
    http_util_reply_error(req, status == 409 || status == 404 ? status : 500, "%s failed: %s", verb,
                          op->error ? op->error : "");
}

/*
 * POST /v1/sandboxes/{id}/pause | resume | suspend | restore: an operation (202 {operation_id,
 * sandbox}), or with ?wait=true the sandbox once it ended (200). A verb from a state its row does
 * not start from is 409 naming the state (a second pause: "sandbox 'x' is paused").
 */
static void lifecycle_verb(struct request_ctx *c, enum operation_kind kind, const char *verb)
{
    enum sandbox_state state = _SANDBOX_STATE_INVALID;
    json_t *body = http_util_body_json(c->req); /* an empty body reads as {} */
    char op[33];
    int r;

    /* suspend and restore take {memory?: bool} (false: the disk only, operation.h); the others
     * no field: anything given would be ignored, so refuse it. */
    bool takes_memory = kind == OPERATION_KIND_SUSPEND || kind == OPERATION_KIND_RESTORE;
    json_t *mem = json_object_get(body, "memory");
    bool ok = body &&
              routes_check_fields(c->req, body, "the request", takes_memory ? "memory" : "(none)");
    if (ok && mem && !json_is_null(mem) && !json_is_boolean(mem)) {
        http_util_reply_error(c->req, 400, "'memory' must be a boolean");
        ok = false;
    }
    if (ok && json_is_false(mem)) {
        kind = kind == OPERATION_KIND_SUSPEND ? OPERATION_KIND_SUSPEND_DISK
                                              : OPERATION_KIND_RESTORE_DISK;
    }
    json_decref(body);
    if (!ok) {
        return;
    }
    r = controller_request(c->m, kind, c->id, op, &state);
    if (r < 0) {
        lifecycle_reply_request_error(c->req, r, c->id, kind, state);
    } else if (want_wait(c->req)) {
        controller_wait(c->m, op, c->req, WAIT_LIMIT, verb_waited, (void *)verb);
    } else {
        struct store_sandbox sb = { 0 };
        json_t *res = json_pack("{s:s}", "operation_id", op);
        if (store_sandbox_get(c->m->store, c->id, &sb) >= 0) {
            json_object_set_new(res, "sandbox", sandbox_to_json(&sb));
            store_sandbox_release(&sb);
        }
        http_util_reply_json(c->req, 202, res);
    }
}

void http_sandbox_pause(struct request_ctx *c)
{
    lifecycle_verb(c, OPERATION_KIND_PAUSE, "pause");
}

void http_sandbox_resume(struct request_ctx *c)
{
    lifecycle_verb(c, OPERATION_KIND_RESUME, "resume");
}

void http_sandbox_suspend(struct request_ctx *c)
{
    lifecycle_verb(c, OPERATION_KIND_SUSPEND, "suspend");
}

void http_sandbox_restore(struct request_ctx *c)
{
    lifecycle_verb(c, OPERATION_KIND_RESTORE, "restore");
}

void http_sandbox_timeout(struct request_ctx *c)
{
    json_t *body = http_util_body_json(c->req);
    int64_t t = -1;

    if (!body) {
        return;
    }
    if (!routes_check_fields(c->req, body, "the request", "timeout_s")) {
        json_decref(body);
        return;
    }
    if (body_int(c, body, "timeout_s", 0, c->m->max_timeout_s, &t) >= 0) {
        int r = t < 0 ? -EINVAL : lifecycle_set_timeout(c->m, c->id, t, false);
        if (r < 0) {
            http_util_reply_error(c->req, routes_status_from_errno(r), "cannot set timeout: %s",
                                  r == -EINVAL ? "'timeout_s' is required" : strerror(-r));
        } else {
            reply_sandbox(c->m, c->req, 200, c->id);
        }
    }
    json_decref(body);
}

/* exec: relayed to the node, which streams the command through the agent. */
void http_sandbox_exec(struct request_ctx *c)
{
    struct store_sandbox sb = { 0 };
    char path[128];
    json_t *body;
    int r = lifecycle_get_live(c->m, c->id, &sb);

    if (r < 0) {
        http_util_reply_error(c->req, 404, "sandbox '%s' not found", c->id);
        return;
    }
    store_sandbox_release(&sb);
    body = http_util_body_json(c->req);
    if (!body) {
        return;
    }
    /* The node reads exactly these (src/node/http-api.c); anything else would be dropped. */
    if (!routes_check_fields(c->req, body, "the exec request",
                             "cmd args env cwd user timeout_ms")) {
        json_decref(body);
        return;
    }
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", c->id);
    http_relay_to_node(c, "POST", path, body, NODE_CLIENT_TIMEOUT);
}

void http_operation_get(struct request_ctx *c)
{
    struct store_operation op = { 0 };
    int r = store_operation_get(c->m->store, c->id, &op);
    if (r < 0) {
        http_util_reply_error(c->req, routes_status_from_errno(r), "operation '%s' not found",
                              c->id);
        return;
    }
    http_util_reply_json(c->req, 200, operation_to_json(&op));
    store_operation_release(&op);
}

static void operation_waited(struct manager *m, struct evhttp_request *req,
                             const struct store_operation *op, void *userdata)
{
    char *id = userdata;
    if (op) {
        http_util_reply_json(req, 200, operation_to_json(op));
    } else {
        /* Timed out: the current state, still unfinished. */
        struct store_operation cur = { 0 };
        if (store_operation_get(m->store, id, &cur) >= 0) {
            http_util_reply_json(req, 200, operation_to_json(&cur));
            store_operation_release(&cur);
        } else {
            http_util_reply_error(req, 404, "operation '%s' not found", id);
        }
    }
    free(id);
}

void http_operation_wait(struct request_ctx *c)
{
    struct store_operation op = { 0 };
    char *t = routes_query(c->req, "timeout_s");
    uint32_t timeout = 60;

    if (t && (parse_u32(t, &timeout) < 0 || timeout > 600)) {
        free(t);
        http_util_reply_error(c->req, 400, "'timeout_s' must be 0..600");
        return;
    }
    free(t);
    if (store_operation_get(c->m->store, c->id, &op) < 0) {
        http_util_reply_error(c->req, 404, "operation '%s' not found", c->id);
        return;
    }
    store_operation_release(&op);
    controller_wait(c->m, c->id, c->req, (usec_t)timeout * USEC_PER_SEC, operation_waited,
                    strdup(c->id));
}
