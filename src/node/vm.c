/*
 * Instance create / destroy / exec on this host; see vm.h for the threading
 * rules and the crash-recovery argument. Layout of an instance directory:
 *
 *   <data>/instances/<iid>/instance.json  durable record (written first, instance.h)
 *                          rootfs.ext4    copy-on-write clone of the template
 *                          console.log    serial console
 *                          qemu.*         runtime files (runtime-qemu.c)
 *
 * The directory is created before any other resource and removed after all
 * of them, so a resource without a directory cannot exist.
 */
#include "node/vm.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "basic/base64.h"
#include "basic/fault.h"
#include "basic/fd-util.h"
#include "basic/fileio.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/proc-util.h"
#include "basic/random-util.h"
#include "basic/strbuf.h"
#include "node/clone.h"
#include "node/death.h"
#include "node/disk-snapshot.h"
#include "node/netrate.h"
#include "node/netslot.h"
#include "node/snapshot.h"
#include "shared/connect.h"
#include "shared/http-client.h"

void vm_set_state(struct vm *vm, enum vm_state to)
{
    /* Workers never write VM state: they return results the loop applies (vm-state.h). */
    assert(vm_state_on_owner_thread());
    assert(vm_state_can_transition(vm->rec.state, to));
    vm->rec.state = to;
}

int vm_new(const char *template_name, unsigned vcpus, unsigned memory_mib, struct vm **ret)
{
    struct vm *vm;
    int r;

    if (!template_name_is_valid(template_name)) {
        return -EINVAL;
    }
    vm = calloc(1, sizeof(*vm));
    if (!vm) {
        return -ENOMEM;
    }
    r = instance_id_new(vm->rec.iid);
    if (r < 0) {
        free(vm);
        return r;
    }
    snprintf(vm->rec.template_name, sizeof(vm->rec.template_name), "%s", template_name);
    vm->rec.vcpus = vcpus;
    vm->rec.memory_mib = memory_mib;
    vm->rec.created_at = now_realtime();
    vm->rec.state = VM_CREATING;
    vm->dns_fd = vm->gateway_fd = -EBADF;
    *ret = vm;
    return 0;
}

struct vm *vm_free(struct vm *vm)
{
    if (vm) {
        runtime_vm_free(vm->rt);
        free(vm->init_json);
        instance_record_release(&vm->rec);
        close_safe(vm->dns_fd);
        close_safe(vm->gateway_fd);
        free(vm);
    }
    return NULL;
}

int vm_instance_dir(const struct vm_host *host, const char *iid, char *buf, size_t n)
{
    if (!instance_id_is_valid(iid)) {
        return -EINVAL;
    }
    return snprintf(buf, n, "%s/instances/%s", host->data_dir, iid) >= (int)n ? -ENAMETOOLONG : 0;
}

int vm_template_dir(const struct vm_host *host, const char *name, char *buf, size_t n)
{
    char path[PATH_MAX];

    if (!template_name_is_valid(name)) {
        return -EINVAL;
    }
    if (snprintf(buf, n, "%s/templates/%s", host->data_dir, name) >= (int)n ||
        snprintf(path, sizeof(path), "%s/template.json", buf) >= (int)sizeof(path)) {
        return -ENAMETOOLONG;
    }
    return access(path, R_OK) < 0 ? -ENOENT : 0;
}

static int vm_write_record(const struct vm_host *host, const struct instance_record *rec,
                           bool durable)
{
    char dir[PATH_MAX], path[PATH_MAX + 16], netns[PATH_MAX];
    char *text;
    int r;

    r = vm_instance_dir(host, rec->iid, dir, sizeof(dir));
    if (r < 0) {
        return r;
    }
    r = netslot_netns_path(rec->iid, netns, sizeof(netns));
    if (r < 0) {
        return r;
    }
    snprintf(path, sizeof(path), "%s/instance.json", dir);
    text = instance_record_to_json(rec, dir, netns);
    if (!text) {
        return -ENOMEM;
    }
    r = durable ? write_file_atomic(path, text, strlen(text))
                : write_file_atomic_nosync(path, text, strlen(text));
    free(text);
    return r;
}

int vm_save_record(const struct vm_host *host, const struct instance_record *rec)
{
    return vm_write_record(host, rec, true);
}

int vm_runtime_config(const struct vm_host *host, const struct instance_record *rec,
                      bool need_template, struct vm_paths *p, struct runtime_config *cfg)
{
    char tdir[PATH_MAX];
    int r;

    r = vm_instance_dir(host, rec->iid, p->dir, sizeof(p->dir));
    if (r < 0) {
        return r;
    }
    r = netslot_netns_path(rec->iid, p->netns, sizeof(p->netns));
    if (r < 0) {
        return r;
    }
    /* Re-attach and destroy need no template: one removed since (or a record that never
     * got written) must not keep a running VMM from being found. */
    r = vm_template_dir(host, rec->template_name, tdir, sizeof(tdir));
    if (r < 0 && need_template) {
        return r;
    }
    if (r < 0) {
        snprintf(tdir, sizeof(tdir), "/nonexistent");
    }
    snprintf(p->kernel, sizeof(p->kernel), "%s/vmlinux", tdir);
    snprintf(p->rootfs, sizeof(p->rootfs), "%s/rootfs.ext4", p->dir);
    /* Templates built with Debian's kernel (the fallback) carry an initramfs. */
    snprintf(p->initrd, sizeof(p->initrd), "%s/initrd.cpio", tdir);
    bool has_initrd = access(p->initrd, R_OK) == 0;
    *cfg = (struct runtime_config){
        .id = rec->iid,
        .dir = p->dir,
        .kernel = p->kernel,
        .rootfs = p->rootfs,
        .initrd = has_initrd ? p->initrd : NULL,
        .netns_path = p->netns,
        .tap = NETSLOT_TAP,
        .mac = NETSLOT_GUEST_MAC,
        .guest_ip = NETSLOT_GUEST_IP,
        .kernel_args = NETSLOT_KERNEL_IP_ARG,
        .vcpus = rec->vcpus,
        .memory_mib = rec->memory_mib,
        .accel = host->accel,
        .tb_size_mib = host->tb_size_mib,
        .disk_bps = rec->disk_bps ? rec->disk_bps : host->disk_bps,
        .disk_iops = rec->disk_iops ? rec->disk_iops : host->disk_iops,
        .pid = rec->pid,
        .pid_start_time = rec->pid_start_time,
        .console_log_max = host->console_log_max,
    };
    return 0;
}

/* Last `max` bytes of a file, for error messages (the serial console, qemu's stderr). */
static char *file_tail(const char *dir, const char *name, size_t max)
{
    char path[PATH_MAX + 64], *data = NULL;
    size_t len;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (read_file(path, 64u << 20, &data, &len) < 0) {
        return strdup("");
    }
    if (len > max) {
        memmove(data, data + len - max, max + 1);
    }
    return data;
}

/* The agent's error body we keep for a message: its JSON {code,message}, capped. */
#define VM_AGENT_ERROR_BODY_MAX 4096u
/* Of the agent's message, at most this many bytes reach the node's error text. */
#define VM_AGENT_MESSAGE_MAX 200u

static int agent_body_cb(const void *data, size_t len, void *userdata)
{
    struct strbuf *sb = userdata;
    size_t room = VM_AGENT_ERROR_BODY_MAX - MIN(sb->len, VM_AGENT_ERROR_BODY_MAX);

    /* Past the cap the rest is read and dropped: the status is what matters. */
    return strbuf_append(sb, data, MIN(len, room)) < 0 ? -ENOMEM : 0;
}

