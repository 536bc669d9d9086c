/*
 * space-api: the control plane. Native v1 and E2B-compatible REST on a TCP
 * listener (API keys) and on a local Unix socket (the host admin's CLI), the
 * store (SQLite by default, PostgreSQL by URL), the controller that drives
 * space-node, and the sandbox ingress. One libevent loop (manager.h).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "api/api-listener.h"
#include "api/auto-resume.h"
#include "api/auth.h"
#include "api/controller.h"
#include "api/ingress.h"
#include "api/ingress-tls.h"
#include "api/lifecycle.h"
#include "api/manager.h"
#include "api/rolling.h"
#include "api/route-cache.h"
#include "api/routes.h"
#include "api/secretbox.h"
#include "basic/fd-util.h"
#include "basic/fileio.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "basic/rlimit-util.h"
#include "basic/socket-util.h"
#include "shared/sealed-secret.h"

static const char *arg_data_dir = "/var/lib/space";
static const char *arg_store = NULL;
static const char *arg_store_key = NULL;   /* NULL: DATA/store.key, created on first start */
static const char *arg_secrets_key = NULL; /* space-gw's public key; NULL: no secrets routes */
static const char *arg_listen = "127.0.0.1:3000";
static const char *arg_socket = "/run/space/api.sock";
static const char *arg_node_socket = "/run/space/node.sock";
static const char *arg_tunnel_socket = "/run/space/tunnel.sock";
static const char *arg_domain = NULL;
static const char *arg_ingress = NULL;
static const char *arg_ingress_tls = NULL;
static const char *arg_ingress_cert = NULL;
static const char *arg_ingress_key = NULL;
static const char *arg_bootstrap_key = NULL;
static uint32_t arg_max_sandboxes = 64;
static uint64_t arg_rolling_max_bytes = ROLLING_MAX_BYTES_DEFAULT;
static uint32_t arg_rolling_min_period = ROLLING_MIN_PERIOD_S;
static uint32_t arg_default_timeout = 300;
static uint32_t arg_max_connections = 0; /* 0: sized from RLIMIT_NOFILE */
static uint32_t arg_request_timeout = 30;

/* Bounds of both HTTP listeners (issue 7 "bounded daemons"); api-listener.h has the rest. */
#define API_MAX_HEADERS (64 << 10) /* as the ingress: 64 KiB of request head */
#define API_MAX_BODY (1 << 20)
/* Descriptors kept out of every listener's share: store, node clients, workers, logs. */
#define API_FD_RESERVE 256
/* The public API's share of the rest; the ingress (2 fds a connection) has its own cap. */
#define API_FD_SHARE 25
/*
 * SIGTERM: how long workers get to finish before space-api leaves without
 * them (issue 7: every daemon stops within 5 s with jobs in flight). A
 * create can take minutes; what is still running then is the next start's.
 */
#define STOP_DRAIN_USEC (2 * USEC_PER_SEC)

/*
 * The loop of a process that left workers running: they still hand their
 * completions to it (event_base_once()), so it lives until exit. Held here
 * so that it is reachable, not leaked.
 */
static struct event_base *abandoned_base;

static void help(void)
{
    printf(
        "usage: space-api [options]\n"
        "  --data-dir DIR          default SQLite location (default %s)\n"
        "  --store URL             sqlite:PATH or postgresql://... (default sqlite:DATA/space.db)\n"
        "  --store-key FILE        key sealing tokens in the store, 32 bytes, 0600; must exist\n"
        "                          (default DATA/store.key, created on first start; replicas\n"
        "                          on one PostgreSQL need the same file)\n"
        "  --secrets-key FILE      space-gw's public key (its DATA/gw/secrets.pub): secrets are\n"
        "                          sealed to it, so only space-gw opens them (default: none,\n"
        "                          the secrets routes answer 503)\n"
        "  --listen IP:PORT        REST API for API-key clients (default %s)\n"
        "  --socket PATH           local admin socket for the CLI (default %s)\n"
        "  --node-socket PATH      space-node's API (default %s)\n"
        "  --tunnel-socket PATH    space-node's tunnel (default %s)\n"
        "  --domain NAME           sandbox domain for {port}-{id}.NAME routing\n"
        "  --ingress IP:PORT       sandbox traffic proxy listener\n"
        "  --ingress-tls IP:PORT   the same proxy over TLS (https://{port}-{id}.DOMAIN)\n"
        "  --ingress-cert FILE     its certificate chain (PEM; default: minted by the\n"
        "                          deployment CA in DATA/ca.crt for *.DOMAIN)\n"
        "  --ingress-key FILE      the key of --ingress-cert (PEM)\n"
        "  --bootstrap-key FILE    create an API key into FILE if FILE does not exist\n"
        "  --max-sandboxes N       capacity (default 64)\n"
        "  --default-timeout SEC   E2B sandbox timeout (default 300)\n"
        "  --max-connections N     public API connection cap (default from RLIMIT_NOFILE)\n"
        "  --request-timeout SEC   time to send a whole request; idle keep-alive (default 30)\n"
        "  --rolling-max-bytes N   bound on all rolling snapshots together (default 16G)\n"
        "  --rolling-min-period SEC  shortest rolling snapshot period a policy may ask for\n"
        "                          (default 60; lower it only for tests)\n"
        "  --log-level LEVEL\n",
        arg_data_dir, arg_listen, arg_socket, arg_node_socket, arg_tunnel_socket);
}

