/*
 * Operations, waiters, timeouts and reconciliation; see controller.h.
 * Everything here runs on the loop thread except the *_work() functions,
 * which see only their job struct and talk to the node.
 */
#include "api/controller.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/branch.h"
#include "api/egress-audit.h"
#include "api/egress.h"
#include "api/node-client.h"
#include "api/operation.h"
#include "api/rolling.h"
#include "api/route-cache.h"
#include "api/sandbox.h"
#include "api/secrets.h"
#include "basic/fault.h"
#include "basic/fileio.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/random-util.h"
#include "shared/event-util.h"
#include "shared/http-util.h"

#define TICK_USEC (1 * USEC_PER_SEC)
#define NODE_SYNC_USEC (10 * USEC_PER_SEC)
/*
 * A claimed operation's lease: renewed every RENEW_USEC by the tick while
 * its worker runs, so it lapses LEASE_USEC after its runner died (or
 * stalled). Then another replica, or this one restarted, takes it over.
 */
#define LEASE_USEC (15 * USEC_PER_SEC)
#define RENEW_USEC (5 * USEC_PER_SEC)
/* Workers running operations at once; more wait in the store. */
#define MAX_INFLIGHT_OPS 64

struct waiter {
    char op_id[33];
    struct evhttp_request *req;
    usec_t deadline; /* 0: none */
    controller_wait_fn fn;
    void *userdata;
    struct waiter *next;
};

/*
 * One job shape for every operation kind: what the worker needs (a copy of
 * the operation and of its sandbox as claimed) and what it hands back (r,
 * the node's status and message, create's timings). The kind's runner
 * (op_runners) decides which fields it reads.
 */
struct op_job {
    struct manager *m;
    enum operation_kind kind;
    struct store_operation op; /* owned copy */
    struct store_sandbox sb;   /* owned copy; empty for an operation without a sandbox */
    /* snapshot: the one it takes; create: the snapshot it restores (branch), else empty */
    struct store_snapshot snap;
    enum sandbox_state from; /* sb's state when claimed */
    char *node_socket;
    char *init_json; /* create: the agent's /init body */
    int r, status;
    char *error;
    json_t *timings;          /* the node's per-phase create timings */
    int64_t vcpus, memory_mb; /* create: the size the node made (0: its answer had none) */
    int64_t bytes;            /* snapshot: what the node's files take (its meta.json "bytes") */
};

/* Runs on the worker; sees only its job. */
typedef void (*op_run_fn)(struct op_job *j);

static void run_create(struct op_job *j)
{
    j->r = node_client_create(j->node_socket, &j->sb, j->snap.id ? &j->snap : NULL, j->init_json,
                              &j->status, &j->error, &j->timings, &j->vcpus, &j->memory_mb);
}

/* The node takes our id: a re-run after a crash of ours meets its own snapshot (200). */
static void run_snapshot(struct op_job *j)
{
    char path[128];
    json_t *body = json_pack("{s:s, s:s}", "id", j->snap.id, "kind", j->snap.kind), *res = NULL;

    snprintf(path, sizeof(path), "/v1/sandboxes/%s/snapshots", j->sb.id);
    j->r = body ? node_client_call(j->node_socket, "POST", path, body, NODE_CLIENT_TIMEOUT,
                                   &j->status, &res)
                : -ENOMEM;
    json_decref(body);
    if (j->r < 0) {
        j->status = 502;
        j->error = strdup(strerror(-j->r));
    } else if (j->status != 200 && j->status != 201) {
        const char *msg = json_string_value(json_object_get(res, "message"));
        if (asprintf(&j->error, "the node answered %d: %s", j->status, msg ? msg : "") < 0) {
            j->error = NULL;
        }
        j->r = j->status == 404 ? -ENOENT : -EIO;
    } else {
        json_int_t b = json_integer_value(json_object_get(res, "bytes"));
        j->bytes = b > 0 ? (int64_t)b : 0;
    }
    json_decref(res);
}

static void run_kill(struct op_job *j)
{
    j->r = node_client_kill(j->node_socket, j->op.sandbox_id, &j->status, &j->error);
}

/* The policy the row holds now, not the one of the request that queued it (operation.c). */
static void run_network(struct op_job *j)
{
    j->r = node_client_set_network(j->node_socket, j->sb.id, j->sb.network_json, &j->status,
                                   &j->error);
}

/* The node's state of sandbox id ("pausing"), or NULL (caller frees). */
static char *node_state(const char *node_socket, const char *id)
{
    char path[128];
    json_t *res = NULL;
    int status = 0;
    char *state = NULL;

    snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
    if (node_client_call(node_socket, "GET", path, NULL, NODE_CLIENT_TIMEOUT, &status, &res) >= 0 &&
        status == 200) {
        const char *s = json_string_value(json_object_get(res, "state"));
        state = s ? strdup(s) : NULL;
    }
    json_decref(res);
    return state;
}

/*
 * POST /v1/sandboxes/{id}/<verb> on the node, which answers 200 also when the VM is in the
 * verb's end state already (a re-run after a crash of ours meets its own earlier work). A
 * 409 while the node's VM is in a transitional state is that earlier work still running
 * (this process died while the node went on): it is asked again until it settles, within
 * the node call's deadline.
 */
static void run_node_verb_body(struct op_job *j, const char *verb, json_t *body)
{
    usec_t deadline = now_monotonic() + NODE_CLIENT_TIMEOUT;
    char path[128];
    json_t *res = NULL;

    snprintf(path, sizeof(path), "/v1/sandboxes/%s/%s", j->sb.id, verb);
    for (;;) {
        json_decref(res);
        res = NULL;
        j->r = node_client_call(j->node_socket, "POST", path, body, NODE_CLIENT_TIMEOUT, &j->status,
                                &res);
        if (j->r < 0 || j->status != 409 || now_monotonic() >= deadline) {
            break;
        }
        char *state = node_state(j->node_socket, j->sb.id);
        size_t n = state ? strlen(state) : 0;
        bool settling = n > 3 && strcmp(state + n - 3, "ing") == 0 && strcmp(state, "stopping");
        free(state);
        if (!settling) {
            break;
        }
        sleep_usec(200 * USEC_PER_MSEC);
    }
    if (j->r < 0) {
        j->status = 502;
        j->error = strdup(strerror(-j->r));
    } else if (j->status != 200) {
        const char *msg = json_string_value(json_object_get(res, "message"));
        if (asprintf(&j->error, "the node answered %d: %s", j->status, msg ? msg : "") < 0) {
            j->error = NULL;
        }
        j->r = j->status == 404 ? -ENOENT : -EIO;
    }
    json_decref(res);
}