char *vm_agent_error_text(int status, const char *body, size_t len)
{
    struct strbuf sb = STRBUF_INIT;
    json_error_t jerr;
    json_t *j = body && len ? json_loadb(body, len, 0, &jerr) : NULL;
    const char *msg = json_string_value(json_object_get(j, "message"));

    strbuf_appendf(&sb, "agent answered %d", status);
    if (msg && *msg) {
        /* The guest wrote it: printable ASCII only, bounded, so it cannot forge log
         * lines or flood the API's error. */
        size_t n = strlen(msg);
        strbuf_appendf(&sb, ": ");
        for (size_t i = 0; i < MIN(n, VM_AGENT_MESSAGE_MAX); i++) {
            char c = msg[i] >= 0x20 && msg[i] < 0x7f ? msg[i] : '?';
            strbuf_append(&sb, &c, 1);
        }
        if (n > VM_AGENT_MESSAGE_MAX) {
            strbuf_appendf(&sb, "...");
        }
    }
    json_decref(j);
    return strbuf_detach(&sb, NULL);
}

/*
 * One request to the agent over the sandbox's link; 0 when it answered 2xx.
 * Otherwise -EPROTO, and *ret_error (may be NULL) gets "agent answered <status>: <its
 * message>" (vm_agent_error_text()).
 */
static int vm_agent_request(struct runtime_vm *rt, const struct http_request *req,
                            usec_t connect_timeout, usec_t timeout, char **ret_error)
{
    struct strbuf body = STRBUF_INIT;
    int fd = -EBADF, status = 0;
    int r;

    r = runtime_connect(rt, AGENT_PORT, connect_timeout, &fd);
    if (r < 0) {
        return r;
    }
    r = http_client_request(fd, req, now_monotonic() + timeout, &status, NULL,
                            ret_error ? agent_body_cb : NULL, ret_error ? &body : NULL);
    close_safe(fd);
    if (r >= 0 && (status < 200 || status >= 300)) {
        if (ret_error) {
            free(*ret_error);
            *ret_error = vm_agent_error_text(status, body.buf, body.len);
        }
        r = -EPROTO;
    }
    strbuf_release(&body);
    return r < 0 ? r : 0;
}

/* POST /init to the agent with body (JSON text). */
int vm_agent_init(struct runtime_vm *rt, const char *body, char **ret_error)
{
    return vm_agent_init_as(rt, body, NULL, ret_error);
}

int vm_agent_init_as(struct runtime_vm *rt, const char *body, const char *token, char **ret_error)
{
    char auth[160];
    const char *headers[] = { "Content-Type: application/json", NULL, NULL };

    if (token && *token) {
        snprintf(auth, sizeof(auth), "X-Access-Token: %s", token);
        headers[1] = auth;
    }
    struct http_request req = { .method = "POST",
                                .path = "/init",
                                .headers = headers,
                                .body = body,
                                .body_len = strlen(body) };
    return vm_agent_request(rt, &req, 2 * USEC_PER_SEC, 10 * USEC_PER_SEC, ret_error);
}

int vm_send_init(const struct vm *vm, const char *body, char **ret_error)
{
    if (!vm->rt) {
        return -ENOENT;
    }
    return vm_agent_init(vm->rt, body, ret_error);
}

void vm_ca_fingerprint(const char *pem, char out[VM_CA_FINGERPRINT_LEN + 1])
{
    /* FNV-1a 64: only tells our own gateway's CAs apart (never hostile input), so a
     * cryptographic digest (and OpenSSL in the node) is not needed. */
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)pem; *p; p++) {
        h = (h ^ *p) * 0x100000001b3ull;
    }
    snprintf(out, VM_CA_FINGERPRINT_LEN + 1, "%016llx", (unsigned long long)h);
}

/* The fingerprint of the caBundle in init_json into out, or "" when it has none. */
static void init_json_ca(const char *init_json, char out[VM_CA_FINGERPRINT_LEN + 1])
{
    json_error_t jerr;
    json_t *j = init_json ? json_loads(init_json, 0, &jerr) : NULL;
    const char *ca = json_string_value(json_object_get(j, "caBundle"));

    out[0] = '\0';
    if (ca) {
        vm_ca_fingerprint(ca, out);
    }
    json_decref(j);
}

void vm_ca_after_restore(struct vm *vm, char out[VM_CA_FINGERPRINT_LEN + 1])
{
    init_json_ca(vm->init_json, out);
    if (!out[0]) {
        memcpy(out, vm_ca_given(vm), VM_CA_FINGERPRINT_LEN + 1);
    }
}

const char *vm_ca_given(struct vm *vm)
{
    /* The create job saved it in instance.json; the loop's copy learns it here. */
    if (!vm->rec.ca_given[0] && vm->init_json) {
        init_json_ca(vm->init_json, vm->rec.ca_given);
    }
    return vm->rec.ca_given;
}

int vm_wait_ready(const struct vm_host *host, struct runtime_vm *rt)
{
    usec_t deadline = now_monotonic() + host->ready_timeout;

    for (;;) {
        if (!runtime_alive(rt)) {
            return -ECHILD;
        }
        struct http_request health = { .method = "GET", .path = "/health" };
        if (vm_agent_request(rt, &health, 50 * USEC_PER_MSEC, 2 * USEC_PER_SEC, NULL) == 0) {
            return 0;
        }
        if (now_monotonic() >= deadline) {
            return -ETIMEDOUT;
        }
        sleep_usec(20 * USEC_PER_MSEC);
    }
}

static int set_if_absent(json_t *j, const char *key, const char *value)
{
    return json_object_get(j, key) ? 0 : json_object_set_new(j, key, json_string(value));
}

/*
 * The re-identification of a guest (architecture.md "Fast create"): vm's own
 * /init fields (env, access token, default user) plus what makes it this
 * sandbox and no other, even when it is the n-th restore of one snapshot:
 * hostname, machine-id, fresh entropy the agent mixes into the guest CRNG and
 * reseeds it with, and the host's clock. Caller frees.
 */
char *vm_identity_json(const struct vm *vm)
{
    char machine_id[33], stamp[64], entropy_b64[128];
    unsigned char entropy[64];
    struct timespec now;
    struct tm tm;
    json_error_t err;
    json_t *j = vm->init_json ? json_loads(vm->init_json, 0, &err) : json_object();
    char *text = NULL;

    if (!json_is_object(j) || random_hex(machine_id, 16) < 0 ||
        random_bytes(entropy, sizeof(entropy)) < 0) {
        json_decref(j);
        return NULL;
    }
    base64_encode(entropy, sizeof(entropy), entropy_b64);
    explicit_bzero(entropy, sizeof(entropy));
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    size_t n = strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(stamp + n, sizeof(stamp) - n, ".%06ldZ", now.tv_nsec / 1000);
    const char *hostname = vm->rec.sandbox_id[0] ? vm->rec.sandbox_id : vm->rec.iid;
    /* What the caller's init says wins (its timestamp is checked by the agent, never
     * silently replaced); the node fills in only what it left out. */
    if (set_if_absent(j, "hostname", hostname) < 0 ||
        set_if_absent(j, "machineId", machine_id) < 0 ||
        set_if_absent(j, "entropy", entropy_b64) < 0 || set_if_absent(j, "timestamp", stamp) < 0) {
        json_decref(j);
        return NULL;
    }
    text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    explicit_bzero(entropy_b64, sizeof(entropy_b64));
    return text;
}

enum create_mode {
    CREATE_BOOT,    /* cold boot: a kernel boots */
    CREATE_RESTORE, /* restore of the template's snapshot (snapshot.h) */
    CREATE_SOURCE,  /* cold boot with shared RAM, no /init, never marked running: the
                       VM a template snapshot is taken of (snapshot.c) */
    CREATE_MEMBER,  /* restore, one warming /init, paused, never marked running: a warm-pool
                       member (pool.h); vm_bind_member() makes it a sandbox */
    CREATE_BRANCH,  /* restore of a sandbox's full snapshot (disk-snapshot.h, vm->branch_from):
                       its RAM is in the vmstate; re-identified as a new sandbox */
};

static int vm_warm_exec(const struct vm_host *host, const struct vm *vm, struct runtime_vm *rt);

