/*
 * The manager: sandbox table, worker jobs, periodic health check.
 *
 * Threading (style.md R14): the event loop thread is the only one that reads
 * or writes the table and vm states. Blocking work (disk clones, spawning
 * ip/qemu, waiting for a guest, streaming an exec) runs on a detached worker
 * thread per job that sees only its job struct; the worker hands the job
 * back with event_base_once(), which is thread-safe after
 * evthread_use_pthreads(). A vm handed to a worker is protected by its state
 * (CREATING / KILLING belong to the worker) or by vm->busy (exec).
 */
#include "node/manager.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "shared/event-util.h"

int manager_run_job(struct manager *m, manager_job_fn work, manager_job_fn done, void *job)
{
    return event_util_run_job(m->base, &m->jobs_running, work, done, job);
}

struct vm *manager_find(struct manager *m, const char *id)
{
    for (size_t i = 0; i < m->n_vms; i++) {
        if (strcmp(m->vms[i]->id, id) == 0) {
            return m->vms[i];
        }
    }
    return NULL;
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

/* A VM whose VMM died on its own (guest panic, OOM kill) is cleaned up here. */
struct reap_job {
    struct manager *m;
    struct vm *vm;
};

static void reap_work(void *p)
{
    struct reap_job *j = p;
    (void)vm_destroy(&j->m->host, j->vm);
}

static void reap_done(void *p)
{
    struct reap_job *j = p;
    manager_remove(j->m, j->vm);
    if (j->vm->busy == 0) {
        vm_free(j->vm);
    }
    free(j);
}

static void tick_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct manager *m = userdata;

    for (size_t i = 0; i < m->n_vms; i++) {
        struct vm *vm = m->vms[i];
        if (vm->state == VM_RUNNING && vm->rt && !runtime_alive(vm->rt)) {
            struct reap_job *j = malloc(sizeof(*j));
            log_sandbox_warning(vm->id, "vmm exited unexpectedly, removing sandbox");
            vm->state = VM_KILLING;
            if (!j) {
                continue;
            }
            *j = (struct reap_job){ .m = m, .vm = vm };
            if (manager_run_job(m, reap_work, reap_done, j) < 0) {
                free(j);
            }
        }
    }
}

static void signal_cb(evutil_socket_t sig, short what, void *userdata)
{
    struct manager *m = userdata;
    log_info("received signal %d, stopping", (int)sig);
    manager_shutdown(m);
}

void manager_shutdown(struct manager *m)
{
    if (m->stopping) {
        return;
    }
    m->stopping = true;
    /* Wait for in-flight workers: they may hold vms. Then tear everything down. */
    while (m->jobs_running > 0) {
        event_base_loop(m->base, EVLOOP_ONCE);
    }
    for (size_t i = 0; i < m->n_vms; i++) {
        (void)vm_destroy(&m->host, m->vms[i]);
        vm_free(m->vms[i]);
    }
    m->n_vms = 0;
    event_base_loopbreak(m->base);
}

static void adopt_cb(struct vm *vm, void *userdata)
{
    struct manager *m = userdata;
    if (manager_add(m, vm) < 0) {
        (void)vm_destroy(&m->host, vm);
        vm_free(vm);
    }
}

int manager_new(struct event_base *base, const struct vm_host *host, struct manager **ret)
{
    struct manager *m = calloc(1, sizeof(*m));
    struct timeval second = { 1, 0 };
    int r;

    if (!m) {
        return -ENOMEM;
    }
    m->base = base;
    m->host = *host;
    m->max_sandboxes = 64;
    m->default_vcpus = 1;
    m->default_memory_mib = 512;
    m->http = evhttp_new(base);
    m->sigterm = evsignal_new(base, SIGTERM, signal_cb, m);
    m->sigint = evsignal_new(base, SIGINT, signal_cb, m);
    m->tick = event_new(base, -1, EV_PERSIST, tick_cb, m);
    if (!m->http || !m->sigterm || !m->sigint || !m->tick) {
        r = -ENOMEM;
        goto fail;
    }
    event_add(m->sigterm, NULL);
    event_add(m->sigint, NULL);
    event_add(m->tick, &second);
    r = vm_reconcile(&m->host, adopt_cb, m);
    if (r < 0) {
        log_warning_errno(r, "cannot reconcile sandboxes: %m");
    }
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
    for (size_t i = 0; i < m->n_vms; i++) {
        vm_free(m->vms[i]);
    }
    free(m->vms);
    if (m->http) {
        evhttp_free(m->http);
    }
    if (m->sigterm) {
        event_free(m->sigterm);
    }
    if (m->sigint) {
        event_free(m->sigint);
    }
    if (m->tick) {
        event_free(m->tick);
    }
    free(m);
    return NULL;
}
