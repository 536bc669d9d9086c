/*
 * space up [--detach] [OPTIONS] / space down
 *
 * up is idempotent: it starts whichever of space-gw, space-node and
 * space-api does not answer (building or confirming the base template first
 * when the node must start), each in its own session logging to
 * <data>/<name>.log, and waits until all answer: the node and the api on
 * /health, space-gw by listening on its control socket. space-gw (the
 * egress gateway, issue 9: DNS proxy, SNI/Host-checking gateway, audit)
 * starts first with --egress-ceiling, --upstream-dns and --upstream-ca and
 * its CA in <data>/gw; the node is pointed at its socket (--gw-socket).
 * Without a space-gw binary, up says so and goes on without egress (every
 * sandbox denied everything), unless an egress flag asked for it: then it
 * is an error. A restarted node re-attaches the sandboxes
 * that kept running. With --detach it returns then and prints shell
 * `export` lines for the E2B SDKs (eval "$(space up --detach)"), all status
 * going to stderr; without it, it stays in the foreground until interrupted
 * and then stops both.
 *
 * down [--kill-sandboxes] stops them with SIGTERM (api, node, then gw). Sandboxes keep running
 * (the next up re-attaches them) unless --kill-sandboxes, which kills every
 * sandbox through the node first, leaving no VM or network namespace.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/fileio.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "basic/time-util.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/help.h"
#include "shared/http-client.h"
#include "shared/spawn.h"

#define UP_TIMEOUT (180 * USEC_PER_SEC)
/* space-gw drops to this user when it exists (it needs no privilege after start). */
#define GW_USER "nobody"

static const char *env_or(const char *name, const char *def)
{
    const char *s = getenv(name);
    return s && *s ? s : def;
}

static const char *node_socket(void)
{
    return env_or("SPACE_NODE_SOCKET", "/run/space/node.sock");
}

static const char *tunnel_socket(void)
{
    return env_or("SPACE_TUNNEL_SOCKET", "/run/space/tunnel.sock");
}

/* space-gw's control socket (GW_PROTO_SOCKET_DEFAULT under the default run dir). */
static void gw_socket(char *buf, size_t n)
{
    snprintf(buf, n, "%s/gw.sock", env_or("SPACE_RUN_DIR", "/run/space"));
}

static void pidfile(const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s.pid", env_or("SPACE_RUN_DIR", "/run/space"), name);
}

static bool healthy(const char *socket)
{
    json_t *res = NULL;
    int status = 0;
    int r = http_client_unix_json(socket, "GET", "/health", NULL, 2 * USEC_PER_SEC, 1 << 16,
                                  &status, &res);
    json_decref(res);
    return r >= 0 && status == 200;
}

/* space-gw speaks no HTTP: it is up once its control socket (SOCK_SEQPACKET) accepts. A
 * connection that never says hello is no session to it (gw-proto.h). */
static bool listening(const char *socket_path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd;
    bool ok;

    if (strlen(socket_path) >= sizeof(sa.sun_path)) {
        return false;
    }
    memcpy(sa.sun_path, socket_path, strlen(socket_path));
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return false;
    }
    ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close_safe(fd);
    return ok;
}

/* kill(pid, 0) succeeds on zombies, and our init may never reap: read the state instead. */
static bool process_running(pid_t pid)
{
    char path[64], *stat = NULL;
    bool running;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (read_file(path, 4096, &stat, NULL) < 0) {
        return false;
    }
    char *paren = strrchr(stat, ')');
    running = paren && paren[1] == ' ' && paren[2] != 'Z' && paren[2] != 'X';
    free(stat);
    return running;
}

typedef bool (*ready_fn)(const char *socket);

