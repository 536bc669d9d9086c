/* Snapshots of a sandbox and rollback onto one; see disk-snapshot.h. */
#include "node/disk-snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/fileio.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "node/clone.h"
#include "node/netslot.h"
#include "node/snapshot.h"
#include "shared/sandbox-id.h"

#define SNAPSHOTS_DIR "snapshots"
#define META_MAX (1u << 16)
#define SYNC_TIMEOUT_MS 30000

static int snapshots_root(const struct vm_host *host, char *buf, size_t n)
{
    return snprintf(buf, n, "%s/" SNAPSHOTS_DIR, host->data_dir) >= (int)n ? -ENAMETOOLONG : 0;
}

int disk_snapshot_dir(const struct vm_host *host, const char *id, char *buf, size_t n)
{
    if (!sandbox_id_is_valid(id)) {
        return -EINVAL;
    }
    return snprintf(buf, n, "%s/" SNAPSHOTS_DIR "/%s", host->data_dir, id) >= (int)n ? -ENAMETOOLONG
                                                                                     : 0;
}

static void rfc3339(usec_t t, char out[40])
{
    time_t s = (time_t)(t / USEC_PER_SEC);
    struct tm tm;

    gmtime_r(&s, &tm);
    snprintf(out, 40, "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (unsigned)(t % USEC_PER_SEC / USEC_PER_MSEC));
}

/*
 * The guest writes out its page cache: without it, what it wrote and never fsync'd would
 * be in its memory only, and a disk snapshot would miss it. Best effort for a snapshot: a
 * guest that does not answer still gets a crash-consistent one (its journal replays at the
 * next boot).
 */
bool disk_snapshot_guest_sync(const struct vm_host *host, const struct vm *vm)
{
    const char *const args[] = { NULL };
    const char *const env[] = { NULL };
    struct vm_exec_request req = {
        .cmd = "sync", .args = args, .env = env, .timeout_ms = SYNC_TIMEOUT_MS
    };
    struct vm_exec_result res = { 0 };
    int r = vm_exec(host, vm, &req, &res);
    bool ok = r >= 0 && res.exited && res.exit_code == 0;

    if (!ok) {
        log_sandbox_warning_errno(vm_sandbox_id(vm), r < 0 ? r : -EIO,
                                  "snapshot: the guest's sync failed (%s), taking a "
                                  "crash-consistent snapshot: %m",
                                  res.error    ? res.error
                                  : res.status ? res.status
                                               : "no answer");
    }
    vm_exec_result_release(&res);
    return ok;
}

static const char *const meta_files[] = { "rootfs.ext4", "vmstate" };

/* meta.json's content for the files in dir (CONTRACTS.md "Artifact layout"). */
static json_t *meta_build(const struct vm *vm, const char *id, bool full, bool quiesced,
                          const char *dir, usec_t created, double paused_ms, int *ret_r)
{
    char path[PATH_MAX + 32], hex[65], stamp[40];
    json_t *files = json_object();
    json_int_t bytes = 0;
    int r = files ? 0 : -ENOMEM;

    for (size_t i = 0; r >= 0 && i < (full ? 2u : 1u); i++) {
        uint64_t size = 0;
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", dir, meta_files[i]);
        r = snapshot_file_digest(path, &size, hex);
        if (r >= 0 && stat(path, &st) < 0) {
            r = -errno;
        }
        if (r >= 0) {
            bytes += (json_int_t)st.st_blocks * 512;
            json_object_set_new(files, meta_files[i],
                                json_pack("{s:I,s:s}", "size", (json_int_t)size, "sha256", hex));
        }
    }
    *ret_r = r;
    if (r < 0) {
        json_decref(files);
        return NULL;
    }
    rfc3339(created, stamp);
    json_t *m = json_pack(
        "{s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:s,s:b,s:I,s:f,s:s,s:o}", "format", DISK_SNAPSHOT_FORMAT,
        "id", id, "kind", full ? "full" : "disk", "sandbox_id", vm_sandbox_id(vm), "template",
        vm->rec.template_name, "vcpus", (int)vm->rec.vcpus, "memory_mib", (int)vm->rec.memory_mib,
        "created_at", stamp, "quiesced", quiesced, "bytes", bytes, "paused_ms", paused_ms, "digest",
        "sha256 of (offset, bytes) of each non-zero page, then the size", "files", files);
    if (!m) {
        *ret_r = -ENOMEM;
    }
    return m;
}

int disk_snapshot_take(const struct vm_host *host, const struct vm *vm, const char *id, bool full,
                       bool was_paused, json_t **ret_meta, char **ret_error)
{
    char root[PATH_MAX], final[PATH_MAX + 32], tmp[PATH_MAX + 32], path[PATH_MAX + 48],
        disk[PATH_MAX + 32];
    const char *step = "prepare";
    json_t *meta = NULL;
    bool stopped = false, reflinked = false, quiesced = false;
    usec_t created, t_stop = 0, paused = 0;
    int r;

    *ret_meta = NULL;
    if (!vm->rt) {
        return -ENOENT;
    }
    r = snapshots_root(host, root, sizeof(root));
    if (r >= 0) {
        r = disk_snapshot_dir(host, id, final, sizeof(final));
    }
    if (r < 0) {
        return r;
    }
    if (access(final, F_OK) == 0) {
        return -EEXIST;
    }
    snprintf(tmp, sizeof(tmp), "%s.new", final);
    char idir[PATH_MAX];
    r = vm_instance_dir(host, vm->rec.iid, idir, sizeof(idir));
    if (r < 0) {
        return r;
    }
    snprintf(disk, sizeof(disk), "%s/rootfs.ext4", idir);

    step = "make the snapshot directory";
    r = mkdir_p(root, 0700);
    if (r >= 0) {
        (void)rm_rf(tmp); /* a crashed earlier attempt at this id */
        r = mkdir(tmp, 0700) < 0 ? -errno : 0;
    }
    if (r < 0) {
        goto fail;
    }
    /* A paused guest cannot run sync: its page cache is whatever it is (it was stopped
     * between two instructions, as a crash would). */
    quiesced = !was_paused && disk_snapshot_guest_sync(host, vm);
    created = now_realtime();

    /* Stopped for the copy only: memory, devices and disk then describe one instant. */
    step = "stop the guest";
    t_stop = now_monotonic();
    if (!was_paused) {
        r = runtime_pause(vm->rt);
        if (r < 0) {
            goto fail;
        }
        stopped = true;
    }
    if (full) {
        step = "write the vmstate";
        r = runtime_snapshot(vm->rt, tmp);
        if (r < 0) {
            goto fail;
        }
    }
    /* QEMU flushed its block layer at the stop; a reflink shares the extents as they are. */
    step = "clone the disk";
    snprintf(path, sizeof(path), "%s/rootfs.ext4", tmp);
    r = clone_file(disk, path, &reflinked);
    if (r < 0) {
        goto fail;
    }
    if (stopped) {
        step = "resume the guest";
        r = runtime_resume(vm->rt);
        stopped = false;
        if (r < 0) {
            goto fail;
        }
    }
    paused = now_monotonic() - t_stop;
    if (!reflinked) {
        log_sandbox_warning(vm_sandbox_id(vm), "snapshot %s: no reflink support, copied the disk",
                            id);
    }

    /* The commit: every file and the directory durable, then the rename. */
    step = "sync the snapshot";
    r = fsync_path(path, O_RDONLY);
    if (r < 0) {
        goto fail;
    }
    /* The guest agent's token at this instant (it is in the vmstate's memory too): a sandbox
     * created from the snapshot proves it to that agent to set its own (vm.c, branch). */
    if (full && vm->rec.access_token[0]) {
        step = "write the agent token";
        snprintf(path, sizeof(path), "%s/" DISK_SNAPSHOT_TOKEN_FILE, tmp);
        r = write_file_atomic(path, vm->rec.access_token, strlen(vm->rec.access_token));
        if (r < 0) {
            goto fail;
        }
    }
    step = "write meta.json";
    meta = meta_build(vm, id, full, quiesced, tmp, created, paused / 1000.0, &r);
    if (meta) {
        char *text = json_dumps(meta, JSON_INDENT(2));
        snprintf(path, sizeof(path), "%s/meta.json", tmp);
        r = text ? write_file_atomic(path, text, strlen(text)) : -ENOMEM;
        free(text);
    }
    if (r >= 0) {
        r = fsync_path(tmp, O_RDONLY | O_DIRECTORY);
    }
    if (r < 0) {
        goto fail;
    }
    step = "publish the snapshot";
    r = rename(tmp, final) < 0 ? -errno : 0;
    if (r >= 0) {
        r = fsync_path(root, O_RDONLY | O_DIRECTORY);
    }
    if (r < 0) {
        goto fail;
    }
    *ret_meta = meta;
    return 0;
fail:
    if (stopped) {
        (void)runtime_resume(vm->rt);
    }
    json_decref(meta);
    (void)rm_rf(tmp);
    if (ret_error) {
        free(*ret_error);
        if (asprintf(ret_error, "%s failed: %s", step, strerror(-r)) < 0) {
            *ret_error = NULL;
        }
    }
    return r;
}

int disk_snapshot_read(const struct vm_host *host, const char *id, json_t **ret)
{
    char dir[PATH_MAX], path[PATH_MAX + 16], *text = NULL;
    json_error_t err;
    int r = disk_snapshot_dir(host, id, dir, sizeof(dir));

    *ret = NULL;
    if (r < 0) {
        return r == -EINVAL ? -ENOENT : r;
    }
    snprintf(path, sizeof(path), "%s/meta.json", dir);
    r = read_file(path, META_MAX, &text, NULL);
    if (r < 0) {
        return r;
    }
    json_t *m = json_loads(text, 0, &err);
    free(text);
    const char *fmt = json_string_value(json_object_get(m, "format"));
    const char *mid = json_string_value(json_object_get(m, "id"));
    if (!json_is_object(m) || !fmt || strcmp(fmt, DISK_SNAPSHOT_FORMAT) != 0 || !mid ||
        strcmp(mid, id) != 0) {
        json_decref(m);
        return -EBADMSG;
    }
    *ret = m;
    return 0;
}

static int by_created(const void *a, const void *b)
{
    json_t *const *x = a, *const *y = b;
    const char *cx = json_string_value(json_object_get(*x, "created_at"));
    const char *cy = json_string_value(json_object_get(*y, "created_at"));
    int c = strcmp(cx ? cx : "", cy ? cy : "");
    return c ? c
             : strcmp(json_string_value(json_object_get(*x, "id")),
                      json_string_value(json_object_get(*y, "id")));
}

int disk_snapshot_list(const struct vm_host *host, const char *sandbox_id, json_t **ret)
{
    char root[PATH_MAX];
    json_t **items = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    DIR *d;
    int r = snapshots_root(host, root, sizeof(root));

    *ret = NULL;
    if (r < 0) {
        return r;
    }
    d = opendir(root);
    if (!d && errno != ENOENT) {
        return -errno;
    }
    while (d && (de = readdir(d))) {
        json_t *m = NULL;
        /* Only committed snapshots: a .new or .del is never a valid id. */
        if (!sandbox_id_is_valid(de->d_name) || disk_snapshot_read(host, de->d_name, &m) < 0) {
            continue;
        }
        const char *sb = json_string_value(json_object_get(m, "sandbox_id"));
        if (sandbox_id && (!sb || strcmp(sb, sandbox_id) != 0)) {
            json_decref(m);
            continue;
        }
        if (n == cap) {
            json_t **p = realloc(items, (cap = cap ? cap * 2 : 16) * sizeof(*items));
            if (!p) {
                json_decref(m);
                r = -ENOMEM;
                break;
            }
            items = p;
        }
        items[n++] = m;
    }
    if (d) {
        closedir(d);
    }
    if (n) {
        qsort(items, n, sizeof(*items), by_created);
    }
    json_t *list = r >= 0 ? json_array() : NULL;
    for (size_t i = 0; i < n; i++) {
        if (list) {
            json_array_append(list, items[i]);
        }
        json_decref(items[i]);
    }
    free(items);
    if (r >= 0 && !list) {
        r = -ENOMEM;
    }
    *ret = list;
    return r;
}

int disk_snapshot_delete(const struct vm_host *host, const char *id)
{
    char dir[PATH_MAX], del[PATH_MAX + 16], root[PATH_MAX];
    int r = disk_snapshot_dir(host, id, dir, sizeof(dir));

    if (r < 0) {
        return r == -EINVAL ? -ENOENT : r;
    }
    r = snapshots_root(host, root, sizeof(root));
    if (r < 0) {
        return r;
    }
    snprintf(del, sizeof(del), "%s.del", dir);
    (void)rm_rf(del);
    if (rename(dir, del) < 0) {
        return -errno;
    }
    (void)fsync_path(root, O_RDONLY | O_DIRECTORY);
    return rm_rf(del);
}

void disk_snapshot_sweep(const struct vm_host *host)
{
    char root[PATH_MAX], path[PATH_MAX + 300];
    struct dirent *de;
    DIR *d;

    if (snapshots_root(host, root, sizeof(root)) < 0 || !(d = opendir(root))) {
        return;
    }
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len > 4 && (strcmp(de->d_name + len - 4, ".new") == 0 ||
                        strcmp(de->d_name + len - 4, ".del") == 0)) {
            snprintf(path, sizeof(path), "%s/%s", root, de->d_name);
            log_info("snapshots: removing '%s' (left by a crash)", path);
            (void)rm_rf(path);
        }
    }
    closedir(d);
}

