/*
 * The manager: instance table, worker jobs, periodic health check, stop.
 *
 * Threading (style.md R14): the event loop thread is the only one that reads
 * or writes the table and vm states (vm_set_state() asserts it). Blocking
 * work (disk clones, spawning ip/qemu, waiting for a guest, streaming an
 * exec) runs on the capped worker pool (worker-pool.h); a job reads the vm
 * it was given but writes only its own job struct, and the loop applies the
 * result in the job's done callback. A vm handed to a worker is protected
 * by its state (transitional states belong to the worker, vm-state.h) or by
 * vm->busy (exec).
 */
#include "node/disk-snapshot.h"
#include "node/manager.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "gw/policy.h"
#include "node/netslot.h"
#include "node/pool.h"

int manager_run_job(struct manager *m, manager_job_fn work, manager_job_fn done, void *job)
{
    if (m->stopping) {
        return -ESHUTDOWN;
    }
    return worker_pool_submit(m->pool, work, done, job);
}

unsigned manager_jobs_pending(const struct manager *m)
{
    return worker_pool_pending(m->pool);
}

struct vm *manager_find(struct manager *m, const char *sandbox_id)
{
    if (!sandbox_id || !*sandbox_id) {
        return NULL;
    }
    for (size_t i = 0; i < m->n_vms; i++) {
        if (strcmp(vm_sandbox_id(m->vms[i]), sandbox_id) == 0) {
            return m->vms[i];
        }
    }
    return NULL;
}

struct vm *manager_find_instance(struct manager *m, const char *iid)
{
    for (size_t i = 0; i < m->n_vms; i++) {
        if (strcmp(m->vms[i]->rec.iid, iid) == 0) {
            return m->vms[i];
        }
    }
    return NULL;
}

int manager_sandbox_netns_path(struct manager *m, const char *sandbox_id, char *buf, size_t n)
{
    struct vm *vm = manager_find(m, sandbox_id);
    return vm ? netslot_netns_path(vm->rec.iid, buf, n) : -ENOENT;
}

int manager_bind(struct manager *m, struct vm *vm, const char *sandbox_id)
{
    struct vm *other = manager_find(m, sandbox_id);
    if (other && other != vm) {
        return -EEXIST;
    }
    return instance_bind(&vm->rec, sandbox_id);
}

int manager_add(struct manager *m, struct vm *vm)
{
    if (m->n_vms == m->cap_vms) {
        size_t n = m->cap_vms ? m->cap_vms * 2 : 16;
        struct vm **p = realloc(m->vms, n * sizeof(*p));
        if (!p) {
            return -ENOMEM;
        }
        m->vms = p;
        m->cap_vms = n;
    }
    m->vms[m->n_vms++] = vm;
    return 0;
}

void manager_remove(struct manager *m, struct vm *vm)
{
    for (size_t i = 0; i < m->n_vms; i++) {
        if (m->vms[i] == vm) {
            m->vms[i] = m->vms[--m->n_vms];
            return;
        }
    }
}

static void failure_add(struct manager *m, const struct vm *vm, enum death_reason reason,
                        const char *message)
{
    struct failure f = { .reason = reason, .at = now_realtime() };
    char path[PATH_MAX];
    int r;

    snprintf(f.sandbox_id, sizeof(f.sandbox_id), "%s", vm_sandbox_id(vm));
    snprintf(f.iid, sizeof(f.iid), "%s", vm->rec.iid);
    snprintf(f.message, sizeof(f.message), "%s", message);
    failed_list_add(&m->failed, &f);
    snprintf(path, sizeof(path), "%s/" FAILED_LIST_FILE, m->host.data_dir);
    r = failed_list_save(&m->failed, path);
    if (r < 0) {
        log_warning_errno(r, "cannot save the failed sandboxes to '%s': %m", path);
    }
}

/* A VM whose VMM died on its own (guest panic, OOM kill, VMM crash): why (death.h), then
 * everything it had is freed. */
struct reap_job {
    struct manager *m;
    struct vm *vm;
    int r;
    enum death_reason reason;
    char message[DEATH_MESSAGE_MAX];
};

