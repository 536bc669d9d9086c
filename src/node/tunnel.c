/*
 * Tunnels into sandboxes (the protocol is in tunnel.h).
 *
 * One struct tunnel_conn per client connection, a small state machine:
 *
 *   REQUEST --valid line, sandbox RUNNING--> CONNECTING --connected--> SPLICING
 *      |                                         |                        |
 *      +------------ ERR line -------------------+--> FAILING             |
 *                                                        |                |
 *                                                        +--> CLOSED <----+
 *
 *   transition                       function
 *   REQUEST -> CONNECTING            request_read_cb() -> conn_connect()
 *   CONNECTING -> SPLICING           connect_cb() -> conn_splice()
 *   REQUEST|CONNECTING -> FAILING    conn_fail(): the ERR line, then EOF to the client
 *                                    and a short linger reading what it still sends
 *   any -> CLOSED                    conn_close(); reap_cb() frees it later (R15)
 *
 * SPLICING is the shared relay (src/shared/relay.h: splice(2), half-close,
 * bounded buffers): it ends when both sides have sent EOF and received
 * ours, on an error on either side, after TUNNEL_IDLE_TIMEOUT_SEC without
 * a byte, or when the sweep finds the sandbox gone.
 *
 * Reaching the guest: every guest port sits on 169.254.0.2 inside the netns
 * /run/netns/space-<id> (netslot.h). The loop thread enters that namespace
 * just long enough to create a socket (setns there and back, as
 * runtime-qemu.c's connect does on workers); the socket stays in the
 * sandbox's namespace, and the non-blocking connect() and all I/O run on the
 * loop. That is the qemu runtime's model: a vsock runtime will need a
 * non-blocking connect verb in runtime.h instead.
 *
 * A socket keeps its namespace alive and the sandbox's tap is persistent, so
 * after a kill an established connection would see no error: the guest just
 * stops answering. Hence the sweep: once a second every tunnel looks its
 * sandbox up by id (no tunnel holds a vm pointer) and is closed when the
 * sandbox is gone or no longer RUNNING. The same sweep closes tunnels whose
 * client closed its socket while the guest stays silent
 * (sweep_closed_clients()).
 *
 * Flow control is the relay's: at most RELAY_BUFFER bytes per direction
 * (in a pipe), the source unread while it is full, so a slow reader on one
 * side never makes the node buffer more than that.
 */
#include "node/tunnel.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/fileio.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/socket-util.h"
#include "basic/parse-util.h"
#include "node/manager.h"
#include "node/netslot.h"
#include "shared/listener.h"
#include "shared/relay.h"
#include "shared/sandbox-id.h"
#include "shared/tunnel-proto.h"

#define TUNNEL_REQUEST_TIMEOUT_SEC 10
#define TUNNEL_CONNECT_TIMEOUT_SEC 10
#define TUNNEL_LINGER_SEC 2 /* after an ERR line */
/* Longer than the ingress' 15 min, so the ingress (which answers the client) times out first. */
#define TUNNEL_IDLE_TIMEOUT_SEC (16 * 60)
/* Descriptors per tunnel for the cap: client, guest, and the relay's two pipes (two fds each). */
#define TUNNEL_FDS_PER_CONN 6
#define TUNNEL_MAX_PER_SANDBOX_MIN 64 /* per sandbox: an eighth of the cap, at least this */
#define TUNNEL_SWEEP_SEC 1

enum conn_state {
    CONN_REQUEST,
    CONN_CONNECTING,
    CONN_SPLICING,
    CONN_FAILING,
    CONN_CLOSED,
};

enum { SIDE_CLIENT, SIDE_GUEST };

