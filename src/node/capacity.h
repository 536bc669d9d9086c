#pragma once
/*
 * Node capacity (issue 13 item 3): what this node has promised and what is
 * left, against its budgets: memory (guest RAM + VMM overhead of every
 * instance, --memory-budget-mib), vCPUs (--vcpu-budget) and the instance
 * count (--max-sandboxes). Warm-pool members count like sandboxes (they are
 * instances with a VMM) but a create may reclaim them (pool_make_room()),
 * so the report splits the two. A create that does not fit is refused with
 * a capacity error instead of overcommitting into the OOM killer.
 *
 * Loop thread only.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct manager;

/* Host CPUs times this: the default --vcpu-budget (capacity_default_vcpu_budget()). */
#define CAPACITY_VCPU_OVERCOMMIT 8

struct capacity {
    uint64_t memory_budget_mib, memory_sandboxes_mib, memory_pool_mib;
    unsigned vcpu_budget, vcpus_sandboxes, vcpus_pool;
    unsigned sandboxes, pool_members, max_instances;
};

/* The host's online CPUs times CAPACITY_VCPU_OVERCOMMIT (at least that). */
unsigned capacity_default_vcpu_budget(void);

/* What every instance in m's table holds now, split into sandboxes and pool members. */
void capacity_get(const struct manager *m, struct capacity *ret);

/*
 * Whether one more instance of vcpus and memory_mib (guest RAM, without the VMM overhead)
 * fits the budgets. When not and why is non-NULL, why gets a sentence naming the budget it
 * would break and by how much (for the 503's message).
 */
bool capacity_fits(const struct manager *m, unsigned vcpus, unsigned memory_mib, char *why,
                   size_t why_len);

/*
 * How many more instances of vcpus and memory_mib (guest RAM) fit the budgets on top of
 * those there are (0 when not one does): the warm pool's room to grow (pool-target.h).
 */
unsigned capacity_room(const struct manager *m, unsigned vcpus, unsigned memory_mib);

/* GET /v1/capacity: {memory_mib:{budget, sandboxes, pool, free}, vcpus:{budget, sandboxes,
 * pool, free}, sandboxes:{count, pool_members, max}, disk:{free_bytes, total_bytes, path},
 * vmm_overhead_mib}. */
json_t *capacity_to_json(const struct manager *m);
