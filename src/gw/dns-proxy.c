/*
 * The per-sandbox DNS proxy (dns-proxy.h has the contract).
 */
#include "gw/dns-proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/random-util.h"
#include "basic/time-util.h"
#include "gw/audit.h"
#include "gw/dns-msg.h"
#include "gw/policy.h"
#include "gw/resolved.h"
#include "gw/sandbox.h"

struct pending {
    bool used;
    uint16_t up_id;
    struct dns_query q;
    struct sockaddr_in client;
    enum policy_reason reason;
    usec_t start;
};

struct dns_proxy {
    struct sandbox *sb;
    int fd, up_fd;
    struct event *ev, *up_ev, *timer;
    struct pending *pending; /* limits.dns_inflight slots */
    unsigned n_pending, max_pending;
    double tokens;
    usec_t refilled;
    uint64_t limited;   /* dropped by a limit since the last audit record of it */
    usec_t limited_at;  /* when that record went */
    uint64_t malformed; /* malformed queries since the last audit record of them */
    usec_t malformed_at;
};

static void audit_query(struct dns_proxy *p, const char *name, const char *verdict,
                        const char *reason, usec_t start)
{
    json_t *rec = audit_record_new(p->sb->id, "dns");

    if (!rec) {
        return;
    }
    if (name && name[0]) {
        json_object_set_new(rec, "name", json_string(name));
    }
    json_object_set_new(rec, "verdict", json_string(verdict));
    json_object_set_new(rec, "reason", json_string(reason));
    if (start) {
        json_object_set_new(rec, "durationMs",
                            json_integer((json_int_t)((now_monotonic() - start) / USEC_PER_MSEC)));
    }
    gw_audit(p->sb->gw, rec);
}

static void note_limited(struct dns_proxy *p)
{
    usec_t now = now_monotonic();

    p->limited++;
    if (now - p->limited_at >= USEC_PER_SEC) {
        json_t *rec = audit_record_new(p->sb->id, "dns");
        if (rec) {
            json_object_set_new(rec, "verdict", json_string("deny"));
            json_object_set_new(rec, "reason", json_string("dns-rate-limit"));
            json_object_set_new(rec, "count", json_integer((json_int_t)p->limited));
            gw_audit(p->sb->gw, rec);
        }
        p->limited = 0;
        p->limited_at = now;
    }
}

static bool take_token(struct dns_proxy *p)
{
    const struct gw_limits *l = &p->sb->gw->limits;
    usec_t now = now_monotonic();
    double burst = 2.0 * l->dns_qps;

    p->tokens = MIN(burst, p->tokens + (double)(now - p->refilled) * l->dns_qps / USEC_PER_SEC);
    p->refilled = now;
    if (p->tokens < 1.0) {
        return false;
    }
    p->tokens -= 1.0;
    return true;
}

static void send_to_guest(struct dns_proxy *p, const struct sockaddr_in *to, const uint8_t *buf,
                          ssize_t len)
{
    if (len <= 0) {
        return;
    }
    /* Best effort, like any UDP server: a full socket buffer drops the answer. */
    (void)sendto(p->fd, buf, (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)to,
                 sizeof(*to));
}

static void answer_error(struct dns_proxy *p, const struct dns_query *q,
                         const struct sockaddr_in *to, uint8_t rcode)
{
    uint8_t buf[DNS_MSG_MAX];
    send_to_guest(p, to, buf, dns_build_error(q, rcode, buf, sizeof(buf)));
}

static struct pending *pending_find(struct dns_proxy *p, uint16_t id)
{
    for (unsigned i = 0; i < p->max_pending; i++) {
        if (p->pending[i].used && p->pending[i].up_id == id) {
            return &p->pending[i];
        }
    }
    return NULL;
}

static void pending_drop(struct dns_proxy *p, struct pending *pd)
{
    pd->used = false;
    p->n_pending--;
    if (p->n_pending == 0) {
        evtimer_del(p->timer);
    }
}

static void forward(struct dns_proxy *p, const struct dns_query *q, const struct sockaddr_in *from,
                    enum policy_reason reason)
{
    struct pending *pd = NULL;
    uint8_t buf[DNS_MSG_MAX];
    uint16_t id = 0;
    ssize_t len;

