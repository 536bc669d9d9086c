/*
 * space-node: the per-host daemon and the only root process. It supervises
 * the VMs (runtime.h), their disks (clone.h) and networks (netslot.h), and
 * serves the node HTTP API (http-api.c) on a root-only Unix socket (there is
 * no TCP listener: the API has no authentication of its own; the cluster
 * issue brings authenticated node links). One libevent loop; blocking work
 * on a capped worker pool (manager.c). SIGTERM stops the node within 5 s and
 * leaves the sandboxes running; the next start re-attaches them.
 */
#include <errno.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/thread.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "basic/fault.h"
#include "basic/fd-util.h"
#include "basic/fileio.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "basic/socket-util.h"
#include "node/capacity.h"
#include "node/clone.h"
#include "node/console.h"
#include "node/jail.h"
#include "node/manager.h"
#include "node/netrate.h"
#include "node/pool.h"
#include "node/snapshot.h"
#include "node/tunnel.h"
#include "shared/gw-proto.h"

static const char *arg_data_dir = "/var/lib/space";
static const char *arg_socket = "/run/space/node.sock";
static const char *arg_tunnel_socket = NULL; /* default: tunnel.sock next to --socket */
static const char *arg_runtime = "qemu";
static enum runtime_accel arg_accel = RUNTIME_ACCEL_AUTO;
static usec_t arg_ready_timeout = 60 * USEC_PER_SEC;
static unsigned arg_max_sandboxes = 64;
static usec_t arg_max_exec_timeout = 3600 * USEC_PER_SEC;
static unsigned arg_max_workers = 32;
static unsigned arg_max_queue = 256;
static uint32_t arg_console_log_max = CONSOLE_LOG_MAX_DEFAULT;
static const char *arg_share_dir = NULL;
static const char *arg_agent = NULL;
static const char *arg_cache_dir = "/var/cache/space";
static const char *arg_gw_socket = GW_PROTO_SOCKET_DEFAULT; /* NULL: --no-gw */
static bool arg_jail = true;
static bool arg_cgroups = true;
static unsigned arg_vmm_overhead_mib = JAIL_VMM_OVERHEAD_MIB_DEFAULT;
static uint32_t arg_memory_budget_mib = 0; /* 0: MemTotal - 1 GiB */
static uint32_t arg_vcpu_budget = 0;       /* 0: host CPUs x CAPACITY_VCPU_OVERCOMMIT */
/* Per-VM disk throttling defaults: far above what a boot or a build needs, far below what
 * takes a shared host disk away from everyone else. */
static uint64_t arg_disk_bps = 100ull << 20;
static uint32_t arg_disk_iops = 5000;
static uint64_t arg_net_bps = 12500000; /* 100 Mbit/s */
static bool arg_snapshots = true;
static uint32_t arg_tb_size = RUNTIME_TB_SIZE_DEFAULT_MIB;
static uint32_t arg_pool;
static uint32_t arg_pool_max;           /* 0: --pool (a fixed size) */
static uint32_t arg_pool_window_s = 60; /* creates per pool are counted over this */

