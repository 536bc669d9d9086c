/*
 * The warm pool; see pool.h for what a member is and why it is safe across a
 * crash. Bookkeeping only: the members are struct vm in the manager's table,
 * made by vm_create_member() and bound by vm_bind_member() (vm.c).
 *
 * A member is handed out only when its VMM is alive and the snapshot it was
 * restored from is still the template's current one (snapshot_get() answers
 * with the same directory: a rebuilt template or a changed key gives another
 * one, or none yet). Everything else is destroyed on a worker; a destroy the
 * worker pool cannot take now waits in `doomed` for the next tick.
 */
#include "node/pool.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "node/capacity.h"
#include "node/pool-target.h"
#include "node/snapshot.h"

#define POOL_ENTRIES_MAX 16
#define POOL_TARGET_MAX 64
/* After a failed refill (a restore that failed, no snapshot yet), wait before the next. */
#define POOL_RETRY_FAILED (5 * USEC_PER_SEC)
#define POOL_RETRY_NO_SNAPSHOT (1 * USEC_PER_SEC)
/* A refill starts only while at most this many other jobs are in flight: creates first. */
#define POOL_REFILL_MAX_JOBS 2

struct member {
    struct vm *vm;
    char snap_dir[PATH_MAX]; /* the snapshot it was restored from */
};

struct entry {
    char template_name[sizeof(((struct instance_record *)0)->template_name)];
    unsigned vcpus, memory_mib;
    struct member members[POOL_TARGET_MAX];
    size_t n;
    bool filling;
    usec_t retry_at;
    unsigned long served, refills; /* creates bound from here; members made */
    struct pool_rate asked;        /* creates that asked this pool (pool_take()) */
    unsigned target;               /* what the last tick computed (entry_target()) */
};

struct pool {
    struct manager *m;
    unsigned min, max; /* max >= min; min 0: off */
    usec_t window;
    struct entry entries[POOL_ENTRIES_MAX];
    size_t n_entries;
    struct vm **doomed; /* taken out, to destroy when a worker is free */
    size_t n_doomed, cap_doomed;
    unsigned fills; /* refill jobs in flight (at most one) */
};

int pool_new(struct manager *m, unsigned min, unsigned max, usec_t window, struct pool **ret)
{
    struct pool *p = calloc(1, sizeof(*p));
    if (!p) {
        return -ENOMEM;
    }
    p->m = m;
    p->min = MIN(min, POOL_TARGET_MAX);
    p->max = MIN(MAX(max, p->min), POOL_TARGET_MAX);
    p->window = window;
    *ret = p;
    return 0;
}

struct pool *pool_free(struct pool *p)
{
    if (p) {
        /* The vms are in the manager's table (manager_free() frees them): only ours go. */
        free(p->doomed);
        free(p);
    }
    return NULL;
}

static struct entry *entry_find(struct pool *p, const char *template_name, unsigned vcpus,
                                unsigned memory_mib)
{
    for (size_t i = 0; i < p->n_entries; i++) {
        struct entry *e = &p->entries[i];
        if (e->vcpus == vcpus && e->memory_mib == memory_mib &&
            strcmp(e->template_name, template_name) == 0) {
            return e;
        }
    }
    return NULL;
}

void pool_want(struct pool *p, const char *template_name, unsigned vcpus, unsigned memory_mib)
{
    if (!p || p->min == 0 || entry_find(p, template_name, vcpus, memory_mib) ||
        p->n_entries == POOL_ENTRIES_MAX ||
        strlen(template_name) >= sizeof(p->entries[0].template_name)) {
        return;
    }
    struct entry *e = &p->entries[p->n_entries++];
    *e = (struct entry){ .vcpus = vcpus, .memory_mib = memory_mib, .target = p->min };
    snprintf(e->template_name, sizeof(e->template_name), "%s", template_name);
    pool_rate_init(&e->asked, p->window);
    log_info("warm pool: keeping %u..%u member(s) of template '%s' (%u vcpus, %u MiB)", p->min,
             p->max, template_name, vcpus, memory_mib);
}

/* ---- destroying members ---- */

struct destroy_job {
    struct pool *p;
    struct vm *vm;
};

static void destroy_work(void *arg)
{
    struct destroy_job *j = arg;
    (void)vm_destroy(&j->p->m->host, j->vm);
}

static void destroy_done(void *arg)
{
    struct destroy_job *j = arg;
    struct manager *m = j->p->m;

    vm_set_state(j->vm, VM_STOPPED);
    manager_remove(m, j->vm);
    vm_free(j->vm);
    free(j);
    manager_job_finished(m);
}

