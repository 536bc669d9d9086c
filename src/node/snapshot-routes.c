/* space-node's snapshot routes; see snapshot-routes.h. Parses and validates on the loop;
 * the work runs in disk-snapshot.c on workers. */
#include "node/snapshot-routes.h"

#include <errno.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "node/disk-snapshot.h"
#include "shared/http-util.h"
#include "shared/sandbox-id.h"

/* Refuses every field but the allowed ones (an unsupported field is never ignored). */
static bool only_fields(struct evhttp_request *req, json_t *body, const char *const *allowed)
{
    const char *key;
    json_t *v;

    json_object_foreach (body, key, v) {
        bool ok = false;
        for (size_t i = 0; allowed[i]; i++) {
            ok = ok || strcmp(key, allowed[i]) == 0;
        }
        if (!ok) {
            http_util_reply_error(req, 400, "unsupported field '%s'", key);
            return false;
        }
    }
    return true;
}

/* ---- POST /v1/sandboxes/{id}/snapshots ---- */

struct take_job {
    struct manager *m;
    struct evhttp_request *req;
    struct vm *vm;
    char id[SANDBOX_ID_LEN + 1];
    bool full, was_paused;
    usec_t started;
    json_t *meta;
    char *error;
    int r;
};

static void take_work(void *p)
{
    struct take_job *j = p;
    j->r =
        disk_snapshot_take(&j->m->host, j->vm, j->id, j->full, j->was_paused, &j->meta, &j->error);
}

static void take_done(void *p)
{
    struct take_job *j = p;
    struct manager *m = j->m;
    struct vm *vm = j->vm;

    vm->busy--;
    vm->snapshot_busy = false;
    if (j->r < 0) {
        log_sandbox_warning_errno(vm_sandbox_id(vm), j->r, "snapshot %s failed: %s", j->id,
                                  j->error ? j->error : strerror(-j->r));
        http_util_reply_error(j->req,
                              j->r == -EEXIST   ? 409
                              : j->r == -ENOENT ? 404
                                                : 500,
                              "cannot snapshot sandbox: %s", j->error ? j->error : strerror(-j->r));
    } else {
        double ms = (now_monotonic() - j->started) / 1000.0;
        log_sandbox_info(vm_sandbox_id(vm), "snapshot %s (%s) in %.1f ms", j->id,
                         j->full ? "full" : "disk", ms);
        json_object_set_new(j->meta, "snapshot_ms", json_real(ms));
        http_util_reply_json(j->req, 201, j->meta);
    }
    free(j->error);
    free(j);
    manager_job_finished(m);
}

static void handle_take(struct manager *m, struct evhttp_request *req, struct vm *vm)
{
    static const char *const allowed[] = { "id", "kind", NULL };
    json_t *body = http_util_body_json(req), *existing = NULL;
    struct take_job *j = NULL;
    const char *id, *kind;
    int r;

    if (!body) {
        return;
    }
    if (!only_fields(req, body, allowed)) {
        goto out;
    }
    id = json_string_value(json_object_get(body, "id"));
    kind = json_string_value(json_object_get(body, "kind"));
    if ((json_object_get(body, "id") && (!id || !sandbox_id_is_valid(id))) ||
        (json_object_get(body, "kind") &&
         (!kind || (strcmp(kind, "disk") && strcmp(kind, "full"))))) {
        http_util_reply_error(req, 400, "'id' must be %d characters [a-z0-9]; 'kind' disk or full",
                              SANDBOX_ID_LEN);
        goto out;
    }
    if (id && disk_snapshot_read(&m->host, id, &existing) == 0) {
        const char *sb = json_string_value(json_object_get(existing, "sandbox_id"));
        if (sb && strcmp(sb, vm_sandbox_id(vm)) == 0) {
            http_util_reply_json(req, 200, existing); /* idempotent: the api re-runs */
        } else {
            json_decref(existing);
            http_util_reply_error(req, 409, "snapshot '%s' exists", id);
        }
        goto out;
    }
    if ((vm_state(vm) != VM_RUNNING && vm_state(vm) != VM_PAUSED) || !vm->rt || vm->snapshot_busy) {
        http_util_reply_error(req, 409,
                              "sandbox '%s' is %s%s; a snapshot needs it running or paused",
                              vm_sandbox_id(vm), vm_state_to_string(vm_state(vm)),
                              vm->snapshot_busy ? " (another snapshot is under way)" : "");
        goto out;
    }
    j = calloc(1, sizeof(*j));
    if (!j) {
        http_util_reply_error(req, 500, "out of memory");
        goto out;
    }
    *j = (struct take_job){ .m = m,
                            .req = req,
                            .vm = vm,
                            .started = now_monotonic(),
                            .full = kind && strcmp(kind, "full") == 0,
                            .was_paused = vm_state(vm) == VM_PAUSED };
    if (id) {
        snprintf(j->id, sizeof(j->id), "%s", id);
    } else if (sandbox_id_new(j->id) < 0) {
        http_util_reply_error(req, 500, "cannot make a snapshot id");
        free(j);
        goto out;
    }
    r = manager_run_job(m, take_work, take_done, j);
    if (r < 0) {
        free(j);
        http_api_reply_no_worker(req, r);
        goto out;
    }
    vm->busy++;
    vm->snapshot_busy = true;
out:
    json_decref(body);
}