static void help(void)
{
    printf("usage: space-node [options]\n"
           "  --data-dir DIR        state, templates and sandbox disks (default %s)\n"
           "  --socket PATH         Unix socket of the node API (default %s)\n"
           "  --tunnel-socket PATH  Unix socket for tunnels into sandboxes (default: tunnel.sock\n"
           "                        in the directory of --socket)\n"
           "  --accel auto|kvm|tcg  force the accelerator (default: probe)\n"
           "  --ready-timeout SEC   guest boot deadline (default 60)\n"
           "  --max-sandboxes N     capacity of this node (default 64)\n"
           "  --max-exec-timeout SEC  deadline of an exec that sets none, and the most one may\n"
           "                        ask for (default 3600)\n"
           "  --max-workers N       worker threads for blocking work (default 32)\n"
           "  --max-queue N         jobs waiting for a worker before 503 (default 256)\n"
           "  --console-log-max B   cap of each sandbox's console.log (default 1048576)\n"
           "  --share-dir DIR       template recipes and tools/ (enables template builds)\n"
           "  --agent PATH          the space-agent binary templates get\n"
           "  --cache-dir DIR       template build cache (default /var/cache/space)\n"
           "  --gw-socket PATH      space-gw's control socket, for egress (default %s)\n"
           "  --no-gw               no egress at all: sandboxes have no network beyond the node\n"
           "  --no-jail             debugging only: VMMs run without the jail (jail.h)\n"
           "  --no-cgroups          VMMs run without per-sandbox cgroup limits\n"
           "  --vmm-overhead-mib N  memory a VMM may use beyond its guest's RAM (default 256)\n"
           "  --memory-budget-mib N guest RAM + VMM overhead of all sandboxes at most (default:\n"
           "                        the host's memory less 1 GiB); creates beyond it get 503\n"
           "  --vcpu-budget N       vCPUs of all sandboxes at most (default: host CPUs x %u);\n"
           "                        creates beyond it get 503\n"
           "  --disk-bps N          each sandbox's disk reads + writes in bytes/s (default\n"
           "                        104857600; 0: unthrottled)\n"
           "  --disk-iops N         each sandbox's disk requests/s (default 5000; 0: unthrottled)\n"
           "  --net-bps N           each sandbox's network rate, bytes/s each way (default\n"
           "                        12500000 = 100 Mbit/s; 0: unshaped); a create's net_bps\n"
           "                        may ask for less\n"
           "  --snapshots on|off    create by restoring template snapshots (default on)\n"
           "  --tb-size MIB         TCG translation buffer per VM (default %u)\n"
           "  --pool N              keep N restored, paused instances per template ready for\n"
           "                        creates (default 0: off; needs --snapshots on)\n"
           "  --pool-max N          under load, up to N: as many as creates asked for in the\n"
           "                        last --pool-window, within the budgets (default: --pool)\n"
           "  --pool-window S       seconds creates are counted over; quiet that long, a pool\n"
           "                        is back to --pool (default 60)\n"
           "  --log-level LEVEL     debug, info, warning, error\n",
           arg_data_dir, arg_socket, GW_PROTO_SOCKET_DEFAULT, CAPACITY_VCPU_OVERCOMMIT,
           RUNTIME_TB_SIZE_DEFAULT_MIB);
}

