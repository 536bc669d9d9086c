/*
 * space-agent: the in-guest daemon. It speaks E2B's envd protocol
 * (e2b-compat.md §5-§7) so the E2B SDKs, through space's proxy, can run
 * processes, move files and watch directories inside the sandbox.
 *
 * Shape of the process: when the kernel starts us as PID 1, init.c mounts
 * the API file systems and forks; the child is the server and PID 1 only
 * reaps and restarts it. The server is one thread running one libevent
 * loop with evhttp as the HTTP/1.1 server. One loop is enough and is the
 * simplest correct design here: every operation is either quick (stat,
 * rename, fork+exec) or event-driven (pipes, PTYs, inotify, sockets), so
 * nothing needs a thread of its own; a single thread also means the
 * process table, the subscriber lists and the flow-control state need no
 * locks, and the agent stays small enough to audit (style.md R1, R14).
 * evhttp streams responses with chunked encoding and tells us when a
 * client disconnects or drains, which is all Connect server streams need.
 *
 * This file holds main(), the listener and the routing table; each service
 * lives in its own module (process-rpc.c, fs.c, watch.c, files-http.c,
 * state.c). Authentication rules are in route(): every path except
 * /health, /files and /init needs the access token once /init set one.
 *
 * In host test mode (`--listen 127.0.0.1:0`) it runs as a normal process
 * and prints "listening on ADDR:PORT" so tests can find it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "agent/agent.h"
#include "agent/auth.h"
#include "agent/files-http.h"
#include "agent/fs.h"
#include "agent/http-gate.h"
#include "agent/init.h"
#include "agent/limits.h"
#include "agent/process-rpc.h"
#include "agent/process.h"
#include "agent/reply.h"
#include "agent/rpc.h"
#include "agent/state.h"
#include "agent/watch.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "basic/socket-util.h"
#include "shared/envd.h"
#include "filesystem.pb-c.h"
#include "process.pb-c.h"

#define AGENT_DEFAULT_LISTEN "0.0.0.0:" ENVD_PORT_STR
#define AGENT_HTTP_TIMEOUT_SEC 120
/* Largest /files upload body (evhttp buffers a request body before we see it; only a
 * request whose head authenticates it gets this limit, http-gate.h). */
#define AGENT_DEFAULT_MAX_UPLOAD (512ull * 1024 * 1024)

static const char *arg_listen = AGENT_DEFAULT_LISTEN;
static const char *arg_e2b_dir = NULL;
static const char *arg_trust_root = NULL;
static uint64_t arg_max_upload = AGENT_DEFAULT_MAX_UPLOAD;
static bool arg_pid1 = false;

/* The Connect procedures we serve, with their protobuf types for the binary codec. */
#define PROC(name, streaming, handler, in, out)                                                    \
    {                                                                                              \
        "/process.Process/" name, streaming, handler, &process__##in##__descriptor,                \
            &process__##out##__descriptor                                                          \
    }
#define FS(name, streaming, handler, in, out)                                                      \
    {                                                                                              \
        "/filesystem.Filesystem/" name, streaming, handler, &filesystem__##in##__descriptor,       \
            &filesystem__##out##__descriptor                                                       \
    }
static const struct rpc_method rpc_methods[] = {
    PROC("Start", true, process_rpc_start, start_request, start_response),
    PROC("Connect", true, process_rpc_connect, connect_request, connect_response),
    PROC("List", false, process_rpc_list, list_request, list_response),
    PROC("SendInput", false, process_rpc_send_input, send_input_request, send_input_response),
    PROC("SendSignal", false, process_rpc_send_signal, send_signal_request, send_signal_response),
    PROC("CloseStdin", false, process_rpc_close_stdin, close_stdin_request, close_stdin_response),
    PROC("Update", false, process_rpc_update, update_request, update_response),
    PROC("StreamInput", true, process_rpc_stream_input, stream_input_request,
         stream_input_response),
    FS("Stat", false, fs_rpc_stat, stat_request, stat_response),
    FS("ListDir", false, fs_rpc_list_dir, list_dir_request, list_dir_response),
    FS("MakeDir", false, fs_rpc_make_dir, make_dir_request, make_dir_response),
    FS("Move", false, fs_rpc_move, move_request, move_response),
    FS("Remove", false, fs_rpc_remove, remove_request, remove_response),
    FS("WatchDir", true, watch_rpc_watch_dir, watch_dir_request, watch_dir_response),
    FS("CreateWatcher", false, watch_rpc_create_watcher, create_watcher_request,
       create_watcher_response),
    FS("GetWatcherEvents", false, watch_rpc_get_watcher_events, get_watcher_events_request,
       get_watcher_events_response),
    FS("RemoveWatcher", false, watch_rpc_remove_watcher, remove_watcher_request,
       remove_watcher_response),
};

