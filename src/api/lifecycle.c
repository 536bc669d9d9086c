/* See lifecycle.h. */
#include "api/lifecycle.h"

#include <errno.h>
#include <event2/http.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api/auth.h"
#include "api/controller.h"
#include "api/route-cache.h"
#include "api/routes.h"
#include "api/sandbox.h"
#include "basic/fault.h"
#include "basic/macro.h"
#include "basic/random-util.h"
#include "basic/time-util.h"
#include "shared/http-util.h"

#define MAX_METADATA_BYTES (64u * 1024)

const char *lifecycle_check_string_map(json_t *j, const char *name)
{
    const char *key;
    json_t *v;
    char *text;
    size_t n;

    if (!j || json_is_null(j)) {
        return NULL;
    }
    if (!json_is_object(j)) {
        return name;
    }
    json_object_foreach (j, key, v) {
        if (!json_is_string(v) || !*key || strlen(key) > 256) {
            return name;
        }
    }
    text = json_dumps(j, JSON_COMPACT);
    n = text ? strlen(text) : SIZE_MAX;
    free(text);
    return n > MAX_METADATA_BYTES ? name : NULL;
}

size_t lifecycle_count_live(struct manager *m)
{
    static const char *const live[] = { SANDBOX_STATE_CREATING, SANDBOX_STATE_RUNNING, NULL };
    struct store_sandbox_filter f = { .states = live };
    struct store_sandbox *list = NULL;
    size_t n = 0;
    if (store_sandbox_list(m->store, &f, &list, &n) < 0) {
        return 0;
    }
    store_sandbox_list_free(list, n);
    return n;
}

int lifecycle_create(struct manager *m, const struct lifecycle_create_params *p, char *ret_id,
                     char *ret_op)
{
    char token[33];
    char *metadata = NULL, *env = NULL;
    int64_t now = (int64_t)now_realtime();
    int r;

    if (lifecycle_count_live(m) >= m->max_sandboxes) {
        return -EAGAIN;
    }
    if (p->id && !sandbox_id_is_valid(p->id)) {
        return -EINVAL;
    }
    if (p->id && p->id != ret_id) {
        memmove(ret_id, p->id, SANDBOX_ID_LEN + 1); /* the caller may pass ret_id itself */
    }
    r = p->id ? 0 : sandbox_id_new(ret_id);
    if (r >= 0) {
        r = random_hex(token, 16);
    }
    if (r < 0) {
        return r;
    }
    /* An absent map is stored as {} (json_dumps() of an empty object, not leaked). */
    metadata = p->metadata ? json_dumps(p->metadata, JSON_COMPACT | JSON_SORT_KEYS) : strdup("{}");
    env = p->env ? json_dumps(p->env, JSON_COMPACT) : strdup("{}");
    if (!metadata || !env) {
        r = -ENOMEM;
        goto out;
    }
    struct store_sandbox sb = {
        .id = ret_id,
        .template_id = (char *)p->template_id,
        .client_id = SANDBOX_CLIENT_ID,
        .state = SANDBOX_STATE_CREATING,
        .desired_state = SANDBOX_STATE_RUNNING,
        .node_id = "local",
        .metadata_json = metadata,
        .env_json = env,
        .envd_access_token = token,
        .vcpus = p->vcpus,
        .memory_mb = p->memory_mb,
        .disk_mb = p->disk_mb,
        .created_at = now,
        .updated_at = now,
        .end_at = p->timeout_s > 0 ? now + p->timeout_s * (int64_t)USEC_PER_SEC : 0,
        .private_traffic = p->private_traffic,
        .network_json = (char *)p->network_json,
        .auto_pause = p->auto_pause,
        .auto_resume = p->auto_resume,
        .auto_pause_disk = p->auto_pause_disk,
        .net_bps = p->net_bps,
        .disk_bps = p->disk_bps,
        .disk_iops = p->disk_iops,
    };
    /* A host crash kills the VM these rows are about: they need not wait for the disk. */
    r = store_begin_relaxed(m->store);
    if (r < 0) {
        goto out;
    }
    bool claimed = false;
    r = store_sandbox_insert(m->store, &sb);
    if (r >= 0) {
        r = controller_add_create(m, ret_id, ret_op, &claimed);
    }
    r = r < 0 ? (store_rollback(m->store), r) : store_commit(m->store);
    if (r >= 0) {
        /* Rows written, nothing started (tests/api/test_api_faults.py). */
        (void)fault_point("api.create.committed");
        route_cache_sync(m->routes, m->store, ret_id);
        if (claimed) {
            controller_start_claimed(m, ret_op);
        } else {
            controller_kick(m);
        }
    }
out:
    free(metadata);
    free(env);
    return r;
}

