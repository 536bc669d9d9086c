/*
 * Thin wrappers over struct runtime_ops (sqlite os.c style) plus the
 * runtime registry. Each runtime_vm starts with a pointer to its ops, so the
 * wrappers dispatch without the caller ever touching the table.
 */
#include "node/runtime.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/fileio.h"
#include "basic/macro.h"

static const struct runtime_ops *const runtimes[] = { &runtime_qemu_ops };

static const char *const accel_names[] = {
    [RUNTIME_ACCEL_AUTO] = "auto",
    [RUNTIME_ACCEL_KVM] = "kvm",
    [RUNTIME_ACCEL_TCG] = "tcg",
};

const char *runtime_accel_to_string(enum runtime_accel a)
{
    return a < ARRAY_SIZE(accel_names) ? accel_names[a] : "unknown";
}

int runtime_accel_from_string(const char *s)
{
    for (size_t i = 0; i < ARRAY_SIZE(accel_names); i++) {
        if (strcmp(s, accel_names[i]) == 0) {
            return (int)i;
        }
    }
    return -EINVAL;
}

const struct runtime_ops *runtime_find(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(runtimes); i++) {
        if (strcmp(runtimes[i]->name, name) == 0) {
            return runtimes[i];
        }
    }
    return NULL;
}

int runtime_boot(const struct runtime_ops *ops, const struct runtime_config *cfg,
                 struct runtime_vm **ret)
{
    return ops->boot(cfg, ret);
}

int runtime_attach(const struct runtime_ops *ops, const struct runtime_config *cfg,
                   struct runtime_vm **ret)
{
    return ops->attach(cfg, ret);
}

int runtime_pause(struct runtime_vm *vm)
{
    return vm->ops->pause(vm);
}

int runtime_resume(struct runtime_vm *vm)
{
    return vm->ops->resume(vm);
}

int runtime_snapshot(struct runtime_vm *vm, const char *dir)
{
    return vm->ops->snapshot(vm, dir);
}

int runtime_restore(const struct runtime_ops *ops, const struct runtime_config *cfg,
                    const char *dir, struct runtime_vm **ret)
{
    return ops->restore(cfg, dir, ret);
}

int runtime_stop(struct runtime_vm *vm)
{
    return vm->ops->stop(vm);
}

int runtime_connect(struct runtime_vm *vm, uint16_t port, usec_t timeout, int *ret_fd)
{
    return vm->ops->connect(vm, port, timeout, ret_fd);
}

bool runtime_alive(struct runtime_vm *vm)
{
    return vm->ops->alive(vm);
}

pid_t runtime_pid(struct runtime_vm *vm)
{
    return vm->ops->pid(vm);
}

int runtime_exit_status(struct runtime_vm *vm, int *ret_status)
{
    return vm->ops->exit_status(vm, ret_status);
}

struct runtime_vm *runtime_vm_free(struct runtime_vm *vm)
{
    if (vm) {
        vm->ops->free(vm);
    }
    return NULL;
}

int runtime_process_start_time(pid_t pid, uint64_t *ret)
{
    char path[64], *text = NULL;
    unsigned long long start = 0;
    int r;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    r = read_file(path, 4096, &text, NULL);
    if (r < 0) {
        return r;
    }
    /* comm (field 2) may contain spaces and parens: count fields after the last ')'. */
    char *p = strrchr(text, ')');
    int field = 2;
    for (; p && *p && field < 22; p++) {
        if (*p == ' ') {
            field++;
        }
    }
    r = p && field == 22 && sscanf(p, "%llu", &start) == 1 && start > 0 ? 0 : -EPROTO;
    free(text);
    if (r == 0) {
        *ret = start;
    }
    return r;
}