/* ---- POST /v1/sandboxes/{id}/rollback ---- */

struct rollback_job {
    struct manager *m;
    struct evhttp_request *req;
    struct vm *vm;
    char id[SANDBOX_ID_LEN + 1];
    usec_t started;
    struct vm_restore_result res;
    bool lost;
    int r;
};

static void rollback_work(void *p)
{
    struct rollback_job *j = p;
    j->r = disk_snapshot_rollback(&j->m->host, j->vm, j->id, &j->res, &j->lost);
}

static void lost_work(void *p)
{
    struct rollback_job *j = p;
    (void)vm_destroy(&j->m->host, j->vm);
}

static void lost_done(void *p)
{
    struct rollback_job *j = p;
    struct manager *m = j->m;

    vm_set_state(j->vm, VM_STOPPED);
    manager_remove(m, j->vm);
    vm_free(j->vm);
    free(j);
    manager_job_finished(m);
}

static void rollback_done(void *p)
{
    struct rollback_job *j = p;
    struct manager *m = j->m;
    struct vm *vm = j->vm;

    vm->snapshot_busy = false;
    if (j->r < 0 && j->lost) {
        /* The old VMM is gone and no new one runs: the sandbox is lost; remove it whole. */
        log_sandbox_warning(vm_sandbox_id(vm), "rollback onto %s failed, sandbox lost: %s", j->id,
                            j->res.error ? j->res.error : strerror(-j->r));
        http_util_reply_error(j->req, 500, "rollback failed and the sandbox was lost: %s",
                              j->res.error ? j->res.error : strerror(-j->r));
        free(j->res.error);
        vm->rt = runtime_vm_free(vm->rt);
        vm_set_state(vm, VM_STOPPING);
        manager_egress_detach(m, vm);
        if (manager_run_job(m, lost_work, lost_done, j) < 0) {
            /* The next node start's reconcile removes what is left. */
            vm_set_state(vm, VM_STOPPED);
            manager_remove(m, vm);
            vm_free(vm);
            free(j);
        }
        manager_job_finished(m);
        return;
    }
    if (j->r < 0) {
        vm_set_state(vm, VM_RUNNING);
        http_util_reply_error(j->req,
                              j->r == -ENOENT  ? 404
                              : j->r == -EXDEV ? 409
                                               : 500,
                              "cannot roll back onto snapshot '%s': %s", j->id,
                              j->r == -EXDEV ? "it is another sandbox's"
                              : j->res.error ? j->res.error
                                             : strerror(-j->r));
    } else {
        runtime_vm_free(vm->rt); /* stopped by the job */
        vm->rt = j->res.rt;
        vm->rec.pid = j->res.pid;
        vm->rec.pid_start_time = j->res.pid_start_time;
        vm->timing.restored = j->res.timing.restored; /* "mode": how it came back */
        vm_set_state(vm, VM_RUNNING);
        double ms = (now_monotonic() - j->started) / 1000.0;
        log_sandbox_info(vm_sandbox_id(vm), "rolled back onto snapshot %s in %.1f ms", j->id, ms);
        json_t *res = http_api_vm_json(vm);
        if (res) {
            json_object_set_new(res, "rollback_ms", json_real(ms));
        }
        http_util_reply_json(j->req, 200, res);
    }
    free(j->res.error);
    free(j);
    manager_job_finished(m);
}

static void handle_rollback(struct manager *m, struct evhttp_request *req, struct vm *vm)
{
    static const char *const allowed[] = { "snapshot", NULL };
    json_t *body = http_util_body_json(req);
    struct rollback_job *j;
    const char *id;
    int r;

    if (!body) {
        return;
    }
    if (!only_fields(req, body, allowed)) {
        goto out;
    }
    id = json_string_value(json_object_get(body, "snapshot"));
    if (!id || !sandbox_id_is_valid(id)) {
        http_util_reply_error(req, 400, "'snapshot' must be a snapshot id");
        goto out;
    }
    /* The VMM is replaced: nothing else may be using it (an exec holds it). */
    if (vm_state(vm) != VM_RUNNING || !vm->rt || vm->snapshot_busy || vm->busy) {
        http_util_reply_error(req, 409,
                              "sandbox '%s' is %s%s; a rollback needs it running and idle",
                              vm_sandbox_id(vm), vm_state_to_string(vm_state(vm)),
                              vm->busy || vm->snapshot_busy ? " and busy" : "");
        goto out;
    }
    j = calloc(1, sizeof(*j));
    if (!j) {
        http_util_reply_error(req, 500, "out of memory");
        goto out;
    }
    *j = (struct rollback_job){ .m = m, .req = req, .vm = vm, .started = now_monotonic() };
    snprintf(j->id, sizeof(j->id), "%s", id);
    r = manager_run_job(m, rollback_work, rollback_done, j);
    if (r < 0) {
        free(j);
        http_api_reply_no_worker(req, r);
        goto out;
    }
    vm->snapshot_busy = true;
    vm_set_state(vm, VM_RESTORING);
out:
    json_decref(body);
}

