/*
 * The E2B-compatible sandbox API (e2b-compat.md §3): exact field names,
 * status codes and error bodies ({"code": <int>, "message"}) the SDKs parse.
 * Create blocks until the sandbox runs, as E2B clients expect.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <sys/queue.h>

#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <string.h>

#include "api/controller.h"
#include "api/egress.h"
#include "api/secrets.h"
#include "api/lifecycle.h"
#include "api/snapshots.h"
#include "api/routes.h"
#include "api/sandbox.h"
#include "api/template-network.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "shared/http-util.h"

#define E2B_LIST_MAX 100
#define CREATE_WAIT (300 * USEC_PER_SEC)

static void reply_errno(struct evhttp_request *req, int r, const char *what, const char *id)
{
    int status = routes_status_from_errno(r);
    if (status == 404) {
        http_util_reply_error(req, 404, "sandbox '%s' not found", id);
    } else {
        http_util_reply_error(req, status, "cannot %s sandbox: %s", what, strerror(-r));
    }
}

/* 501 with E2B's error shape; the SDK raises it instead of reading a 404 as "false". */
static void reply_not_implemented(struct evhttp_request *req, const char *feature)
{
    http_util_reply_error(req, 501, "%s is not implemented in space yet", feature);
}

#define CREATE_FIELDS                                                                              \
    "templateID timeout metadata envVars secure allow_internet_access network autoPause "          \
    "autoPauseMemory autoResume mcp iam volumeMounts"
#define NETWORK_FIELDS                                                                             \
    "allowOut denyOut egressProxy rules allowPublicTraffic maskRequestHost httpsPorts"

static bool is_empty(json_t *v)
{
    return !v || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0) ||
           (json_is_object(v) && json_object_size(v) == 0);
}

/* A field that must be a boolean (or null/absent); *ret is false when absent. */
static bool get_bool(struct evhttp_request *req, json_t *obj, const char *field, bool *ret)
{
    json_t *v = json_object_get(obj, field);
    if (v && !json_is_null(v) && !json_is_boolean(v)) {
        http_util_reply_error(req, 400, "'%s' must be a boolean", field);
        return false;
    }
    *ret = v && json_is_true(v);
    return true;
}

/*
 * Every create field is honoured or refused (issue 7 "no silent drops"; e2b-compat.md §11):
 * 400 when malformed or unknown, 501 naming the feature space does not have yet. Returns
 * false once it has replied.
 */
static bool check_create_fields(struct evhttp_request *req, json_t *body)
{
    json_t *network = json_object_get(body, "network"), *v;
    bool b, pause = false;

    if (!routes_check_fields(req, body, "the create request", CREATE_FIELDS)) {
        return false;
    }
    /* secure: space always issues an envd access token, which is what true asks for; false
     * only means the caller does not need one. */
    if (!get_bool(req, body, "secure", &b) || !get_bool(req, body, "allow_internet_access", &b)) {
        return false;
    }
    /* allow_internet_access and network's egress fields: e2b_sandbox_create() parses them
     * into the policy (egress.h). */
    /* autoPause (lifecycle.onTimeout: "pause"): suspended at the timeout, not killed. */
    if (!get_bool(req, body, "autoPause", &pause)) {
        return false;
    }
    /* autoPauseMemory (keepMemory): true is space's suspend; false a disk-only one (the
     * restore boots from the disk). Without autoPause only the SDK's default false (or null)
     * is taken: true would ask for something that never happens. */
    v = json_object_get(body, "autoPauseMemory");
    if (!get_bool(req, body, "autoPauseMemory", &b)) {
        return false;
    }
    if (v && !json_is_null(v) && !pause && b) {
        http_util_reply_error(req, 400, "'autoPauseMemory' needs 'autoPause': true");
        return false;
    }
    v = json_object_get(body, "autoResume");
    if (v && !json_is_null(v)) {
        if (!json_is_object(v) || !routes_check_fields(req, v, "'autoResume'", "enabled")) {
            if (!json_is_object(v)) {
                http_util_reply_error(req, 400, "'autoResume' must be an object {enabled}");
            }
            return false;
        }
        if (!get_bool(req, v, "enabled", &b)) {
            return false;
        }
        if (b && !pause) {
            http_util_reply_error(req, 400, "'autoResume' needs 'autoPause': true");
            return false;
        }
        /* As E2B (and its SDK) has it: a disk-only pause is resumed by connect, explicitly. */
        if (b && json_is_false(json_object_get(body, "autoPauseMemory"))) {
            http_util_reply_error(req, 400,
                                  "'autoResume' cannot be enabled with 'autoPauseMemory': false "
                                  "(a disk-only pause is resumed by connect)");
            return false;
        }
    }
    if (!is_empty(json_object_get(body, "mcp"))) {
        reply_not_implemented(req, "the MCP gateway (mcp)");
        return false;
    }
    v = json_object_get(body, "iam");
    if (v && !json_is_null(v) &&
        (!json_is_object(v) || !routes_check_fields(req, v, "'iam'", "tokens"))) {
        if (!json_is_object(v)) {
            http_util_reply_error(req, 400, "'iam' must be an object {tokens}");
        }
        return false;
    }
    if (v && !is_empty(json_object_get(v, "tokens"))) {
        reply_not_implemented(req, "workload identity tokens (iam.tokens)");
        return false;
    }
    v = json_object_get(body, "volumeMounts");
    if (v && !json_is_null(v) && !json_is_array(v)) {
        http_util_reply_error(req, 400, "'volumeMounts' must be an array");
        return false;
    }
    if (!is_empty(v)) {
        reply_not_implemented(req, "volumes (volumeMounts)");
        return false;
    }
    if (!network || json_is_null(network)) {
        return true;
    }
    if (!json_is_object(network)) {
        http_util_reply_error(req, 400, "'network' must be an object");
        return false;
    }
    if (!routes_check_fields(req, network, "'network'", NETWORK_FIELDS)) {
        return false;
    }
    /* Ingress settings space does not have (allowOut, denyOut, egressProxy and rules are the
     * egress policy's: policy_parse_e2b() takes or refuses them). */
    static const char *const ingress[] = { "maskRequestHost", "httpsPorts" };
    for (size_t i = 0; i < ARRAY_SIZE(ingress); i++) {
        if (!is_empty(json_object_get(network, ingress[i]))) {
            char what[96];
            snprintf(what, sizeof(what), "the ingress setting network.%s", ingress[i]);
            reply_not_implemented(req, what);
            return false;
        }
    }
    v = json_object_get(network, "allowPublicTraffic");
    if (v && !json_is_null(v)) {
        if (!json_is_boolean(v)) {
            http_util_reply_error(req, 400, "'network.allowPublicTraffic' must be a boolean");
            return false;
        }
    }
    return true;
}