static int vm_create_with(const struct vm_host *host, const struct vm *vm, enum create_mode mode,
                          struct snapshot *snap, struct vm_create_result *ret)
{
    struct instance_record rec = vm->rec; /* this job's copy: the loop owns vm->rec */
    char *identity = NULL, *branch_token = NULL;
    struct runtime_config cfg;
    struct vm_paths p = { .dir = "" };
    char tdir[PATH_MAX], src[PATH_MAX + 16];
    const char *step = "prepare";
    char *agent_error = NULL; /* what the agent said when it refused /init */
    struct runtime_vm *rt = NULL;
    bool reflinked = false;
    usec_t t0 = now_monotonic(), t;
    int r;

    *ret = (struct vm_create_result){ 0 };
    r = vm_runtime_config(host, &rec, true, &p, &cfg);
    if (r < 0) {
        goto fail;
    }
    bool restore = mode == CREATE_RESTORE || mode == CREATE_MEMBER || mode == CREATE_BRANCH;
    /* What a restore loads and clones its disk from: the template's snapshot, or for a
     * branch the sandbox snapshot's directory (as a full rollback restores it). */
    char bdir[PATH_MAX];
    const char *sdir = snap ? snapshot_dir(snap) : NULL;
    if (mode == CREATE_BRANCH) {
        char tpath[PATH_MAX + 32];
        r = disk_snapshot_dir(host, vm->branch_from, bdir, sizeof(bdir));
        if (r < 0) {
            goto fail;
        }
        sdir = bdir;
        snprintf(tpath, sizeof(tpath), "%s/" DISK_SNAPSHOT_TOKEN_FILE, bdir);
        (void)read_file(tpath, sizeof(rec.access_token), &branch_token, NULL); /* may be none */
        cfg.memory = RUNTIME_MEMORY_ANONYMOUS;
        cfg.memory_fd = -EBADF;
    } else if (restore) {
        cfg.memory = RUNTIME_MEMORY_PRIVATE;
        cfg.memory_fd = snapshot_memory_fd(snap);
    } else if (mode == CREATE_SOURCE) {
        cfg.memory = RUNTIME_MEMORY_SHARED;
    }
    step = "make instance directory";
    r = mkdir_p(p.dir, 0700);
    if (r >= 0) {
        r = vm_save_record(host, &rec);
    }
    if (r >= 0) {
        r = fault_point("create.record");
    }
    if (r < 0) {
        goto fail;
    }

    step = "clone root disk";
    t = now_monotonic();
    r = vm_template_dir(host, rec.template_name, tdir, sizeof(tdir));
    if (r < 0) {
        goto fail;
    }
    /* A restore continues from the disk as it was when its snapshot was taken. */
    snprintf(src, sizeof(src), "%s/rootfs.ext4", restore ? sdir : tdir);
    r = clone_file(src, p.rootfs, &reflinked);
    if (r >= 0) {
        r = fault_point("create.clone");
    }
    if (r < 0) {
        goto fail;
    }
    if (!reflinked) {
        log_sandbox_warning(rec.iid, "no reflink support under '%s', made a full copy of the disk",
                            host->data_dir);
    }
    ret->timing.clone = now_monotonic() - t;

    step = "create network";
    t = now_monotonic();
    r = netslot_create(rec.iid, rec.net_bps);
    if (r >= 0) {
        r = fault_point("create.network");
    }
    if (r < 0) {
        goto fail;
    }
    ret->timing.network = now_monotonic() - t;

    step = restore ? "restore vmm" : "start vmm";
    t = now_monotonic();
    r = restore ? runtime_restore(host->runtime, &cfg, sdir, &rt)
                : runtime_boot(host->runtime, &cfg, &rt);
    if (r >= 0 && restore) {
        r = fault_point("create.restore");
    }
    if (r < 0 && restore) {
        ret->snapshot_suspect = true;
    }
    if (r >= 0) {
        r = fault_point("create.vmm");
    }
    if (r < 0) {
        goto fail;
    }
    ret->timing.vmm = now_monotonic() - t;
    rec.pid = runtime_pid(rt);
    r = runtime_process_start_time(rec.pid, &rec.pid_start_time);
    if (r >= 0) {
        step = "save instance record";
        r = vm_save_record(host, &rec);
    }
    if (r >= 0) {
        r = fault_point("create.record-vmm");
    }
    if (r < 0) {
        goto fail;
    }

    step = "wait for agent";
    t = now_monotonic();
    r = restore ? runtime_resume(rt) : 0;
    if (r >= 0) {
        r = vm_wait_ready(host, rt);
    }
    if (r < 0 && restore) {
        ret->snapshot_suspect = true;
    }
    if (r >= 0) {
        r = fault_point("create.ready");
    }
    if (r < 0) {
        goto fail;
    }
    ret->timing.boot = now_monotonic() - t;

    if (mode == CREATE_MEMBER) {
        /* One real /init, a whole identity of its own (hostname = its instance id),
         * translates every step of the agent's path a bind takes; then the vCPUs stop
         * until a create binds it and sends the real one. */
        step = "warm agent";
        identity = vm_identity_json(vm);
        r = identity ? vm_agent_init(rt, identity, &agent_error) : -ENOMEM;
        if (r >= 0) {
            r = vm_warm_exec(host, vm, rt);
        }
        if (r >= 0) {
            r = runtime_pause(rt);
        }
        if (r >= 0) {
            r = fault_point("create.member");
        }
        if (r < 0) {
            goto fail;
        }
    } else if (mode != CREATE_SOURCE) {
        /* Every sandbox, booted or restored, gets its own identity (vm_identity_json()). */
        step = "initialise agent";
        t = now_monotonic();
        identity = vm_identity_json(vm);
        /* A branch's agent has its source's token: proving it lets the /init set ours. */
        r = identity ? vm_agent_init_as(rt, identity, branch_token, &agent_error) : -ENOMEM;
        if (r >= 0) {
            r = fault_point("create.init");
        }
        if (r < 0) {
            goto fail;
        }
        if (vm->init_json) {
            init_json_ca(vm->init_json, rec.ca_given); /* the agent has it now */
        }
        ret->timing.init = now_monotonic() - t;
    }
    ret->timing.total = now_monotonic() - t0;
    ret->timing.restored = restore;

    /* Durable first: the loop marks the vm running only after this is on disk. A
     * snapshot source or pool member stays CREATING: a node that crashes before it is
     * bound removes it. */
    rec.state = mode == CREATE_SOURCE || mode == CREATE_MEMBER ? VM_CREATING : VM_RUNNING;
    r = vm_save_record(host, &rec);
    if (r >= 0) {
        r = fault_point("create.running");
    }
    if (r < 0) {
        step = "save state";
        goto fail;
    }
    ret->rt = rt;
    ret->pid = rec.pid;
    ret->pid_start_time = rec.pid_start_time;
    free(identity);
    free(branch_token);
    return 0;

fail:;
    free(identity);
    free(branch_token);
    struct strbuf sb = STRBUF_INIT;
    char *console = file_tail(p.dir, "console.log", 2048);
    char *qemu = file_tail(p.dir, "qemu.log", 1024);
    strbuf_appendf(&sb, "%s failed: %s", step,
                   agent_error       ? agent_error
                   : r == -ETIMEDOUT ? "the guest agent did not become ready in time"
                   : r == -ECHILD    ? "the VM exited during boot"
                                     : strerror(-r));
    free(agent_error);
    if (qemu && *qemu) {
        strbuf_appendf(&sb, "\n--- qemu ---\n%s", qemu);
    }
    if (console && *console) {
        strbuf_appendf(&sb, "\n--- serial console (tail) ---\n%s", console);
    }
    free(console);
    free(qemu);
    ret->error = strbuf_detach(&sb, NULL);
    if (rt) {
        (void)runtime_stop(rt);
        rt = runtime_vm_free(rt);
    }
    (void)vm_destroy(host, vm);
    return r;
}