static void reply_list(struct manager *m, struct evhttp_request *req, const char *sandbox_id)
{
    json_t *list = NULL;
    int r = disk_snapshot_list(&m->host, sandbox_id, &list);

    if (r < 0) {
        http_util_reply_error(req, 500, "cannot list snapshots: %s", strerror(-r));
        return;
    }
    http_util_reply_json(req, 200, json_pack("{s:o}", "snapshots", list));
}

bool snapshot_routes_sandbox(struct manager *m, struct evhttp_request *req, struct vm *vm,
                             const char *rest)
{
    enum evhttp_cmd_type method = evhttp_request_get_command(req);

    if (strcmp(rest, "/snapshots") == 0 && method == EVHTTP_REQ_POST) {
        handle_take(m, req, vm);
    } else if (strcmp(rest, "/snapshots") == 0 && method == EVHTTP_REQ_GET) {
        reply_list(m, req, vm_sandbox_id(vm));
    } else if (strcmp(rest, "/rollback") == 0 && method == EVHTTP_REQ_POST) {
        handle_rollback(m, req, vm);
    } else {
        return false;
    }
    return true;
}

/* ---- /v1/snapshots ---- */

struct delete_job {
    struct manager *m;
    struct evhttp_request *req;
    char id[SANDBOX_ID_LEN + 1];
    int r;
};

static void delete_work(void *p)
{
    struct delete_job *j = p;
    j->r = disk_snapshot_delete(&j->m->host, j->id);
}

static void delete_done(void *p)
{
    struct delete_job *j = p;
    struct manager *m = j->m;

    if (j->r == -ENOENT) {
        http_util_reply_error(j->req, 404, "snapshot '%s' not found", j->id);
    } else if (j->r < 0) {
        http_util_reply_error(j->req, 500, "cannot delete snapshot '%s': %s", j->id,
                              strerror(-j->r));
    } else {
        evhttp_send_reply(j->req, 204, NULL, NULL);
    }
    free(j);
    manager_job_finished(m);
}

void snapshot_routes_top(struct manager *m, struct evhttp_request *req, const char *path)
{
    enum evhttp_cmd_type method = evhttp_request_get_command(req);
    const char *rest = path + strlen("/v1/snapshots");

    if (*rest == '\0' && method == EVHTTP_REQ_GET) {
        struct evkeyvalq q;
        const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
        if (evhttp_parse_query_str(query ? query : "", &q) < 0) {
            http_util_reply_error(req, 400, "invalid query");
            return;
        }
        const char *sb = evhttp_find_header(&q, "sandbox");
        if (sb && !sandbox_id_is_valid(sb)) {
            http_util_reply_error(req, 400, "invalid sandbox id");
        } else {
            reply_list(m, req, sb);
        }
        evhttp_clear_headers(&q);
        return;
    }
    if (*rest != '/' || !sandbox_id_is_valid(rest + 1)) {
        http_util_reply_error(req, *rest == '/' ? 400 : 404, "no route for %s", path);
        return;
    }
    const char *id = rest + 1;
    if (method == EVHTTP_REQ_GET) {
        json_t *meta = NULL;
        int r = disk_snapshot_read(&m->host, id, &meta);
        if (r < 0) {
            http_util_reply_error(req, r == -ENOENT ? 404 : 500, "snapshot '%s': %s", id,
                                  r == -ENOENT ? "not found" : strerror(-r));
        } else {
            http_util_reply_json(req, 200, meta);
        }
    } else if (method == EVHTTP_REQ_DELETE) {
        struct delete_job *j = calloc(1, sizeof(*j));
        if (!j) {
            http_util_reply_error(req, 500, "out of memory");
            return;
        }
        *j = (struct delete_job){ .m = m, .req = req };
        snprintf(j->id, sizeof(j->id), "%s", id);
        int r = manager_run_job(m, delete_work, delete_done, j);
        if (r < 0) {
            free(j);
            http_api_reply_no_worker(req, r);
        }
    } else {
        http_util_reply_error(req, 405, "method not allowed");
    }
}
