#pragma once
/*
 * The runtime seam (architecture.md "Runtimes", style.md R16): how a VMM is
 * driven. Callers use the runtime_*() wrappers, never the ops table. Every
 * verb is blocking and is called from a worker thread, never from the event
 * loop. Verbs a runtime cannot do return -EOPNOTSUPP.
 *
 * Implementations: runtime-qemu.c (QEMU microvm over QMP, KVM or TCG).
 * Firecracker comes later behind the same ops.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "basic/time-util.h"

struct runtime_ops;

/* Every runtime's VM handle embeds this as its first member. */
struct runtime_vm {
    const struct runtime_ops *ops;
};

enum runtime_accel { RUNTIME_ACCEL_AUTO, RUNTIME_ACCEL_KVM, RUNTIME_ACCEL_TCG };

/*
 * Where guest RAM lives (architecture.md "Fast create"). QEMU never opens a
 * host path for it: the runtime hands it a memfd.
 *   ANONYMOUS  ordinary private RAM; a snapshot carries it in dir/vmstate.
 *   SHARED     a fresh memfd mapped shared; a snapshot writes it to dir/memory
 *              and leaves it out of dir/vmstate (x-ignore-shared). For template
 *              snapshots: the VM must never run again after its snapshot.
 *   PRIVATE    a copy-on-write (MAP_PRIVATE) mapping of cfg->memory_fd, a
 *              sealed memfd holding a template snapshot's dir/memory
 *              (snapshot_memory_fd()): restores of one snapshot share its pages
 *              until they write them.
 */
enum runtime_memory { RUNTIME_MEMORY_ANONYMOUS, RUNTIME_MEMORY_SHARED, RUNTIME_MEMORY_PRIVATE };

/* QEMU's TCG translation buffer (-accel tcg,tb-size=), MiB. QEMU's own default is 1 GiB
 * per VM, which many small guests cannot afford; docs/performance.md "Fast create" has
 * the measurement behind this value. */
#define RUNTIME_TB_SIZE_DEFAULT_MIB 64

const char *runtime_accel_to_string(enum runtime_accel a);
int runtime_accel_from_string(const char *s);

/* Everything a runtime needs to boot one sandbox. Strings are borrowed for the call. */
struct runtime_config {
    const char *id;         /* validated sandbox id */
    const char *dir;        /* the sandbox's private directory (sockets, logs, pidfile) */
    const char *kernel;     /* uncompressed vmlinux (PVH) */
    const char *initrd;     /* NULL for our own kernel; Debian's fallback kernel needs its
                               module initramfs and ACPI to find the virtio-mmio devices */
    const char *rootfs;     /* this sandbox's copy-on-write disk */
    const char *netns_path; /* /run/netns/... the VMM joins; its tap is `tap` */
    const char *tap;
    const char *mac;
    const char *guest_ip;    /* the agent's address, reachable only inside netns */
    const char *kernel_args; /* appended to the runtime's own command line */
    unsigned vcpus;
    unsigned memory_mib;
    size_t console_log_max;   /* cap of console.log in bytes; 0: CONSOLE_LOG_MAX_DEFAULT */
    enum runtime_accel accel; /* resolved: KVM or TCG, never AUTO */
    enum runtime_memory memory;
    int memory_fd;        /* PRIVATE only: the image to map (borrowed; QEMU reopens it) */
    unsigned tb_size_mib; /* TCG only; 0: RUNTIME_TB_SIZE_DEFAULT_MIB */
    /* Block throttling of the disk (bytes/s and requests/s, reads plus writes; 0: none):
     * one guest's I/O flood must not take the host disk from its neighbours. */
    uint64_t disk_bps;
    uint32_t disk_iops;
    /* attach() only: the VMM the instance record names (0: fall back to the runtime's
     * own pidfile, for a crash before the record had it). */
    pid_t pid;
    uint64_t pid_start_time;
};

