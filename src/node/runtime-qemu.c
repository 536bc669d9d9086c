/*
 * The `qemu` runtime: QEMU's microvm machine booting our PVH vmlinux with
 * virtio-mmio devices given on the kernel command line (acpi=off), driven
 * over QMP. KVM where it can run an ordinary guest, TCG otherwise
 * (runtime_detect_accel()).
 *
 QEMU is our direct child, in its own session (so a signal to the CLI's
 * process group cannot reach it); boot() returns once its QMP socket answers,
 * or fails with QEMU's own error in qemu.log. We do not use -daemonize: its
 * intermediate process would become an unreaped zombie of ours. QEMU
 * survives a crash of space-node, and a restarted node re-attaches by the
 * pid and start time in the instance record (attach(); qemu.pid holds the
 * same for a crash before the record had them). We hold a pidfd, never a
 * bare pid, so a recycled pid can never be signalled.
 *
 * Per sandbox dir: qemu.pid, qmp.sock, qmp-held.sock (the node's own monitor for a pause
 * and its resume: struct qemu_vm's held), console.log (serial), qemu.log (stderr).
 *
 * QEMU is confined (architecture.md "QEMU confined"): its own seccomp
 * filter (-sandbox), and it runs as its netns slot's uid with no
 * capabilities and no_new_privs. It opens no host path of ours: the node
 * opens every file, attaches the tap and binds the QMP socket, and passes
 * descriptors (struct qemu_fds). The serial port goes to the console pump
 * (console.h), which keeps console.log capped.
 */
#include "node/runtime.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <grp.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/fileio.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "node/console.h"
#include "node/jail.h"
#include "node/netns.h"
#include "node/netslot.h"
#include "node/qmp.h"
#include "shared/http-client.h"
#include "shared/spawn.h"

#define QMP_TIMEOUT (5 * USEC_PER_SEC)
#define QEMU_BINARY "qemu-system-x86_64"

struct qemu_vm {
    struct runtime_vm base;
    pid_t pid;
    pid_t console_pid; /* the console pump (console.h), when this process started it */
    int pidfd;
    char dir[PATH_MAX];
    char netns_path[PATH_MAX];
    char guest_ip[INET_ADDRSTRLEN];
    enum runtime_memory memory;
    int memory_fd;         /* SHARED: the memfd QEMU maps, which snapshot() writes out */
    uint64_t memory_bytes; /* guest RAM size */
    /*
     * A negotiated QMP connection to qmp-held.sock, kept from a pause to the resume after
     * it: the resume is then one round trip (`cont`) instead of a connect, a greeting and a
     * capabilities negotiation first. A warm-pool bind is such a resume, on the create's
     * critical path (docs/performance.md "Warm pool"). Held only while the vCPUs are
     * stopped, so the guest cannot pile events up unread on it; a monitor of its own, so
     * qmp.sock stays free for snapshots and a person's own QMP client (QEMU serves one client
     * per monitor). Handed over with atomic exchanges (held_take(), held_put()).
     */
    struct qmp *held;
};

static int path_in(char *buf, size_t n, const char *dir, const char *name)
{
    return snprintf(buf, n, "%s/%s", dir, name) >= (int)n ? -ENAMETOOLONG : 0;
}

/* Host TSC frequency in kHz, for tsc_early_khz= under TCG (guest-on-this-machine.md §1). */
static unsigned long host_tsc_khz(void)
{
    char *text = NULL;
    unsigned long khz = 0;

    if (read_file("/proc/cpuinfo", 1 << 20, &text, NULL) < 0) {
        return 0;
    }
    char *p = strstr(text, "cpu MHz");
    if (p && (p = strchr(p, ':'))) {
        unsigned long mhz = 0, frac = 0;
        if (sscanf(p + 1, " %lu.%3lu", &mhz, &frac) >= 1) {
            khz = mhz * 1000 + frac;
        }
    }
    free(text);
    return khz;
}

static int qemu_vm_new(const struct runtime_config *cfg, struct qemu_vm **ret)
{
    struct qemu_vm *vm = calloc(1, sizeof(*vm));
    if (!vm) {
        return -ENOMEM;
    }
    vm->base.ops = &runtime_qemu_ops;
    vm->pidfd = -EBADF;
    vm->memory_fd = -EBADF;
    vm->memory = cfg->memory;
    vm->memory_bytes = (uint64_t)cfg->memory_mib << 20;
    if (snprintf(vm->dir, sizeof(vm->dir), "%s", cfg->dir) >= (int)sizeof(vm->dir) ||
        snprintf(vm->netns_path, sizeof(vm->netns_path), "%s", cfg->netns_path) >=
            (int)sizeof(vm->netns_path) ||
        snprintf(vm->guest_ip, sizeof(vm->guest_ip), "%s", cfg->guest_ip) >=
            (int)sizeof(vm->guest_ip)) {
        free(vm);
        return -ENAMETOOLONG;
    }
    *ret = vm;
    return 0;
}

/*
 * Opens a pidfd on pid and checks that the process is the one that started at
 * start_time: a pid recycled since has a later start time. The check runs
 * after pidfd_open(), so the pidfd names exactly the process checked.
 */
static int qemu_vm_open_pid(struct qemu_vm *vm, pid_t pid, uint64_t start_time)
{
    uint64_t now_start = 0;
    int r;

    if (pid < 2 || start_time == 0) {
        return -EINVAL;
    }
    vm->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (vm->pidfd < 0) {
        return -errno;
    }
    r = runtime_process_start_time(pid, &now_start);
    if (r < 0 || now_start != start_time) {
        vm->pidfd = close_safe(vm->pidfd);
        return -ESRCH;
    }
    vm->pid = pid;
    return 0;
}

