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
#include "gw/dns-cache.h"
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

#define ID_POOL 256 /* random upstream ids drawn per getrandom() */

struct dns_proxy {
    struct sandbox *sb;
    int fd, up_fd;
    struct event *ev, *up_ev, *timer;
    struct pending *pending; /* limits.dns_inflight slots */
    unsigned n_pending, max_pending;
    unsigned *free_slots; /* a stack of the unused pending slots */
    unsigned n_free;
    /* up_id -> pending slot + 1 (0: empty), open addressing with linear probing */
    unsigned *by_id;
    unsigned id_mask;
    uint16_t ids[ID_POOL];
    unsigned n_ids;
    struct dns_cache *cache;
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

/*
 * Answers to the guest go out in batches (one sendmmsg() per wakeup, not a
 * sendto() each): queued here, flushed at the end of every callback that
 * queues (and when full). One loop thread, one batch at a time.
 */
static struct {
    int fd;
    unsigned n;
    struct mmsghdr msgs[DNS_PROXY_BATCH];
    struct iovec iov[DNS_PROXY_BATCH];
    struct sockaddr_in to[DNS_PROXY_BATCH];
    uint8_t buf[DNS_PROXY_BATCH][DNS_EDNS_UDP_SIZE];
} outq;

static void flush_answers(void)
{
    unsigned sent = 0;

    while (sent < outq.n) {
        /* Best effort, like any UDP server: a full socket buffer drops the answers. */
        int r = sendmmsg(outq.fd, outq.msgs + sent, outq.n - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (r <= 0) {
            if (r < 0 && errno == EINTR) {
                continue;
            }
            /* EAGAIN or an ICMP error of an earlier answer: skip the one that failed. */
            r = 1;
        }
        sent += (unsigned)r;
    }
    outq.n = 0;
}

static void send_to_guest(struct dns_proxy *p, const struct sockaddr_in *to, const uint8_t *buf,
                          ssize_t len)
{
    unsigned i;

    if (len <= 0 || (size_t)len > sizeof(outq.buf[0])) {
        return;
    }
    if (outq.n > 0 && outq.fd != p->fd) {
        flush_answers();
    }
    if (outq.n == DNS_PROXY_BATCH) {
        flush_answers();
    }
    i = outq.n++;
    outq.fd = p->fd;
    memcpy(outq.buf[i], buf, (size_t)len);
    outq.to[i] = *to;
    outq.iov[i] = (struct iovec){ outq.buf[i], (size_t)len };
    outq.msgs[i] = (struct mmsghdr){ .msg_hdr = {
                                         .msg_name = &outq.to[i],
                                         .msg_namelen = sizeof(outq.to[i]),
                                         .msg_iov = &outq.iov[i],
                                         .msg_iovlen = 1,
                                     } };
}

static void answer_error(struct dns_proxy *p, const struct dns_query *q,
                         const struct sockaddr_in *to, uint8_t rcode)
{
    uint8_t buf[DNS_MSG_MAX];
    send_to_guest(p, to, buf, dns_build_error(q, rcode, buf, sizeof(buf)));
}

/* The by_id bucket holding id, or the empty one where it would go. */
static unsigned id_bucket(const struct dns_proxy *p, uint16_t id)
{
    unsigned b = id & p->id_mask;

    while (p->by_id[b] && p->pending[p->by_id[b] - 1].up_id != id) {
        b = (b + 1) & p->id_mask;
    }
    return b;
}

static struct pending *pending_find(struct dns_proxy *p, uint16_t id)
{
    unsigned b = id_bucket(p, id);
    return p->by_id[b] ? &p->pending[p->by_id[b] - 1] : NULL;
}

static void pending_drop(struct dns_proxy *p, struct pending *pd)
{
    unsigned b = id_bucket(p, pd->up_id), next = b;

    /* Backward-shift deletion: every entry after the hole that probed past it moves up. */
    p->by_id[b] = 0;
    for (;;) {
        next = (next + 1) & p->id_mask;
        if (!p->by_id[next]) {
            break;
        }
        unsigned home = p->pending[p->by_id[next] - 1].up_id & p->id_mask;
        /* Moves when its home is not in (b, next] (cyclically). */
        if ((next > b && (home <= b || home > next)) || (next < b && home <= b && home > next)) {
            p->by_id[b] = p->by_id[next];
            p->by_id[next] = 0;
            b = next;
        }
    }
    pd->used = false;
    p->free_slots[p->n_free++] = (unsigned)(pd - p->pending);
    p->n_pending--;
    if (p->n_pending == 0) {
        evtimer_del(p->timer);
    }
}

/* A random id nobody else waits on: an off-path forger has to guess it (and our port). */
static int fresh_id(struct dns_proxy *p, uint16_t *ret)
{
    do {
        if (p->n_ids == 0) {
            if (random_bytes(p->ids, sizeof(p->ids)) < 0) {
                return -EIO;
            }
            p->n_ids = ID_POOL;
        }
        *ret = p->ids[--p->n_ids];
    } while (pending_find(p, *ret));
    return 0;
}

static void forward(struct dns_proxy *p, const struct dns_query *q, const struct sockaddr_in *from,
                    enum policy_reason reason)
{
    struct pending *pd;
    uint8_t buf[DNS_MSG_MAX];
    uint16_t id = 0;
    ssize_t len;

    if (p->n_pending >= p->max_pending || p->n_free == 0) {
        note_limited(p);
        return;
    }
    if (fresh_id(p, &id) < 0) {
        answer_error(p, q, from, DNS_RCODE_SERVFAIL);
        return;
    }
    len = dns_build_query(q->name, q->qtype, id, buf, sizeof(buf));
    if (len < 0 || send(p->up_fd, buf, (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
        answer_error(p, q, from, DNS_RCODE_SERVFAIL);
        audit_query(p, q->name, "deny", "upstream-error", 0);
        return;
    }
    pd = &p->pending[p->free_slots[--p->n_free]];
    *pd = (struct pending){
        .used = true,
        .up_id = id,
        .q = *q,
        .client = *from,
        .reason = reason,
        .start = now_monotonic(),
    };
    p->by_id[id_bucket(p, id)] = (unsigned)(pd - p->pending) + 1;
    if (p->n_pending++ == 0) {
        struct timeval tv = { 0, 250 * 1000 };
        evtimer_add(p->timer, &tv);
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

static struct dns_reply reply; /* 9 KiB: off the stack; one loop thread */

/* A cached answer for q (dns-cache.h): recorded for the gateway and audited as one from upstream.
 */
static bool answer_cached(struct dns_proxy *p, const struct dns_query *q,
                          const struct sockaddr_in *from, enum policy_reason reason)
{
    uint8_t out[DNS_MSG_MAX];
    usec_t now = now_monotonic();
    ssize_t len;

    if (!dns_cache_get(p->cache, q->name, q->qtype, now, &reply)) {
        return false;
    }
    /* TTL floor 1: the cache already lowered each by its age, from values clamped when kept. */
    len = dns_build_reply(q, &reply, 1, DNS_PROXY_TTL_MAX, out, dns_query_max_answer(q));
    if (len < 0) {
        return false; /* upstream, then */
    }
    struct chain_ctx c = { p, q->name, now };
    dns_reply_foreach_chain(&reply, record_cb, &c);
    send_to_guest(p, from, out, len);
    audit_query(p, q->name, "allow", policy_reason_str(reason), now);
    return true;
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
    if (answer_cached(p, &q, from, reason)) {
        return;
    }
    forward(p, &q, from, reason);
}

/* Queries read per wakeup, with one recvmmsg() (static: one loop thread). */
static struct {
    struct mmsghdr msgs[DNS_PROXY_BATCH];
    struct iovec iov[DNS_PROXY_BATCH];
    struct sockaddr_in from[DNS_PROXY_BATCH];
    uint8_t buf[DNS_PROXY_BATCH][DNS_MSG_MAX + 1];
} inq;

static void guest_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct dns_proxy *p = userdata;
    int n;

    for (int i = 0; i < DNS_PROXY_BATCH; i++) {
        inq.iov[i] = (struct iovec){ inq.buf[i], sizeof(inq.buf[i]) };
        inq.msgs[i] = (struct mmsghdr){ .msg_hdr = {
                                            .msg_name = &inq.from[i],
                                            .msg_namelen = sizeof(inq.from[i]),
                                            .msg_iov = &inq.iov[i],
                                            .msg_iovlen = 1,
                                        } };
    }
    /* EAGAIN, or an ICMP error of an earlier answer: both end this turn. */
    n = recvmmsg(fd, inq.msgs, DNS_PROXY_BATCH, MSG_DONTWAIT, NULL);
    for (int i = 0; i < n; i++) {
        const struct msghdr *h = &inq.msgs[i].msg_hdr;
        /* MSG_TRUNC in msg_flags: longer than any query we take (DNS_MSG_MAX). */
        if (h->msg_namelen != sizeof(inq.from[i]) || inq.from[i].sin_family != AF_INET ||
            (h->msg_flags & MSG_TRUNC) || inq.msgs[i].msg_len > DNS_MSG_MAX) {
            continue;
        }
        handle_query(p, inq.buf[i], inq.msgs[i].msg_len, &inq.from[i]);
    }
    flush_answers();
}

static void upstream_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct dns_proxy *p = userdata;
    const struct sockaddr_in *up = &p->sb->gw->upstream_dns;
    uint8_t buf[DNS_MSG_MAX + 1], out[DNS_MSG_MAX];

    for (int i = 0; i < DNS_PROXY_BATCH; i++) {
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        ssize_t n =
            recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *)&from, &fl);
        if (n < 0) {
            break;
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
                (void)dns_cache_put(p->cache, &reply, DNS_PROXY_TTL_MIN, DNS_PROXY_TTL_MAX, c.now);
                send_to_guest(p, &pd->client, out, len);
                audit_query(p, pd->q.name, "allow", policy_reason_str(pd->reason), pd->start);
            }
        }
        pending_drop(p, pd);
    }
    flush_answers();
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
    flush_answers();
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
    p->free_slots = calloc(p->max_pending, sizeof(*p->free_slots));
    /* At most half full: probes stay short. */
    for (p->id_mask = 1; p->id_mask < 2 * p->max_pending; p->id_mask <<= 1) {
    }
    p->by_id = calloc(p->id_mask, sizeof(*p->by_id));
    p->id_mask--;
    if (!p->pending || !p->free_slots || !p->by_id || dns_cache_new(0, &p->cache) < 0) {
        r = -ENOMEM;
        goto fail;
    }
    for (unsigned i = 0; i < p->max_pending; i++) {
        p->free_slots[p->n_free++] = p->max_pending - 1 - i;
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
    free(p->free_slots);
    free(p->by_id);
    dns_cache_free(p->cache);
    free(p);
    return NULL;
}