/* network.allowPublicTraffic: false (checked by check_create_fields()). */
static bool wants_private_traffic(json_t *body)
{
    return json_is_false(json_object_get(json_object_get(body, "network"), "allowPublicTraffic"));
}

/* Renders the sandbox once its create operation has finished. */
static void create_finished(struct manager *m, struct evhttp_request *req,
                            const struct store_operation *op, void *userdata)
{
    struct store_sandbox sb = { 0 };

    if (!op) {
        controller_reply_unfinished(m, req, "sandbox did not start in time");
        return;
    }
    if (strcmp(op->state, "succeeded") != 0 && lifecycle_create_failed_status(op) == 503) {
        /* No capacity on the node: E2B's answer for it, which the SDK retries. */
        lifecycle_reply_capacity(req, 429, "cannot create sandbox: %s",
                                 op->error ? op->error : "no capacity");
        return;
    }
    if (strcmp(op->state, "succeeded") != 0) {
        http_util_reply_error(req, lifecycle_create_failed_status(op), "cannot create sandbox: %s",
                              op->error ? op->error : "failed");
        return;
    }
    if (store_sandbox_get(m->store, op->sandbox_id, &sb) < 0) {
        http_util_reply_error(req, 500, "sandbox vanished after create");
        return;
    }
    http_util_reply_json(req, 201, sandbox_to_e2b(&sb, m->domain));
    store_sandbox_release(&sb);
}

/* A 400 naming the bad entry, or 501 for egressProxy/rules (e2b-compat.md 11). */
static void reply_policy_error(struct evhttp_request *req, int r, const struct policy_error *e)
{
    if (r == -EOPNOTSUPP) {
        http_util_reply_error(req, 501, "%s (egress network policy)", e->message);
    } else if (r == -EINVAL) {
        http_util_reply_error(req, 400, "invalid network policy: %s", e->message);
    } else {
        http_util_reply_error(req, 500, "cannot parse the network policy: %s",
                              e->message[0] ? e->message : strerror(-r));
    }
}

/* Whether a create body sets any egress: allow_internet_access or network's egress keys
 * (allowPublicTraffic and the other ingress keys are not egress). */
static bool gives_egress(const json_t *body)
{
    static const char *const egress[] = { "allowOut", "denyOut", "rules", "egressProxy" };
    const json_t *network = json_object_get(body, "network");

    if (json_object_get(body, "allow_internet_access")) {
        return true;
    }
    for (size_t i = 0; i < ARRAY_SIZE(egress); i++) {
        if (json_object_get(network, egress[i])) {
            return true;
        }
    }
    return false;
}

/* Seals and stores the literal header values of network.rules as secrets of sandbox id. */
static int create_literals(struct manager *m, const char *id, json_t *literals)
{
    const char *name;
    json_t *v;
    int r;

    json_object_foreach (literals, name, v) {
        r = secrets_create_literal(m, id, name, json_string_value(v));
        if (r < 0) {
            secrets_drop_literals(m, literals);
            return r;
        }
    }
    return 0;
}