static void reply_unauthorized(struct evhttp_request *req)
{
    reply_error(req, 401,
                "unauthorized access, please provide a valid access token or method signing if "
                "supported");
}

static void route(struct evhttp_request *req, void *userdata)
{
    struct agent *a = userdata;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);

    http_gate_request_done(a, req);
    if (!path || !*path) {
        reply_error(req, 400, "invalid request path");
        return;
    }
    if (strcmp(path, "/health") == 0) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "X-Envd-Version",
                          AGENT_ENVD_VERSION);
        reply_empty(req, 204);
        return;
    }
    /* /files checks the token or a URL signature itself; /init is for the host only (§6.6). */
    if (strcmp(path, "/files") == 0) {
        files_http_handle(a, req);
        return;
    }
    if (strcmp(path, "/init") == 0) {
        state_http_init(a, req);
        return;
    }
    if (!auth_token_ok(a, req)) {
        reply_unauthorized(req);
        return;
    }
    if (strcmp(path, "/files/compose") == 0) {
        files_http_compose(a, req);
        return;
    }
    if (strcmp(path, "/envs") == 0) {
        state_http_envs(a, req);
        return;
    }
    if (strcmp(path, "/metrics") == 0) {
        state_http_metrics(a, req);
        return;
    }
    for (size_t i = 0; i < ARRAY_SIZE(rpc_methods); i++) {
        if (strcmp(path, rpc_methods[i].path) == 0) {
            rpc_dispatch(a, req, &rpc_methods[i]);
            return;
        }
    }
    if (strncmp(path, "/process.Process/", 17) == 0 ||
        strncmp(path, "/filesystem.Filesystem/", 23) == 0) {
        /* connect-go answers an unknown procedure with 404; the JSON says unimplemented. */
        reply_json(
            req, 404,
            json_pack("{s:s, s:s}", "code", "unimplemented", "message", "unknown procedure"));
        return;
    }
    (void)cmd;
    reply_error(req, 404, "not found");
}

/* "ADDR:PORT" with basic's parser; "[v6]:PORT" too, for which evhttp wants the bare address. */
static int parse_listen(const char *s, char *addr, size_t addr_size, uint16_t *port)
{
    size_t n;
    int r = socket_parse_ip_port(s, addr, addr_size, port);

    if (r < 0) {
        return r;
    }
    n = strlen(addr);
    if (n >= 2 && addr[0] == '[' && addr[n - 1] == ']') {
        memmove(addr, addr + 1, n - 2);
        addr[n - 2] = '\0';
    }
    return 0;
}

static void stop_cb(evutil_socket_t sig, short what, void *userdata)
{
    struct agent *a = userdata;

    log_info("signal %d, exiting", (int)sig);
    event_base_loopexit(a->base, NULL);
}

/* fds 0-2 must be open, or the first sockets would land on them. */
static void ensure_std_fds(void)
{
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) < 0) {
            int n = open("/dev/null", O_RDWR);
            if (n >= 0 && n != fd) {
                dup2(n, fd);
                close(n);
            }
        }
    }
}