int disk_snapshot_rollback(const struct vm_host *host, const struct vm *vm, const char *id,
                           struct vm_restore_result *ret, bool *ret_lost)
{
    struct instance_record rec = vm->rec; /* this job's copy: the loop owns vm->rec */
    char sdir[PATH_MAX], src[PATH_MAX + 32], next[PATH_MAX + 32], *body = NULL;
    struct runtime_config cfg;
    struct vm_paths p = { .dir = "" };
    struct runtime_vm *rt = NULL;
    const char *step = "prepare";
    json_t *meta = NULL;
    bool full = false, reflinked = false;
    usec_t t0 = now_monotonic();
    int r;

    *ret = (struct vm_restore_result){ 0 };
    *ret_lost = false;
    if (!vm->rt) {
        return -ENOENT;
    }
    r = disk_snapshot_read(host, id, &meta);
    if (r >= 0) {
        const char *sb = json_string_value(json_object_get(meta, "sandbox_id"));
        const char *kind = json_string_value(json_object_get(meta, "kind"));
        full = kind && strcmp(kind, "full") == 0;
        if (!sb || strcmp(sb, rec.sandbox_id) != 0) {
            step = "check the snapshot";
            r = -EXDEV; /* another sandbox's: a branch, not a rollback */
        }
    }
    json_decref(meta);
    if (r >= 0) {
        r = disk_snapshot_dir(host, id, sdir, sizeof(sdir));
    }
    if (r >= 0) {
        r = vm_runtime_config(host, &rec, true, &p, &cfg);
    }
    if (r < 0) {
        goto fail;
    }
    /* Cloned while the guest still runs: until the stop below, nothing has changed. */
    step = "clone the snapshot's disk";
    snprintf(src, sizeof(src), "%s/rootfs.ext4", sdir);
    snprintf(next, sizeof(next), "%s/rootfs.rollback", p.dir);
    (void)unlink(next);
    r = clone_file(src, next, &reflinked);
    if (r >= 0) {
        r = fsync_path(next, O_RDONLY);
    }
    if (r < 0) {
        goto fail;
    }

