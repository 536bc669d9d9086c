/*
 * space-gw: the egress gateway daemon (issue 9). Unprivileged after setup:
 * space-node (root) opens each sandbox's DNS socket and gateway listener
 * inside the sandbox's namespace and hands them over the control socket
 * (gw-proto.h); space-gw answers DNS (dns-proxy.h), gates and relays TCP
 * (gateway.h) from its own namespace, and sends one audit record per
 * decision back to the node (audit.h). One libevent loop, no threads: every
 * socket is non-blocking and every queue bounded, so one sandbox's flood
 * only ever waits on its own limits.
 *
 * Startup: options, the egress CA and the secrets keypair in --data-dir
 * (src/shared/ca.c, sealed-secret.h; both keys 0600, handed to --user), the
 * control socket, then the drop to --user, then "ready". The secrets private
 * key stays in memory (opening the sealed values policies bring, inject.h);
 * the process is not dumpable. SIGTERM/SIGINT: clean exit (connections are
 * cut; the node re-attaches a restarted gw).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/fileio.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "gw/audit.h"
#include "gw/ca-set.h"
#include "gw/control.h"
#include "gw/policy.h"
#include "gw/sandbox.h"
#include "gw/tls-term.h"
#include "shared/ca.h"
#include "shared/gw-proto.h"
#include "shared/listener.h"
#include "shared/sealed-secret.h"

static const char *arg_control_socket = GW_PROTO_SOCKET_DEFAULT;
static const char *arg_data_dir = "/var/lib/space/gw";
static const char *arg_upstream_dns = NULL;
static const char *arg_upstream_ca = NULL;
static const char *arg_ceiling = "internet";
static const char *arg_test_net = NULL;
static const char *arg_user = NULL;
static uint32_t arg_conns_per_sandbox = 256;
static uint32_t arg_dns_qps = 2000;
static uint32_t arg_dns_inflight = 256;
static uint32_t arg_max_sandboxes = 1024;

static void help(void)
{
    printf("usage: space-gw [options]\n"
           "  --control-socket PATH   the node's control socket (default %s)\n"
           "  --data-dir DIR          egress CA (ca.key, ca.crt; ca-next.* while rotating)\n"
           "                          and secrets keypair\n"
           "                          (secrets.key, secrets.pub) (default %s)\n"
           "  --upstream-dns IP[:PORT]  resolver for allowed names (default: the first\n"
           "                          nameserver of /etc/resolv.conf)\n"
           "  --upstream-ca FILE      extra CA bundle trusted for upstream TLS\n"
           "  --egress-ceiling deny|allowlist|internet  cap over every policy (default internet)\n"
           "  --egress-test-net CIDR  a benchmark range tests use as their internet\n"
           "  --user NAME             drop to this user once the socket and CA are open\n"
           "  --max-conns-per-sandbox N  open gateway connections per sandbox (default 256)\n"
           "  --dns-qps N             DNS queries per second per sandbox (default 2000)\n"
           "  --dns-inflight N        forwarded DNS queries per sandbox (default 256)\n"
           "  --max-sandboxes N       attached sandboxes (default 1024)\n"
           "  --log-level LEVEL       debug, info, warning, error\n",
           GW_PROTO_SOCKET_DEFAULT, arg_data_dir);
}

static int parse_count(const char *name, const char *s, uint32_t max, uint32_t *ret)
{
    if (parse_u32(s, ret) < 0 || *ret == 0 || *ret > max) {
        return log_error_errno(-EINVAL, "invalid --%s '%s' (1..%u)", name, s, max);
    }
    return 0;
}

static int parse_args(int argc, char **argv)
{
    static const struct option opts[] = {
        { "control-socket", required_argument, NULL, 's' },
        { "data-dir", required_argument, NULL, 'd' },
        { "upstream-dns", required_argument, NULL, 'D' },
        { "upstream-ca", required_argument, NULL, 'C' },
        { "egress-ceiling", required_argument, NULL, 'c' },
        { "egress-test-net", required_argument, NULL, 't' },
        { "user", required_argument, NULL, 'u' },
        { "max-conns-per-sandbox", required_argument, NULL, 'n' },
        { "dns-qps", required_argument, NULL, 'q' },
        { "dns-inflight", required_argument, NULL, 'i' },
        { "max-sandboxes", required_argument, NULL, 'm' },
        { "log-level", required_argument, NULL, 'L' },
        { "help", no_argument, NULL, 'h' },
        {},
    };
    int c, r;

    while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
        switch (c) {
        case 's':
            arg_control_socket = optarg;
            break;
        case 'd':
            arg_data_dir = optarg;
            break;
        case 'D':
            arg_upstream_dns = optarg;
            break;
        case 'C':
            arg_upstream_ca = optarg;
            break;
        case 'c':
            arg_ceiling = optarg;
            break;
        case 't':
            arg_test_net = optarg;
            break;
        case 'u':
            arg_user = optarg;
            break;
        case 'n':
            if (parse_count("max-conns-per-sandbox", optarg, 65536, &arg_conns_per_sandbox) < 0) {
                return -EINVAL;
            }
            break;
        case 'q':
            if (parse_count("dns-qps", optarg, 1000000, &arg_dns_qps) < 0) {
                return -EINVAL;
            }
            break;
        case 'i':
            if (parse_count("dns-inflight", optarg, 4096, &arg_dns_inflight) < 0) {
                return -EINVAL;
            }
            break;
        case 'm':
            if (parse_count("max-sandboxes", optarg, 65536, &arg_max_sandboxes) < 0) {
                return -EINVAL;
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
    if (optind < argc) {
        return log_error_errno(-EINVAL, "unexpected argument '%s'", argv[optind]);
    }
    return 1;
}

/* "IP[:PORT]", IPv4 (the gateway's namespace resolves over IPv4). */
static int parse_upstream(const char *s, struct sockaddr_in *ret)
{
    char ip[64];
    uint32_t port = 53;
    const char *colon = strchr(s, ':');
    size_t n = colon ? (size_t)(colon - s) : strlen(s);

    if (n >= sizeof(ip)) {
        return -EINVAL;
    }
    memcpy(ip, s, n);
    ip[n] = '\0';
    if (colon && (parse_u32(colon + 1, &port) < 0 || port == 0 || port > 65535)) {
        return -EINVAL;
    }
    *ret = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    return inet_pton(AF_INET, ip, &ret->sin_addr) == 1 ? 0 : -EINVAL;
}

