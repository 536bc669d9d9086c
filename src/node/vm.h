#pragma once
/*
 * One VM (an instance, instance.h) on this host. The manager owns `struct vm`
 * and only the event-loop thread reads or writes it. Blocking verbs below run
 * on worker threads and get a `const struct vm *` they only read, in fields
 * the loop does not change while the worker runs (the record's identity and
 * spec, `rt`); results come back in result structs that the loop applies
 * when the job completes (vm_set_state(), vm-state.h for the table).
 *
 * Every step of create and destroy is idempotent, and vm_destroy() removes
 * whatever exists in any state: the VMM (by pidfd), the netns and tap, then
 * the instance directory with its disk clone. That is what makes a crash at
 * any point recoverable: on start the node reads each instance.json,
 * re-attaches RUNNING instances whose VMM is the process the record names,
 * and destroys everything else (vm_reconcile()).
 */
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "basic/time-util.h"
#include "node/instance.h"
#include "node/runtime.h"
#include "node/vm-state.h"
#include "shared/envd.h"

struct snapshot;

/* Host-wide settings every vm needs; owned by the manager, read-only for workers. */
struct vm_host {
    const char *data_dir; /* instances/<iid>/ and templates/<name>/ live here */
    const struct runtime_ops *runtime;
    enum runtime_accel accel; /* resolved */
    usec_t ready_timeout;     /* guest boot to agent ready */
    usec_t max_exec_timeout;  /* deadline of an exec that names none; caps those that do */
    size_t console_log_max;   /* cap of each console.log (console.h) */
    bool snapshots;           /* create by restoring template snapshots (snapshot.h) */
    unsigned tb_size_mib;     /* TCG translation buffer per VM (runtime.h); 0: the default */
    uint64_t disk_bps;        /* each VM's disk throttling (runtime.h); 0: none */
    uint32_t disk_iops;
    uint64_t net_bps; /* --net-bps: each sandbox's default network rate, and the most a
                         create may ask for (netrate.h); 0: unshaped */
};

struct vm_timing {
    usec_t clone, network, vmm, boot, total;
    /* init: the re-identifying /init round trip (connect, the agent's work, the answer):
     * after boot for a cold boot or a restore, within boot for a warm-pool bind. record:
     * a bind's rewrite of the record as running. Where a create's time goes. */
    usec_t init, record;
    bool restored; /* a snapshot restore ("mode":"restore"), else a cold boot */
    bool pooled;   /* bound from the warm pool ("mode":"pool", pool.h) */
};

struct vm {
    struct instance_record rec; /* what instance.json holds; rec.state is the state */
    struct runtime_vm *rt;      /* set by the loop from a create result or at re-attach */
    struct vm_timing timing;
    unsigned busy;      /* workers using this vm besides its owner (exec) */
    char *init_json;    /* body for the agent's POST /init after boot (envd), or NULL */
    bool cold_boot;     /* never restore from a snapshot (create's "snapshot": false) */
    bool snapshot_busy; /* a disk snapshot or rollback job has it (disk-snapshot.h) */
    /* A branch: created from this sandbox snapshot (disk-snapshot.h, full) instead of the
     * template; "" otherwise. Set before the create job starts. */
    char branch_from[21];
    /* The egress sockets in its namespace (netslot_open_listeners()), -EBADF until the
     * gateway client opens them; closed by vm_free(). Loop thread only. */
    int dns_fd, gateway_fd;
    /* Re-sending the egress CA (manager.c): a job in flight, failed tries for ca_tried,
     * and when the next may start (monotonic). Loop thread only. */
    bool ca_busy;
    unsigned ca_attempts;
    char ca_tried[17];
    usec_t ca_retry_at;
    /* console.log's size when vm_guest_halted() last read its end (0 at first). Loop thread. */
    off_t console_seen;
};

/*
 * Whether the guest halted (death_console_halted() on the end of its console.log), read
 * only when the file's size changed since the last call: cheap enough for every running
 * VM on every tick. Loop thread only.
 */
bool vm_guest_halted(const struct vm_host *host, struct vm *vm);

/* Loop thread only: moves vm to `to`, asserting the row exists in the state table. */
void vm_set_state(struct vm *vm, enum vm_state to);
static inline enum vm_state vm_state(const struct vm *vm)
{
    return vm->rec.state;
}
/* The sandbox id bound to vm, or "" (unbound). */
static inline const char *vm_sandbox_id(const struct vm *vm)
{
    return vm->rec.sandbox_id;
}

#define AGENT_PORT ENVD_PORT

/* Allocates an unbound vm in state CREATING with a fresh instance id. */
int vm_new(const char *template_name, unsigned vcpus, unsigned memory_mib, struct vm **ret);
struct vm *vm_free(struct vm *vm);

/* Path of the template dir, or -ENOENT when the template is not built. */
int vm_template_dir(const struct vm_host *host, const char *name, char *buf, size_t n);
/* <data>/instances/<iid> into buf. */
int vm_instance_dir(const struct vm_host *host, const char *iid, char *buf, size_t n);

