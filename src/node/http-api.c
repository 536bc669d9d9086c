/*
 * space-node's HTTP API (native v1, JSON), served until the control plane
 * (space-api) takes these routes over; they keep their shape then.
 *
 *   GET    /health                        node status, accelerator
 *   GET    /v1/templates                  built templates, each with its default size (vcpus,
 *                                         memory_mb) and its snapshots per size
 *   POST   /v1/templates/{name}/build     build (or confirm cached) from the recipe -> template
 *   POST   /v1/sandboxes                  {template, vcpus?, memory_mb?, id?, init?, snapshot?,
 *                                         pool?} -> 201 sandbox (a size not given: the
 *                                         template's, template-size.h) (200 when `id` already runs
 *                                         here: idempotent; snapshot: false forces a cold
 *                                         boot, pool: false a restore past the warm pool;
 *                                         from_snapshot: ID a branch of a full sandbox
 *                                         snapshot, its template and size the snapshot's;
 *                                         net_bps: its network rate each way, bytes/s, at
 *                                         most --net-bps, netrate.h; disk_bps, disk_iops:
 *                                         its disk throttling, at most --disk-bps and
 *                                         --disk-iops, and past the warm pool when not those)
 *   GET    /v1/instances                  {instances: [...]}: every VM, bound to a sandbox or not
 *   GET    /v1/pools                      warm-pool levels per template and size (pool.h)
 *   GET    /v1/capacity                   budgets, committed, free (capacity.h)
 *   GET    /v1/sandboxes                  {sandboxes: [...]}
 *   GET    /v1/sandboxes/{id}             sandbox
 *   DELETE /v1/sandboxes/{id}             204
 *   POST   /v1/sandboxes/{id}/exec        {cmd, args, env, cwd, user, timeout_ms}
 *                                         -> {exit_code, exited, status, stdout_b64, stderr_b64}
 *   PUT    /v1/sandboxes/{id}/network     native egress policy -> 200 {} (400 when invalid)
 *   POST   /v1/sandboxes/{id}/pause       QMP stop; recorded paused -> 200 sandbox (409 wrong
 * state) POST   /v1/sandboxes/{id}/resume      QMP cont, guest clock re-synced -> 200 sandbox GET
 * /v1/egress-audit?after=SEQ&limit=N   {epoch, records, next} (egress-audit.h)
 *   GET    /v1/egress-ca                  {phase, current, next, bundle, sandboxes,
 *                                          with_bundle, not_running} (src/gw/ca-set.h)
 *   POST   /v1/egress-ca/rotate           {step: stage|switch|finish} -> the same (409 out of
 *                                          order, or switch before every sandbox has the bundle)
 *
 * Create takes `network` (the native egress policy, src/gw/policy.h; absent
 * = deny everything), kept in instance.json and handed to space-gw; when the
 * node has space-gw's CA, the agent's /init gets it as `caBundle`.
 *
 * Sandboxes are addressed by sandbox id (the api's); each is bound to one
 * node-local instance (instance.h), whose id the sandbox JSON carries as
 * `instance_id`. An exec without timeout_ms gets --max-exec-timeout, and one
 * asking for more is refused. When the worker pool is full the answer is
 * 503 with Retry-After.
 *
 * Errors are {"code": <http status>, "message": "..."} everywhere. This file
 * parses and validates; the work happens in vm.c on worker threads.
 */
#include <dirent.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/queue.h>
#include <unistd.h>

#include "basic/base64.h"
#include "basic/fd-util.h"
#include "basic/fileio.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "gw/policy.h"
#include "node/capacity.h"
#include "node/manager.h"
#include "node/netrate.h"
#include "node/pool.h"
#include "node/disk-snapshot.h"
#include "node/snapshot-routes.h"
#include "node/snapshot.h"
#include "node/template-size.h"
#include "shared/gw-proto.h"
#include "shared/http-util.h"
#include "shared/sandbox-id.h"
#include "shared/spawn.h"

#define HTTP_MAX_BODY (1u << 20)
/* Canonical policy text: what fits in one attach message with room for its envelope. */
#define HTTP_MAX_POLICY (GW_PROTO_MSG_MAX - 1024)
#define MAX_VCPUS TEMPLATE_SIZE_MAX_VCPUS
#define MAX_MEMORY_MIB TEMPLATE_SIZE_MAX_MEMORY_MIB
#define MIN_MEMORY_MIB TEMPLATE_SIZE_MIN_MEMORY_MIB

static json_t *vm_to_json(const struct vm *vm)
{
    const struct instance_record *rec = &vm->rec;
    json_t *j =
        json_pack("{s:s?, s:s, s:s, s:s, s:i, s:i, s:I, s:{s:f, s:f, s:f, s:f, s:f, s:f, s:s}}",
                  "id", rec->sandbox_id[0] ? rec->sandbox_id : NULL, "instance_id", rec->iid,
                  "template", rec->template_name, "state", vm_state_to_string(rec->state), "vcpus",
                  (int)rec->vcpus, "memory_mb", (int)rec->memory_mib, "created_at_us",
                  (json_int_t)rec->created_at, "timings_ms", "clone", vm->timing.clone / 1000.0,
                  "network", vm->timing.network / 1000.0, "vmm", vm->timing.vmm / 1000.0, "boot",
                  vm->timing.boot / 1000.0, "init", vm->timing.init / 1000.0, "total",
                  vm->timing.total / 1000.0, "mode", vm->timing.restored ? "restore" : "boot");
    if (j && vm->timing.pooled) {
        json_t *t = json_object_get(j, "timings_ms");
        json_object_set_new(t, "mode", json_string("pool"));
        json_object_set_new(t, "record", json_real(vm->timing.record / 1000.0));
    }
    if (j && vm->rt) {
        json_object_set_new(j, "pid", json_integer(runtime_pid(vm->rt)));
    }
    if (j && rec->net_bps > 0) {
        json_object_set_new(j, "net_bps", json_integer((json_int_t)rec->net_bps));
    }
    if (j && rec->disk_bps > 0) {
        json_object_set_new(j, "disk_bps", json_integer((json_int_t)rec->disk_bps));
    }
    if (j && rec->disk_iops > 0) {
        json_object_set_new(j, "disk_iops", json_integer(rec->disk_iops));
    }
    if (j && rec->network) {
        json_error_t jerr;
        json_object_set_new(j, "network", json_loads(rec->network, 0, &jerr));
    }
    return j;
}

/* A sandbox whose VMM ended on its own (failed-list.h), freed already. */
static json_t *failure_to_json(const struct failure *f)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "id", f->sandbox_id, "instance_id", f->iid,
                     "state", "failed", "reason", death_reason_to_string(f->reason), "message",
                     f->message, "failed_at_us", (json_int_t)f->at);
}

json_t *http_api_vm_json(const struct vm *vm)
{
    return vm_to_json(vm);
}

/* manager_run_job() failed: the pool is full (503, retry) or the node is stopping. */
void http_api_reply_no_worker(struct evhttp_request *req, int r)
{
    if (r == -EAGAIN || r == -ESHUTDOWN) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
        http_util_reply_error(req, 503,
                              r == -EAGAIN ? "node is busy (worker pool full), retry"
                                           : "node is shutting down");
    } else {
        http_util_reply_error(req, 500, "cannot start worker: %s", strerror(-r));
    }
}

/* The capacity error (capacity.h): 503 with a Retry-After and error_code "capacity", which
 * space-api recognises and answers as its own capacity error. */
static void reply_capacity(struct evhttp_request *req, const char *why)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "5");
    http_util_reply_json(
        req, 503,
        json_pack("{s:i, s:s, s:s}", "code", 503, "error_code", "capacity", "message", why));
}

/* ---- GET /health, GET /v1/templates ---- */

