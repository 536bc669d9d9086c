/* See branch.h. */
#include "api/branch.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/controller.h"
#include "api/lifecycle.h"
#include "api/sandbox.h"
#include "api/snapshots.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "shared/http-util.h"
#include "shared/sandbox-id.h"

/* The whole request: the snapshot, then every create (a restore each, side by side). */
#define BRANCH_WAIT (600 * USEC_PER_SEC)
#define BRANCH_SWEEP_EVERY (10 * USEC_PER_SEC)
#define BRANCH_SWEEP_GRACE (30 * USEC_PER_SEC)

struct branch_item {
    char id[SANDBOX_ID_LEN + 1];
    char op[33];   /* "" when the create was refused before it was recorded */
    int status;    /* 0: running; else the entry's error code */
    char *message; /* the entry's error message */
};

struct branch {
    struct manager *m;
    struct evhttp_request *req;
    bool e2b;
    unsigned count, next; /* next: the item waited on */
    int64_t timeout_s;
    usec_t deadline;
    bool keep_snapshot; /* a create may still read it */
    char parent[SANDBOX_ID_LEN + 1];
    char snap_id[SANDBOX_ID_LEN + 1];
    char snap_name[sizeof(BRANCH_SNAPSHOT_PREFIX) + SANDBOX_ID_LEN];
    struct store_snapshot snap; /* the complete row, once taken */
    struct store_sandbox sb;    /* the parent as it was asked for */
    struct branch_item items[BRANCH_MAX];
};

static void branch_free(struct branch *b)
{
    if (!b) {
        return;
    }
    for (unsigned i = 0; i < b->count; i++) {
        free(b->items[i].message);
    }
    store_snapshot_release(&b->snap);
    store_sandbox_release(&b->sb);
    free(b);
}

static usec_t remaining(const struct branch *b)
{
    usec_t now = now_monotonic();
    return b->deadline > now ? b->deadline - now : 1;
}

static void item_fail(struct branch_item *it, int status, const char *fmt, ...) _printf_(3, 4);
static void item_fail(struct branch_item *it, int status, const char *fmt, ...)
{
    char *msg = NULL;
    va_list ap;

    it->status = status;
    va_start(ap, fmt);
    if (vasprintf(&msg, fmt, ap) < 0) {
        msg = NULL;
    }
    va_end(ap);
    free(it->message);
    it->message = msg;
}

/* E2B's own code for no capacity is 429 (its SDK: RateLimitError); the native API's 503. */
static int capacity_status(const struct branch *b)
{
    return b->e2b ? 429 : 503;
}

static json_t *item_json(const struct branch *b, const struct branch_item *it)
{
    struct store_sandbox sb = { 0 };
    json_t *j;

    if (it->status == 0 && store_sandbox_get(b->m->store, it->id, &sb) >= 0) {
        j = json_pack("{s:o}", "sandbox",
                      b->e2b ? sandbox_to_e2b(&sb, b->m->domain) : sandbox_to_json(&sb));
        store_sandbox_release(&sb);
        return j;
    }
    return json_pack("{s:{s:i, s:s}}", "error", "code", it->status ? it->status : 500, "message",
                     it->message ? it->message : "the branch vanished after its create");
}

static void reply(struct branch *b)
{
    json_t *arr = json_array();

    for (unsigned i = 0; i < b->count; i++) {
        json_array_append_new(arr, item_json(b, &b->items[i]));
    }
    http_util_reply_json(b->req, 201, b->e2b ? arr : json_pack("{s:o}", "sandboxes", arr));
    branch_free(b);
}

static void snapshot_removed(struct manager *m, const char *id, int r, void *userdata)
{
    (void)m;
    if (r < 0) {
        /* Left "deleting" (or listed): a DELETE of it finishes the job. */
        log_warning("branch: cannot remove its snapshot %s: %s", id, strerror(-r));
    }
    reply(userdata);
}

/* All creates waited on: the snapshot goes unless a create may still read it; then answer. */
static void finish(struct branch *b)
{
    if (b->keep_snapshot || b->m->stopping ||
        snapshots_remove(b->m, b->snap_id, snapshot_removed, b) < 0) {
        if (!b->m->stopping && !b->keep_snapshot) {
            log_warning("branch: cannot start removing its snapshot %s", b->snap_id);
        }
        reply(b);
    }
}

static void wait_next(struct branch *b);