static void run_node_verb(struct op_job *j, const char *verb)
{
    run_node_verb_body(j, verb, NULL);
}

/* suspend-disk, restore-disk: the node's suspend and restore with {"memory": false}. */
static void run_node_verb_disk(struct op_job *j, const char *verb)
{
    json_t *body = json_pack("{s:b}", "memory", 0);

    if (!body) {
        j->r = -ENOMEM;
        j->status = 500;
        j->error = strdup("out of memory");
        return;
    }
    run_node_verb_body(j, verb, body);
    json_decref(body);
}

static void run_suspend_disk(struct op_job *j)
{
    run_node_verb_disk(j, "suspend");
}

static void run_restore_disk(struct op_job *j)
{
    run_node_verb_disk(j, "restore");
}

static void run_pause(struct op_job *j)
{
    run_node_verb(j, "pause");
}

static void run_resume(struct op_job *j)
{
    run_node_verb(j, "resume");
}

static void run_suspend(struct op_job *j)
{
    run_node_verb(j, "suspend");
}

static void run_restore(struct op_job *j)
{
    run_node_verb(j, "restore");
}

/* The implemented kinds (operation.h); a kind without a runner ends with 501. */
static const op_run_fn op_runners[_OPERATION_KIND_MAX] = {
    [OPERATION_KIND_CREATE] = run_create,
    [OPERATION_KIND_KILL] = run_kill,
    [OPERATION_KIND_PAUSE] = run_pause,
    [OPERATION_KIND_RESUME] = run_resume,
    [OPERATION_KIND_SUSPEND] = run_suspend,
    [OPERATION_KIND_RESTORE] = run_restore,
    [OPERATION_KIND_NETWORK] = run_network,
    [OPERATION_KIND_SNAPSHOT] = run_snapshot,
    [OPERATION_KIND_SUSPEND_DISK] = run_suspend_disk,
    [OPERATION_KIND_RESTORE_DISK] = run_restore_disk,
};

static int64_t now_us(void)
{
    return (int64_t)now_realtime();
}

/*
 * A fault point on step of an operation of kind (basic/fault.h), named
 * "api.<verb>.<step>" ("api.create.claimed"): tests/api/test_api_faults.py
 * crashes space-api at each.
 */
static int op_fault(const char *kind, const char *step)
{
    char name[64];
    const char *verb = kind && strncmp(kind, "sandbox.", 8) == 0 ? kind + 8 : kind ? kind : "?";

    snprintf(name, sizeof(name), "api.%s.%s", verb, step);
    return fault_point(name);
}

/*
 * Lease owner ids say which process holds a lease, so that a restarted
 * space-api can take over at once what a dead process of this host held,
 * instead of waiting for the lease to lapse:
 *
 *   12 hex: hash of the boot id and the pid namespace (who can check the pid)
 *    7 hex: pid
 *   13 hex: the process's start time (clock ticks after boot; pids get reused)
 *
 * A process with another boot id or pid namespace (another host, another
 * container) never matches the first field, so it only ever waits for the
 * lease: a lease is taken early only from a process known to be gone.
 */
#define OWNER_HOST_HEX 12

static int read_line(const char *path, char *buf, size_t n)
{
    char *text = NULL;
    size_t len = 0;
    int r = read_file(path, 4096, &text, &len);

    if (r < 0) {
        return r;
    }
    len = strcspn(text, "\n");
    if (len >= n) {
        free(text);
        return -ENAMETOOLONG;
    }
    memcpy(buf, text, len);
    buf[len] = '\0';
    free(text);
    return 0;
}

/* Field 22 of /proc/PID/stat; the comm field (2) may hold spaces and parentheses. */
static int proc_start_time(pid_t pid, unsigned long long *ret)
{
    char path[64], line[1024];
    const char *p;
    int r;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    r = read_line(path, line, sizeof(line));
    if (r < 0) {
        return r;
    }
    p = strrchr(line, ')');
    if (!p) {
        return -EIO;
    }
    p++;
    for (int field = 3; field < 22; field++) {
        p = strchr(p + 1, ' ');
        if (!p) {
            return -EIO;
        }
    }
    return sscanf(p, " %llu", ret) == 1 ? 0 : -EIO;
}

/* 64-bit FNV-1a of the boot id and the pid namespace, the first 48 bits as 12 hex. */
static int host_key(char out[OWNER_HOST_HEX + 1])
{
    char boot[64], ns[64] = { 0 };
    uint64_t h = 0xcbf29ce484222325ULL;
    ssize_t n;
    int r = read_line("/proc/sys/kernel/random/boot_id", boot, sizeof(boot));

    if (r < 0) {
        return r;
    }
    n = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
    if (n <= 0) {
        return -errno;
    }
    for (const char *s = boot; *s; s++) {
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    }
    h = (h ^ '/') * 0x100000001b3ULL;
    for (const char *s = ns; *s; s++) {
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    }
    snprintf(out, OWNER_HOST_HEX + 1, "%012llx", (unsigned long long)(h >> 16));
    return 0;
}

static void owner_id_new(char out[33])
{
    char host[OWNER_HOST_HEX + 1];
    unsigned long long start;
    pid_t pid = getpid();

    if (host_key(host) < 0 || proc_start_time(pid, &start) < 0 || pid > 0xfffffff ||
        start > 0xfffffffffffffULL) {
        /* Nothing to prove deadness with: a random id, whose leases only lapse. */
        if (random_hex(out, 16) < 0) {
            snprintf(out, 33, "%032llx", (unsigned long long)now_us());
        }
        return;
    }
    snprintf(out, 33, "%s%07x%013llx", host, (unsigned)pid, start);
}