struct tunnel_conn {
    struct tunnel *t;
    struct tunnel_conn *prev, *next;
    enum conn_state state;
    char id[SANDBOX_ID_LEN + 1];
    uint16_t port;
    struct bufferevent *bev[2]; /* [SIDE_CLIENT] until the relay takes over; [SIDE_GUEST] unused */
    int client_fd;              /* owned here until the relay takes it (bev does not close it) */
    int connect_fd;             /* the guest socket until the relay owns it */
    struct relay *relay;        /* SPLICING */
    int spliced_client_fd;      /* SPLICING: the client socket, the relay's (for the sweep) */
    struct event *timer;        /* request deadline, then the linger after ERR */
    struct event *connect_ev;   /* EV_WRITE on connect_fd, with the connect deadline */
    struct event *reaper;
    bool eof[2];  /* that side's read direction saw EOF */
    bool shut[2]; /* we sent shutdown(SHUT_WR) to that side */
};

struct tunnel {
    struct manager *m;
    struct listener *listener;
    struct event *sweep;
    int self_netns; /* the loop thread's own netns, to return to */
    char path[sizeof(((struct sockaddr_un *)NULL)->sun_path)];
    dev_t dev; /* of the socket we bound: only that one is unlinked at the end */
    ino_t ino;
    struct tunnel_conn *conns;
    size_t n_conns;
};

static void conn_free(struct tunnel_conn *c)
{
    struct tunnel *t = c->t;

    if (c->prev) {
        c->prev->next = c->next;
    } else {
        t->conns = c->next;
    }
    if (c->next) {
        c->next->prev = c->prev;
    }
    t->n_conns--;
    listener_release(t->listener, NULL);
    for (size_t i = 0; i < ARRAY_SIZE(c->bev); i++) {
        if (c->bev[i]) {
            bufferevent_free(c->bev[i]);
        }
    }
    close_safe(c->connect_fd);
    close_safe(c->client_fd);
    relay_free(c->relay);
    if (c->timer) {
        event_free(c->timer);
    }
    if (c->connect_ev) {
        event_free(c->connect_ev);
    }
    if (c->reaper) {
        event_free(c->reaper);
    }
    free(c);
}

static void reap_cb(evutil_socket_t fd, short what, void *userdata)
{
    conn_free(userdata);
}

/* Stops all I/O now; the memory goes in reap_cb(), outside any of c's callbacks. */
static void conn_close(struct tunnel_conn *c, const char *why)
{
    if (c->state == CONN_CLOSED) {
        return;
    }
    if (why) {
        log_sandbox_debug(c->id[0] ? c->id : NULL, "tunnel to port %u closed: %s",
                          (unsigned)c->port, why);
    }
    c->state = CONN_CLOSED;
    for (size_t i = 0; i < ARRAY_SIZE(c->bev); i++) {
        if (c->bev[i]) {
            bufferevent_setcb(c->bev[i], NULL, NULL, NULL, NULL);
            bufferevent_disable(c->bev[i], EV_READ | EV_WRITE);
        }
    }
    event_del(c->timer);
    if (c->connect_ev) {
        event_del(c->connect_ev);
    }
    event_active(c->reaper, EV_TIMEOUT, 1);
}

static void fail_read_cb(struct bufferevent *bev, void *userdata)
{
    struct evbuffer *in = bufferevent_get_input(bev);
    evbuffer_drain(in, evbuffer_get_length(in));
}

/*
 * The ERR line is out: send EOF and drain the client for a moment before
 * closing, since closing with unread input would reset the connection and
 * could destroy the ERR line before the client reads it.
 */
static void fail_write_cb(struct bufferevent *bev, void *userdata)
{
    struct timeval linger = { TUNNEL_LINGER_SEC, 0 };
    struct tunnel_conn *c = userdata;

    if (c->shut[SIDE_CLIENT]) {
        return;
    }
    c->shut[SIDE_CLIENT] = true;
    (void)shutdown(bufferevent_getfd(bev), SHUT_WR);
    if (c->eof[SIDE_CLIENT]) {
        conn_close(c, NULL);
        return;
    }
    evtimer_add(c->timer, &linger);
}

static void fail_event_cb(struct bufferevent *bev, short what, void *userdata)
{
    struct tunnel_conn *c = userdata;

    /* A client that half-closed still gets the whole ERR line. */
    if ((what & BEV_EVENT_EOF) && !c->shut[SIDE_CLIENT]) {
        c->eof[SIDE_CLIENT] = true;
        bufferevent_disable(bev, EV_READ);
        return;
    }
    conn_close(c, NULL);
}