static void reap_work(void *p)
{
    struct reap_job *j = p;
    vm_death(&j->m->host, j->vm, &j->reason, j->message, sizeof(j->message));
    j->r = vm_destroy(&j->m->host, j->vm);
}

static void reap_done(void *p)
{
    struct reap_job *j = p;
    struct manager *m = j->m;
    log_sandbox_warning(vm_sandbox_id(j->vm), "instance %s failed: %s: %s", j->vm->rec.iid,
                        death_reason_to_string(j->reason), j->message);
    if (instance_is_bound(&j->vm->rec)) {
        failure_add(m, j->vm, j->reason, j->message);
    }
    vm_set_state(j->vm, VM_STOPPED);
    manager_remove(m, j->vm);
    if (j->vm->busy == 0) {
        vm_free(j->vm);
    }
    free(j);
    manager_job_finished(m);
}

static void egress_push_ca(struct manager *m, struct vm *vm);

static void tick_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct manager *m = userdata;

    for (size_t i = 0; i < m->n_vms && !m->stopping; i++) {
        struct vm *vm = m->vms[i];
        bool live = (vm_state(vm) == VM_RUNNING || vm_state(vm) == VM_PAUSED) && vm->rt;
        bool gone = live && !runtime_alive(vm->rt);
        /* A guest that halted never makes its VMM exit (death.h): reaped the same way. */
        bool halted = live && !gone && vm_state(vm) == VM_RUNNING && vm_guest_halted(&m->host, vm);
        if (gone || halted) {
            struct reap_job *j = malloc(sizeof(*j));
            if (j) {
                *j = (struct reap_job){ .m = m, .vm = vm };
            }
            if (!j || manager_run_job(m, reap_work, reap_done, j) < 0) {
                free(j);              /* pool full: the next tick tries again, */
                vm->console_seen = 0; /* reading the console's end again */
                continue;
            }
            log_sandbox_warning(vm_sandbox_id(vm), "%s of instance %s, removing it",
                                halted ? "the guest halted" : "the vmm exited unexpectedly",
                                vm->rec.iid);
            vm_set_state(vm, VM_STOPPING);
            manager_egress_detach(m, vm);
            continue;
        }
        egress_push_ca(m, vm); /* retries of a re-send that failed */
    }
    pool_tick(m->warm);
}

static void signal_cb(evutil_socket_t sig, short what, void *userdata)
{
    struct manager *m = userdata;
    log_info("received signal %d, stopping (sandboxes keep running)", (int)sig);
    manager_shutdown(m);
}

static void stop_timer_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct manager *m = userdata;
    log_warning("%u job(s) still running after the stop timeout; leaving them to the next "
                "start's reconcile",
                manager_jobs_pending(m));
    event_base_loopbreak(m->base);
}

void manager_job_finished(struct manager *m)
{
    if (m->stopping && manager_jobs_pending(m) == 0) {
        event_base_loopbreak(m->base);
    }
}

/*
 * Never re-enters the loop: it only arms a deadline and returns, and the
 * loop breaks when the last job completes or the deadline passes. Nothing
 * is destroyed but the warm pool's members (nobody's sandbox). A create that is cut off leaves a
 * "creating" record, which the next start destroys; an exec that is cut off loses its connection.
 */
void manager_shutdown(struct manager *m)
{
    struct timeval timeout = { MANAGER_STOP_TIMEOUT / USEC_PER_SEC, 0 };

    if (m->stopping) {
        return;
    }
    pool_shutdown(m->warm); /* before stopping: its destroys are jobs */
    m->stopping = true;
    if (manager_jobs_pending(m) == 0) {
        event_base_loopbreak(m->base);
        return;
    }
    evtimer_add(m->stop_timer, &timeout);
}

