/*
 * The space-gw session (see gw-client.h). States:
 *
 *   DOWN   no socket; the retry timer is armed
 *     -> HELLO  [try_connect: connected, hello queued]
 *   HELLO  only the hello is in flight
 *     -> READY  [hello reply ok: CA kept, resync attaches everything]
 *     -> DOWN   [hello refused, socket closed, protocol error]
 *   READY  requests flow; replies are matched in order
 *     -> DOWN   [socket closed, protocol error, queue overflow]
 *
 * Outgoing requests wait in `out` until the socket takes them (EV_WRITE
 * when it does not); each sent one waits in `sent` for its reply. The two
 * together are bounded by GW_CLIENT_QUEUE_MAX. Descriptors queued for an
 * attach are our own duplicates, so an instance destroyed before they are
 * sent cannot make us send a recycled descriptor number.
 */
#include "node/gw-client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "node/gw-msg.h"
#include "shared/gw-proto.h"

enum gw_state { GW_DOWN, GW_HELLO, GW_READY };

struct gw_request {
    enum gw_msg_type type;
    char instance[INSTANCE_ID_LEN + 1];
    char *text;
    int fds[2];
    int n_fds;
    usec_t sent_at;     /* monotonic, once sent */
    gw_client_ca_fn cb; /* ca-rotate: told of the reply, or of the session's end */
    void *cb_data;
};

/* A FIFO of requests in a fixed array (GW_CLIENT_QUEUE_MAX). */
struct gw_fifo {
    struct gw_request *items;
    size_t head, count;
};

struct gw_client {
    struct event_base *base;
    char *path, *node_name;
    struct egress_audit *audit;
    gw_client_resync_fn resync;
    void *userdata;

    enum gw_state state;
    int fd;
    struct event *ev_read, *ev_write, *retry, *watchdog;
    struct gw_fifo out, sent;
    char *ca_pem;
    struct gw_client_ca ca; /* phase and fingerprints of the last hello / ca-rotate reply */
    char *buf;              /* one datagram, GW_PROTO_MSG_MAX + 1 */
    bool quiet;             /* the failure was logged: retries say nothing until it works again */
};

static void request_release(struct gw_request *q)
{
    if (q->cb) {
        q->cb(q->cb_data, -ECONNRESET, "the space-gw session ended before it answered");
    }
    free(q->text);
    for (int i = 0; i < q->n_fds; i++) {
        close_safe(q->fds[i]);
    }
    *q = (struct gw_request){ 0 };
}

static struct gw_request *fifo_head(struct gw_fifo *f)
{
    return f->count ? &f->items[f->head] : NULL;
}

static void fifo_push(struct gw_fifo *f, struct gw_request *q)
{
    f->items[(f->head + f->count) % GW_CLIENT_QUEUE_MAX] = *q;
    f->count++;
}

static void fifo_pop(struct gw_fifo *f, struct gw_request *ret)
{
    *ret = f->items[f->head];
    f->items[f->head] = (struct gw_request){ 0 };
    f->head = (f->head + 1) % GW_CLIENT_QUEUE_MAX;
    f->count--;
}

static void fifo_clear(struct gw_fifo *f)
{
    struct gw_request q;
    while (f->count) {
        fifo_pop(f, &q);
        request_release(&q);
    }
    f->head = 0;
}

static void session_close(struct gw_client *gw)
{
    if (gw->ev_read) {
        event_free(gw->ev_read);
        gw->ev_read = NULL;
    }
    if (gw->ev_write) {
        event_free(gw->ev_write);
        gw->ev_write = NULL;
    }
    gw->fd = close_safe(gw->fd);
    fifo_clear(&gw->out);
    fifo_clear(&gw->sent);
    gw->state = GW_DOWN;
}

static void schedule_retry(struct gw_client *gw)
{
    struct timeval tv = { GW_CLIENT_RETRY / USEC_PER_SEC, GW_CLIENT_RETRY % USEC_PER_SEC };
    evtimer_add(gw->retry, &tv);
}

/* Drops the session (logging why, once per outage) and tries again later. */
static void session_reset(struct gw_client *gw, const char *why)
{
    bool was_ready = gw->state == GW_READY;
    session_close(gw);
    if (!gw->quiet) {
        log_warning("space-gw at '%s': %s; egress is %s until it is back (retrying every %llu s)",
                    gw->path, why, was_ready ? "interrupted" : "unavailable",
                    (unsigned long long)(GW_CLIENT_RETRY / USEC_PER_SEC));
        gw->quiet = true;
    } else {
        log_debug("space-gw at '%s': %s", gw->path, why);
    }
    schedule_retry(gw);
}