/* Answers "ERR <status> <message>" and closes once it is out (or after a deadline). */
static void conn_fail(struct tunnel_conn *c, int status, const char *message)
{
    struct timeval deadline = { TUNNEL_REQUEST_TIMEOUT_SEC, 0 };
    struct bufferevent *client = c->bev[SIDE_CLIENT];

    log_sandbox_debug(c->id[0] ? c->id : NULL, "tunnel to port %u refused: %d %s",
                      (unsigned)c->port, status, message);
    c->state = CONN_FAILING;
    evtimer_add(c->timer, &deadline);
    if (c->connect_ev) {
        event_del(c->connect_ev);
    }
    c->connect_fd = close_safe(c->connect_fd);
    bufferevent_setcb(client, fail_read_cb, fail_write_cb, fail_event_cb, c);
    bufferevent_setwatermark(client, EV_READ, 0, 0);
    bufferevent_setwatermark(client, EV_WRITE, 0, 0);
    fail_read_cb(client, c);
    if (evbuffer_add_printf(bufferevent_get_output(client), "ERR %d %s\n", status, message) < 0 ||
        bufferevent_enable(client, c->eof[SIDE_CLIENT] ? EV_WRITE : EV_READ | EV_WRITE) < 0) {
        conn_close(c, "cannot send error");
    }
}

/* ---- splicing ---- */

static void relay_done(struct relay *r, int error, void *userdata)
{
    struct tunnel_conn *c = userdata;

    conn_close(c, error == 0            ? "both sides closed"
                  : error == -ETIMEDOUT ? "idle timeout"
                                        : "connection error");
}

/* Connected: "OK", then the relay owns both sockets (early client bytes go first). */
static void conn_splice(struct tunnel_conn *c, int fd)
{
    struct event_base *base = c->t->m->base;
    struct bufferevent *client = c->bev[SIDE_CLIENT];
    struct evbuffer *early = bufferevent_get_input(client);
    int r;

    r = relay_new(base, c->client_fd, fd, TUNNEL_IDLE_TIMEOUT_SEC, relay_done, c, &c->relay);
    if (r < 0) {
        close_safe(fd);
        conn_fail(c, 500, "out of memory");
        return;
    }
    c->spliced_client_fd = c->client_fd;
    c->client_fd = -EBADF; /* both are the relay's now */
    c->state = CONN_SPLICING;
    event_del(c->timer);
    log_sandbox_debug(c->id, "tunnel to port %u open", (unsigned)c->port);

    size_t n = evbuffer_get_length(early);
    r = relay_push(c->relay, RELAY_A, TUNNEL_PROTO_OK, strlen(TUNNEL_PROTO_OK));
    if (r >= 0 && n > 0) {
        r = relay_push(c->relay, RELAY_B, evbuffer_pullup(early, (ssize_t)n), n);
    }
    if (c->eof[SIDE_CLIENT]) {
        relay_set_eof(c->relay, RELAY_A); /* EOF before OK: passed on after the early bytes */
    }
    /* The bufferevent's job is done; it does not own the fd. */
    bufferevent_free(client);
    c->bev[SIDE_CLIENT] = NULL;
    if (r < 0 || relay_start(c->relay) < 0) {
        conn_close(c, "out of memory");
    }
}

/* ---- connecting ---- */

static void connect_failed(struct tunnel_conn *c, int error)
{
    char msg[96];

    switch (error) {
    case ECONNREFUSED:
        conn_fail(c, 502, "connection refused");
        break;
    case ETIMEDOUT:
        conn_fail(c, 504, "connect timeout");
        break;
    case ENOENT:
        conn_fail(c, 404, "sandbox not running"); /* its namespace is gone */
        break;
    default:
        snprintf(msg, sizeof(msg), "cannot connect: %s", strerror(error));
        conn_fail(c, 502, msg);
        break;
    }
}

static void connect_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct tunnel_conn *c = userdata;
    int error = 0;
    socklen_t len = sizeof(error);

    if (what & EV_TIMEOUT) {
        connect_failed(c, ETIMEDOUT);
        return;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) < 0) {
        error = errno;
    }
    if (error != 0) {
        connect_failed(c, error);
        return;
    }
    conn_splice(c, TAKE_FD(c->connect_fd));
}

