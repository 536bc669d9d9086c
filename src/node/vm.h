#pragma once
/*
 * One sandbox on this host. The manager owns `struct vm` and touches it only
 * on the event-loop thread; the blocking verbs below run on worker threads
 * and may be given a vm only while its state says a worker owns it:
 *
 *   CREATING --vm_create() ok--> RUNNING --vm_destroy()--> KILLED
 *       \--vm_create() fails (vm_destroy() already ran)--> KILLED
 *   RUNNING --(manager: kill)--> KILLING --vm_destroy()--> KILLED
 *
 * Every step of create and destroy is idempotent, and vm_destroy() removes
 * whatever exists in any state: the qemu process (by pidfd), the netns and
 * tap, then the sandbox directory with its disk clone. That is what makes a
 * crash at any point recoverable: on start the node reloads each
 * sandbox.json, re-attaches to RUNNING VMs that are still alive, and
 * destroys everything else (vm_reconcile()).
 */
#include <stdbool.h>
#include <stdint.h>

#include "basic/time-util.h"
#include "node/runtime.h"
#include "shared/envd.h"
#include "shared/sandbox-id.h"

enum vm_state {
    VM_CREATING,
    VM_RUNNING,
    VM_KILLING,
    VM_KILLED,
    _VM_STATE_MAX,
    _VM_STATE_INVALID = -22,
};

const char *vm_state_to_string(enum vm_state s);
enum vm_state vm_state_from_string(const char *s);

/* Host-wide settings every vm needs; owned by the manager, read-only for workers. */
struct vm_host {
    const char *data_dir;      /* sandboxes/<id>/ and templates/<name>/ live here */
    const struct runtime_ops *runtime;
    enum runtime_accel accel;  /* resolved */
    usec_t ready_timeout;      /* guest boot to agent ready */
};

struct vm_timing {
    usec_t clone, network, vmm, boot, total;
};

struct vm {
    char id[SANDBOX_ID_LEN + 1];
    char template_name[64];
    unsigned vcpus;
    unsigned memory_mib;
    usec_t created_at; /* realtime */
    enum vm_state state;
    struct runtime_vm *rt;
    struct vm_timing timing;
    unsigned busy;     /* workers using this vm besides its owner (exec) */
    char *init_json;   /* body for the agent's POST /init after boot (envd), or NULL */
    char access_token[129]; /* the agent's access token once /init set one ("" = none) */
};

#define AGENT_PORT ENVD_PORT

/* Allocates a vm in state CREATING, with id (validated) or a fresh one when id is NULL. */
int vm_new(const char *id, const char *template_name, unsigned vcpus, unsigned memory_mib,
           struct vm **ret);
struct vm *vm_free(struct vm *vm);

/* Path of the template dir, or -ENOENT when the template is not built. */
int vm_template_dir(const struct vm_host *host, const char *name, char *buf, size_t n);

/*
 * Worker: clone disk, make the netslot, boot, wait for the agent, then send it
 * vm->init_json (env, access token, default user) if set. On failure
 * everything made is removed again and *ret_error (may be NULL) gets a
 * message including the tail of the serial console (caller frees).
 */
int vm_create(const struct vm_host *host, struct vm *vm, char **ret_error);
/* Worker: removes every trace of the vm. Idempotent. */
int vm_destroy(const struct vm_host *host, struct vm *vm);

struct vm_exec_request {
    const char *cmd;
    const char *const *args;   /* NULL-terminated */
    const char *const *env;    /* NULL-terminated KEY=VALUE */
    const char *cwd;           /* may be NULL */
    const char *user;          /* may be NULL: the agent's default */
    uint64_t timeout_ms;       /* 0: none */
};

struct vm_exec_result {
    int exit_code;
    bool exited;      /* false: killed by a signal */
    char *status;     /* "exit status 3", "signal: killed" */
    char *error;      /* the agent's error text, if any */
    char *out;
    size_t out_len;
    char *err;
    size_t err_len;
};

#define VM_EXEC_MAX_OUTPUT (64u * 1024 * 1024)

/* Worker: runs a command through the agent. Returns 0 with *ret filled, or -errno
 * (-ENOENT: the sandbox is gone; -EINVAL with *ret->error: the agent rejected it). */
int vm_exec(const struct vm_host *host, struct vm *vm, const struct vm_exec_request *req,
            struct vm_exec_result *ret);
void vm_exec_result_release(struct vm_exec_result *res);

/* Persists vm to sandboxes/<id>/sandbox.json (atomically). */
int vm_save(const struct vm_host *host, const struct vm *vm);

/*
 * At node start: loads every sandboxes/<id>/ entry, re-attaching RUNNING VMs
 * that are still alive (returned through cb) and destroying all others.
 */
typedef void (*vm_adopt_cb)(struct vm *vm, void *userdata);
int vm_reconcile(const struct vm_host *host, vm_adopt_cb cb, void *userdata);