/* True when owner is a process of this host (and pid namespace) that no longer runs. */
static bool owner_is_dead_here(const char *owner, const char *self)
{
    char host[OWNER_HOST_HEX + 1], pid_hex[8], start_hex[14];
    unsigned long long start, now_start;
    char *end;
    long pid;

    if (!owner || strlen(owner) != 32 || strcmp(owner, self) == 0 || host_key(host) < 0 ||
        strncmp(owner, host, OWNER_HOST_HEX) != 0) {
        return false;
    }
    memcpy(pid_hex, owner + OWNER_HOST_HEX, 7);
    pid_hex[7] = '\0';
    memcpy(start_hex, owner + OWNER_HOST_HEX + 7, 13);
    start_hex[13] = '\0';
    errno = 0;
    pid = strtol(pid_hex, &end, 16);
    if (errno || *end || pid <= 0) {
        return false;
    }
    start = strtoull(start_hex, &end, 16);
    if (*end) {
        return false;
    }
    /* Gone, or its pid now names a process started at another time. */
    return proc_start_time((pid_t)pid, &now_start) == -ENOENT || now_start != start;
}

/*
 * At start: unfinished operations whose lease a dead process of this host
 * holds (a kill -9 or crash of space-api) are freed for claiming now, not
 * when the lease lapses. Freeing is a renewal as their owner to 0 ("free"),
 * so it cannot touch a lease someone else took meanwhile.
 */
static void take_over_dead_leases(struct manager *m)
{
    struct store_operation *ops = NULL;
    size_t n = 0;
    int64_t now = now_us();

    if (store_operation_list_unfinished(m->store, &ops, &n) < 0) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (ops[i].lease_expires_at <= now ||
            !owner_is_dead_here(ops[i].lease_owner, m->owner_id)) {
            continue;
        }
        if (store_operation_renew(m->store, ops[i].id, ops[i].lease_owner, 0) >= 0) {
            log_sandbox_info(ops[i].sandbox_id,
                             "operation %s %s: its runner (a process of this host) is gone, "
                             "taking it over",
                             ops[i].kind, ops[i].id);
        }
    }
    store_operation_list_free(ops, n);
}

static int inflight_add(struct manager *m, const char *id)
{
    struct inflight_op *p = realloc(m->inflight, (m->n_inflight + 1) * sizeof(*p));
    if (!p) {
        return -ENOMEM;
    }
    m->inflight = p;
    p[m->n_inflight] = (struct inflight_op){ .renewed_at = now_monotonic() };
    snprintf(p[m->n_inflight].id, sizeof(p[m->n_inflight].id), "%s", id);
    m->n_inflight++;
    return 0;
}

static void inflight_remove(struct manager *m, const char *id)
{
    for (size_t i = 0; i < m->n_inflight; i++) {
        if (strcmp(m->inflight[i].id, id) == 0) {
            m->inflight[i] = m->inflight[--m->n_inflight];
            return;
        }
    }
}

/* Keeps the leases of running operations; a lost one means another controller took over. */
static void renew_leases(struct manager *m)
{
    usec_t now = now_monotonic();

    for (size_t i = 0; i < m->n_inflight; i++) {
        struct inflight_op *o = &m->inflight[i];
        int r;

        if (now - o->renewed_at < RENEW_USEC) {
            continue;
        }
        r = store_operation_renew(m->store, o->id, m->owner_id, now_us() + LEASE_USEC);
        if (r == -ESTALE) {
            log_warning("lost the lease of operation %s: another controller runs it now", o->id);
        } else if (r < 0) {
            log_warning_errno(r, "cannot renew the lease of operation %s: %m", o->id);
            continue;
        }
        o->renewed_at = now;
    }
}

static int add_operation(struct manager *m, enum operation_kind kind, const char *sandbox_id,
                         bool claim, char ret_id[33])
{
    int64_t now = now_us();
    int r = random_hex(ret_id, 16);
    if (r < 0) {
        return r;
    }
    struct store_operation op = { .id = ret_id,
                                  .kind = (char *)operation_kind_to_string(kind),
                                  .sandbox_id = (char *)sandbox_id,
                                  .state = claim ? "running" : "pending",
                                  .created_at = now,
                                  .updated_at = now,
                                  .lease_owner = claim ? m->owner_id : NULL,
                                  .lease_expires_at = claim ? now + (int64_t)LEASE_USEC : 0,
                                  .attempts = claim ? 1 : 0 };
    r = store_operation_insert(m->store, &op);
    /* Inside the caller's transaction: a crash here leaves nothing behind. */
    return r < 0 ? r : op_fault(op.kind, "inserted");
}

int controller_add_operation(struct manager *m, enum operation_kind kind, const char *sandbox_id,
                             char ret_id[33])
{
    return add_operation(m, kind, sandbox_id, false, ret_id);
}

int controller_add_create(struct manager *m, const char *sandbox_id, char ret_id[33],
                          bool *ret_claimed)
{
    bool claim = !m->stopping && m->n_inflight < MAX_INFLIGHT_OPS;
    int r = add_operation(m, OPERATION_KIND_CREATE, sandbox_id, claim, ret_id);

    *ret_claimed = r >= 0 && claim;
    return r;
}