void e2b_sandbox_create(struct request_ctx *c)
{
    char id[SANDBOX_ID_LEN + 1], op[33];
    struct policy_error perr = { { 0 } };
    char *network = NULL;
    json_t *body, *t, *literals = json_object();
    const char *bad;
    int64_t timeout = c->m->default_timeout_s;
    int r;

    body = http_util_body_json(c->req);
    if (!body || !literals) {
        json_decref(literals);
        return;
    }
    if (!check_create_fields(c->req, body)) {
        goto out;
    }
    /* allow_internet_access absent = true, as in the SDKs; the ingress keys of network are
     * check_create_fields()' and are skipped here. */
    /* The id first: the literal header values of network.rules become secrets named
     * after the sandbox (secrets.h). */
    const char *template_id = json_string_value(json_object_get(body, "templateID"));
    if (!template_id || !template_name_is_valid(template_id)) {
        http_util_reply_error(c->req, 400, "'templateID' must name a template");
        goto out;
    }
    /* No egress of its own: the template's default, if it has one (template-network.h). */
    r = gives_egress(body) ? 0 : template_network_default(c->m, template_id, &network);
    if (r < 0) {
        http_util_reply_error(c->req, 500, "cannot read the network policy of template '%s': %s",
                              template_id, strerror(-r));
        goto out;
    }
    r = sandbox_id_new(id);
    if (r >= 0 && !network) {
        r = egress_from_e2b(json_object_get(body, "network"),
                            json_object_get(body, "allow_internet_access"), false, id, literals,
                            &network, &perr);
    }
    if (r < 0) {
        reply_policy_error(c->req, r, &perr);
        goto out;
    }
    if (json_object_size(literals) > 0 && !secrets_available(c, true)) {
        goto out;
    }
    r = egress_check_secrets(c->m, NULL, network, literals, &perr);
    if (r < 0) {
        reply_policy_error(c->req, r, &perr);
        goto out;
    }
    t = json_object_get(body, "timeout");
    if (t && !json_is_null(t)) {
        if (!json_is_integer(t) || json_integer_value(t) <= 0 ||
            json_integer_value(t) > c->m->max_timeout_s) {
            http_util_reply_error(c->req, 400, "'timeout' must be between 1 and %lld seconds",
                                  (long long)c->m->max_timeout_s);
            goto out;
        }
        timeout = json_integer_value(t);
    }
    if ((bad = lifecycle_check_string_map(json_object_get(body, "metadata"), "metadata")) ||
        (bad = lifecycle_check_string_map(json_object_get(body, "envVars"), "envVars"))) {
        http_util_reply_error(c->req, 400, "'%s' must be an object of strings", bad);
        goto out;
    }
    /* Last, so that nothing else can still refuse the create after the literals exist. */
    r = create_literals(c->m, id, literals);
    secrets_wipe_values(literals);
    if (r < 0) {
        http_util_reply_error(c->req, 500, "cannot store the network rules' values: %s",
                              strerror(-r));
        goto out;
    }
    struct lifecycle_create_params p = {
        .id = id,
        .template_id = template_id,
        /* 0: the template's default size (templates/<name>/size); the row gets the node's,
         * which cpuCount and memoryMB then show. */
        .vcpus = 0,
        .memory_mb = 0,
        .disk_mb = SANDBOX_DISK_MB,
        .timeout_s = timeout,
        .metadata = json_object_get(body, "metadata"),
        .env = json_object_get(body, "envVars"),
        .private_traffic = wants_private_traffic(body),
        .network_json = network,
        .auto_pause = json_is_true(json_object_get(body, "autoPause")),
        .auto_resume =
            json_is_true(json_object_get(json_object_get(body, "autoResume"), "enabled")),
        .auto_pause_disk = json_is_true(json_object_get(body, "autoPause")) &&
                           json_is_false(json_object_get(body, "autoPauseMemory")),
    };
    /* Sandbox.create(snapshotId): the snapshot's id is the template (snapshots.h). */
    r = snapshots_resolve_create(c->m, template_id, &p);
    if (r == -EBUSY || r == -EMEDIUMTYPE) {
        secrets_drop_literals(c->m, literals);
        http_util_reply_error(c->req, r == -EBUSY ? 409 : 400, "snapshot '%s' %s", template_id,
                              r == -EBUSY ? "is not complete: it cannot be restored yet"
                                          : "is a disk snapshot: only full ones are created from");
        goto out;
    }
    r = r < 0 ? r : lifecycle_create(c->m, &p, id, op);
    if (r < 0) {
        secrets_drop_literals(c->m, literals);
    }
    if (r == -EAGAIN) {
        lifecycle_reply_capacity(c->req, 429,
                                 "too many sandboxes for this deployment's capacity (%u)",
                                 c->m->max_sandboxes);
        goto out;
    }
    if (r < 0) {
        http_util_reply_error(c->req, routes_status_from_errno(r), "cannot create sandbox: %s",
                              strerror(-r));
        goto out;
    }
    controller_wait(c->m, op, c->req, CREATE_WAIT, create_finished, NULL);
out:
    if (json_object_size(literals) > 0) {
        secrets_wipe_values(literals);
        secrets_wipe_request(c->req);
    }
    json_decref(literals);
    free(network);
    json_decref(body);
}