static int parse_args(int argc, char **argv)
{
    static const struct option opts[] = {
        { "data-dir", required_argument, NULL, 'd' },
        { "socket", required_argument, NULL, 's' },
        { "tunnel-socket", required_argument, NULL, 'T' },
        { "accel", required_argument, NULL, 'a' },
        { "ready-timeout", required_argument, NULL, 'r' },
        { "max-sandboxes", required_argument, NULL, 'm' },
        { "max-exec-timeout", required_argument, NULL, 'E' },
        { "max-workers", required_argument, NULL, 'W' },
        { "max-queue", required_argument, NULL, 'Q' },
        { "console-log-max", required_argument, NULL, 'c' },
        { "share-dir", required_argument, NULL, 'S' },
        { "agent", required_argument, NULL, 'A' },
        { "cache-dir", required_argument, NULL, 'C' },
        { "gw-socket", required_argument, NULL, 'G' },
        { "no-gw", no_argument, NULL, 'N' },
        { "no-jail", no_argument, NULL, 'J' },
        { "no-cgroups", no_argument, NULL, 'K' },
        { "vmm-overhead-mib", required_argument, NULL, 'O' },
        { "memory-budget-mib", required_argument, NULL, 'B' },
        { "vcpu-budget", required_argument, NULL, 'V' },
        { "disk-bps", required_argument, NULL, 'D' },
        { "disk-iops", required_argument, NULL, 'I' },
        { "net-bps", required_argument, NULL, 'R' },
        { "snapshots", required_argument, NULL, 'P' },
        { "tb-size", required_argument, NULL, 'Z' },
        { "pool", required_argument, NULL, 'p' },
        { "pool-max", required_argument, NULL, 'X' },
        { "pool-window", required_argument, NULL, 'w' },
        { "log-level", required_argument, NULL, 'L' },
        { "help", no_argument, NULL, 'h' },
        {},
    };
    int c, r;
    uint32_t v;

    while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
        switch (c) {
        case 'd':
            arg_data_dir = optarg;
            break;
        case 's':
            arg_socket = optarg;
            break;
        case 'T':
            arg_tunnel_socket = optarg;
            break;
        case 'a':
            r = runtime_accel_from_string(optarg);
            if (r < 0) {
                return log_error_errno(r, "invalid --accel '%s'", optarg);
            }
            arg_accel = (enum runtime_accel)r;
            break;
        case 'r':
            if (parse_u32(optarg, &v) < 0 || v == 0) {
                return log_error_errno(-EINVAL, "invalid --ready-timeout '%s'", optarg);
            }
            arg_ready_timeout = v * USEC_PER_SEC;
            break;
        case 'm':
            if (parse_u32(optarg, &arg_max_sandboxes) < 0) {
                return log_error_errno(-EINVAL, "invalid --max-sandboxes '%s'", optarg);
            }
            break;
        case 'E':
            if (parse_u32(optarg, &v) < 0 || v == 0) {
                return log_error_errno(-EINVAL, "invalid --max-exec-timeout '%s'", optarg);
            }
            arg_max_exec_timeout = v * USEC_PER_SEC;
            break;
        case 'W':
            if (parse_u32(optarg, &arg_max_workers) < 0 || arg_max_workers == 0 ||
                arg_max_workers > 1024) {
                return log_error_errno(-EINVAL, "invalid --max-workers '%s' (1..1024)", optarg);
            }
            break;
        case 'Q':
            if (parse_u32(optarg, &arg_max_queue) < 0 || arg_max_queue > 65536) {
                return log_error_errno(-EINVAL, "invalid --max-queue '%s' (0..65536)", optarg);
            }
            break;
        case 'c':
            if (parse_u32(optarg, &arg_console_log_max) < 0 ||
                arg_console_log_max < CONSOLE_LOG_MAX_MIN) {
                return log_error_errno(-EINVAL, "invalid --console-log-max '%s' (minimum %u)",
                                       optarg, CONSOLE_LOG_MAX_MIN);
            }
            break;
        case 'S':
            arg_share_dir = optarg;
            break;
        case 'A':
            arg_agent = optarg;
            break;
        case 'C':
            arg_cache_dir = optarg;
            break;
        case 'G':
            if (!*optarg || strlen(optarg) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
                return log_error_errno(-EINVAL, "invalid --gw-socket '%s'", optarg);
            }
            arg_gw_socket = optarg;
            break;
        case 'N':
            arg_gw_socket = NULL;
            break;
        case 'Z':
            if (parse_u32(optarg, &arg_tb_size) < 0 || arg_tb_size < 1 || arg_tb_size > 4096) {
                return log_error_errno(-EINVAL, "invalid --tb-size '%s' (1..4096 MiB)", optarg);
            }
            break;
        case 'J':
            arg_jail = false;
            break;
        case 'K':
            arg_cgroups = false;
            break;
        case 'B':
            if (parse_u32(optarg, &arg_memory_budget_mib) < 0 || arg_memory_budget_mib == 0) {
                return log_error_errno(-EINVAL, "invalid --memory-budget-mib '%s'", optarg);
            }
            break;
        case 'V':
            if (parse_u32(optarg, &arg_vcpu_budget) < 0 || arg_vcpu_budget == 0) {
                return log_error_errno(-EINVAL, "invalid --vcpu-budget '%s'", optarg);
            }
            break;
        case 'D':
            /* QEMU's throttle wants a rate it can split into 1/10 s bursts. */
            if (parse_u64(optarg, &arg_disk_bps) < 0 || (arg_disk_bps > 0 && arg_disk_bps < 4096) ||
                arg_disk_bps > (1ull << 40)) {
                return log_error_errno(-EINVAL, "invalid --disk-bps '%s' (0, or 4096..2^40)",
                                       optarg);
            }
            break;
        case 'I':
            if (parse_u32(optarg, &arg_disk_iops) < 0 ||
                (arg_disk_iops > 0 && arg_disk_iops < 10) || arg_disk_iops > 10000000) {
                return log_error_errno(-EINVAL, "invalid --disk-iops '%s' (0, or 10..10000000)",
                                       optarg);
            }
            break;
        case 'R':
            if (parse_u64(optarg, &arg_net_bps) < 0 ||
                (arg_net_bps > 0 && arg_net_bps < NETRATE_MIN_BPS) ||
                arg_net_bps > NETRATE_MAX_BPS) {
                return log_error_errno(-EINVAL, "invalid --net-bps '%s' (0, or %llu..2^40)", optarg,
                                       NETRATE_MIN_BPS);
            }
            break;
        case 'O':
            if (parse_u32(optarg, &arg_vmm_overhead_mib) < 0 || arg_vmm_overhead_mib < 32 ||
                arg_vmm_overhead_mib > 65536) {
                return log_error_errno(-EINVAL, "invalid --vmm-overhead-mib '%s' (32..65536)",
                                       optarg);
            }
            break;
        case 'P':
            if (strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0) {
                return log_error_errno(-EINVAL, "invalid --snapshots '%s' (on or off)", optarg);
            }
            arg_snapshots = strcmp(optarg, "on") == 0;
            break;
        case 'p':
            if (parse_u32(optarg, &arg_pool) < 0 || arg_pool > 64) {
                return log_error_errno(-EINVAL, "invalid --pool '%s' (0..64)", optarg);
            }
            break;
        case 'X':
            if (parse_u32(optarg, &arg_pool_max) < 0 || arg_pool_max > 64) {
                return log_error_errno(-EINVAL, "invalid --pool-max '%s' (0..64)", optarg);
            }
            break;
        case 'w':
            if (parse_u32(optarg, &arg_pool_window_s) < 0 || arg_pool_window_s < 1 ||
                arg_pool_window_s > 86400) {
                return log_error_errno(-EINVAL, "invalid --pool-window '%s' (1..86400 seconds)",
                                       optarg);
            }
            break;
        case 'L':
            r = log_level_from_string(optarg);
            if (r < 0) {
                return log_error_errno(r, "invalid --log-level '%s'", optarg);
            }
            log_set_level((enum log_level)r);
            break;
        case 'h':
            help();
            return 0;
        default:
            return -EINVAL;
        }
    }
    return 1;
}