/* A stored policy that no longer parses (edited by hand, an older format) denies everything. */
static void check_stored_policy(struct vm *vm)
{
    struct policy_error perr = { .message = "" };
    struct policy *p = NULL;
    json_error_t jerr;
    json_t *j;

    if (!vm->rec.network) {
        return;
    }
    j = json_loads(vm->rec.network, 0, &jerr);
    if (!j || policy_parse_native(j, true, &p, &perr) < 0) {
        log_sandbox_warning(vm_sandbox_id(vm),
                            "instance %s: stored network policy is invalid (%s), it gets none "
                            "(deny everything)",
                            vm->rec.iid, j ? perr.message : jerr.text);
        (void)instance_record_set_network(&vm->rec, NULL);
    }
    policy_free(p);
    json_decref(j);
}

static void adopt_cb(struct vm *vm, void *userdata)
{
    struct manager *m = userdata;
    check_stored_policy(vm);
    if (manager_find(m, vm_sandbox_id(vm)) || manager_add(m, vm) < 0) {
        log_sandbox_error(vm_sandbox_id(vm),
                          "cannot adopt instance %s, leaving it to the next "
                          "start",
                          vm->rec.iid);
        vm_free(vm); /* frees the handle only: the VM keeps running */
    }
}

/*
 * The egress CA for agents that do not have it yet: a sandbox created while space-gw
 * was down (or before its first session) got an /init without caBundle, and a gateway
 * with a new CA invalidates what the others have. Each such running instance gets an
 * /init with just its access token and caBundle (the agent applies only the fields
 * given, and installing the same bundle again is harmless). On workers, at most
 * MANAGER_CA_JOBS_MAX at a time so creates keep their workers; a failure is retried
 * MANAGER_CA_RETRY later, MANAGER_CA_ATTEMPTS times per CA, from the tick.
 */
#define MANAGER_CA_JOBS_MAX 2u
#define MANAGER_CA_ATTEMPTS 5u
#define MANAGER_CA_RETRY (5 * USEC_PER_SEC)

struct ca_job {
    struct manager *m;
    struct vm *vm; /* held by vm->busy */
    char *body;
    char fingerprint[VM_CA_FINGERPRINT_LEN + 1];
    int r;
    char *error;
};

static void ca_work(void *p)
{
    struct ca_job *j = p;
    j->r = vm_send_init(j->vm, j->body, &j->error);
}

static void ca_done(void *p)
{
    struct ca_job *j = p;
    struct manager *m = j->m;
    struct vm *vm = j->vm;

    vm->busy--;
    vm->ca_busy = false;
    m->ca_jobs--;
    if (vm_state(vm) == VM_RUNNING) {
        if (j->r >= 0) {
            memcpy(vm->rec.ca_given, j->fingerprint, sizeof(vm->rec.ca_given));
            int r = vm_save_record(&m->host, &vm->rec);
            if (r < 0) {
                log_sandbox_warning_errno(vm_sandbox_id(vm), r,
                                          "cannot save instance %s's record (the egress CA "
                                          "would be sent again after a restart): %m",
                                          vm->rec.iid);
            }
            vm->ca_attempts = 0;
            log_sandbox_info(vm_sandbox_id(vm), "sent the egress CA %s to instance %s's agent",
                             j->fingerprint, vm->rec.iid);
        } else {
            vm->ca_retry_at = now_monotonic() + MANAGER_CA_RETRY;
            log_sandbox_warning(vm_sandbox_id(vm),
                                "cannot send the egress CA to instance %s's agent (try %u of "
                                "%u): %s",
                                vm->rec.iid, vm->ca_attempts, MANAGER_CA_ATTEMPTS,
                                j->error ? j->error : strerror(-j->r));
        }
    }
    if (vm_state(vm) == VM_STOPPED && vm->busy == 0) {
        vm_free(vm); /* killed while we ran: the kill left the free to us */
    }
    free(j->body);
    free(j->error);
    free(j);
    manager_job_finished(m);
}

char *manager_ca_init_body(const struct vm *vm, const char *ca)
{
    json_t *j = json_pack("{s:s}", "caBundle", ca);
    char *text;

    /* The agent refuses an /init that does not prove its token. */
    if (j && vm->rec.access_token[0] &&
        json_object_set_new(j, "accessToken", json_string(vm->rec.access_token)) < 0) {
        json_decref(j);
        return NULL;
    }
    text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return text;
}