void e2b_sandbox_get(struct request_ctx *c)
{
    struct store_sandbox sb = { 0 };
    int r = lifecycle_get_live(c->m, c->id, &sb);
    if (r < 0) {
        reply_errno(c->req, r, "get", c->id);
        return;
    }
    json_t *detail = sandbox_to_e2b_detail(&sb, c->m->domain);
    /* The egress policy as it was given (E2B echoes allowOut/denyOut and
     * allow_internet_access back unchanged), plus what the SDK's getInfo() reads back as
     * network.allowPublicTraffic. */
    json_t *network = egress_e2b_network(sb.network_json);
    if (detail && network) {
        json_object_set_new(network, "allowPublicTraffic", json_boolean(!sb.private_traffic));
        json_object_set_new(detail, "network", network);
        json_object_set_new(detail, "allowInternetAccess",
                            egress_e2b_allow_internet(sb.network_json));
    } else {
        json_decref(network);
    }
    http_util_reply_json(c->req, 200, detail);
    store_sandbox_release(&sb);
}

/*
 * Sandbox.updateNetwork(): the body replaces the whole egress configuration ("fields that
 * are omitted are cleared"), live. 204 once the node has it (e2b-compat.md: 204, 404).
 */
void e2b_sandbox_network(struct request_ctx *c)
{
    struct store_sandbox sb = { 0 };
    struct policy_error perr = { { 0 } };
    enum sandbox_state state = _SANDBOX_STATE_INVALID;
    char *network = NULL, op[33];
    json_t *body, *literals;
    int r = lifecycle_get_live(c->m, c->id, &sb);

    if (r < 0) {
        reply_errno(c->req, r, "update the network of", c->id);
        return;
    }
    store_sandbox_release(&sb);
    body = http_util_body_json(c->req);
    if (!body) {
        return;
    }
    literals = json_object();
    r = literals ? egress_from_e2b(body, NULL, true, c->id, literals, &network, &perr) : -ENOMEM;
    if (r < 0) {
        reply_policy_error(c->req, r, &perr);
        goto out;
    }
    if (json_object_size(literals) > 0 && !secrets_available(c, true)) {
        goto out;
    }
    r = egress_check_secrets(c->m, c->id, network, literals, &perr);
    if (r >= 0) {
        r = create_literals(c->m, c->id, literals);
        if (r < 0) {
            snprintf(perr.message, sizeof(perr.message),
                     "cannot store the network rules' values: %s", strerror(-r));
            r = -EIO;
        }
    }
    if (r < 0) {
        reply_policy_error(c->req, r, &perr);
        goto out;
    }
    /* The literals the policy replaced stay until the sandbox ends (secrets_tick()). */
    r = lifecycle_set_network(c->m, c->id, network, op, &state);
    if (r < 0) {
        secrets_drop_literals(c->m, literals);
        lifecycle_reply_request_error(c->req, r, c->id, OPERATION_KIND_NETWORK, state);
        goto out;
    }
    http_network_wait(c, op, true);
out:
    if (json_object_size(literals) > 0) {
        secrets_wipe_values(literals);
        secrets_wipe_request(c->req);
    }
    json_decref(literals);
    json_decref(body);
    free(network);
}

static void kill_finished(struct manager *m, struct evhttp_request *req,
                          const struct store_operation *op, void *userdata)
{
    if (op && strcmp(op->state, "succeeded") != 0) {
        http_util_reply_error(req, 500, "kill failed: %s", op->error ? op->error : "");
        return;
    }
    if (!op && m->stopping) {
        controller_reply_unfinished(m, req, NULL); /* the 503; a plain timeout stays 204 */
        return;
    }
    evhttp_send_reply(req, 204, "No Content", NULL);
}

void e2b_sandbox_kill(struct request_ctx *c)
{
    char op[33];
    int r = controller_request_kill(c->m, c->id, op);
    if (r < 0) {
        reply_errno(c->req, r, "kill", c->id);
        return;
    }
    if (!op[0]) {
        evhttp_send_reply(c->req, 204, "No Content", NULL); /* killed when its create ends */
        return;
    }
    controller_wait(c->m, op, c->req, 60 * USEC_PER_SEC, kill_finished, NULL);
}

/* Reads an integer field of the body (seconds); replies 400 when it is missing or invalid. */
static int body_seconds(struct request_ctx *c, const char *field, bool required, const char *known,
                        int64_t *ret)
{
    json_t *body = http_util_body_json(c->req), *t;
    bool memory;
    int r = 0;

    if (!body) {
        return -EINVAL;
    }
    t = json_object_get(body, field);
    if (!routes_check_fields(c->req, body, "the request", known) ||
        !get_bool(c->req, body, "memory", &memory)) {
        r = -EINVAL; /* memory: only a resume reads it, and a running sandbox needs none */
    } else if (!t && !required) {
        r = 0;
    } else if (!json_is_integer(t) || json_integer_value(t) < 0) {
        http_util_reply_error(c->req, 400, "'%s' must be a non-negative integer of seconds", field);
        r = -EINVAL;
    } else {
        *ret = json_integer_value(t);
        r = 1;
    }
    json_decref(body);
    return r;
}

