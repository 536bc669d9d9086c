/*
 * ingress-harness: the ingress proxy (ingress.h) on a loop of its own, for
 * tests/ingress until space-api hosts it. Test-only; not installed.
 *
 * Sandboxes are resolved by asking a space-node over its Unix socket
 * (GET /v1/sandboxes/{id}: 200 with state "running" routes to the node's
 * tunnel socket, 404 is unknown, any other state is "not running"). The
 * lookup blocks the loop for that one local round trip, which is fine for
 * tests. --token gives every sandbox the same envd access token.
 *
 * Prints "listening on IP:PORT" on stdout once ready; stops on SIGTERM/SIGINT.
 */
#include <errno.h>
#include <event2/event.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "api/ingress.h"
#include "api/ingress-tls.h"
#include "basic/fd-util.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "basic/strbuf.h"
#include "basic/time-util.h"
#include "shared/http-client.h"

#define LOOKUP_TIMEOUT (5 * USEC_PER_SEC)

static const char *arg_node_socket = "/run/space/node.sock";
static const char *arg_tunnel_socket = "/run/space/tunnel.sock";
static const char *arg_listen = "127.0.0.1:0";
static const char *arg_domain = "space.test";
static const char *arg_token = NULL;
static const char *arg_tls_dir = NULL;

static int body_cb(const void *data, size_t len, void *userdata)
{
    return strbuf_append(userdata, data, len);
}

static int lookup(void *userdata, const char *sandbox_id, struct ingress_target *ret)
{
    struct strbuf body;
    char path[64];
    int fd = -EBADF, status = 0;
    json_t *j = NULL;
    int r;

    snprintf(path, sizeof(path), "/v1/sandboxes/%s", sandbox_id);
    strbuf_init(&body, 1u << 20);
    r = http_connect_unix(arg_node_socket, &fd);
    if (r >= 0) {
        struct http_request req = { .method = "GET", .path = path };
        r = http_client_request(fd, &req, now_monotonic() + LOOKUP_TIMEOUT, &status, NULL, body_cb,
                                &body);
    }
    close_safe(fd);
    if (r >= 0 && status == 404) {
        r = -ENOENT;
    } else if (r >= 0 && status != 200) {
        r = -EIO;
    } else if (r >= 0) {
        j = json_loadb(body.buf ? body.buf : "", body.len, 0, NULL);
        const char *state = json_string_value(json_object_get(j, "state"));
        if (!state) {
            r = -EPROTO;
        } else if (strcmp(state, "running") != 0) {
            r = -EAGAIN;
        } else {
            *ret = (struct ingress_target){ 0 };
            snprintf(ret->tunnel_socket, sizeof(ret->tunnel_socket), "%s", arg_tunnel_socket);
            if (arg_token) {
                snprintf(ret->access_token, sizeof(ret->access_token), "%s", arg_token);
                ret->has_token = true;
            }
            r = 0;
        }
    }
    json_decref(j);
    strbuf_release(&body);
    return r;
}

static void help(void)
{
    printf("usage: ingress-harness [options]\n"
           "  --node-socket PATH    space-node API socket (default %s)\n"
           "  --tunnel-socket PATH  space-node tunnel socket (default %s)\n"
           "  --listen IP:PORT      where to accept clients (default %s)\n"
           "  --domain DOMAIN       sandbox host domain (default %s)\n"
           "  --token TOKEN         envd access token of every sandbox\n"
           "  --tls-dir DIR         serve TLS, certificate from the deployment CA in DIR\n"
           "  --log-level LEVEL     debug, info, warning, error\n",
           arg_node_socket, arg_tunnel_socket, arg_listen, arg_domain);
}

static int parse_args(int argc, char **argv)
{
    static const struct option opts[] = {
        { "node-socket", required_argument, NULL, 'n' },
        { "tunnel-socket", required_argument, NULL, 't' },
        { "listen", required_argument, NULL, 'l' },
        { "domain", required_argument, NULL, 'd' },
        { "token", required_argument, NULL, 'k' },
        { "tls-dir", required_argument, NULL, 'T' },
        { "log-level", required_argument, NULL, 'L' },
        { "help", no_argument, NULL, 'h' },
        {},
    };
    int c, r;

    while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
        switch (c) {
        case 'n':
            arg_node_socket = optarg;
            break;
        case 't':
            arg_tunnel_socket = optarg;
            break;
        case 'l':
            arg_listen = optarg;
            break;
        case 'd':
            arg_domain = optarg;
            break;
        case 'k':
            arg_token = optarg;
            break;
        case 'T':
            arg_tls_dir = optarg;
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

static void stop_cb(evutil_socket_t sig, short what, void *userdata)
{
    event_base_loopbreak(userdata);
}

int main(int argc, char **argv)
{
    struct sigaction ignore = { .sa_handler = SIG_IGN };
    struct event_base *base = NULL;
    struct event *sigterm = NULL, *sigint = NULL;
    struct ingress *ig = NULL;
    char ip[64];
    uint32_t port;
    int r;

    log_set_ident("ingress-harness");
    r = parse_args(argc, argv);
    if (r <= 0) {
        return r < 0 ? 2 : 0;
    }
    const char *colon = strrchr(arg_listen, ':');
    if (!colon || (size_t)(colon - arg_listen) >= sizeof(ip) || parse_u32(colon + 1, &port) < 0 ||
        port > 65535) {
        log_error("invalid --listen '%s'", arg_listen);
        return 2;
    }
    snprintf(ip, sizeof(ip), "%.*s", (int)(colon - arg_listen), arg_listen);
    if (ip[0] == '[' && ip[strlen(ip) - 1] == ']') {
        memmove(ip, ip + 1, strlen(ip) - 2);
        ip[strlen(ip) - 2] = '\0';
    }
    /* A peer that goes away mid-write must not kill the process. */
    sigaction(SIGPIPE, &ignore, NULL);

    base = event_base_new();
    if (!base) {
        log_error("cannot create event loop");
        return 1;
    }
    sigterm = evsignal_new(base, SIGTERM, stop_cb, base);
    sigint = evsignal_new(base, SIGINT, stop_cb, base);
    if (!sigterm || !sigint || event_add(sigterm, NULL) < 0 || event_add(sigint, NULL) < 0) {
        r = log_error_errno(-ENOMEM, "cannot install signal handlers");
        goto out;
    }
    if (arg_tls_dir) {
        SSL_CTX *tls = NULL;
        char *ca_path = NULL;
        r = ingress_tls_ctx_new(arg_tls_dir, arg_domain, NULL, NULL, &tls, &ca_path);
        if (r < 0) {
            goto out;
        }
        free(ca_path);
        r = ingress_new_tls(base, ip, (uint16_t)port, arg_domain, tls, lookup, NULL, &ig);
        SSL_CTX_free(tls);
    } else {
        r = ingress_new(base, ip, (uint16_t)port, arg_domain, lookup, NULL, &ig);
    }
    if (r < 0) {
        log_error_errno(r, "cannot listen on '%s': %m", arg_listen);
        goto out;
    }
    if (strchr(ip, ':')) {
        printf("listening on [%s]:%u\n", ip, (unsigned)ingress_port(ig));
    } else {
        printf("listening on %s:%u\n", ip, (unsigned)ingress_port(ig));
    }
    fflush(stdout);
    event_base_dispatch(base);
    r = 0;
out:
    ingress_free(ig);
    if (sigterm) {
        event_free(sigterm);
    }
    if (sigint) {
        event_free(sigint);
    }
    event_base_free(base);
    return r < 0 ? 1 : 0;
}