/* Starts argv in its own session, logging to <data>/<name>.log, and waits until ready. */
static int start_daemon(const char *name, const char *const *argv, const char *socket,
                        ready_fn ready)
{
    char log_path[PATH_MAX], pid_path[PATH_MAX], text[32];
    int log_fd;
    pid_t pid;
    int r;

    snprintf(log_path, sizeof(log_path), "%s/%s.log", client_data_dir(), name);
    log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (log_fd < 0) {
        fprintf(stderr, "space: cannot open '%s': %s\n", log_path, strerror(errno));
        return -errno;
    }
    struct spawn_opts opts = { .argv = argv,
                               .stdin_fd = -1,
                               .stdout_fd = log_fd,
                               .stderr_fd = log_fd,
                               .netns_fd = -1,
                               .new_session = true };
    r = spawn_start(&opts, &pid);
    close_safe(log_fd);
    if (r < 0) {
        fprintf(stderr, "space: cannot start %s: %s\n", name, strerror(-r));
        return r;
    }
    pidfile(name, pid_path, sizeof(pid_path));
    snprintf(text, sizeof(text), "%d\n", (int)pid);
    (void)write_file_atomic(pid_path, text, strlen(text));

    usec_t deadline = now_monotonic() + UP_TIMEOUT;
    while (now_monotonic() < deadline) {
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            fprintf(stderr, "space: %s exited during start; see '%s'\n", name, log_path);
            return -ECHILD;
        }
        if (ready(socket)) {
            return 0;
        }
        sleep_usec(50 * USEC_PER_MSEC);
    }
    fprintf(stderr, "space: %s did not become ready; see '%s'\n", name, log_path);
    return -ETIMEDOUT;
}

/* The pid in <run>/<name>.pid: 0 when there is none, -EINVAL when it is garbage. */
static int read_pidfile(const char *name, pid_t *ret)
{
    char path[PATH_MAX], *text = NULL;
    uint32_t pid;

    pidfile(name, path, sizeof(path));
    *ret = 0;
    if (read_file(path, 64, &text, NULL) < 0) {
        return 0;
    }
    text[strcspn(text, "\n")] = '\0';
    int r = parse_u32(text, &pid);
    free(text);
    if (r < 0 || pid < 2 || pid > INT32_MAX) {
        fprintf(stderr, "space: invalid pidfile '%s'\n", path);
        return -EINVAL;
    }
    *ret = (pid_t)pid;
    return 0;
}

/*
 * Starts the daemon unless it answers /health already. One that still runs
 * but does not answer (starting, or stuck) is waited for, never doubled.
 */
static int ensure_daemon_ready(const char *name, const char *const *argv, const char *socket,
                               ready_fn ready)
{
    pid_t pid = 0;

    if (ready(socket)) {
        return 0;
    }
    (void)read_pidfile(name, &pid);
    if (pid > 0 && process_running(pid)) {
        usec_t deadline = now_monotonic() + UP_TIMEOUT;
        fprintf(stderr, "space: %s (pid %d) runs but does not answer yet, waiting\n", name,
                (int)pid);
        while (now_monotonic() < deadline && process_running(pid)) {
            if (ready(socket)) {
                return 0;
            }
            sleep_usec(100 * USEC_PER_MSEC);
        }
        if (process_running(pid)) {
            fprintf(stderr, "space: %s (pid %d) does not answer on '%s'; stop it first\n", name,
                    (int)pid, socket);
            return -ETIMEDOUT;
        }
    }
    fprintf(stderr, "space: starting %s\n", name);
    return start_daemon(name, argv, socket, ready);
}

static int ensure_daemon(const char *name, const char *const *argv, const char *socket)
{
    return ensure_daemon_ready(name, argv, socket, healthy);
}

/* Whether the node binary takes option (its --help lists it): an older one has no gateway. */
static bool node_knows(const char *node, const char *option)
{
    const char *argv[] = { node, "--help", NULL };
    char *out = NULL;
    bool yes;

    if (spawn_run(argv, -1, NULL, &out, 1 << 16) < 0) {
        return false;
    }
    yes = out && strstr(out, option);
    free(out);
    return yes;
}

struct egress_opts {
    const char *ceiling, *upstream_dns, *upstream_ca;
};

/*
 * Starts space-gw unless it listens already. 1: running, the node gets --gw-socket; 0: no
 * space-gw binary (or a node that cannot use one) and nothing asked for egress: go on
 * without it; -1: an error, printed.
 */