static void create_waited(struct manager *m, struct evhttp_request *req,
                          const struct store_operation *op, void *userdata)
{
    struct branch *b = userdata;
    struct branch_item *it = &b->items[b->next++];

    (void)req;
    if (!op) {
        b->keep_snapshot = true;
        item_fail(it, m->stopping ? 503 : 504, "%s",
                  m->stopping ? "space-api is stopping before the branch started: read the "
                                "sandbox later"
                              : "the branch did not start in time");
    } else if (strcmp(op->state, "succeeded") != 0) {
        int status = lifecycle_create_failed_status(op);
        item_fail(it, status == 503 ? capacity_status(b) : status, "cannot start the branch: %s",
                  op->error ? op->error : "failed");
    } else {
        /* Its template is the parent's, not the snapshot about to go (branch.h). */
        struct store_sandbox upd = { .id = it->id,
                                     .template_id = b->snap.template_id,
                                     .updated_at = (int64_t)now_realtime() };
        (void)store_sandbox_update_fields(m->store, &upd,
                                          STORE_SANDBOX_TEMPLATE_ID | STORE_SANDBOX_UPDATED_AT);
    }
    wait_next(b);
}

static void wait_next(struct branch *b)
{
    while (b->next < b->count && !b->items[b->next].op[0]) {
        b->next++;
    }
    if (b->next == b->count) {
        finish(b);
        return;
    }
    controller_wait(b->m, b->items[b->next].op, b->req, remaining(b), create_waited, b);
}

/* Parses an object-of-strings column back into JSON for lifecycle_create() (NULL: none). */
static json_t *column_json(const char *text)
{
    json_error_t err;
    return text ? json_loads(text, 0, &err) : NULL;
}

static void start_creates(struct branch *b)
{
    json_t *metadata = column_json(b->sb.metadata_json), *env = column_json(b->sb.env_json);
    struct lifecycle_create_params p = {
        .template_id = b->snap_id,
        .vcpus = b->snap.vcpus,
        .memory_mb = b->snap.memory_mb,
        .disk_mb = b->sb.disk_mb,
        .timeout_s = b->timeout_s,
        .metadata = metadata,
        .env = env,
        .private_traffic = b->sb.private_traffic,
        .network_json = b->sb.network_json,
        .auto_pause = b->sb.auto_pause,
        .auto_resume = b->sb.auto_resume,
        .auto_pause_disk = b->sb.auto_pause_disk,
    };

    for (unsigned i = 0; i < b->count; i++) {
        struct branch_item *it = &b->items[i];
        int r = lifecycle_create(b->m, &p, it->id, it->op);
        if (r == -EAGAIN) {
            item_fail(it, capacity_status(b), "at capacity (%u sandboxes)", b->m->max_sandboxes);
        } else if (r < 0) {
            item_fail(it, routes_status_from_errno(r), "cannot create the branch: %s",
                      strerror(-r));
        }
        if (r < 0) {
            it->op[0] = '\0';
        }
    }
    json_decref(metadata);
    json_decref(env);
    wait_next(b);
}

static void snapshot_waited(struct manager *m, struct evhttp_request *req,
                            const struct store_operation *op, void *userdata)
{
    struct branch *b = userdata;

    if (!op) {
        controller_reply_unfinished(m, req, "the snapshot to branch from did not finish in time");
        branch_free(b);
        return;
    }
    if (strcmp(op->state, "succeeded") != 0) {
        int status = controller_failed_status(op);
        http_util_reply_error(req, status == 404 || status == 409 ? status : 500,
                              "cannot snapshot sandbox '%s' to branch it: %s", b->parent,
                              op->error ? op->error : "failed");
        branch_free(b);
        return;
    }
    if (store_snapshot_get(m->store, b->snap_id, &b->snap) < 0) {
        http_util_reply_error(req, 409, "the snapshot to branch from was deleted meanwhile");
        branch_free(b);
        return;
    }
    start_creates(b);
}

/* {count?, <timeout_field>?}: count 1..BRANCH_MAX (default 1). */
static int parse_body(struct request_ctx *c, struct branch *b, const char *timeout_field,
                      int64_t timeout_min)
{
    json_t *body = http_util_body_json(c->req), *v;
    char known[32];
    int r = -EINVAL;

    snprintf(known, sizeof(known), "count %s", timeout_field);
    if (!body || !routes_check_fields(c->req, body, "the branch request", known)) {
        goto out;
    }
    v = json_object_get(body, "count");
    b->count = 1;
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > BRANCH_MAX) {
            http_util_reply_error(c->req, 400, "'count' must be an integer between 1 and %d",
                                  BRANCH_MAX);
            goto out;
        }
        b->count = (unsigned)json_integer_value(v);
    }
    v = json_object_get(body, timeout_field);
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < timeout_min ||
            json_integer_value(v) > c->m->max_timeout_s) {
            http_util_reply_error(c->req, 400, "'%s' must be between %lld and %lld seconds",
                                  timeout_field, (long long)timeout_min,
                                  (long long)c->m->max_timeout_s);
            goto out;
        }
        b->timeout_s = json_integer_value(v);
    }
    r = 0;