/* The agent's /init body: sandbox env (E2B's fixed vars first, the caller's win), token, user. */
static char *init_json_for(const struct store_sandbox *sb)
{
    json_error_t err;
    json_t *env = json_object(),
           *user_env = json_loads(sb->env_json ? sb->env_json : "{}", 0, &err);
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
    json_t *init =
        json_pack("{s:o, s:s, s:s}", "envVars", env, "defaultUser", "user", "timestamp", ts);
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

    op_runners[j->kind](j);
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

/*
 * Writes state to the sandbox of an operation of kind, after checking the
 * move against the lifecycle table: a move the table does not allow is a
 * bug here, not bad input (the store only holds states this file wrote).
 */
static int set_sandbox_state(struct manager *m, enum operation_kind kind, const char *id,
                             enum sandbox_state from, enum sandbox_state to, const char *error,
                             int64_t now)
{
    if (!operation_transition_is_valid(kind, from, to)) {
        log_sandbox_error(id, "%s would move the sandbox from %s to %s: not in the table",
                          operation_kind_to_string(kind), sandbox_state_to_string(from),
                          sandbox_state_to_string(to));
        assert(!"transition outside the lifecycle table");
        return -EINVAL;
    }
    return store_sandbox_set_state(m->store, id, sandbox_state_to_string(to), error, now);
}

/*
 * Paused time does not eat the timeout (E2B#875, #817; architecture.md "A sandbox's life"):
 * a pause or suspend stops the sandbox's clock and keeps what was left (remaining_us), and
 * resume or restore gives it back (end_at = now + remaining). A sandbox paused at (or past)
 * its end time, as the auto-pause at the timeout does, has nothing left: it gets
 * --default-timeout when it runs again. One with no end time keeps none (-1). E2B connect's
 * timeout then only ever extends that. Written in the transaction that records the state.
 */
static int lifetime_on_success(struct manager *m, enum operation_kind kind,
                               const struct store_sandbox *sb, int64_t now)
{
    int64_t fallback = m->default_timeout_s * (int64_t)USEC_PER_SEC;
    struct store_sandbox upd = { .id = sb->id, .updated_at = now };

    if (kind == OPERATION_KIND_PAUSE || kind == OPERATION_KIND_SUSPEND ||
        kind == OPERATION_KIND_SUSPEND_DISK) {
        upd.remaining_us = !sb->end_at                                ? -1
                           : sb->end_at - now > (int64_t)USEC_PER_SEC ? sb->end_at - now
                                                                      : fallback;
        upd.end_at = sb->end_at;
    } else if (kind == OPERATION_KIND_RESUME || kind == OPERATION_KIND_RESTORE ||
               kind == OPERATION_KIND_RESTORE_DISK) {
        int64_t left = sb->remaining_us;
        if (left == 0) { /* paused by a release that kept nothing */
            left = !sb->end_at ? -1 : sb->end_at - now > 0 ? sb->end_at - now : fallback;
        }
        upd.end_at = left < 0 ? 0 : now + left;
        upd.remaining_us = 0;
    } else {
        return 0;
    }
    return store_sandbox_update_fields(
        m->store, &upd, STORE_SANDBOX_END_AT | STORE_SANDBOX_REMAINING | STORE_SANDBOX_UPDATED_AT);
}

/*
 * Records the outcome of an operation this process holds the lease of, and
 * what it means for its sandbox (the kind's end state from the table), in
 * one transaction. When the lease was lost (another controller took the
 * operation over), nothing is written: the other runner's outcome counts.
 */
/*
 * Whether a resumed or restored sandbox gets its policy again: the node brings back the one
 * it held when the sandbox stopped, sealed values and all, and secrets_resend() passes over
 * paused and suspended sandboxes (no sandbox.network starts from those states). A secret
 * rotated (or deleted) meanwhile must apply from the first request after, so a sandbox whose
 * rules name secrets is sent them as they are now, in the transaction that records it
 * running (docs/architecture.md "Credentials").
 */
static bool resends_policy(enum operation_kind kind, const struct store_sandbox *sb)
{
    json_t *native;
    bool inject;

    if (kind != OPERATION_KIND_RESUME && kind != OPERATION_KIND_RESTORE &&
        kind != OPERATION_KIND_RESTORE_DISK) {
        return false;
    }
    native = egress_native(sb->network_json);
    inject = json_array_size(json_object_get(native, "inject")) > 0;
    json_decref(native);
    return inject;
}

/* size: a create's, as the node answered (NULL or 0: none), recorded on a sandbox whose
 * create named none (the template's default: the node knows it) or another. snap: a snapshot
 * operation's (its id and bytes are recorded with its success), or NULL. */
static void op_finish(struct manager *m, const struct store_operation *done, int r,
                      const char *error, int status, json_t *timings, const int64_t size[2],
                      const struct store_snapshot *snap, int64_t snap_bytes)
{
    struct store_operation upd = *done, *op = &upd; /* borrowed strings, changed fields */
    enum operation_kind kind = operation_kind_from_string(op->kind);
    const struct operation_kind_info *info = operation_kind_info(kind);
    json_t *res = json_pack("{s:i}", "status", status);
    char *result = NULL;
    struct store_sandbox sb = { 0 };
    bool have_sb = op->sandbox_id && store_sandbox_get(m->store, op->sandbox_id, &sb) >= 0;
    enum sandbox_state from =
        have_sb ? sandbox_state_from_string(sb.state) : _SANDBOX_STATE_INVALID;
    enum sandbox_state to = !info    ? _SANDBOX_STATE_INVALID
                            : r >= 0 ? info->on_success
                                     : info->on_failure;
    int64_t now = now_us();
    int k;

    op->state = r < 0 ? "failed" : "succeeded";
    op->error = r < 0 ? (char *)(error ? error : "failed") : NULL;
    /* The node's HTTP status lets the API answer a failed create precisely (404 template). */
    if (res && timings) {
        json_object_set(res, "node_timings_ms", timings);
    }
    result = res ? json_dumps(res, JSON_COMPACT) : NULL;
    json_decref(res);
    op->result_json = result;
    op->updated_at = now;
    /* A create's outcome is about a VM a host crash kills: it need not wait for the disk
     * (store_begin_relaxed()). Every other outcome (a suspend, a snapshot) is durable. */
    k = kind == OPERATION_KIND_CREATE ? store_begin_relaxed(m->store) : store_begin(m->store);
    if (k >= 0) {
        k = store_operation_finish(m->store, op, m->owner_id);
    }
    if (k >= 0 && have_sb && from >= 0 && to >= 0 && to != from) {
        /* A failed create keeps its reason on the sandbox; other outcomes keep its error. */
        const char *sb_error =
            kind == OPERATION_KIND_CREATE && r < 0 ? (error ? error : "create failed") : sb.error;
        k = set_sandbox_state(m, kind, sb.id, from, to, sb_error, now);
    }
    if (k >= 0 && have_sb && r >= 0 && to != from) {
        k = lifetime_on_success(m, kind, &sb, now);
    }
    if (k >= 0 && have_sb && r >= 0 && kind == OPERATION_KIND_CREATE && size && size[0] > 0 &&
        size[1] > 0 && (size[0] != sb.vcpus || size[1] != sb.memory_mb)) {
        struct store_sandbox sized = { .id = sb.id, .vcpus = size[0], .memory_mb = size[1] };
        k = store_sandbox_update_fields(m->store, &sized,
                                        STORE_SANDBOX_VCPUS | STORE_SANDBOX_MEMORY_MB);
    }
    /* The commit that makes a snapshot restorable: after the node's own (disk-snapshot.h). */
    if (k >= 0 && kind == OPERATION_KIND_SNAPSHOT) {
        k = store_snapshot_finish(m->store, op->id, r >= 0, now);
        if (k >= 0 && r >= 0 && snap && snap->id && snap_bytes > 0) {
            k = store_snapshot_set_bytes(m->store, snap->id, snap_bytes);
            k = k == -ENOENT ? 0 : k;
        }
    }
    if (k >= 0 && have_sb && r >= 0 && resends_policy(kind, &sb)) {
        char net_op[33];
        k = controller_add_operation(m, OPERATION_KIND_NETWORK, sb.id, net_op);
    }
    k = k < 0 ? (store_rollback(m->store), k) : store_commit(m->store);
    if (k == -ESTALE) {
        log_sandbox_warning(op->sandbox_id,
                            "operation %s %s was taken over by another controller, "
                            "dropping this outcome",
                            op->kind, op->id);
        goto out;
    }
    if (k < 0) {
        /* The lease lapses and the operation runs again: every step is idempotent. */
        log_sandbox_warning(op->sandbox_id, "cannot record operation %s %s: %s", op->kind, op->id,
                            strerror(-k));
        goto out;
    }
    if (have_sb) {
        route_cache_sync(m->routes, m->store, sb.id);
    }
    if (r < 0) {
        log_sandbox_warning(op->sandbox_id, "operation %s %s failed: %s", op->kind, op->id,
                            error ? error : "");
    }
    /* Recorded, nobody told yet: a restart must answer from the store. */
    (void)op_fault(op->kind, "recorded");
    wake_waiters(m, op);
out:
    store_sandbox_release(&sb);
    free(result);
}

static void op_job_free(struct op_job *j)
{
    json_decref(j->timings);
    store_operation_release(&j->op);
    store_sandbox_release(&j->sb);
    store_snapshot_release(&j->snap);
    free(j->node_socket);
    free(j->init_json);
    free(j->error);
    free(j);
}

static void op_done(void *p)
{
    struct op_job *j = p;
    struct manager *m = j->m;

    inflight_remove(m, j->op.id);
    /* The node has answered, the outcome is not recorded yet. */
    (void)op_fault(j->op.kind, "answered");
    const int64_t size[2] = { j->vcpus, j->memory_mb };
    op_finish(m, &j->op, j->r, j->error, j->status, j->timings, size, &j->snap, j->bytes);
    op_job_free(j);
    controller_kick(m);
}

/*
 * The policy the worker hands the node: the stored one plus the sealed secrets its inject
 * rules name, read now (secrets.h), in place of sb's network_json (what egress_native()
 * reads on the worker). A secret rotated or deleted after this re-sends the policy.
 */
static int wire_policy(struct manager *m, struct store_sandbox *sb)
{
    json_t *wire = secrets_wire_policy(m, sb),
           *doc = wire ? json_pack("{s:o}", "native", wire) : NULL;
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;

    json_decref(doc);
    if (!text) {
        return -ENOMEM;
    }
    free(sb->network_json);
    sb->network_json = text;
    return 0;
}

/*
 * Starts a worker for op, claimed by this process, dispatching by its kind;
 * takes op's strings on success. -ENOENT: its sandbox is gone; -EOPNOTSUPP:
 * a kind the table has but nothing implements yet (or one it does not know).
 */
static int op_start(struct manager *m, struct store_operation *op)
{
    enum operation_kind kind = operation_kind_from_string(op->kind);
    const struct operation_kind_info *info = operation_kind_info(kind);
    struct op_job *j = NULL;
    int r;

    if (!info || !info->implemented || !op_runners[kind]) {
        return -EOPNOTSUPP;
    }
    j = calloc(1, sizeof(*j));
    if (!j) {
        return -ENOMEM;
    }
    *j = (struct op_job){ .m = m, .kind = kind, .from = _SANDBOX_STATE_INVALID };
    if (op->sandbox_id) {
        r = store_sandbox_get(m->store, op->sandbox_id, &j->sb);
        if (r < 0) {
            goto fail;
        }
        j->from = sandbox_state_from_string(j->sb.state);
        if (j->from < 0) {
            log_sandbox_error(j->sb.id, "unknown state '%s' in the store", j->sb.state);
            r = -EIO;
            goto fail;
        }
        /* The request was checked against the table; the state may have moved since
         * (a sandbox lost by its node): then the operation fails, as a 409 would. */
        if (info->transitional >= 0 &&
            !operation_transition_is_valid(kind, j->from, info->transitional)) {
            r = -EBUSY;
            goto fail;
        }
        /* A kind that changes no state still needs a sandbox it may run on: a policy for
         * one whose create failed has nobody to go to. */
        if (info->transitional < 0 && kind != OPERATION_KIND_KILL &&
            !(info->from & SANDBOX_STATE_BIT(j->from))) {
            r = j->from == SANDBOX_KILLED ? -ENOENT : -EBUSY;
            goto fail;
        }
        /* Entering the kind's transitional state (create's row starts in it). */
        if (info->transitional >= 0 && info->transitional != j->from) {
            r = set_sandbox_state(m, kind, j->sb.id, j->from, info->transitional, j->sb.error,
                                  now_us());
            route_cache_sync(m->routes, m->store, j->sb.id);
            if (r < 0) {
                goto fail;
            }
        }
    }
    if (kind == OPERATION_KIND_CREATE || kind == OPERATION_KIND_NETWORK) {
        r = wire_policy(m, &j->sb);
        if (r < 0) {
            goto fail;
        }
    }
    if (kind == OPERATION_KIND_SNAPSHOT) {
        r = store_snapshot_get_by_operation(m->store, op->id, &j->snap);
        if (r < 0) {
            goto fail; /* -ENOENT: nothing to take */
        }
    }
    /* A create whose template is a snapshot restores it: a branch (snapshots.h). */
    if (kind == OPERATION_KIND_CREATE &&
        store_snapshot_get(m->store, j->sb.template_id, &j->snap) >= 0 &&
        strcmp(j->snap.state, STORE_SNAPSHOT_COMPLETE) != 0) {
        store_snapshot_release(&j->snap);
        r = -ENOENT;
        goto fail;
    }
    if (kind == OPERATION_KIND_CREATE) {
        j->init_json = init_json_for(&j->sb);
        if (!j->init_json) {
            r = -ENOMEM;
            goto fail;
        }
    }
    j->node_socket = strdup(m->node_socket);
    if (!j->node_socket) {
        r = -ENOMEM;
        goto fail;
    }
    /* tests/api/test_replicas.py counts these lines: one per claim. */
    log_sandbox_info(op->sandbox_id, "running operation %s %s (attempt %lld)", op->kind, op->id,
                     (long long)op->attempts);
    r = inflight_add(m, op->id);
    if (r < 0) {
        goto fail;
    }
    j->op = *op;
    r = event_util_run_job(m->base, &m->jobs, op_work, op_done, j);
    if (r < 0) {
        inflight_remove(m, op->id);
        j->op = (struct store_operation){ 0 }; /* still the caller's */
        goto fail;
    }
    *op = (struct store_operation){ 0 };
    /* The worker is calling the node: it goes on without us. */
    (void)op_fault(j->op.kind, "started");
    return 0;
fail:
    op_job_free(j);
    return r;
}

/*
 * Starts an operation leased to us and committed. One that can never run is
 * ended; one that failed to start stays leased and is claimed again when the
 * lease lapses. Returns < 0 when the caller should stop starting more.
 */
static int start_claimed(struct manager *m, struct store_operation *op)
{
    /* Claimed and committed, nothing started: the lease is all that is left. */
    (void)op_fault(op->kind, "claimed");
    int r = op_start(m, op);
    if (r == -ENOENT) {
        /* Its sandbox row is gone: the operation can never run; end it instead of
         * retrying it whenever its lease lapses. */
        op_finish(m, op, r, "sandbox no longer exists", 404, NULL, NULL, NULL, 0);
    } else if (r == -EOPNOTSUPP || r == -EBUSY) {
        char msg[128];

        snprintf(msg, sizeof(msg),
                 r == -EBUSY ? "%s cannot run in the sandbox's state" : "%s is not implemented yet",
                 op->kind);
        op_finish(m, op, r, msg, r == -EBUSY ? 409 : 501, NULL, NULL, NULL, 0);
    } else if (r < 0) {
        log_warning_errno(r, "cannot start operation %s: %m", op->id);
        return r;
    }
    return 0;
}

/*
 * Claims and starts operations until none is claimable or enough run. The
 * claim is what keeps two controllers (replicas on one database) from ever
 * running one operation at once; see store_operation_claim().
 */
/*
 * Whether any operation is pending or running. A read, so it never waits on
 * a writer (SQLite WAL; PostgreSQL MVCC), where the claim is a write that
 * would: an idle tick then leaves the loop, and the ingress on it, free even
 * while another process holds the database's write lock.
 */
static bool have_unfinished(struct manager *m)
{
    struct store_operation *ops = NULL;
    size_t n = 0;

    if (store_operation_list_unfinished(m->store, &ops, &n) < 0) {
        return true; /* let the claim report the error */
    }
    store_operation_list_free(ops, n);
    return n > 0;
}

void controller_kick(struct manager *m)
{
    if (!have_unfinished(m)) {
        return;
    }
    while (!m->stopping && m->n_inflight < MAX_INFLIGHT_OPS) {
        struct store_operation op = { 0 };
        int64_t now = now_us();
        int r;

        r = store_operation_claim(m->store, m->owner_id, now, now + (int64_t)LEASE_USEC, &op);
        if (r == -ENOENT) {
            return;
        }
        if (r < 0) {
            log_warning_errno(r, "cannot claim operations: %m");
            return;
        }
        r = start_claimed(m, &op);
        store_operation_release(&op);
        if (r < 0) {
            return;
        }
    }
}

void controller_start_claimed(struct manager *m, const char *op_id)
{
    struct store_operation op = { 0 };
    int r = store_operation_get(m->store, op_id, &op);

    if (r < 0) {
        /* Left leased: it is claimed again once the lease lapses. */
        log_warning_errno(r, "cannot read operation %s: %m", op_id);
        return;
    }
    (void)start_claimed(m, &op);
    store_operation_release(&op);
}

/* controller_request(), plus a new egress policy written in its transaction (NETWORK). */
static int request(struct manager *m, enum operation_kind kind, const char *sandbox_id,
                   const char *network_json, const struct store_snapshot *snap, char ret_op_id[33],
                   enum sandbox_state *ret_state)
{
    const struct operation_kind_info *info = operation_kind_info(kind);
    struct store_sandbox sb = { 0 };
    struct store_operation busy = { 0 };
    enum sandbox_state state;
    bool queued_behind = false;
    int r;

    if (!info || info->creates) {
        return -EINVAL;
    }
    r = store_sandbox_get(m->store, sandbox_id, &sb);
    if (r < 0) {
        return r;
    }
    state = sandbox_state_from_string(sb.state);
    if (ret_state) {
        *ret_state = state;
    }
    /* Being killed is gone for callers, as killed is. */
    if (state < 0 || strcmp(sb.desired_state, SANDBOX_STATE_KILLED) == 0) {
        r = state < 0 ? -EIO : -ENOENT;
        goto out;
    }
    r = operation_check_start(kind, state);
    if (r < 0) {
        goto out;
    }
    r = store_operation_get_unfinished(m->store, sandbox_id, &busy);
    if (r >= 0) {
        /* One at a time: a conflicting kind is refused, a queued one runs after it. */
        if (info->busy == OPERATION_BUSY_CONFLICT) {
            r = -EBUSY;
            goto out;
        }
        queued_behind = true;
    } else if (r != -ENOENT) {
        goto out;
    }
    r = store_begin(m->store);
    if (r >= 0 && kind == OPERATION_KIND_KILL) {
        r = store_sandbox_set_desired_state(m->store, sandbox_id, SANDBOX_STATE_KILLED, now_us());
    }
    if (r >= 0 && kind == OPERATION_KIND_NETWORK) {
        r = store_sandbox_set_network(m->store, sandbox_id, network_json, now_us());
    }
    if (r >= 0) {
        r = controller_add_operation(m, kind, sandbox_id, ret_op_id);
    }
    if (r >= 0 && snap) {
        /* Pending until the operation succeeds (store.h): never offered half-taken. A
         * branch's template_id is its snapshot's id: the template is that one's. */
        struct store_snapshot row = *snap, parent = { 0 };
        bool branch = store_snapshot_get(m->store, sb.template_id, &parent) >= 0;
        row.operation_id = ret_op_id;
        row.sandbox_id = sb.id;
        row.owner = sb.client_id;
        row.template_id = branch ? parent.template_id : sb.template_id;
        row.node_id = sb.node_id ? sb.node_id : "local";
        row.vcpus = sb.vcpus;
        row.memory_mb = sb.memory_mb;
        r = store_snapshot_insert(m->store, &row);
        store_snapshot_release(&parent);
    }
    r = r < 0 ? (store_rollback(m->store), r) : store_commit(m->store);
    if (r < 0) {
        goto out;
    }
    /* A kill's intent unroutes the sandbox at once, before the node has stopped it. */
    route_cache_sync(m->routes, m->store, sandbox_id);
    /* Behind a create, which can take minutes, the caller is not asked to wait. */
    if (queued_behind && busy.kind && strcmp(busy.kind, OPERATION_CREATE) == 0) {
        ret_op_id[0] = '\0';
    }
    controller_kick(m);
out:
    store_operation_release(&busy);
    store_sandbox_release(&sb);
    return r;
}

int controller_request(struct manager *m, enum operation_kind kind, const char *sandbox_id,
                       char ret_op_id[33], enum sandbox_state *ret_state)
{
    if (kind == OPERATION_KIND_NETWORK) {
        return -EINVAL; /* needs its policy: controller_request_network() */
    }
    if (kind == OPERATION_KIND_SNAPSHOT) {
        return -EINVAL; /* needs its row: controller_request_snapshot() */
    }
    return request(m, kind, sandbox_id, NULL, NULL, ret_op_id, ret_state);
}

int controller_request_kill(struct manager *m, const char *sandbox_id, char ret_op_id[33])
{
    return controller_request(m, OPERATION_KIND_KILL, sandbox_id, ret_op_id, NULL);
}

int controller_request_network(struct manager *m, const char *sandbox_id, const char *network_json,
                               char ret_op_id[33], enum sandbox_state *ret_state)
{
    if (!network_json) {
        return -EINVAL;
    }
    return request(m, OPERATION_KIND_NETWORK, sandbox_id, network_json, NULL, ret_op_id, ret_state);
}

int controller_request_snapshot(struct manager *m, const char *sandbox_id,
                                const struct store_snapshot *snap, char ret_op_id[33],
                                enum sandbox_state *ret_state)
{
    if (!snap || !snap->id || !snap->kind) {
        return -EINVAL;
    }
    return request(m, OPERATION_KIND_SNAPSHOT, sandbox_id, NULL, snap, ret_op_id, ret_state);
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

int controller_failed_status(const struct store_operation *op)
{
    json_error_t err;
    json_t *res = op->result_json ? json_loads(op->result_json, 0, &err) : NULL;
    int status = (int)json_integer_value(json_object_get(res, "status"));

    json_decref(res);
    return status;
}

void controller_reply_unfinished(struct manager *m, struct evhttp_request *req,
                                 const char *timeout_message)
{
    if (m->stopping) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
        http_util_reply_error(req, 503,
                              "space-api is shutting down before the operation finished; it goes "
                              "on and is finished by the next start or another replica: retry, "
                              "or read the sandbox");
        return;
    }
    http_util_reply_error(req, 504, "%s", timeout_message);
}

/*
 * Ends waits that timed out, and those whose operation another controller
 * finished (a replica on the same database): only the runner wakes its own
 * waiters at once, everyone else learns it from the store on the tick.
 */
static void poll_waiters(struct manager *m)
{
    usec_t now = now_monotonic();
    struct waiter **pp = &m->waiters;
    while (*pp) {
        struct waiter *w = *pp;
        struct store_operation op = { 0 };
        bool finished = store_operation_get(m->store, w->op_id, &op) >= 0 &&
                        (strcmp(op.state, "succeeded") == 0 || strcmp(op.state, "failed") == 0);

        if (finished || (w->deadline && w->deadline <= now)) {
            *pp = w->next;
            w->fn(m, w->req, finished ? &op : NULL, w->userdata);
            free(w);
        } else {
            pp = &w->next;
        }
        store_operation_release(&op);
    }
}

/* Sandboxes whose end time passed are killed, or suspended when they asked for it
 * (autoPause). Paused and suspended ones are not listed: their clock stands still. */
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
            if (list[i].auto_pause) {
                /* -EBUSY while another operation runs: the next tick asks again. */
                enum operation_kind kind =
                    list[i].auto_pause_disk ? OPERATION_KIND_SUSPEND_DISK : OPERATION_KIND_SUSPEND;
                if (controller_request(m, kind, list[i].id, op, NULL) >= 0) {
                    log_sandbox_info(list[i].id, "timeout reached, suspending (autoPause%s)",
                                     list[i].auto_pause_disk ? ", without memory" : "");
                }
                continue;
            }
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
    json_t *node_failed; /* the node's "failed": sandboxes whose VMM ended on its own */
    int r;
};

