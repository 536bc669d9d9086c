/* Node capacity accounting and the create admission check; see capacity.h. */
#include "node/capacity.h"

#include <limits.h>
#include <stdio.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "basic/macro.h"
#include "node/manager.h"

unsigned capacity_default_vcpu_budget(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return (unsigned)(cpus > 0 ? cpus : 1) * CAPACITY_VCPU_OVERCOMMIT;
}

void capacity_get(const struct manager *m, struct capacity *ret)
{
    struct capacity c = {
        .memory_budget_mib = m->memory_budget_mib,
        .vcpu_budget = m->vcpu_budget,
        .max_instances = m->max_sandboxes,
    };

    for (size_t i = 0; i < m->n_vms; i++) {
        const struct instance_record *rec = &m->vms[i]->rec;
        uint64_t mib = (uint64_t)rec->memory_mib + m->vmm_overhead_mib;
        /* Unbound instances are the warm pool's: members, refills, members being destroyed. */
        if (instance_is_bound(rec)) {
            c.memory_sandboxes_mib += mib;
            c.vcpus_sandboxes += rec->vcpus;
            c.sandboxes++;
        } else {
            c.memory_pool_mib += mib;
            c.vcpus_pool += rec->vcpus;
            c.pool_members++;
        }
    }
    *ret = c;
}

static uint64_t sub0(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

unsigned capacity_room(const struct manager *m, unsigned vcpus, unsigned memory_mib)
{
    struct capacity c;
    uint64_t need = (uint64_t)memory_mib + m->vmm_overhead_mib;

    capacity_get(m, &c);
    /* Every budget divided by one instance's share of it; the smallest answer wins. */
    uint64_t room = sub0(c.max_instances, (uint64_t)c.sandboxes + c.pool_members);
    if (c.memory_budget_mib && need > 0) {
        room =
            MIN(room, sub0(c.memory_budget_mib, c.memory_sandboxes_mib + c.memory_pool_mib) / need);
    }
    if (c.vcpu_budget && vcpus > 0) {
        room = MIN(room, sub0(c.vcpu_budget, (uint64_t)c.vcpus_sandboxes + c.vcpus_pool) / vcpus);
    }
    return (unsigned)MIN(room, (uint64_t)UINT_MAX);
}

bool capacity_fits(const struct manager *m, unsigned vcpus, unsigned memory_mib, char *why,
                   size_t why_len)
{
    struct capacity c;
    uint64_t need = (uint64_t)memory_mib + m->vmm_overhead_mib;

    capacity_get(m, &c);
    uint64_t mem_used = c.memory_sandboxes_mib + c.memory_pool_mib;
    unsigned vcpus_used = c.vcpus_sandboxes + c.vcpus_pool;
    if (c.sandboxes + c.pool_members >= c.max_instances) {
        if (why) {
            snprintf(why, why_len, "this node is at capacity (%u sandboxes)", c.max_instances);
        }
        return false;
    }
    if (c.memory_budget_mib && mem_used + need > c.memory_budget_mib) {
        if (why) {
            snprintf(why, why_len,
                     "this node is at capacity: memory budget %llu MiB, %llu MiB committed, "
                     "%llu MiB more asked (%u RAM + %u VMM overhead)",
                     (unsigned long long)c.memory_budget_mib, (unsigned long long)mem_used,
                     (unsigned long long)need, memory_mib, m->vmm_overhead_mib);
        }
        return false;
    }
    if (c.vcpu_budget && vcpus_used + vcpus > c.vcpu_budget) {
        if (why) {
            snprintf(why, why_len,
                     "this node is at capacity: vCPU budget %u, %u committed, %u more asked",
                     c.vcpu_budget, vcpus_used, vcpus);
        }
        return false;
    }
    return true;
}

json_t *capacity_to_json(const struct manager *m)
{
    struct capacity c;
    struct statvfs st;
    json_t *disk;

    capacity_get(m, &c);
    if (statvfs(m->host.data_dir, &st) == 0) {
        disk = json_pack("{s:s, s:I, s:I}", "path", m->host.data_dir, "free_bytes",
                         (json_int_t)((uint64_t)st.f_bavail * st.f_frsize), "total_bytes",
                         (json_int_t)((uint64_t)st.f_blocks * st.f_frsize));
    } else {
        disk = json_pack("{s:s, s:n, s:n}", "path", m->host.data_dir, "free_bytes", "total_bytes");
    }
    uint64_t mem_used = c.memory_sandboxes_mib + c.memory_pool_mib;
    uint64_t vcpus_used = (uint64_t)c.vcpus_sandboxes + c.vcpus_pool;
    return json_pack(
        "{s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I, s:I}, s:o, s:I}",
        "memory_mib", "budget", (json_int_t)c.memory_budget_mib, "sandboxes",
        (json_int_t)c.memory_sandboxes_mib, "pool", (json_int_t)c.memory_pool_mib, "free",
        (json_int_t)sub0(c.memory_budget_mib, mem_used), "vcpus", "budget",
        (json_int_t)c.vcpu_budget, "sandboxes", (json_int_t)c.vcpus_sandboxes, "pool",
        (json_int_t)c.vcpus_pool, "free", (json_int_t)sub0(c.vcpu_budget, vcpus_used), "sandboxes",
        "count", (json_int_t)c.sandboxes, "pool_members", (json_int_t)c.pool_members, "max",
        (json_int_t)c.max_instances, "disk", disk ? disk : json_null(), "vmm_overhead_mib",
        (json_int_t)m->vmm_overhead_mib);
}