/* Starts destroying vm (taken out of every entry); 0, or -errno when it must wait. */
static int destroy_start(struct pool *p, struct vm *vm)
{
    struct destroy_job *j = malloc(sizeof(*j));
    int r;

    if (!j) {
        return -ENOMEM;
    }
    *j = (struct destroy_job){ .p = p, .vm = vm };
    r = manager_run_job(p->m, destroy_work, destroy_done, j);
    if (r < 0) {
        free(j);
        return r;
    }
    /* It stays CREATING (a state that belongs to the worker) until destroy_done(). */
    return 0;
}

void pool_discard(struct pool *p, struct vm *vm)
{
    if (destroy_start(p, vm) >= 0) {
        return;
    }
    if (p->n_doomed == p->cap_doomed) {
        size_t n = p->cap_doomed ? p->cap_doomed * 2 : 8;
        struct vm **d = realloc(p->doomed, n * sizeof(*d));
        if (!d) {
            /* Out of memory with nowhere to keep it: it stays in the table, unbound and
             * CREATING on disk, so the next node start destroys it. */
            log_error("warm pool: cannot queue the destroy of instance %s", vm->rec.iid);
            return;
        }
        p->doomed = d;
        p->cap_doomed = n;
    }
    p->doomed[p->n_doomed++] = vm;
}

static void entry_drop(struct pool *p, struct entry *e, size_t i, const char *why)
{
    struct vm *vm = e->members[i].vm;

    log_warning("warm pool: destroying member %s of template '%s': %s", vm->rec.iid,
                e->template_name, why);
    e->members[i] = e->members[--e->n];
    pool_discard(p, vm);
}

/* The directory of the template's current snapshot into buf; -errno when there is none. */
static int current_snapshot(struct pool *p, const struct entry *e, char *buf, size_t n)
{
    struct snapshot *s = NULL;
    int r = snapshot_get(&p->m->host, e->template_name, e->vcpus, e->memory_mib, &s);
    if (r < 0) {
        return r;
    }
    snprintf(buf, n, "%s", snapshot_dir(s));
    snapshot_unref(s);
    return 0;
}

/* Drops every member that is dead or not of the current snapshot (current: NULL = none). */
static void entry_sweep(struct pool *p, struct entry *e, const char *current)
{
    for (size_t i = e->n; i-- > 0;) {
        struct member *mb = &e->members[i];
        if (!mb->vm->rt || !runtime_alive(mb->vm->rt)) {
            entry_drop(p, e, i, "its VMM exited");
        } else if (!current || strcmp(current, mb->snap_dir) != 0) {
            entry_drop(p, e, i, "the template's snapshot changed");
        }
    }
}

struct vm *pool_take(struct pool *p, const char *template_name, unsigned vcpus, unsigned memory_mib)
{
    char current[PATH_MAX];
    struct entry *e;

    if (!p || p->min == 0) {
        return NULL;
    }
    e = entry_find(p, template_name, vcpus, memory_mib);
    if (!e) {
        pool_want(p, template_name, vcpus, memory_mib);
        e = entry_find(p, template_name, vcpus, memory_mib);
    }
    if (!e) {
        return NULL; /* no slot left for another pool */
    }
    /* Served or not, this create is demand: the refills follow it (entry_target()). */
    pool_rate_add(&e->asked, now_monotonic());
    if (e->n == 0) {
        return NULL;
    }
    bool have = current_snapshot(p, e, current, sizeof(current)) >= 0;
    entry_sweep(p, e, have ? current : NULL);
    if (e->n == 0) {
        return NULL;
    }
    /* The oldest first: every member is as warm as the others, and the newest may still
     * be settling on a busy host. */
    struct vm *vm = e->members[0].vm;
    memmove(&e->members[0], &e->members[1], (e->n - 1) * sizeof(e->members[0]));
    e->n--;
    e->served++;
    return vm;
}

void pool_make_room(struct pool *p, unsigned vcpus, unsigned memory_mib)
{
    struct manager *m = p ? p->m : NULL;

    if (!m) {
        return;
    }
    for (size_t i = 0; i < p->n_entries; i++) {
        struct entry *e = &p->entries[i];
        while (e->n > 0 && !capacity_fits(m, vcpus, memory_mib, NULL, 0)) {
            /* Out of the table now, so the create that needs the room sees it free; its
             * VMM is destroyed on a worker right after. */
            manager_remove(m, e->members[e->n - 1].vm);
            entry_drop(p, e, e->n - 1, "a create needs its memory");
        }
    }
}