static int ensure_gw(const char *node, const struct egress_opts *e, char *sock, size_t n)
{
    char gw[PATH_MAX], dir[PATH_MAX];
    bool asked = e->ceiling || e->upstream_dns || e->upstream_ca;

    gw_socket(sock, n);
    bool have_gw = client_find_gw(gw, sizeof(gw)) >= 0 && access(gw, X_OK) == 0;
    if (!have_gw || !node_knows(node, "--gw-socket")) {
        const char *why =
            !have_gw ? "no space-gw binary (set SPACE_GW)" : "this space-node has no --gw-socket";
        if (asked) {
            fprintf(stderr,
                    "space: --egress-ceiling/--upstream-dns/--upstream-ca need space-gw: "
                    "%s\n",
                    why);
            return -1;
        }
        fprintf(stderr, "space: %s: starting without egress (sandboxes reach nothing)\n", why);
        return 0;
    }
    snprintf(dir, sizeof(dir), "%s/gw", client_data_dir());
    const char *argv[16] = { gw, "--control-socket", sock, "--data-dir", dir };
    size_t k = 5;
    const char *optional[][2] = { { "--egress-ceiling", e->ceiling },
                                  { "--upstream-dns", e->upstream_dns },
                                  { "--upstream-ca", e->upstream_ca } };
    for (size_t i = 0; i < ARRAY_SIZE(optional); i++) {
        if (optional[i][1]) {
            argv[k++] = optional[i][0];
            argv[k++] = optional[i][1];
        }
    }
    /* Unprivileged once its socket and CA are open (architecture.md "Processes"). */
    if (geteuid() == 0 && getpwnam(GW_USER)) {
        argv[k++] = "--user";
        argv[k++] = GW_USER;
    }
    argv[k] = NULL;
    return ensure_daemon_ready("gw", argv, sock, listening) < 0 ? -1 : 1;
}

static int stop_daemon(const char *name)
{
    char path[PATH_MAX];
    pid_t ppid;

    int r = read_pidfile(name, &ppid);
    if (r < 0 || ppid == 0) {
        return r;
    }
    uint32_t pid = (uint32_t)ppid;
    pidfile(name, path, sizeof(path));
    if (kill((pid_t)pid, SIGTERM) == 0) {
        usec_t deadline = now_monotonic() + 60 * USEC_PER_SEC;
        while (process_running((pid_t)pid) && now_monotonic() < deadline) {
            (void)waitpid((pid_t)pid, NULL, WNOHANG);
            sleep_usec(50 * USEC_PER_MSEC);
        }
        if (process_running((pid_t)pid)) {
            fprintf(stderr, "space: %s (pid %u) did not stop\n", name, pid);
            return -ETIMEDOUT;
        }
    }
    unlink(path);
    return 0;
}

/*
 * The environment for E2B SDKs. What is exported is the header mode
 * (E2B_SANDBOX_URL: every request to the plain ingress, routed by
 * E2b-Sandbox-Id headers), which needs no DNS. The SDKs' default mode
 * (https://{port}-{id}.{domain}, which signed file URLs, getHost() and
 * browsers need) is the TLS ingress: it needs *.{domain} to resolve to it
 * and port 443, since the SDKs put no port in that URL (e2b-compat.md 11),
 * so it is printed as instructions, with the CA clients must trust.
 */
static void print_exports(FILE *f, const char *api_listen, const char *ingress_listen,
                          const char *domain, const char *tls_listen, bool own_cert)
{
    char path[PATH_MAX], *key = NULL;

    snprintf(path, sizeof(path), "%s/default-api-key", client_data_dir());
    if (read_file(path, 256, &key, NULL) >= 0) {
        key[strcspn(key, "\n")] = '\0';
    }
    fprintf(f, "export E2B_API_URL=http://%s\n", api_listen);
    fprintf(f, "export E2B_SANDBOX_URL=http://%s\n", ingress_listen);
    fprintf(f, "export E2B_DOMAIN=%s\n", domain);
    fprintf(f, "export E2B_API_KEY=%s\n", key ? key : "");
    free(key);
    if (!tls_listen) {
        return;
    }
    snprintf(path, sizeof(path), "%s/ca.crt", client_data_dir());
    if (!own_cert) {
        /* Additive to Node's bundle: harmless for every other host. */
        fprintf(f, "export NODE_EXTRA_CA_CERTS=%s\n", path);
    }
    const char *colon = strrchr(tls_listen, ':');
    bool on_443 = colon && strcmp(colon + 1, "443") == 0;
    fprintf(f,
            "# TLS ingress on %s: https://{port}-{id}.%s (the SDKs' default mode:\n"
            "# signed file URLs, getHost(), browsers). To use it: resolve *.%s to that\n"
            "# address (wildcard DNS)%s, then unset E2B_SANDBOX_URL.\n",
            tls_listen, domain, domain,
            on_443 ? "" : " and serve it on port 443 (space up --ingress-tls IP:443)");
    if (!own_cert) {
        fprintf(f,
                "# Python (httpx/requests) clients replace their bundle with the CA's file:\n"
                "#   export SSL_CERT_FILE=%s REQUESTS_CA_BUNDLE=%s\n",
                path, path);
    }
}