static void egress_push_ca(struct manager *m, struct vm *vm)
{
    char fp[VM_CA_FINGERPRINT_LEN + 1];
    const char *ca = gw_client_ca_pem(m->gw);
    struct ca_job *j;

    if (!ca || !gw_client_ready(m->gw) || vm_state(vm) != VM_RUNNING || !vm->rt ||
        !instance_is_bound(&vm->rec) || vm->ca_busy || m->ca_jobs >= MANAGER_CA_JOBS_MAX) {
        return;
    }
    vm_ca_fingerprint(ca, fp);
    if (strcmp(vm->ca_tried, fp) == 0 && vm->ca_attempts >= MANAGER_CA_ATTEMPTS) {
        return; /* gave up on this CA: the next one gets new tries */
    }
    if (strcmp(vm_ca_given(vm), fp) == 0) {
        return;
    }
    if (strcmp(vm->ca_tried, fp) != 0) { /* a new CA: a fresh set of tries */
        memcpy(vm->ca_tried, fp, sizeof(vm->ca_tried));
        vm->ca_attempts = 0;
        vm->ca_retry_at = 0;
    }
    if (vm->ca_attempts >= MANAGER_CA_ATTEMPTS || now_monotonic() < vm->ca_retry_at) {
        return;
    }
    j = calloc(1, sizeof(*j));
    if (!j) {
        return;
    }
    *j = (struct ca_job){ .m = m, .vm = vm, .body = manager_ca_init_body(vm, ca) };
    memcpy(j->fingerprint, fp, sizeof(j->fingerprint));
    if (!j->body || manager_run_job(m, ca_work, ca_done, j) < 0) {
        free(j->body); /* pool full or stopping: the next tick tries again */
        free(j);
        return;
    }
    vm->busy++;
    vm->ca_busy = true;
    vm->ca_attempts++;
    m->ca_jobs++;
    log_sandbox_info(vm_sandbox_id(vm), "sending the egress CA %s to instance %s's agent", fp,
                     vm->rec.iid);
}

void manager_egress_ca_counts(struct manager *m, unsigned *running, unsigned *with_bundle,
                              unsigned *paused)
{
    const char *ca = gw_client_ca_pem(m->gw);
    char fp[VM_CA_FINGERPRINT_LEN + 1] = "";

    *running = *with_bundle = *paused = 0;
    if (ca) {
        vm_ca_fingerprint(ca, fp);
    }
    for (size_t i = 0; i < m->n_vms; i++) {
        struct vm *vm = m->vms[i];
        if (!instance_is_bound(&vm->rec)) {
            continue;
        }
        if (vm_state(vm) == VM_RUNNING) {
            (*running)++;
            *with_bundle += fp[0] && strcmp(vm_ca_given(vm), fp) == 0;
        } else if (vm_state(vm) != VM_STOPPING && vm_state(vm) != VM_STOPPED &&
                   vm_state(vm) != VM_CREATING) {
            (*paused)++; /* paused, suspended, or on the way: given the bundle when resumed */
        }
    }
}

void manager_kick_ca(struct manager *m)
{
    for (size_t i = 0; i < m->n_vms; i++) {
        egress_push_ca(m, m->vms[i]);
    }
}

void manager_egress_attach(struct manager *m, struct vm *vm)
{
    int r;

    /* Paused keeps its attachment (its connections stall, they are not torn down). */
    if (!gw_client_ready(m->gw) || (vm_state(vm) != VM_RUNNING && vm_state(vm) != VM_PAUSED) ||
        !instance_is_bound(&vm->rec)) {
        return;
    }
    /* Opened on first use rather than at create: after a node restart the previous
     * session's copies are closed only once space-gw has answered our hello. */
    if (vm->dns_fd < 0) {
        r = netslot_open_listeners(vm->rec.iid, &vm->dns_fd, &vm->gateway_fd);
        if (r < 0) {
            log_sandbox_warning_errno(vm_sandbox_id(vm), r,
                                      "cannot open the egress sockets of instance %s, it has no "
                                      "egress until the next space-gw session: %m",
                                      vm->rec.iid);
            return;
        }
    }
    r = gw_client_attach(m->gw, vm->rec.iid, vm_sandbox_id(vm), vm->rec.network, vm->dns_fd,
                         vm->gateway_fd);
    if (r < 0) {
        log_sandbox_warning_errno(vm_sandbox_id(vm), r, "cannot attach instance %s to space-gw: %m",
                                  vm->rec.iid);
    }
    egress_push_ca(m, vm);
}