/* Sends what the socket takes; 0, or -errno after which the session was reset. */
static int flush(struct gw_client *gw)
{
    while (gw->out.count && gw->sent.count < GW_CLIENT_QUEUE_MAX) {
        struct gw_request *q = fifo_head(&gw->out), sent;
        struct iovec iov = { .iov_base = q->text, .iov_len = strlen(q->text) };
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(sizeof(int) * 2)];
        } ctl;
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (q->n_fds > 0) {
            memset(&ctl, 0, sizeof(ctl));
            mh.msg_control = ctl.buf;
            mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)q->n_fds);
            struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)q->n_fds);
            memcpy(CMSG_DATA(c), q->fds, sizeof(int) * (size_t)q->n_fds);
        }
        if (sendmsg(gw->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
            if (errno == EAGAIN || errno == EINTR) {
                event_add(gw->ev_write, NULL);
                return 0;
            }
            int r = -errno;
            session_reset(gw, strerror(-r));
            return r;
        }
        fifo_pop(&gw->out, &sent);
        /* Sent: space-gw has its own copies now; ours are done. */
        for (int i = 0; i < sent.n_fds; i++) {
            sent.fds[i] = close_safe(sent.fds[i]);
        }
        sent.n_fds = 0;
        sent.sent_at = now_monotonic();
        free(sent.text);
        sent.text = NULL;
        fifo_push(&gw->sent, &sent);
    }
    return 0;
}

static int enqueue_cb(struct gw_client *gw, enum gw_msg_type type, const char *iid, char *text,
                      const int *fds, int n_fds, gw_client_ca_fn cb, void *cb_data)
{
    struct gw_request q = {
        .type = type, .text = text, .fds = { -EBADF, -EBADF }, .cb = cb, .cb_data = cb_data
    };
    int r;

    if (!text) {
        return -EINVAL;
    }
    if (gw->out.count + gw->sent.count >= GW_CLIENT_QUEUE_MAX) {
        free(text);
        session_reset(gw, "it fell too far behind (queue full): starting a new session to "
                          "resynchronise");
        return cb ? -ECONNRESET : 0;
    }
    if (iid) {
        snprintf(q.instance, sizeof(q.instance), "%s", iid);
    }
    for (int i = 0; i < n_fds; i++) {
        q.fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
        if (q.fds[i] < 0) {
            r = -errno;
            q.n_fds = i;
            request_release(&q);
            return r;
        }
    }
    q.n_fds = n_fds;
    fifo_push(&gw->out, &q);
    (void)flush(gw);
    return 0;
}

static int enqueue(struct gw_client *gw, enum gw_msg_type type, const char *iid, char *text,
                   const int *fds, int n_fds)
{
    return enqueue_cb(gw, type, iid, text, fds, n_fds, NULL, NULL);
}

/* A reply: it must answer the oldest request sent. */
static int handle_reply(struct gw_client *gw, struct gw_msg *m)
{
    struct gw_request *q = fifo_head(&gw->sent), done;

    if (!q || q->type != m->type || strcmp(q->instance, m->instance) != 0) {
        return -EPROTO;
    }
    fifo_pop(&gw->sent, &done);
    if (m->ok && m->ca_cert) {
        free(gw->ca_pem);
        gw->ca_pem = TAKE_PTR(m->ca_cert);
        snprintf(gw->ca.phase, sizeof(gw->ca.phase), "%s", m->ca_phase);
        memcpy(gw->ca.current, m->ca_current, sizeof(gw->ca.current));
        memcpy(gw->ca.next, m->ca_next, sizeof(gw->ca.next));
    }
    if (done.cb) {
        gw_client_ca_fn cb = TAKE_PTR(done.cb);
        cb(done.cb_data, m->ok ? 0 : -EBUSY, m->ok ? NULL : m->error);
    }
    request_release(&done);
    if (!m->ok) {
        if (m->type == GW_MSG_HELLO) {
            log_warning("space-gw refused hello: %s", m->error);
            return -EPROTO;
        }
        log_warning("space-gw refused %s%s%s: %s", gw_msg_type_to_string(m->type),
                    m->instance[0] ? " of instance " : "", m->instance, m->error);
        return 0;
    }
    if (m->type == GW_MSG_CA_ROTATE) {
        log_info("space-gw egress CA: %s (current %.16s, next %.16s)", gw->ca.phase, gw->ca.current,
                 gw->ca.next[0] ? gw->ca.next : "-");
    }
    if (m->type == GW_MSG_HELLO) {
        gw->state = GW_READY;
        gw->quiet = false;
        log_info("connected to space-gw at '%s'", gw->path);
        gw->resync(gw, gw->userdata);
    }
    return 0;
}