/*
 * The KVM probe boots a guest, which takes seconds when KVM is broken, so its
 * answer is cached per (guest kernel, host kernel) in the data dir.
 */
static enum runtime_accel detect_accel(const char *kernel)
{
    char cache[PATH_MAX], key[512], *old = NULL;
    struct utsname u;
    struct stat st;
    enum runtime_accel a;

    if (arg_accel != RUNTIME_ACCEL_AUTO) {
        log_info("accelerator forced to '%s'", runtime_accel_to_string(arg_accel));
        return arg_accel;
    }
    if (stat(kernel, &st) < 0) {
        log_info("no guest kernel at '%s' to probe KVM with, using tcg", kernel);
        return RUNTIME_ACCEL_TCG;
    }
    uname(&u);
    snprintf(key, sizeof(key), "%s %lld %lld %s", kernel, (long long)st.st_size,
             (long long)st.st_mtime, u.release);
    snprintf(cache, sizeof(cache), "%s/accel-probe", arg_data_dir);
    if (read_file(cache, 4096, &old, NULL) >= 0) {
        char *nl = strchr(old, '\n');
        if (nl && strncmp(nl + 1, key, strlen(key)) == 0) {
            *nl = '\0';
            int cached = runtime_accel_from_string(old);
            free(old);
            if (cached > 0) {
                log_info("accelerator: %s (cached probe result)",
                         runtime_accel_to_string((enum runtime_accel)cached));
                return (enum runtime_accel)cached;
            }
        } else {
            free(old);
        }
    }
    a = runtime_detect_accel(RUNTIME_ACCEL_AUTO, kernel);
    log_info("accelerator: %s (%s)", runtime_accel_to_string(a),
             a == RUNTIME_ACCEL_KVM ? "KVM runs an ordinary guest"
                                    : "KVM missing or cannot run an ordinary guest; software "
                                      "emulation");
    char text[600];
    snprintf(text, sizeof(text), "%s\n%s\n", runtime_accel_to_string(a), key);
    (void)write_file_atomic(cache, text, strlen(text));
    return a;
}