static void handle_health(struct manager *m, struct evhttp_request *req)
{
    http_util_reply_json(req, 200,
                         json_pack("{s:s, s:s, s:s, s:s, s:i}", "status", "ok", "version",
                                   SPACE_VERSION, "runtime", m->host.runtime->name, "accel",
                                   runtime_accel_to_string(m->host.accel), "sandboxes",
                                   (int)m->n_vms));
}

static void handle_templates(struct manager *m, struct evhttp_request *req)
{
    char path[PATH_MAX];
    json_t *list = json_array();
    struct dirent *de;
    DIR *d;

    snprintf(path, sizeof(path), "%s/templates", m->host.data_dir);
    d = opendir(path);
    while (d && (de = readdir(d))) {
        char tdir[PATH_MAX], file[PATH_MAX + 32], *text = NULL;
        json_error_t err;
        if (vm_template_dir(&m->host, de->d_name, tdir, sizeof(tdir)) < 0) {
            continue;
        }
        snprintf(file, sizeof(file), "%s/template.json", tdir);
        if (read_file(file, 1 << 16, &text, NULL) < 0) {
            continue;
        }
        json_t *t = json_loads(text, 0, &err);
        struct template_size size;
        const char *why = NULL;
        bool sized = template_size_parse(text, &size, &why) >= 0;
        free(text);
        if (t && !sized) {
            log_warning("template '%s' is not listed: %s", de->d_name, why);
        }
        if (t && sized) {
            /* Listing a template also starts its snapshot (default size) when it has none
             * yet: snapshot.h; "snapshot" says where that is, "snapshots" every size's. */
            snapshot_prepare(&m->host, de->d_name, size.vcpus, size.memory_mib);
            pool_want(m->warm, de->d_name, size.vcpus, size.memory_mib);
            json_object_set_new(t, "name", json_string(de->d_name));
            json_object_set_new(t, "vcpus", json_integer(size.vcpus));
            json_object_set_new(t, "memory_mb", json_integer(size.memory_mib));
            json_object_set_new(
                t, "snapshot",
                json_string(snapshot_status(de->d_name, size.vcpus, size.memory_mib)));
            json_object_set_new(t, "snapshots", snapshot_sizes_to_json(de->d_name));
            json_array_append_new(list, t);
        } else {
            json_decref(t);
        }
    }
    if (d) {
        closedir(d);
    }
    http_util_reply_json(req, 200, json_pack("{s:o}", "templates", list));
}

/* ---- POST /v1/templates/{name}/build ---- */

struct build_job {
    struct manager *m;
    struct evhttp_request *req;
    char name[64];
    char *output;
    int r;
};

static void build_work(void *p)
{
    struct build_job *j = p;
    char script[PATH_MAX], recipe[PATH_MAX], out[PATH_MAX];

    snprintf(script, sizeof(script), "%s/tools/template-build.sh", j->m->share_dir);
    snprintf(recipe, sizeof(recipe), "%s/templates/%s", j->m->share_dir, j->name);
    snprintf(out, sizeof(out), "%s/templates/%s", j->m->host.data_dir, j->name);
    const char *argv[] = {
        "bash",    script,          "--recipe", recipe, "--agent", j->m->agent_path,
        "--cache", j->m->cache_dir, "--out",    out,    NULL
    };
    /* Kernel builds take minutes: this worker just waits; the loop stays free. */
    j->r = spawn_run(argv, -1, NULL, &j->output, 64 * 1024);
}

static void build_done(void *p)
{
    struct build_job *j = p;
    struct manager *m = j->m;
    char tdir[PATH_MAX], file[PATH_MAX + 32], *text = NULL;
    json_error_t err;
    json_t *t = NULL;

    if (j->r == 0 && vm_template_dir(&j->m->host, j->name, tdir, sizeof(tdir)) >= 0) {
        snprintf(file, sizeof(file), "%s/template.json", tdir);
        if (read_file(file, 1 << 16, &text, NULL) >= 0) {
            t = json_loads(text, 0, &err);
        }
    }
    if (t) {
        log_info("template '%s' built", j->name);
        http_util_reply_json(j->req, 200, t);
    } else {
        const char *o = j->output ? j->output : "";
        size_t n = strlen(o);
        http_util_reply_error(j->req, 500, "template build of '%s' failed: %s", j->name,
                              n > 2000 ? o + n - 2000 : o);
    }
    free(text);
    free(j->output);
    free(j);
    manager_job_finished(m);
}

static void handle_template_build(struct manager *m, struct evhttp_request *req, const char *name)
{
    char recipe[PATH_MAX];
    struct build_job *j;

    if (!template_name_is_valid(name)) {
        http_util_reply_error(req, 400, "invalid template name '%s'", name);
        return;
    }
    if (!m->share_dir || !m->agent_path) {
        http_util_reply_error(req, 501, "this node was started without --share-dir/--agent");
        return;
    }
    snprintf(recipe, sizeof(recipe), "%s/templates/%s", m->share_dir, name);
    if (access(recipe, R_OK) < 0) {
        http_util_reply_error(req, 404, "no recipe for template '%s'", name);
        return;
    }
    j = calloc(1, sizeof(*j));
    if (!j) {
        http_util_reply_error(req, 500, "out of memory");
        return;
    }
    *j = (struct build_job){ .m = m, .req = req };
    snprintf(j->name, sizeof(j->name), "%s", name);
    int r = manager_run_job(m, build_work, build_done, j);
    if (r < 0) {
        free(j);
        http_api_reply_no_worker(req, r);
    }
}

/* ---- POST /v1/sandboxes ---- */

struct create_job {
    struct manager *m;
    struct evhttp_request *req;
    struct vm *vm; /* read-only for the worker */
    int r;         /* results: the loop applies them in create_done() */
    struct vm_create_result res;
};

static void create_work(void *p)
{
    struct create_job *j = p;
    /* A vm with a VMM already is a warm-pool member (pool.h). */
    j->r =
        j->vm->rt ? pool_bind(&j->m->host, j->vm, &j->res) : vm_create(&j->m->host, j->vm, &j->res);
}

static void create_done(void *p)
{
    struct create_job *j = p;
    struct manager *m = j->m;
    struct vm *vm = j->vm;

    if (j->r < 0) {
        log_sandbox_error_errno(vm_sandbox_id(vm), j->r, "create of instance %s failed: %s",
                                vm->rec.iid, j->res.error ? j->res.error : "");
        vm_set_state(vm, VM_STOPPED);
        manager_remove(m, vm);
        http_util_reply_error(j->req, j->r == -ETIMEDOUT ? 504 : 500, "cannot create sandbox: %s",
                              j->res.error ? j->res.error : strerror(-j->r));
        vm_free(vm);
    } else {
        if (vm->rt != j->res.rt) {
            runtime_vm_free(vm->rt); /* a pool member that failed to bind, made anew */
        }
        vm->rt = j->res.rt;
        vm->timing = j->res.timing;
        vm->rec.pid = j->res.pid;
        vm->rec.pid_start_time = j->res.pid_start_time;
        vm_set_state(vm, VM_RUNNING);
        manager_egress_attach(m, vm);
        log_sandbox_info(vm_sandbox_id(vm),
                         "created instance %s from template '%s' in %.1f ms, network shaped to "
                         "%llu B/s each way (0: unshaped)",
                         vm->rec.iid, vm->rec.template_name, vm->timing.total / 1000.0,
                         (unsigned long long)vm->rec.net_bps);
        http_util_reply_json(j->req, 201, vm_to_json(vm));
    }
    free(j->res.error);
    free(j);
    manager_job_finished(m);
}

/* Reads an optional positive integer field; replies 400 and returns -EINVAL when it is invalid. */
static int body_uint(struct evhttp_request *req, json_t *body, const char *key, unsigned min,
                     unsigned max, unsigned *value)
{
    json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v)) {
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        http_util_reply_error(req, 400, "'%s' must be an integer between %u and %u", key, min, max);
        return -EINVAL;
    }
    *value = (unsigned)json_integer_value(v);
    return 0;
}