void e2b_sandbox_timeout(struct request_ctx *c)
{
    int64_t timeout = 0;
    if (body_seconds(c, "timeout", true, "timeout", &timeout) < 0) {
        return;
    }
    int r = lifecycle_set_timeout(c->m, c->id, timeout, false);
    if (r < 0) {
        reply_errno(c->req, r, "set timeout of", c->id);
        return;
    }
    evhttp_send_reply(c->req, 204, "No Content", NULL);
}

void e2b_sandbox_refresh(struct request_ctx *c)
{
    int64_t duration = 0;
    if (body_seconds(c, "duration", false, "duration", &duration) < 0) {
        return;
    }
    int r = lifecycle_set_timeout(c->m, c->id, duration, true);
    if (r < 0) {
        reply_errno(c->req, r, "refresh", c->id);
        return;
    }
    evhttp_send_reply(c->req, 204, "No Content", NULL);
}

/*
 * E2B's pause and resume (e2b-compat.md "pause/connect"). E2B's pause keeps the sandbox
 * for later without it running: space's suspend (memory, devices and disk to disk, the VM
 * released). connect/resume brings it back: restore for a suspended sandbox, resume for
 * one paused through the native API (memory resident). Both block until the operation
 * ends, as the SDKs expect.
 */
struct e2b_wait {
    int ok_status;     /* 204 (pause) or 201 (resumed) */
    int64_t timeout_s; /* resume: the TTL connect/resume asked for (never shortens) */
    char verb[16];
};

static void verb_finished(struct manager *m, struct evhttp_request *req,
                          const struct store_operation *op, void *userdata)
{
    struct e2b_wait *w = userdata;
    struct store_sandbox sb = { 0 };

    if (!op) {
        controller_reply_unfinished(m, req, "the sandbox did not change state in time");
        goto out;
    }
    if (strcmp(op->state, "succeeded") != 0) {
        int status = controller_failed_status(op);
        http_util_reply_error(req, status == 404 || status == 409 ? status : 500,
                              "cannot %s sandbox: %s", w->verb, op->error ? op->error : "failed");
        goto out;
    }
    if (w->ok_status == 204) {
        evhttp_send_reply(req, 204, "No Content", NULL);
        goto out;
    }
    /* Resumed: connect's timeout extends the remaining lifetime, never shortens it. */
    (void)lifecycle_set_timeout(m, op->sandbox_id, w->timeout_s, true);
    if (lifecycle_get_live(m, op->sandbox_id, &sb) < 0) {
        http_util_reply_error(req, 404, "sandbox '%s' not found", op->sandbox_id);
        goto out;
    }
    http_util_reply_json(req, w->ok_status, sandbox_to_e2b(&sb, m->domain));
    store_sandbox_release(&sb);
out:
    free(w);
}

/* Records kind on id and waits for it; replies itself on every path. */
static void request_and_wait(struct manager *m, struct evhttp_request *req, const char *id,
                             enum operation_kind kind, const char *verb, int ok_status,
                             int64_t timeout_s)
{
    enum sandbox_state state = _SANDBOX_STATE_INVALID;
    struct e2b_wait *w;
    char op[33];
    int r = controller_request(m, kind, id, op, &state);

    if (r < 0) {
        lifecycle_reply_request_error(req, r, id, kind, state);
        return;
    }
    w = calloc(1, sizeof(*w));
    if (!w) {
        http_util_reply_error(req, 500, "out of memory");
        return;
    }
    *w = (struct e2b_wait){ .ok_status = ok_status, .timeout_s = timeout_s };
    snprintf(w->verb, sizeof(w->verb), "%s", verb);
    controller_wait(m, op, req, CREATE_WAIT, verb_finished, w);
}

static void e2b_request_and_wait(struct request_ctx *c, enum operation_kind kind, const char *verb,
                                 int ok_status, int64_t timeout_s)
{
    request_and_wait(c->m, c->req, c->id, kind, verb, ok_status, timeout_s);
}

static bool is_paused_state(const char *state)
{
    return strcmp(sandbox_e2b_state(state), "paused") == 0;
}

/* What brings a sandbox E2B calls paused back: restore from suspended, else resume (a
 * transitional state then answers 409: it is changing state). memory false (onResume:
 * "reboot"): a restore that boots from the disk, dropping any memory state; a sandbox
 * paused through the native API (memory resident) has no disk-only path: -EMEDIUMTYPE. */
static int wake_kind(const char *state, bool memory, enum operation_kind *ret)
{
    bool suspended = strcmp(state, "suspended") == 0 || strcmp(state, "suspending") == 0 ||
                     strcmp(state, "restoring") == 0;
    if (!suspended && !memory) {
        return -EMEDIUMTYPE;
    }
    *ret = !suspended ? OPERATION_KIND_RESUME
           : memory   ? OPERATION_KIND_RESTORE
                      : OPERATION_KIND_RESTORE_DISK;
    return 0;
}

static void reply_no_reboot(struct evhttp_request *req, const char *id)
{
    http_util_reply_error(req, 409,
                          "sandbox '%s' is paused with its memory resident (native pause): "
                          "'memory': false (a reboot from the disk) needs a suspended sandbox; "
                          "resume it with memory",
                          id);
}