/* The host's memory less 1 GiB for the host itself and the node's own daemons. */
static uint64_t default_memory_budget(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    uint64_t mib = pages > 0 && size > 0 ? ((uint64_t)pages * (uint64_t)size) >> 20 : 0;
    return mib > 2048 ? mib - 1024 : mib / 2;
}

int main(int argc, char **argv)
{
    struct event_base *base = NULL;
    struct manager *m = NULL;
    struct tunnel *tunnel = NULL;
    char path[PATH_MAX], tunnel_path[PATH_MAX];
    int fd = -EBADF;
    int r;

    log_set_ident("space-node");
    r = parse_args(argc, argv);
    if (r <= 0) {
        return r < 0 ? 2 : 0;
    }
    if (geteuid() != 0) {
        log_error("space-node must run as root (it creates namespaces and taps)");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    if (fault_points_armed()) {
        log_warning("fault points armed (SPACE_FAULT=%s): a test build under test",
                    getenv("SPACE_FAULT"));
    }
    /* QEMU daemonizes; as subreaper we still reap it when it exits. */
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1);

    snprintf(path, sizeof(path), "%s/instances", arg_data_dir);
    r = mkdir_p(path, 0700);
    if (r < 0) {
        log_error_errno(r, "cannot create '%s': %m", path);
        return 1;
    }
    if (!clone_supported(arg_data_dir)) {
        log_warning("'%s' has no reflink support: every sandbox disk will be a full copy",
                    arg_data_dir);
    }

    struct vm_host host = {
        .data_dir = arg_data_dir,
        .runtime = runtime_find(arg_runtime),
        .ready_timeout = arg_ready_timeout,
        .max_exec_timeout = arg_max_exec_timeout,
        .console_log_max = arg_console_log_max,
        .snapshots = arg_snapshots,
        .tb_size_mib = arg_tb_size,
        .disk_bps = arg_disk_bps,
        .disk_iops = arg_disk_iops,
        .net_bps = arg_net_bps,
    };
    struct manager_limits limits = { .workers = arg_max_workers, .queue = arg_max_queue };
    snprintf(path, sizeof(path), "%s/templates/base/vmlinux", arg_data_dir);
    host.accel = detect_accel(path);
    /* Before any thread: it runs ldd and builds the seccomp filter once. */
    struct jail_config jail_cfg = { .enabled = arg_jail,
                                    .cgroups = arg_cgroups,
                                    .vmm_overhead_mib = arg_vmm_overhead_mib };
    r = jail_init(&jail_cfg);
    if (r < 0) {
        return 1;
    }
    /* Snapshots of an older template build, QEMU or size past the bound (snapshot.h). */
    r = snapshot_cleanup(&host);
    if (r > 0) {
        log_info("removed %d stale template snapshot(s)", r);
    }

    evthread_use_pthreads();
    base = event_base_new();
    if (!base) {
        log_error("cannot create event loop");
        return 1;
    }
    r = manager_new(base, &host, &limits, &m);
    if (r < 0) {
        log_error_errno(r, "cannot start: %m");
        goto out;
    }
    m->max_sandboxes = arg_max_sandboxes;
    m->vmm_overhead_mib = arg_vmm_overhead_mib;
    m->memory_budget_mib = arg_memory_budget_mib ? arg_memory_budget_mib : default_memory_budget();
    m->vcpu_budget = arg_vcpu_budget ? arg_vcpu_budget : capacity_default_vcpu_budget();
    log_info("memory budget: %llu MiB (guest RAM + %u MiB per VMM), vCPU budget %u (%s), disk "
             "throttled to %llu B/s and %u IOPS per sandbox (0: unthrottled), network shaped to "
             "%llu B/s each way (0: unshaped)",
             (unsigned long long)m->memory_budget_mib, arg_vmm_overhead_mib, m->vcpu_budget,
             arg_vcpu_budget ? "--vcpu-budget" : "host CPUs x the default overcommit",
             (unsigned long long)arg_disk_bps, arg_disk_iops, (unsigned long long)arg_net_bps);
    m->share_dir = arg_share_dir;
    if (arg_pool > 0 && arg_snapshots) {
        r = pool_new(m, arg_pool, MAX(arg_pool_max, arg_pool),
                     (usec_t)arg_pool_window_s * USEC_PER_SEC, &m->warm);
        if (r < 0) {
            log_error_errno(r, "cannot set up the warm pool: %m");
            goto out;
        }
    }
    m->agent_path = arg_agent;
    m->cache_dir = arg_cache_dir;

    /* Root only: the socket is the node's whole authority. */
    fd = socket_listen_unix(arg_socket, 0600);
    if (fd < 0 || !evhttp_accept_socket_with_handle(m->http, fd)) {
        r = log_error_errno(fd < 0 ? fd : -EIO, "cannot listen on '%s': %m", arg_socket);
        goto out;
    }
    if (arg_tunnel_socket) {
        snprintf(tunnel_path, sizeof(tunnel_path), "%s", arg_tunnel_socket);
    } else {
        const char *slash = strrchr(arg_socket, '/');
        snprintf(tunnel_path, sizeof(tunnel_path), "%.*stunnel.sock",
                 slash ? (int)(slash - arg_socket + 1) : 0, arg_socket);
    }
    r = tunnel_new(m, tunnel_path, &tunnel);
    if (r < 0) {
        log_error_errno(r, "cannot listen on '%s': %m", tunnel_path);
        goto out;
    }
    if (arg_gw_socket) {
        char node_name[HOST_NAME_MAX + 1] = "";
        if (gethostname(node_name, sizeof(node_name)) < 0 || !node_name[0]) {
            snprintf(node_name, sizeof(node_name), "space-node");
        }
        node_name[HOST_NAME_MAX] = '\0';
        r = manager_enable_egress(m, arg_gw_socket, node_name);
        if (r < 0) {
            log_error_errno(r, "cannot set up the space-gw client: %m");
            goto out;
        }
    }
    log_info("ready: socket '%s', tunnels '%s', data '%s', runtime %s, accel %s, "
             "%zu sandboxes re-attached, egress %s%s",
             arg_socket, tunnel_path, arg_data_dir, host.runtime->name,
             runtime_accel_to_string(host.accel), m->n_vms,
             arg_gw_socket ? "through space-gw at " : "off (--no-gw)",
             arg_gw_socket ? arg_gw_socket : "");
    event_base_dispatch(base);
    r = 0;
    if (manager_jobs_pending(m) > 0) {
        /* Workers still hold vms and job structs: exit without freeing under them. Their
         * instances are on disk; the next start re-attaches or destroys each. */
        (void)unlink(arg_socket);
        log_info("stopped with %u job(s) cut off", manager_jobs_pending(m));
        _exit(0);
    }
out:
    (void)unlink(arg_socket);
    tunnel_free(tunnel);
    manager_free(m);
    event_base_free(base);
    jail_done();
    log_info("stopped");
    return r < 0 ? 1 : 0;
}