/* qemu.pid: "<pid> <start time>\n", written right after the spawn (boot()). */
static int qemu_read_pidfile(const char *dir, pid_t *ret_pid, uint64_t *ret_start)
{
    char path[PATH_MAX], *text = NULL;
    unsigned long long start = 0;
    int pid = 0;
    int r;

    r = path_in(path, sizeof(path), dir, "qemu.pid");
    if (r < 0) {
        return r;
    }
    r = read_file(path, 64, &text, NULL);
    if (r < 0) {
        return r;
    }
    r = sscanf(text, "%d %llu", &pid, &start) == 2 && pid > 1 && start > 0 ? 0 : -EINVAL;
    free(text);
    if (r == 0) {
        *ret_pid = pid;
        *ret_start = start;
    }
    return r;
}

static int qemu_stop(struct runtime_vm *base);
static bool qemu_alive(struct runtime_vm *base);
static void qemu_free(struct runtime_vm *base);
static bool wait_exit(int pidfd, usec_t timeout);

/* Waits until QEMU's QMP socket answers, or QEMU exits (then its error is in qemu.log). */
static int qemu_wait_qmp(struct qemu_vm *vm, const char *path)
{
    usec_t deadline = now_monotonic() + 10 * USEC_PER_SEC;

    for (;;) {
        struct qmp *q = NULL;
        if (access(path, F_OK) == 0 && qmp_open(path, QMP_TIMEOUT, &q) >= 0) {
            qmp_close(q);
            return 0;
        }
        if (wait_exit(vm->pidfd, 5 * USEC_PER_MSEC)) {
            return -EIO;
        }
        if (now_monotonic() >= deadline) {
            return -ETIMEDOUT;
        }
    }
}

/*
 * What QEMU gets as descriptors. It runs as its slot's uid with no
 * capabilities, so it can open nothing of ours by path (the sandbox and
 * template directories are root-only): the node opens every file and the
 * tap, binds the QMP socket, and passes them (-add-fd, fd=, /proc/self/fd).
 */
struct qemu_fds {
    int disk_rw, disk_ro; /* fdset 1: QEMU picks the access mode it needs */
    int console;          /* fdset 2 */
    int kernel, initrd;   /* read by path through /proc/self/fd/N */
    int tap;              /* -netdev tap,fd=N */
    int qmp;              /* listening socket, -chardev socket,fd=N */
    int qmp_held;         /* the same for qmp-held.sock */
};

static void qemu_fds_close(struct qemu_fds *f)
{
    f->disk_rw = close_safe(f->disk_rw);
    f->disk_ro = close_safe(f->disk_ro);
    f->console = close_safe(f->console);
    f->kernel = close_safe(f->kernel);
    f->initrd = close_safe(f->initrd);
    f->tap = close_safe(f->tap);
    f->qmp = close_safe(f->qmp);
    f->qmp_held = close_safe(f->qmp_held);
}

/* The tap is attached from inside the sandbox's netns: a tun fd belongs to the netns it was opened
 * in. */
static int open_tap(const char *netns_path, const char *name, int *ret)
{
    struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR };
    int saved, fd, r;

    if (strlen(name) >= sizeof(ifr.ifr_name)) {
        return -ENAMETOOLONG;
    }
    memcpy(ifr.ifr_name, name, strlen(name) + 1);
    r = netns_enter(netns_path, &saved);
    if (r < 0) {
        return r;
    }
    fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    r = fd < 0 ? -errno : NERRNO(ioctl(fd, TUNSETIFF, &ifr));
    netns_leave(saved);
    if (r < 0) {
        close_safe(fd);
        return r;
    }
    *ret = fd;
    return 0;
}

static int listen_unix(const char *path, int *ret)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd, r;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        return -ENAMETOOLONG;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    (void)unlink(path);
    r = NERRNO(bind(fd, (struct sockaddr *)&sa, sizeof(sa)));
    if (r >= 0) {
        r = NERRNO(listen(fd, 4));
    }
    if (r < 0) {
        close_safe(fd);
        return r;
    }
    *ret = fd;
    return 0;
}

/* Kernel and initrd are reopened by QEMU through /proc/self/fd, which checks the file's own mode.
 */
static int open_world_readable(const char *path, int *ret)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    if (fstat(fd, &st) < 0 || !(st.st_mode & S_IROTH)) {
        log_warning("'%s' must be readable by others for the unprivileged VMM", path);
        close_safe(fd);
        return -EACCES;
    }
    *ret = fd;
    return 0;
}

static int qemu_open_fds(const struct runtime_config *cfg, const char *qmp_path,
                         const char *held_path, struct qemu_fds *f)
{
    int r;

    f->disk_rw = open(cfg->rootfs, O_RDWR | O_CLOEXEC);
    f->disk_ro = open(cfg->rootfs, O_RDONLY | O_CLOEXEC);
    if (f->disk_rw < 0 || f->disk_ro < 0) {
        return -errno;
    }
    r = open_world_readable(cfg->kernel, &f->kernel);
    if (r >= 0 && cfg->initrd) {
        r = open_world_readable(cfg->initrd, &f->initrd);
    }
    if (r >= 0) {
        r = open_tap(cfg->netns_path, cfg->tap, &f->tap);
    }
    if (r >= 0) {
        r = listen_unix(qmp_path, &f->qmp);
    }
    if (r >= 0) {
        r = listen_unix(held_path, &f->qmp_held);
    }
    return r;
}