static void help(void)
{
    printf("space-agent [OPTIONS]\n\n"
           "The in-guest daemon of space: speaks E2B's envd protocol.\n\n"
           "  --listen ADDR:PORT   listen address (default %s; port 0 picks a free one)\n"
           "  --max-upload BYTES   largest /files upload body (default 512M)\n"
           "  --e2b-dir DIR        where /init writes .E2B_* files (default /run/e2b as init)\n"
           "  --trust-root DIR     where /init's caBundle is installed (default / as init)\n"
           "  --log-level LEVEL    debug, info, warning, error\n"
           "  --version            print the version\n"
           "  -h --help            this text\n",
           AGENT_DEFAULT_LISTEN);
}

static int parse_args(int argc, char **argv)
{
    static const struct option opts[] = {
        { "listen", required_argument, NULL, 'l' },
        { "max-upload", required_argument, NULL, 'm' },
        { "e2b-dir", required_argument, NULL, 'e' },
        { "trust-root", required_argument, NULL, 't' },
        { "log-level", required_argument, NULL, 'L' },
        { "version", no_argument, NULL, 'V' },
        { "help", no_argument, NULL, 'h' },
        {},
    };
    int c, r;

    /* As init, the kernel passes us its leftover command-line words: ignore what is not ours. */
    arg_pid1 = getpid() == 1;
    opterr = !arg_pid1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
        switch (c) {
        case 'l':
            arg_listen = optarg;
            break;
        case 'm':
            r = parse_size(optarg, &arg_max_upload);
            if (r < 0) {
                return log_error_errno(r, "invalid --max-upload '%s': %m", optarg);
            }
            break;
        case 'e':
            arg_e2b_dir = optarg;
            break;
        case 't':
            arg_trust_root = optarg;
            break;
        case 'L':
            r = log_level_from_string(optarg);
            if (r < 0) {
                return log_error_errno(r, "invalid --log-level '%s': %m", optarg);
            }
            log_set_level((enum log_level)r);
            break;
        case 'V':
            printf("space-agent %s (envd %s)\n", SPACE_VERSION, AGENT_ENVD_VERSION);
            return 0;
        case 'h':
            help();
            return 0;
        default:
            if (arg_pid1) {
                break;
            }
            return -EINVAL;
        }
    }
    if (optind < argc && !arg_pid1) {
        return log_error_errno(-EINVAL, "unexpected argument '%s'", argv[optind]);
    }
    return 1;
}

