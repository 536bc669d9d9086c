/*
 * Egress routes of the native API (docs/api/openapi.yaml): the live replace
 * of a sandbox's policy, and its audit log as the store holds it (pulled
 * from the node by egress-audit.c). The E2B replace (e2b-sandboxes.c)
 * shares the wait here.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "api/controller.h"
#include "api/egress.h"
#include "api/lifecycle.h"
#include "api/routes.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "shared/http-util.h"

/* How long a replace waits for the node; the policy stays stored either way. */
#define NETWORK_WAIT (60 * USEC_PER_SEC)
#define EGRESS_LIST_DEFAULT 100
#define EGRESS_LIST_MAX 1000

static void reply_network(struct manager *m, struct evhttp_request *req, const char *id, bool e2b)
{
    struct store_sandbox sb = { 0 };

    if (e2b) {
        evhttp_send_reply(req, 204, "No Content", NULL);
        return;
    }
    if (store_sandbox_get(m->store, id, &sb) < 0) {
        http_util_reply_error(req, 404, "sandbox '%s' not found", id);
        return;
    }
    http_util_reply_json(req, 200, json_pack("{s:o}", "network", egress_native(sb.network_json)));
    store_sandbox_release(&sb);
}

struct network_wait {
    bool e2b;
    char id[SANDBOX_ID_LEN + 1];
};

static void network_applied(struct manager *m, struct evhttp_request *req,
                            const struct store_operation *op, void *userdata)
{
    struct network_wait *w = userdata;

    if (!op) {
        http_util_reply_error(req, 504,
                              "the node did not apply the policy in time; it is stored and "
                              "goes to the node when its operation runs");
    } else if (strcmp(op->state, "succeeded") == 0) {
        reply_network(m, req, w->id, w->e2b);
    } else {
        int status = controller_failed_status(op);
        /* The sandbox is live as far as the store knows: whatever else the node said
         * (even a 404, a node without the route) is the node's failure, not "not found". */
        http_util_reply_error(req, status == 400 ? 400 : 502,
                              "the node did not apply the policy: %s",
                              op->error ? op->error : "failed");
    }
    free(w);
}

void http_network_wait(struct request_ctx *c, const char *op, bool e2b)
{
    struct network_wait *w;

    if (!op[0]) {
        /* Queued behind the create, which hands the node the stored policy itself. */
        reply_network(c->m, c->req, c->id, e2b);
        return;
    }
    w = calloc(1, sizeof(*w));
    if (!w) {
        http_util_reply_error(c->req, 500, "out of memory");
        return;
    }
    w->e2b = e2b;
    snprintf(w->id, sizeof(w->id), "%s", c->id);
    controller_wait(c->m, op, c->req, NETWORK_WAIT, network_applied, w);
}

void http_sandbox_network(struct request_ctx *c)
{
    struct policy_error perr = { { 0 } };
    enum sandbox_state state = _SANDBOX_STATE_INVALID;
    char *network = NULL, op[33];
    json_t *body = http_util_body_json(c->req);
    int r;

    if (!body) {
        return;
    }
    r = egress_from_native(body, &network, &perr);
    json_decref(body);
    if (r >= 0) {
        /* Every secret a rule names must exist (and a literal be this sandbox's). */
        r = egress_check_secrets(c->m, c->id, network, NULL, &perr);
    }
    if (r < 0) {
        http_util_reply_error(c->req, routes_status_from_errno(r), "invalid network policy: %s",
                              r == -ENOMEM ? strerror(ENOMEM) : perr.message);
        return;
    }
    r = lifecycle_set_network(c->m, c->id, network, op, &state);
    free(network);
    if (r < 0) {
        lifecycle_reply_request_error(c->req, r, c->id, OPERATION_KIND_NETWORK, state);
        return;
    }
    http_network_wait(c, op, false);
}

static bool one_of(const char *v, const char *const *allowed)
{
    for (; *allowed; allowed++) {
        if (strcmp(v, *allowed) == 0) {
            return true;
        }
    }
    return false;
}

/* A record as the API shows it: the node's fields plus the store's id, the paging cursor. */
static json_t *record_to_json(const struct store_egress_record *e)
{
    json_error_t err;
    json_t *j = json_loads(e->record_json, 0, &err);

    if (!json_is_object(j)) {
        json_decref(j);
        j = json_object();
    }
    json_object_set_new(j, "id", json_integer(e->id));
    /* The secret names an injection used (the store's column, as the record had them). */
    if (e->secret && !json_object_get(j, "secret")) {
        json_object_set_new(j, "secret", json_string(e->secret));
    }
    return j;
}

void http_sandbox_egress(struct request_ctx *c)
{
    static const char *const verdicts[] = { "allow", "deny", NULL };
    static const char *const protos[] = { "dns", "http", "tls", "tcp", NULL };
    char *verdict = routes_query(c->req, "verdict"), *proto = routes_query(c->req, "proto");
    char *after_s = routes_query(c->req, "after"), *limit_s = routes_query(c->req, "limit");
    struct store_egress_record *list = NULL;
    struct store_sandbox sb = { 0 };
    uint64_t after = 0;
    uint32_t limit = EGRESS_LIST_DEFAULT;
    size_t n = 0;
    int r;

    /* routes.c refused unknown and repeated parameters already. */
    if (verdict && !one_of(verdict, verdicts)) {
        http_util_reply_error(c->req, 400, "'verdict' must be allow or deny, not '%.32s'", verdict);
        goto out;
    }
    if (proto && !one_of(proto, protos)) {
        http_util_reply_error(c->req, 400, "'proto' must be dns, http, tls or tcp, not '%.32s'",
                              proto);
        goto out;
    }
    if (after_s && (parse_u64(after_s, &after) < 0 || after > INT64_MAX)) {
        http_util_reply_error(c->req, 400, "'after' must be a cursor ('next' of a page)");
        goto out;
    }
    if (limit_s && (parse_u32(limit_s, &limit) < 0 || limit == 0 || limit > EGRESS_LIST_MAX)) {
        http_util_reply_error(c->req, 400, "'limit' must be between 1 and %d", EGRESS_LIST_MAX);
        goto out;
    }
    /* Killed sandboxes too: their log stays until retention drops it. */
    r = store_sandbox_get(c->m->store, c->id, &sb);
    if (r < 0) {
        http_util_reply_error(c->req, routes_status_from_errno(r), "sandbox '%s' %s", c->id,
                              r == -ENOENT ? "not found" : strerror(-r));
        goto out;
    }
    struct store_egress_filter f = {
        .sandbox_id = c->id,
        .verdict = verdict,
        .proto = proto,
        .after_id = (int64_t)after,
        .limit = (size_t)limit + 1,
    };
    r = store_egress_audit_list(c->m->store, &f, &list, &n);
    if (r < 0) {
        http_util_reply_error(c->req, 500, "cannot read the egress log: %s", strerror(-r));
        goto out;
    }
    json_t *records = json_array();
    for (size_t i = 0; i < n && i < limit; i++) {
        json_array_append_new(records, record_to_json(&list[i]));
    }
    char next[24];
    if (n > limit) {
        snprintf(next, sizeof(next), "%" PRId64, list[limit - 1].id);
    }
    http_util_reply_json(
        c->req, 200, json_pack("{s:o, s:s?}", "records", records, "next", n > limit ? next : NULL));
out:
    store_egress_audit_list_free(list, n);
    store_sandbox_release(&sb);
    free(verdict);
    free(proto);
    free(after_s);
    free(limit_s);
}
