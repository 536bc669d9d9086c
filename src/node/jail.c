/*
 * The jail (jail.h). Everything that allocates or formats happens in the
 * parent, before the fork: the plan (struct jail_plan) lists every mount
 * target as a finished path, and the seccomp filter is compiled once to BPF
 * by jail_init(). The child only makes syscalls on that memory, since it is
 * a child of a threaded process (style.md R19, as in spawn.c).
 *
 * Order in the child: wait for the parent (which may place it in cgroups),
 * new cgroup namespace, the sandbox's netns, mounts private, root tmpfs and
 * binds, /proc, pivot_root, the tmpfs made read-only, hostname, stdio and
 * kept fds, rlimits, ids and capabilities dropped, no_new_privs, seccomp,
 * exec. A failing step writes "jail: cannot <step>" to the child's stderr
 * and its errno to the error pipe, which the exec closes on success.
 *
 * Why per-file binds of QEMU's libraries rather than /usr/lib: the VMM then
 * sees 50-odd files it needs, not every library, Python module and
 * configuration the host has (a compromised VMM gains nothing from the rest,
 * and every file we do not show cannot leak or be exploited). Binding costs
 * two mount calls per file, measured in docs/performance.md.
 */
#include "node/jail.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/securebits.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <limits.h>

#include "basic/fd-util.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "node/cgroup.h"
#include "node/runtime.h"
#include "shared/spawn.h"

#define QEMU_BINARY "qemu-system-x86_64"
#define QEMU_MODULE_DIR "/usr/lib/x86_64-linux-gnu/qemu"
#define QEMU_DATA_DIR "/usr/share/qemu"
#define DYNAMIC_LOADER "/lib64/ld-linux-x86-64.so.2"
#define JAIL_CHILD_TIMEOUT_MS 10000

static struct {
    bool enabled;
    bool cgroups;
    unsigned vmm_overhead_mib;
    bool ready;
    struct sock_filter *bpf;
    unsigned short bpf_len;
    struct jail_files vmm;
    char vmm_path[PATH_MAX];
} jail;

const char *const jail_denied_syscalls[] = {
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "process_madvise",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "bpf",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    "unshare",
    "setns",
    "userfaultfd",
    "open_by_handle_at",
    "name_to_handle_at",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "quotactl",
    "quotactl_fd",
    "iopl",
    "ioperm",
    "syslog",
    "vhangup",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "pidfd_getfd",
    "kcmp",
    "uselib",
    "lookup_dcookie",
    "sethostname",
    "setdomainname",
    "fanotify_init",
    NULL,
};

/* ---- the program's files ---- */

static int files_push(struct jail_files *f, const char *path)
{
    for (size_t i = 0; i < f->n; i++) {
        if (strcmp(f->paths[i], path) == 0) {
            return 0;
        }
    }
    char **p = realloc(f->paths, (f->n + 1) * sizeof(*p));
    if (!p) {
        return -ENOMEM;
    }
    f->paths = p;
    f->paths[f->n] = strdup(path);
    if (!f->paths[f->n]) {
        return -ENOMEM;
    }
    f->n++;
    return 0;
}

int jail_files_add(struct jail_files *f, const char *path)
{
    if (path[0] != '/' || access(path, F_OK) < 0) {
        return path[0] != '/' ? -EINVAL : -errno;
    }
    return files_push(f, path);
}

/*
 * The dynamic loader's --list prints what ldd does: "name => /path (addr)",
 * "/path (addr)" for the loader itself, "linux-vdso.so.1 (addr)" (no file).
 * Only trusted binaries (QEMU, the test probe) are listed, never guest input.
 */
int jail_files_add_elf(struct jail_files *f, const char *elf)
{
    const char *argv[] = { DYNAMIC_LOADER, "--list", elf, NULL };
    char *out = NULL;
    int r;

    r = jail_files_add(f, elf);
    if (r < 0) {
        return r;
    }
    r = spawn_run(argv, -1, NULL, &out, 1 << 20);
    if (r != 0) {
        free(out);
        /* A static binary: "not a dynamic executable" (exit 1). */
        return r > 0 ? 0 : r;
    }
    r = files_push(f, DYNAMIC_LOADER);
    for (char *line = out, *next; r >= 0 && line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) {
            *next++ = '\0';
        }
        char *arrow = strstr(line, "=> ");
        char *path = arrow ? arrow + 3 : line + strspn(line, " \t");
        char *end = strstr(path, " (");
        if (end) {
            *end = '\0';
        }
        if (path[0] == '/') {
            r = jail_files_add(f, path);
        } else if (arrow && strncmp(path, "not found", 9) == 0) {
            r = log_error_errno(ENOENT, "jail: %s needs a library that is missing: %s", elf, line);
        }
    }
    free(out);
    return r;
}