int vm_create(const struct vm_host *host, const struct vm *vm, struct vm_create_result *ret)
{
    struct snapshot *snap = NULL;

    /* A branch has nothing to fall back to: it is that snapshot or nothing. */
    if (vm->branch_from[0]) {
        return vm_create_with(host, vm, CREATE_BRANCH, NULL, ret);
    }

    if (!vm->cold_boot &&
        snapshot_get(host, vm->rec.template_name, vm->rec.vcpus, vm->rec.memory_mib, &snap) == 0) {
        int r = vm_create_with(host, vm, CREATE_RESTORE, snap, ret);
        if (r >= 0) {
            snapshot_unref(snap);
            return r;
        }
        /* Everything the restore made is gone again (vm_create_with() cleans up). */
        log_sandbox_warning(vm->rec.iid, "restore from snapshot '%s' failed, cold booting: %s",
                            snapshot_dir(snap), ret->error ? ret->error : strerror(-r));
        if (ret->snapshot_suspect) {
            snapshot_suspect(snap);
        }
        snapshot_unref(snap);
        free(ret->error);
    }
    return vm_create_with(host, vm, CREATE_BOOT, NULL, ret);
}

int vm_create_source(const struct vm_host *host, const struct vm *vm, struct vm_create_result *ret)
{
    return vm_create_with(host, vm, CREATE_SOURCE, NULL, ret);
}

/* A pool member's first command (pool.h): the agent's process path translated before a bind,
 * so the sandbox's first exec does not pay for it. */
static int vm_warm_exec(const struct vm_host *host, const struct vm *vm, struct runtime_vm *rt)
{
    static const char *const no_args[] = { NULL };
    struct vm_exec_request req = {
        .cmd = "/bin/true", .args = no_args, .env = no_args, .timeout_ms = 10000
    };
    struct vm_exec_result res;
    /* vm_exec() reads the record's token and the handle only: a copy with this job's. */
    struct vm warm = *vm;
    warm.rt = rt;
    int r = vm_exec(host, &warm, &req, &res);
    if (r >= 0 && (!res.exited || res.exit_code != 0)) {
        r = -EPROTO;
    }
    vm_exec_result_release(&res);
    return r;
}

int vm_create_member(const struct vm_host *host, const struct vm *vm, struct snapshot *snap,
                     struct vm_create_result *ret)
{
    return vm_create_with(host, vm, CREATE_MEMBER, snap, ret);
}

int vm_bind_member(const struct vm_host *host, const struct vm *vm, struct vm_create_result *ret)
{
    struct instance_record rec = vm->rec; /* bound by the loop; this job's copy */
    char *identity = NULL, *agent_error = NULL;
    const char *step = "resume";
    usec_t t0 = now_monotonic();
    int r;

    *ret = (struct vm_create_result){ .pid = rec.pid, .pid_start_time = rec.pid_start_time };
    /* The member's namespace is shaped at --net-bps (pool.c); only another rate costs. */
    if (rec.net_bps > 0 && rec.net_bps != host->net_bps) {
        char netns[PATH_MAX];
        struct netrate_plan rate = netrate_sandbox_plan(rec.net_bps);
        step = "set network rate";
        r = netslot_netns_path(rec.iid, netns, sizeof(netns));
        if (r >= 0) {
            r = netrate_set(rec.iid, netns, &rate);
        }
        ret->timing.network = now_monotonic() - t0;
        if (r < 0) {
            goto out;
        }
    }
    step = "resume";
    r = runtime_resume(vm->rt);
    if (r >= 0) {
        r = fault_point("bind.resume");
    }
    ret->timing.vmm = now_monotonic() - t0 - ret->timing.network;
    if (r >= 0) {
        step = "initialise agent";
        usec_t t = now_monotonic();
        identity = vm_identity_json(vm);
        r = identity ? vm_agent_init(vm->rt, identity, &agent_error) : -ENOMEM;
        free(identity);
        ret->timing.init = now_monotonic() - t;
    }
    if (r >= 0 && vm->init_json) {
        init_json_ca(vm->init_json, rec.ca_given);
    }
    if (r >= 0) {
        step = "save state";
        usec_t t = now_monotonic();
        rec.state = VM_RUNNING;
        /*
         * Renamed into place, not fsync'd (under load the host's fsync was 44 ms p50 of a
         * 98 ms bind). A kill -9 of the node keeps the page cache, so the next start reads
         * this record; only a host crash could lose it, and that kills the VMM with it:
         * the old record (an unbound member) and this one are both reconciled as gone.
         */
        r = vm_write_record(host, &rec, false);
        ret->timing.record = now_monotonic() - t;
    }
out:
    if (r < 0) {
        struct strbuf sb = STRBUF_INIT;
        strbuf_appendf(&sb, "binding pool member %s: %s failed: %s", rec.iid, step,
                       agent_error ? agent_error : strerror(-r));
        ret->error = strbuf_detach(&sb, NULL);
        free(agent_error);
        return r;
    }
    ret->timing.boot = now_monotonic() - t0 - ret->timing.vmm - ret->timing.network;
    ret->timing.total = now_monotonic() - t0;
    ret->timing.restored = ret->timing.pooled = true;
    ret->rt = vm->rt;
    return 0;
}

bool vm_guest_halted(const struct vm_host *host, struct vm *vm)
{
    char dir[PATH_MAX], path[PATH_MAX + 16], tail[256];
    bool halted = false;
    struct stat st;
    int fd;

    if (vm_instance_dir(host, vm->rec.iid, dir, sizeof(dir)) < 0) {
        return false;
    }
    snprintf(path, sizeof(path), "%s/console.log", dir);
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size != vm->console_seen) {
        /* Any change, a shrink too: the pump drops older output when the file is full. */
        vm->console_seen = st.st_size;
        off_t at = st.st_size > (off_t)sizeof(tail) ? st.st_size - (off_t)sizeof(tail) : 0;
        ssize_t n = pread(fd, tail, sizeof(tail), at);
        halted = n > 0 && death_console_halted(tail, (size_t)n);
    }
    close_safe(fd);
    return halted;
}

void vm_death(const struct vm_host *host, const struct vm *vm, enum death_reason *ret_reason,
              char *msg, size_t n)
{
    struct death_evidence e = { 0 };
    char dir[PATH_MAX];
    int status = 0;

    if (vm->rt && runtime_exit_status(vm->rt, &status) >= 0) {
        e.status_known = true;
        e.wait_status = status;
    }
    /* Before the stop: it removes the cgroup, and the counter with it. */
    e.oom_known = death_read_oom_kills(vm->rec.iid, &e.oom_kills) >= 0;
    if (vm->rt) {
        (void)runtime_stop(vm->rt);
    }
    char *console = vm_instance_dir(host, vm->rec.iid, dir, sizeof(dir)) >= 0
                        ? file_tail(dir, "console.log", 16u << 10)
                        : NULL;
    if (console) {
        e.console = console;
        e.console_len = strlen(console);
    }
    *ret_reason = death_classify(&e, msg, n);
    free(console);
}