/*
 * The canonical text of a native egress policy (NULL = {} = deny everything),
 * or NULL after replying 400 naming what is wrong (500 on OOM).
 */
/*
 * The create's optional rate `key` into *ret (left as is when absent): an integer from
 * min to max, the node's `option`; with max 0 the node does not limit it and none may ask.
 * 0, or -EINVAL once the 400 is sent.
 */
static int body_rate(struct evhttp_request *req, const json_t *body, const char *key, uint64_t min,
                     uint64_t max, const char *option, uint64_t *ret)
{
    const json_t *v = json_object_get(body, key);

    if (!v) {
        return 0;
    }
    if (max == 0) {
        http_util_reply_error(req, 400, "'%s' cannot be set: this node does not limit it (%s 0)",
                              key, option);
        return -EINVAL;
    }
    if (!json_is_integer(v) || json_integer_value(v) < (json_int_t)min ||
        (uint64_t)json_integer_value(v) > max) {
        http_util_reply_error(req, 400,
                              "'%s' must be an integer between %llu and %llu (this node's %s)", key,
                              (unsigned long long)min, (unsigned long long)max, option);
        return -EINVAL;
    }
    *ret = (uint64_t)json_integer_value(v);
    return 0;
}

static char *policy_text(struct evhttp_request *req, const json_t *network)
{
    struct policy_error perr = { .message = "" };
    struct policy *p = NULL;
    char *text = NULL;
    int r;

    r = policy_parse_native(network, true, &p, &perr);
    if (r == -EINVAL) {
        http_util_reply_error(req, 400, "invalid network policy: %s", perr.message);
        return NULL;
    }
    if (r >= 0) {
        json_t *canon = policy_to_native(p);
        text = canon ? json_dumps(canon, JSON_COMPACT) : NULL;
        json_decref(canon);
    }
    policy_free(p);
    if (!text) {
        http_util_reply_error(req, 500, "cannot store the network policy: %s",
                              strerror(r < 0 ? -r : ENOMEM));
        return NULL;
    }
    /* It travels to space-gw inside one attach datagram (gw-proto.h). */
    if (strlen(text) > HTTP_MAX_POLICY) {
        http_util_reply_error(req, 400, "network policy too large (%zu bytes, at most %u)",
                              strlen(text), HTTP_MAX_POLICY);
        free(text);
        return NULL;
    }
    return text;
}

/* The /init body for the agent: the caller's `init` plus the egress CA, when there is one. */
static int init_body(struct manager *m, const json_t *init, char **ret)
{
    const char *ca = gw_client_ca_pem(m->gw);
    json_t *body;

    *ret = NULL;
    if (!init && !ca) {
        return 0;
    }
    body = init ? json_deep_copy(init) : json_object();
    if (!body || (ca && json_object_set_new(body, "caBundle", json_string(ca)) < 0)) {
        json_decref(body);
        return -ENOMEM;
    }
    *ret = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    return *ret ? 0 : -ENOMEM;
}

static void handle_create(struct manager *m, struct evhttp_request *req)
{
    char *network = NULL;
    const char *template_name = "base";
    char branch_template[64];
    unsigned vcpus = 0, memory = 0; /* 0: the template's (template-size.h) */
    struct template_size tsize = { 0 };
    const char *why_size = NULL;
    const char *id = NULL;
    char fresh_id[SANDBOX_ID_LEN + 1];
    struct vm *existing;
    char tdir[PATH_MAX];
    struct create_job *j = NULL;
    struct vm *vm = NULL;
    json_t *body;
    int r;

    body = http_util_body_json(req);
    if (!body) {
        return;
    }
    json_t *t = json_object_get(body, "template");
    if (t && !json_is_string(t)) {
        http_util_reply_error(req, 400, "'template' must be a string");
        goto out;
    }
    if (t) {
        template_name = json_string_value(t);
    }
    if (body_uint(req, body, "vcpus", 1, MAX_VCPUS, &vcpus) < 0 ||
        body_uint(req, body, "memory_mb", MIN_MEMORY_MIB, MAX_MEMORY_MIB, &memory) < 0) {
        goto out;
    }
    if (!template_name_is_valid(template_name)) {
        http_util_reply_error(req, 400, "invalid template name '%s'", template_name);
        goto out;
    }
    /* A caller-chosen id makes create idempotent: the control plane re-runs it after a crash. */
    json_t *jid = json_object_get(body, "id");
    if (jid && (!json_is_string(jid) || !sandbox_id_is_valid(json_string_value(jid)))) {
        http_util_reply_error(req, 400, "'id' must be %d characters of [a-z0-9]", SANDBOX_ID_LEN);
        goto out;
    }
    id = jid ? json_string_value(jid) : NULL;
    json_t *init = json_object_get(body, "init");
    if (init && !json_is_object(init)) {
        http_util_reply_error(req, 400, "'init' must be an object");
        goto out;
    }
    /* "snapshot": false forces a cold boot (space bench compares the two in one run). */
    json_t *snap = json_object_get(body, "snapshot");
    if (snap && !json_is_boolean(snap)) {
        http_util_reply_error(req, 400, "'snapshot' must be a boolean");
        goto out;
    }
    /* "pool": false skips the warm pool (pool.h): a restore or boot even with members ready. */
    json_t *use_pool = json_object_get(body, "pool");
    if (use_pool && !json_is_boolean(use_pool)) {
        http_util_reply_error(req, 400, "'pool' must be a boolean");
        goto out;
    }
    /* "from_snapshot": a branch, a new sandbox restored from a full sandbox snapshot
     * (disk-snapshot.h): its template and size are the snapshot's, no pool, no fallback. */
    json_t *from = json_object_get(body, "from_snapshot"), *meta = NULL;
    if (from) {
        const char *sid = json_string_value(from);
        const char *kind = NULL, *tpl = NULL;
        if (!sid || !sandbox_id_is_valid(sid) || disk_snapshot_read(&m->host, sid, &meta) < 0) {
            http_util_reply_error(req, 404, "snapshot '%s' not found", sid ? sid : "");
            goto out;
        }
        kind = json_string_value(json_object_get(meta, "kind"));
        tpl = json_string_value(json_object_get(meta, "template"));
        json_int_t mv = json_integer_value(json_object_get(meta, "vcpus"));
        json_int_t mm = json_integer_value(json_object_get(meta, "memory_mib"));
        if (!kind || strcmp(kind, "full") != 0 || !tpl || !template_name_is_valid(tpl) || mv < 1 ||
            mv > MAX_VCPUS || mm < MIN_MEMORY_MIB || mm > MAX_MEMORY_MIB) {
            json_decref(meta);
            http_util_reply_error(req, 400, "snapshot '%s' is not a full snapshot to create from",
                                  sid);
            goto out;
        }
        snprintf(branch_template, sizeof(branch_template), "%s", tpl);
        template_name = branch_template;
        vcpus = (unsigned)mv;
        memory = (unsigned)mm;
        json_decref(meta);
    }
    /* Rates within the node's maxima (0 there: the node does not limit it, none may ask):
     * the network each way (netrate.h), the disk's bytes and operations per second. */
    uint64_t net_bps = m->host.net_bps, disk_bps = m->host.disk_bps, disk_iops = m->host.disk_iops;
    if (body_rate(req, body, "net_bps", NETRATE_MIN_BPS, m->host.net_bps, "--net-bps", &net_bps) <
            0 ||
        body_rate(req, body, "disk_bps", 4096, m->host.disk_bps, "--disk-bps", &disk_bps) < 0 ||
        body_rate(req, body, "disk_iops", 10, m->host.disk_iops, "--disk-iops", &disk_iops) < 0) {
        goto out;
    }
    json_t *net = json_object_get(body, "network");
    if (net && !json_is_object(net)) {
        http_util_reply_error(req, 400, "'network' must be an object (a native egress policy)");
        goto out;
    }
    network = policy_text(req, net);
    if (!network) {
        goto out;
    }
    if (id && (existing = manager_find(m, id))) {
        if (vm_state(existing) == VM_RUNNING) {
            http_util_reply_json(req, 200, vm_to_json(existing));
        } else {
            http_util_reply_error(req, 409, "sandbox '%s' is %s", id,
                                  vm_state_to_string(vm_state(existing)));
        }
        goto out;
    }
    if (vm_template_dir(&m->host, template_name, tdir, sizeof(tdir)) < 0) {
        http_util_reply_error(req, 404, "template '%s' not found", template_name);
        goto out;
    }
    /* A create without a size gets the template's; the pool holds that size only. */
    r = template_size_load(tdir, &tsize, &why_size);
    if (r < 0) {
        http_util_reply_error(req, 500, "template '%s': %s", template_name, why_size);
        goto out;
    }
    vcpus = vcpus ? vcpus : tsize.vcpus;
    memory = memory ? memory : tsize.memory_mib;
    bool default_size = vcpus == tsize.vcpus && memory == tsize.memory_mib;
    /* Create sources in order (CONTRACTS): a warm-pool member, else restore, else boot. */
    /* A member's VMM was started with the node's disk limits: other ones restore. */
    bool default_disk = disk_bps == m->host.disk_bps && disk_iops == m->host.disk_iops;
    bool skip_pool =
        json_is_false(snap) || json_is_false(use_pool) || from || !default_size || !default_disk;
    struct vm *member = skip_pool ? NULL : pool_take(m->warm, template_name, vcpus, memory);
    if (!member) {
        pool_make_room(m->warm, vcpus, memory);
    }
    /* Never overcommit into the OOM killer: every VMM's cgroup may use its RAM + overhead.
     * A pool member is already counted: binding it commits nothing new. */
    char why[256];
    if (!member && !capacity_fits(m, vcpus, memory, why, sizeof(why))) {
        reply_capacity(req, why);
        goto out;
    }
    if (!id) {
        r = sandbox_id_new(fresh_id);
        if (r < 0) {
            http_util_reply_error(req, 500, "cannot make a sandbox id: %s", strerror(-r));
            if (member) {
                pool_discard(m->warm, member);
            }
            goto out;
        }
        id = fresh_id;
    }
    vm = TAKE_PTR(member);
    r = vm ? 0 : vm_new(template_name, vcpus, memory, &vm);
    if (r >= 0) {
        vm->cold_boot = json_is_false(snap);
        if (from) {
            snprintf(vm->branch_from, sizeof(vm->branch_from), "%s", json_string_value(from));
        }
        r = manager_bind(m, vm, id); /* persisted by the create job's first record */
    }
    if (r >= 0 && init) {
        const char *tok = json_string_value(json_object_get(init, "accessToken"));
        if (tok && strlen(tok) >= sizeof(vm->rec.access_token)) {
            r = -EINVAL;
        } else if (tok) {
            memcpy(vm->rec.access_token, tok, strlen(tok) + 1);
        }
    }
    if (r >= 0) {
        r = init_body(m, init, &vm->init_json);
    }
    if (r >= 0) {
        vm->rec.network = TAKE_PTR(network);
        vm->rec.net_bps = net_bps;
        /* 0: the node's, so a record never pins what a later --disk-bps changes. */
        vm->rec.disk_bps = disk_bps == m->host.disk_bps ? 0 : disk_bps;
        vm->rec.disk_iops = disk_iops == m->host.disk_iops ? 0 : (uint32_t)disk_iops;
    }
    if (r >= 0 && !vm->rt) {
        r = manager_add(m, vm);
    } else if (r < 0 && vm->rt) {
        pool_discard(m->warm, vm);
        vm = NULL;
    } else if (r < 0) {
        vm = vm_free(vm);
    }
    j = calloc(1, sizeof(*j));
    if (r < 0 || !j) {
        http_util_reply_error(req, 500, "cannot create sandbox: %s", strerror(r < 0 ? -r : ENOMEM));
        goto fail;
    }
    *j = (struct create_job){ .m = m, .req = req, .vm = vm };
    r = manager_run_job(m, create_work, create_done, j);
    if (r < 0) {
        http_api_reply_no_worker(req, r);
        goto fail;
    }
    goto out;
fail:
    free(j);
    if (vm && vm->rt) {
        pool_discard(m->warm, vm); /* a taken pool member */
    } else if (vm) {
        manager_remove(m, vm);
        vm_free(vm);
    }
out:
    free(network);
    json_decref(body);
}