static void handle_audit(struct gw_client *gw, struct gw_msg *m)
{
    size_t i, refused = 0;
    json_t *rec;

    json_array_foreach (m->records, i, rec) {
        if (egress_audit_push(gw->audit, rec) < 0) {
            refused++;
        }
    }
    if (m->bad_records + refused > 0) {
        log_warning("space-gw sent %zu malformed audit record(s), dropped",
                    m->bad_records + refused);
    }
}

/* One datagram; 0, or -errno when the session must end (*why says why). */
static int receive_one(struct gw_client *gw, const char **why)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int) * 8)];
    } ctl;
    struct iovec iov = { .iov_base = gw->buf, .iov_len = GW_PROTO_MSG_MAX + 1 };
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)
    };
    struct gw_msg m;
    bool had_fds = false;
    ssize_t n;
    int r;

    n = recvmsg(gw->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) {
            return -EAGAIN;
        }
        *why = strerror(errno);
        return -errno;
    }
    /* space-gw never sends descriptors: close any, and end a session that does. */
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            int fds[8];
            memcpy(fds, CMSG_DATA(c), MIN(k, ARRAY_SIZE(fds)) * sizeof(int));
            for (size_t i = 0; i < MIN(k, ARRAY_SIZE(fds)); i++) {
                close_safe(fds[i]);
            }
            had_fds = true;
        }
    }
    if (n == 0) {
        *why = "it closed the connection";
        return -ECONNRESET;
    }
    if (had_fds || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        *why = had_fds ? "it sent descriptors" : "it sent a message over GW_PROTO_MSG_MAX";
        return -EPROTO;
    }
    r = gw_msg_parse(gw->buf, (size_t)n, &m, why);
    if (r < 0) {
        return r;
    }
    if (m.type == GW_MSG_AUDIT) {
        handle_audit(gw, &m);
    } else {
        r = handle_reply(gw, &m);
        if (r < 0 && !*why) {
            *why = "a reply that answers no request (out of order)";
        }
    }
    gw_msg_release(&m);
    return r;
}

static void read_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct gw_client *gw = userdata;

    /* A bounded batch per wake-up: audit floods must not starve the node's API. */
    for (int i = 0; i < 64; i++) {
        const char *why = NULL;
        int r = receive_one(gw, &why);
        if (r == -EAGAIN) {
            return;
        }
        if (r < 0) {
            session_reset(gw, why ? why : "protocol error");
            return;
        }
        if (gw->state == GW_DOWN) {
            return; /* resync overflowed the queue and reset */
        }
    }
}

/* Once a second while connected: a gateway that stopped answering gets a new session. */
static void watchdog_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct gw_client *gw = userdata;
    struct gw_request *q = fifo_head(&gw->sent);

    if (gw->state != GW_DOWN && q && now_monotonic() - q->sent_at > GW_CLIENT_REPLY_TIMEOUT) {
        session_reset(gw, "it did not answer a request in time");
    }
}

static void write_cb(evutil_socket_t fd, short what, void *userdata)
{
    (void)flush(userdata);
}

static void try_connect(evutil_socket_t fd_unused, short what, void *userdata)
{
    struct gw_client *gw = userdata;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd;

    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", gw->path);
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        session_reset(gw, strerror(errno));
        return;
    }
    /* A Unix connect completes at once or fails (EAGAIN: its backlog is full): no
     * in-progress state to wait for. */
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        char why[128];
        snprintf(why, sizeof(why), "cannot connect: %s", strerror(errno));
        close_safe(fd);
        session_reset(gw, why);
        return;
    }
    gw->fd = fd;
    gw->ev_read = event_new(gw->base, fd, EV_READ | EV_PERSIST, read_cb, gw);
    gw->ev_write = event_new(gw->base, fd, EV_WRITE, write_cb, gw);
    if (!gw->ev_read || !gw->ev_write) {
        session_reset(gw, "out of memory");
        return;
    }
    event_add(gw->ev_read, NULL);
    gw->state = GW_HELLO;
    (void)enqueue(gw, GW_MSG_HELLO, NULL, gw_msg_hello(gw->node_name), NULL, 0);
}

