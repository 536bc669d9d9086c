/*
 * The bounded accepting socket (listener.h has the contract).
 *
 * libevent's evconnlistener does the accept loop. Without an error callback
 * it retries a failing accept() (EMFILE) at once, forever: 100% CPU while
 * descriptors are short. Our error callback disables the listener and a
 * timer enables it again LISTENER_RETRY_MSEC later.
 *
 * Per-peer counts live in a small open-addressing table keyed by the
 * peer's address (port ignored). It is sized to hold every connection the
 * cap allows, so an insert always finds a slot; deletion uses tombstones
 * and the table is rebuilt when they pile up.
 */
#include "shared/listener.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/log.h"
#include "basic/macro.h"

struct peer_slot {
    uint8_t addr[16]; /* IPv4 mapped into IPv6 */
    unsigned count;   /* 0: empty; UINT32_MAX: tombstone */
};

#define SLOT_TOMBSTONE UINT32_MAX

struct listener {
    struct event_base *base;
    struct evconnlistener *evl;
    struct event *retry;
    listener_accept_fn accept_fn;
    void *userdata;
    unsigned max_conns, max_per_peer, n_conns;
    uint64_t refused;
    bool failing; /* accept() failed and has not succeeded since: logged once */
    struct peer_slot *peers;
    size_t n_slots, n_used; /* used = live + tombstones */
    uint16_t port;
};

unsigned long listener_raise_nofile(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
        return 1024;
    }
    if (rl.rlim_cur < rl.rlim_max) {
        struct rlimit want = { rl.rlim_max, rl.rlim_max };
        if (setrlimit(RLIMIT_NOFILE, &want) == 0) {
            rl = want;
        }
    }
    return rl.rlim_cur == RLIM_INFINITY ? 1u << 20 : (unsigned long)rl.rlim_cur;
}

unsigned listener_conns_from_rlimit(unsigned fds_per_conn)
{
    struct rlimit rl;
    unsigned long n = 1024;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        n = rl.rlim_cur == RLIM_INFINITY ? 1u << 20 : (unsigned long)rl.rlim_cur;
    }
    n = n > LISTENER_FD_RESERVE ? n - LISTENER_FD_RESERVE : 0;
    n /= MAX(fds_per_conn, 1u);
    return (unsigned)MIN(MAX(n, 16ul), (unsigned long)UINT32_MAX / 2);
}

/* The peer's address as 16 bytes; false for non-IP peers (Unix), which are not counted. */
static bool peer_key(const struct sockaddr *sa, uint8_t key[16])
{
    if (!sa) {
        return false;
    }
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
        memset(key, 0, 10);
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &sin->sin_addr, 4);
        return true;
    }
    if (sa->sa_family == AF_INET6) {
        memcpy(key, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return true;
    }
    return false;
}

static size_t slot_hash(const uint8_t key[16], size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < 16; i++) {
        h = (h ^ key[i]) * 1099511628211ull;
    }
    return (size_t)(h % n);
}

/* The live slot for key, or NULL. */
static struct peer_slot *slot_find(struct listener *l, const uint8_t key[16])
{
    for (size_t i = 0, k = slot_hash(key, l->n_slots); i < l->n_slots; i++) {
        struct peer_slot *s = &l->peers[(k + i) % l->n_slots];
        if (s->count == 0) {
            return NULL;
        }
        if (s->count != SLOT_TOMBSTONE && memcmp(s->addr, key, 16) == 0) {
            return s;
        }
    }
    return NULL;
}

static void slot_rebuild(struct listener *l)
{
    struct peer_slot *old = l->peers;
    size_t n = l->n_slots;

    l->peers = calloc(n, sizeof(*l->peers));
    if (!l->peers) {
        l->peers = old; /* keep going with tombstones */
        return;
    }
    l->n_used = 0;
    for (size_t i = 0; i < n; i++) {
        if (old[i].count == 0 || old[i].count == SLOT_TOMBSTONE) {
            continue;
        }
        size_t k = slot_hash(old[i].addr, n);
        while (l->peers[k].count != 0) {
            k = (k + 1) % n;
        }
        l->peers[k] = old[i];
        l->n_used++;
    }
    free(old);
}

/* Counts one more connection from key; false when that peer is at its cap. */
static bool peer_acquire(struct listener *l, const uint8_t key[16])
{
    struct peer_slot *s = slot_find(l, key);

    if (s) {
        if (s->count >= l->max_per_peer) {
            return false;
        }
        s->count++;
        return true;
    }
    if (l->n_used + 1 >= l->n_slots) {
        slot_rebuild(l);
    }
    for (size_t i = 0, k = slot_hash(key, l->n_slots); i < l->n_slots; i++) {
        s = &l->peers[(k + i) % l->n_slots];
        if (s->count == 0 || s->count == SLOT_TOMBSTONE) {
            if (s->count == 0) {
                l->n_used++;
            }
            memcpy(s->addr, key, 16);
            s->count = 1;
            return true;
        }
    }
    return false; /* cannot happen: the table holds max_conns + 1 */
}

