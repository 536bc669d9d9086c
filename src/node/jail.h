#pragma once
/*
 * The jail (architecture.md "Runtimes", security.md "inside the host"): it
 * confines a process and execs it, and does nothing else. The runtime
 * describes the process (struct jail_spec); jail_spawn() starts it:
 *
 *   - new mount, pid, ipc, uts and cgroup namespaces, and the sandbox's netns;
 *   - pivot_root into a fresh tmpfs (read-only once built) holding only the
 *     program's files (binary + the ELF libraries it needs, resolved once),
 *     the spec's read-only and read-write binds, /dev/{null,zero,urandom} and,
 *     when asked, a procfs of its own pid namespace (only its own pids);
 *   - the spec's uid/gid and groups, no capabilities in any set (bounding
 *     set emptied, ambient cleared, securebits locked), no_new_privs;
 *   - rlimits, and a seccomp filter (libseccomp, built once by jail_init())
 *     that kills the process on syscalls a VMM never needs (ptrace,
 *     process_vm_*, mount, pivot_root, bpf, unshare/setns, namespace clone
 *     flags, keyctl, userfaultfd, ...): QEMU's own -sandbox stacks on top;
 *   - every inherited descriptor closed except stdio and keep_fds.
 *
 * The same jail serves any runtime (Firecracker later). Setup is a few
 * syscalls per bind (measured: see docs/performance.md "Jail").
 */
#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "basic/time-util.h"

struct spawn_opts;
struct runtime_config;
struct cgroup;

/* Where every jail mounts its root tmpfs, inside its own mount namespace. */
#define JAIL_ROOT_DIR "/run/space/jail-root"

/* A program's files: the binary and every shared object it needs, bound read-only at the same
 * paths. Resolved once (jail_files_resolve()), used for every jail. */
struct jail_files {
    char **paths;
    size_t n;
};

/* Adds `elf` and its ELF needs (the dynamic loader's `--list`, i.e. ldd); dedups. */
int jail_files_add_elf(struct jail_files *f, const char *elf);
/* Adds a path as is (a directory or a file). */
int jail_files_add(struct jail_files *f, const char *path);
void jail_files_done(struct jail_files *f);

struct jail_bind {
    const char *path; /* the same path inside and outside */
    bool rw;
};

struct jail_rlimit {
    int resource;
    rlim_t value; /* soft = hard */
};

struct jail_spec {
    const char *path; /* absolute path of the program, exec'd inside the jail */
    uid_t uid;        /* nonzero */
    gid_t gid;        /* nonzero */
    const gid_t *groups;
    size_t n_groups;
    int netns_fd; /* the sandbox's netns (required: a jail never shares ours) */
    const struct jail_files *files;
    const struct jail_bind *binds;
    size_t n_binds;
    bool proc;    /* a procfs of its own pid namespace (subset=pid) */
    bool dev_kvm; /* bind /dev/kvm */
    const struct jail_rlimit *rlimits;
    size_t n_rlimits;
    int stdin_fd, stdout_fd, stderr_fd; /* -1: /dev/null */
    const int *keep_fds;                /* kept under the same numbers (each >= 3) */
    size_t n_keep_fds;
    struct cgroup *cgroup; /* joined before the child runs anything (cgroup.h); NULL: none */
};

struct jail_config {
    bool enabled;              /* false (--no-jail, debugging only): jail_spawn_vmm() is a plain
                                  spawn_start() */
    bool cgroups;              /* per-sandbox cgroups (--no-cgroups turns them off) */
    unsigned vmm_overhead_mib; /* memory limit = guest RAM + this (QEMU, TCG's code cache) */
};

#define JAIL_VMM_OVERHEAD_MIB_DEFAULT 256
#define JAIL_VMM_PIDS_MAX 512

/*
 * Builds the seccomp filter and resolves the VMM's files (QEMU's binary, its
 * libraries and modules, /usr/share/qemu) once per node start, and detects
 * the cgroup layout (cgroup_init()).
 */
int jail_init(const struct jail_config *cfg);
bool jail_enabled(void);
void jail_done(void);

/* The VMM's files found by jail_init() (for the test harness). */
const struct jail_files *jail_vmm_files(void);

/*
 * Forks into new namespaces, confines, execs spec->path with argv (envp
 * empty but PATH). Returns once the child has exec'd (0, *ret_pid is its pid
 * in our pid namespace) or failed to (-errno of the failing step, which is
 * also written as a line to its stderr). *ret_setup (may be NULL): the
 * time from fork to exec.
 */
int jail_spawn(const struct jail_spec *spec, const char *const *argv, pid_t *ret_pid,
               usec_t *ret_setup);

/* The syscalls the filter kills on, by name (for tests and docs). NULL-terminated. */
extern const char *const jail_denied_syscalls[];

/* The VMM's jail without its ids and descriptors: QEMU's path and files, /proc, rlimits. */
void jail_vmm_spec_init(struct jail_spec *spec);
/* The VMM's binds: sandbox_dir rw, the directory of template_file ro (into template_dir[n]).
 * binds has room for 2; returns how many. */
int jail_vmm_binds(const char *sandbox_dir, const char *template_file, struct jail_bind *binds,
                   char *template_dir, size_t n);

/* The limits of a VMM for cfg: memory = guest RAM + the configured overhead, CPU weight 100
 * per vCPU, quota one CPU per vCPU plus one for QEMU's own threads, pids. */
struct cgroup_limits;
void jail_vmm_limits(const struct runtime_config *cfg, struct cgroup_limits *ret);

/*
 * The VMM's jail from the runtime's spawn options (uid, groups, netns, stdio,
 * pass_fds) plus its directories: cfg->dir rw, the directory of cfg->kernel
 * ro (the template's: kernel, initrd, snapshot files); QEMU's files ro; /proc
 * for /proc/self/fd; its cgroup (named by the sandbox directory's name) with
 * jail_vmm_limits(). When the jail is disabled this is spawn_start(opts).
 * argv[0] names QEMU (found by jail_init()).
 */
int jail_spawn_vmm(const struct spawn_opts *opts, const struct runtime_config *cfg, pid_t *ret_pid);
/* After the VMM of the sandbox directory `dir` is gone: removes its cgroup. */
void jail_vmm_release(const char *dir);
