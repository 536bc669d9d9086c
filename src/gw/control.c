/*
 * The control socket server (control.h has the contract).
 */
#include "gw/control.h"

#include <errno.h>
#include <event2/event.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "gw/audit.h"
#include "gw/ca-set.h"
#include "gw/control-msg.h"
#include "gw/sandbox.h"
#include "gw/tls-term.h"
#include "shared/gw-proto.h"

#define CONTROL_FDS_MAX 8 /* descriptors one datagram may bring (more: refused and closed) */

struct outmsg {
    struct outmsg *next;
    size_t len;
    char buf[];
};

struct session {
    struct control *c;
    int fd;
    struct event *rev, *wev;
    struct outmsg *out_head, *out_tail;
    unsigned n_out;
    bool hello;
    bool closing;
    uint64_t serial; /* order of hello: the newest is the audit target */
};

struct control {
    struct gw *gw;
    char *path;
    int fd;
    struct event *accept_ev, *flush_timer, *reaper;
    struct session *sessions[CONTROL_SESSIONS_MAX];
    uint64_t serial;
    struct strbuf batch;
};

static void session_free(struct session *s)
{
    struct control *c = s->c;

    for (size_t i = 0; i < CONTROL_SESSIONS_MAX; i++) {
        if (c->sessions[i] == s) {
            c->sessions[i] = NULL;
        }
    }
    if (s->rev) {
        event_free(s->rev);
    }
    if (s->wev) {
        event_free(s->wev);
    }
    while (s->out_head) {
        struct outmsg *m = s->out_head;
        s->out_head = m->next;
        free(m);
    }
    close_safe(s->fd);
    free(s);
}

static void reap_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct control *c = userdata;

    for (size_t i = 0; i < CONTROL_SESSIONS_MAX; i++) {
        if (c->sessions[i] && c->sessions[i]->closing) {
            session_free(c->sessions[i]);
        }
    }
}

/* Never inside the session's own callbacks (R15): marked, freed by the reaper. */
static void session_close(struct session *s, const char *why)
{
    if (s->closing) {
        return;
    }
    log_info("control session closed: %s", why);
    s->closing = true;
    event_del(s->rev);
    event_del(s->wev);
    event_active(s->c->reaper, EV_TIMEOUT, 1);
}

static struct session *audit_target(struct control *c)
{
    struct session *best = NULL;

    for (size_t i = 0; i < CONTROL_SESSIONS_MAX; i++) {
        struct session *s = c->sessions[i];
        if (s && s->hello && !s->closing && (!best || s->serial > best->serial)) {
            best = s;
        }
    }
    return best;
}

/* Sends what is queued; returns false when the socket is full (write event armed). */
static bool session_drain(struct session *s)
{
    while (s->out_head) {
        struct outmsg *m = s->out_head;
        ssize_t n = send(s->fd, m->buf, m->len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
                event_add(s->wev, NULL);
                return false;
            }
            session_close(s, "send failed");
            return false;
        }
        s->out_head = m->next;
        if (!s->out_head) {
            s->out_tail = NULL;
        }
        s->n_out--;
        free(m);
    }
    return true;
}

static void session_send(struct session *s, const char *buf, size_t len)
{
    struct outmsg *m;

    if (s->closing) {
        return;
    }
    if (s->n_out >= CONTROL_OUT_MAX || !(m = malloc(sizeof(*m) + len))) {
        session_close(s, "peer does not read its replies");
        return;
    }
    m->next = NULL;
    m->len = len;
    memcpy(m->buf, buf, len);
    if (s->out_tail) {
        s->out_tail->next = m;
    } else {
        s->out_head = m;
    }
    s->out_tail = m;
    s->n_out++;
    (void)session_drain(s);
}

static void flush_audit(struct control *c)
{
    struct session *s = audit_target(c);
    struct audit *a = c->gw->audit;

    while (s && !s->closing && !s->out_head) {
        int n = audit_batch(a, GW_PROTO_AUDIT_BATCH, GW_PROTO_MSG_MAX, &c->batch);
        if (n < 0 || c->batch.len == 0) {
            break;
        }
        ssize_t w = send(s->fd, c->batch.buf, c->batch.len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
                event_add(s->wev, NULL);
            } else {
                session_close(s, "send failed");
            }
            break;
        }
        audit_commit(a, (size_t)n);
    }
    strbuf_release(&c->batch);
    if (audit_pending(a) > 0 && !evtimer_pending(c->flush_timer, NULL)) {
        struct timeval tv = { 0, GW_PROTO_AUDIT_FLUSH_MS * 1000 };
        evtimer_add(c->flush_timer, &tv);
    }
}

static void flush_cb(evutil_socket_t fd, short what, void *userdata)
{
    flush_audit(userdata);
}