/* The runtime config of rec (strings in p). need_template: fail with -ENOENT when the
 * template is gone (create); re-attach and destroy do without it. */
struct vm_paths {
    char dir[PATH_MAX];
    char kernel[PATH_MAX + 16];
    char initrd[PATH_MAX + 16];
    char rootfs[PATH_MAX + 16];
    char netns[PATH_MAX];
};
int vm_runtime_config(const struct vm_host *host, const struct instance_record *rec,
                      bool need_template, struct vm_paths *p, struct runtime_config *cfg);

/* What a create job hands back to the loop. */
struct vm_create_result {
    struct runtime_vm *rt; /* the running VMM on success (the loop stores it in vm->rt) */
    pid_t pid;
    uint64_t pid_start_time;
    struct vm_timing timing;
    char *error;           /* on failure: message with the serial console tail (caller frees) */
    bool snapshot_suspect; /* a restore failed in the VMM or guest (not in its /init) */
};

/*
 * Worker: writes the record, clones the disk, makes the netslot, starts the
 * guest, waits for the agent, re-identifies it (/init: vm->init_json's env,
 * access token and default user, plus its own hostname, machine-id, entropy
 * and clock), and rewrites the record as running. On failure everything made
 * is removed again. The guest is restored from the template's snapshot when
 * one is ready (snapshot.h; timing.restored), else cold-booted; a failed
 * restore falls back to a cold boot, logged.
 */
int vm_create(const struct vm_host *host, const struct vm *vm, struct vm_create_result *ret);
/* Worker: a cold boot with shared RAM that is never marked running and gets no /init:
 * the VM a template snapshot is taken of (snapshot.c). The caller stops and destroys it. */
int vm_create_source(const struct vm_host *host, const struct vm *vm, struct vm_create_result *ret);
/* Worker: a warm-pool member (pool.h): restored from snap, its agent driven through one
 * /init (so TCG has translated that path), then paused; never marked running, no identity.
 * The record stays CREATING and unbound, so a node crash leaves nothing a restart keeps. */
int vm_create_member(const struct vm_host *host, const struct vm *vm, struct snapshot *snap,
                     struct vm_create_result *ret);
/* Worker: binds the paused member vm (vm->rt, vm->rec bound to its sandbox by the loop):
 * resumes it, re-identifies it (/init, as vm_create() does) and records it running. ret->rt is
 * vm->rt on success. On failure the VMM is left as it is (the caller destroys the vm). */
int vm_bind_member(const struct vm_host *host, const struct vm *vm, struct vm_create_result *ret);
/*
 * Worker: vm's VMM ended on its own (vm->rt is not alive). Gathers the evidence while it
 * still exists (death.h: the wait status, the cgroup's OOM-kill counter), stops what is
 * left of the VMM (which lets the console pump finish), reads the console's tail and
 * classifies the end into *ret_reason and msg. vm_destroy() frees the rest.
 */
enum death_reason;
void vm_death(const struct vm_host *host, const struct vm *vm, enum death_reason *ret_reason,
              char *msg, size_t n);
/* Worker: removes every trace of the vm. Idempotent; does not touch *vm. */
int vm_destroy(const struct vm_host *host, const struct vm *vm);

struct vm_exec_request {
    const char *cmd;
    const char *const *args; /* NULL-terminated */
    const char *const *env;  /* NULL-terminated KEY=VALUE */
    const char *cwd;         /* may be NULL */
    const char *user;        /* may be NULL: the agent's default */
    uint64_t timeout_ms;     /* the command's deadline; never 0 (http-api.c fills the max) */
};

struct vm_exec_result {
    int exit_code;
    bool exited;  /* false: killed by a signal */
    char *status; /* "exit status 3", "signal: killed" */
    char *error;  /* the agent's error text, if any */
    char *out;
    size_t out_len;
    char *err;
    size_t err_len;
};

#define VM_EXEC_MAX_OUTPUT (64u * 1024 * 1024)

/* Worker: runs a command through the agent. Returns 0 with *ret filled, or -errno
 * (-ENOENT: the sandbox is gone; -EINVAL with *ret->error: the agent rejected it;
 * -ETIMEDOUT: the deadline passed). */
int vm_exec(const struct vm_host *host, const struct vm *vm, const struct vm_exec_request *req,
            struct vm_exec_result *ret);
void vm_exec_result_release(struct vm_exec_result *res);

/*
 * Worker: POST /init with body (JSON text) to vm's running agent. 0, -ENOENT (no VMM),
 * or -errno; -EPROTO when the agent refused, with *ret_error (may be NULL; caller frees)
 * from vm_agent_error_text().
 */
int vm_send_init(const struct vm *vm, const char *body, char **ret_error);
/* "agent answered <status>[: <its JSON message, printable ASCII, bounded>]"; caller frees. */
char *vm_agent_error_text(int status, const char *body, size_t len);

/* Which egress CA an agent was given: a hex fingerprint of the PEM (instance.h ca_given). */
#define VM_CA_FINGERPRINT_LEN 16
void vm_ca_fingerprint(const char *pem, char out[VM_CA_FINGERPRINT_LEN + 1]);
/* Loop thread: the fingerprint of the CA vm's agent has ("" = none). */
const char *vm_ca_given(struct vm *vm);
/* Loop thread: the CA vm's agent has once a restore that boots from the disk replayed
 * init_json (its caBundle as the create sent it), or vm_ca_given() when it carries none. */