/*
 * Creates a non-blocking TCP socket inside the sandbox's network namespace.
 * setns() only moves this thread, and only for the two calls in between.
 */
static int guest_socket(struct tunnel *t, const char *id, int *ret_fd)
{
    char path[PATH_MAX];
    int ns = -EBADF, fd = -EBADF;
    int r;

    r = manager_sandbox_netns_path(t->m, id, path, sizeof(path));
    if (r < 0) {
        return r;
    }
    ns = open(path, O_RDONLY | O_CLOEXEC);
    if (ns < 0) {
        return -errno;
    }
    r = NERRNO(setns(ns, CLONE_NEWNET));
    if (r >= 0) {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        r = fd < 0 ? -errno : 0;
        /* Staying in the sandbox's namespace would put the whole node there. */
        if (setns(t->self_netns, CLONE_NEWNET) < 0) {
            abort();
        }
    }
    close_safe(ns);
    if (r < 0) {
        return r;
    }
    *ret_fd = fd;
    return 0;
}

static void conn_connect(struct tunnel_conn *c)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(c->port) };
    struct timeval timeout = { TUNNEL_CONNECT_TIMEOUT_SEC, 0 };
    struct tunnel *t = c->t;
    int fd = -EBADF, one = 1;
    int r;

    c->state = CONN_CONNECTING;
    r = inet_pton(AF_INET, NETSLOT_GUEST_IP, &sa.sin_addr) == 1 ? 0 : -EINVAL;
    if (r >= 0) {
        r = guest_socket(t, c->id, &fd);
    }
    if (r < 0) {
        connect_failed(c, -r);
        return;
    }
    /* Interactive traffic (PTY input over a WebSocket, small RPCs) must not wait for Nagle. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        conn_splice(c, fd);
        return;
    }
    if (errno != EINPROGRESS) {
        r = errno;
        close_safe(fd);
        connect_failed(c, r);
        return;
    }
    c->connect_fd = fd;
    c->connect_ev = event_new(t->m->base, fd, EV_WRITE, connect_cb, c);
    if (!c->connect_ev || event_add(c->connect_ev, &timeout) < 0) {
        conn_fail(c, 500, "out of memory");
    }
}

/* ---- the request line ---- */

static void request_event_cb(struct bufferevent *bev, short what, void *userdata)
{
    struct tunnel_conn *c = userdata;

    /* A client may send its request and half-close before our OK: kept for the splice. */
    if ((what & BEV_EVENT_EOF) && c->state == CONN_CONNECTING) {
        c->eof[SIDE_CLIENT] = true;
        return;
    }
    conn_close(c, "client went away before the tunnel opened");
}

/* The request line's deadline, then the linger after an ERR line. */
static void timer_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct tunnel_conn *c = userdata;

    if (c->state == CONN_REQUEST) {
        conn_fail(c, 408, "request timeout");
    } else if (c->state == CONN_FAILING) {
        conn_close(c, NULL);
    }
}

/* Tunnels to sandbox id that are connecting or open, plus the one asking (routed, not yet). */
static unsigned sandbox_tunnels(const struct tunnel *t, const char *id)
{
    unsigned n = 0;
    for (const struct tunnel_conn *k = t->conns; k; k = k->next) {
        if ((k->state == CONN_CONNECTING || k->state == CONN_SPLICING ||
             k->state == CONN_REQUEST) &&
            strcmp(k->id, id) == 0) {
            n++;
        }
    }
    return n;
}

static unsigned max_per_sandbox(const struct tunnel *t)
{
    return MAX(listener_max_conns(t->listener) / 8, (unsigned)TUNNEL_MAX_PER_SANDBOX_MIN);
}