int gw_client_new(struct event_base *base, const char *path, const char *node_name,
                  struct egress_audit *audit, gw_client_resync_fn resync, void *userdata,
                  struct gw_client **ret)
{
    struct sockaddr_un sa;
    struct gw_client *gw;

    if (!path || strlen(path) >= sizeof(sa.sun_path) || !node_name || !*node_name) {
        return -EINVAL;
    }
    gw = calloc(1, sizeof(*gw));
    if (!gw) {
        return -ENOMEM;
    }
    *gw = (struct gw_client){
        .base = base, .audit = audit, .resync = resync, .userdata = userdata, .fd = -EBADF
    };
    gw->path = strdup(path);
    gw->node_name = strdup(node_name);
    gw->buf = malloc(GW_PROTO_MSG_MAX + 1);
    gw->out.items = calloc(GW_CLIENT_QUEUE_MAX, sizeof(struct gw_request));
    gw->sent.items = calloc(GW_CLIENT_QUEUE_MAX, sizeof(struct gw_request));
    gw->retry = evtimer_new(base, try_connect, gw);
    gw->watchdog = event_new(base, -1, EV_PERSIST, watchdog_cb, gw);
    if (!gw->path || !gw->node_name || !gw->buf || !gw->out.items || !gw->sent.items ||
        !gw->retry || !gw->watchdog) {
        gw_client_free(gw);
        return -ENOMEM;
    }
    struct timeval second = { 1, 0 };
    event_add(gw->watchdog, &second);
    /* Right away, but from the loop: resync may use what the caller sets up after this. */
    event_active(gw->retry, EV_TIMEOUT, 0);
    *ret = gw;
    return 0;
}

struct gw_client *gw_client_free(struct gw_client *gw)
{
    if (!gw) {
        return NULL;
    }
    session_close(gw);
    if (gw->retry) {
        event_free(gw->retry);
    }
    if (gw->watchdog) {
        event_free(gw->watchdog);
    }
    free(gw->out.items);
    free(gw->sent.items);
    free(gw->buf);
    free(gw->ca_pem);
    free(gw->path);
    free(gw->node_name);
    free(gw);
    return NULL;
}

bool gw_client_ready(const struct gw_client *gw)
{
    return gw && gw->state == GW_READY;
}

const char *gw_client_ca_pem(const struct gw_client *gw)
{
    return gw ? gw->ca_pem : NULL;
}

const struct gw_client_ca *gw_client_ca(const struct gw_client *gw)
{
    return gw && gw->ca_pem ? &gw->ca : NULL;
}

int gw_client_ca_rotate(struct gw_client *gw, const char *step, gw_client_ca_fn cb, void *userdata)
{
    char *text = gw_msg_ca_rotate(step);

    if (!text || !cb) {
        free(text);
        return -EINVAL;
    }
    if (!gw_client_ready(gw)) {
        free(text);
        return -ENOTCONN;
    }
    return enqueue_cb(gw, GW_MSG_CA_ROTATE, NULL, text, NULL, 0, cb, userdata);
}

int gw_client_attach(struct gw_client *gw, const char *iid, const char *sandbox_id,
                     const char *policy_json, int dns_fd, int gateway_fd)
{
    int fds[2] = { dns_fd, gateway_fd };

    if (dns_fd < 0 || gateway_fd < 0) {
        return -EINVAL;
    }
    if (!gw_client_ready(gw)) {
        return 0;
    }
    return enqueue(gw, GW_MSG_ATTACH, iid, gw_msg_attach(iid, sandbox_id, policy_json), fds, 2);
}

int gw_client_policy(struct gw_client *gw, const char *iid, const char *policy_json)
{
    if (!gw_client_ready(gw)) {
        return 0;
    }
    return enqueue(gw, GW_MSG_POLICY, iid, gw_msg_policy(iid, policy_json), NULL, 0);
}

int gw_client_detach(struct gw_client *gw, const char *iid)
{
    if (!gw_client_ready(gw)) {
        return 0;
    }
    return enqueue(gw, GW_MSG_DETACH, iid, gw_msg_detach(iid), NULL, 0);
}