/* ---- DELETE /v1/sandboxes/{id} ---- */

struct kill_job {
    struct manager *m;
    struct evhttp_request *req;
    struct vm *vm;
    int r;
};

static void kill_work(void *p)
{
    struct kill_job *j = p;
    j->r = vm_destroy(&j->m->host, j->vm);
}

static void kill_done(void *p)
{
    struct kill_job *j = p;
    struct manager *m = j->m;
    struct vm *vm = j->vm;

    vm_set_state(vm, VM_STOPPED);
    manager_remove(m, vm);
    log_sandbox_info(vm_sandbox_id(vm), "killed (instance %s)", vm->rec.iid);
    if (j->r < 0) {
        http_util_reply_error(j->req, 500, "sandbox stopped but cleanup failed: %s",
                              strerror(-j->r));
    } else {
        evhttp_send_reply(j->req, 204, NULL, NULL);
    }
    if (vm->busy == 0) {
        vm_free(vm);
    }
    free(j);
    manager_job_finished(m);
}

static void handle_kill(struct manager *m, struct evhttp_request *req, struct vm *vm)
{
    struct kill_job *j;
    int r;

    if (vm_state(vm) == VM_CREATING) {
        http_util_reply_error(req, 409, "sandbox '%s' is still being created", vm_sandbox_id(vm));
        return;
    }
    if (vm->snapshot_busy) { /* its job uses the VMM and disk: kill after it (409) */
        http_util_reply_error(req, 409, "sandbox '%s' is busy with a snapshot or rollback",
                              vm_sandbox_id(vm));
        return;
    }
    if (!vm_state_can_transition(vm_state(vm), VM_STOPPING)) {
        http_util_reply_error(req, 404, "sandbox '%s' not found", vm_sandbox_id(vm));
        return;
    }
    j = calloc(1, sizeof(*j));
    if (!j) {
        http_util_reply_error(req, 500, "out of memory");
        return;
    }
    *j = (struct kill_job){ .m = m, .req = req, .vm = vm };
    r = manager_run_job(m, kill_work, kill_done, j);
    if (r < 0) {
        free(j);
        http_api_reply_no_worker(req, r);
        return;
    }
    vm_set_state(vm, VM_STOPPING);
    manager_egress_detach(m, vm);
}

/* ---- POST /v1/sandboxes/{id}/pause, /resume, /suspend, /restore ---- */

/*
 * Pause keeps everything but the vCPUs: memory stays committed, the netns, tap and the
 * space-gw attachment stay (guest connections stall; nothing is torn down). Suspend
 * writes memory and devices to disk and stops the VMM (vm_suspend()); its space-gw
 * attachment and egress sockets go with it and come back with the restore. Every verb is
 * idempotent (a VM already in the verb's end state answers 200): the control plane re-runs
 * an operation whose outcome it did not record. A verb from any other state is 409
 * naming it.
 */
enum lifecycle_verb { VERB_PAUSE, VERB_RESUME, VERB_SUSPEND, VERB_RESTORE };