struct runtime_ops {
    const char *name;
    /* Starts the VM; returns once the VMM is up (not the guest). */
    int (*boot)(const struct runtime_config *cfg, struct runtime_vm **ret);
    /* Re-attaches to a VM a previous node process started (after a crash): the process
     * must be cfg->pid with start time cfg->pid_start_time, never a recycled pid. */
    int (*attach)(const struct runtime_config *cfg, struct runtime_vm **ret);
    int (*pause)(struct runtime_vm *vm);
    int (*resume)(struct runtime_vm *vm);
    /* vm must be paused. Writes dir/vmstate (and dir/memory for SHARED RAM), each fsync'd,
     * and fsyncs dir: 0 only when the snapshot is durable. The VM stays paused. */
    int (*snapshot)(struct runtime_vm *vm, const char *dir);
    /* Starts a fresh VMM from dir (a snapshot() of a VM with the same vcpus, memory size
     * and devices) and returns with it loaded and paused: the caller attaches whatever
     * it needs, resumes and re-identifies the guest. A dir/memory snapshot needs
     * cfg->memory PRIVATE, one without needs ANONYMOUS. */
    int (*restore)(const struct runtime_config *cfg, const char *dir, struct runtime_vm **ret);
    /* Stops the VMM for good and waits until its process is gone. */
    int (*stop)(struct runtime_vm *vm);
    /* Opens a TCP connection to a guest port over the sandbox's private link. */
    int (*connect)(struct runtime_vm *vm, uint16_t port, usec_t timeout, int *ret_fd);
    /* True while the VMM process exists. */
    bool (*alive)(struct runtime_vm *vm);
    pid_t (*pid)(struct runtime_vm *vm);
    /* Collects the wait status of a VMM that exited: 0, -ECHILD (not our child: started
     * by a previous node process, or reaped already), -EAGAIN (still running). */
    int (*exit_status)(struct runtime_vm *vm, int *ret_status);
    void (*free)(struct runtime_vm *vm);
};

extern const struct runtime_ops runtime_qemu_ops;

/* Returns the runtime called name, or NULL. */
const struct runtime_ops *runtime_find(const char *name);

int runtime_boot(const struct runtime_ops *ops, const struct runtime_config *cfg,
                 struct runtime_vm **ret);
int runtime_attach(const struct runtime_ops *ops, const struct runtime_config *cfg,
                   struct runtime_vm **ret);
int runtime_pause(struct runtime_vm *vm);
int runtime_resume(struct runtime_vm *vm);
int runtime_snapshot(struct runtime_vm *vm, const char *dir);
int runtime_restore(const struct runtime_ops *ops, const struct runtime_config *cfg,
                    const char *dir, struct runtime_vm **ret);
int runtime_stop(struct runtime_vm *vm);
int runtime_connect(struct runtime_vm *vm, uint16_t port, usec_t timeout, int *ret_fd);
bool runtime_alive(struct runtime_vm *vm);
pid_t runtime_pid(struct runtime_vm *vm);
int runtime_exit_status(struct runtime_vm *vm, int *ret_status);
/* Start time of pid from /proc/<pid>/stat (field 22, clock ticks since boot), or -errno.
 * With the pid it identifies a process for good: a recycled pid has a later start time. */
int runtime_process_start_time(pid_t pid, uint64_t *ret);
/* NULL-safe; returns NULL. Does not stop the VM. */
struct runtime_vm *runtime_vm_free(struct runtime_vm *vm);

/*
 * Decides KVM or TCG once per node start: KVM only when /dev/kvm exists and a
 * probe boot of `kernel` under KVM gets past early boot (hosts whose KVM can
 * only run paravirtualised guests fail the probe). The result is logged by
 * the caller. `want` other than AUTO forces the answer without probing.
 */
enum runtime_accel runtime_detect_accel(enum runtime_accel want, const char *kernel);