    if (p->n_pending >= p->max_pending) {
        note_limited(p);
        return;
    }
    for (unsigned i = 0; i < p->max_pending && !pd; i++) {
        if (!p->pending[i].used) {
            pd = &p->pending[i];
        }
    }
    /* A random id nobody else waits on: an off-path forger has to guess it (and our port). */
    do {
        if (random_bytes(&id, sizeof(id)) < 0) {
            answer_error(p, q, from, DNS_RCODE_SERVFAIL);
            return;
        }
    } while (pending_find(p, id));
    len = dns_build_query(q->name, q->qtype, id, buf, sizeof(buf));
    if (len < 0 || send(p->up_fd, buf, (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
        answer_error(p, q, from, DNS_RCODE_SERVFAIL);
        audit_query(p, q->name, "deny", "upstream-error", 0);
        return;
    }
    *pd = (struct pending){
        .used = true,
        .up_id = id,
        .q = *q,
        .client = *from,
        .reason = reason,
        .start = now_monotonic(),
    };
    if (p->n_pending++ == 0) {
        struct timeval tv = { 0, 250 * 1000 };
        evtimer_add(p->timer, &tv);
    }
}

static void handle_query(struct dns_proxy *p, const uint8_t *msg, size_t len,
                         const struct sockaddr_in *from)
{
    struct sandbox *sb = p->sb;
    struct dns_query q;
    enum policy_reason reason;
    int r;

    if (!take_token(p)) {
        note_limited(p);
        return;
    }
    r = dns_parse_query(msg, len, &q);
    if (r < 0) {
        /* Dropped unanswered; audited at most once a second (with the count since the last
         * record), so garbage cannot flood the audit log. */
        usec_t now = now_monotonic();
        p->malformed++;
        if (now - p->malformed_at >= USEC_PER_SEC) {
            char why[64];
            json_t *rec = audit_record_new(p->sb->id, "dns");
            snprintf(why, sizeof(why), "malformed-query: %s", dns_error_str(r));
            if (rec) {
                json_object_set_new(rec, "verdict", json_string("deny"));
                json_object_set_new(rec, "reason", json_string(why));
                json_object_set_new(rec, "count", json_integer((json_int_t)p->malformed));
                gw_audit(p->sb->gw, rec);
            }
            p->malformed = 0;
            p->malformed_at = now;
        }
        return;
    }
    reason = policy_check_name(sb->policy, &sb->gw->env, q.name, 0);
    if (!policy_reason_allows(reason)) {
        answer_error(p, &q, from, DNS_RCODE_NXDOMAIN);
        audit_query(p, q.name, "deny", policy_reason_str(reason), 0);
        return;
    }
    if (q.qtype != DNS_TYPE_A) {
        answer_error(p, &q, from, DNS_RCODE_NOERROR);
        return;
    }
    forward(p, &q, from, reason);
}

static void guest_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct dns_proxy *p = userdata;
    uint8_t buf[DNS_MSG_MAX + 1];

    for (int i = 0; i < DNS_PROXY_BATCH; i++) {
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        ssize_t n =
            recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *)&from, &fl);
        if (n < 0) {
            return; /* EAGAIN, or an ICMP error of an earlier answer: both end this turn */
        }
        if (fl != sizeof(from) || from.sin_family != AF_INET || (size_t)n > DNS_MSG_MAX) {
            continue;
        }
        handle_query(p, buf, (size_t)n, &from);
    }
}

struct chain_ctx {
    struct dns_proxy *p;
    const char *name;
    usec_t now;
};

static void record_cb(const struct dns_answer *a, void *userdata)
{
    struct chain_ctx *c = userdata;
    uint32_t addr, ttl;

    if (a->type != DNS_TYPE_A) {
        return;
    }
    memcpy(&addr, a->a, 4);
    ttl = MAX(MIN(a->ttl, (uint32_t)DNS_PROXY_TTL_MAX), (uint32_t)DNS_PROXY_TTL_MIN);
    /* Attributed to the name the guest asked: the one its SNI and Host will carry. */
    (void)resolved_add(c->p->sb->resolved, c->name, addr,
                       c->now + ttl * USEC_PER_SEC + RESOLVED_GRACE_USEC);
}