/* Parses {timeout?, memory?} (connect) or {timeout?, autoPause?, memory?} (resume). */
static int resume_body(struct request_ctx *c, const char *known, int64_t *timeout, bool *ret_memory)
{
    json_t *body = http_util_body_json(c->req), *t;
    bool memory = true, auto_pause = false;
    int r = 0;

    if (!body) {
        return -EINVAL;
    }
    json_t *mem = json_object_get(body, "memory");
    t = json_object_get(body, "timeout");
    if (!routes_check_fields(c->req, body, "the request", known) ||
        !get_bool(c->req, body, "autoPause", &auto_pause)) {
        r = -EINVAL;
    } else if (mem && !json_is_null(mem) && !json_is_boolean(mem)) {
        http_util_reply_error(c->req, 400, "'memory' must be a boolean");
        r = -EINVAL;
    } else if (t && !json_is_null(t) &&
               (!json_is_integer(t) || json_integer_value(t) < 0 ||
                json_integer_value(t) > c->m->max_timeout_s)) {
        http_util_reply_error(c->req, 400, "'timeout' must be between 0 and %lld seconds",
                              (long long)c->m->max_timeout_s);
        r = -EINVAL;
    } else {
        memory = !mem || json_is_null(mem) || json_is_true(mem);
        if (t && !json_is_null(t)) {
            *timeout = json_integer_value(t);
        }
        *ret_memory = memory;
        if (auto_pause) {
            reply_not_implemented(c->req, "pausing at timeout (autoPause)");
            r = -EOPNOTSUPP;
        }
    }
    json_decref(body);
    return r;
}

/*
 * connect: a sandbox with an operation under way (being paused at its timeout, being
 * resumed by another caller) is waited for first, then looked at again, so connect never
 * answers 200 for a sandbox that is about to be suspended, nor 409 for one that is about
 * to run (E2B#875). At most CONNECT_WAITS such waits.
 */
#define CONNECT_WAITS 3

struct connect_wait {
    char id[SANDBOX_ID_LEN + 1];
    int64_t timeout_s;
    bool memory;
    int waits;
};

static void connect_run(struct manager *m, struct evhttp_request *req, const char *id,
                        int64_t timeout, bool memory, int waits);

static void connect_waited(struct manager *m, struct evhttp_request *req,
                           const struct store_operation *op, void *userdata)
{
    struct connect_wait *w = userdata;

    if (!op) {
        controller_reply_unfinished(m, req, "the sandbox did not settle in time");
    } else {
        connect_run(m, req, w->id, w->timeout_s, w->memory, w->waits);
    }
    free(w);
}

static void connect_run(struct manager *m, struct evhttp_request *req, const char *id,
                        int64_t timeout, bool memory, int waits)
{
    struct store_sandbox sb = { 0 };
    struct store_operation busy = { 0 };
    int r = lifecycle_get_live(m, id, &sb);

    if (r < 0) {
        reply_errno(req, r, "connect to", id);
        return;
    }
    if (waits < CONNECT_WAITS && store_operation_get_unfinished(m->store, id, &busy) >= 0) {
        struct connect_wait *w = calloc(1, sizeof(*w));
        if (w) {
            snprintf(w->id, sizeof(w->id), "%s", id);
            w->timeout_s = timeout;
            w->memory = memory;
            w->waits = waits + 1;
            controller_wait(m, busy.id, req, CREATE_WAIT, connect_waited, w);
        } else {
            http_util_reply_error(req, 500, "out of memory");
        }
        store_operation_release(&busy);
        store_sandbox_release(&sb);
        return;
    }
    if (is_paused_state(sb.state)) {
        enum operation_kind kind = _OPERATION_KIND_INVALID;
        r = wake_kind(sb.state, memory, &kind);
        store_sandbox_release(&sb);
        if (r < 0) {
            reply_no_reboot(req, id);
        } else {
            request_and_wait(m, req, id, kind, "resume", 201, timeout);
        }
        return;
    }
    /* Running: memory only says how a paused one comes back; there is nothing to reboot. */
    store_sandbox_release(&sb);
    /* Running: connect only ever extends the time to live (§3.4). */
    r = lifecycle_set_timeout(m, id, timeout, true);
    if (r >= 0) {
        r = lifecycle_get_live(m, id, &sb);
    }
    if (r < 0) {
        reply_errno(req, r, "connect to", id);
        return;
    }
    http_util_reply_json(req, 200, sandbox_to_e2b(&sb, m->domain));
    store_sandbox_release(&sb);
}

void e2b_sandbox_connect(struct request_ctx *c)
{
    int64_t timeout = c->m->default_timeout_s;
    bool memory = true;

    if (resume_body(c, "timeout memory", &timeout, &memory) < 0) {
        return;
    }
    connect_run(c->m, c->req, c->id, timeout, memory, 0);
}