static void request_read_cb(struct bufferevent *bev, void *userdata)
{
    struct tunnel_conn *c = userdata;
    struct evbuffer *in = bufferevent_get_input(bev);
    struct manager *m = c->t->m;
    char *line;
    size_t n;
    int r;

    if (c->state != CONN_REQUEST) {
        return; /* more bytes before OK: kept in the input, forwarded after it */
    }
    line = evbuffer_readln(in, &n, EVBUFFER_EOL_LF);
    if (!line) {
        if (evbuffer_get_length(in) >= TUNNEL_PROTO_LINE_MAX) {
            conn_fail(c, 400, "request line too long");
        }
        return;
    }
    r = tunnel_proto_parse_request(line, n, c->id, &c->port);
    free(line);
    if (r < 0) {
        c->id[0] = '\0';
        conn_fail(c, 400,
                  r == -EBADMSG ? "expected 'TUNNEL <sandbox-id> <port>'"
                                : "invalid sandbox id or port");
        return;
    }

    if (m->stopping) {
        conn_fail(c, 503, "node is stopping");
        return;
    }
    struct vm *vm = manager_find(m, c->id);
    if (!vm || vm_state(vm) != VM_RUNNING) {
        conn_fail(c, 404, vm ? "sandbox not running" : "sandbox not found");
        return;
    }
    /* A guest that accepts and never answers cannot take every tunnel. */
    if (sandbox_tunnels(c->t, c->id) > max_per_sandbox(c->t)) {
        conn_fail(c, 503, "too many tunnels to this sandbox");
        return;
    }
    conn_connect(c);
}

/* ---- listener ---- */

/* A connection under the listener's cap (listener.h: from RLIMIT_NOFILE). */
static void accept_cb(struct listener *l, int fd, const struct sockaddr *sa, socklen_t socklen,
                      void *userdata)
{
    struct timeval timeout = { TUNNEL_REQUEST_TIMEOUT_SEC, 0 };
    struct tunnel *t = userdata;
    struct event_base *base = t->m->base;
    struct tunnel_conn *c = calloc(1, sizeof(*c));

    if (!c) {
        close_safe(fd);
        listener_release(l, NULL);
        return;
    }
    *c = (struct tunnel_conn){
        .t = t,
        .state = CONN_REQUEST,
        .connect_fd = -EBADF,
        .client_fd = fd,
        .spliced_client_fd = -EBADF,
    };
    c->bev[SIDE_CLIENT] = bufferevent_socket_new(base, fd, 0);
    c->timer = evtimer_new(base, timer_cb, c);
    c->reaper = evtimer_new(base, reap_cb, c);
    c->next = t->conns;
    if (t->conns) {
        t->conns->prev = c;
    }
    t->conns = c;
    t->n_conns++;
    if (!c->bev[SIDE_CLIENT] || !c->timer || !c->reaper) {
        conn_free(c);
        return;
    }
    if (t->m->stopping) {
        conn_fail(c, 503, "node is stopping");
        return;
    }
    bufferevent_setcb(c->bev[SIDE_CLIENT], request_read_cb, NULL, request_event_cb, c);
    /* The input never grows past one request line. */
    bufferevent_setwatermark(c->bev[SIDE_CLIENT], EV_READ, 0, TUNNEL_PROTO_LINE_MAX);
    if (bufferevent_enable(c->bev[SIDE_CLIENT], EV_READ) < 0 ||
        evtimer_add(c->timer, &timeout) < 0) {
        conn_free(c);
    }
}

/*
 * Closes every splicing tunnel whose client has closed its socket for good.
 * The relay stops reading a side once it sent EOF, and a guest that never
 * answers writes nothing to it, so a client that half-closed (the ingress
 * passes its client's EOF on) and later closed would hold its tunnel, and
 * the sandbox's count, until the idle timeout. On a Unix socket, unlike TCP,
 * that close shows: POLLHUP once neither direction is open, and then there is
 * nothing left for the tunnel to do. One poll() over all of them a sweep.
 */