void jail_files_done(struct jail_files *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->paths[i]);
    }
    free(f->paths);
    f->paths = NULL;
    f->n = 0;
}

const struct jail_files *jail_vmm_files(void)
{
    return &jail.vmm;
}

/* ---- seccomp ---- */

static int build_filter(void)
{
    static const uint64_t ns_flags[] = {
        CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,    CLONE_NEWNET,
        CLONE_NEWIPC,  CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWTIME
    };
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    int memfd = -EBADF, r = 0;

    if (!ctx) {
        return -ENOMEM;
    }
    /* Another ABI's syscall table (int 0x80, x32) is a way around a native filter. */
    r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    for (size_t i = 0; r >= 0 && jail_denied_syscalls[i]; i++) {
        int nr = seccomp_syscall_resolve_name(jail_denied_syscalls[i]);
        if (nr == __NR_SCMP_ERROR) {
            continue; /* unknown to this libseccomp/arch: nothing to deny */
        }
        r = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, nr, 0);
    }
    /* clone() creating a namespace; clone3 hides its flags in memory, so it says ENOSYS and
     * glibc falls back to clone(). io_uring: a large kernel surface QEMU can do without. */
    for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(ns_flags); i++) {
        r = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(clone), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
    }
    if (r >= 0) {
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    }
    const char *const enosys[] = { "io_uring_setup", "io_uring_enter", "io_uring_register" };
    for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(enosys); i++) {
        int nr = seccomp_syscall_resolve_name(enosys[i]);
        if (nr != __NR_SCMP_ERROR) {
            r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
        }
    }
    /* Sockets of families above AF_INET6 (netlink, packet, vsock, ...): a VMM handed its
     * descriptors needs none of them. */
    if (r >= 0) {
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                             SCMP_A0(SCMP_CMP_GT, AF_INET6));
    }
    if (r < 0) {
        goto out;
    }
    memfd = memfd_create("jail-seccomp", MFD_CLOEXEC);
    if (memfd < 0) {
        r = -errno;
        goto out;
    }
    r = seccomp_export_bpf(ctx, memfd);
    if (r < 0) {
        goto out;
    }
    off_t size = lseek(memfd, 0, SEEK_END);
    if (size <= 0 || size % sizeof(struct sock_filter) != 0 ||
        size / sizeof(struct sock_filter) > BPF_MAXINSNS) {
        r = -EINVAL;
        goto out;
    }
    jail.bpf = malloc((size_t)size);
    if (!jail.bpf) {
        r = -ENOMEM;
        goto out;
    }
    if (pread(memfd, jail.bpf, (size_t)size, 0) != size) {
        r = -EIO;
        goto out;
    }
    jail.bpf_len = (unsigned short)(size / sizeof(struct sock_filter));
out:
    close_safe(memfd);
    seccomp_release(ctx);
    return r;
}

/* ---- init ---- */

static int find_in_path(const char *name, char *buf, size_t n)
{
    const char *dirs[] = { "/usr/local/bin", "/usr/bin", "/bin" };
    for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
        if (snprintf(buf, n, "%s/%s", dirs[i], name) < (int)n && access(buf, X_OK) == 0) {
            return 0;
        }
    }
    return -ENOENT;
}

static int resolve_vmm_files(void)
{
    char module[PATH_MAX];
    int r;

    r = find_in_path(QEMU_BINARY, jail.vmm_path, sizeof(jail.vmm_path));
    if (r < 0) {
        return log_error_errno(r, "jail: %s not found", QEMU_BINARY);
    }
    r = jail_files_add_elf(&jail.vmm, jail.vmm_path);
    /* QEMU finds its modules and firmware next to its binary (/proc/self/exe/../..). Only the
     * TCG accelerator module is needed; its libraries are QEMU's own. */
    snprintf(module, sizeof(module), "%s/accel-tcg-x86_64.so", QEMU_MODULE_DIR);
    if (r >= 0 && access(module, R_OK) == 0) {
        r = jail_files_add_elf(&jail.vmm, module);
    }
    if (r >= 0) {
        r = jail_files_add(&jail.vmm, QEMU_DATA_DIR);
    }
    return r;
}