static const struct {
    const char *name, *done_name; /* "pause", "paused" */
    enum vm_state from, transitional, done, back;
} verbs[] = {
    [VERB_PAUSE] = { "pause", "paused", VM_RUNNING, VM_PAUSING, VM_PAUSED, VM_RUNNING },
    [VERB_RESUME] = { "resume", "resumed", VM_PAUSED, VM_RESUMING, VM_RUNNING, VM_PAUSED },
    [VERB_SUSPEND] = { "suspend", "suspended", VM_RUNNING, VM_SUSPENDING, VM_SUSPENDED,
                       VM_RUNNING },
    [VERB_RESTORE] = { "restore", "restored", VM_SUSPENDED, VM_RESTORING, VM_RUNNING,
                       VM_SUSPENDED },
};

struct verb_job {
    struct manager *m;
    struct evhttp_request *req;
    struct vm *vm;
    enum lifecycle_verb verb;
    bool memory; /* suspend, restore: with the memory state (vm.h); false = the disk only */
    usec_t started;
    int r;
    char *error;
    struct vm_restore_result restored;
    /* resume, restore: the egress CA bundle its agent lacks, sent before the reply */
    char *ca_body;
    char ca_fp[VM_CA_FINGERPRINT_LEN + 1];
    char ca_given[VM_CA_FINGERPRINT_LEN + 1]; /* what the agent had before it slept */
    char ca_boot[VM_CA_FINGERPRINT_LEN + 1];  /* restore: what a boot's replayed /init gives */
    char ca_had[VM_CA_FINGERPRINT_LEN + 1];   /* worker: what it has now (one of the two) */
    bool ca_sent;
    int ca_r;
    char *ca_error;
};

static void verb_work(void *p)
{
    struct verb_job *j = p;
    switch (j->verb) {
    case VERB_PAUSE:
        j->r = vm_pause(&j->m->host, j->vm);
        break;
    case VERB_RESUME:
        j->r = vm_resume(&j->m->host, j->vm, &j->error);
        break;
    case VERB_SUSPEND:
        j->r = vm_suspend(&j->m->host, j->vm, j->memory, &j->error);
        break;
    case VERB_RESTORE:
        j->r = vm_restore(&j->m->host, j->vm, j->memory, &j->restored);
        j->error = TAKE_PTR(j->restored.error);
        break;
    }
    /* A rotation went on while it slept: the guest trusts the bundle before it is answered
     * (the first leaf it may see after a switch is the new CA's). */
    if (j->r >= 0 && j->ca_body) {
        struct vm copy = *j->vm; /* a restore's runtime is not the loop's yet */
        /* A restore that booted replayed the create's /init (its bundle); one from memory
         * kept what the agent had, like a resume. */
        bool booted = j->verb == VERB_RESTORE && j->restored.booted;
        memcpy(j->ca_had, booted ? j->ca_boot : j->ca_given, sizeof(j->ca_had));
        if (j->verb == VERB_RESTORE) {
            copy.rt = j->restored.rt;
        }
        if (strcmp(j->ca_had, j->ca_fp) != 0) {
            j->ca_sent = true;
            j->ca_r = vm_send_init(&copy, j->ca_body, &j->ca_error);
        }
    }
}

/* Loop: what resume/restore learnt about the agent's CA bundle (verb_work). */
static void verb_ca_done(struct manager *m, struct verb_job *j)
{
    struct vm *vm = j->vm;

    if (!j->ca_body) {
        return;
    }
    if (!j->ca_sent) {
        memcpy(vm->rec.ca_given, j->ca_had, sizeof(vm->rec.ca_given));
        return; /* it has the bundle */
    }
    if (j->ca_r < 0) {
        log_sandbox_warning(vm_sandbox_id(vm),
                            "cannot send the egress CA %s to instance %s's agent after its %s "
                            "(the tick retries): %s",
                            j->ca_fp, vm->rec.iid, verbs[j->verb].name,
                            j->ca_error ? j->ca_error : strerror(-j->ca_r));
    }
    if (j->ca_r >= 0) {
        log_sandbox_info(vm_sandbox_id(vm),
                         "sent the egress CA %s to instance %s's agent with its %s", j->ca_fp,
                         vm->rec.iid, verbs[j->verb].name);
    }
    memcpy(vm->rec.ca_given, j->ca_r >= 0 ? j->ca_fp : j->ca_had, sizeof(vm->rec.ca_given));
    (void)vm_save_record(&m->host, &vm->rec);
}

static void verb_done(void *p)
{
    struct verb_job *j = p;
    struct manager *m = j->m;
    struct vm *vm = j->vm;
    const char *verb = verbs[j->verb].name;

    vm->busy--;
    if (j->r < 0) {
        vm_set_state(vm, verbs[j->verb].back);
        log_sandbox_warning_errno(vm_sandbox_id(vm), j->r, "%s of instance %s failed: %s", verb,
                                  vm->rec.iid, j->error ? j->error : strerror(-j->r));
        http_util_reply_error(j->req, j->r == -ENOENT ? 404 : 500, "cannot %s sandbox: %s", verb,
                              j->error ? j->error : strerror(-j->r));
        goto out;
    }
    if (j->verb == VERB_SUSPEND) {
        /* Its VMM is gone: so are its handle, its space-gw session and egress sockets. */
        manager_egress_detach(m, vm);
        vm->dns_fd = close_safe(vm->dns_fd);
        vm->gateway_fd = close_safe(vm->gateway_fd);
        vm->rt = runtime_vm_free(vm->rt);
        vm->rec.pid = 0;
        vm->rec.pid_start_time = 0;
    } else if (j->verb == VERB_RESTORE) {
        vm->rt = j->restored.rt;
        vm->rec.pid = j->restored.pid;
        vm->rec.pid_start_time = j->restored.pid_start_time;
    }
    verb_ca_done(m, j);
    vm_set_state(vm, verbs[j->verb].done);
    if (j->verb == VERB_RESTORE) {
        manager_egress_attach(m, vm);
    }
    double ms = (now_monotonic() - j->started) / 1000.0;
    log_sandbox_info(vm_sandbox_id(vm), "%s instance %s in %.1f ms%s%s", verbs[j->verb].done_name,
                     vm->rec.iid, ms, j->error ? "; clock not re-synced: " : "",
                     j->error ? j->error : "");
    json_t *res = vm_to_json(vm);
    if (res) {
        char key[32];
        snprintf(key, sizeof(key), "%s_ms", verb);
        json_object_set_new(res, key, json_real(ms));
        if (j->verb == VERB_SUSPEND) {
            json_object_set_new(res, "memory", json_boolean(j->memory));
        } else if (j->verb == VERB_RESTORE) {
            json_object_set_new(res, "memory", json_boolean(!j->restored.booted));
        }
    }
    http_util_reply_json(j->req, 200, res);
out:
    free(j->error);
    free(j->ca_body);
    free(j->ca_error);
    free(j);
    manager_job_finished(m);
}

/* Suspend and restore take {"memory": bool} (default true; vm.h); the others no body. */
static int verb_memory(struct evhttp_request *req, enum lifecycle_verb verb, bool *ret)
{
    json_t *body, *mem;
    int r = 0;

    *ret = true;
    if (verb != VERB_SUSPEND && verb != VERB_RESTORE) {
        return 0;
    }
    body = http_util_body_json(req);
    if (!body) {
        return -EINVAL;
    }
    mem = json_object_get(body, "memory");
    if (json_object_size(body) > (mem ? 1u : 0u)) {
        http_util_reply_error(req, 400, "%s takes only 'memory'", verbs[verb].name);
        r = -EINVAL;
    } else if (mem && !json_is_null(mem) && !json_is_boolean(mem)) {
        http_util_reply_error(req, 400, "'memory' must be a boolean");
        r = -EINVAL;
    } else {
        *ret = !json_is_false(mem);
    }
    json_decref(body);
    return r;
}

static void handle_verb(struct manager *m, struct evhttp_request *req, struct vm *vm,
                        enum lifecycle_verb verb)
{
    struct verb_job *j;
    bool memory;
    int r;