void control_audit_pending(struct control *c)
{
    if (!c) {
        return;
    }
    if (audit_pending(c->gw->audit) >= GW_PROTO_AUDIT_BATCH) {
        flush_audit(c);
    } else if (!evtimer_pending(c->flush_timer, NULL)) {
        struct timeval tv = { 0, GW_PROTO_AUDIT_FLUSH_MS * 1000 };
        evtimer_add(c->flush_timer, &tv);
    }
}

static void write_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct session *s = userdata;

    if (session_drain(s)) {
        flush_audit(s->c);
    }
}

/* True when fd is a socket of this family and type (and, want_listening, listening). */
static bool fd_is(int fd, int family, int type, bool want_listening)
{
    int v;
    socklen_t l = sizeof(v);

    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) < 0 || v != family) {
        return false;
    }
    l = sizeof(v);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &l) < 0 || v != type) {
        return false;
    }
    l = sizeof(v);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) < 0 || (v != 0) != want_listening) {
        return false;
    }
    return true;
}

static void handle(struct session *s, const char *msg, size_t len, int *fds, size_t n_fds)
{
    struct control *c = s->c;
    struct gw *gw = c->gw;
    struct control_request req;
    char err[CONTROL_ERROR_MAX];
    struct strbuf out = STRBUF_INIT;
    struct control_ca ca;
    const char *error = NULL;
    int r;

    r = control_msg_parse(msg, len, n_fds, &req, err);
    if (r < 0) {
        error = err;
    } else if (req.type != CONTROL_HELLO && !s->hello) {
        error = "hello first";
    } else {
        switch (req.type) {
        case CONTROL_HELLO:
            /* A (re)started node: whatever an earlier session handed over is stale. */
            sandbox_release_all_fds(gw);
            s->hello = true;
            s->serial = ++c->serial;
            log_info("control session: hello from node '%s'", req.node);
            break;
        case CONTROL_ATTACH:
            if (!fd_is(fds[0], AF_INET, SOCK_DGRAM, false) ||
                !fd_is(fds[1], AF_INET, SOCK_STREAM, true)) {
                error = "attach needs [0] an IPv4 UDP socket and [1] a listening IPv4 TCP socket";
                break;
            }
            r = sandbox_attach(gw, req.instance, req.sandbox, &req.policy, fds[0], fds[1], err);
            fds[0] = fds[1] = -EBADF; /* owned by sandbox_attach() now */
            if (r < 0) {
                error = err;
            }
            break;
        case CONTROL_POLICY:
            if (sandbox_set_policy(gw, req.instance, &req.policy, err) < 0) {
                error = err;
            }
            break;
        case CONTROL_DETACH:
            if (sandbox_detach(gw, req.instance) < 0) {
                error = "instance not attached";
            }
            break;
        case CONTROL_CA_ROTATE: {
            enum ca_step step;
            if (!gw->tls || ca_step_from_string(req.step, &step) < 0) {
                error = "no egress CA to rotate";
            } else if (tls_term_ca_step(gw->tls, step, err) < 0) {
                error = err;
            }
            break;
        }
        case CONTROL_UNKNOWN:
            assert_not_reached();
        }
    }
    if (error) {
        log_warning("control %s refused: %s", control_type_str(req.type), error);
    }
    if (gw->tls) {
        const struct ca_set *cas = tls_term_ca_set(gw->tls);
        ca = (struct control_ca){
            .bundle = ca_set_bundle(cas),
            .phase = ca_phase_str(ca_set_phase(cas)),
            .current = ca_set_current_fingerprint(cas),
            .next = ca_set_next_fingerprint(cas),
        };
    }
    if (control_msg_reply(&req, error, gw->tls ? &ca : NULL, &out) < 0) {
        session_close(s, "out of memory");
    } else {
        session_send(s, out.buf, out.len);
    }
    strbuf_release(&out);
    control_request_done(&req);
    if (s->hello && req.type == CONTROL_HELLO) {
        flush_audit(c);
    }
}

