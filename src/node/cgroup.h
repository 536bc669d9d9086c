#pragma once
/*
 * Per-sandbox cgroups (issue 13 item 2): memory, CPU weight and quota, pids,
 * for the VMM the jail starts (jail.c places it before it runs anything).
 *
 * cgroup v2 (most production hosts) and v1 (these machines: v1 hierarchies
 * with an empty v2 mount at /sys/fs/cgroup/unified) are detected once by
 * cgroup_init() and logged. A sandbox's cgroup sits under the node's own
 * cgroup in each hierarchy (`<own>/space/<name>`), so whatever limits the
 * node is under bound its sandboxes too. v2 has no internal processes: when
 * the node's own cgroup holds processes, the node moves itself into a
 * `node` child first and enables the controllers for its children.
 */
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum cgroup_version { CGROUP_NONE, CGROUP_V1, CGROUP_V2 };

struct cgroup_limits {
    uint64_t memory_max;   /* bytes; 0: none */
    unsigned cpu_weight;   /* v2 scale 1..10000 (100: one default share); 0: default */
    unsigned cpu_quota_pc; /* percent of one CPU (150: 1.5 CPUs); 0: none */
    unsigned pids_max;     /* 0: none */
};

/* Detects the layout under root ("/sys/fs/cgroup") from our own /proc/self/cgroup. */
int cgroup_init(const char *root);
/* For tests: a given layout under root (any directory), as if self_cgroup were
 * /proc/self/cgroup's text; nothing is detected, control files are created. */
int cgroup_init_as(enum cgroup_version v, const char *root, const char *self_cgroup);
enum cgroup_version cgroup_version(void);
const char *cgroup_version_to_string(enum cgroup_version v);

struct cgroup;

/* Creates (or reuses an empty leftover of) the cgroup `name` ([A-Za-z0-9_-]) with limits. */
int cgroup_create(const char *name, const struct cgroup_limits *l, struct cgroup **ret);
/* Moves pid (and its threads) into it. */
int cgroup_attach(struct cgroup *cg, pid_t pid);
/* Removes the cgroup `name` (it must have no processes left); a missing one is fine. */
int cgroup_remove(const char *name);
/* The directory of `name` in the hierarchy of `controller` ("memory", "cpu", "pids"). */
int cgroup_path(const char *name, const char *controller, char *buf, size_t n);
void cgroup_free(struct cgroup *cg);