int lifecycle_get_live(struct manager *m, const char *id, struct store_sandbox *ret)
{
    int r = store_sandbox_get(m->store, id, ret);
    if (r < 0) {
        return r;
    }
    if (strcmp(ret->state, SANDBOX_STATE_KILLED) == 0 ||
        strcmp(ret->desired_state, SANDBOX_STATE_KILLED) == 0) {
        store_sandbox_release(ret);
        return -ENOENT;
    }
    return 0;
}

int lifecycle_set_timeout(struct manager *m, const char *id, int64_t timeout_s, bool extend_only)
{
    struct store_sandbox sb = { 0 };
    int64_t now = (int64_t)now_realtime();
    int r;

    if (timeout_s < 0 || timeout_s > m->max_timeout_s) {
        return -EINVAL;
    }
    r = lifecycle_get_live(m, id, &sb);
    if (r < 0) {
        return r;
    }
    int64_t end = now + timeout_s * (int64_t)USEC_PER_SEC;
    if (sb.remaining_us != 0) {
        /* Paused or suspended: its clock stands still, so the timeout is what it gets back
         * when it runs again (extend_only: never less than it has). */
        int64_t want = timeout_s * (int64_t)USEC_PER_SEC;
        if (!extend_only || (sb.remaining_us > 0 && want > sb.remaining_us)) {
            struct store_sandbox upd = { .id = sb.id, .remaining_us = want, .updated_at = now };
            r = store_sandbox_update_fields(m->store, &upd,
                                            STORE_SANDBOX_REMAINING | STORE_SANDBOX_UPDATED_AT);
        }
    } else if (!extend_only || (sb.end_at && end > sb.end_at)) {
        r = store_sandbox_set_end_at(m->store, id, end, now);
    }
    store_sandbox_release(&sb);
    return r;
}

int lifecycle_set_network(struct manager *m, const char *id, const char *network_json,
                          char ret_op[33], enum sandbox_state *ret_state)
{
    return controller_request_network(m, id, network_json, ret_op, ret_state);
}

int lifecycle_create_failed_status(const struct store_operation *op)
{
    int status = controller_failed_status(op);
    return status == 400 || status == 404 || status == 503 || status == 504 ? status : 500;
}

void lifecycle_reply_capacity(struct evhttp_request *req, int status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "5");
    http_util_reply_json(
        req, status,
        json_pack("{s:i, s:s, s:s}", "code", status, "error_code", "capacity", "message", msg));
}

void lifecycle_reply_request_error(struct evhttp_request *req, int r, const char *id,
                                   enum operation_kind kind, enum sandbox_state state)
{
    const char *kind_s = operation_kind_to_string(kind) ?: "operation";
    const char *state_s = sandbox_state_to_string(state) ?: "unknown";

    switch (r) {
    case -ENOENT:
        http_util_reply_error(req, 404, "sandbox '%s' not found", id);
        break;
    case -EBUSY:
        http_util_reply_error(req, 409, "sandbox '%s' is %s: %s cannot start now", id, state_s,
                              kind_s);
        break;
    case -EOPNOTSUPP:
        http_util_reply_error(req, 501, "%s is not implemented yet in space", kind_s);
        break;
    default:
        http_util_reply_error(req, routes_status_from_errno(r), "cannot run %s on sandbox '%s': %s",
                              kind_s, id, strerror(-r));
        break;
    }
}