int jail_init(const struct jail_config *cfg)
{
    int r;

    jail.enabled = cfg->enabled;
    jail.cgroups = cfg->cgroups;
    jail.vmm_overhead_mib = cfg->vmm_overhead_mib;
    if (jail.cgroups) {
        r = cgroup_init("/sys/fs/cgroup");
        if (r < 0) {
            return r;
        }
    }
    if (!jail.enabled) {
        log_warning("jail: disabled (--no-jail): VMMs share the host's mount and pid namespaces");
        return 0;
    }
    r = build_filter();
    if (r < 0) {
        return log_error_errno(r, "jail: cannot build the seccomp filter: %m");
    }
    r = resolve_vmm_files();
    if (r < 0) {
        return log_error_errno(r, "jail: cannot resolve the VMM's files: %m");
    }
    if (mkdir("/run/space", 0755) < 0 && errno != EEXIST) {
        return log_error_errno(errno, "jail: cannot create /run/space: %m");
    }
    if (mkdir(JAIL_ROOT_DIR, 0700) < 0 && errno != EEXIST) {
        return log_error_errno(errno, "jail: cannot create " JAIL_ROOT_DIR ": %m");
    }
    jail.ready = true;
    log_info("jail: on (%zu VMM files, seccomp filter of %u instructions)", jail.vmm.n,
             jail.bpf_len);
    return 0;
}

bool jail_enabled(void)
{
    return jail.enabled;
}

void jail_done(void)
{
    free(jail.bpf);
    jail.bpf = NULL;
    jail_files_done(&jail.vmm);
    jail.ready = false;
}

/* ---- the plan (built in the parent) ---- */

enum { BIND_RO = 1 << 0, BIND_DIR = 1 << 1, BIND_DEV = 1 << 2, BIND_EXEC = 1 << 3 };

struct jail_mount {
    const char *src;
    char *target; /* JAIL_ROOT_DIR + path */
    unsigned flags;
};

struct jail_plan {
    struct jail_mount *m;
    size_t n;
    char *proc_target;
    int *keep; /* sorted */
    size_t n_keep;
};

static void plan_free(struct jail_plan *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->m[i].target);
    }
    free(p->m);
    free(p->proc_target);
    free(p->keep);
}

static int plan_add(struct jail_plan *p, const char *src, const char *dst, unsigned flags)
{
    struct stat st;
    struct jail_mount *m;

    if (stat(src, &st) < 0) {
        return -errno;
    }
    if (S_ISDIR(st.st_mode)) {
        flags |= BIND_DIR;
    }
    m = realloc(p->m, (p->n + 1) * sizeof(*m));
    if (!m) {
        return -ENOMEM;
    }
    p->m = m;
    m = &p->m[p->n];
    *m = (struct jail_mount){ .src = src, .flags = flags };
    if (asprintf(&m->target, "%s%s", JAIL_ROOT_DIR, dst) < 0) {
        m->target = NULL;
        return -ENOMEM;
    }
    p->n++;
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

static int plan_build(const struct jail_spec *spec, struct jail_plan *p)
{
    static const char *const devs[] = { "/dev/null", "/dev/zero", "/dev/urandom", "/dev/kvm" };
    int r = 0;

    for (size_t i = 0; r >= 0 && spec->files && i < spec->files->n; i++) {
        r = plan_add(p, spec->files->paths[i], spec->files->paths[i], BIND_RO | BIND_EXEC);
    }
    for (size_t i = 0; r >= 0 && i < spec->n_binds; i++) {
        if (spec->binds[i].path[0] != '/') {
            return -EINVAL;
        }
        r = plan_add(p, spec->binds[i].path, spec->binds[i].path, spec->binds[i].rw ? 0 : BIND_RO);
    }
    for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(devs) - (spec->dev_kvm ? 0 : 1); i++) {
        r = plan_add(p, devs[i], devs[i], BIND_DEV);
    }
    if (r >= 0 && spec->proc && asprintf(&p->proc_target, "%s/proc", JAIL_ROOT_DIR) < 0) {
        p->proc_target = NULL;
        r = -ENOMEM;
    }
    if (r < 0) {
        return r;
    }
    p->keep = calloc(spec->n_keep_fds + 1, sizeof(int));
    if (!p->keep) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < spec->n_keep_fds; i++) {
        if (spec->keep_fds[i] < 3) {
            return -EINVAL;
        }
        p->keep[i] = spec->keep_fds[i];
    }
    p->n_keep = spec->n_keep_fds;
    qsort(p->keep, p->n_keep, sizeof(int), cmp_int);
    return 0;
}