static void sync_work(void *p)
{
    struct sync_job *j = p;
    j->r = node_client_list(j->node_socket, &j->node_list, &j->node_failed);
}

/* "<reason>: <message>" when the node reports id failed (node manager.h), else NULL.
 * Node text, bounded and printable only: it lands in the store and in API answers. */
static char *failure_text(json_t *failed, const char *id)
{
    size_t i;
    json_t *v;
    json_array_foreach (failed, i, v) {
        const char *fid = json_string_value(json_object_get(v, "id"));
        const char *reason = json_string_value(json_object_get(v, "reason"));
        const char *message = json_string_value(json_object_get(v, "message"));
        if (!fid || strcmp(fid, id) != 0 || !reason || !message) {
            continue;
        }
        char *text = NULL;
        if (asprintf(&text, "%.32s: %.255s", reason, message) < 0) {
            return NULL;
        }
        for (char *c = text; *c; c++) {
            if (*c < 0x20 || *c >= 0x7f) {
                *c = '?';
            }
        }
        return text;
    }
    return NULL;
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

/*
 * The stored policy is the desired one (store first, operation.c): a node that enforces
 * another (a replace it failed, a node restored from an older instance.json) gets it again
 * through a sandbox.network operation. A node that does not show its policy (older than
 * egress) is left alone.
 */
static void sync_network(struct manager *m, const struct store_sandbox *sb, json_t *on_node)
{
    json_t *want;
    char op[33];

    if (!json_is_object(on_node)) {
        return;
    }
    /* What the node was sent (rules of deleted secrets left out), sealed values aside: they
     * differ on every send (sealed-secret.h) and the node need not show them. */
    want = secrets_wire_policy(m, sb);
    json_t *shown = json_copy(on_node);
    if (want) {
        json_object_del(want, "secrets");
    }
    if (shown) {
        json_object_del(shown, "secrets");
    }
    bool differs = want && shown && !json_equal(want, shown);
    json_decref(shown);
    if (differs) {
        log_sandbox_warning(sb->id, "the node enforces another egress policy, sending it again");
        if (store_begin(m->store) >= 0) {
            if (controller_add_operation(m, OPERATION_KIND_NETWORK, sb->id, op) < 0) {
                (void)store_rollback(m->store);
            } else {
                (void)store_commit(m->store);
            }
        }
    }
    json_decref(want);
}

static void sync_done(void *p)
{
    struct sync_job *j = p;
    struct manager *m = j->m;
    /* A paused sandbox lives on its node too (its memory is there). */
    static const char *const live[] = { SANDBOX_STATE_RUNNING, "paused", "suspended", NULL };
    struct store_sandbox_filter f = { .states = live };
    struct store_sandbox *list = NULL;
    size_t n = 0, i;
    json_t *v;

    if (j->r < 0 || m->stopping) {
        goto out;
    }
    /* On the node but not wanted: kill it there. */
    json_array_foreach (j->node_list, i, v) {
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
            if (r == -ENOENT || controller_add_operation(m, OPERATION_KIND_KILL, id, op) < 0) {
                (void)store_rollback(m->store);
            } else {
                (void)store_commit(m->store);
            }
        } else if (r >= 0 && strcmp(sb.state, SANDBOX_STATE_RUNNING) == 0 &&
                   strcmp(sb.desired_state, SANDBOX_STATE_RUNNING) == 0) {
            sync_network(m, &sb, json_object_get(v, "network"));
        }
        store_sandbox_release(&sb);
    }
    /* Running in the store but gone from the node: it is lost. */
    if (store_sandbox_list(m->store, &f, &list, &n) >= 0) {
        for (size_t k = 0; k < n; k++) {
            bool found = false;
            json_array_foreach (j->node_list, i, v) {
                found = found ||
                        strcmp(json_string_value(json_object_get(v, "id")) ?: "", list[k].id) == 0;
            }
            if (!found && !sandbox_busy(m, list[k].id)) {
                char *why = failure_text(j->node_failed, list[k].id);
                log_sandbox_warning(list[k].id, "the node no longer has this sandbox: %s",
                                    why ?: "lost");
                (void)store_sandbox_set_state(m->store, list[k].id, SANDBOX_STATE_KILLED,
                                              why ?: "lost by its node", now_us());
                route_cache_sync(m->routes, m->store, list[k].id);
                free(why);
            }
        }
        store_sandbox_list_free(list, n);
    }
    controller_kick(m);
out:
    json_decref(j->node_list);
    json_decref(j->node_failed);
    free(j->node_socket);
    free(j);
}