static void read_cb(evutil_socket_t fd, short what, void *userdata)
{
    static char buf[GW_PROTO_MSG_MAX + 1];
    struct session *s = userdata;

    for (int k = 0; k < CONTROL_READ_BATCH && !s->closing; k++) {
        union {
            struct cmsghdr h;
            char b[CMSG_SPACE(CONTROL_FDS_MAX * sizeof(int))];
        } cbuf;
        struct iovec iov = { buf, sizeof(buf) };
        struct msghdr mh = { .msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = cbuf.b,
                             .msg_controllen = sizeof(cbuf.b) };
        int fds[CONTROL_FDS_MAX * 2];
        size_t n_fds = 0;
        bool bad_cmsg = false;

        ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                session_close(s, "receive failed");
            }
            return;
        }
        for (struct cmsghdr *ch = CMSG_FIRSTHDR(&mh); ch; ch = CMSG_NXTHDR(&mh, ch)) {
            if (ch->cmsg_level == SOL_SOCKET && ch->cmsg_type == SCM_RIGHTS) {
                size_t k2 = (ch->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k2; i++) {
                    int f;
                    memcpy(&f, CMSG_DATA(ch) + i * sizeof(int), sizeof(int));
                    if (n_fds < ARRAY_SIZE(fds)) {
                        fds[n_fds++] = f;
                    } else {
                        close_safe(f);
                        bad_cmsg = true;
                    }
                }
            } else {
                bad_cmsg = true;
            }
        }
        if (n == 0 && n_fds == 0) {
            session_close(s, "peer closed");
            return;
        }
        if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || bad_cmsg) {
            /* Handled as the oversize / wrong-fd-count message it is: refused with a reply. */
            handle(s, buf, mh.msg_flags & MSG_TRUNC ? sizeof(buf) : (size_t)n, fds, SIZE_MAX);
        } else {
            handle(s, buf, (size_t)n, fds, n_fds);
        }
        for (size_t i = 0; i < n_fds; i++) {
            close_safe(fds[i]); /* what nobody took */
        }
    }
}

static void accept_cb(evutil_socket_t lfd, short what, void *userdata)
{
    struct control *c = userdata;
    struct session *s;
    struct ucred cred;
    socklen_t l = sizeof(cred);
    size_t slot = CONTROL_SESSIONS_MAX;
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

    if (fd < 0) {
        return;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &l) < 0 ||
        (cred.uid != 0 && cred.uid != geteuid())) {
        log_warning("control connection from uid %u refused", (unsigned)cred.uid);
        close_safe(fd);
        return;
    }
    for (size_t i = 0; i < CONTROL_SESSIONS_MAX; i++) {
        if (!c->sessions[i]) {
            slot = i;
            break;
        }
    }
    if (slot == CONTROL_SESSIONS_MAX) {
        /* Full: the oldest session makes room (a restarted node's dead one, most likely). */
        struct session *old = NULL;
        for (size_t i = 0; i < CONTROL_SESSIONS_MAX; i++) {
            if (!old || c->sessions[i]->serial < old->serial) {
                old = c->sessions[i];
                slot = i;
            }
        }
        old->closing = true;
        session_free(old);
    }
    s = calloc(1, sizeof(*s));
    if (!s) {
        close_safe(fd);
        return;
    }
    s->c = c;
    s->fd = fd;
    s->rev = event_new(c->gw->base, fd, EV_READ | EV_PERSIST, read_cb, s);
    s->wev = event_new(c->gw->base, fd, EV_WRITE, write_cb, s);
    if (!s->rev || !s->wev || event_add(s->rev, NULL) < 0) {
        session_free(s);
        return;
    }
    c->sessions[slot] = s;
    log_info("control session opened (peer pid %d)", (int)cred.pid);
}

int control_new(struct gw *gw, const char *path, struct control **ret)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct control *c;
    mode_t old;
    int r;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        return -ENAMETOOLONG;
    }
    c = calloc(1, sizeof(*c));
    if (!c) {
        return -ENOMEM;
    }
    c->gw = gw;
    c->fd = -EBADF;
    c->path = strdup(path);
    if (!c->path) {
        r = -ENOMEM;
        goto fail;
    }
    memcpy(sa.sun_path, path, strlen(path));
    c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        r = -errno;
        goto fail;
    }
    (void)unlink(path);
    old = umask(0177); /* 0600 from the start: no window where others may connect */
    r = bind(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
    umask(old);
    if (r < 0 || chmod(path, 0600) < 0 || listen(c->fd, 16) < 0) {
        r = r < 0 ? r : -errno;
        goto fail;
    }
    c->accept_ev = event_new(gw->base, c->fd, EV_READ | EV_PERSIST, accept_cb, c);
    c->flush_timer = evtimer_new(gw->base, flush_cb, c);
    c->reaper = event_new(gw->base, -1, 0, reap_cb, c);
    if (!c->accept_ev || !c->flush_timer || !c->reaper || event_add(c->accept_ev, NULL) < 0) {
        r = -ENOMEM;
        goto fail;
    }
    *ret = c;
    return 0;
fail:
    control_free(c);
    return r;
}

struct control *control_free(struct control *c)
{
    if (!c) {
        return NULL;
    }
    for (size_t i = 0; i < CONTROL_SESSIONS_MAX; i++) {
        if (c->sessions[i]) {
            session_free(c->sessions[i]);
        }
    }
    if (c->accept_ev) {
        event_free(c->accept_ev);
    }
    if (c->flush_timer) {
        event_free(c->flush_timer);
    }
    if (c->reaper) {
        event_free(c->reaper);
    }
    if (c->fd >= 0 && c->path) {
        (void)unlink(c->path);
    }
    close_safe(c->fd);
    free(c->path);
    strbuf_release(&c->batch);
    free(c);
    return NULL;
}