static int upstream_from_resolv_conf(struct sockaddr_in *ret)
{
    char *text = NULL, *line, *save = NULL;
    int r = -ENOENT;

    if (read_file("/etc/resolv.conf", 65536, &text, NULL) < 0) {
        return -ENOENT;
    }
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char ns[64];
        if (sscanf(line, " nameserver %63s", ns) == 1 && parse_upstream(ns, ret) == 0) {
            r = 0;
            break;
        }
    }
    free(text);
    return r;
}

static int drop_privileges(const char *user)
{
    struct passwd *pw = getpwnam(user);

    if (!pw) {
        return log_error_errno(-ENOENT, "no user '%s'", user);
    }
    if (setgroups(0, NULL) < 0 || setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0) {
        return log_error_errno(-errno, "cannot drop to user '%s': %m", user);
    }
    if (setuid(0) == 0) {
        return log_error_errno(-EPERM, "could regain root after dropping to '%s'", user);
    }
    return 0;
}

/*
 * The data directory and its keys belong to the user space-gw runs as, so
 * the keys are readable by it alone (0600) and by root, never by the VMMs
 * or anyone else; the public files (ca.crt, secrets.pub) stay 0644.
 */
static int give_data_dir(const char *dir, const char *user)
{
    static const char *const files[] = { CA_KEY_FILE,           CA_CERT_FILE,
                                         CA_NEXT_KEY_FILE,      CA_NEXT_CERT_FILE,
                                         CA_PHASE_FILE,         SEALED_SECRET_KEY_FILE,
                                         SEALED_SECRET_PUB_FILE };
    struct passwd *pw = getpwnam(user);
    char p[PATH_MAX];

    if (!pw) {
        return log_error_errno(-ENOENT, "no user '%s'", user);
    }
    if (chown(dir, pw->pw_uid, pw->pw_gid) < 0) {
        return log_error_errno(-errno, "cannot give '%s' to '%s': %m", dir, user);
    }
    for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
        if (chown(p, pw->pw_uid, pw->pw_gid) < 0 && errno != ENOENT) {
            return log_error_errno(-errno, "cannot give '%s' to '%s': %m", p, user);
        }
    }
    return 0;
}

static int open_secrets_key(const char *dir, EVP_PKEY **ret)
{
    char p[PATH_MAX];
    int r = sealed_secret_keygen(dir);

    if (r < 0) {
        return log_error_errno(r, "cannot create the secrets keypair in '%s': %m", dir);
    }
    snprintf(p, sizeof(p), "%s/%s", dir, SEALED_SECRET_KEY_FILE);
    r = sealed_secret_load_private(p, ret);
    if (r < 0) {
        return log_error_errno(r, "cannot load the secrets key '%s': %m", p);
    }
    log_info("secrets key '%s' (public: '%s/%s')", p, dir, SEALED_SECRET_PUB_FILE);
    return 0;
}

static void sweep_cb(evutil_socket_t fd, short what, void *userdata)
{
    sandbox_sweep(userdata);
}

static void signal_cb(evutil_socket_t sig, short what, void *userdata)
{
    log_info("signal %d: stopping", (int)sig);
    event_base_loopbreak(userdata);
}

