#pragma once
/*
 * The warm pool (architecture.md "Fast create", step 3): per (template,
 * vcpus, memory), instances restored from the template's snapshot ahead of
 * any create, their disk clone, netns and jail made, the
 * agent driven once (TCG has translated its /init path), then paused. A
 * create binds one (vm_bind_member(): resume, re-identify, record running)
 * instead of restoring; "timings_ms.mode" says "pool".
 *
 * Members are instances like any other: in the manager's table (so they
 * count against --memory-budget-mib and --max-sandboxes), unbound, and
 * CREATING on disk, so a node killed with a full pool destroys them all at
 * its next start (vm_reconcile()). A member whose VMM died, or whose
 * snapshot is no longer the template's current one, is destroyed and never
 * handed out. Refills run one at a time on the worker pool, only while no
 * other job waits, and never past the memory budget.
 *
 * How many: between --pool (min, kept while quiet) and --pool-max (max), the
 * number of creates that asked this pool in the last --pool-window
 * (pool-target.h), never more than the budgets still take. When creates stop,
 * the window empties and the extra members are destroyed, the oldest first,
 * one a tick; a member being bound is out of the pool already.
 *
 * Loop thread only.
 */
#include <jansson.h>

#include "basic/time-util.h"
#include "node/manager.h"

struct pool;

/* Members per (template, size): min while quiet (0 turns the pool off), up to max (below min
 * counts as min) under load; creates are counted over window (> 0). */
int pool_new(struct manager *m, unsigned min, unsigned max, usec_t window, struct pool **ret);
/* Frees the bookkeeping; the members stay in the manager's table (it frees them). */
struct pool *pool_free(struct pool *p);

/* Keep members of this template and size (a create, a template listing or build). */
void pool_want(struct pool *p, const char *template_name, unsigned vcpus, unsigned memory_mib);
/*
 * A create asks the pool (counted, served or not: the pool's target follows that count).
 * A ready member for it, taken out of the pool (still in the manager's table, state
 * CREATING, vm->rt paused), or NULL when there is none (the create restores or boots).
 * Dead and stale members met on the way are destroyed.
 */
struct vm *pool_take(struct pool *p, const char *template_name, unsigned vcpus,
                     unsigned memory_mib);
/* Worker, a create's job for a taken member: vm_bind_member(); when that fails, the member
 * is destroyed and the create restores or boots as without a pool (vm_create()). The loop
 * frees the member's old vm->rt when ret->rt differs. */
int pool_bind(const struct vm_host *host, const struct vm *vm, struct vm_create_result *ret);
/* Destroys a member that was taken but is not going to be bound (a create refused late). */
void pool_discard(struct pool *p, struct vm *vm);
/* Destroys idle members until one more instance of vcpus and memory_mib (guest RAM) fits
 * the node's budgets (capacity.h): a create the pool does not serve must never be refused
 * for it. */
void pool_make_room(struct pool *p, unsigned vcpus, unsigned memory_mib);
/* At a graceful stop: destroys every idle member (no sandbox is lost; a restart would only
 * destroy them). One the worker pool cannot take now is left to the next start. */
void pool_shutdown(struct pool *p);
/* Once a second (manager tick): replaces dead members, computes each target, destroys one
 * member above it and starts the next refill below it. */
void pool_tick(struct pool *p);

/* {target (= min), min, max, window_s, pools: [{template, vcpus, memory_mb, min, max, target,
 * level, ready, filling, rate_per_minute, served, refills, members: [...]}]} */
json_t *pool_to_json(struct pool *p);