/* The deprecated resume route: 201 when it resumed, 409 when it already runs. */
void e2b_sandbox_resume(struct request_ctx *c)
{
    struct store_sandbox sb = { 0 };
    int64_t timeout = c->m->default_timeout_s;
    enum operation_kind kind = _OPERATION_KIND_INVALID;
    bool memory = true;
    int r;

    if (resume_body(c, "timeout autoPause memory", &timeout, &memory) < 0) {
        return;
    }
    r = lifecycle_get_live(c->m, c->id, &sb);
    if (r < 0) {
        reply_errno(c->req, r, "resume", c->id);
        return;
    }
    bool paused = is_paused_state(sb.state);
    r = wake_kind(sb.state, memory, &kind);
    store_sandbox_release(&sb);
    if (!paused) {
        http_util_reply_error(c->req, 409, "sandbox '%s' is already running", c->id);
        return;
    }
    if (r < 0) {
        reply_no_reboot(c->req, c->id);
        return;
    }
    e2b_request_and_wait(c, kind, "resume", 201, timeout);
}

/* Sandbox.pause() / betaPause(): 204 once suspended; a second pause is 409 (the SDK's
 * false). */
void e2b_sandbox_pause(struct request_ctx *c)
{
    json_t *body = http_util_body_json(c->req);
    bool memory = true;

    if (!body) {
        return;
    }
    json_t *mem = json_object_get(body, "memory");
    bool ok = routes_check_fields(c->req, body, "the request", "memory");
    if (ok && mem && !json_is_null(mem) && !json_is_boolean(mem)) {
        http_util_reply_error(c->req, 400, "'memory' must be a boolean");
        ok = false;
    }
    memory = !mem || json_is_null(mem) || json_is_true(mem);
    json_decref(body);
    if (!ok) {
        return;
    }
    /* A sandbox paused through the native API is paused already: 409 as well. memory false:
     * a disk-only suspend (the guest syncs first; the resume boots from the disk). */
    e2b_request_and_wait(c, memory ? OPERATION_KIND_SUSPEND : OPERATION_KIND_SUSPEND_DISK, "pause",
                         204, 0);
}

void e2b_sandbox_metrics(struct request_ctx *c)
{
    struct store_sandbox sb = { 0 };
    int r = lifecycle_get_live(c->m, c->id, &sb);
    if (r < 0) {
        reply_errno(c->req, r, "get metrics of", c->id);
        return;
    }
    store_sandbox_release(&sb);
    /* FIXME(#4): per-sandbox cgroup metrics come with the jail; an empty series is valid. */
    http_util_reply_json(c->req, 200, json_array());
}

void e2b_sandbox_logs(struct request_ctx *c)
{
    struct store_sandbox sb = { 0 };
    int r = lifecycle_get_live(c->m, c->id, &sb);
    if (r < 0) {
        reply_errno(c->req, r, "get logs of", c->id);
        return;
    }
    store_sandbox_release(&sb);
    http_util_reply_json(c->req, 200, json_pack("{s:[], s:[]}", "logs", "logEntries"));
}

void e2b_not_implemented(struct request_ctx *c)
{
    /* A sandbox that does not exist is a 404 first, as on every sandbox route. */
    if (c->id) {
        struct store_sandbox sb = { 0 };
        int r = lifecycle_get_live(c->m, c->id, &sb);
        if (r < 0) {
            reply_errno(c->req, r, "find", c->id);
            return;
        }
        store_sandbox_release(&sb);
    }
    reply_not_implemented(c->req, c->feature ? c->feature : http_util_path(c->req));
}

/*
 * metadata arrives triple-encoded (§3.3): the query value (decoded once by
 * routes_query) is a form string "k=v&k2=v2" whose keys and values are
 * themselves URL-encoded. Builds "key=value" filter pairs.
 */
static int parse_metadata_filter(const char *q, char ***ret)
{
    struct evkeyvalq pairs;
    struct evkeyval *kv;
    size_t n = 0;
    char **v;

    if (evhttp_parse_query_str(q, &pairs) < 0) {
        return -EINVAL;
    }
    TAILQ_FOREACH (kv, &pairs, next) {
        n++;
    }
    v = calloc(n + 1, sizeof(*v));
    if (!v) {
        evhttp_clear_headers(&pairs);
        return -ENOMEM;
    }
    n = 0;
    TAILQ_FOREACH (kv, &pairs, next) {
        char *k = evhttp_uridecode(kv->key, 0, NULL), *val = evhttp_uridecode(kv->value, 0, NULL);
        if (k && val && asprintf(&v[n], "%s=%s", k, val) >= 0) {
            n++;
        }
        free(k);
        free(val);
    }
    evhttp_clear_headers(&pairs);
    *ret = v;
    return 0;
}

static void free_strv(char **v)
{
    for (char **p = v; p && *p; p++) {
        free(*p);
    }
    free(v);
}

/* Parses an RFC 3339 time filter; replies 400 and returns -EINVAL when it is not one. */
static int list_time_filter(struct evhttp_request *req, const char *name, const char *value,
                            int64_t *ret)
{
    if (sandbox_parse_time(value, ret) < 0) {
        http_util_reply_error(req, 400,
                              "'%s' must be an RFC 3339 time, e.g. "
                              "2026-01-02T03:04:05Z, not '%s'",
                              name, value);
        return -EINVAL;
    }
    return 0;
}