static void upstream_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct dns_proxy *p = userdata;
    const struct sockaddr_in *up = &p->sb->gw->upstream_dns;
    uint8_t buf[DNS_MSG_MAX + 1], out[DNS_MSG_MAX];
    static struct dns_reply reply; /* 9 KiB: off the stack; one loop thread */

    for (int i = 0; i < DNS_PROXY_BATCH; i++) {
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        ssize_t n =
            recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *)&from, &fl);
        if (n < 0) {
            return;
        }
        /* connect() already filters; checked again so a change there cannot open a hole. */
        if (fl != sizeof(from) || from.sin_addr.s_addr != up->sin_addr.s_addr ||
            from.sin_port != up->sin_port || (size_t)n > DNS_MSG_MAX) {
            continue;
        }
        if (dns_parse_reply(buf, (size_t)n, &reply) < 0) {
            continue;
        }
        struct pending *pd = pending_find(p, reply.id);
        if (!pd || !dns_reply_matches(&reply, pd->up_id, pd->q.name, pd->q.qtype, pd->q.qclass)) {
            continue;
        }
        if (reply.flags & DNS_FLAG_TC) {
            answer_error(p, &pd->q, &pd->client, DNS_RCODE_SERVFAIL);
            audit_query(p, pd->q.name, "deny", "upstream-truncated", pd->start);
        } else {
            struct chain_ctx c = { p, pd->q.name, now_monotonic() };
            ssize_t len = dns_build_reply(&pd->q, &reply, DNS_PROXY_TTL_MIN, DNS_PROXY_TTL_MAX, out,
                                          dns_query_max_answer(&pd->q));
            if (len < 0) {
                answer_error(p, &pd->q, &pd->client, DNS_RCODE_SERVFAIL);
                audit_query(p, pd->q.name, "deny", "upstream-malformed", pd->start);
            } else {
                dns_reply_foreach_chain(&reply, record_cb, &c);
                send_to_guest(p, &pd->client, out, len);
                audit_query(p, pd->q.name, "allow", policy_reason_str(pd->reason), pd->start);
            }
        }
        pending_drop(p, pd);
    }
}

static void timer_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct dns_proxy *p = userdata;
    usec_t now = now_monotonic();

    for (unsigned i = 0; i < p->max_pending; i++) {
        struct pending *pd = &p->pending[i];
        if (pd->used && now - pd->start >= DNS_PROXY_TIMEOUT_MSEC * USEC_PER_MSEC) {
            answer_error(p, &pd->q, &pd->client, DNS_RCODE_SERVFAIL);
            audit_query(p, pd->q.name, "deny", "upstream-timeout", pd->start);
            pending_drop(p, pd);
        }
    }
    if (p->n_pending > 0) {
        struct timeval tv = { 0, 250 * 1000 };
        evtimer_add(p->timer, &tv);
    }
}

int dns_proxy_new(struct sandbox *sb, int fd, struct dns_proxy **ret)
{
    struct gw *gw = sb->gw;
    struct dns_proxy *p = calloc(1, sizeof(*p));
    int r;

    if (!p) {
        close_safe(fd);
        return -ENOMEM;
    }
    p->sb = sb;
    p->fd = fd;
    p->up_fd = -EBADF;
    p->max_pending = MAX(gw->limits.dns_inflight, 1u);
    p->tokens = 2.0 * gw->limits.dns_qps;
    p->refilled = now_monotonic();
    p->pending = calloc(p->max_pending, sizeof(*p->pending));
    if (!p->pending) {
        r = -ENOMEM;
        goto fail;
    }
    /* Our own socket, in our own namespace: the guest's datagrams never reach upstream. */
    p->up_fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p->up_fd < 0 || connect(p->up_fd, (const struct sockaddr *)&gw->upstream_dns,
                                sizeof(gw->upstream_dns)) < 0) {
        r = -errno;
        goto fail;
    }
    r = fd_set_nonblock(fd, 1);
    if (r < 0) {
        goto fail;
    }
    p->ev = event_new(gw->base, fd, EV_READ | EV_PERSIST, guest_cb, p);
    p->up_ev = event_new(gw->base, p->up_fd, EV_READ | EV_PERSIST, upstream_cb, p);
    p->timer = evtimer_new(gw->base, timer_cb, p);
    if (!p->ev || !p->up_ev || !p->timer || event_add(p->ev, NULL) < 0 ||
        event_add(p->up_ev, NULL) < 0) {
        r = -ENOMEM;
        goto fail;
    }
    *ret = p;
    return 0;
fail:
    dns_proxy_free(p);
    return r;
}

struct dns_proxy *dns_proxy_free(struct dns_proxy *p)
{
    if (!p) {
        return NULL;
    }
    if (p->ev) {
        event_free(p->ev);
    }
    if (p->up_ev) {
        event_free(p->up_ev);
    }
    if (p->timer) {
        event_free(p->timer);
    }
    close_safe(p->fd);
    close_safe(p->up_fd);
    free(p->pending);
    free(p);
    return NULL;
}