/* Other writers' changes (replicas on one database) and the periodic backstop reload. */
static void refresh_routes(struct manager *m)
{
    int r;

    if (!m->routes) {
        return;
    }
    if (now_monotonic() - m->last_route_reload >= ROUTE_CACHE_RELOAD_USEC) {
        r = route_cache_load(m->routes, m->store, now_us());
        if (r >= 0) {
            m->last_route_reload = now_monotonic();
        }
    } else {
        r = route_cache_poll(m->routes, m->store, now_us());
    }
    if (r < 0) {
        log_warning_errno(r, "cannot refresh the route cache: %m");
    }
}

static void tick_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct manager *m = userdata;

    if (m->stopping) {
        return;
    }
    renew_leases(m);
    refresh_routes(m);
    poll_waiters(m);
    enforce_timeouts(m);
    controller_kick(m);
    egress_audit_tick(m);
    secrets_tick(m);
    branch_tick(m);
    rolling_tick(m);
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

    /* Operations a previous process left "running" are run again: at once when it was a
     * process of this host that is gone, else once their lease lapses; every step is
     * idempotent. The owner id is new on every start (it names this process), so a
     * restarted process never mistakes an old lease for one it holds. */
    owner_id_new(m->owner_id);
    log_debug("lease owner id %s", m->owner_id);
    take_over_dead_leases(m);
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
    /* Operations still running are left to the next start or another replica: their
     * leases are freed so it need not wait for them to lapse (the node's create and kill
     * are idempotent, so a second runner meets the first's work, not a duplicate). */
    for (size_t i = 0; i < m->n_inflight; i++) {
        int r = store_operation_renew(m->store, m->inflight[i].id, m->owner_id, 0);
        if (r < 0 && r != -ESTALE) {
            log_warning_errno(r, "cannot free the lease of operation %s: %m", m->inflight[i].id);
        } else if (r >= 0) {
            log_info("leaving operation %s to the next start", m->inflight[i].id);
        }
    }
    free(m->inflight);
    m->inflight = NULL;
    m->n_inflight = 0;
    egress_audit_free(m);
}