int main(int argc, char **argv)
{
    struct gw gw = { 0 };
    struct event *sigterm = NULL, *sigint = NULL, *sweep = NULL;
    struct timeval ten = { 10, 0 };
    char dns[INET_ADDRSTRLEN];
    int r;

    log_set_ident("space-gw");
    r = parse_args(argc, argv);
    if (r <= 0) {
        return r < 0 ? 2 : 0;
    }
    signal(SIGPIPE, SIG_IGN);
    r = policy_ceiling_from_string(arg_ceiling, &gw.env.ceiling);
    if (r < 0) {
        log_error("invalid --egress-ceiling '%s' (deny, allowlist or internet)", arg_ceiling);
        return 2;
    }
    if (arg_test_net && policy_env_set_test_net(&gw.env, arg_test_net) < 0) {
        log_error("invalid --egress-test-net '%s' (a range inside 198.18.0.0/15 or the "
                  "documentation blocks)",
                  arg_test_net);
        return 2;
    }
    if (arg_upstream_dns ? parse_upstream(arg_upstream_dns, &gw.upstream_dns) < 0
                         : upstream_from_resolv_conf(&gw.upstream_dns) < 0) {
        log_error("invalid --upstream-dns '%s' (IPv4[:PORT])",
                  arg_upstream_dns ? arg_upstream_dns : "(from /etc/resolv.conf)");
        return 2;
    }
    if (arg_upstream_ca && access(arg_upstream_ca, R_OK) < 0) {
        log_error_errno(-errno, "cannot read --upstream-ca '%s': %m", arg_upstream_ca);
        return 2;
    }
    gw.limits = (struct gw_limits){
        .conns_per_sandbox = arg_conns_per_sandbox,
        .dns_qps = arg_dns_qps,
        .dns_inflight = arg_dns_inflight,
        .max_sandboxes = arg_max_sandboxes,
    };
    (void)listener_raise_nofile();
    gw.max_conns = listener_conns_from_rlimit(6); /* 2 sockets + 2 splice pipes */

    r = mkdir_p(arg_data_dir, 0700);
    if (r >= 0) {
        r = tls_term_new(arg_data_dir, arg_upstream_ca, &gw.tls);
    }
    if (r < 0) {
        log_error_errno(r, "cannot open the egress CA in '%s': %m", arg_data_dir);
        return 1;
    }
    r = open_secrets_key(arg_data_dir, (EVP_PKEY **)&gw.secrets_key);
    if (r < 0) {
        goto out;
    }
    if (arg_user && geteuid() == 0) {
        r = give_data_dir(arg_data_dir, arg_user);
        if (r < 0) {
            goto out;
        }
    }
    r = audit_new(0, &gw.audit);
    if (r < 0) {
        goto out;
    }
    gw.base = event_base_new();
    if (!gw.base) {
        r = log_error_errno(-ENOMEM, "cannot create event loop");
        goto out;
    }
    r = control_new(&gw, arg_control_socket, &gw.control);
    if (r < 0) {
        log_error_errno(r, "cannot listen on '%s': %m", arg_control_socket);
        goto out;
    }
    if (arg_user) {
        r = drop_privileges(arg_user);
        if (r < 0) {
            goto out;
        }
    }
    (void)prctl(PR_SET_DUMPABLE, 0); /* the CA key, the secrets key and secrets are in memory */
    sigterm = evsignal_new(gw.base, SIGTERM, signal_cb, gw.base);
    sigint = evsignal_new(gw.base, SIGINT, signal_cb, gw.base);
    sweep = event_new(gw.base, -1, EV_PERSIST, sweep_cb, &gw);
    if (!sigterm || !sigint || !sweep || event_add(sigterm, NULL) < 0 ||
        event_add(sigint, NULL) < 0 || event_add(sweep, &ten) < 0) {
        r = -ENOMEM;
        goto out;
    }
    inet_ntop(AF_INET, &gw.upstream_dns.sin_addr, dns, sizeof(dns));
    log_info("ready: control socket '%s', upstream DNS %s:%u, ceiling %s, test net %s, "
             "%u connections",
             arg_control_socket, dns, (unsigned)ntohs(gw.upstream_dns.sin_port), arg_ceiling,
             arg_test_net ? arg_test_net : "(none)", gw.max_conns);
    printf("space-gw: ready\n");
    fflush(stdout);
    event_base_dispatch(gw.base);
    r = 0;
out:
    sandbox_free_all(&gw);
    gw.control = control_free(gw.control);
    audit_free(gw.audit);
    if (sigterm) {
        event_free(sigterm);
    }
    if (sigint) {
        event_free(sigint);
    }
    if (sweep) {
        event_free(sweep);
    }
    if (gw.base) {
        event_base_free(gw.base);
    }
    EVP_PKEY_free((EVP_PKEY *)gw.secrets_key);
    tls_term_free(gw.tls);
    log_info("stopped");
    return r < 0 ? 1 : 0;
}