static int agent_init(struct agent *a)
{
    const char *path = getenv("PATH");
    struct passwd *pw;
    int r;

    *a = (struct agent){
        .start_time = now_realtime(),
        .is_init = arg_pid1,
        .max_upload = arg_max_upload,
    };
    a->env = json_pack("{s:s}", "E2B_SANDBOX", "true");
    if (arg_e2b_dir || arg_pid1) {
        a->e2b_dir = strdup(arg_e2b_dir ? arg_e2b_dir : "/run/e2b");
        if (!a->e2b_dir) {
            return -ENOMEM;
        }
    }
    /* As init the trust store is the guest's own; a host test names a directory for it. */
    if (arg_trust_root || arg_pid1) {
        a->trust_root = strdup(arg_trust_root ? arg_trust_root : "");
        if (!a->trust_root) {
            return -ENOMEM;
        }
    }
    a->path_env = strdup(
        path && *path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    /* Not root (a test run as a user): processes can only run as ourselves. */
    pw = geteuid() == 0 ? NULL : getpwuid(geteuid());
    a->default_user = strdup(pw ? pw->pw_name : "root");
    if (!a->env || !a->path_env || !a->default_user) {
        return -ENOMEM;
    }
    r = state_restore(a);
    if (r < 0) {
        log_warning_errno(r, "cannot restore /init state, ignoring: %m");
    }
    a->base = event_base_new();
    a->http = a->base ? evhttp_new(a->base) : NULL;
    if (!a->http) {
        return -ENOMEM;
    }
    evhttp_set_max_headers_size(a->http, AGENT_MAX_HEADERS);
    /* Small until a request's head authenticates it (http-gate.h), then max_upload. */
    evhttp_set_max_body_size(a->http, (ev_ssize_t)AGENT_MAX_UNAUTH_BODY);
    evhttp_set_bevcb(a->http, http_gate_bevcb, a);
    evhttp_set_timeout(a->http, AGENT_HTTP_TIMEOUT_SEC);
    evhttp_set_allowed_methods(a->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                            EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    evhttp_set_gencb(a->http, route, a);
    r = proc_table_new(a, &a->procs);
    if (r < 0) {
        return r;
    }
    return watch_table_new(a, &a->watches);
}

static void agent_done(struct agent *a)
{
    a->watches = watch_table_free(a->watches);
    a->procs = proc_table_free(a->procs);
    if (a->http) {
        evhttp_free(a->http);
    }
    if (a->base) {
        event_base_free(a->base);
    }
    json_decref(a->env);
    free(a->access_token);
    free(a->default_user);
    free(a->default_workdir);
    free(a->path_env);
    free(a->e2b_dir);
    free(a->trust_root);
}

static int agent_listen(struct agent *a)
{
    struct evhttp_bound_socket *bound;
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char addr[256], shown[INET6_ADDRSTRLEN];
    uint16_t port;
    int r;

    r = parse_listen(arg_listen, addr, sizeof(addr), &port);
    if (r < 0) {
        return log_error_errno(r, "invalid --listen '%s', expected ADDR:PORT", arg_listen);
    }
    bound = evhttp_bind_socket_with_handle(a->http, addr, port);
    if (!bound) {
        return log_error_errno(-EADDRNOTAVAIL, "cannot listen on '%s'", arg_listen);
    }
    if (getsockname(evhttp_bound_socket_get_fd(bound), (struct sockaddr *)&ss, &len) < 0) {
        return log_error_errno(-errno, "getsockname failed: %m");
    }
    if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &s6->sin6_addr, shown, sizeof(shown));
        port = ntohs(s6->sin6_port);
        printf("listening on [%s]:%u\n", shown, port);
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &s4->sin_addr, shown, sizeof(shown));
        port = ntohs(s4->sin_port);
        printf("listening on %s:%u\n", shown, port);
    }
    if (arg_pid1) {
        /* Our stdout is /dev/console: the host's serial log shows this line. */
        printf("space-agent: ready\n");
    }
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    struct sigaction ign = { .sa_handler = SIG_IGN };
    struct event *sigterm = NULL, *sigint = NULL;
    struct agent a = { 0 };
    int r;

    log_set_ident("space-agent");
    ensure_std_fds();
    r = parse_args(argc, argv);
    /* As PID 1 we must never exit (the kernel would panic): bad words were logged, carry on. */
    if (r <= 0 && !arg_pid1) {
        return r < 0 ? 2 : 0;
    }
    if (arg_pid1) {
        init_setup();
        (void)init_supervise(); /* returns only in the server child */
    }
    /* Writes to a client that went away must fail with EPIPE, not kill us. */
    sigaction(SIGPIPE, &ign, NULL);

    r = agent_init(&a);
    if (r < 0) {
        log_error_errno(r, "cannot initialise: %m");
        goto out;
    }
    r = agent_listen(&a);
    if (r < 0) {
        goto out;
    }
    sigterm = evsignal_new(a.base, SIGTERM, stop_cb, &a);
    sigint = evsignal_new(a.base, SIGINT, stop_cb, &a);
    if (!sigterm || !sigint || event_add(sigterm, NULL) < 0 || event_add(sigint, NULL) < 0) {
        r = log_error_errno(-ENOMEM, "cannot watch signals: %m");
        goto out;
    }
    log_info("space-agent %s ready (envd %s)", SPACE_VERSION, AGENT_ENVD_VERSION);
    r = event_base_dispatch(a.base) < 0 ? -EIO : 0;
out:
    if (sigterm) {
        event_free(sigterm);
    }
    if (sigint) {
        event_free(sigint);
    }
    agent_done(&a);
    return r < 0 ? 1 : 0;
}