int pool_bind(const struct vm_host *host, const struct vm *vm, struct vm_create_result *ret)
{
    int r = vm_bind_member(host, vm, ret);
    if (r >= 0) {
        return r;
    }
    log_sandbox_warning(vm_sandbox_id(vm), "%s; creating it without the pool",
                        ret->error ? ret->error : strerror(-r));
    free(ret->error);
    (void)vm_destroy(host, vm);
    return vm_create(host, vm, ret);
}

/* ---- refills ---- */

struct fill_job {
    struct pool *p;
    struct entry *e;
    struct vm *vm;
    char snap_dir[PATH_MAX];
    int r;
    struct vm_create_result res;
};

static void fill_work(void *arg)
{
    struct fill_job *j = arg;
    const struct vm_host *host = &j->p->m->host;
    struct snapshot *snap = NULL;

    j->r = snapshot_get(host, j->e->template_name, j->e->vcpus, j->e->memory_mib, &snap);
    if (j->r < 0) {
        return;
    }
    snprintf(j->snap_dir, sizeof(j->snap_dir), "%s", snapshot_dir(snap));
    j->r = vm_create_member(host, j->vm, snap, &j->res);
    if (j->r < 0 && j->res.snapshot_suspect) {
        snapshot_suspect(snap);
    }
    snapshot_unref(snap);
}

static void fill_done(void *arg)
{
    struct fill_job *j = arg;
    struct pool *p = j->p;
    struct entry *e = j->e;
    struct vm *vm = j->vm;

    p->fills--;
    e->filling = false;
    if (j->r < 0 || e->n == POOL_TARGET_MAX) {
        if (j->r != -EAGAIN) {
            log_warning("warm pool: a member of template '%s' failed: %s", e->template_name,
                        j->res.error ? j->res.error : strerror(-j->r));
        }
        e->retry_at =
            now_monotonic() + (j->r == -EAGAIN ? POOL_RETRY_NO_SNAPSHOT : POOL_RETRY_FAILED);
        if (j->r >= 0) {
            runtime_vm_free(j->res.rt);
        }
        vm_set_state(vm, VM_STOPPED);
        manager_remove(p->m, vm);
        vm_free(vm); /* a failed create removed everything it made */
    } else {
        vm->rt = j->res.rt;
        vm->timing = j->res.timing;
        vm->rec.pid = j->res.pid;
        vm->rec.pid_start_time = j->res.pid_start_time;
        e->members[e->n].vm = vm;
        snprintf(e->members[e->n].snap_dir, sizeof(e->members[e->n].snap_dir), "%s", j->snap_dir);
        e->n++;
        e->refills++;
        log_debug("warm pool: member %s of template '%s' ready in %.1f ms (%zu/%u)", vm->rec.iid,
                  e->template_name, j->res.timing.total / 1000.0, e->n, e->target);
    }
    free(j->res.error);
    free(j);
    manager_job_finished(p->m);
}

/* Members there are or are being made: what the target is held against. */
static unsigned entry_level(const struct entry *e)
{
    return (unsigned)e->n + (e->filling ? 1 : 0);
}

/*
 * Demand in the window clamped to [min, max] and to the room the budgets leave
 * (capacity_room(), less the one instance slot refills always leave to creates: see
 * next_to_fill()).
 */
static unsigned entry_target(struct pool *p, struct entry *e, usec_t now)
{
    struct manager *m = p->m;
    unsigned room = capacity_room(m, e->vcpus, e->memory_mib);
    size_t slots = m->max_sandboxes > m->n_vms ? m->max_sandboxes - m->n_vms : 0;

    room = MIN(room, slots > 0 ? (unsigned)MIN(slots - 1, (size_t)UINT_MAX) : 0);
    return pool_target(pool_rate_count(&e->asked, now), p->min, p->max, entry_level(e), room);
}

/* The next entry short of its target that may refill now, or NULL. */
static struct entry *next_to_fill(struct pool *p)
{
    struct manager *m = p->m;
    usec_t now = now_monotonic();

    if (p->fills > 0 || m->stopping || manager_jobs_pending(m) > POOL_REFILL_MAX_JOBS ||
        m->n_vms + 1 >= m->max_sandboxes) {
        return NULL;
    }
    for (size_t i = 0; i < p->n_entries; i++) {
        struct entry *e = &p->entries[i];
        if (entry_level(e) >= e->target || e->filling || now < e->retry_at) {
            continue;
        }
        /* The pool never takes the node past its budgets (pool_make_room() gives back). */
        if (!capacity_fits(m, e->vcpus, e->memory_mib, NULL, 0)) {
            continue;
        }
        return e;
    }
    return NULL;
}