    if (verb_memory(req, verb, &memory) < 0) {
        return;
    }
    if (vm_state(vm) == verbs[verb].done) {
        http_util_reply_json(req, 200, vm_to_json(vm)); /* idempotent: already there */
        return;
    }
    /* A suspended VM has no VMM; every other verb needs one. */
    if (vm_state(vm) != verbs[verb].from || !vm->rt != (verb == VERB_RESTORE) ||
        vm->snapshot_busy) {
        http_util_reply_error(req, 409, "sandbox '%s' is %s; %s needs it %s", vm_sandbox_id(vm),
                              vm_state_to_string(vm_state(vm)), verbs[verb].name,
                              vm_state_to_string(verbs[verb].from));
        return;
    }
    j = calloc(1, sizeof(*j));
    if (!j) {
        http_util_reply_error(req, 500, "out of memory");
        return;
    }
    *j = (struct verb_job){
        .m = m, .req = req, .vm = vm, .verb = verb, .memory = memory, .started = now_monotonic()
    };
    const char *ca = gw_client_ca_pem(m->gw);
    if (ca && instance_is_bound(&vm->rec) && (verb == VERB_RESUME || verb == VERB_RESTORE)) {
        /* A restore that boots replays the create's /init, its bundle included (vm.h). */
        memcpy(j->ca_given, vm_ca_given(vm), sizeof(j->ca_given));
        memcpy(j->ca_boot, j->ca_given, sizeof(j->ca_boot));
        if (verb == VERB_RESTORE) {
            vm_ca_after_restore(vm, j->ca_boot);
        }
        vm_ca_fingerprint(ca, j->ca_fp);
        if (strcmp(j->ca_given, j->ca_fp) != 0 || strcmp(j->ca_boot, j->ca_fp) != 0) {
            j->ca_body = manager_ca_init_body(vm, ca); /* NULL: the tick sends it later */
        }
    }
    r = manager_run_job(m, verb_work, verb_done, j);
    if (r < 0) {
        free(j->ca_body);
        free(j);
        http_api_reply_no_worker(req, r);
        return;
    }
    vm->busy++;
    vm_set_state(vm, verbs[verb].transitional);
}

/* ---- PUT /v1/sandboxes/{id}/network ---- */

/*
 * Saved on the loop thread, not by a worker: the record is small, and two
 * PUTs for one sandbox must reach the disk and space-gw in the order they
 * were answered. No worker holds a copy of a running instance's record.
 */
static void handle_network(struct manager *m, struct evhttp_request *req, struct vm *vm)
{
    struct instance_record rec;
    char *text;
    json_t *body;
    int r;

    if (vm_state(vm) != VM_RUNNING) {
        http_util_reply_error(req, vm_state(vm) == VM_CREATING ? 409 : 404, "sandbox '%s' is %s",
                              vm_sandbox_id(vm),
                              vm_state(vm) == VM_CREATING ? "still being created" : "not running");
        return;
    }
    body = http_util_body_json(req);
    if (!body) {
        return;
    }
    if (!json_is_object(body)) {
        http_util_reply_error(req, 400, "the body must be a native egress policy object");
        json_decref(body);
        return;
    }
    text = policy_text(req, body);
    json_decref(body);
    if (!text) {
        return;
    }
    rec = vm->rec;
    rec.network = text; /* borrowed for the save */
    r = vm_save_record(&m->host, &rec);
    if (r < 0) {
        free(text);
        http_util_reply_error(req, 500, "cannot save the network policy: %s", strerror(-r));
        return;
    }
    free(vm->rec.network);
    vm->rec.network = text;
    r = gw_client_policy(m->gw, vm->rec.iid, vm->rec.network);
    if (r < 0) {
        log_sandbox_warning_errno(vm_sandbox_id(vm), r,
                                  "cannot send the new policy to space-gw: %m");
    }
    log_sandbox_info(vm_sandbox_id(vm), "network policy replaced");
    http_util_reply_json(req, 200, json_object());
}

/* ---- GET /v1/egress-audit ---- */

static void handle_egress_audit(struct manager *m, struct evhttp_request *req)
{
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct evkeyvalq params = { 0 };
    struct evkeyval *kv;
    uint64_t after = 0;
    uint32_t limit = EGRESS_AUDIT_LIMIT_DEFAULT;

    if (query && evhttp_parse_query_str(query, &params) < 0) {
        http_util_reply_error(req, 400, "invalid query string");
        return;
    }
    TAILQ_FOREACH (kv, &params, next) {
        if (strcmp(kv->key, "after") == 0) {
            if (parse_u64(kv->value, &after) < 0) {
                http_util_reply_error(req, 400, "'after' must be a sequence number");
                goto out;
            }
        } else if (strcmp(kv->key, "limit") == 0) {
            if (parse_u32(kv->value, &limit) < 0 || limit == 0 || limit > EGRESS_AUDIT_LIMIT_MAX) {
                http_util_reply_error(req, 400, "'limit' must be between 1 and %u",
                                      EGRESS_AUDIT_LIMIT_MAX);
                goto out;
            }
        } else {
            http_util_reply_error(req, 400, "unknown parameter '%.64s'", kv->key);
            goto out;
        }
    }
    json_t *reply = egress_audit_read(m->audit, after, limit);
    if (reply) {
        http_util_reply_json(req, 200, reply);
    } else {
        http_util_reply_error(req, 500, "out of memory");
    }
out:
    evhttp_clear_headers(&params);
}

/* ---- GET /v1/egress-ca, POST /v1/egress-ca/rotate ---- */

/*
 * The egress CA's rotation (src/gw/ca-set.h), for the api to drive on every node: the
 * state as space-gw last reported it, and how far its bundle got into the sandboxes. A
 * switch is refused (409) while a running sandbox has not acknowledged the bundle: its
 * guest would see leaves from a CA it does not trust yet.
 */
static json_t *egress_ca_json(struct manager *m)
{
    const struct gw_client_ca *ca = gw_client_ca(m->gw);
    char fp[VM_CA_FINGERPRINT_LEN + 1];
    unsigned running, with, paused;

    manager_egress_ca_counts(m, &running, &with, &paused);
    vm_ca_fingerprint(gw_client_ca_pem(m->gw), fp);
    return json_pack("{s:s, s:s?, s:s?, s:s, s:i, s:i, s:i}", "phase", ca->phase, "current",
                     ca->current[0] ? ca->current : NULL, "next", ca->next[0] ? ca->next : NULL,
                     "bundle", fp, "sandboxes", (int)running, "with_bundle", (int)with,
                     "not_running", (int)paused);
}

/* 503 unless space-gw's session is up and has told us its CA. */
static bool egress_ca_available(struct manager *m, struct evhttp_request *req)
{
    if (!m->gw) {
        http_util_reply_error(req, 404, "this node has no egress gateway (--no-gw)");
        return false;
    }
    if (!gw_client_ready(m->gw) || !gw_client_ca(m->gw)) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
        http_util_reply_error(req, 503, "space-gw is not connected");
        return false;
    }
    return true;
}

static void handle_egress_ca(struct manager *m, struct evhttp_request *req)
{
    if (egress_ca_available(m, req)) {
        http_util_reply_json(req, 200, egress_ca_json(m));
    }
}

struct ca_rotate_job {
    struct manager *m;
    struct evhttp_request *req;
};

static void ca_rotate_done(void *userdata, int r, const char *error)
{
    struct ca_rotate_job *j = userdata;
    struct manager *m = j->m;

    if (r == -EBUSY) {
        http_util_reply_error(j->req, 409, "%s", error ? error : "space-gw refused the step");
    } else if (r < 0) {
        evhttp_add_header(evhttp_request_get_output_headers(j->req), "Retry-After", "1");
        http_util_reply_error(j->req, 503, "%s", error ? error : "space-gw did not answer");
    } else {
        manager_kick_ca(m); /* a new bundle: on its way to every running agent now */
        http_util_reply_json(j->req, 200, egress_ca_json(m));
    }
    free(j);
}

