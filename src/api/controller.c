/*
 * Operations, waiters, timeouts and reconciliation; see controller.h.
 * Everything here runs on the loop thread except the *_work() functions,
 * which see only their job struct and talk to the node.
 */
#include "api/controller.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/node-client.h"
#include "api/sandbox.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/random-util.h"
#include "shared/event-util.h"

#define TICK_USEC (1 * USEC_PER_SEC)
#define NODE_SYNC_USEC (10 * USEC_PER_SEC)

struct waiter {
    char op_id[33];
    struct evhttp_request *req;
    usec_t deadline; /* 0: none */
    controller_wait_fn fn;
    void *userdata;
    struct waiter *next;
};

struct op_job {
    struct manager *m;
    struct store_operation op;   /* owned copy */
    struct store_sandbox sb;     /* owned copy, for create */
    char *node_socket;
    char *init_json;
    int r, status;
    char *error;
    json_t *timings; /* the node's per-phase create timings */
};

static int64_t now_us(void)
{
    return (int64_t)now_realtime();
}

static bool inflight_has(struct manager *m, const char *id)
{
    for (size_t i = 0; i < m->n_inflight; i++) {
        if (strcmp(m->inflight[i], id) == 0) {
            return true;
        }
    }
    return false;
}

static int inflight_add(struct manager *m, const char *id)
{
    char **p = realloc(m->inflight, (m->n_inflight + 1) * sizeof(*p));
    if (!p) {
        return -ENOMEM;
    }
    m->inflight = p;
    m->inflight[m->n_inflight] = strdup(id);
    if (!m->inflight[m->n_inflight]) {
        return -ENOMEM;
    }
    m->n_inflight++;
    return 0;
}

static void inflight_remove(struct manager *m, const char *id)
{
    for (size_t i = 0; i < m->n_inflight; i++) {
        if (strcmp(m->inflight[i], id) == 0) {
            free(m->inflight[i]);
            m->inflight[i] = m->inflight[--m->n_inflight];
            return;
        }
    }
}

int controller_add_operation(struct manager *m, const char *kind, const char *sandbox_id,
                             char ret_id[33])
{
    int64_t now = now_us();
    int r = random_hex(ret_id, 16);
    if (r < 0) {
        return r;
    }
    struct store_operation op = { .id = ret_id, .kind = (char *)kind,
                                  .sandbox_id = (char *)sandbox_id, .state = "pending",
                                  .created_at = now, .updated_at = now };
    return store_operation_insert(m->store, &op);
}

/* The agent's /init body: sandbox env (E2B's fixed vars first, the caller's win), token, user. */
static char *init_json_for(const struct store_sandbox *sb)
{
    json_error_t err;
    json_t *env = json_object(), *user_env = json_loads(sb->env_json ? sb->env_json : "{}", 0, &err);
    char ts[40];
    char *text;

    json_object_set_new(env, "E2B_SANDBOX", json_string("true"));
    json_object_set_new(env, "E2B_SANDBOX_ID", json_string(sb->id));
    json_object_set_new(env, "E2B_TEMPLATE_ID", json_string(sb->template_id));
    if (json_is_object(user_env)) {
        json_object_update(env, user_env);
    }
    json_decref(user_env);
    sandbox_format_time(now_us(), ts);
    json_t *init = json_pack("{s:o, s:s, s:s}", "envVars", env, "defaultUser", "user",
                             "timestamp", ts);
    if (init && sb->envd_access_token) {
        json_object_set_new(init, "accessToken", json_string(sb->envd_access_token));
    }
    text = init ? json_dumps(init, JSON_COMPACT) : NULL;
    json_decref(init);
    return text;
}

static void op_work(void *p)
{
    struct op_job *j = p;

    if (strcmp(j->op.kind, OPERATION_CREATE) == 0) {
        j->r = node_client_create(j->node_socket, &j->sb, j->init_json, &j->status, &j->error,
                                  &j->timings);
    } else {
        j->r = node_client_kill(j->node_socket, j->op.sandbox_id, &j->status, &j->error);
    }
}

static void wake_waiters(struct manager *m, const struct store_operation *op)
{
    struct waiter **pp = &m->waiters;
    while (*pp) {
        struct waiter *w = *pp;
        if (strcmp(w->op_id, op->id) == 0) {
            *pp = w->next;
            w->fn(m, w->req, op, w->userdata);
            free(w);
        } else {
            pp = &w->next;
        }
    }
}