/*
 * uid = gid = NETSLOT_UID_BASE + the slot of the sandbox's netns (netslot.h),
 * found by the netns name rather than cfg->id: the slot belongs to the netns.
 */
static int qemu_identity(const struct runtime_config *cfg, uid_t *ret_uid, gid_t *ret_groups,
                         size_t *ret_n_groups)
{
    const char *name = strrchr(cfg->netns_path, '/');
    unsigned slot;
    int r;

    name = name ? name + 1 : cfg->netns_path;
    if (strncmp(name, NETSLOT_NETNS_PREFIX, strlen(NETSLOT_NETNS_PREFIX)) != 0) {
        return -EINVAL;
    }
    r = netslot_slot(name + strlen(NETSLOT_NETNS_PREFIX), &slot);
    if (r < 0) {
        return r;
    }
    *ret_uid = NETSLOT_UID_BASE + slot;
    *ret_n_groups = 0;
    if (cfg->accel == RUNTIME_ACCEL_KVM) {
        /* /dev/kvm is 0660 root:kvm; QEMU opens it by path. */
        struct group gr, *found = NULL;
        char buf[1024];
        if (getgrnam_r("kvm", &gr, buf, sizeof(buf), &found) == 0 && found) {
            ret_groups[(*ret_n_groups)++] = found->gr_gid;
        }
    }
    return 0;
}

/* The "-object memory-backend-*,id=ram0" of cfg (runtime.h enum runtime_memory). QEMU
 * reopens the memfd through /proc/self/fd: it can open no path of ours. */
static int qemu_memory_object(const struct runtime_config *cfg, struct qemu_vm *vm, int *ret_fd,
                              char *buf, size_t n)
{
    int fd = -EBADF;

    *ret_fd = -EBADF;
    switch (cfg->memory) {
    case RUNTIME_MEMORY_ANONYMOUS:
        snprintf(buf, n, "memory-backend-ram,id=ram0,size=%uM", cfg->memory_mib);
        return 0;
    case RUNTIME_MEMORY_SHARED:
        fd = memfd_create("space-guest-ram", MFD_CLOEXEC);
        if (fd < 0) {
            return -errno;
        }
        if (ftruncate(fd, (off_t)vm->memory_bytes) < 0) {
            int r = -errno;
            close_safe(fd);
            return r;
        }
        vm->memory_fd = fd;
        break;
    case RUNTIME_MEMORY_PRIVATE: {
        struct stat st;
        if (cfg->memory_fd < 3 || fstat(cfg->memory_fd, &st) < 0 ||
            (uint64_t)st.st_size != vm->memory_bytes) {
            return -EINVAL; /* not the image of a guest this size */
        }
        fd = cfg->memory_fd;
        break;
    }
    default:
        return -EINVAL;
    }
    snprintf(buf, n, "memory-backend-file,id=ram0,size=%uM,mem-path=/proc/self/fd/%d,share=%s",
             cfg->memory_mib, fd, cfg->memory == RUNTIME_MEMORY_SHARED ? "on" : "off");
    *ret_fd = fd;
    return 0;
}

/*
 * The root disk. No image locking: the clone is this VMM's alone, and the lock QEMU drops
 * when a snapshot's migration completes could not be taken back on `cont`. The throttling
 * is QEMU's block layer (leaky buckets whose burst defaults to a tenth of the rate): a
 * guest's reads and writes wait in its own VMM, so a flood from one sandbox cannot take the
 * host disk from the others (architecture.md "Runtimes"). Migration carries no block-layer
 * state, so a snapshot made with other limits (or none) restores under these.
 */
static void drive_option(const struct runtime_config *cfg, char *buf, size_t n)
{
    int k = snprintf(buf, n,
                     "id=root,file=/dev/fdset/1,format=raw,if=none,cache=unsafe,"
                     "file.locking=off");
    if (cfg->disk_bps > 0 && k > 0 && (size_t)k < n) {
        k += snprintf(buf + k, n - (size_t)k, ",throttling.bps-total=%llu",
                      (unsigned long long)cfg->disk_bps);
    }
    if (cfg->disk_iops > 0 && k > 0 && (size_t)k < n) {
        (void)snprintf(buf + k, n - (size_t)k, ",throttling.iops-total=%u", cfg->disk_iops);
    }
}

/*
 * The one place QEMU is started, for boot() and restore() alike (the jail
 * hooks in here). incoming_fd >= 0: QEMU waits, paused (-S), for a
 * migrate-incoming from that descriptor (restore()). Returns once QMP answers.
 */