int cmd_up(int argc, char **argv)
{
    static const struct option opts[] = {
        { "detach", no_argument, NULL, 'd' },
        { "store", required_argument, NULL, 's' },
        { "listen", required_argument, NULL, 'l' },
        { "ingress", required_argument, NULL, 'i' },
        { "domain", required_argument, NULL, 'D' },
        { "accel", required_argument, NULL, 'a' },
        { "ingress-tls", required_argument, NULL, 't' },
        { "ingress-cert", required_argument, NULL, 'c' },
        { "ingress-key", required_argument, NULL, 'k' },
        { "egress-ceiling", required_argument, NULL, 'E' },
        { "upstream-dns", required_argument, NULL, 'U' },
        { "upstream-ca", required_argument, NULL, 'C' },
        { "pool", required_argument, NULL, 'P' },
        { "pool-max", required_argument, NULL, 'M' },
        { "help", no_argument, NULL, 'h' },
        {},
    };
    struct egress_opts egress = { 0 };
    char gw_sock[PATH_MAX];
    const char *store = NULL, *accel = "auto";
    const char *api_listen = env_or("SPACE_API_LISTEN", "127.0.0.1:3000");
    const char *ingress_listen = env_or("SPACE_INGRESS_LISTEN", "127.0.0.1:3001");
    const char *domain = env_or("SPACE_DOMAIN", "space.localhost");
    const char *tls_listen = env_or("SPACE_INGRESS_TLS_LISTEN", "127.0.0.1:3443");
    const char *cert = NULL, *cert_key = NULL;
    char node[PATH_MAX], api[PATH_MAX], key_path[PATH_MAX];
    bool detach = false;
    /* Warm-pool members per template (space-node --pool): fast creates without tuning; two
     * while quiet (little idle memory), up to eight while creates keep coming (the node's
     * budgets bound that further). */
    const char *pool = "2", *pool_max = NULL;
    uint32_t pool_n = 2, pool_max_n = 8;
    char pool_max_buf[16];
    int c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "dh", opts, NULL)) >= 0) {
        switch (c) {
        case 'd':
            detach = true;
            break;
        case 's':
            store = optarg;
            break;
        case 'l':
            api_listen = optarg;
            break;
        case 'i':
            ingress_listen = optarg;
            break;
        case 'D':
            domain = optarg;
            break;
        case 'a':
            accel = optarg;
            break;
        case 't':
            tls_listen = optarg;
            break;
        case 'c':
            cert = optarg;
            break;
        case 'k':
            cert_key = optarg;
            break;
        case 'E':
            egress.ceiling = optarg;
            break;
        case 'U':
            egress.upstream_dns = optarg;
            break;
        case 'C':
            egress.upstream_ca = optarg;
            break;
        case 'P':
            if (parse_u32(optarg, &pool_n) < 0 || pool_n > 64) {
                fprintf(stderr, "space: --pool is 0..64 members per template, not '%s'\n", optarg);
                return 2;
            }
            pool = optarg;
            break;
        case 'M':
            if (parse_u32(optarg, &pool_max_n) < 0 || pool_max_n > 64) {
                fprintf(stderr, "space: --pool-max is 0..64 members per template, not '%s'\n",
                        optarg);
                return 2;
            }
            pool_max = optarg;
            break;
        default:
            return cli_usage(c == 'h',
                             "usage: space up [--detach] [--store URL] [--listen IP:PORT] "
                             "[--ingress IP:PORT] [--ingress-tls IP:PORT|off]\n"
                             "                [--ingress-cert FILE --ingress-key FILE] "
                             "[--domain NAME] [--accel auto|kvm|tcg]\n"
                             "                [--egress-ceiling deny|allowlist|internet] "
                             "[--upstream-dns IP[:PORT]] [--upstream-ca FILE]\n"
                             "                [--pool N] [--pool-max N]\n"
                             "  --pool N      warm-pool members per template kept while creates "
                             "are quiet (default 2; 0: off)\n"
                             "  --pool-max N  up to N while creates keep coming (default 8, at "
                             "least --pool)\n");
        }
    }
    if (egress.ceiling && strcmp(egress.ceiling, "deny") != 0 &&
        strcmp(egress.ceiling, "allowlist") != 0 && strcmp(egress.ceiling, "internet") != 0) {
        fprintf(stderr, "space: --egress-ceiling is deny, allowlist or internet, not '%s'\n",
                egress.ceiling);
        return 2;
    }
    if (egress.upstream_ca && access(egress.upstream_ca, R_OK) < 0) {
        fprintf(stderr, "space: cannot read --upstream-ca '%s': %s\n", egress.upstream_ca,
                strerror(errno));
        return 2;
    }
    if (strcmp(tls_listen, "off") == 0 || !*tls_listen) {
        tls_listen = NULL;
    }
    if (!cert != !cert_key || (cert && !tls_listen)) {
        fprintf(stderr, "space: --ingress-cert and --ingress-key go together, with the TLS "
                        "ingress on\n");
        return 2;
    }
    if (client_find_node(node, sizeof(node)) < 0 || client_find_api(api, sizeof(api)) < 0) {
        fprintf(stderr, "space: cannot find space-node/space-api (set SPACE_NODE, SPACE_API)\n");
        return 1;
    }
    (void)mkdir_p(client_data_dir(), 0700);
    (void)mkdir_p(env_or("SPACE_RUN_DIR", "/run/space"), 0755);
    snprintf(key_path, sizeof(key_path), "%s/default-api-key", client_data_dir());

    if (!healthy(node_socket())) {
        if (template_build("base") != 0) {
            return 1;
        }
    }
    char share[PATH_MAX], agent[PATH_MAX];
    bool builds = client_find_share(share, sizeof(share)) >= 0 &&
                  client_find_agent(agent, sizeof(agent)) >= 0;
    int gw = ensure_gw(node, &egress, gw_sock, sizeof(gw_sock));
    if (gw < 0) {
        return 1;
    }
    const char *nargv[24] = { node,
                              "--data-dir",
                              client_data_dir(),
                              "--socket",
                              node_socket(),
                              "--tunnel-socket",
                              tunnel_socket(),
                              "--accel",
                              accel,
                              "--cache-dir",
                              env_or("SPACE_CACHE_DIR", "/var/cache/space") };
    size_t nn = 11;
    if (builds) {
        nargv[nn++] = "--share-dir";
        nargv[nn++] = share;
        nargv[nn++] = "--agent";
        nargv[nn++] = agent;
    }
    if (gw > 0) {
        nargv[nn++] = "--gw-socket";
        nargv[nn++] = gw_sock;
    } else if (node_knows(node, "--no-gw")) {
        nargv[nn++] = "--no-gw"; /* not waiting for a gateway that never comes */
    }
    if (node_knows(node, "--pool")) {
        nargv[nn++] = "--pool";
        nargv[nn++] = pool;
    }
    if (node_knows(node, "--pool-max")) {
        /* An explicit --pool above the default ceiling raises it: N is never cut down. */
        if (!pool_max && pool_max_n < pool_n) {
            pool_max_n = pool_n;
        }
        snprintf(pool_max_buf, sizeof(pool_max_buf), "%u", (unsigned)pool_max_n);
        nargv[nn++] = "--pool-max";
        nargv[nn++] = pool_max_buf;
    }
    nargv[nn] = NULL;
    if (ensure_daemon("node", nargv, node_socket()) < 0) {
        return 1;
    }
    const char *aargv[32] = { api,
                              "--data-dir",
                              client_data_dir(),
                              "--socket",
                              client_socket(),
                              "--node-socket",
                              node_socket(),
                              "--tunnel-socket",
                              tunnel_socket(),
                              "--listen",
                              api_listen,
                              "--ingress",
                              ingress_listen,
                              "--domain",
                              domain,
                              "--bootstrap-key",
                              key_path };
    size_t n = 17;
    /* space-gw made its secrets keypair at start: the api seals to the public half. */
    char secrets_pub[PATH_MAX];
    snprintf(secrets_pub, sizeof(secrets_pub), "%s/gw/secrets.pub", client_data_dir());
    bool have_pub = gw > 0 && access(secrets_pub, R_OK) == 0;
    const char *optional[][2] = { { "--ingress-tls", tls_listen },
                                  { "--ingress-cert", cert },
                                  { "--ingress-key", cert_key },
                                  { "--store", store },
                                  { "--secrets-key", have_pub ? secrets_pub : NULL } };
    for (size_t i = 0; i < ARRAY_SIZE(optional); i++) {
        if (optional[i][1]) {
            aargv[n++] = optional[i][0];
            aargv[n++] = optional[i][1];
        }
    }
    aargv[n] = NULL;
    if (ensure_daemon("api", aargv, client_socket()) < 0) {
        return 1;
    }
    fprintf(stderr,
            "space: platform is up: API http://%s, sandbox ingress http://%s%s%s, "
            "CLI socket '%s'\n",
            api_listen, ingress_listen, tls_listen ? " and https://" : "",
            tls_listen ? tls_listen : "", client_socket());
    if (detach) {
        print_exports(stdout, api_listen, ingress_listen, domain, tls_listen, cert != NULL);
        return 0;
    }
    fprintf(stderr, "space: for E2B SDKs:\n");
    print_exports(stderr, api_listen, ingress_listen, domain, tls_listen, cert != NULL);
    fprintf(stderr, "space: running in the foreground; Ctrl-C stops it\n");
    sigset_t set;
    int sig;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    sigwait(&set, &sig);
    return cmd_down(0, NULL);
}

