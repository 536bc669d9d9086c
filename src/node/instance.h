#pragma once
/*
 * Node-local instances. Every VM on this node is an instance with its own id
 * (iid), directory <data>/instances/<iid>/ and network namespace
 * (netslot.h, named from the iid). The sandbox id is an attribute bound to
 * an instance (at create today; later after the fact, so a warm-pool member
 * or a branch exists before it belongs to a sandbox). The node API keeps
 * addressing sandboxes by sandbox id; the manager maps it to the instance.
 *
 * <data>/instances/<iid>/instance.json is the durable record: written
 * before any other resource of the instance exists, rewritten when the VMM
 * has started (its pid and that process's start time from /proc, so a
 * recycled pid is never taken for our VMM), and read back after a node
 * crash to decide between re-attaching and destroying
 * (instance_reattach_verdict()). Nothing is recovered from QEMU's command
 * line.
 */
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "basic/time-util.h"
#include "node/vm-state.h"
#include "shared/sandbox-id.h"

/*
 * [a-z0-9]{12}: short enough that a host-side interface named from it
 * ("vs-<iid>", the egress issue's veth) fits IFNAMSIZ-1 = 15 characters.
 */
#define INSTANCE_ID_LEN 12

bool instance_id_is_valid(const char *iid);
int instance_id_new(char out[INSTANCE_ID_LEN + 1]);

struct instance_record {
    char iid[INSTANCE_ID_LEN + 1];
    char sandbox_id[SANDBOX_ID_LEN + 1]; /* "" while unbound */
    char template_name[64];
    unsigned vcpus;
    unsigned memory_mib;
    usec_t created_at; /* realtime */
    enum vm_state state;
    char access_token[129]; /* the agent's access token once /init set one ("" = none) */
    /* Fingerprint of the egress CA the agent was given in an /init (vm_ca_fingerprint()),
     * "" = none yet: a gateway that comes up later (or a new CA) gets it re-sent. */
    char ca_given[17];
    pid_t pid;               /* the VMM, 0 until it started */
    uint64_t pid_start_time; /* /proc/<pid>/stat field 22 (clock ticks since boot) */
    /* Its network rate each way in bytes/s (netrate.h), 0 = unshaped: kept so a restore
     * or rollback that makes the namespace again shapes it the same. */
    uint64_t net_bps;
    /* Its disk throttling (runtime.h), 0 = the node's --disk-bps / --disk-iops: kept so a
     * restore or rollback that starts a VMM again limits it the same. */
    uint64_t disk_bps;
    uint32_t disk_iops;
    /*
     * The egress policy (native shape, src/gw/policy.h), compact JSON owned by
     * the record; NULL = none given = deny everything. Kept here so a restarted
     * node hands space-gw the same policy again. Copies of the record (a
     * worker's) borrow it: the loop replaces it only while no worker holds one.
     */
    char *network;
};

/* Serialises rec (with its derived paths: dir and netns) to compact JSON; caller frees. */
char *instance_record_to_json(const struct instance_record *rec, const char *dir,
                              const char *netns);
/* Frees what rec owns (network); rec stays usable, with network NULL. */
void instance_record_release(struct instance_record *rec);
/* Replaces rec->network with a copy of json_text (NULL = none). 0 or -ENOMEM. */
int instance_record_set_network(struct instance_record *rec, const char *json_text);

/*
 * Parses an instance.json. Unknown or missing fields leave defaults; a
 * record whose iid is invalid is -EINVAL; an unknown state reads as creating
 * (treated as unfinished, so it gets destroyed). "network" is kept as
 * compact JSON when it is an object (its policy is checked by the caller).
 * Caller releases *ret (instance_record_release()).
 */
int instance_record_from_json(const char *text, struct instance_record *ret);

/*
 * Binds sandbox_id to rec: 0 when bound now or already bound to that id
 * (idempotent), -EINVAL for an invalid id, -EBUSY when rec belongs to
 * another sandbox. Uniqueness across instances is the manager's job.
 */
int instance_bind(struct instance_record *rec, const char *sandbox_id);
bool instance_is_bound(const struct instance_record *rec);

/* What a restarted node finds for one record. */
struct instance_probe {
    bool record_ok;              /* instance.json parsed */
    bool process_exists;         /* a process with rec->pid exists (pidfd_open worked) */
    uint64_t process_start_time; /* its start time, when it exists */
    bool netns_exists;
    bool snapshot_exists; /* <dir>/suspend/ (vm.c): what a suspended instance restores from */
};

enum instance_verdict {
    INSTANCE_REATTACH,
    INSTANCE_DESTROY,
};

/*
 * Re-attach only a running (or paused), bound instance whose VMM is the very process
 * the record names (pid and start time) and whose netns exists, and keep a suspended,
 * bound one whose snapshot and netns exist (it has no VMM: one the record still names
 * is a leftover of the suspend, which the caller stops); destroy everything else.
 * *reason (may be NULL) gets a static explanation.
 */
enum instance_verdict instance_reattach_verdict(const struct instance_record *rec,
                                                const struct instance_probe *probe,
                                                const char **reason);