/* ---- the child: syscalls only ---- */

struct child_ctx {
    const struct jail_spec *spec;
    const struct jail_plan *plan;
    const char *const *argv;
    int sync_fd; /* read end: the parent's go-ahead */
    int err_fd;  /* write end, O_CLOEXEC: closed by a successful exec */
    int devnull;
};

static _Noreturn void child_fail(const struct child_ctx *c, const char *what)
{
    static const char prefix[] = "jail: cannot ";
    int e = errno ? errno : EINVAL;
    (void)!write(2, prefix, sizeof(prefix) - 1);
    (void)!write(2, what, strlen(what));
    (void)!write(2, "\n", 1);
    (void)!write(c->err_fd, &e, sizeof(e));
    _exit(127);
}

/* mkdir -p of path's parents (and path itself when dir), on a copy on our stack. */
static int child_mkdirs(const char *path, bool dir)
{
    char buf[PATH_MAX];
    size_t len = strlen(path);

    if (len >= sizeof(buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, len + 1);
    for (char *s = buf + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            if (mkdir(buf, 0755) < 0 && errno != EEXIST) {
                return -1;
            }
            *s = '/';
        }
    }
    if (dir) {
        return mkdir(buf, 0755) < 0 && errno != EEXIST ? -1 : 0;
    }
    int fd = open(buf, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 && errno != EEXIST) {
        return -1;
    }
    close(fd);
    return 0;
}

static void child_mounts(const struct child_ctx *c)
{
    const struct jail_plan *p = c->plan;

    /* Nothing we mount may propagate back to the host. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
        child_fail(c, "make mounts private");
    }
    if (mount("jail", JAIL_ROOT_DIR, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=1m,nr_inodes=4096,mode=0755") < 0) {
        child_fail(c, "mount the root tmpfs");
    }
    for (size_t i = 0; i < p->n; i++) {
        const struct jail_mount *m = &p->m[i];
        unsigned long flags = MS_NOSUID;
        if (!(m->flags & BIND_DEV)) {
            flags |= MS_NODEV;
        }
        if (!(m->flags & BIND_EXEC)) {
            flags |= MS_NOEXEC;
        }
        if (m->flags & BIND_RO) {
            flags |= MS_RDONLY;
        }
        if (child_mkdirs(m->target, m->flags & BIND_DIR) < 0) {
            child_fail(c, "create a mount point");
        }
        if (mount(m->src, m->target, NULL, MS_BIND | MS_REC, NULL) < 0) {
            child_fail(c, "bind a path");
        }
        if (mount(NULL, m->target, NULL, MS_BIND | MS_REMOUNT | flags, NULL) < 0) {
            child_fail(c, "restrict a bind");
        }
    }
    if (p->proc_target) {
        if (child_mkdirs(p->proc_target, true) < 0 ||
            mount("proc", p->proc_target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "hidepid=invisible,subset=pid") < 0) {
            child_fail(c, "mount /proc");
        }
    }
    if (chdir(JAIL_ROOT_DIR) < 0) {
        child_fail(c, "enter the root");
    }
    /* pivot_root(".", "."): the old root ends up on top of the new one, and is detached. */
    if (syscall(SYS_pivot_root, ".", ".") < 0) {
        child_fail(c, "pivot_root");
    }
    if (umount2(".", MNT_DETACH) < 0) {
        child_fail(c, "detach the old root");
    }
    if (chdir("/") < 0) {
        child_fail(c, "enter /");
    }
    if (mount(NULL, "/", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              NULL) < 0) {
        child_fail(c, "make the root read-only");
    }
}