void vm_ca_after_restore(struct vm *vm, char out[VM_CA_FINGERPRINT_LEN + 1]);

/*
 * Worker: stops vm's vCPUs (QMP stop; memory, disk and network stay as they are), then
 * records it paused in instance.json, so a node restarted later re-attaches it paused.
 * Idempotent. 0 or -errno (-ENOENT: no VMM); on a failed save the VM is resumed again.
 */
int vm_pause(const struct vm_host *host, const struct vm *vm);
/*
 * Worker: resumes vm's vCPUs, steps the guest clock through the agent's /init
 * `timestamp` (the time stood still for the guest while it was paused), and records it
 * running. A clock re-sync the agent refuses is logged (*ret_error says why), not fatal:
 * the guest runs. Idempotent on a running VM.
 */
int vm_resume(const struct vm_host *host, const struct vm *vm, char **ret_error);
/* The /init body that steps the guest's clock to now (realtime): {timestamp, accessToken?}. */
char *vm_clock_init_body(const struct instance_record *rec, usec_t now);

/*
 * Suspend (architecture.md "A sandbox's life"): the VM's memory, device and vCPU state go
 * to <dir>/suspend/ (runtime_snapshot(), fsync'd; written as suspend.new and renamed), the
 * disk clone is synced, the record says suspended, and the VMM is stopped: its RAM and
 * CPU are released. The disk clone and the netns stay (restore needs them; the netns is a
 * namespace and a tap, no process). Until the record says suspended, any failure or
 * crash leaves the VM running as before. Worker; *ret_error (may be NULL) says which step
 * failed.
 *
 * memory false (E2B's pause {memory: false}): disk only. The guest syncs its file systems
 * first (disk_snapshot_guest_sync(); one that cannot is not suspended, -EIO), and
 * <dir>/suspend holds no vmstate but the SUSPEND_DISK_ONLY_FILE marker: a restore boots
 * from the disk. Either way <dir>/suspend/SUSPEND_INIT_FILE keeps the agent's /init body,
 * what a boot from the disk sends its fresh agent.
 */
#define SUSPEND_DISK_ONLY_FILE "disk-only"
#define SUSPEND_INIT_FILE "init.json"
int vm_suspend(const struct vm_host *host, const struct vm *vm, bool memory, char **ret_error);
/* <dir>/suspend of instance iid into buf. */
int vm_suspend_dir(const struct vm_host *host, const char *iid, char *buf, size_t n);

struct vm_restore_result {
    struct runtime_vm *rt; /* the running VMM on success */
    pid_t pid;
    uint64_t pid_start_time;
    struct vm_timing timing; /* vmm: until the VMM had loaded it; total */
    char *error;             /* on failure, or a clock re-sync the agent refused (caller frees) */
    bool booted;             /* booted from the disk: no memory was restored */
};

/*
 * Restore of a suspended vm: a fresh VMM loads <dir>/suspend (paused), is recorded, resumed,
 * its clock re-synced, and the record says running; then the snapshot is removed (the
 * guest's disk moves on from it). Any failure stops the new VMM and leaves the instance
 * suspended with its snapshot. Worker.
 *
 * A disk-only suspend, or memory false (the memory state dropped): a VMM boots from the
 * disk clone instead, and its fresh agent gets the suspend's /init re-identified
 * (vm_identity_json()); a boot whose agent refuses it fails (suspended as before).
 */
int vm_restore(const struct vm_host *host, const struct vm *vm, bool memory,
               struct vm_restore_result *ret);

/* The pieces of create that a rollback (disk-snapshot.c) repeats on a fresh VMM. Worker.
 * vm_wait_ready(): the agent answers /health within host->ready_timeout (-ETIMEDOUT,
 * -ECHILD); vm_agent_init(): POST /init; vm_identity_json(): vm's re-identification body
 * (caller frees). */
int vm_wait_ready(const struct vm_host *host, struct runtime_vm *rt);
int vm_agent_init(struct runtime_vm *rt, const char *body, char **ret_error);
/* vm_agent_init() proving token (X-Access-Token) to an agent that has one: a restored
 * snapshot's, whose token the new sandbox replaces. token NULL or "": none. */
int vm_agent_init_as(struct runtime_vm *rt, const char *body, const char *token, char **ret_error);
char *vm_identity_json(const struct vm *vm);

/* Persists rec to instances/<iid>/instance.json (atomically). Any thread. */
int vm_save_record(const struct vm_host *host, const struct instance_record *rec);

/*
 * At node start: reads every instances/<iid>/instance.json, re-attaching
 * instances instance_reattach_verdict() accepts (returned through cb) and
 * destroying all others.
 */
typedef void (*vm_adopt_cb)(struct vm *vm, void *userdata);
int vm_reconcile(const struct vm_host *host, vm_adopt_cb cb, void *userdata);