/*
 * Shared by both list generations: newest first (E2B's default), rows being killed left
 * out in the store query itself so every page is full and the cursor stays exact. v2 also
 * paginates and filters by state, start time and template, and honours `order`.
 */
static void list_sandboxes(struct request_ctx *c, bool v2)
{
    static const char *const running[] = { SANDBOX_STATE_RUNNING, NULL };
    /* What E2B calls paused (sandbox_e2b_state()). */
    static const char *const paused[] = { "pausing",   "paused",    "resuming", "suspending",
                                          "suspended", "restoring", NULL };
    static const char *const both[] = { SANDBOX_STATE_RUNNING, "pausing",   "paused",    "resuming",
                                        "suspending",          "suspended", "restoring", NULL };
    char *metadata = NULL, *state = NULL, *limit_s = NULL, *next = NULL, *order = NULL;
    char *after_s = NULL, *before_s = NULL, *template_id = NULL;
    char **pairs = NULL;
    struct store_sandbox *list = NULL;
    size_t n = 0;
    uint32_t limit = E2B_LIST_MAX;
    int64_t after = 0, before = 0;
    /* v2 without a state filter lists running and paused (e2b-compat.md §3.5); v1 running. */
    bool want_running = true, want_paused = v2;

    /* routes.c refused unknown and repeated parameters already. */
    metadata = routes_query(c->req, "metadata");
    if (v2) {
        state = routes_query(c->req, "state");
        limit_s = routes_query(c->req, "limit");
        next = routes_query(c->req, "nextToken");
        order = routes_query(c->req, "order");
        after_s = routes_query(c->req, "startedAfter");
        before_s = routes_query(c->req, "startedBefore");
        template_id = routes_query(c->req, "template");
    }
    if (metadata && parse_metadata_filter(metadata, &pairs) < 0) {
        http_util_reply_error(c->req, 400, "invalid 'metadata' filter");
        goto out;
    }
    if (limit_s && (parse_u32(limit_s, &limit) < 0 || limit == 0 || limit > E2B_LIST_MAX)) {
        http_util_reply_error(c->req, 400, "'limit' must be between 1 and %d", E2B_LIST_MAX);
        goto out;
    }
    if (order && strcmp(order, "asc") != 0 && strcmp(order, "desc") != 0) {
        http_util_reply_error(c->req, 400, "'order' must be 'asc' or 'desc', not '%s'", order);
        goto out;
    }
    if ((after_s && list_time_filter(c->req, "startedAfter", after_s, &after) < 0) ||
        (before_s && list_time_filter(c->req, "startedBefore", before_s, &before) < 0)) {
        goto out;
    }
    if (template_id && !template_name_is_valid(template_id)) {
        http_util_reply_error(c->req, 400, "invalid 'template' '%s'", template_id);
        goto out;
    }
    if (state) {
        want_running = want_paused = false;
        for (char *s = state, *tok; (tok = strsep(&s, ","));) {
            if (strcmp(tok, "running") == 0) {
                want_running = true;
            } else if (strcmp(tok, "paused") == 0) {
                want_paused = true;
            } else {
                http_util_reply_error(c->req, 400, "invalid state '%s'", tok);
                goto out;
            }
        }
    }
    if (next && !sandbox_id_is_valid(next)) {
        http_util_reply_error(c->req, 400, "invalid 'nextToken'");
        goto out;
    }
    struct store_sandbox_filter f = {
        .states = want_running && want_paused ? both
                  : want_paused               ? paused
                                              : running,
        .metadata = (const char *const *)pairs,
        .template_id = template_id,
        .started_after = after_s ? &after : NULL,
        .started_before = before_s ? &before : NULL,
        .hide_dying = true,
        .descending = !order || strcmp(order, "desc") == 0,
        .after_id = next,
        .limit = v2 ? limit + 1 : 0,
    };
    int r = store_sandbox_list(c->m->store, &f, &list, &n);
    if (r == -ENOENT && next) {
        http_util_reply_error(c->req, 400, "'nextToken' names no sandbox");
        goto out;
    }
    if (r < 0) {
        http_util_reply_error(c->req, 500, "cannot list sandboxes: %s", strerror(-r));
        goto out;
    }
    json_t *arr = json_array();
    size_t shown = v2 ? MIN(n, (size_t)limit) : n;
    for (size_t i = 0; i < shown; i++) {
        json_array_append_new(arr, sandbox_to_e2b_detail(&list[i], c->m->domain));
    }
    if (v2 && n > limit) {
        evhttp_add_header(evhttp_request_get_output_headers(c->req), "X-Next-Token",
                          list[limit - 1].id);
    }
    http_util_reply_json(c->req, 200, arr);
out:
    store_sandbox_list_free(list, n);
    free_strv(pairs);
    free(metadata);
    free(state);
    free(limit_s);
    free(next);
    free(order);
    free(after_s);
    free(before_s);
    free(template_id);
}

void e2b_sandbox_list_v1(struct request_ctx *c)
{
    list_sandboxes(c, false);
}

void e2b_sandbox_list_v2(struct request_ctx *c)
{
    list_sandboxes(c, true);
}