/* Records the outcome of an operation and what it means for its sandbox. */
static void op_finish(struct manager *m, const struct store_operation *done, int r,
                      const char *error, int status, json_t *timings)
{
    struct store_operation upd = *done, *op = &upd; /* borrowed strings, changed fields */
    json_t *res = json_pack("{s:i}", "status", status);
    char *result = NULL;
    struct store_sandbox sb = { 0 };
    bool have_sb = op->sandbox_id && store_sandbox_get(m->store, op->sandbox_id, &sb) >= 0;
    bool create = strcmp(op->kind, OPERATION_CREATE) == 0;
    bool resubmit_kill = false;

    (void)store_begin(m->store);
    op->state = r < 0 ? "failed" : "succeeded";
    op->error = r < 0 ? (char *)(error ? error : "failed") : NULL;
    /* The node's HTTP status lets the API answer a failed create precisely (404 template). */
    if (res && timings) {
        json_object_set(res, "node_timings_ms", timings);
    }
    result = res ? json_dumps(res, JSON_COMPACT) : NULL;
    json_decref(res);
    op->result_json = result;
    op->updated_at = now_us();
    (void)store_operation_update(m->store, op);
    if (have_sb) {
        char *old_state = sb.state, *old_error = sb.error;
        sb.updated_at = now_us();
        if (create && r >= 0) {
            sb.state = SANDBOX_STATE_RUNNING;
            /* Killed while it was being created: now that it exists, kill it. */
            resubmit_kill = strcmp(sb.desired_state, SANDBOX_STATE_KILLED) == 0;
        } else if (create) {
            sb.state = SANDBOX_STATE_KILLED;
            sb.error = (char *)(error ? error : "create failed");
        } else if (r >= 0) {
            sb.state = SANDBOX_STATE_KILLED;
        }
        (void)store_sandbox_update(m->store, &sb);
        sb.state = old_state;
        sb.error = old_error;
    }
    (void)store_commit(m->store);
    if (resubmit_kill) {
        char id[33];
        (void)store_begin(m->store);
        int k = controller_add_operation(m, OPERATION_KILL, op->sandbox_id, id);
        (void)(k < 0 ? store_rollback(m->store) : store_commit(m->store));
    }
    if (r < 0) {
        log_sandbox_warning(op->sandbox_id, "operation %s %s failed: %s", op->kind, op->id,
                            error ? error : "");
    }
    wake_waiters(m, op);
    store_sandbox_release(&sb);
    free(result);
}

static void op_done(void *p)
{
    struct op_job *j = p;
    struct manager *m = j->m;

    inflight_remove(m, j->op.id);
    op_finish(m, &j->op, j->r, j->error, j->status, j->timings);
    json_decref(j->timings);
    store_operation_release(&j->op);
    store_sandbox_release(&j->sb);
    free(j->node_socket);
    free(j->init_json);
    free(j->error);
    free(j);
    controller_kick(m);
}

static int op_start(struct manager *m, struct store_operation *op)
{
    struct op_job *j = calloc(1, sizeof(*j));
    int r;

    if (!j) {
        return -ENOMEM;
    }
    j->m = m;
    if (strcmp(op->kind, OPERATION_CREATE) == 0) {
        r = store_sandbox_get(m->store, op->sandbox_id, &j->sb);
        if (r < 0) {
            free(j);
            return r;
        }
        j->init_json = init_json_for(&j->sb);
    }
    j->node_socket = strdup(m->node_socket);
    free(op->state);
    op->state = strdup("running");
    op->updated_at = now_us();
    (void)store_operation_update(m->store, op);
    j->op = *op;
    *op = (struct store_operation){ 0 };
    r = inflight_add(m, j->op.id);
    if (r >= 0) {
        r = event_util_run_job(m->base, &m->jobs, op_work, op_done, j);
    }
    if (r < 0) {
        inflight_remove(m, j->op.id);
        store_operation_release(&j->op);
        store_sandbox_release(&j->sb);
        free(j->node_socket);
        free(j->init_json);
        free(j);
    }
    return r;
}

