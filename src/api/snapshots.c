/* See snapshots.h. */
#include "api/snapshots.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/controller.h"
#include "api/node-client.h"
#include "api/sandbox.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "basic/time-util.h"
#include "shared/event-util.h"
#include "shared/http-util.h"
#include "shared/sandbox-id.h"

#define SNAPSHOT_WAIT (600 * USEC_PER_SEC)
#define SNAPSHOT_NAME_MAX 64
#define LIST_DEFAULT 100
#define LIST_MAX 1000

/* [A-Za-z0-9._-]{1,64}, not starting with '.' or '-': safe in paths, queries and logs. */
static bool name_is_valid(const char *s)
{
    size_t n = s ? strlen(s) : 0;

    if (n == 0 || n > SNAPSHOT_NAME_MAX || s[0] == '.' || s[0] == '-') {
        return false;
    }
    for (; *s; s++) {
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '.' || *s == '_' || *s == '-')) {
            return false;
        }
    }
    return true;
}

static json_t *names_json(const struct store_snapshot *s)
{
    json_t *a = json_array();
    if (a && s->name) {
        json_array_append_new(a, json_string(s->name));
    }
    return a;
}

static json_t *snapshot_to_json(const struct store_snapshot *s)
{
    char created[40];

    sandbox_format_time(s->created_at, created);
    return json_pack("{s:s, s:s, s:s, s:s?, s:s, s:s, s:s, s:I, s:I, s:s, s:s, s:I}", "id", s->id,
                     "sandbox_id", s->sandbox_id, "kind", s->kind, "name", s->name, "state",
                     s->state, "template", s->template_id, "node_id", s->node_id, "vcpus",
                     (json_int_t)s->vcpus, "memory_mb", (json_int_t)s->memory_mb, "created_at",
                     created, "source", s->source ? s->source : STORE_SNAPSHOT_SOURCE_USER, "bytes",
                     (json_int_t)s->bytes);
}

static json_t *snapshot_to_e2b(const struct store_snapshot *s)
{
    return json_pack("{s:s, s:o}", "snapshotID", s->id, "names", names_json(s));
}

int snapshots_resolve_create(struct manager *m, const char *template_id,
                             struct lifecycle_create_params *p)
{
    struct store_snapshot snap = { 0 };
    int r;

    if (!template_id || !sandbox_id_is_valid(template_id)) {
        return 0; /* not snapshot-id shaped: a template name */
    }
    r = store_snapshot_get(m->store, template_id, &snap);
    if (r == -ENOENT) {
        return 0;
    }
    if (r < 0) {
        return r;
    }
    if (strcmp(snap.state, STORE_SNAPSHOT_COMPLETE) != 0 || strcmp(snap.kind, "full") != 0) {
        r = strcmp(snap.kind, "full") != 0 ? -EMEDIUMTYPE : -EBUSY;
    } else {
        /* Its memory was that size: a restore cannot give it another. */
        p->vcpus = snap.vcpus;
        p->memory_mb = snap.memory_mb;
        r = 1;
    }
    store_snapshot_release(&snap);
    return r;
}

/* ---- create ---- */

struct create_wait {
    bool e2b;
    char id[SANDBOX_ID_LEN + 1];
};

static void create_waited(struct manager *m, struct evhttp_request *req,
                          const struct store_operation *op, void *userdata)
{
    struct create_wait *w = userdata;
    struct store_snapshot snap = { 0 };

    if (!op) {
        controller_reply_unfinished(m, req, "the snapshot did not finish in time");
        goto out;
    }
    if (strcmp(op->state, "succeeded") != 0) {
        int status = controller_failed_status(op);
        http_util_reply_error(req, status == 404 || status == 409 ? status : 500,
                              "cannot snapshot sandbox: %s", op->error ? op->error : "failed");
        goto out;
    }
    if (store_snapshot_get(m->store, w->id, &snap) < 0) {
        http_util_reply_error(req, 404, "snapshot '%s' was deleted meanwhile", w->id);
        goto out;
    }
    http_util_reply_json(req, 201, w->e2b ? snapshot_to_e2b(&snap) : snapshot_to_json(&snap));
    store_snapshot_release(&snap);
out:
    free(w);
}

static bool want_wait(struct evhttp_request *req)
{
    char *w = routes_query(req, "wait");
    bool yes = w && (strcmp(w, "true") == 0 || strcmp(w, "1") == 0);
    free(w);
    return yes;
}