static void fill_start(struct pool *p, struct entry *e)
{
    struct fill_job *j = calloc(1, sizeof(*j));
    struct vm *vm = NULL;
    int r;

    r = j ? vm_new(e->template_name, e->vcpus, e->memory_mib, &vm) : -ENOMEM;
    if (r >= 0) {
        /* Shaped like a create that names no rate; a bind asking for another replaces it. */
        vm->rec.net_bps = p->m->host.net_bps;
        r = manager_add(p->m, vm); /* counted against the budget from now on */
    }
    if (r >= 0) {
        *j = (struct fill_job){ .p = p, .e = e, .vm = vm };
        r = manager_run_job(p->m, fill_work, fill_done, j);
        if (r < 0) {
            manager_remove(p->m, vm);
        }
    }
    if (r < 0) {
        vm_free(vm);
        free(j);
        return; /* the next tick tries again */
    }
    e->filling = true;
    p->fills++;
}

void pool_shutdown(struct pool *p)
{
    for (size_t i = 0; p && i < p->n_entries; i++) {
        struct entry *e = &p->entries[i];
        while (e->n > 0) {
            struct vm *vm = e->members[--e->n].vm;
            if (destroy_start(p, vm) < 0) {
                log_warning("warm pool: member %s left to the next start", vm->rec.iid);
            }
        }
    }
    while (p && p->n_doomed > 0) {
        (void)destroy_start(p, p->doomed[--p->n_doomed]);
    }
}

void pool_tick(struct pool *p)
{
    char current[PATH_MAX];

    if (!p || p->min == 0) {
        return;
    }
    while (p->n_doomed > 0 && destroy_start(p, p->doomed[p->n_doomed - 1]) >= 0) {
        p->n_doomed--;
    }
    for (size_t i = 0; i < p->n_entries; i++) {
        struct entry *e = &p->entries[i];
        bool have = current_snapshot(p, e, current, sizeof(current)) >= 0;
        if (e->n > 0) {
            entry_sweep(p, e, have ? current : NULL);
        }
        if (!have && !e->filling && e->retry_at < now_monotonic() + POOL_RETRY_NO_SNAPSHOT) {
            /* Not ready (being built, or the template is gone): no refill until it is. */
            e->retry_at = now_monotonic() + POOL_RETRY_NO_SNAPSHOT;
        }
        e->target = entry_target(p, e, now_monotonic());
        if (e->n > 0 && entry_level(e) > e->target) {
            /* Creates slowed: the oldest goes (all are as warm; it has waited longest), one a
             * tick so the destroys never crowd the worker pool. */
            struct vm *vm = e->members[0].vm;
            log_info("warm pool: destroying member %s of template '%s': above the target %u",
                     vm->rec.iid, e->template_name, e->target);
            memmove(&e->members[0], &e->members[1], (e->n - 1) * sizeof(e->members[0]));
            e->n--;
            pool_discard(p, vm);
        }
    }
    struct entry *e = next_to_fill(p);
    if (e) {
        fill_start(p, e);
    }
}

json_t *pool_to_json(struct pool *p)
{
    json_t *list = json_array();
    usec_t now = now_monotonic();

    for (size_t i = 0; p && list && i < p->n_entries; i++) {
        struct entry *e = &p->entries[i];
        json_t *members = json_array();
        for (size_t k = 0; members && k < e->n; k++) {
            const struct vm *vm = e->members[k].vm;
            json_array_append_new(members, json_pack("{s:s, s:i}", "instance_id", vm->rec.iid,
                                                     "pid", vm->rt ? (int)runtime_pid(vm->rt) : 0));
        }
        /* The target as the next tick computes it: a create a moment ago already shows. */
        json_array_append_new(
            list, json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:f, s:I, s:I, s:o}",
                            "template", e->template_name, "vcpus", (int)e->vcpus, "memory_mb",
                            (int)e->memory_mib, "min", (int)p->min, "max", (int)p->max, "target",
                            (int)entry_target(p, e, now), "level", (int)entry_level(e), "ready",
                            (int)e->n, "filling", e->filling, "rate_per_minute",
                            pool_rate_per_minute(&e->asked, now), "served", (json_int_t)e->served,
                            "refills", (json_int_t)e->refills, "members", members));
    }
    /* "target" is min, as it was when the pool had one fixed size (space pool ls: 0 = off). */
    return json_pack("{s:i, s:i, s:i, s:I, s:o}", "target", p ? (int)p->min : 0, "min",
                     p ? (int)p->min : 0, "max", p ? (int)p->max : 0, "window_s",
                     (json_int_t)(p ? p->window / USEC_PER_SEC : 0), "pools",
                     list ? list : json_array());
}