static void handle_egress_ca_rotate(struct manager *m, struct evhttp_request *req)
{
    const char *step = NULL;
    struct ca_rotate_job *j;
    json_t *body;
    int r;

    if (!egress_ca_available(m, req)) {
        return;
    }
    body = http_util_body_json(req);
    if (!body) {
        return;
    }
    if (!json_is_object(body) || json_object_size(body) != 1 ||
        !json_is_string(json_object_get(body, "step"))) {
        http_util_reply_error(req, 400,
                              "the body must be {\"step\": \"stage\"|\"switch\"|\"finish\"}");
        json_decref(body);
        return;
    }
    step = json_string_value(json_object_get(body, "step"));
    if (strcmp(step, "stage") != 0 && strcmp(step, "switch") != 0 && strcmp(step, "finish") != 0) {
        http_util_reply_error(req, 400, "unknown step '%.32s' (stage, switch or finish)", step);
        json_decref(body);
        return;
    }
    if (strcmp(step, "switch") == 0 && strcmp(gw_client_ca(m->gw)->phase, "staged") == 0) {
        unsigned running, with, paused;
        manager_egress_ca_counts(m, &running, &with, &paused);
        if (with < running) {
            http_util_reply_error(req, 409,
                                  "%u of %u running sandboxes have not acknowledged the staged "
                                  "egress CA bundle yet; retry once they have",
                                  running - with, running);
            json_decref(body);
            return;
        }
    }
    j = calloc(1, sizeof(*j));
    if (!j) {
        http_util_reply_error(req, 500, "out of memory");
        json_decref(body);
        return;
    }
    *j = (struct ca_rotate_job){ .m = m, .req = req };
    r = gw_client_ca_rotate(m->gw, step, ca_rotate_done, j);
    json_decref(body);
    if (r < 0) {
        free(j);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
        http_util_reply_error(req, 503, "cannot reach space-gw: %s", strerror(-r));
    }
}

/* ---- POST /v1/sandboxes/{id}/exec ---- */

struct exec_job {
    struct manager *m;
    struct evhttp_request *req;
    struct vm *vm;
    json_t *body; /* owns the strings req points to */
    const char **args, **env;
    struct vm_exec_request request;
    struct vm_exec_result result;
    int r;
};

static void exec_work(void *p)
{
    struct exec_job *j = p;
    j->r = vm_exec(&j->m->host, j->vm, &j->request, &j->result);
}

static json_t *json_b64(const char *data, size_t len)
{
    char *buf = malloc(base64_encoded_len(len) + 1);
    json_t *s;
    if (!buf) {
        return NULL;
    }
    base64_encode(data, len, buf);
    s = json_string(buf);
    free(buf);
    return s;
}

static void exec_done(void *p)
{
    struct exec_job *j = p;
    struct manager *m = j->m;
    struct vm *vm = j->vm;

    vm->busy--;
    if (j->r == -ENOENT || vm_state(vm) != VM_RUNNING) {
        http_util_reply_error(j->req, 404, "sandbox '%s' not found", vm_sandbox_id(vm));
    } else if (j->r == -EINVAL) {
        http_util_reply_error(j->req, 400, "%s",
                              j->result.error ? j->result.error : "invalid command");
    } else if (j->r == -ETIMEDOUT) {
        http_util_reply_error(j->req, 504, "command did not finish in time");
    } else if (j->r < 0) {
        http_util_reply_error(j->req, 502, "agent error: %s%s%s", strerror(-j->r),
                              j->result.error ? ": " : "", j->result.error ? j->result.error : "");
    } else {
        json_t *res =
            json_pack("{s:i, s:b, s:o, s:o}", "exit_code", j->result.exit_code, "exited",
                      j->result.exited, "stdout_b64", json_b64(j->result.out, j->result.out_len),
                      "stderr_b64", json_b64(j->result.err, j->result.err_len));
        if (res && j->result.status) {
            json_object_set_new(res, "status", json_string(j->result.status));
        }
        if (res && j->result.error) {
            json_object_set_new(res, "error", json_string(j->result.error));
        }
        http_util_reply_json(j->req, res ? 200 : 500, res);
    }
    if (vm_state(vm) == VM_STOPPED && vm->busy == 0) {
        vm_free(vm); /* killed while we ran: the kill left the free to us */
    }
    vm_exec_result_release(&j->result);
    json_decref(j->body);
    free(j->args);
    free(j->env);
    free(j);
    manager_job_finished(m);
}

/* Collects a JSON array of strings into a NULL-terminated vector borrowing from the JSON. */
static int string_vector(json_t *arr, const char ***ret)
{
    size_t n = json_is_array(arr) ? json_array_size(arr) : 0;
    const char **v;

    if (arr && !json_is_array(arr)) {
        return -EINVAL;
    }
    v = calloc(n + 1, sizeof(*v));
    if (!v) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        v[i] = json_string_value(json_array_get(arr, i));
        if (!v[i] || strlen(v[i]) != json_string_length(json_array_get(arr, i))) {
            free(v);
            return -EINVAL; /* not a string, or one with an embedded NUL */
        }
    }
    *ret = v;
    return 0;
}

static void handle_exec(struct manager *m, struct evhttp_request *req, struct vm *vm)
{
    struct exec_job *j = NULL;
    json_t *body, *timeout, *env;
    const char *key;
    json_t *value;
    size_t i = 0;

    if (vm_state(vm) != VM_RUNNING) {
        bool alive = vm_state(vm) != VM_STOPPING && vm_state(vm) != VM_STOPPED;
        http_util_reply_error(req, alive ? 409 : 404, "sandbox '%s' is %s", vm_sandbox_id(vm),
                              vm_state(vm) == VM_CREATING ? "still being created"
                              : alive                     ? vm_state_to_string(vm_state(vm))
                                                          : "not running");
        return;
    }
    body = http_util_body_json(req);
    if (!body) {
        return;
    }
    j = calloc(1, sizeof(*j));
    if (!j) {
        http_util_reply_error(req, 500, "out of memory");
        json_decref(body);
        return;
    }
    *j = (struct exec_job){ .m = m, .req = req, .vm = vm, .body = body };
    j->request.cmd = json_string_value(json_object_get(body, "cmd"));
    if (!j->request.cmd || !*j->request.cmd) {
        http_util_reply_error(req, 400, "'cmd' must be a non-empty string");
        goto fail;
    }
    if (string_vector(json_object_get(body, "args"), &j->args) < 0) {
        http_util_reply_error(req, 400, "'args' must be an array of strings");
        goto fail;
    }
    j->request.args = j->args;
    env = json_object_get(body, "env");
    if (env && !json_is_object(env)) {
        http_util_reply_error(req, 400, "'env' must be an object of strings");
        goto fail;
    }
    j->env = calloc(json_object_size(env) + 1, sizeof(char *));
    if (!j->env) {
        http_util_reply_error(req, 500, "out of memory");
        goto fail;
    }
    /* Each KEY=VALUE is stored back into the body so the body owns it. */
    json_t *pairs = json_array();
    json_object_set_new(body, "_pairs", pairs);
    json_object_foreach (env, key, value) {
        char *kv = NULL;
        if (!json_is_string(value) || !*key || strchr(key, '=') ||
            asprintf(&kv, "%s=%s", key, json_string_value(value)) < 0) {
            http_util_reply_error(req, 400, "'env' must map names (without '=') to strings");
            goto fail;
        }
        json_array_append_new(pairs, json_string(kv));
        free(kv);
        j->env[i] = json_string_value(json_array_get(pairs, i));
        i++;
    }
    j->request.env = j->env;
    j->request.cwd = json_string_value(json_object_get(body, "cwd"));
    j->request.user = json_string_value(json_object_get(body, "user"));
    if (j->request.user &&
        (!*j->request.user || strlen(j->request.user) > 64 || strpbrk(j->request.user, ":\r\n"))) {
        http_util_reply_error(req, 400, "invalid user name");
        goto fail;
    }
    timeout = json_object_get(body, "timeout_ms");
    if (timeout && (!json_is_integer(timeout) || json_integer_value(timeout) < 0)) {
        http_util_reply_error(req, 400, "'timeout_ms' must be a non-negative integer");
        goto fail;
    }
    /* No exec without a deadline: absent or 0 gets the node's maximum, more is refused. */
    uint64_t max_ms = m->host.max_exec_timeout / USEC_PER_MSEC;
    j->request.timeout_ms = timeout ? (uint64_t)json_integer_value(timeout) : 0;
    if (j->request.timeout_ms > max_ms) {
        http_util_reply_error(req, 400, "'timeout_ms' must be at most %llu (--max-exec-timeout)",
                              (unsigned long long)max_ms);
        goto fail;
    }
    if (j->request.timeout_ms == 0) {
        j->request.timeout_ms = max_ms;
    }

    int r = manager_run_job(m, exec_work, exec_done, j);
    if (r < 0) {
        http_api_reply_no_worker(req, r);
        goto fail;
    }
    vm->busy++;
    return;
fail:
    json_decref(j->body);
    free(j->args);
    free(j->env);
    free(j);
}