/* Validates the body, records the operation; e2b waits for it, native waits only when asked. */
static void snapshot_create(struct request_ctx *c, bool e2b)
{
    json_t *body = http_util_body_json(c->req), *v;
    enum sandbox_state state = _SANDBOX_STATE_INVALID;
    struct create_wait *w = NULL;
    const char *kind = "full", *name = NULL;
    char op[33];
    int64_t now = (int64_t)now_realtime();
    int r;

    if (!body ||
        !routes_check_fields(c->req, body, "the snapshot request", e2b ? "name" : "name kind")) {
        goto out;
    }
    v = json_object_get(body, "name");
    if (v && !json_is_null(v)) {
        name = json_string_value(v);
        if (!name_is_valid(name)) {
            http_util_reply_error(c->req, 400,
                                  "'name' must be 1 to %d characters [A-Za-z0-9._-], not "
                                  "starting with '.' or '-'",
                                  SNAPSHOT_NAME_MAX);
            goto out;
        }
    }
    v = json_object_get(body, "kind");
    if (v && !json_is_null(v)) {
        kind = json_string_value(v);
        if (!kind || (strcmp(kind, "full") && strcmp(kind, "disk"))) {
            http_util_reply_error(c->req, 400, "'kind' must be \"full\" or \"disk\"");
            goto out;
        }
    }
    w = calloc(1, sizeof(*w));
    if (!w || sandbox_id_new(w->id) < 0) {
        http_util_reply_error(c->req, 500, "cannot make a snapshot id");
        goto out;
    }
    w->e2b = e2b;
    struct store_snapshot snap = { .id = w->id,
                                   .kind = (char *)kind,
                                   .name = (char *)name,
                                   .state = STORE_SNAPSHOT_PENDING,
                                   .source = STORE_SNAPSHOT_SOURCE_USER,
                                   .created_at = now,
                                   .updated_at = now };
    r = controller_request_snapshot(c->m, c->id, &snap, op, &state);
    if (r == -EEXIST) {
        http_util_reply_error(c->req, 409, "a snapshot named '%s' exists", name ? name : "");
        goto out;
    }
    if (r < 0) {
        lifecycle_reply_request_error(c->req, r, c->id, OPERATION_KIND_SNAPSHOT, state);
        goto out;
    }
    if (e2b || want_wait(c->req)) {
        controller_wait(c->m, op, c->req, SNAPSHOT_WAIT, create_waited, TAKE_PTR(w));
    } else {
        struct store_snapshot row = { 0 };
        json_t *res = json_pack("{s:s}", "operation_id", op);
        if (store_snapshot_get(c->m->store, w->id, &row) >= 0) {
            json_object_set_new(res, "snapshot", snapshot_to_json(&row));
            store_snapshot_release(&row);
        }
        http_util_reply_json(c->req, 202, res);
    }
out:
    free(w);
    json_decref(body);
}

void http_snapshot_create(struct request_ctx *c)
{
    snapshot_create(c, false);
}

void e2b_snapshot_create(struct request_ctx *c)
{
    snapshot_create(c, true);
}

/* ---- list ---- */

static void snapshot_list(struct request_ctx *c, bool e2b)
{
    char *sandbox = routes_query(c->req, e2b ? "sandboxID" : "sandbox");
    char *name = routes_query(c->req, "name"), *limit_s = routes_query(c->req, "limit");
    char *after = routes_query(c->req, e2b ? "nextToken" : "after");
    struct store_snapshot *list = NULL;
    uint32_t limit = LIST_DEFAULT;
    size_t n = 0;
    int r;

    if ((limit_s && (parse_u32(limit_s, &limit) < 0 || limit == 0 || limit > LIST_MAX)) ||
        (sandbox && !sandbox_id_is_valid(sandbox)) || (name && !name_is_valid(name)) ||
        (after && !sandbox_id_is_valid(after))) {
        http_util_reply_error(c->req, 400,
                              "invalid query: limit 1..%d, %s a sandbox id, name a snapshot "
                              "name, %s a snapshot id",
                              LIST_MAX, e2b ? "sandboxID" : "sandbox", e2b ? "nextToken" : "after");
        goto out;
    }
    struct store_snapshot_filter f = { .owner = SANDBOX_CLIENT_ID,
                                       .sandbox_id = sandbox,
                                       .name = name,
                                       .complete_only = e2b,
                                       .after_id = after,
                                       .limit = (size_t)limit + 1 };
    r = store_snapshot_list(c->m->store, &f, &list, &n);
    if (r == -ENOENT) {
        http_util_reply_error(c->req, 400, "'%s' names no snapshot", e2b ? "nextToken" : "after");
        goto out;
    }
    if (r < 0) {
        http_util_reply_error(c->req, 500, "cannot list snapshots: %s", strerror(-r));
        goto out;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < n && i < limit; i++) {
        json_array_append_new(arr, e2b ? snapshot_to_e2b(&list[i]) : snapshot_to_json(&list[i]));
    }
    const char *next = n > limit ? list[limit - 1].id : NULL;
    if (e2b) {
        if (next) {
            evhttp_add_header(evhttp_request_get_output_headers(c->req), "X-Next-Token", next);
        }
        http_util_reply_json(c->req, 200, arr);
    } else {
        http_util_reply_json(c->req, 200, json_pack("{s:o, s:s?}", "snapshots", arr, "next", next));
    }
out:
    store_snapshot_list_free(list, n);
    free(sandbox);
    free(name);
    free(limit_s);
    free(after);
}

