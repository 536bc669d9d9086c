#pragma once
/*
 * space-node's state: the sandboxes on this host, the HTTP front end, and
 * the worker jobs that do the blocking work. One event loop (libevent) owns
 * all of it; see manager.c for the threading rules.
 */
#include <event2/event.h>
#include <event2/http.h>

#include "node/vm.h"

struct manager {
    struct event_base *base;
    struct evhttp *http;
    struct event *sigterm, *sigint, *tick;
    struct vm_host host;
    struct vm **vms;
    size_t n_vms, cap_vms;
    unsigned max_sandboxes;
    unsigned default_vcpus, default_memory_mib;
    unsigned jobs_running;
    const char *share_dir;   /* template recipes + tools/template-build.sh; NULL: no builds */
    const char *agent_path;  /* the space-agent binary templates get */
    const char *cache_dir;   /* template build cache */
    bool stopping;
};

int manager_new(struct event_base *base, const struct vm_host *host, struct manager **ret);
struct manager *manager_free(struct manager *m);

/* Loop thread only. */
struct vm *manager_find(struct manager *m, const char *id);
int manager_add(struct manager *m, struct vm *vm);
void manager_remove(struct manager *m, struct vm *vm);

/*
 * Runs work(job) on a new worker thread, then done(job) on the loop thread.
 * job must stay valid until done runs; done owns and frees it.
 */
typedef void (*manager_job_fn)(void *job);
int manager_run_job(struct manager *m, manager_job_fn work, manager_job_fn done, void *job);

/* Destroys every sandbox (blocking; at shutdown) and stops the loop. */
void manager_shutdown(struct manager *m);

/* Installs the HTTP routes (http-api.c). */
int http_api_register(struct manager *m);