void controller_kick(struct manager *m)
{
    struct store_operation *ops = NULL;
    size_t n = 0;

    if (m->stopping || store_operation_list_unfinished(m->store, &ops, &n) < 0) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (inflight_has(m, ops[i].id)) {
            continue;
        }
        int r = op_start(m, &ops[i]);
        if (r == -ENOENT && ops[i].id) {
            /* Its sandbox row is gone: the operation can never run; end it instead of
             * retrying it on every tick. */
            op_finish(m, &ops[i], r, "sandbox no longer exists", 404, NULL);
        } else if (r < 0) {
            log_warning_errno(r, "cannot start operation %s: %m", ops[i].id ? ops[i].id : "?");
        }
    }
    store_operation_list_free(ops, n);
}

int controller_request_kill(struct manager *m, const char *sandbox_id, char ret_op_id[33])
{
    struct store_sandbox sb = { 0 };
    int r;

    r = store_sandbox_get(m->store, sandbox_id, &sb);
    if (r < 0) {
        return r;
    }
    if (strcmp(sb.state, SANDBOX_STATE_KILLED) == 0 ||
        strcmp(sb.desired_state, SANDBOX_STATE_KILLED) == 0) {
        store_sandbox_release(&sb);
        return -ENOENT; /* already killed or being killed: gone for the caller */
    }
    char *old = sb.desired_state;
    sb.desired_state = SANDBOX_STATE_KILLED;
    sb.updated_at = now_us();
    r = store_begin(m->store);
    if (r >= 0) {
        r = store_sandbox_update(m->store, &sb);
    }
    /* While a create runs, its completion issues the kill (op_finish). */
    if (r >= 0 && strcmp(sb.state, SANDBOX_STATE_CREATING) != 0) {
        r = controller_add_operation(m, OPERATION_KILL, sandbox_id, ret_op_id);
    } else if (r >= 0) {
        ret_op_id[0] = '\0';
    }
    r = r < 0 ? (store_rollback(m->store), r) : store_commit(m->store);
    sb.desired_state = old;
    store_sandbox_release(&sb);
    if (r >= 0) {
        controller_kick(m);
    }
    return r;
}

void controller_wait(struct manager *m, const char *op_id, struct evhttp_request *req,
                     usec_t timeout, controller_wait_fn fn, void *userdata)
{
    struct store_operation op = { 0 };
    struct waiter *w;

    if (store_operation_get(m->store, op_id, &op) >= 0 &&
        (strcmp(op.state, "succeeded") == 0 || strcmp(op.state, "failed") == 0)) {
        fn(m, req, &op, userdata);
        store_operation_release(&op);
        return;
    }
    store_operation_release(&op);
    w = calloc(1, sizeof(*w));
    if (!w) {
        fn(m, req, NULL, userdata);
        return;
    }
    snprintf(w->op_id, sizeof(w->op_id), "%s", op_id);
    w->req = req;
    w->deadline = timeout ? now_monotonic() + timeout : 0;
    w->fn = fn;
    w->userdata = userdata;
    w->next = m->waiters;
    m->waiters = w;
}

static void expire_waiters(struct manager *m)
{
    usec_t now = now_monotonic();
    struct waiter **pp = &m->waiters;
    while (*pp) {
        struct waiter *w = *pp;
        if (w->deadline && w->deadline <= now) {
            *pp = w->next;
            w->fn(m, w->req, NULL, w->userdata);
            free(w);
        } else {
            pp = &w->next;
        }
    }
}

/* Sandboxes whose end time passed are killed (pause-on-timeout comes with the state issue). */
static void enforce_timeouts(struct manager *m)
{
    static const char *const running[] = { SANDBOX_STATE_RUNNING, NULL };
    struct store_sandbox_filter f = { .states = running };
    struct store_sandbox *list = NULL;
    size_t n = 0;
    int64_t now = now_us();

    if (store_sandbox_list(m->store, &f, &list, &n) < 0) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char op[33];
        if (list[i].end_at && list[i].end_at <= now &&
            strcmp(list[i].desired_state, SANDBOX_STATE_RUNNING) == 0) {
            log_sandbox_info(list[i].id, "timeout reached, killing");
            (void)controller_request_kill(m, list[i].id, op);
        }
    }
    store_sandbox_list_free(list, n);
}

/* The correctness backstop: the node's truth against the store's. */
struct sync_job {
    struct manager *m;
    char *node_socket;
    json_t *node_list;
    int r;
};

static void sync_work(void *p)
{
    struct sync_job *j = p;
    j->r = node_client_list(j->node_socket, &j->node_list);
}