static void child_fds(const struct child_ctx *c)
{
    const struct jail_spec *s = c->spec;
    const int from[3] = { s->stdin_fd, s->stdout_fd, s->stderr_fd };

    for (int i = 0; i < 3; i++) {
        int fd = from[i] >= 0 ? from[i] : c->devnull;
        if (fd != i && dup2(fd, i) < 0) {
            child_fail(c, "set up stdio");
        }
        if (fd == i) {
            (void)fcntl(i, F_SETFD, 0);
        }
    }
    /* Everything else closes at exec (the error pipe too, which is how the parent learns that
     * exec happened); the kept descriptors are then taken out of that. */
    if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
        child_fail(c, "mark inherited descriptors close-on-exec");
    }
    for (size_t i = 0; i < c->plan->n_keep; i++) {
        if (fcntl(c->plan->keep[i], F_SETFD, 0) < 0) {
            child_fail(c, "keep a descriptor");
        }
    }
}

static void child_drop(const struct child_ctx *c)
{
    const struct jail_spec *s = c->spec;
    struct __user_cap_header_struct head = { .version = _LINUX_CAPABILITY_VERSION_3 };
    struct __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = { { 0 } };

    for (size_t i = 0; i < s->n_rlimits; i++) {
        struct rlimit rl = { s->rlimits[i].value, s->rlimits[i].value };
        if (setrlimit(s->rlimits[i].resource, &rl) < 0) {
            child_fail(c, "set an rlimit");
        }
    }
    /* Raw syscalls rather than libcap, which allocates (see the top of the file), and rather
     * than glibc's set*id() wrappers: after our raw clone glibc still thinks the process has
     * the parent's threads, and its setxid broadcast would take a lock one of them may have
     * held at the clone and wait on threads that do not exist here (8 concurrent creates
     * hung). The child is one thread: the raw syscall is what we want. */
    if (syscall(SYS_setgroups, s->n_groups, s->groups) < 0) {
        child_fail(c, "set supplementary groups");
    }
    if (syscall(SYS_setresgid, s->gid, s->gid, s->gid) < 0) {
        child_fail(c, "set gid");
    }
    for (int cap = 0; cap < 64; cap++) {
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL) {
            child_fail(c, "drop the capability bounding set");
        }
    }
    if (prctl(PR_SET_SECUREBITS,
              SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                  SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
                  SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
              0, 0, 0) < 0) {
        child_fail(c, "lock securebits");
    }
    if (syscall(SYS_setresuid, s->uid, s->uid, s->uid) < 0) {
        child_fail(c, "set uid");
    }
    if (syscall(SYS_capset, &head, none) < 0 ||
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0) {
        child_fail(c, "clear capabilities");
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        child_fail(c, "set no_new_privs");
    }
    if (getuid() != s->uid || geteuid() != s->uid || getgid() != s->gid) {
        errno = EPERM;
        child_fail(c, "verify the new ids");
    }
    struct sock_fprog prog = { .len = jail.bpf_len, .filter = jail.bpf };
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0) {
        child_fail(c, "install the seccomp filter");
    }
}

static _Noreturn void child_run(const struct child_ctx *c)
{
    static const char *const envp[] = { "PATH=/usr/bin:/bin", NULL };
    sigset_t all;
    char go;

    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    for (int s = 1; s < NSIG; s++) {
        if (s != SIGKILL && s != SIGSTOP) {
            struct sigaction sa = { .sa_handler = SIG_DFL };
            sigaction(s, &sa, NULL);
        }
    }
    /* Our own stderr until stdio is set up: the spec's, so failures land in its log. */
    if (c->spec->stderr_fd >= 0 && c->spec->stderr_fd != 2) {
        (void)dup2(c->spec->stderr_fd, 2);
    }
    (void)setsid();
    /* Until exec we hold copies of whatever the parent had open (its flock()ed lease files
     * among them): never wait for long. Our parent thread dying kills us until then. */
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    struct pollfd p = { .fd = c->sync_fd, .events = POLLIN };
    if (poll(&p, 1, JAIL_CHILD_TIMEOUT_MS) != 1 || read(c->sync_fd, &go, 1) != 1) {
        child_fail(c, "hear from the parent");
    }
    /* After the parent placed us in our cgroup: that becomes our cgroup namespace's root. */
    if (unshare(CLONE_NEWCGROUP) < 0) {
        child_fail(c, "unshare the cgroup namespace");
    }
    if (setns(c->spec->netns_fd, CLONE_NEWNET) < 0) {
        child_fail(c, "enter the network namespace");
    }
    child_mounts(c);
    static const char host[] = "sandbox";
    if (syscall(SYS_sethostname, host, sizeof(host) - 1) < 0) {
        child_fail(c, "set the hostname");
    }
    child_fds(c);
    child_drop(c);
    /* The VMM outlives the worker thread that started it. */
    (void)prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0);
    execve(c->spec->path, (char *const *)c->argv, (char *const *)envp);
    child_fail(c, "exec the program");
}