    step = "stop the vmm";
    r = runtime_stop(vm->rt);
    if (r < 0) {
        goto fail;
    }
    *ret_lost = true; /* from here on there is no way back to the guest as it was */
    step = "replace the disk";
    r = rename(next, p.rootfs) < 0 ? -errno : 0;
    if (r >= 0) {
        r = fsync_path(p.dir, O_RDONLY | O_DIRECTORY);
    }
    if (r < 0) {
        goto fail;
    }
    r = netslot_create(rec.iid, rec.net_bps); /* kept; idempotent */
    if (r < 0) {
        step = "create network";
        goto fail;
    }
    if (full) {
        /* The vmstate carries the guest's RAM (as a suspend's does). */
        cfg.memory = RUNTIME_MEMORY_ANONYMOUS;
        cfg.memory_fd = -EBADF;
        step = "restore vmm";
        r = runtime_restore(host->runtime, &cfg, sdir, &rt);
    } else {
        cfg.memory = RUNTIME_MEMORY_ANONYMOUS;
        cfg.memory_fd = -EBADF;
        step = "start vmm";
        r = runtime_boot(host->runtime, &cfg, &rt);
    }
    if (r < 0) {
        goto fail;
    }
    ret->timing.vmm = now_monotonic() - t0;
    rec.pid = runtime_pid(rt);
    r = runtime_process_start_time(rec.pid, &rec.pid_start_time);
    if (r >= 0) {
        step = "save instance record";
        r = vm_save_record(host, &rec);
    }
    if (r >= 0 && full) {
        step = "resume";
        r = runtime_resume(rt);
    }
    if (r >= 0) {
        step = "wait for agent";
        r = vm_wait_ready(host, rt);
    }
    if (r < 0) {
        goto fail;
    }
    /* A full snapshot's guest knows who it is and only missed the time; a booted one is
     * re-identified as at create (the same identity: this sandbox). */
    step = "initialise agent";
    body = full ? vm_clock_init_body(&rec, now_realtime()) : vm_identity_json(vm);
    r = body ? vm_agent_init(rt, body, &ret->error) : -ENOMEM;
    free(body);
    if (r < 0) {
        goto fail;
    }
    rec.state = VM_RUNNING;
    r = vm_save_record(host, &rec);
    if (r < 0) {
        step = "save state";
        goto fail;
    }
    ret->timing.total = now_monotonic() - t0;
    ret->timing.restored = full;
    ret->rt = rt;
    ret->pid = rec.pid;
    ret->pid_start_time = rec.pid_start_time;
    return 0;
fail:;
    char *why = ret->error;
    ret->error = NULL;
    if (asprintf(&ret->error, "%s failed: %s", step, why ? why : strerror(-r)) < 0) {
        ret->error = NULL;
    }
    free(why);
    if (rt) {
        (void)runtime_stop(rt);
        runtime_vm_free(rt);
    }
    if (!*ret_lost) {
        (void)unlink(next);
    }
    return r;
}