int vm_destroy(const struct vm_host *host, const struct vm *vm)
{
    const struct instance_record *rec = &vm->rec;
    struct runtime_config cfg;
    struct runtime_vm *attached = NULL;
    struct vm_paths p;
    int r, ret = 0;

    r = vm_instance_dir(host, rec->iid, p.dir, sizeof(p.dir));
    if (r < 0) {
        return r;
    }
    /*
     * After a node crash or a failed create there is no handle: attach by
     * the record (or the runtime's pidfile) into a handle of our own, so the
     * worker never writes vm->rt.
     */
    struct runtime_vm *rt = vm->rt;
    if (!rt && vm_runtime_config(host, rec, false, &p, &cfg) >= 0) {
        if (runtime_attach(host->runtime, &cfg, &attached) < 0 && cfg.pid > 0) {
            /* A record that names another process: the runtime's own pidfile may still
             * name ours (both are checked against the process start time). */
            cfg.pid = 0;
            cfg.pid_start_time = 0;
            (void)runtime_attach(host->runtime, &cfg, &attached);
        }
        rt = attached;
    }
    if (rt) {
        r = runtime_stop(rt);
        if (r < 0) {
            ret = log_sandbox_warning_errno(rec->iid, r, "cannot stop vmm: %m");
        }
    }
    runtime_vm_free(attached);
    /*
     * A node killed between spawning the VMM and writing its pid anywhere
     * leaves a VMM no record names. It still runs as its slot's uid, which
     * no other process on the host has (netslot.h): sweep by that uid before
     * the slot is released and could be leased again.
     */
    unsigned slot, n = 0;
    if (netslot_slot(rec->iid, &slot) >= 0 &&
        proc_kill_uid(NETSLOT_UID_BASE + slot, SIGKILL, &n) >= 0 && n > 0) {
        log_sandbox_info(rec->iid, "killed %u unrecorded process(es) of slot %u", n, slot);
    }
    r = netslot_destroy(rec->iid);
    if (r < 0) {
        ret = log_sandbox_warning_errno(rec->iid, r, "cannot remove network namespace: %m");
    }
    /* The directory goes last, and only when everything above is gone (see file comment). */
    if (ret == 0) {
        r = rm_rf(p.dir);
        if (r < 0) {
            ret = log_sandbox_warning_errno(rec->iid, r, "cannot remove '%s': %m", p.dir);
        }
    }
    return ret;
}

/* ---- exec through the agent's process.Process/Start stream ---- */

struct exec_stream {
    struct strbuf in; /* undecoded response bytes */
    struct vm_exec_result *res;
    struct strbuf out, err;
    bool ended;         /* saw the end-of-stream frame */
    char *stream_error; /* end-of-stream error message */
    int stream_code;
};

static int append_b64(struct strbuf *sb, const char *b64)
{
    size_t n = strlen(b64);
    char *buf = malloc(n / 4 * 3 + 3);
    long k;
    int r;

    if (!buf) {
        return -ENOMEM;
    }
    k = base64_decode(b64, n, buf);
    r = k < 0 ? -EPROTO : strbuf_append(sb, buf, (size_t)k);
    free(buf);
    return r;
}

static int exec_handle_message(struct exec_stream *s, uint8_t flags, const uint8_t *payload,
                               uint32_t len)
{
    json_error_t jerr;
    json_t *j = json_loadb((const char *)payload, len, 0, &jerr);
    int r = 0;

    if (!j || !json_is_object(j)) {
        json_decref(j);
        return -EPROTO;
    }
    if (flags & CONNECT_FLAG_END_STREAM) {
        json_t *e = json_object_get(j, "error");
        s->ended = true;
        if (e) {
            const char *code = json_string_value(json_object_get(e, "code"));
            const char *msg = json_string_value(json_object_get(e, "message"));
            s->stream_code = code ? connect_code_from_string(code) : CONNECT_UNKNOWN;
            s->stream_error = strdup(msg ? msg : (code ? code : "unknown error"));
        }
        json_decref(j);
        return 0;
    }
    json_t *ev = json_object_get(j, "event");
    json_t *data = json_object_get(ev, "data");
    json_t *end = json_object_get(ev, "end");
    if (data) {
        const char *o = json_string_value(json_object_get(data, "stdout"));
        const char *e = json_string_value(json_object_get(data, "stderr"));
        if (o) {
            r = append_b64(&s->out, o);
        }
        if (r >= 0 && e) {
            r = append_b64(&s->err, e);
        }
    } else if (end) {
        json_t *code = json_object_get(end, "exitCode");
        const char *status = json_string_value(json_object_get(end, "status"));
        const char *error = json_string_value(json_object_get(end, "error"));
        s->res->exit_code = json_is_integer(code) ? (int)json_integer_value(code) : 0;
        s->res->exited = json_is_true(json_object_get(end, "exited"));
        free(s->res->status);
        s->res->status = status ? strdup(status) : NULL;
        free(s->res->error);
        s->res->error = error ? strdup(error) : NULL;
    }
    json_decref(j);
    return r;
}

static int exec_body_cb(const void *data, size_t len, void *userdata)
{
    struct exec_stream *s = userdata;
    int r = strbuf_append(&s->in, data, len);
    if (r < 0) {
        return -EPROTO;
    }
    for (;;) {
        const uint8_t *payload;
        uint32_t plen;
        size_t used;
        uint8_t flags;
        r = connect_envelope_parse((const uint8_t *)s->in.buf, s->in.len, CONNECT_MAX_MESSAGE,
                                   &flags, &payload, &plen, &used);
        if (r <= 0) {
            return r;
        }
        r = exec_handle_message(s, flags, payload, plen);
        if (r < 0) {
            return r;
        }
        strbuf_consume(&s->in, used);
    }
}

static json_t *exec_request_json(const struct vm_exec_request *req)
{
    json_t *args = json_array(), *envs = json_object(), *process;

    for (const char *const *a = req->args; a && *a; a++) {
        json_array_append_new(args, json_string(*a));
    }
    for (const char *const *e = req->env; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (eq) {
            char key[256];
            snprintf(key, sizeof(key), "%.*s", (int)MIN((size_t)(eq - *e), sizeof(key) - 1), *e);
            json_object_set_new(envs, key, json_string(eq + 1));
        }
    }
    process = json_pack("{s:s, s:o, s:o}", "cmd", req->cmd, "args", args, "envs", envs);
    if (process && req->cwd) {
        json_object_set_new(process, "cwd", json_string(req->cwd));
    }
    return json_pack("{s:o, s:b}", "process", process, "stdin", 0);
}

int vm_exec(const struct vm_host *host, const struct vm *vm, const struct vm_exec_request *req,
            struct vm_exec_result *ret)
{
    struct exec_stream s = { .res = ret };
    char auth[300], timeout_hdr[64], token_hdr[160], *body = NULL, *content_type = NULL;
    const char *headers[7];
    size_t nh = 0, body_len;
    json_t *j = NULL;
    int fd = -EBADF, status = 0;
    int r;

    *ret = (struct vm_exec_result){ .exited = true };
    strbuf_init(&s.in, CONNECT_MAX_MESSAGE + CONNECT_ENVELOPE_HEADER);
    strbuf_init(&s.out, VM_EXEC_MAX_OUTPUT);
    strbuf_init(&s.err, VM_EXEC_MAX_OUTPUT);

    j = exec_request_json(req);
    char *payload = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (!payload) {
        r = -ENOMEM;
        goto out;
    }
    body_len = strlen(payload) + CONNECT_ENVELOPE_HEADER;
    body = malloc(body_len);
    if (!body) {
        free(payload);
        r = -ENOMEM;
        goto out;
    }
    connect_envelope_header(0, (uint32_t)strlen(payload), (uint8_t *)body);
    memcpy(body + CONNECT_ENVELOPE_HEADER, payload, strlen(payload));
    free(payload);

    headers[nh++] = "Content-Type: application/connect+json";
    headers[nh++] = "Connect-Protocol-Version: 1";
    if (req->user) {
        char cred[260], b64[360];
        int n = snprintf(cred, sizeof(cred), "%s:", req->user);
        if (n < 0 || n >= (int)sizeof(cred)) {
            r = -EINVAL;
            goto out;
        }
        base64_encode(cred, (size_t)n, b64);
        snprintf(auth, sizeof(auth), "Authorization: Basic %s", b64);
        headers[nh++] = auth;
    }
    if (vm->rec.access_token[0]) {
        snprintf(token_hdr, sizeof(token_hdr), "X-Access-Token: %s", vm->rec.access_token);
        headers[nh++] = token_hdr;
    }
    /* Every exec has a deadline (style: no unbounded waits on a guest); the agent kills
     * the command at timeout_ms, and we stop waiting a little after that. */
    uint64_t timeout_ms = req->timeout_ms ? req->timeout_ms : host->max_exec_timeout / 1000;
    if (timeout_ms == 0) {
        timeout_ms = 1;
    }
    snprintf(timeout_hdr, sizeof(timeout_hdr), "Connect-Timeout-Ms: %llu",
             (unsigned long long)timeout_ms);
    headers[nh++] = timeout_hdr;
    headers[nh] = NULL;

