#pragma once
/*
 * The warm pool (architecture.md "Fast create", step 3): per (template,
 * vcpus, memory), up to --pool N instances restored from the template's
 * snapshot ahead of any create, their disk clone, netns and jail made, the
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
 * Loop thread only.
 */
#include <jansson.h>

#include "node/manager.h"

struct pool;

/* target: members per (template, size) kept ready; 0 turns the pool off. */
int pool_new(struct manager *m, unsigned target, struct pool **ret);
/* Frees the bookkeeping; the members stay in the manager's table (it frees them). */
struct pool *pool_free(struct pool *p);

/* Keep members of this template and size (a create, a template listing or build). */
void pool_want(struct pool *p, const char *template_name, unsigned vcpus, unsigned memory_mib);
/*
 * A ready member for a create, taken out of the pool (still in the manager's table, state
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
/* Once a second (manager tick): replaces dead members and starts the next refill. */
void pool_tick(struct pool *p);

/* {target, pools: [{template, vcpus, memory_mb, ready, filling, target, members: [...]}]} */
json_t *pool_to_json(const struct pool *p);
