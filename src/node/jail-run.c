/*
 * jail-run: test harness (not installed). Runs a program in the VMM's jail
 * (jail_vmm_spec_init(): the same namespaces, root, binds, rlimits, ids,
 * capabilities and seccomp filter as QEMU gets), with the program's own ELF
 * files bound besides QEMU's. tests/jail/test_jail.py runs jail-probe in it.
 *
 *   jail-run --uid N --netns PATH [--sandbox-dir DIR] [--template-file F]
 *            [--memory-mib N --vcpus N] -- PROGRAM ARGS...
 *
 * With --memory-mib the program gets a VMM's cgroup (jail_vmm_limits(): N MiB of "guest RAM"
 * plus --vmm-overhead-mib, default 32 here), named jail-run-<pid>, removed at the end.
 *
 * Prints "setup_us N" on stderr, then waits and exits with the program's
 * status (128 + signal when killed).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "basic/log.h"
#include "basic/parse-util.h"
#include "node/cgroup.h"
#include "node/jail.h"
#include "node/runtime.h"
#include "shared/spawn.h"

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "uid", required_argument, NULL, 'u' },
        { "netns", required_argument, NULL, 'n' },
        { "sandbox-dir", required_argument, NULL, 's' },
        { "template-file", required_argument, NULL, 't' },
        { "memory-mib", required_argument, NULL, 'm' },
        { "vcpus", required_argument, NULL, 'c' },
        { "vmm-overhead-mib", required_argument, NULL, 'o' },
        {},
    };
    const char *netns = NULL, *sandbox_dir = NULL, *template_file = NULL;
    uint32_t uid = 0, memory_mib = 0, vcpus = 1, overhead = 32;
    int c, r;

    log_set_ident("jail-run");
    while ((c = getopt_long(argc, argv, "+", opts, NULL)) >= 0) {
        switch (c) {
        case 'u':
            if (parse_u32(optarg, &uid) < 0 || uid == 0) {
                return 2;
            }
            break;
        case 'n':
            netns = optarg;
            break;
        case 's':
            sandbox_dir = optarg;
            break;
        case 't':
            template_file = optarg;
            break;
        case 'm':
            if (parse_u32(optarg, &memory_mib) < 0) {
                return 2;
            }
            break;
        case 'c':
            if (parse_u32(optarg, &vcpus) < 0 || vcpus == 0) {
                return 2;
            }
            break;
        case 'o':
            if (parse_u32(optarg, &overhead) < 0) {
                return 2;
            }
            break;
        default:
            return 2;
        }
    }
    if (!netns || uid == 0 || optind >= argc || argv[optind][0] != '/') {
        fprintf(stderr, "usage: jail-run --uid N --netns PATH [--sandbox-dir DIR] "
                        "[--template-file F] -- /PROGRAM ARGS...\n");
        return 2;
    }
    struct jail_config cfg = { .enabled = true,
                               .cgroups = memory_mib > 0,
                               .vmm_overhead_mib = overhead };
    r = jail_init(&cfg);
    if (r < 0) {
        return 1;
    }
    struct jail_files files = { 0 };
    const struct jail_files *vmm = jail_vmm_files();
    for (size_t i = 0; i < vmm->n; i++) {
        if (jail_files_add(&files, vmm->paths[i]) < 0) {
            return 1;
        }
    }
    r = jail_files_add_elf(&files, argv[optind]);
    if (r < 0) {
        log_error_errno(r, "cannot resolve '%s': %m", argv[optind]);
        return 1;
    }
    struct jail_spec spec;
    struct jail_bind binds[2];
    char template_dir[PATH_MAX];
    jail_vmm_spec_init(&spec);
    spec.path = argv[optind];
    spec.files = &files;
    spec.binds = binds;
    spec.n_binds = (size_t)jail_vmm_binds(sandbox_dir, template_file, binds, template_dir,
                                          sizeof(template_dir));
    spec.uid = uid;
    spec.gid = uid;
    spec.netns_fd = open(netns, O_RDONLY | O_CLOEXEC);
    spec.stdout_fd = 1;
    spec.stderr_fd = 2;
    if (spec.netns_fd < 0) {
        log_error_errno(errno, "cannot open '%s': %m", netns);
        return 1;
    }
    char name[64];
    struct cgroup *cg = NULL;
    snprintf(name, sizeof(name), "jail-run-%d", (int)getpid());
    if (memory_mib > 0) {
        struct runtime_config rc = { .memory_mib = memory_mib, .vcpus = vcpus };
        struct cgroup_limits limits;
        jail_vmm_limits(&rc, &limits);
        r = cgroup_create(name, &limits, &cg);
        if (r < 0) {
            log_error_errno(r, "cgroup_create: %m");
            return 1;
        }
        spec.cgroup = cg;
        char path[4096];
        if (cgroup_path(name, "memory", path, sizeof(path)) >= 0) {
            fprintf(stderr, "cgroup %s %s\n", cgroup_version_to_string(cgroup_version()), path);
        }
    }
    pid_t pid;
    usec_t setup = 0;
    r = jail_spawn(&spec, (const char *const *)argv + optind, &pid, &setup);
    if (r < 0) {
        log_error_errno(r, "jail_spawn: %m");
        (void)cgroup_remove(name);
        return 1;
    }
    fprintf(stderr, "setup_us %llu\n", (unsigned long long)setup);
    r = spawn_wait(pid);
    cgroup_free(cg);
    if (memory_mib > 0) {
        char dir[64];
        snprintf(dir, sizeof(dir), "/x/%s", name);
        jail_vmm_release(dir);
    }
    jail_files_done(&files);
    jail_done();
    return r < 0 ? 1 : r;
}