    r = runtime_connect(vm->rt, AGENT_PORT, 2 * USEC_PER_SEC, &fd);
    if (r < 0) {
        r = -ENOENT;
        goto out;
    }
    struct http_request hreq = { .method = "POST",
                                 .path = "/process.Process/Start",
                                 .headers = headers,
                                 .body = body,
                                 .body_len = body_len };
    usec_t deadline = now_monotonic() + timeout_ms * USEC_PER_MSEC + 5 * USEC_PER_SEC;
    r = http_client_request(fd, &hreq, deadline, &status, &content_type, exec_body_cb, &s);
    if (r < 0) {
        goto out;
    }
    if (status != 200) {
        r = -EPROTO;
        goto out;
    }
    if (!s.ended) {
        r = -EPROTO;
        goto out;
    }
    if (s.stream_error) {
        ret->error = TAKE_PTR(s.stream_error);
        /* The agent ends a Start past its Connect-Timeout-Ms with deadline_exceeded (as
         * envd does, after killing the process): that is the exec's timeout, not a fault. */
        r = s.stream_code == CONNECT_DEADLINE_EXCEEDED ? -ETIMEDOUT
            : s.stream_code == CONNECT_NOT_FOUND || s.stream_code == CONNECT_INVALID_ARGUMENT ||
                    s.stream_code == CONNECT_UNAUTHENTICATED
                ? -EINVAL
                : -EIO;
        goto out;
    }
    ret->out = strbuf_detach(&s.out, &ret->out_len);
    ret->err = strbuf_detach(&s.err, &ret->err_len);
    r = 0;
out:
    close_safe(fd);
    json_decref(j);
    free(body);
    free(content_type);
    free(s.stream_error);
    strbuf_release(&s.in);
    strbuf_release(&s.out);
    strbuf_release(&s.err);
    return r;
}

void vm_exec_result_release(struct vm_exec_result *res)
{
    free(res->status);
    free(res->error);
    free(res->out);
    free(res->err);
    *res = (struct vm_exec_result){ 0 };
}

/* ---- crash recovery ---- */

/* An instance.json with its network policy (at most GW_PROTO_MSG_MAX) and the rest. */
#define VM_RECORD_MAX (1u << 20)

static int vm_load(const struct vm_host *host, const char *iid, struct vm **ret,
                   bool *ret_record_ok)
{
    char path[PATH_MAX], *text = NULL;
    struct vm *vm;
    int r;

    r = vm_instance_dir(host, iid, path, sizeof(path) - 16);
    if (r < 0) {
        return r;
    }
    size_t n = strlen(path);
    snprintf(path + n, sizeof(path) - n, "/instance.json");
    vm = calloc(1, sizeof(*vm));
    if (!vm) {
        return -ENOMEM;
    }
    vm->dns_fd = vm->gateway_fd = -EBADF;
    *ret_record_ok = read_file(path, VM_RECORD_MAX, &text, NULL) >= 0 &&
                     instance_record_from_json(text, &vm->rec) >= 0 &&
                     strcmp(vm->rec.iid, iid) == 0;
    if (!*ret_record_ok) {
        /* Unreadable (a crash before the first write): destroy by directory name. */
        instance_record_release(&vm->rec);
        vm->rec = (struct instance_record){ .state = VM_CREATING };
        memcpy(vm->rec.iid, iid, INSTANCE_ID_LEN + 1);
    }
    free(text);
    *ret = vm;
    return 0;
}

static int instance_path(const struct vm_host *host, const char *iid, const char *name, char *buf,
                         size_t n);
#define SUSPEND_NEW "suspend.new"

/*
 * A suspended instance has no VMM. One its record still names is a leftover (a crash
 * between the record and the stop of a suspend, or in a restore before it recorded
 * running): the snapshot is durable, so it is stopped, and so is anything else running
 * as the slot's uid (a restore's VMM spawned before its pid was recorded).
 */
static void vm_reconcile_suspended(const struct vm_host *host, struct vm *vm)
{
    struct instance_record *rec = &vm->rec;
    struct runtime_config cfg;
    struct runtime_vm *rt = NULL;
    struct vm_paths p;
    unsigned slot, n = 0;

    if (rec->pid > 1 && vm_runtime_config(host, rec, false, &p, &cfg) >= 0 &&
        runtime_attach(host->runtime, &cfg, &rt) >= 0) {
        log_sandbox_info(rec->sandbox_id,
                         "stopping the leftover VMM (pid %d) of suspended "
                         "instance %s",
                         (int)rec->pid, rec->iid);
        (void)runtime_stop(rt);
    }
    runtime_vm_free(rt);
    if (netslot_slot(rec->iid, &slot) >= 0) {
        (void)proc_kill_uid(NETSLOT_UID_BASE + slot, SIGKILL, &n);
    }
    if (rec->pid) {
        rec->pid = 0;
        rec->pid_start_time = 0;
        (void)vm_save_record(host, rec);
    }
}

int vm_reconcile(const struct vm_host *host, vm_adopt_cb cb, void *userdata)
{
    char path[PATH_MAX];
    struct dirent *de;
    DIR *d;

    snprintf(path, sizeof(path), "%s/instances", host->data_dir);
    d = opendir(path);
    if (!d) {
        return errno == ENOENT ? 0 : -errno;
    }
    while ((de = readdir(d))) {
        struct instance_probe probe = { 0 };
        struct vm *vm = NULL;
        struct runtime_config cfg;
        struct vm_paths p;
        const char *reason;

        if (de->d_name[0] == '.') {
            continue;
        }
        if (!instance_id_is_valid(de->d_name)) {
            log_warning("unexpected entry '%s' in '%s', ignoring", de->d_name, path);
            continue;
        }
        if (vm_load(host, de->d_name, &vm, &probe.record_ok) < 0) {
            continue;
        }
        struct instance_record *rec = &vm->rec;
        if (rec->pid > 1) {
            int pidfd = (int)syscall(SYS_pidfd_open, rec->pid, 0);
            probe.process_exists =
                pidfd >= 0 && runtime_process_start_time(rec->pid, &probe.process_start_time) >= 0;
            close_safe(pidfd);
        }
        probe.netns_exists = netslot_exists(rec->iid);
        char snap[PATH_MAX], tmp[PATH_MAX];
        probe.snapshot_exists = vm_suspend_dir(host, rec->iid, snap, sizeof(snap)) >= 0 &&
                                access(snap, R_OK | X_OK) == 0;
        enum instance_verdict verdict = instance_reattach_verdict(rec, &probe, &reason);
        if (instance_path(host, rec->iid, SUSPEND_NEW, tmp, sizeof(tmp)) >= 0) {
            (void)rm_rf(tmp); /* an interrupted suspend's: never named, never used */
        }
        if (verdict == INSTANCE_REATTACH && rec->state == VM_SUSPENDED) {
            vm_reconcile_suspended(host, vm);
            log_sandbox_info(rec->sandbox_id, "kept suspended instance %s", rec->iid);
            cb(vm, userdata);
            continue;
        }
        if (verdict == INSTANCE_REATTACH && vm_runtime_config(host, rec, false, &p, &cfg) >= 0 &&
            runtime_attach(host->runtime, &cfg, &vm->rt) >= 0 && runtime_alive(vm->rt)) {
            /* The record is the truth: one that says running gets its vCPUs (a crash of a
             * pause or suspend before it recorded left them stopped); cont is harmless on
             * a running VM. A paused one stays paused. */
            if (rec->state == VM_RUNNING) {
                (void)runtime_resume(vm->rt);
            }
            log_sandbox_info(rec->sandbox_id, "re-attached to %s instance %s (pid %d)",
                             vm_state_to_string(rec->state), rec->iid, (int)runtime_pid(vm->rt));
            cb(vm, userdata);
            continue;
        }
        log_info("instance %s (sandbox '%s', %s): removing it, %s", rec->iid, rec->sandbox_id,
                 vm_state_to_string(rec->state), reason);
        (void)vm_destroy(host, vm);
        vm_free(vm);
    }
    closedir(d);
    return 0;
}