/* Kills every sandbox the node has, straight through the node API (synchronous). */
static int kill_all_sandboxes(void)
{
    json_t *res = NULL, *sb;
    int status = 0, failed = 0;
    size_t i;

    int r = http_client_unix_json(node_socket(), "GET", "/v1/sandboxes", NULL, 10 * USEC_PER_SEC,
                                  64 << 20, &status, &res);
    if (r < 0 || status != 200) {
        json_decref(res);
        fprintf(stderr, "space: cannot list sandboxes on the node: %s\n",
                r < 0 ? strerror(-r) : "unexpected answer");
        return -EIO;
    }
    json_array_foreach (json_object_get(res, "sandboxes"), i, sb) {
        const char *id = json_string_value(json_object_get(sb, "id"));
        char path[128];
        json_t *body = NULL;
        if (!id) {
            continue;
        }
        snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
        r = http_client_unix_json(node_socket(), "DELETE", path, NULL, 60 * USEC_PER_SEC, 1 << 16,
                                  &status, &body);
        json_decref(body);
        if (r < 0 || (status != 204 && status != 404)) {
            fprintf(stderr, "space: cannot kill sandbox %s\n", id);
            failed++;
        }
    }
    json_decref(res);
    return failed ? -EIO : 0;
}

int cmd_down(int argc, char **argv)
{
    static const struct option opts[] = {
        { "kill-sandboxes", no_argument, NULL, 'k' },
        { "help", no_argument, NULL, 'h' },
        {},
    };
    bool kill_sandboxes = false;
    int c, k = 0;

    optind = 1;
    while (argv && (c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
        if (c != 'k') {
            return cli_usage(c == 'h', "usage: space down [--kill-sandboxes]\n");
        }
        kill_sandboxes = true;
    }
    /* The api first: it must not start new work on a node that is going away. */
    int r = stop_daemon("api");
    if (kill_sandboxes && healthy(node_socket())) {
        k = kill_all_sandboxes();
    }
    int n = stop_daemon("node");
    /* The gateway last: the node's sandboxes lose egress only once the node is gone. */
    int g = stop_daemon("gw");
    if (r < 0 || n < 0 || k < 0 || g < 0) {
        return 1;
    }
    fprintf(stderr, kill_sandboxes ? "space: platform stopped, sandboxes killed\n"
                                   : "space: platform stopped; sandboxes keep running and "
                                     "`space up` re-attaches them\n");
    return 0;
}