static int qemu_spawn(const struct runtime_config *cfg, int incoming_fd, struct qemu_vm **ret)
{
    char machine[256], memory[32], smp[16], append[2048], pidtext[48], qmp_path[PATH_MAX],
        held_path[PATH_MAX], pidfile[PATH_MAX], console_path[PATH_MAX], logpath[PATH_MAX],
        chardev_qmp[64], chardev_held[64], netdev[128], netdevice[128], kernel[64], initrd[64],
        fd_disk_rw[PATH_MAX + 64], fd_disk_ro[PATH_MAX + 64], fd_console[PATH_MAX + 64], accel[64],
        ram[256], drive[256];
    struct qemu_fds f = { -EBADF, -EBADF, -EBADF, -EBADF, -EBADF, -EBADF, -EBADF, -EBADF };
    struct qemu_vm *vm = NULL;
    int netns_fd = -EBADF, log_fd = -EBADF, memory_fd = -EBADF;
    gid_t groups[1];
    size_t n_groups;
    uid_t uid;
    pid_t pid;
    int r;

    r = qemu_vm_new(cfg, &vm);
    if (r < 0) {
        return r;
    }
    r = qemu_identity(cfg, &uid, groups, &n_groups);
    if (r < 0) {
        goto fail;
    }
    r = qemu_memory_object(cfg, vm, &memory_fd, ram, sizeof(ram));
    if (r < 0) {
        goto fail;
    }
    unsigned long tsc = cfg->accel == RUNTIME_ACCEL_TCG ? host_tsc_khz() : 0;
    char tsc_args[96] = "";
    if (tsc > 0) {
        /* PIT calibration of the TSC is unreliable under TCG: tell the guest the rate. */
        snprintf(tsc_args, sizeof(tsc_args), " tsc_early_khz=%lu tsc=reliable", tsc);
    }
    /* Our kernel: microvm with acpi=off, QEMU appends virtio_mmio.device= entries itself.
     * Debian's fallback kernel (with an initrd) finds the devices through ACPI instead.
     * RAM is always the ram0 backend, so a snapshot's RAM block has the same name
     * whichever memory the restoring VM uses. */
    snprintf(machine, sizeof(machine),
             "microvm,x-option-roms=off,rtc=on,isa-serial=on,memory-backend=ram0%s",
             cfg->initrd ? "" : ",acpi=off");
    if (cfg->accel == RUNTIME_ACCEL_KVM) {
        snprintf(accel, sizeof(accel), "kvm");
    } else {
        snprintf(accel, sizeof(accel), "tcg,tb-size=%u",
                 cfg->tb_size_mib ? cfg->tb_size_mib : RUNTIME_TB_SIZE_DEFAULT_MIB);
    }
    snprintf(memory, sizeof(memory), "%u", cfg->memory_mib);
    snprintf(smp, sizeof(smp), "%u", cfg->vcpus);
    if (snprintf(append, sizeof(append),
                 "console=ttyS0 quiet reboot=k panic=-1 root=/dev/vda rw rootfstype=ext4 "
                 "init=/usr/local/sbin/space-agent%s %s",
                 tsc_args, cfg->kernel_args ? cfg->kernel_args : "") >= (int)sizeof(append) ||
        path_in(pidfile, sizeof(pidfile), cfg->dir, "qemu.pid") < 0 ||
        path_in(qmp_path, sizeof(qmp_path), cfg->dir, "qmp.sock") < 0 ||
        path_in(held_path, sizeof(held_path), cfg->dir, "qmp-held.sock") < 0 ||
        path_in(console_path, sizeof(console_path), cfg->dir, "console.log") < 0 ||
        path_in(logpath, sizeof(logpath), cfg->dir, "qemu.log") < 0) {
        r = -ENAMETOOLONG;
        goto fail;
    }
    r = qemu_open_fds(cfg, qmp_path, held_path, &f);
    if (r >= 0) {
        r = console_start(console_path,
                          cfg->console_log_max ? cfg->console_log_max : CONSOLE_LOG_MAX_DEFAULT,
                          uid, uid, &f.console, &vm->console_pid);
    }
    if (r < 0) {
        goto fail;
    }
    /* opaque= names each descriptor's file: for people, and it keeps the sandbox dir on the
     * command line, which attach() checks. */
    snprintf(fd_disk_rw, sizeof(fd_disk_rw), "fd=%d,set=1,opaque=%s", f.disk_rw, cfg->rootfs);
    snprintf(fd_disk_ro, sizeof(fd_disk_ro), "fd=%d,set=1,opaque=%s", f.disk_ro, cfg->rootfs);
    snprintf(fd_console, sizeof(fd_console), "fd=%d,set=2,opaque=%s", f.console, console_path);
    snprintf(kernel, sizeof(kernel), "/proc/self/fd/%d", f.kernel);
    snprintf(initrd, sizeof(initrd), "/proc/self/fd/%d", f.initrd);
    snprintf(chardev_qmp, sizeof(chardev_qmp), "socket,id=qmp,fd=%d,server=on,wait=off", f.qmp);
    snprintf(chardev_held, sizeof(chardev_held), "socket,id=qmpheld,fd=%d,server=on,wait=off",
             f.qmp_held);
    snprintf(netdev, sizeof(netdev), "tap,id=n0,fd=%d,vhost=off", f.tap);
    snprintf(netdevice, sizeof(netdevice), "virtio-net-device,netdev=n0,mac=%s", cfg->mac);
    drive_option(cfg, drive, sizeof(drive));

    const char *argv[64];
    size_t n = 0;
#define ARG(x) (argv[n++] = (x))
    ARG(QEMU_BINARY);
    ARG("-name");
    ARG(cfg->id);
    ARG("-M");
    ARG(machine);
    ARG("-accel");
    ARG(accel);
    ARG("-cpu");
    ARG(cfg->accel == RUNTIME_ACCEL_KVM ? "host" : "qemu64");
    ARG("-m");
    ARG(memory);
    ARG("-object");
    ARG(ram);
    ARG("-smp");
    ARG(smp);
    ARG("-nodefaults");
    ARG("-no-user-config");
    ARG("-display");
    ARG("none");
    ARG("-no-reboot");
    /* seccomp: no obsolete syscalls, no set*id, no fork/exec, no scheduler/affinity changes */
    ARG("-sandbox");
    ARG("on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
    ARG("-add-fd");
    ARG(fd_disk_rw);
    ARG("-add-fd");
    ARG(fd_disk_ro);
    ARG("-add-fd");
    ARG(fd_console);
    /* the console pump's pipe (console.h); append=on: QEMU must not try to truncate it */
    ARG("-chardev");
    ARG("file,id=ser0,path=/dev/fdset/2,append=on");
    ARG("-serial");
    ARG("chardev:ser0");
    ARG("-chardev");
    ARG(chardev_qmp);
    ARG("-mon");
    ARG("chardev=qmp,mode=control");
    ARG("-chardev");
    ARG(chardev_held);
    ARG("-mon");
    ARG("chardev=qmpheld,mode=control");
    ARG("-kernel");
    ARG(kernel);
    ARG("-append");
    ARG(append);
    ARG("-drive");
    ARG(drive);
    ARG("-device");
    ARG("virtio-blk-device,drive=root");
    ARG("-netdev");
    ARG(netdev);
    ARG("-device");
    ARG(netdevice);
    ARG("-device");
    ARG("virtio-rng-device");
    if (cfg->initrd) {
        ARG("-initrd");
        ARG(initrd);
    }
    if (incoming_fd >= 0) {
        /* The stream comes by migrate-incoming once the capabilities are set (restore()). */
        ARG("-incoming");
        ARG("defer");
        ARG("-S");
    }
    ARG(NULL);
#undef ARG
    assert(n <= ARRAY_SIZE(argv));
    int pass[10];
    size_t n_pass = 0;
    pass[n_pass++] = f.disk_rw;
    pass[n_pass++] = f.disk_ro;
    pass[n_pass++] = f.console;
    pass[n_pass++] = f.kernel;
    pass[n_pass++] = f.tap;
    pass[n_pass++] = f.qmp;
    pass[n_pass++] = f.qmp_held;
    if (cfg->initrd) {
        pass[n_pass++] = f.initrd;
    }
    if (memory_fd >= 0) {
        pass[n_pass++] = memory_fd;
    }
    if (incoming_fd >= 0) {
        pass[n_pass++] = incoming_fd;
    }

    netns_fd = open(cfg->netns_path, O_RDONLY | O_CLOEXEC);
    if (netns_fd < 0) {
        r = -errno;
        goto fail;
    }
    log_fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (log_fd < 0) {
        r = -errno;
        goto fail;
    }
    struct spawn_opts opts = {
        .argv = argv,
        .stdin_fd = -1,
        .stdout_fd = log_fd,
        .stderr_fd = log_fd,
        .netns_fd = netns_fd,
        .new_session = true,
        .pass_fds = pass,
        .n_pass_fds = n_pass,
        .drop_privileges = true,
        .uid = uid,
        .gid = uid,
        .groups = groups,
        .n_groups = n_groups,
    };
    /* The jail (jail.h) confines and execs: this dir rw, the kernel's (template's) dir ro. */
    r = jail_spawn_vmm(&opts, cfg, &pid);
    /* Ours are copies: QEMU holds its own now, and the QMP listener must die with QEMU. */
    qemu_fds_close(&f);
    if (r < 0) {
        goto fail;
    }
    vm->pid = pid;
    vm->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (vm->pidfd < 0) {
        r = -errno;
        (void)kill(pid, SIGKILL);
        (void)waitpid(pid, NULL, 0);
        goto fail;
    }
    uint64_t start_time = 0;
    r = runtime_process_start_time(pid, &start_time);
    if (r >= 0) {
        snprintf(pidtext, sizeof(pidtext), "%d %llu\n", (int)pid, (unsigned long long)start_time);
        r = write_file_atomic(pidfile, pidtext, strlen(pidtext));
    }
    if (r >= 0) {
        r = qemu_wait_qmp(vm, qmp_path);
    }
    if (r < 0) {
        (void)qemu_stop(&vm->base);
        goto fail;
    }
    close_safe(netns_fd);
    close_safe(log_fd);
    *ret = vm;
    return 0;
fail:
    qemu_fds_close(&f); /* the pump sees EOF */
    console_reap(vm->console_pid);
    close_safe(netns_fd);
    close_safe(log_fd);
    close_safe(vm->memory_fd);
    free(vm);
    return r;
}

static int qemu_boot(const struct runtime_config *cfg, struct runtime_vm **ret)
{
    struct qemu_vm *vm = NULL;
    int r = qemu_spawn(cfg, -EBADF, &vm);
    if (r < 0) {
        return r;
    }
    *ret = &vm->base;
    return 0;
}

static int qemu_attach(const struct runtime_config *cfg, struct runtime_vm **ret)
{
    struct qemu_vm *vm = NULL;
    int r = qemu_vm_new(cfg, &vm);
    if (r < 0) {
        return r;
    }
    pid_t pid = cfg->pid;
    uint64_t start_time = cfg->pid_start_time;
    /* The instance record is authoritative; the pidfile covers a crash before it was written. */
    r = pid > 0 ? 0 : qemu_read_pidfile(cfg->dir, &pid, &start_time);
    if (r >= 0) {
        r = qemu_vm_open_pid(vm, pid, start_time);
    }
    if (r < 0) {
        free(vm);
        return r;
    }
    *ret = &vm->base;
    return 0;
}

static int qemu_command(struct qemu_vm *vm, const char *command)
{
    char path[PATH_MAX];
    struct qmp *q = NULL;
    int r = path_in(path, sizeof(path), vm->dir, "qmp.sock");
    if (r < 0) {
        return r;
    }
    r = qmp_open(path, QMP_TIMEOUT, &q);
    if (r < 0) {
        return r;
    }
    r = qmp_execute(q, command, NULL, NULL);
    qmp_close(q);
    return r;
}

static struct qmp *held_take(struct qemu_vm *vm)
{
    return __atomic_exchange_n(&vm->held, NULL, __ATOMIC_ACQ_REL);
}

static void held_put(struct qemu_vm *vm, struct qmp *q)
{
    qmp_close(__atomic_exchange_n(&vm->held, q, __ATOMIC_ACQ_REL));
}

/* `stop`, keeping the connection for the resume (struct qemu_vm's held). A VMM without
 * qmp-held.sock (started by an older node, then attached) is stopped over qmp.sock. */
static int qemu_pause(struct runtime_vm *base)
{
    struct qemu_vm *vm = (struct qemu_vm *)base;
    struct qmp *q = held_take(vm);
    char path[PATH_MAX];
    int r;

    if (!q) {
        if (path_in(path, sizeof(path), vm->dir, "qmp-held.sock") < 0 || access(path, F_OK) < 0) {
            return qemu_command(vm, "stop");
        }
        r = qmp_open(path, QMP_TIMEOUT, &q);
        if (r < 0) {
            return r;
        }
    }
    r = qmp_execute(q, "stop", NULL, NULL);
    if (r < 0) {
        qmp_close(q);
        return r;
    }
    held_put(vm, q);
    return 0;
}

static int qemu_resume(struct runtime_vm *base)
{
    struct qemu_vm *vm = (struct qemu_vm *)base;
    struct qmp *q = held_take(vm);
    int r;

    if (!q) {
        return qemu_command(vm, "cont");
    }
    r = qmp_execute(q, "cont", NULL, NULL);
    qmp_close(q);
    /* The kept connection broke (not QEMU refusing): once more over a fresh one; `cont` of
     * a VM that already runs is not an error. */
    return r < 0 && r != -EIO ? qemu_command(vm, "cont") : r;
}

/* Migration settings both ends of a snapshot need. ignore_shared: RAM that lives in
 * the shared memory file is not in the stream (both sides must agree). */
static int qemu_migration_setup(struct qmp *q, bool ignore_shared)
{
    json_t *caps = json_pack("{s:[{s:s,s:b}]}", "capabilities", "capability", "x-ignore-shared",
                             "state", ignore_shared);
    int r = caps ? qmp_execute(q, "migrate-set-capabilities", caps, NULL) : -ENOMEM;
    if (r < 0) {
        return r;
    }
    /* The default limit (128 MiB/s) applies even to a stopped VM writing a file. */
    json_t *params = json_pack("{s:I}", "max-bandwidth", (json_int_t)100 << 30);
    return params ? qmp_execute(q, "migrate-set-parameters", params, NULL) : -ENOMEM;
}

/* Polls query-migrate until the migration (either direction) ends. */
static int qemu_migration_wait(struct qemu_vm *vm, struct qmp *q, usec_t timeout)
{
    usec_t deadline = now_monotonic() + timeout, nap = 500;

    for (;;) {
        json_t *info = NULL;
        int r = qmp_execute(q, "query-migrate", NULL, &info);
        if (r < 0) {
            return r;
        }
        const char *status = json_string_value(json_object_get(info, "status"));
        r = !status                                                             ? -EPROTO
            : strcmp(status, "completed") == 0                                  ? 0
            : strcmp(status, "failed") == 0 || strcmp(status, "cancelled") == 0 ? -EIO
                                                                                : 1;
        if (r == -EIO) {
            const char *why = json_string_value(json_object_get(info, "error-desc"));
            log_warning("migration of %s failed: %s", vm->dir, why ? why : status);
        }
        json_decref(info);
        if (r <= 0) {
            return r;
        }
        if (!qemu_alive(&vm->base)) {
            return -ECHILD;
        }
        if (now_monotonic() >= deadline) {
            return -ETIMEDOUT;
        }
        /* Short at first (a shared-memory snapshot takes a few ms), then backing off: each
         * query takes QEMU's big lock, which the migration itself needs. */
        sleep_usec(nap);
        nap = MIN(nap * 2, 10 * USEC_PER_MSEC);
    }
}

static int write_page(const uint8_t *page, size_t len, off_t at, void *userdata)
{
    return pwrite_all(*(int *)userdata, page, len, at);
}

/*
 * Writes the shared guest RAM (a memfd) to fd as a sparse file of the same
 * size: only the pages the guest touched that are not zero take space, so a
 * 512 MiB guest costs what it used.
 */
static int copy_memory_sparse(int from, int to, uint64_t size)
{
    if (ftruncate(to, (off_t)size) < 0) {
        return -errno;
    }
    return for_each_nonzero_page(from, size, write_page, &to);
}

static int qemu_snapshot(struct runtime_vm *base, const char *dir)
{
    struct qemu_vm *vm = (struct qemu_vm *)base;
    char qmp_path[PATH_MAX], state_tmp[PATH_MAX], state[PATH_MAX], mem_tmp[PATH_MAX], mem[PATH_MAX];
    bool shared = vm->memory == RUNTIME_MEMORY_SHARED;
    json_t *status = NULL;
    struct qmp *q = NULL;
    int fd = -EBADF, mfd = -EBADF;
    bool fd_given = false;
    int r;

    if (shared && vm->memory_fd < 0) {
        return -EOPNOTSUPP; /* re-attached after a node restart: the memfd is gone with it */
    }
    if (path_in(qmp_path, sizeof(qmp_path), vm->dir, "qmp.sock") < 0 ||
        path_in(state_tmp, sizeof(state_tmp), dir, "vmstate.tmp") < 0 ||
        path_in(state, sizeof(state), dir, "vmstate") < 0 ||
        path_in(mem_tmp, sizeof(mem_tmp), dir, "memory.tmp") < 0 ||
        path_in(mem, sizeof(mem), dir, "memory") < 0) {
        return -ENAMETOOLONG;
    }
    r = qmp_open(qmp_path, QMP_TIMEOUT, &q);
    if (r < 0) {
        return r;
    }
    r = qmp_execute(q, "query-status", NULL, &status);
    if (r < 0) {
        goto out;
    }
    if (json_is_true(json_object_get(status, "running"))) {
        r = -EBUSY; /* the caller pauses first */
        goto out;
    }
    r = qemu_migration_setup(q, shared);
    if (r < 0) {
        goto out;
    }
    fd = open(state_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        r = -errno;
        goto out;
    }
    r = qmp_execute_fd(q, "getfd", json_pack("{s:s}", "fdname", "snapshot"), fd, NULL);
    if (r < 0) {
        goto out;
    }
    fd_given = true;
    r = qmp_execute(q, "migrate", json_pack("{s:s}", "uri", "fd:snapshot"), NULL);
    if (r < 0) {
        goto out;
    }
    fd_given = false; /* the migration owns (and closes) QEMU's copy now */
    r = qemu_migration_wait(vm, q, 120 * USEC_PER_SEC);
    if (r < 0) {
        goto out;
    }
    r = fsync(fd) < 0 ? -errno : 0;
    if (r >= 0 && shared) {
        mfd = open(mem_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        r = mfd < 0 ? -errno : copy_memory_sparse(vm->memory_fd, mfd, vm->memory_bytes);
        if (r >= 0) {
            r = fsync(mfd) < 0 ? -errno : 0;
        }
        if (r >= 0) {
            r = NERRNO(rename(mem_tmp, mem));
        }
    }
    if (r >= 0) {
        r = NERRNO(rename(state_tmp, state));
    }
    if (r >= 0) {
        r = fsync_path(dir, O_RDONLY | O_DIRECTORY);
    }
out:
    if (fd_given) {
        (void)qmp_execute(q, "closefd", json_pack("{s:s}", "fdname", "snapshot"), NULL);
    }
    if (r < 0) {
        (void)unlink(state_tmp);
        (void)unlink(mem_tmp);
    }
    close_safe(fd);
    close_safe(mfd);
    json_decref(status);
    qmp_close(q);
    return r;
}

static int qemu_restore(const struct runtime_config *cfg, const char *dir, struct runtime_vm **ret)
{
    char qmp_path[PATH_MAX], state[PATH_MAX], mem[PATH_MAX], uri[32];
    struct qemu_vm *vm = NULL;
    struct qmp *q = NULL;
    int fd = -EBADF;
    int r;

    if (path_in(state, sizeof(state), dir, "vmstate") < 0 ||
        path_in(mem, sizeof(mem), dir, "memory") < 0 ||
        path_in(qmp_path, sizeof(qmp_path), cfg->dir, "qmp.sock") < 0) {
        return -ENAMETOOLONG;
    }
    /* RAM either comes in the stream or is the memory image already mapped: a mismatch
     * would hand the guest zeroed RAM. */
    bool has_memory = access(mem, F_OK) == 0;
    if (has_memory != (cfg->memory == RUNTIME_MEMORY_PRIVATE) ||
        cfg->memory == RUNTIME_MEMORY_SHARED) {
        return -EINVAL;
    }
    fd = open(state, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    r = qemu_spawn(cfg, fd, &vm);
    if (r < 0) {
        goto out;
    }
    r = qmp_open(qmp_path, QMP_TIMEOUT, &q);
    if (r >= 0) {
        r = qemu_migration_setup(q, has_memory);
    }
    if (r >= 0) {
        /* fd: with a number is the descriptor QEMU inherited (qemu_spawn keeps numbers). */
        snprintf(uri, sizeof(uri), "fd:%d", fd);
        r = qmp_execute(q, "migrate-incoming", json_pack("{s:s}", "uri", uri), NULL);
    }
    if (r >= 0) {
        r = qemu_migration_wait(vm, q, 120 * USEC_PER_SEC);
    }
    if (r < 0) {
        (void)qemu_stop(&vm->base);
        qemu_free(&vm->base);
        goto out;
    }
    *ret = &vm->base;
out:
    qmp_close(q);
    close_safe(fd);
    return r;
}

/* Waits until the process behind pidfd has exited, up to timeout. */
static bool wait_exit(int pidfd, usec_t timeout)
{
    struct pollfd p = { .fd = pidfd, .events = POLLIN };
    usec_t deadline = now_monotonic() + timeout;
    for (;;) {
        usec_t now = now_monotonic();
        int k = poll(&p, 1, now >= deadline ? 0 : (int)((deadline - now) / 1000 + 1));
        if (k > 0) {
            return true;
        }
        if (k == 0 || errno != EINTR) {
            return false;
        }
    }
}

static int qemu_stop(struct runtime_vm *base)
{
    struct qemu_vm *vm = (struct qemu_vm *)base;

    if (vm->pidfd < 0) {
        return 0;
    }
    /* No graceful guest shutdown: the disk is thrown away, so SIGKILL is both
     * safe and fastest. QEMU holds no host state that a kill would leak. */
    if (syscall(SYS_pidfd_send_signal, vm->pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH) {
        return -errno;
    }
    if (!wait_exit(vm->pidfd, 10 * USEC_PER_SEC)) {
        return -ETIMEDOUT;
    }
    /* Reap it if it is our child (we are its subreaper); ECHILD after a node restart is fine. */
    (void)waitpid(vm->pid, NULL, WNOHANG);
    vm->pidfd = close_safe(vm->pidfd);
    qmp_close(held_take(vm));
    console_reap(vm->console_pid);
    vm->console_pid = 0;
    jail_vmm_release(vm->dir);
    return 0;
}

static bool qemu_alive(struct runtime_vm *base)
{
    struct qemu_vm *vm = (struct qemu_vm *)base;
    return vm->pidfd >= 0 && !wait_exit(vm->pidfd, 0);
}

static pid_t qemu_pid(struct runtime_vm *base)
{
    return ((struct qemu_vm *)base)->pid;
}

static int qemu_exit_status(struct runtime_vm *base, int *ret_status)
{
    struct qemu_vm *vm = (struct qemu_vm *)base;
    int status = 0;

    /* Safe by pid: an exited child stays a zombie (its pid taken) until this reaps it. */
    if (vm->pidfd < 0) {
        return -ECHILD;
    }
    pid_t k = waitpid(vm->pid, &status, WNOHANG);
    if (k < 0) {
        return -errno;
    }
    if (k == 0) {
        return -EAGAIN;
    }
    *ret_status = status;
    return 0;
}

/*
 * The agent listens on the guest's address inside the sandbox's netns only.
 * setns() switches just this thread; the socket stays bound to the netns it
 * was created in after we switch back, so connect() and all I/O happen from
 * our own namespace.
 */
static int qemu_connect(struct runtime_vm *base, uint16_t port, usec_t timeout, int *ret_fd)
{
    struct qemu_vm *vm = (struct qemu_vm *)base;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
    int self_ns = -EBADF, target_ns = -EBADF, fd = -EBADF;
    int r;

    if (inet_pton(AF_INET, vm->guest_ip, &sa.sin_addr) != 1) {
        return -EINVAL;
    }
    self_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    target_ns = open(vm->netns_path, O_RDONLY | O_CLOEXEC);
    if (self_ns < 0 || target_ns < 0) {
        r = -errno;
        goto out;
    }
    r = NERRNO(setns(target_ns, CLONE_NEWNET));
    if (r < 0) {
        goto out;
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    r = fd < 0 ? -errno : 0;
    /* Going back must not fail silently: this thread would stay in the sandbox's netns. */
    if (setns(self_ns, CLONE_NEWNET) < 0) {
        abort();
    }
    if (r < 0) {
        goto out;
    }
    r = http_connect_fd(fd, (struct sockaddr *)&sa, sizeof(sa), timeout);
    if (r < 0) {
        goto out;
    }
    *ret_fd = TAKE_FD(fd);
out:
    close_safe(fd);
    close_safe(self_ns);
    close_safe(target_ns);
    return r;
}

static void qemu_free(struct runtime_vm *base)
{
    struct qemu_vm *vm = (struct qemu_vm *)base;
    close_safe(vm->pidfd);
    close_safe(vm->memory_fd);
    qmp_close(held_take(vm));
    free(vm);
}

const struct runtime_ops runtime_qemu_ops = {
    .name = "qemu",
    .boot = qemu_boot,
    .attach = qemu_attach,
    .pause = qemu_pause,
    .resume = qemu_resume,
    .snapshot = qemu_snapshot,
    .restore = qemu_restore,
    .stop = qemu_stop,
    .connect = qemu_connect,
    .alive = qemu_alive,
    .pid = qemu_pid,
    .exit_status = qemu_exit_status,
    .free = qemu_free,
};

enum runtime_accel runtime_detect_accel(enum runtime_accel want, const char *kernel)
{
    char *out = NULL;
    int fd;

    if (want != RUNTIME_ACCEL_AUTO) {
        return want;
    }
    fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        return RUNTIME_ACCEL_TCG;
    }
    close(fd);
    /*
     * /dev/kvm can exist and still be unable to run an ordinary guest (PVM
     * hosts). Boot the guest kernel without a root disk: a working KVM gets as
     * far as the root-mount panic within seconds; a broken one reports a KVM
     * internal error or hangs until the timeout.
     */
    const char *argv[] = {
        "timeout",
        "10",
        QEMU_BINARY,
        "-M",
        "microvm,x-option-roms=off,rtc=on,isa-serial=on,acpi=off",
        "-accel",
        "kvm",
        "-cpu",
        "host",
        "-m",
        "128",
        "-smp",
        "1",
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
        "-serial",
        "stdio",
        "-kernel",
        kernel,
        "-append",
        "console=ttyS0 panic=-1 reboot=k",
        NULL,
    };
    (void)spawn_run(argv, -1, NULL, &out, 1 << 20);
    bool ok = out && (strstr(out, "VFS: Unable to mount root") || strstr(out, "Kernel panic"));
    free(out);
    return ok ? RUNTIME_ACCEL_KVM : RUNTIME_ACCEL_TCG;
}
