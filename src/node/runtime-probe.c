/*
 * runtime-probe: a test-only driver of the runtime's snapshot primitives on a
 * real VM, without a node daemon (tests/vm/test_snapshot_restore.py). Not
 * installed.
 *
 *   runtime-probe suspend-restore DATA_DIR TEMPLATE
 *
 * Cold-boots a sandbox of TEMPLATE under DATA_DIR (which holds
 * templates/TEMPLATE), writes a file to its disk and starts a process that
 * counts in RAM (/dev/shm), pauses, snapshots (anonymous RAM: the whole of it
 * goes into vmstate), stops the VMM, restores into a fresh VMM, forgets that
 * handle and re-attaches by pid and start time (what a restarted node does),
 * resumes, and reads the file and the counter back. Prints one JSON object;
 * removes everything it made, on every path.
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/log.h"
#include "basic/time-util.h"
#include "node/runtime.h"
#include "node/vm.h"

static int sh(const struct vm_host *host, const struct vm *vm, const char *script, char **out)
{
    const char *args[] = { "-c", script, NULL };
    const char *env[] = { NULL };
    struct vm_exec_request req = {
        .cmd = "/bin/sh",
        .args = args,
        .env = env,
        .user = "root",
        .timeout_ms = 60000,
    };
    struct vm_exec_result res;
    int r = vm_exec(host, vm, &req, &res);
    if (r >= 0 && (!res.exited || res.exit_code != 0)) {
        fprintf(stderr, "runtime-probe: '%s' failed: %s %.*s\n", script,
                res.status ? res.status : "", (int)res.err_len, res.err ? res.err : "");
        r = -EIO;
    }
    if (r >= 0 && out) {
        *out = strndup(res.out ? res.out : "", res.out_len);
        r = *out ? 0 : -ENOMEM;
    }
    vm_exec_result_release(&res);
    return r;
}

static double ms_since(usec_t t)
{
    return (double)(now_monotonic() - t) / 1000.0;
}

static int suspend_restore(const char *data_dir, const char *template)
{
    struct vm_host host = {
        .data_dir = data_dir,
        .runtime = runtime_find("qemu"),
        .accel = RUNTIME_ACCEL_TCG,
        .ready_timeout = 180 * USEC_PER_SEC,
        .max_exec_timeout = 60 * USEC_PER_SEC,
    };
    struct vm_create_result created;
    struct runtime_config cfg;
    struct vm_paths p;
    struct vm *vm = NULL;
    struct runtime_vm *rt = NULL;
    char snapdir[PATH_MAX + 16], *before = NULL, *after = NULL, *later = NULL;
    json_t *out = json_object();
    usec_t t;
    int r;

    r = vm_new(template, 1, 512, &vm);
    if (r < 0) {
        goto out;
    }
    r = vm_create(&host, vm, &created);
    if (r < 0) {
        fprintf(stderr, "runtime-probe: create: %s\n", created.error ? created.error : "");
        free(created.error);
        goto out;
    }
    vm->rt = created.rt;
    vm->rec.pid = created.pid;
    vm->rec.pid_start_time = created.pid_start_time;
    r = sh(&host, vm,
           "echo on-disk > /root/probe.txt && sync && "
           "setsid sh -c 'echo $$ > /dev/shm/pid; i=0; while :; do i=$((i+1)); "
           "echo $i > /dev/shm/count; sleep 0.05; done' </dev/null >/dev/null 2>&1 & "
           "while [ ! -s /dev/shm/count ]; do sleep 0.05; done; sleep 0.3; "
           "echo $(cat /dev/shm/pid) $(cat /dev/shm/count)",
           &before);
    if (r < 0) {
        goto out;
    }

    r = vm_runtime_config(&host, &vm->rec, true, &p, &cfg);
    if (r < 0) {
        goto out;
    }
    snprintf(snapdir, sizeof(snapdir), "%s/snapshot", p.dir);
    if (mkdir(snapdir, 0700) < 0) {
        r = -errno;
        goto out;
    }
    t = now_monotonic();
    r = runtime_pause(vm->rt);
    if (r >= 0) {
        r = runtime_snapshot(vm->rt, snapdir);
    }
    if (r < 0) {
        fprintf(stderr, "runtime-probe: snapshot: %s\n", strerror(-r));
        goto out;
    }
    json_object_set_new(out, "snapshot_ms", json_real(ms_since(t)));
    /* A second snapshot of a running VM is refused: the caller pauses first. */
    r = runtime_resume(vm->rt);
    json_object_set_new(out, "resume_after_snapshot", json_integer(r));
    if (r >= 0) {
        int k = runtime_snapshot(vm->rt, snapdir);
        json_object_set_new(out, "snapshot_running", json_string(strerror(-k)));
    }
    (void)runtime_stop(vm->rt);
    vm->rt = runtime_vm_free(vm->rt);
    struct stat st;
    char state[PATH_MAX + 32];
    snprintf(state, sizeof(state), "%s/vmstate", snapdir);
    if (stat(state, &st) == 0) {
        json_object_set_new(out, "vmstate_bytes", json_integer(st.st_size));
    }

    /* A restore with the wrong memory mode is refused, not started. */
    struct runtime_config wrong = cfg;
    wrong.memory = RUNTIME_MEMORY_PRIVATE;
    wrong.memory_fd = -1;
    json_object_set_new(
        out, "restore_wrong_memory",
        json_string(strerror(-runtime_restore(host.runtime, &wrong, snapdir, &rt))));

    t = now_monotonic();
    r = runtime_restore(host.runtime, &cfg, snapdir, &rt);
    if (r < 0) {
        fprintf(stderr, "runtime-probe: restore: %s\n", strerror(-r));
        goto out;
    }
    json_object_set_new(out, "restore_ms", json_real(ms_since(t)));
    /* What a node that crashed after the restore does: find the VMM by pid + start time. */
    cfg.pid = runtime_pid(rt);
    r = runtime_process_start_time(cfg.pid, &cfg.pid_start_time);
    rt = runtime_vm_free(rt);
    if (r >= 0) {
        r = runtime_attach(host.runtime, &cfg, &vm->rt);
    }
    if (r < 0) {
        goto out;
    }
    vm->rec.pid = cfg.pid;
    vm->rec.pid_start_time = cfg.pid_start_time;
    t = now_monotonic();
    r = runtime_resume(vm->rt);
    if (r >= 0) {
        r = sh(&host, vm, "cat /root/probe.txt; echo $(cat /dev/shm/pid) $(cat /dev/shm/count)",
               &after);
    }
    if (r < 0) {
        goto out;
    }
    json_object_set_new(out, "resume_to_exec_ms", json_real(ms_since(t)));
    r = sh(
        &host, vm,
        "sleep 0.5; kill -0 $(cat /dev/shm/pid) && echo $(cat /dev/shm/pid) $(cat /dev/shm/count)",
        &later);
    if (r < 0) {
        goto out;
    }
    json_object_set_new(out, "iid", json_string(vm->rec.iid));
    json_object_set_new(out, "before", json_string(before));
    json_object_set_new(out, "after", json_string(after));
    json_object_set_new(out, "later", json_string(later));
    char *text = json_dumps(out, JSON_COMPACT);
    if (text) {
        puts(text);
        free(text);
    }
out:
    if (vm) {
        if (vm->rt) {
            (void)runtime_stop(vm->rt);
            vm->rt = runtime_vm_free(vm->rt);
        }
        (void)vm_destroy(&host, vm);
        vm_free(vm);
    }
    free(before);
    free(after);
    free(later);
    json_decref(out);
    return r;
}

int main(int argc, char **argv)
{
    log_set_ident("runtime-probe");
    signal(SIGPIPE, SIG_IGN);
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1);
    if (argc == 4 && strcmp(argv[1], "suspend-restore") == 0) {
        int r = suspend_restore(argv[2], argv[3]);
        if (r < 0) {
            fprintf(stderr, "runtime-probe: %s\n", strerror(-r));
        }
        return r < 0 ? 1 : 0;
    }
    fprintf(stderr, "usage: runtime-probe suspend-restore DATA_DIR TEMPLATE\n");
    return 2;
}
