#pragma once
/*
 * space-node's state: the instances on this host, the HTTP front end, and
 * the worker pool that does the blocking work. One event loop (libevent)
 * owns all of it; see manager.c for the threading rules.
 */
#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>

#include "node/egress-audit.h"
#include "node/failed-list.h"
#include "node/gw-client.h"
#include "node/vm.h"
#include "node/worker-pool.h"

struct manager {
    struct event_base *base;
    struct evhttp *http;
    struct event *sigterm, *sigint, *tick, *stop_timer;
    struct vm_host host;
    struct worker_pool *pool;
    struct pool *warm; /* the warm pool of restored, paused instances (pool.h); NULL: off */
    struct vm **vms;   /* every instance, bound or not */
    size_t n_vms, cap_vms;
    unsigned max_sandboxes;
    uint64_t memory_budget_mib; /* guest RAM + VMM overhead of every instance at most; 0: none */
    unsigned vmm_overhead_mib;  /* what each VMM may use beyond its guest's RAM (jail.h) */
    unsigned vcpu_budget;       /* vCPUs of every instance at most (capacity.h); 0: none */
    const char *share_dir;      /* template recipes + tools/template-build.sh; NULL: no builds */
    const char *agent_path;     /* the space-agent binary templates get */
    const char *cache_dir;      /* template build cache */
    struct gw_client *gw;       /* the space-gw session; NULL with --no-gw (no egress at all) */
    struct egress_audit *audit; /* what space-gw reported, for GET /v1/egress-audit */
    unsigned ca_jobs;           /* egress-CA /init re-sends on workers (MANAGER_CA_JOBS_MAX) */
    struct failed_list failed;  /* the sandboxes that died on their own, saved (failed-list.h) */
    bool stopping;
};

struct manager_limits {
    unsigned workers; /* worker threads at most */
    unsigned queue;   /* jobs waiting for a worker at most */
};

int manager_new(struct event_base *base, const struct vm_host *host,
                const struct manager_limits *limits, struct manager **ret);
struct manager *manager_free(struct manager *m);

/* Loop thread only. The instance bound to sandbox_id, or NULL. */
struct vm *manager_find(struct manager *m, const char *sandbox_id);
/* Loop thread only. The instance with id iid, or NULL. */
struct vm *manager_find_instance(struct manager *m, const char *iid);
/* Loop thread only. The netns path of the instance bound to sandbox_id, or -ENOENT. */
int manager_sandbox_netns_path(struct manager *m, const char *sandbox_id, char *buf, size_t n);
int manager_add(struct manager *m, struct vm *vm);
void manager_remove(struct manager *m, struct vm *vm);
/*
 * Binds sandbox_id to vm (instance_bind()), refusing an id another instance
 * has (-EEXIST). Persisting the binding is the caller's: create writes it in
 * its first record.
 */
int manager_bind(struct manager *m, struct vm *vm, const char *sandbox_id);

/*
 * Runs work(job) on a pool worker, then done(job) on the loop thread. job
 * must stay valid until done runs; done owns and frees it. -EAGAIN: the
 * pool and its queue are full (answer 503); -ESHUTDOWN: the node is stopping.
 */
typedef void (*manager_job_fn)(void *job);
int manager_run_job(struct manager *m, manager_job_fn work, manager_job_fn done, void *job);
/* Jobs submitted whose done has not run. */
unsigned manager_jobs_pending(const struct manager *m);

/*
 * Graceful stop: refuses new work and breaks the loop once the jobs in
 * flight are done, or after MANAGER_STOP_TIMEOUT, whichever is first.
 * Running sandboxes are left running: the next node start re-attaches them.
 */
#define MANAGER_STOP_TIMEOUT (3 * USEC_PER_SEC)
void manager_shutdown(struct manager *m);
/* Called by job completions while stopping: breaks the loop when nothing is left. */
void manager_job_finished(struct manager *m);

/*
 * Egress (gw-client.h): connects to space-gw at gw_socket and keeps every
 * running instance attached there. Without it sandboxes have no egress (the
 * nftables redirect finds no listener: connections are refused).
 */
int manager_enable_egress(struct manager *m, const char *gw_socket, const char *node_name);
/* Loop thread. Hands vm's egress sockets (opened on first use) and policy to space-gw. */
void manager_egress_attach(struct manager *m, struct vm *vm);
/*
 * The egress CA rotation's view of the sandboxes (issue 10 item 4): bound ones running, how
 * many of those acknowledged the current bundle (their agent took it), and the others alive
 * but not running (paused, suspended, on the way: resume and restore give them the bundle
 * before they answer).
 */
void manager_egress_ca_counts(struct manager *m, unsigned *running, unsigned *with_bundle,
                              unsigned *paused);
/* The bundle changed: start sending it to every running agent now (the tick retries). */
void manager_kick_ca(struct manager *m);
/* The /init body that gives vm's agent the CA bundle ca (its access token included). */
char *manager_ca_init_body(const struct vm *vm, const char *ca);
/* Loop thread. Tells space-gw to stop serving vm (its sockets close with the vm). */
void manager_egress_detach(struct manager *m, struct vm *vm);

/* Installs the HTTP routes (http-api.c). */
int http_api_register(struct manager *m);
/* For the routes in other files (snapshot-routes.c): a sandbox's JSON, and the answer
 * when manager_run_job() refused (503 + Retry-After, or 500). */
json_t *http_api_vm_json(const struct vm *vm);
void http_api_reply_no_worker(struct evhttp_request *req, int r);