int jail_spawn(const struct jail_spec *spec, const char *const *argv, pid_t *ret_pid,
               usec_t *ret_setup)
{
    struct jail_plan plan = { 0 };
    int sync_pipe[2] = { -EBADF, -EBADF }, err_pipe[2] = { -EBADF, -EBADF };
    int devnull = -EBADF, r, e = 0;
    usec_t start = now_monotonic();
    pid_t pid;

    if (!jail.ready || !spec->path || spec->path[0] != '/' || spec->uid == 0 || spec->gid == 0 ||
        spec->netns_fd < 0 || !argv || !argv[0]) {
        return -EINVAL;
    }
    r = plan_build(spec, &plan);
    if (r < 0) {
        goto out;
    }
    devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0 || pipe2(sync_pipe, O_CLOEXEC) < 0 || pipe2(err_pipe, O_CLOEXEC) < 0) {
        r = -errno;
        goto out;
    }
    struct child_ctx c = { .spec = spec,
                           .plan = &plan,
                           .argv = argv,
                           .sync_fd = sync_pipe[0],
                           .err_fd = err_pipe[1],
                           .devnull = devnull };
    /* A raw clone: fork semantics (no CLONE_VM, same stack) into new namespaces, so the child
     * is pid 1 of its own pid namespace and we still know its pid in ours. */
    pid = (pid_t)syscall(SYS_clone,
                         SIGCHLD | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS, NULL,
                         NULL, NULL, NULL);
    if (pid < 0) {
        r = -errno;
        goto out;
    }
    if (pid == 0) {
        child_run(&c);
    }
    sync_pipe[0] = close_safe(sync_pipe[0]);
    err_pipe[1] = close_safe(err_pipe[1]);
    /* Into its cgroup before it runs anything: nothing it does is ever unaccounted. */
    r = cgroup_attach(spec->cgroup, pid);
    if (r >= 0 && write(sync_pipe[1], "g", 1) != 1) {
        r = -errno;
    }
    sync_pipe[1] = close_safe(sync_pipe[1]);
    /* A child that neither execs nor fails in time is killed: a create never hangs here. */
    struct pollfd p = { .fd = err_pipe[0], .events = POLLIN };
    ssize_t n = -1;
    int k;
    do {
        k = poll(&p, 1, JAIL_CHILD_TIMEOUT_MS);
    } while (k < 0 && errno == EINTR);
    if (k == 0 && r >= 0) {
        r = -ETIMEDOUT;
    }
    if (k > 0) {
        do {
            n = read(err_pipe[0], &e, sizeof(e));
        } while (n < 0 && errno == EINTR);
    }
    if (r >= 0 && n == (ssize_t)sizeof(e)) {
        r = -(e > 0 ? e : EIO);
    } else if (r >= 0 && n != 0) {
        r = -EIO;
    }
    if (r < 0) {
        (void)kill(pid, SIGKILL);
        (void)waitpid(pid, NULL, 0);
        goto out;
    }
    *ret_pid = pid;
    if (ret_setup) {
        *ret_setup = now_monotonic() - start;
    }
out:
    close_safe(devnull);
    close_safe(sync_pipe[0]);
    close_safe(sync_pipe[1]);
    close_safe(err_pipe[0]);
    close_safe(err_pipe[1]);
    plan_free(&plan);
    return r;
}

/* ---- the VMM's jail ---- */

void jail_vmm_spec_init(struct jail_spec *spec)
{
    /* QEMU's threads count against NPROC (per uid, and the uid is the sandbox's alone): TCG
     * runs one per vCPU plus its I/O and RCU threads and a worker pool of up to 64. */
    static const struct jail_rlimit rlimits[] = {
        { RLIMIT_CORE, 0 },         { RLIMIT_NPROC, 512 }, { RLIMIT_NOFILE, 4096 },
        { RLIMIT_MSGQUEUE, 0 },     { RLIMIT_NICE, 0 },    { RLIMIT_RTPRIO, 0 },
        { RLIMIT_SIGPENDING, 256 },
    };
    *spec = (struct jail_spec){
        .path = jail.vmm_path,
        .files = &jail.vmm,
        .proc = true, /* -kernel /proc/self/fd/N, /proc/self/exe (module and firmware dirs) */
        .rlimits = rlimits,
        .n_rlimits = ARRAY_SIZE(rlimits),
        .stdin_fd = -1,
        .stdout_fd = -1,
        .stderr_fd = -1,
        .netns_fd = -1,
    };
}