static bool sandbox_busy(struct manager *m, const char *id)
{
    struct store_operation *ops = NULL;
    size_t n = 0;
    bool busy = false;
    if (store_operation_list_unfinished(m->store, &ops, &n) < 0) {
        return true;
    }
    for (size_t i = 0; i < n && !busy; i++) {
        busy = ops[i].sandbox_id && strcmp(ops[i].sandbox_id, id) == 0;
    }
    store_operation_list_free(ops, n);
    return busy;
}

static void sync_done(void *p)
{
    struct sync_job *j = p;
    struct manager *m = j->m;
    static const char *const live[] = { SANDBOX_STATE_RUNNING, NULL };
    struct store_sandbox_filter f = { .states = live };
    struct store_sandbox *list = NULL;
    size_t n = 0, i;
    json_t *v;

    if (j->r < 0 || m->stopping) {
        goto out;
    }
    /* On the node but not wanted: kill it there. */
    json_array_foreach(j->node_list, i, v)
    {
        const char *id = json_string_value(json_object_get(v, "id"));
        struct store_sandbox sb = { 0 };
        char op[33];
        if (!id || sandbox_busy(m, id)) {
            continue;
        }
        int r = store_sandbox_get(m->store, id, &sb);
        if (r == -ENOENT || (r >= 0 && strcmp(sb.state, SANDBOX_STATE_KILLED) == 0)) {
            log_sandbox_warning(id, "running on the node but not wanted, killing");
            (void)store_begin(m->store);
            if (r == -ENOENT || controller_add_operation(m, OPERATION_KILL, id, op) < 0) {
                (void)store_rollback(m->store);
            } else {
                (void)store_commit(m->store);
            }
        }
        store_sandbox_release(&sb);
    }
    /* Running in the store but gone from the node: it is lost. */
    if (store_sandbox_list(m->store, &f, &list, &n) >= 0) {
        for (size_t k = 0; k < n; k++) {
            bool found = false;
            json_array_foreach(j->node_list, i, v)
            {
                found = found || strcmp(json_string_value(json_object_get(v, "id")) ?: "",
                                        list[k].id) == 0;
            }
            if (!found && !sandbox_busy(m, list[k].id)) {
                log_sandbox_warning(list[k].id, "the node no longer has this sandbox");
                free(list[k].state);
                list[k].state = strdup(SANDBOX_STATE_KILLED);
                free(list[k].error);
                list[k].error = strdup("lost by its node");
                list[k].updated_at = now_us();
                (void)store_sandbox_update(m->store, &list[k]);
            }
        }
        store_sandbox_list_free(list, n);
    }
    controller_kick(m);
out:
    json_decref(j->node_list);
    free(j->node_socket);
    free(j);
}

static void tick_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct manager *m = userdata;

    if (m->stopping) {
        return;
    }
    expire_waiters(m);
    enforce_timeouts(m);
    controller_kick(m);
    if (now_monotonic() - m->last_node_sync >= NODE_SYNC_USEC) {
        struct sync_job *j = calloc(1, sizeof(*j));
        m->last_node_sync = now_monotonic();
        if (j) {
            j->m = m;
            j->node_socket = strdup(m->node_socket);
            if (event_util_run_job(m->base, &m->jobs, sync_work, sync_done, j) < 0) {
                free(j->node_socket);
                free(j);
            }
        }
    }
}

int controller_start(struct manager *m)
{
    struct timeval tv = { .tv_sec = TICK_USEC / USEC_PER_SEC };

    /* Operations a previous process left "running" are simply run again: every step is
     * idempotent. controller_kick() picks them up because they are still unfinished. */
    m->tick = event_new(m->base, -1, EV_PERSIST, tick_cb, m);
    if (!m->tick) {
        return -ENOMEM;
    }
    event_add(m->tick, &tv);
    controller_kick(m);
    return 0;
}

void controller_stop(struct manager *m)
{
    while (m->waiters) {
        struct waiter *w = m->waiters;
        m->waiters = w->next;
        w->fn(m, w->req, NULL, w->userdata);
        free(w);
    }
    if (m->tick) {
        event_free(m->tick);
        m->tick = NULL;
    }
    for (size_t i = 0; i < m->n_inflight; i++) {
        free(m->inflight[i]);
    }
    free(m->inflight);
    m->inflight = NULL;
    m->n_inflight = 0;
}