static void peer_release(struct listener *l, const uint8_t key[16])
{
    struct peer_slot *s = slot_find(l, key);

    if (s && --s->count == 0) {
        s->count = SLOT_TOMBSTONE;
    }
}

static void accept_cb(struct evconnlistener *evl, evutil_socket_t fd, struct sockaddr *sa,
                      int socklen, void *userdata)
{
    struct listener *l = userdata;
    uint8_t key[16];
    bool counted = l->peers && peer_key(sa, key);

    l->failing = false;

    if (l->n_conns >= l->max_conns || (counted && !peer_acquire(l, key))) {
        l->refused++;
        close_safe(fd);
        return;
    }
    l->n_conns++;
    (void)fd_set_nonblock(fd, 1);
    l->accept_fn(l, fd, counted ? sa : NULL, counted ? (socklen_t)socklen : 0, l->userdata);
}

static void retry_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct listener *l = userdata;
    evconnlistener_enable(l->evl);
}

static void error_cb(struct evconnlistener *evl, void *userdata)
{
    struct timeval retry = { 0, LISTENER_RETRY_MSEC * 1000 };
    struct listener *l = userdata;

    if (!l->failing) {
        l->failing = true;
        log_warning_errno(-errno, "cannot accept connections, retrying every %u ms: %m",
                          (unsigned)LISTENER_RETRY_MSEC);
    }
    evconnlistener_disable(evl);
    evtimer_add(l->retry, &retry);
}

int listener_new(struct event_base *base, int fd, const struct listener_limits *limits,
                 listener_accept_fn accept_fn, void *userdata, struct listener **ret)
{
    struct listener *l;
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    assert(base && fd >= 0 && limits && accept_fn && ret);
    l = calloc(1, sizeof(*l));
    if (!l) {
        close_safe(fd);
        return -ENOMEM;
    }
    *l = (struct listener){ .base = base, .accept_fn = accept_fn, .userdata = userdata };
    l->max_conns =
        limits->max_conns ? limits->max_conns : listener_conns_from_rlimit(limits->fds_per_conn);
    l->max_per_peer = limits->max_per_peer;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET) {
            l->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            l->port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        }
    }
    if (l->max_per_peer > 0 && (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)) {
        l->n_slots = (size_t)l->max_conns + 1;
        l->peers = calloc(l->n_slots, sizeof(*l->peers));
        if (!l->peers) {
            close_safe(fd);
            free(l);
            return -ENOMEM;
        }
    }
    l->retry = evtimer_new(base, retry_cb, l);
    l->evl = l->retry ? evconnlistener_new(base, accept_cb, l,
                                           LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd)
                      : NULL;
    if (!l->evl) {
        close_safe(fd);
        listener_free(l);
        return -ENOMEM;
    }
    evconnlistener_set_error_cb(l->evl, error_cb);
    *ret = l;
    return 0;
}

int listener_new_tcp(struct event_base *base, const char *ip, uint16_t port,
                     const struct listener_limits *limits, listener_accept_fn accept_fn,
                     void *userdata, struct listener **ret)
{
    struct sockaddr_storage ss = { 0 };
    struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
    socklen_t len;
    int fd, one = 1;

    if (inet_pton(AF_INET, ip, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons(port);
        len = sizeof(*sin);
    } else if (inet_pton(AF_INET6, ip, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(port);
        len = sizeof(*sin6);
    } else {
        return -EINVAL;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return -errno;
    }
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 512) < 0) {
        int r = -errno;
        close_safe(fd);
        return r;
    }
    return listener_new(base, fd, limits, accept_fn, userdata, ret);
}

void listener_release(struct listener *l, const struct sockaddr *peer)
{
    uint8_t key[16];

    assert(l->n_conns > 0);
    l->n_conns--;
    if (l->peers && peer_key(peer, key)) {
        peer_release(l, key);
    }
}

unsigned listener_count(const struct listener *l)
{
    return l->n_conns;
}

unsigned listener_max_conns(const struct listener *l)
{
    return l->max_conns;
}

uint64_t listener_refused(const struct listener *l)
{
    return l->refused;
}

uint16_t listener_port(const struct listener *l)
{
    return l->port;
}

struct listener *listener_free(struct listener *l)
{
    if (!l) {
        return NULL;
    }
    if (l->evl) {
        evconnlistener_free(l->evl);
    }
    if (l->retry) {
        event_free(l->retry);
    }
    free(l->peers);
    free(l);
    return NULL;
}