/* ---- pause / resume (memory stays resident) ---- */

/* "2026-12-02T03:14:05.123456Z": the agent's /init timestamp (state_parse_rfc3339()). */
static void format_rfc3339(usec_t t, char out[40])
{
    time_t s = (time_t)(t / USEC_PER_SEC);
    struct tm tm;

    gmtime_r(&s, &tm);
    snprintf(out, 40, "%04d-%02d-%02dT%02d:%02d:%02d.%06uZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (unsigned)(t % USEC_PER_SEC));
}

int vm_pause(const struct vm_host *host, const struct vm *vm)
{
    struct instance_record rec = vm->rec; /* this job's copy: the loop owns vm->rec */
    int r;

    if (!vm->rt) {
        return -ENOENT;
    }
    /* QMP stop is idempotent: a re-run after a crash between it and the save finds the
     * vCPUs stopped already and only writes the record. */
    r = runtime_pause(vm->rt);
    if (r >= 0) {
        r = fault_point("pause.stopped");
    }
    if (r < 0) {
        return r;
    }
    /* Durable before the loop calls it paused: a node restarted now re-attaches it paused. */
    rec.state = VM_PAUSED;
    r = vm_save_record(host, &rec);
    if (r < 0) {
        /* Not recorded: give the guest its vCPUs back so record and VM agree. */
        (void)runtime_resume(vm->rt);
    }
    return r;
}

char *vm_clock_init_body(const struct instance_record *rec, usec_t now)
{
    char ts[40];
    json_t *j;
    char *text;

    format_rfc3339(now, ts);
    j = json_pack("{s:s}", "timestamp", ts);
    /* The agent takes an /init only from a caller that proves its token. */
    if (j && rec->access_token[0] &&
        json_object_set_new(j, "accessToken", json_string(rec->access_token)) < 0) {
        json_decref(j);
        return NULL;
    }
    text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return text;
}

int vm_resume(const struct vm_host *host, const struct vm *vm, char **ret_error)
{
    struct instance_record rec = vm->rec;
    char *body = NULL;
    int r;

    if (!vm->rt) {
        return -ENOENT;
    }
    r = runtime_resume(vm->rt);
    if (r >= 0) {
        r = fault_point("resume.cont");
    }
    if (r < 0) {
        return r;
    }
    /*
     * The guest's clock stood still while it was stopped (TCG and KVM alike: the guest
     * sees no time pass): step it to ours, as envd's /init after a resume does. A guest
     * that does not answer is still running; its clock is the only thing off, so it is
     * logged, not undone.
     */
    body = vm_clock_init_body(&rec, now_realtime());
    if (!body) {
        r = -ENOMEM;
    } else {
        r = vm_agent_init(vm->rt, body, ret_error);
    }
    free(body);
    if (r < 0) {
        log_sandbox_warning_errno(rec.sandbox_id, r,
                                  "instance %s resumed, but its clock was not re-synced: %s%m",
                                  rec.iid, ret_error && *ret_error ? *ret_error : "");
    }
    rec.state = VM_RUNNING;
    return vm_save_record(host, &rec);
}

/* ---- suspend / restore (memory and devices to disk, the VMM released) ---- */

#define SUSPEND_DIR "suspend"

static int instance_path(const struct vm_host *host, const char *iid, const char *name, char *buf,
                         size_t n)
{
    char dir[PATH_MAX];
    int r = vm_instance_dir(host, iid, dir, sizeof(dir));
    if (r < 0) {
        return r;
    }
    return snprintf(buf, n, "%s/%s", dir, name) >= (int)n ? -ENAMETOOLONG : 0;
}

int vm_suspend_dir(const struct vm_host *host, const char *iid, char *buf, size_t n)
{
    return instance_path(host, iid, SUSPEND_DIR, buf, n);
}

/* A suspend snapshot carries the guest's RAM in its vmstate (whatever backed it before:
 * a template snapshot's private mapping too): restored into ordinary private memory. */
static void vm_restore_config(struct runtime_config *cfg)
{
    cfg->memory = RUNTIME_MEMORY_ANONYMOUS;
    cfg->memory_fd = -EBADF;
}

static int vm_runtime_restore(const struct vm_host *host, const struct runtime_config *cfg,
                              const char *dir, struct runtime_vm **ret)
{
    return runtime_restore(host->runtime, cfg, dir, ret);
}

/* What a suspend leaves beside its snapshot for a restore that boots from the disk: the
 * agent's /init body (env, access token, CA) as the create sent it, or as much of it as the
 * record has (a node restarted since the create no longer holds the body). 0700 dir. */
static int write_suspend_init(const struct vm *vm, const char *tmp)
{
    char path[PATH_MAX + 32];
    char *text = NULL;
    int r;

    snprintf(path, sizeof(path), "%s/" SUSPEND_INIT_FILE, tmp);
    if (vm->init_json) {
        return write_file_atomic(path, vm->init_json, strlen(vm->init_json));
    }
    json_t *j = vm->rec.access_token[0] ? json_pack("{s:s}", "accessToken", vm->rec.access_token)
                                        : json_object();
    text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    r = text ? write_file_atomic(path, text, strlen(text)) : -ENOMEM;
    free(text);
    return r;
}

int vm_suspend(const struct vm_host *host, const struct vm *vm, bool memory, char **ret_error)
{
    struct instance_record rec = vm->rec;
    char dir[PATH_MAX], snap[PATH_MAX], tmp[PATH_MAX], disk[PATH_MAX], marker[PATH_MAX + 32];
    const char *step = "pause";
    int r;

    if (!vm->rt) {
        return -ENOENT;
    }
    r = vm_instance_dir(host, rec.iid, dir, sizeof(dir));
    if (r >= 0) {
        r = vm_suspend_dir(host, rec.iid, snap, sizeof(snap));
    }
    if (r >= 0) {
        r = instance_path(host, rec.iid, SUSPEND_NEW, tmp, sizeof(tmp));
    }
    if (r >= 0) {
        r = instance_path(host, rec.iid, "rootfs.ext4", disk, sizeof(disk));
    }
    if (r < 0) {
        return r;
    }
    /* Without memory the guest's page cache would be lost with the VMM: what it wrote and
     * never fsync'd must reach the disk first (the disk snapshot's quiesce). A guest that
     * cannot sync stays running: a disk-only suspend never drops written data silently. */
    if (!memory && !disk_snapshot_guest_sync(host, vm)) {
        step = "sync the guest's file systems";
        r = -EIO;
        goto fail;
    }
    /* Frozen first: memory, devices and disk then describe one instant. */
    r = runtime_pause(vm->rt);
    if (r < 0) {
        goto fail;
    }
    /*
     * Written aside and renamed into place: a crash at any point before the record says
     * suspended leaves the VM as it was (the record says running; a restarted node
     * resumes its vCPUs and drops suspend.new), and no half-written snapshot is ever
     * named `suspend`.
     */
    step = "write the snapshot";
    (void)rm_rf(tmp);
    r = mkdir(tmp, 0700) < 0 ? -errno : 0;
    if (r >= 0 && memory) {
        r = runtime_snapshot(vm->rt, tmp);
    } else if (r >= 0) {
        /* The marker is what tells a restore to boot from the disk. */
        snprintf(marker, sizeof(marker), "%s/" SUSPEND_DISK_ONLY_FILE, tmp);
        r = write_file_atomic(marker, "", 0);
    }
    if (r >= 0) {
        r = write_suspend_init(vm, tmp);
    }
    if (r >= 0) {
        r = fault_point("suspend.snapshot");
    }
    if (r >= 0) {
        /* QEMU flushed its block layer at the stop; the host's cache goes to the disk too,
         * so the clone is as durable as the snapshot that goes with it. */
        step = "sync the disk";
        r = fsync_path(disk, O_RDONLY);
    }
    if (r < 0) {
        goto fail;
    }
    step = "publish the snapshot";
    (void)rm_rf(snap); /* the record says running: anything there is stale */
    r = rename(tmp, snap) < 0 ? -errno : 0;
    if (r >= 0) {
        r = fsync_path(dir, O_RDONLY | O_DIRECTORY);
    }
    if (r >= 0) {
        r = fault_point("suspend.published");
    }
    if (r < 0) {
        goto fail;
    }
    /* The commit point. The VMM's pid stays in the record until it is gone, so a crash
     * before the stop leaves a process the next start knows to stop. */
    step = "save the record";
    rec.state = VM_SUSPENDED;
    r = vm_save_record(host, &rec);
    if (r >= 0) {
        r = fault_point("suspend.recorded");
    }
    if (r < 0) {
        goto fail;
    }
    r = runtime_stop(vm->rt);
    if (r < 0) {
        /* Suspended all the same: the snapshot is durable; the kill or the next start's
         * reconcile stops the leftover. */
        log_sandbox_warning_errno(
            rec.sandbox_id, r, "instance %s is suspended, but its VMM did not stop: %m", rec.iid);
    }
    rec.pid = 0;
    rec.pid_start_time = 0;
    (void)vm_save_record(host, &rec);
    return 0;
fail:
    if (ret_error) {
        free(*ret_error);
        *ret_error = NULL;
        if (asprintf(ret_error, "%s failed: %s", step, strerror(-r)) < 0) {
            *ret_error = NULL;
        }
    }
    /* Nothing was committed: back to running, as before the call. */
    (void)rm_rf(tmp);
    rec.state = VM_RUNNING;
    (void)vm_save_record(host, &rec);
    (void)runtime_resume(vm->rt);
    return r;
}

/* The identity /init a boot from the disk sends: the suspend's init file, re-identified. */
static char *restore_init_body(const struct vm *vm, const char *snap)
{
    char path[PATH_MAX + 32], *init = NULL;
    struct vm copy = *vm; /* vm_identity_json() reads init_json; the loop owns vm's */

    snprintf(path, sizeof(path), "%s/" SUSPEND_INIT_FILE, snap);
    if (read_file(path, 1024 * 1024, &init, NULL) < 0) {
        init = NULL; /* a suspend of an older node: the record's token only */
    }
    copy.init_json = init ? init : vm->init_json;
    char *body = vm_identity_json(&copy);
    if (body && !init && vm->rec.access_token[0]) {
        json_t *j = json_loads(body, 0, NULL);
        free(body);
        body = NULL;
        if (j && json_object_set_new(j, "accessToken", json_string(vm->rec.access_token)) == 0) {
            body = json_dumps(j, JSON_COMPACT);
        }
        json_decref(j);
    }
    free(init);
    return body;
}

int vm_restore(const struct vm_host *host, const struct vm *vm, bool memory,
               struct vm_restore_result *ret)
{
    struct instance_record rec = vm->rec;
    struct runtime_config cfg;
    struct vm_paths p = { .dir = "" };
    char snap[PATH_MAX], marker[PATH_MAX + 32], *body = NULL;
    struct runtime_vm *rt = NULL;
    const char *step = "prepare";
    usec_t t0 = now_monotonic();
    int r;

    *ret = (struct vm_restore_result){ 0 };
    r = vm_runtime_config(host, &rec, true, &p, &cfg);
    if (r >= 0) {
        r = vm_suspend_dir(host, rec.iid, snap, sizeof(snap));
    }
    if (r >= 0 && access(snap, R_OK | X_OK) < 0) {
        r = -errno;
    }
    if (r < 0) {
        goto fail;
    }
    /* A disk-only suspend has no memory to load; memory: false drops what there is (the
     * disk is as the suspend synced it on the host: crash-consistent, its journal replays). */
    snprintf(marker, sizeof(marker), "%s/" SUSPEND_DISK_ONLY_FILE, snap);
    bool boot = !memory || access(marker, F_OK) == 0;
    if (!boot) {
        vm_restore_config(&cfg);
    }
    /* Kept across the suspend; made again if something removed it. Idempotent. */
    step = "create network";
    r = netslot_create(rec.iid, rec.net_bps);
    if (r < 0) {
        goto fail;
    }
    step = boot ? "boot vmm from the disk" : "start vmm from the snapshot";
    r = boot ? runtime_boot(host->runtime, &cfg, &rt) : vm_runtime_restore(host, &cfg, snap, &rt);
    if (r >= 0) {
        r = fault_point("restore.vmm");
    }
    if (r < 0) {
        goto fail;
    }
    ret->timing.vmm = now_monotonic() - t0;
    /* Still suspended, with the new VMM named: a crash from here on leaves a record whose
     * process the next start stops, and the snapshot it can restore again. */
    step = "save instance record";
    rec.pid = runtime_pid(rt);
    r = runtime_process_start_time(rec.pid, &rec.pid_start_time);
    if (r >= 0) {
        r = vm_save_record(host, &rec);
    }
    if (r < 0) {
        goto fail;
    }
    step = boot ? "wait for agent" : "resume";
    r = boot ? vm_wait_ready(host, rt) : runtime_resume(rt);
    if (r < 0) {
        goto fail;
    }
    if (boot) {
        /* A fresh agent: the whole identity again, and it must take it (its token). */
        step = "initialise agent";
        body = restore_init_body(vm, snap);
        r = body ? vm_agent_init(rt, body, &ret->error) : -ENOMEM;
        free(body);
        body = NULL;
        if (r >= 0) {
            r = fault_point("restore.boot-init");
        }
        if (r < 0) {
            goto fail;
        }
    } else {
        /* The clock stood still since the suspend: step it (as after a resume). */
        body = vm_clock_init_body(&rec, now_realtime());
        r = body ? vm_agent_init(rt, body, &ret->error) : -ENOMEM;
        free(body);
    }
    if (r < 0) {
        log_sandbox_warning_errno(rec.sandbox_id, r,
                                  "instance %s restored, but its clock was not re-synced: %s",
                                  rec.iid, ret->error ? ret->error : strerror(-r));
    }
    step = "save state";
    rec.state = VM_RUNNING;
    r = vm_save_record(host, &rec);
    if (r >= 0) {
        r = fault_point("restore.running");
    }
    if (r < 0) {
        goto fail;
    }
    /* The guest runs on from it: the snapshot no longer matches the disk. */
    (void)rm_rf(snap);
    ret->timing.total = now_monotonic() - t0;
    ret->booted = boot;
    ret->rt = rt;
    ret->pid = rec.pid;
    ret->pid_start_time = rec.pid_start_time;
    return 0;
fail:;
    char *qemu = p.dir[0] ? file_tail(p.dir, "qemu.log", 1024) : NULL;
    free(ret->error);
    if (asprintf(&ret->error, "%s failed: %s%s%s", step, strerror(-r),
                 qemu && *qemu ? "\n--- qemu ---\n" : "", qemu ? qemu : "") < 0) {
        ret->error = NULL;
    }
    free(qemu);
    if (rt) {
        (void)runtime_stop(rt);
        runtime_vm_free(rt);
    }
    /* Suspended as before, with no VMM: the snapshot is untouched. */
    rec.state = VM_SUSPENDED;
    rec.pid = 0;
    rec.pid_start_time = 0;
    (void)vm_save_record(host, &rec);
    return r;
}