int jail_vmm_binds(const char *sandbox_dir, const char *template_file, struct jail_bind *binds,
                   char *template_dir, size_t n)
{
    size_t k = 0;
    if (sandbox_dir) {
        binds[k++] = (struct jail_bind){ .path = sandbox_dir, .rw = true };
    }
    const char *slash = template_file ? strrchr(template_file, '/') : NULL;
    if (slash && slash > template_file &&
        snprintf(template_dir, n, "%.*s", (int)(slash - template_file), template_file) < (int)n &&
        access(template_dir, F_OK) == 0) {
        binds[k++] = (struct jail_bind){ .path = template_dir, .rw = false };
    }
    return (int)k;
}

void jail_vmm_limits(const struct runtime_config *cfg, struct cgroup_limits *ret)
{
    *ret = (struct cgroup_limits){
        .memory_max = ((uint64_t)cfg->memory_mib + jail.vmm_overhead_mib) << 20,
        .cpu_weight = 100 * MAX(cfg->vcpus, 1u),
        /* One CPU per vCPU plus one for QEMU's own threads (main loop, I/O, RCU): a tighter
         * quota throttles a vCPU for the rest of a 100 ms period, which a booting guest's timer
         * calibration cannot take (seen here: "IO-APIC + timer doesn't work" panics). */
        .cpu_quota_pc = 100 * MAX(cfg->vcpus, 1u) + 100,
        .pids_max = JAIL_VMM_PIDS_MAX,
    };
}

static const char *dir_name(const char *dir)
{
    const char *slash = strrchr(dir, '/');
    return slash ? slash + 1 : dir;
}

void jail_vmm_release(const char *dir)
{
    if (!jail.cgroups || !dir) {
        return;
    }
    /* The pid namespace's init is gone, so are the rest; give the kernel a moment to let go. */
    for (int i = 0; i < 50; i++) {
        int r = cgroup_remove(dir_name(dir));
        if (r != -EBUSY) {
            if (r < 0) {
                log_warning("jail: cannot remove the cgroup of '%s': %s", dir, strerror(-r));
            }
            return;
        }
        usleep(10000);
    }
}

int jail_spawn_vmm(const struct spawn_opts *opts, const struct runtime_config *cfg, pid_t *ret_pid)
{
    struct jail_bind binds[2];
    struct cgroup_limits limits;
    struct cgroup *cg = NULL;
    char template_dir[PATH_MAX];
    struct jail_spec spec;
    usec_t setup = 0;
    int r;

    if (!jail.enabled) {
        return spawn_start(opts, ret_pid);
    }
    if (!opts->drop_privileges || opts->netns_fd < 0) {
        return -EINVAL;
    }
    jail_vmm_spec_init(&spec);
    spec.binds = binds;
    spec.n_binds =
        (size_t)jail_vmm_binds(cfg->dir, cfg->kernel, binds, template_dir, sizeof(template_dir));
    spec.dev_kvm = cfg->accel == RUNTIME_ACCEL_KVM;
    spec.uid = opts->uid;
    spec.gid = opts->gid;
    spec.groups = opts->groups;
    spec.n_groups = opts->n_groups;
    spec.netns_fd = opts->netns_fd;
    spec.stdin_fd = opts->stdin_fd;
    spec.stdout_fd = opts->stdout_fd;
    spec.stderr_fd = opts->stderr_fd;
    spec.keep_fds = opts->pass_fds;
    spec.n_keep_fds = opts->n_pass_fds;
    if (jail.cgroups) {
        jail_vmm_limits(cfg, &limits);
        r = cgroup_create(dir_name(cfg->dir), &limits, &cg);
        if (r < 0) {
            return log_error_errno(r, "jail: cannot create the VMM's cgroup: %m");
        }
        spec.cgroup = cg;
    }
    r = jail_spawn(&spec, opts->argv, ret_pid, &setup);
    cgroup_free(cg);
    if (r < 0) {
        jail_vmm_release(cfg->dir);
        return log_error_errno(r, "jail: cannot start the VMM: %m");
    }
    log_info("jail: VMM %d confined in %llu us", (int)*ret_pid, (unsigned long long)setup);
    return 0;
}