static int parse_args(int argc, char **argv)
{
    static const struct option opts[] = {
        { "data-dir", required_argument, NULL, 'd' },
        { "store", required_argument, NULL, 'S' },
        { "store-key", required_argument, NULL, 'K' },
        { "secrets-key", required_argument, NULL, 'P' },
        { "listen", required_argument, NULL, 'l' },
        { "socket", required_argument, NULL, 's' },
        { "node-socket", required_argument, NULL, 'n' },
        { "tunnel-socket", required_argument, NULL, 't' },
        { "domain", required_argument, NULL, 'D' },
        { "ingress", required_argument, NULL, 'i' },
        { "ingress-tls", required_argument, NULL, 'I' },
        { "ingress-cert", required_argument, NULL, 'c' },
        { "ingress-key", required_argument, NULL, 'y' },
        { "bootstrap-key", required_argument, NULL, 'k' },
        { "max-sandboxes", required_argument, NULL, 'm' },
        { "default-timeout", required_argument, NULL, 'T' },
        { "max-connections", required_argument, NULL, 'C' },
        { "request-timeout", required_argument, NULL, 'R' },
        { "log-level", required_argument, NULL, 'L' },
        { "rolling-max-bytes", required_argument, NULL, 'B' },
        { "rolling-min-period", required_argument, NULL, 'M' },
        { "help", no_argument, NULL, 'h' },
        {},
    };
    int c, r;

    while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
        switch (c) {
        case 'd':
            arg_data_dir = optarg;
            break;
        case 'S':
            arg_store = optarg;
            break;
        case 'K':
            arg_store_key = optarg;
            break;
        case 'P':
            arg_secrets_key = optarg;
            break;
        case 'l':
            arg_listen = optarg;
            break;
        case 's':
            arg_socket = optarg;
            break;
        case 'n':
            arg_node_socket = optarg;
            break;
        case 't':
            arg_tunnel_socket = optarg;
            break;
        case 'D':
            arg_domain = optarg;
            break;
        case 'i':
            arg_ingress = optarg;
            break;
        case 'I':
            arg_ingress_tls = optarg;
            break;
        case 'c':
            arg_ingress_cert = optarg;
            break;
        case 'y':
            arg_ingress_key = optarg;
            break;
        case 'k':
            arg_bootstrap_key = optarg;
            break;
        case 'm':
        case 'T':
            if (parse_u32(optarg, c == 'm' ? &arg_max_sandboxes : &arg_default_timeout) < 0) {
                return log_error_errno(-EINVAL, "invalid number '%s'", optarg);
            }
            break;
        case 'C':
        case 'R':
            if (parse_u32(optarg, c == 'C' ? &arg_max_connections : &arg_request_timeout) < 0 ||
                (c == 'C' ? arg_max_connections : arg_request_timeout) == 0) {
                return log_error_errno(-EINVAL, "invalid number '%s'", optarg);
            }
            break;
        case 'L':
            r = log_level_from_string(optarg);
            if (r < 0) {
                return log_error_errno(r, "invalid --log-level '%s'", optarg);
            }
            log_set_level((enum log_level)r);
            break;
        case 'B':
            if (parse_size(optarg, &arg_rolling_max_bytes) < 0 ||
                arg_rolling_max_bytes > (uint64_t)INT64_MAX) {
                return log_error_errno(-EINVAL, "invalid --rolling-max-bytes '%s'", optarg);
            }
            break;
        case 'M':
            if (parse_u32(optarg, &arg_rolling_min_period) < 0 || arg_rolling_min_period == 0) {
                return log_error_errno(-EINVAL, "invalid --rolling-min-period '%s'", optarg);
            }
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

/* The single-host on-ramp: one API key written where `space up` can print it. */
static int bootstrap_key(struct manager *m, const char *path)
{
    char *key = NULL;
    int r;

    if (access(path, F_OK) == 0) {
        return 0;
    }
    r = auth_key_create(m->store, "default", &key, NULL);
    if (r < 0) {
        return r;
    }
    char text[128];
    snprintf(text, sizeof(text), "%s\n", key);
    mode_t old = umask(0077);
    r = write_file_atomic(path, text, strlen(text));
    umask(old);
    free(key);
    return r;
}

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Makes path (a regular file, not followed if a symlink) 0600 if it exists. */
static void restrict_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

    if (fd < 0) {
        if (errno != ENOENT) {
            log_warning_errno(-errno, "cannot open '%s' to restrict it: %m", path);
        }
        return;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        log_warning("'%s' is not a regular file; left as it is", path);
    } else if (fchmod(fd, 0600) < 0) {
        log_warning_errno(-errno, "cannot make '%s' 0600: %m", path);
    }
    close(fd);
}

/*
 * The store holds API key hashes and envd access tokens: the data dir is 0700 and a SQLite
 * database with its -wal and -shm files 0600, also when they existed before with looser
 * modes (issue 7: space.db was 0644 when the data dir existed). Runs before the store is
 * opened, since SQLite gives new -wal/-shm files the database's mode; the process umask
 * (077, set in main) covers whatever is created later.
 */
static void restrict_store_files(const char *data_dir, const char *store)
{
    static const char *const suffixes[] = { "", "-wal", "-shm", "-journal" };
    char path[PATH_MAX];

    if (data_dir && chmod(data_dir, 0700) < 0) {
        log_warning_errno(-errno, "cannot make '%s' 0700: %m", data_dir);
    }
    if (has_prefix(store, "postgresql://") || has_prefix(store, "postgres://")) {
        return;
    }
    if (has_prefix(store, "sqlite://")) {
        store += strlen("sqlite://");
    } else if (has_prefix(store, "sqlite:")) {
        store += strlen("sqlite:");
    }
    for (size_t i = 0; i < ARRAY_SIZE(suffixes); i++) {
        if (snprintf(path, sizeof(path), "%s%s", store, suffixes[i]) < (int)sizeof(path)) {
            restrict_file(path);
        }
    }
}

/*
 * The key sealing envd access tokens in the store (store.h, secretbox.h, docs/security.md
 * "Tokens at rest"). It never enters the database: DATA/store.key by default, made on first
 * start; an explicit --store-key must exist, so a replica given the wrong path fails instead of
 * quietly making a key of its own.
 */
static char key_id[SECRETBOX_KEY_ID_LEN + 1], other_key[SECRETBOX_KEY_ID_LEN + 1];

static int load_store_key(struct store *s)
{
    struct secretbox_key key;
    char path[PATH_MAX];
    int r;

    if (arg_store_key) {
        r = snprintf(path, sizeof(path), "%s", arg_store_key) < (int)sizeof(path) ? 0 : -1;
    } else {
        (void)mkdir_p(arg_data_dir, 0700);
        r = snprintf(path, sizeof(path), "%s/store.key", arg_data_dir) < (int)sizeof(path) ? 0 : -1;
    }
    if (r < 0) {
        return log_error_errno(-ENAMETOOLONG, "store key path too long");
    }
    r = secretbox_key_load(path, !arg_store_key, &key);
    if (r < 0) {
        return log_error_errno(r, "cannot load store key '%s' (32 bytes, mode 0600): %m", path);
    }
    memcpy(key_id, key.id, sizeof(key_id));
    r = store_set_token_key(s, &key);
    secretbox_key_wipe(&key);
    if (r < 0) {
        return log_error_errno(r, "cannot set store key: %m");
    }
    log_debug("store key %s (id %s)", path, key_id);
    return 0;
}

/*
 * The ingress asks who a sandbox is, once per connection: memory only (route-cache.h), so a
 * slow or locked store never holds traffic to a running sandbox.
 */
static int ingress_lookup(void *userdata, const char *sandbox_id, struct ingress_target *ret)
{
    struct manager *m = userdata;
    struct route_entry e;
    int r = route_cache_lookup(m->routes, sandbox_id, &e);

    if (r == -EHOSTDOWN && e.auto_resume && auto_resume_wake(m, sandbox_id) >= 0) {
        explicit_bzero(&e, sizeof(e));
        return -EINPROGRESS; /* the ingress holds the request until it runs */
    }
    if (r < 0) {
        explicit_bzero(&e, sizeof(e));
        return r; /* -ENOENT unknown or killed, -EHOSTDOWN paused, -EAGAIN being created */
    }
    *ret = (struct ingress_target){ 0 };
    if (strlen(m->tunnel_socket) >= sizeof(ret->tunnel_socket) ||
        (e.has_token && strlen(e.access_token) >= sizeof(ret->access_token))) {
        return -ENAMETOOLONG;
    }
    memcpy(ret->tunnel_socket, m->tunnel_socket, strlen(m->tunnel_socket) + 1);
    if (e.has_token) {
        memcpy(ret->access_token, e.access_token, strlen(e.access_token) + 1);
        ret->has_token = true;
    }
    ret->private_traffic = e.private_traffic;
    static_assert(sizeof(e.traffic_token) <= sizeof(ret->traffic_token), "traffic token fits");
    memcpy(ret->traffic_token, e.traffic_token, sizeof(e.traffic_token));
    explicit_bzero(&e, sizeof(e));
    return 0;
}

static void drain_timeout_cb(evutil_socket_t fd, short what, void *userdata)
{
    bool *expired = userdata;
    *expired = true;
}

/*
 * Lets running workers finish for up to STOP_DRAIN_USEC, with no listener
 * accepting (their outcomes are recorded and their waiters answered as
 * usual). Returns the number still running.
 */
static unsigned drain_jobs(struct manager *m)
{
    struct timeval tv = { .tv_sec = STOP_DRAIN_USEC / USEC_PER_SEC,
                          .tv_usec = STOP_DRAIN_USEC % USEC_PER_SEC };
    bool expired = false;
    struct event *timer;

    if (!m->base || m->jobs == 0) {
        return 0;
    }
    timer = evtimer_new(m->base, drain_timeout_cb, &expired);
    if (!timer) {
        return m->jobs;
    }
    evtimer_add(timer, &tv);
    while (m->jobs > 0 && !expired) {
        event_base_loop(m->base, EVLOOP_ONCE);
    }
    event_free(timer);
    return m->jobs;
}

static void signal_cb(evutil_socket_t sig, short what, void *userdata)
{
    struct manager *m = userdata;
    log_info("received signal %d, stopping", (int)sig);
    m->stopping = true;
    event_base_loopexit(m->base, NULL);
}

int main(int argc, char **argv)
{
    struct manager m = { 0 };
    struct api_listener *public_listener = NULL;
    int64_t nofile;
    char store_url[PATH_MAX + 16], ip[64];
    uint16_t port;
    struct evhttp_bound_socket *admin_bound = NULL;
    unsigned left;
    int fd = -EBADF;
    int r;

    log_set_ident("space-api");
    r = parse_args(argc, argv);
    if (r <= 0) {
        return r < 0 ? 2 : 0;
    }
    signal(SIGPIPE, SIG_IGN);
    /* Nothing space-api writes is for anyone else: store files, keys, sockets (all 0600). */
    umask(0077);
    nofile = rlimit_nofile_raise();
    if (nofile < 0) {
        log_error_errno((int)nofile, "cannot read RLIMIT_NOFILE: %m");
        return 1;
    }
    if (!arg_store) {
        (void)mkdir_p(arg_data_dir, 0700);
        snprintf(store_url, sizeof(store_url), "sqlite:%s/space.db", arg_data_dir);
        arg_store = store_url;
        restrict_store_files(arg_data_dir, arg_store);
    } else {
        restrict_store_files(NULL, arg_store);
    }
    r = store_open(arg_store, &m.store);
    if (r < 0) {
        log_error_errno(r, "cannot open store '%s': %m", arg_store);
        return 1;
    }
    r = load_store_key(m.store);
    if (r < 0) {
        goto out;
    }
    r = store_migrate(m.store);
    if (r < 0) {
        log_error_errno(r, "cannot migrate store: %m");
        goto out;
    }
    r = store_token_key_check(m.store, other_key);
    if (r < 0) {
        log_error_errno(r,
                        "the store holds tokens sealed with key %s, not with this "
                        "--store-key (%s): replicas on one store need the same key file",
                        other_key, key_id);
        goto out;
    }
    if (arg_secrets_key) {
        /* The public half only: space-api seals, it never opens (sealed-secret.h). */
        r = sealed_secret_load_public(arg_secrets_key, &m.secrets_key);
        if (r < 0) {
            log_error_errno(r, "cannot load the secrets key '%s': %m", arg_secrets_key);
            goto out;
        }
    }
    if (arg_bootstrap_key) {
        r = bootstrap_key(&m, arg_bootstrap_key);
        if (r < 0) {
            log_error_errno(r, "cannot write bootstrap key '%s': %m", arg_bootstrap_key);
            goto out;
        }
    }

    evthread_use_pthreads();
    m.base = event_base_new();
    m.http = m.base ? evhttp_new(m.base) : NULL;
    m.admin_http = m.base ? evhttp_new(m.base) : NULL;
    if (!m.http || !m.admin_http) {
        r = log_error_errno(-ENOMEM, "cannot create event loop");
        goto out;
    }
    m.node_socket = arg_node_socket;
    m.tunnel_socket = arg_tunnel_socket;
    m.domain = arg_domain;
    m.ingress_listen = arg_ingress;
    m.default_timeout_s = arg_default_timeout;
    m.max_timeout_s = 24 * 3600;
    m.max_sandboxes = arg_max_sandboxes;
    m.rolling_max_bytes = (int64_t)arg_rolling_max_bytes;
    m.rolling_min_period_s = arg_rolling_min_period;
    if (arg_rolling_min_period < ROLLING_MIN_PERIOD_S) {
        log_warning("--rolling-min-period %u: rolling snapshot policies may ask for periods "
                    "under %d s (a test setting)",
                    arg_rolling_min_period, ROLLING_MIN_PERIOD_S);
    }
    /* evhttp's timeout bounds silence while a request is read or a reply written (not
     * while a handler runs: evhttp stops reading then); the request deadline bounds the
     * whole request (api-listener.h). */
    struct timeval io_timeout = { .tv_sec = arg_request_timeout > 1 ? arg_request_timeout / 2 : 1 };
    for (struct evhttp *h = m.http; h; h = h == m.http ? m.admin_http : NULL) {
        evhttp_set_max_headers_size(h, API_MAX_HEADERS);
        evhttp_set_max_body_size(h, API_MAX_BODY);
        evhttp_set_timeout_tv(h, &io_timeout);
        evhttp_set_allowed_methods(h, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_DELETE |
                                          EVHTTP_REQ_PUT | EVHTTP_REQ_PATCH | EVHTTP_REQ_HEAD);
    }
    routes_register(&m);

    struct api_limits limits = {
        .max_connections = arg_max_connections
                               ? arg_max_connections
                               : rlimit_conn_cap(nofile, API_FD_RESERVE, API_FD_SHARE, 1, 64),
        .request_deadline = (usec_t)arg_request_timeout * USEC_PER_SEC,
    };
    r = api_listener_new(m.base, m.http, arg_listen, &limits, routes_dispatch, &m.public_listener,
                         &public_listener);
    if (r < 0) {
        log_error_errno(r, "cannot listen on '%s': %m", arg_listen);
        goto out;
    }
    /* The admin socket is its owner's alone: it needs no API key. */
    /* Its directory (/run/space, shared with space-node) keeps the usual 0755 if made here. */
    mode_t old_umask = umask(0022);
    fd = socket_listen_unix(arg_socket, 0600);
    umask(old_umask);
    if (fd >= 0) {
        admin_bound = evhttp_accept_socket_with_handle(m.admin_http, fd);
    }
    if (fd < 0 || !admin_bound) {
        r = log_error_errno(fd < 0 ? fd : -EIO, "cannot listen on '%s': %m", arg_socket);
        goto out;
    }
    if (arg_ingress) {
        /* Routable before the ingress takes its first connection. */
        r = route_cache_new(&m.routes);
        if (r >= 0) {
            r = route_cache_load(m.routes, m.store, (int64_t)now_realtime());
        }
        if (r < 0) {
            log_error_errno(r, "cannot load the route cache: %m");
            goto out;
        }
        m.last_route_reload = now_monotonic();
        if (socket_parse_ip_port(arg_ingress, ip, sizeof(ip), &port) < 0) {
            r = log_error_errno(-EINVAL, "invalid --ingress '%s'", arg_ingress);
            goto out;
        }
        r = ingress_new(m.base, ip, port, arg_domain ? arg_domain : "space.localhost",
                        ingress_lookup, &m, &m.ingress);
        if (r < 0) {
            log_error_errno(r, "cannot listen for sandbox traffic on '%s': %m", arg_ingress);
            goto out;
        }
    }
    if (arg_ingress_tls) {
        struct ssl_ctx_st *tls = NULL;
        char *ca_path = NULL;
        if (socket_parse_ip_port(arg_ingress_tls, ip, sizeof(ip), &port) < 0) {
            r = log_error_errno(-EINVAL, "invalid --ingress-tls '%s'", arg_ingress_tls);
            goto out;
        }
        r = ingress_tls_ctx_new(arg_data_dir, arg_domain ? arg_domain : "space.localhost",
                                arg_ingress_cert, arg_ingress_key, &tls, &ca_path);
        if (r < 0) {
            goto out;
        }
        r = ingress_new_tls(m.base, ip, port, arg_domain ? arg_domain : "space.localhost", tls,
                            ingress_lookup, &m, &m.ingress_tls);
        SSL_CTX_free(tls);
        if (r < 0) {
            free(ca_path);
            log_error_errno(r, "cannot listen for sandbox TLS traffic on '%s': %m",
                            arg_ingress_tls);
            goto out;
        }
        log_info("ingress TLS on %s, certificate %s%s", arg_ingress_tls,
                 ca_path ? "from the deployment CA " : arg_ingress_cert, ca_path ? ca_path : "");
        free(ca_path);
    } else if (arg_ingress_cert || arg_ingress_key) {
        r = log_error_errno(-EINVAL, "--ingress-cert/--ingress-key need --ingress-tls");
        goto out;
    }
    m.sigterm = evsignal_new(m.base, SIGTERM, signal_cb, &m);
    m.sigint = evsignal_new(m.base, SIGINT, signal_cb, &m);
    event_add(m.sigterm, NULL);
    event_add(m.sigint, NULL);
    r = controller_start(&m);
    if (r < 0) {
        log_error_errno(r, "cannot start controller: %m");
        goto out;
    }
    log_info("ready: api on %s (%u connections, %lld descriptors), ingress on %s, admin socket "
             "'%s', store %s, node '%s'",
             arg_listen, limits.max_connections, (long long)nofile,
             arg_ingress ? arg_ingress : "(none)", arg_socket, store_kind(m.store),
             arg_node_socket);
    event_base_dispatch(m.base);
    r = 0;
out:
    /* Stop taking work first: no new request may start what nobody will finish. */
    m.stopping = true;
    api_listener_stop(public_listener);
    if (admin_bound) {
        evhttp_del_accept_socket(m.admin_http, admin_bound);
    }
    (void)unlink(arg_socket);
    m.ingress = ingress_free(m.ingress);
    m.ingress_tls = ingress_free(m.ingress_tls);
    left = drain_jobs(&m);
    /* Frees the leases of what still runs and ends the waits. */
    controller_stop(&m);
    if (m.base) {
        /* One pass to write the replies just queued for those waits. */
        (void)event_base_loop(m.base, EVLOOP_NONBLOCK);
    }
    if (left > 0) {
        /* Workers blocked on the node (a create runs for minutes under TCG) hold only their
         * job and the loop: leave both to exit(); the sandboxes run on, and the operations
         * are the next start's (their leases are free). */
        log_info("leaving %u operation worker(s) running to the next start", left);
    }
    m.routes = route_cache_free(m.routes);
    if (m.sigterm) {
        event_free(m.sigterm);
    }
    if (m.sigint) {
        event_free(m.sigint);
    }
    api_listener_stop(public_listener);
    if (m.http) {
        evhttp_free(m.http);
    }
    public_listener = api_listener_free(public_listener);
    if (m.admin_http) {
        evhttp_free(m.admin_http);
    }
    if (m.base && left > 0) {
        abandoned_base = m.base;
    } else if (m.base) {
        event_base_free(m.base);
    }
    store_close(m.store);
    EVP_PKEY_free(m.secrets_key);
    log_info("stopped");
    return r < 0 ? 1 : 0;
}