void http_snapshot_list(struct request_ctx *c)
{
    snapshot_list(c, false);
}

void e2b_snapshot_list(struct request_ctx *c)
{
    snapshot_list(c, true);
}

/* A snapshot of this deployment's owner, or -ENOENT. */
static int get_mine(struct manager *m, const char *id, struct store_snapshot *ret)
{
    int r;

    if (!sandbox_id_is_valid(id)) {
        return -ENOENT;
    }
    r = store_snapshot_get(m->store, id, ret);
    if (r >= 0 && strcmp(ret->owner, SANDBOX_CLIENT_ID) != 0) {
        store_snapshot_release(ret);
        r = -ENOENT;
    }
    return r;
}

void http_snapshot_get(struct request_ctx *c)
{
    struct store_snapshot snap = { 0 };

    if (get_mine(c->m, c->id, &snap) < 0) {
        http_util_reply_error(c->req, 404, "snapshot '%s' not found", c->id);
        return;
    }
    http_util_reply_json(c->req, 200, snapshot_to_json(&snap));
    store_snapshot_release(&snap);
}

/* ---- delete ---- */

/*
 * The row says "deleting" first (no create restores it from then on), the node removes the
 * files (a worker: node calls block), then the row goes. The node's 404 (already gone) is a
 * success: a DELETE repeated after a failure finishes the job.
 */
struct delete_job {
    struct manager *m;
    char *node_socket;
    char id[SANDBOX_ID_LEN + 1];
    int r, status;
    snapshots_removed_fn done;
    void *userdata;
};

static void delete_work(void *p)
{
    struct delete_job *j = p;
    char path[64];
    json_t *res = NULL;

    snprintf(path, sizeof(path), "/v1/snapshots/%s", j->id);
    j->r = node_client_call(j->node_socket, "DELETE", path, NULL, NODE_CLIENT_TIMEOUT, &j->status,
                            &res);
    json_decref(res);
}

static void delete_done(void *p)
{
    struct delete_job *j = p;
    int r;

    if (j->r < 0 || (j->status >= 300 && j->status != 404)) {
        r = -EREMOTEIO;
    } else {
        r = store_snapshot_delete(j->m->store, j->id);
        r = r == -ENOENT ? 0 : r;
    }
    if (j->done) {
        j->done(j->m, j->id, r, j->userdata);
    }
    free(j->node_socket);
    free(j);
}

int snapshots_remove(struct manager *m, const char *id, snapshots_removed_fn done, void *userdata)
{
    struct delete_job *j;
    int r =
        store_snapshot_set_state(m->store, id, STORE_SNAPSHOT_DELETING, (int64_t)now_realtime());

    if (r < 0) {
        return r;
    }
    j = calloc(1, sizeof(*j));
    if (!j) {
        return -ENOMEM;
    }
    *j = (struct delete_job){
        .m = m, .node_socket = strdup(m->node_socket), .done = done, .userdata = userdata
    };
    snprintf(j->id, sizeof(j->id), "%s", id);
    r = j->node_socket ? event_util_run_job(m->base, &m->jobs, delete_work, delete_done, j)
                       : -ENOMEM;
    if (r < 0) {
        free(j->node_socket);
        free(j);
    }
    return r;
}

static void delete_replied(struct manager *m, const char *id, int r, void *userdata)
{
    struct evhttp_request *req = userdata;

    (void)m;
    if (r == -EREMOTEIO) {
        http_util_reply_error(req, 502, "the node could not delete snapshot '%s'", id);
    } else if (r < 0) {
        http_util_reply_error(req, 500, "cannot delete snapshot '%s': %s", id, strerror(-r));
    } else {
        evhttp_send_reply(req, 204, "No Content", NULL);
    }
}

static void snapshot_delete(struct request_ctx *c, const char *what)
{
    struct store_snapshot snap = { 0 };
    int r = get_mine(c->m, c->id, &snap);

    if (r < 0) {
        http_util_reply_error(c->req, r == -ENOENT ? 404 : 500, "%s '%s' not found", what, c->id);
        return;
    }
    if (strcmp(snap.state, STORE_SNAPSHOT_PENDING) == 0) {
        http_util_reply_error(c->req, 409, "snapshot '%s' is still being taken", c->id);
    } else if (snapshots_remove(c->m, c->id, delete_replied, c->req) < 0) {
        http_util_reply_error(c->req, 500, "cannot delete snapshot '%s'", c->id);
    }
    store_snapshot_release(&snap);
}

void http_snapshot_delete(struct request_ctx *c)
{
    snapshot_delete(c, "snapshot");
}

/* E2B's snapshots are templates: its deleteSnapshot() is DELETE /templates/{id}. space's
 * templates are not deleted through the E2B API, so any other id is 404 (the SDK: false). */
void e2b_template_delete(struct request_ctx *c)
{
    snapshot_delete(c, "template or snapshot");
}