void manager_egress_detach(struct manager *m, struct vm *vm)
{
    if (vm->dns_fd >= 0) {
        (void)gw_client_detach(m->gw, vm->rec.iid);
    }
}

static void egress_resync(struct gw_client *gw, void *userdata)
{
    struct manager *m = userdata;
    for (size_t i = 0; i < m->n_vms; i++) {
        manager_egress_attach(m, m->vms[i]);
    }
}

int manager_enable_egress(struct manager *m, const char *gw_socket, const char *node_name)
{
    return gw_client_new(m->base, gw_socket, node_name, m->audit, egress_resync, m, &m->gw);
}

int manager_new(struct event_base *base, const struct vm_host *host,
                const struct manager_limits *limits, struct manager **ret)
{
    struct manager *m = calloc(1, sizeof(*m));
    struct timeval second = { 1, 0 };
    char path[PATH_MAX];
    int r;

    if (!m) {
        return -ENOMEM;
    }
    vm_state_set_owner_thread();
    m->base = base;
    m->host = *host;
    m->max_sandboxes = 64;
    r = worker_pool_new(base, limits->workers, limits->queue, &m->pool);
    if (r < 0) {
        goto fail;
    }
    r = egress_audit_new(EGRESS_AUDIT_MAX, EGRESS_AUDIT_MAX_BYTES, &m->audit);
    if (r < 0) {
        goto fail;
    }
    m->http = evhttp_new(base);
    m->sigterm = evsignal_new(base, SIGTERM, signal_cb, m);
    m->sigint = evsignal_new(base, SIGINT, signal_cb, m);
    m->tick = event_new(base, -1, EV_PERSIST, tick_cb, m);
    m->stop_timer = evtimer_new(base, stop_timer_cb, m);
    if (!m->http || !m->sigterm || !m->sigint || !m->tick || !m->stop_timer) {
        r = -ENOMEM;
        goto fail;
    }
    event_add(m->sigterm, NULL);
    event_add(m->sigint, NULL);
    event_add(m->tick, &second);
    snprintf(path, sizeof(path), "%s/" FAILED_LIST_FILE, m->host.data_dir);
    r = failed_list_load(&m->failed, path);
    if (r < 0 && r != -ENOENT) {
        log_warning_errno(r, "cannot read the failed sandboxes in '%s', starting without: %m",
                          path);
    }
    r = vm_reconcile(&m->host, adopt_cb, m);
    if (r < 0) {
        log_warning_errno(r, "cannot reconcile instances: %m");
    }
    disk_snapshot_sweep(&m->host); /* what a crash mid-snapshot left is never offered */
    r = http_api_register(m);
    if (r < 0) {
        goto fail;
    }
    *ret = m;
    return 0;
fail:
    manager_free(m);
    return r;
}

struct manager *manager_free(struct manager *m)
{
    if (!m) {
        return NULL;
    }
    gw_client_free(m->gw);
    /* Handles only: the VMs keep running for the next start to re-attach. */
    for (size_t i = 0; i < m->n_vms; i++) {
        vm_free(m->vms[i]);
    }
    free(m->vms);
    worker_pool_stop(m->pool);
    if (m->http) {
        evhttp_free(m->http);
    }
    if (m->sigterm) {
        event_free(m->sigterm);
    }
    if (m->sigint) {
        event_free(m->sigint);
    }
    m->warm = pool_free(m->warm);
    if (m->tick) {
        event_free(m->tick);
    }
    if (m->stop_timer) {
        event_free(m->stop_timer);
    }
    egress_audit_free(m->audit);
    free(m);
    return NULL;
}