/* ---- routing ---- */

static void dispatch(struct evhttp_request *req, void *userdata)
{
    struct manager *m = userdata;
    enum evhttp_cmd_type method = evhttp_request_get_command(req);
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
    char id[SANDBOX_ID_LEN + 1];
    const char *rest;

    if (!path) {
        http_util_reply_error(req, 400, "invalid request URI");
        return;
    }
    if (m->stopping) {
        http_util_reply_error(req, 503, "node is shutting down");
        return;
    }
    if (strcmp(path, "/health") == 0 && method == EVHTTP_REQ_GET) {
        handle_health(m, req);
        return;
    }
    if (strcmp(path, "/v1/templates") == 0 && method == EVHTTP_REQ_GET) {
        handle_templates(m, req);
        return;
    }
    if (strncmp(path, "/v1/templates/", 14) == 0 && method == EVHTTP_REQ_POST) {
        char name[64];
        const char *end = strstr(path + 14, "/build");
        if (end && strcmp(end, "/build") == 0 && (size_t)(end - (path + 14)) < sizeof(name)) {
            snprintf(name, sizeof(name), "%.*s", (int)(end - (path + 14)), path + 14);
            handle_template_build(m, req, name);
            return;
        }
    }
    if (strcmp(path, "/v1/egress-audit") == 0 && method == EVHTTP_REQ_GET) {
        handle_egress_audit(m, req);
        return;
    }
    if (strcmp(path, "/v1/egress-ca") == 0 && method == EVHTTP_REQ_GET) {
        handle_egress_ca(m, req);
        return;
    }
    if (strcmp(path, "/v1/egress-ca/rotate") == 0 && method == EVHTTP_REQ_POST) {
        handle_egress_ca_rotate(m, req);
        return;
    }
    if (strcmp(path, "/v1/capacity") == 0 && method == EVHTTP_REQ_GET) {
        http_util_reply_json(req, 200, capacity_to_json(m));
        return;
    }
    if (strcmp(path, "/v1/pools") == 0 && method == EVHTTP_REQ_GET) {
        http_util_reply_json(req, 200, pool_to_json(m->warm));
        return;
    }
    if (strcmp(path, "/v1/instances") == 0 && method == EVHTTP_REQ_GET) {
        json_t *list = json_array();
        for (size_t i = 0; i < m->n_vms; i++) {
            json_array_append_new(list, vm_to_json(m->vms[i]));
        }
        http_util_reply_json(req, 200, json_pack("{s:o}", "instances", list));
        return;
    }
    if (strncmp(path, "/v1/snapshots", 13) == 0 && (!path[13] || path[13] == '/')) {
        snapshot_routes_top(m, req, path);
        return;
    }
    if (strcmp(path, "/v1/sandboxes") == 0) {
        if (method == EVHTTP_REQ_POST) {
            handle_create(m, req);
        } else if (method == EVHTTP_REQ_GET) {
            json_t *list = json_array(), *failed = json_array();
            for (size_t i = 0; i < m->n_vms; i++) {
                if (instance_is_bound(&m->vms[i]->rec)) {
                    json_array_append_new(list, vm_to_json(m->vms[i]));
                }
            }
            for (size_t i = 0; i < m->failed.n; i++) {
                json_array_append_new(failed, failure_to_json(failed_list_at(&m->failed, i)));
            }
            http_util_reply_json(req, 200,
                                 json_pack("{s:o, s:o}", "sandboxes", list, "failed", failed));
        } else {
            http_util_reply_error(req, 405, "method not allowed");
        }
        return;
    }
    if (strncmp(path, "/v1/sandboxes/", 14) == 0) {
        const char *p = path + 14;
        size_t n = strcspn(p, "/");
        if (n != SANDBOX_ID_LEN) {
            http_util_reply_error(req, 400, "invalid sandbox id '%.*s'", (int)MIN(n, (size_t)64),
                                  p);
            return;
        }
        memcpy(id, p, n);
        id[n] = '\0';
        rest = p + n;
        if (!sandbox_id_is_valid(id)) {
            http_util_reply_error(req, 400, "invalid sandbox id '%s'", id);
            return;
        }
        struct vm *vm = manager_find(m, id);
        const struct failure *f = vm ? NULL : failed_list_find(&m->failed, id);
        if (f) {
            /* Gone as a killed one is (404), with why: the api records the reason. */
            http_util_reply_error(req, 404, "sandbox '%s' failed: %s: %s", id,
                                  death_reason_to_string(f->reason), f->message);
            return;
        }
        if (!vm) {
            http_util_reply_error(req, 404, "sandbox '%s' not found", id);
            return;
        }
        if (*rest == '\0' && method == EVHTTP_REQ_GET) {
            http_util_reply_json(req, 200, vm_to_json(vm));
        } else if (*rest == '\0' && method == EVHTTP_REQ_DELETE) {
            handle_kill(m, req, vm);
        } else if (strcmp(rest, "/exec") == 0 && method == EVHTTP_REQ_POST) {
            handle_exec(m, req, vm);
        } else if (strcmp(rest, "/network") == 0 && method == EVHTTP_REQ_PUT) {
            handle_network(m, req, vm);
        } else if (strcmp(rest, "/pause") == 0 && method == EVHTTP_REQ_POST) {
            handle_verb(m, req, vm, VERB_PAUSE);
        } else if (strcmp(rest, "/resume") == 0 && method == EVHTTP_REQ_POST) {
            handle_verb(m, req, vm, VERB_RESUME);
        } else if (strcmp(rest, "/suspend") == 0 && method == EVHTTP_REQ_POST) {
            handle_verb(m, req, vm, VERB_SUSPEND);
        } else if (strcmp(rest, "/restore") == 0 && method == EVHTTP_REQ_POST) {
            handle_verb(m, req, vm, VERB_RESTORE);
        } else if (snapshot_routes_sandbox(m, req, vm, rest)) {
            /* snapshots, rollback (snapshot-routes.h) */
        } else {
            http_util_reply_error(req, 404, "no route for %s", path);
        }
        return;
    }
    http_util_reply_error(req, 404, "no route for %s", path);
}

int http_api_register(struct manager *m)
{
    evhttp_set_max_body_size(m->http, HTTP_MAX_BODY);
    evhttp_set_allowed_methods(m->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_DELETE |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_PATCH);
    evhttp_set_gencb(m->http, dispatch, m);
    return 0;
}