static void sweep_closed_clients(struct tunnel *t)
{
    struct pollfd *p = calloc(t->n_conns ? t->n_conns : 1, sizeof(*p));
    size_t n = 0;

    if (!p) {
        return; /* the next sweep tries again */
    }
    for (struct tunnel_conn *c = t->conns; c && n < t->n_conns; c = c->next) {
        if (c->state == CONN_SPLICING) {
            p[n++] = (struct pollfd){ .fd = c->spliced_client_fd };
        }
    }
    if (n > 0 && poll(p, n, 0) > 0) {
        size_t i = 0;
        for (struct tunnel_conn *c = t->conns; c && i < n; c = c->next) {
            if (c->state != CONN_SPLICING) {
                continue;
            }
            if (p[i++].revents & (POLLHUP | POLLERR)) {
                conn_close(c, "client closed");
            }
        }
    }
    free(p);
}

/* Closes every tunnel whose sandbox is gone or no longer running (see the top comment). */
static void sweep_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct tunnel *t = userdata;

    sweep_closed_clients(t);
    for (struct tunnel_conn *c = t->conns; c; c = c->next) {
        if (c->state != CONN_CONNECTING && c->state != CONN_SPLICING) {
            continue;
        }
        struct vm *vm = manager_find(t->m, c->id);
        if (vm && vm_state(vm) == VM_RUNNING) {
            continue;
        }
        if (c->state == CONN_CONNECTING) {
            conn_fail(c, 404, "sandbox not running");
        } else {
            conn_close(c, "sandbox no longer running");
        }
    }
}

size_t tunnel_count(const struct tunnel *t)
{
    return t ? t->n_conns : 0;
}

int tunnel_new(struct manager *m, const char *path, struct tunnel **ret)
{
    struct sockaddr_un sa;
    struct timeval sweep = { TUNNEL_SWEEP_SEC, 0 };
    struct tunnel *t = NULL;
    bool bound = false;
    int fd = -EBADF;
    int r;

    assert(m);
    assert(path);
    assert(ret);

    if (strlen(path) >= sizeof(sa.sun_path)) {
        return -ENAMETOOLONG;
    }
    t = calloc(1, sizeof(*t));
    if (!t) {
        return -ENOMEM;
    }
    *t = (struct tunnel){ .m = m, .self_netns = -EBADF };
    memcpy(t->path, path, strlen(path) + 1);

    t->self_netns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (t->self_netns < 0) {
        r = -errno;
        goto fail;
    }
    /* 0660: a later unprivileged space-api in the node's group may connect. */
    fd = socket_listen_unix(path, 0660);
    if (fd < 0) {
        r = fd;
        goto fail;
    }
    bound = true;
    struct stat st;
    r = NERRNO(stat(path, &st));
    if (r < 0) {
        goto fail;
    }
    t->dev = st.st_dev;
    t->ino = st.st_ino;
    (void)listener_raise_nofile();
    struct listener_limits limits = { .fds_per_conn = TUNNEL_FDS_PER_CONN };
    r = listener_new(m->base, TAKE_FD(fd), &limits, accept_cb, t, &t->listener);
    if (r < 0) {
        goto fail; /* the listener closed fd; the path is unlinked below */
    }
    /* tests/ingress/test_load.py reads the caps here. */
    log_info("tunnels: at most %u, %u per sandbox", listener_max_conns(t->listener),
             max_per_sandbox(t));
    t->sweep = event_new(m->base, -1, EV_PERSIST, sweep_cb, t);
    if (!t->sweep || event_add(t->sweep, &sweep) < 0) {
        r = -ENOMEM;
        goto fail;
    }
    *ret = t;
    return 0;
fail:
    if (bound) {
        (void)unlink(path);
    }
    close_safe(fd);
    tunnel_free(t);
    return r;
}

struct tunnel *tunnel_free(struct tunnel *t)
{
    if (!t) {
        return NULL;
    }
    while (t->conns) {
        conn_free(t->conns);
    }
    if (t->listener) {
        struct stat st;
        t->listener = listener_free(t->listener);
        /* Another node may have taken the path over since; leave its socket alone. */
        if (lstat(t->path, &st) >= 0 && st.st_dev == t->dev && st.st_ino == t->ino) {
            (void)unlink(t->path);
        }
    }
    if (t->sweep) {
        event_free(t->sweep);
    }
    close_safe(t->self_netns);
    free(t);
    return NULL;
}