out:
    json_decref(body);
    return r;
}

static void branch_start(struct request_ctx *c, bool e2b)
{
    struct branch *b = calloc(1, sizeof(*b));
    enum sandbox_state state = _SANDBOX_STATE_INVALID;
    char op[33];
    int64_t now = (int64_t)now_realtime();
    int r;

    if (!b) {
        http_util_reply_error(c->req, 500, "cannot branch: %s", strerror(ENOMEM));
        return;
    }
    *b = (struct branch){ .m = c->m,
                          .req = c->req,
                          .e2b = e2b,
                          .timeout_s = e2b ? c->m->default_timeout_s : 0,
                          .deadline = now_monotonic() + BRANCH_WAIT };
    snprintf(b->parent, sizeof(b->parent), "%s", c->id);
    /* An unknown sandbox is a 404 first, as on every sandbox route. */
    r = lifecycle_get_live(c->m, c->id, &b->sb);
    if (r < 0) {
        lifecycle_reply_request_error(c->req, r, c->id, OPERATION_KIND_FORK, state);
        goto fail;
    }
    /* The native timeout_s may be 0 (no end time), as on create; E2B's is 1.. seconds. */
    if (parse_body(c, b, e2b ? "timeout" : "timeout_s", e2b ? 1 : 0) < 0) {
        goto fail;
    }
    if (sandbox_id_new(b->snap_id) < 0) {
        http_util_reply_error(c->req, 500, "cannot make a snapshot id");
        goto fail;
    }
    /* Its reserved name marks it as this module's (branch.h); unique, as its id is. */
    snprintf(b->snap_name, sizeof(b->snap_name), "%s%s", BRANCH_SNAPSHOT_PREFIX, b->snap_id);
    struct store_snapshot snap = { .id = b->snap_id,
                                   .kind = (char *)"full",
                                   .name = b->snap_name,
                                   .state = STORE_SNAPSHOT_PENDING,
                                   .created_at = now,
                                   .updated_at = now };
    r = controller_request_snapshot(c->m, c->id, &snap, op, &state);
    if (r < 0) {
        lifecycle_reply_request_error(c->req, r, c->id, OPERATION_KIND_FORK, state);
        goto fail;
    }
    controller_wait(c->m, op, c->req, remaining(b), snapshot_waited, b);
    return;
fail:
    branch_free(b);
}

static void swept(struct manager *m, const char *id, int r, void *userdata)
{
    (void)m;
    (void)userdata;
    if (r < 0) {
        log_warning("branch: cannot sweep the leftover snapshot %s: %s", id, strerror(-r));
    } else {
        log_info("branch: swept the leftover snapshot %s", id);
    }
}

/* Whether a sandbox restoring snapshot id is still being created (its create reads it). */
static bool still_restored(struct manager *m, const char *id)
{
    static const char *const creating[] = { SANDBOX_STATE_CREATING, NULL };
    struct store_sandbox_filter f = { .states = creating, .template_id = id, .limit = 1 };
    struct store_sandbox *list = NULL;
    size_t n = 0;

    if (store_sandbox_list(m->store, &f, &list, &n) < 0) {
        return true; /* unsure: kept for the next sweep */
    }
    store_sandbox_list_free(list, n);
    return n > 0;
}

void branch_tick(struct manager *m)
{
    struct store_snapshot_filter f = { .owner = SANDBOX_CLIENT_ID, .complete_only = true };
    struct store_snapshot *list = NULL;
    usec_t now = now_monotonic();
    int64_t old = (int64_t)now_realtime() - (int64_t)BRANCH_SWEEP_GRACE;
    size_t n = 0;

    if (m->last_branch_sweep && now - m->last_branch_sweep < BRANCH_SWEEP_EVERY) {
        return;
    }
    m->last_branch_sweep = now;
    if (store_snapshot_list(m->store, &f, &list, &n) < 0) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const struct store_snapshot *s = &list[i];
        if (s->name &&
            strncmp(s->name, BRANCH_SNAPSHOT_PREFIX, strlen(BRANCH_SNAPSHOT_PREFIX)) == 0 &&
            s->updated_at < old && !still_restored(m, s->id)) {
            (void)snapshots_remove(m, s->id, swept, NULL);
        }
    }
    store_snapshot_list_free(list, n);
}

void http_sandbox_branch(struct request_ctx *c)
{
    branch_start(c, false);
}

void e2b_sandbox_fork(struct request_ctx *c)
{
    branch_start(c, true);
}
