/*
 * The egress gateway of one sandbox (gateway.h).
 *
 * A connection goes through these phases:
 *
 *   SNIFF   accepted; SO_ORIGINAL_DST says where the guest was going. The
 *           first bytes are peeked, not read (MSG_PEEK, SO_RCVLOWAT to wait
 *           for more without spinning), so every path below still finds the
 *           stream untouched:
 *             0x16                  TLS: a ClientHello (tls-hello.h)
 *             "TOKEN "              HTTP: a request line
 *             anything else         raw TCP: only by address (CIDR entry)
 *   TLS     the whole ClientHello is peeked (tls-hello.h): no SNI or an ECH
 *           offer is denied; the SNI must pass the policy for the destination
 *           and be attributed to it (http-gate.h rule 5). Then TLS is
 *           terminated with a leaf for the SNI (tls-term.h) and the
 *           connection continues as HTTP below, every request's Host equal
 *           to the SNI, each dialed upstream over our own verified TLS.
 *           A guest that sends nothing for GW_SERVER_FIRST_MSEC may be a
 *           server-speaks-first protocol: raw TCP if the address is allowed.
 *           Nothing at all within GW_FIRST_BYTE_SEC: closed (slowloris).
 *   TCP     the shared relay (splice) between the guest and our own
 *           connection to the destination; audited when it ends.
 *   HTTP    one exchange at a time: the request head is read whole (at most
 *           HTTP1_HEAD_MAX, within GW_HEAD_SEC of its first byte), checked
 *           by http-gate.h, rewritten without hop-by-hop fields and sent on
 *           a fresh upstream connection to the destination; its body is
 *           framed (Content-Length / chunked), so the bytes after it are the
 *           next request and get checked again; the response head is parsed
 *           and its body framed too, so a kept-alive guest connection stays
 *           in step. A denied request gets 403 and the connection closes.
 *
 * Every decision makes one audit record; an allowed exchange or relay is
 * recorded when it ends, with the bytes each way and its duration. Limits:
 * limits.conns_per_sandbox open connections per sandbox, gw->max_conns in
 * all; nothing here blocks, so one sandbox's load waits only on its own caps.
 */
#include "gw/gateway.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/strbuf.h"
#include "basic/time-util.h"
#include "gw/audit.h"
#include "gw/http-gate.h"
#include "gw/inject.h"
#include "gw/policy.h"
#include "gw/resolved.h"
#include "gw/sandbox.h"
#include "gw/tls-hello.h"
#include "gw/tls-term.h"
#include "shared/event-util.h"
#include "shared/http1.h"
#include "shared/json-util.h"
#include "shared/listener.h"
#include "shared/relay.h"

#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80 /* linux/netfilter_ipv4.h, which clashes with netinet/in.h */
#endif

#define GW_FIRST_BYTE_SEC 10     /* accept -> the whole first head / ClientHello */
#define GW_HEAD_SEC 10           /* first byte of a head -> its end */
#define GW_KEEPALIVE_SEC 60      /* waiting for the next request */
#define GW_SERVER_FIRST_MSEC 500 /* silence that makes a raw TCP guess */
#define GW_CONNECT_SEC 10        /* dialing the destination */
#define GW_IDLE_SEC 300          /* no byte either way */
#define GW_LINGER_SEC 2          /* after our last byte, for the guest's EOF */
#define GW_HIGH_WATER (256u * 1024)
#define GW_SNIFF_MAX 16 /* bytes enough to tell HTTP from the rest */
#define GW_METHOD_MAX 15
#define GW_LIBEVENT_READ 4096u /* the most libevent 2.1 reads into a socket bufferevent at once */
#define GW_SPLICE_MIN (64u * 1024)       /* a plain response body left this long is spliced */
#define GW_SPLICE_PIPE (256u * 1024)     /* asked for its pipe (the default 64 KiB if refused) */
#define GW_SPLICE_BULK RELAY_BULK_BUFFER /* ... for a body of at least this (a download) */
#define GW_TLS_BATCH                                                                               \
    (256u * 1024) /* a terminated TLS body: decrypted per batch (tls_body_pump()) */
#define GW_TLS_READ_BUF (256u * 1024)           /* the upstream SSL's read-ahead buffer meanwhile */
#define GW_TLS_WBUF (GW_TLS_BATCH + 16u * 1024) /* the guest's records, gathered per write() */
#define GW_TLS_ROUNDS 4 /* batches per wakeup, so one download cannot starve the loop */

enum phase { PH_SNIFF, PH_DIAL_TCP, PH_TCP, PH_HTTP, PH_CLOSED };
enum up_mode { UP_HEAD, UP_DIAL, UP_BODY, UP_NEXT, UP_DISCARD, UP_RAW };
enum down_mode { DOWN_NONE, DOWN_HEAD, DOWN_BODY, DOWN_SPLICE, DOWN_TLSBODY, DOWN_RAW };

struct gw_conn {
    struct gateway *g;
    struct gw_conn *prev, *next;
    enum phase phase;
    int fd, up_fd;
    struct sockaddr_in dst;
    char dst_str[INET_ADDRSTRLEN];
    uint16_t port;
    bool from_listener;                          /* counted in g->listener */
    struct event *ev, *dial_ev, *timer, *reaper; /* ev: sniffing; dial_ev: connecting */
    usec_t start, last_active, deadline;
    size_t peeked; /* SO_RCVLOWAT waits for more than this */
    struct relay *relay;
    enum policy_reason tcp_reason;
    /* TLS: terminated, both legs through bufferevent_openssl; the SNI every Host must equal */
    bool tls, tls_sniff;
    /* TLS passthrough (policy_tls_passthrough()): spliced like raw TCP, audited as "tls" with
     * reason "<the gate's reason>-passthrough" (static, from http-gate.h) */
    bool passthrough;
    const char *pass_reason;
    char sni[POLICY_NAME_MAX + 1];
    /* HTTP */
    struct bufferevent *client, *upstream;
    enum up_mode up;
    enum down_mode down;
    struct http1_body body, resp_body;
    struct strbuf fwd; /* the rewritten head, until the upstream is connected */
    size_t scan;       /* http1_find_end() resume */
    bool keep_alive, head_request, upgrade, client_eof, close_after_flush, sent_response;
    bool lingering;    /* our write side is shut; draining the guest's until EOF */
    bool up_reusable;  /* the upstream may take the next request (its response kept alive) */
    bool up_reused;    /* this request went on a kept upstream connection */
    bool dialing;      /* an upstream dial is in progress (http_connected_cb() pending) */
    bool dial_ahead;   /* ... started by predial(), and no request waits for it yet */
    bool up_fresh;     /* the upstream was dialed ahead (predial()) and has carried nothing */
    bool resp_started; /* a byte of the response arrived */
    /* DOWN_SPLICE: the rest of a plain Content-Length response body, upstream socket ->
     * pipe -> guest socket (splice_body()); sp_rd/sp_wr set while it runs */
    struct event *sp_rd, *sp_wr;
    int sp_pipe[2];
    size_t sp_in_pipe, sp_cap;
    bool sp_rd_on, sp_wr_on;
    /* DOWN_TLSBODY: the same over terminated TLS, SSL_read()/SSL_write() on both legs' SSLs
     * through one batch buffer (tls_body_pump()); tb_off..tb_len is still to be written */
    uint8_t *tb_buf;
    size_t tb_len, tb_off;
    BIO *tb_wbio; /* the guest SSL's write buffer meanwhile (owned by that SSL) */
    unsigned requests;
    /* the exchange being audited */
    char host[POLICY_NAME_MAX + 1];
    char method[GW_METHOD_MAX + 1];
    char *secret; /* inject.h: the secrets this exchange carries (names), for its record */
    const char *reason;
    uint64_t ex_out, ex_in;
    usec_t ex_start;
    bool ex_open;
};

struct gateway {
    struct sandbox *sb;
    struct listener *listener;
    struct gw_conn *conns;
    unsigned n_conns;
    uint64_t refused;  /* over a cap since the last audit record of it */
    usec_t refused_at; /* when that record went */
};

/* ---- audit ---- */

static void set_str(json_t *rec, const char *key, const char *s)
{
    if (s && s[0]) {
        json_object_set_new(rec, key, json_util_string_lossy(s, strlen(s)));
    }
}

static void audit_conn(struct gw_conn *c, const char *proto, bool allow, const char *reason,
                       bool with_traffic, uint64_t out, uint64_t in, usec_t since)
{
    struct sandbox *sb = c->g->sb;
    json_t *rec = audit_record_new(sb->id, proto);

    if (!rec) {
        return;
    }
    if (strcmp(proto, "tcp") != 0) {
        set_str(rec, "sni", c->sni);
        set_str(rec, "host", c->host);
        set_str(rec, "method", c->method);
        set_str(rec, "secret", c->secret);
    }
    if (c->dst_str[0]) {
        json_object_set_new(rec, "dst", json_string(c->dst_str));
        json_object_set_new(rec, "port", json_integer(c->port));
    }
    json_object_set_new(rec, "verdict", json_string(allow ? "allow" : "deny"));
    set_str(rec, "reason", reason);
    if (with_traffic) {
        json_object_set_new(rec, "bytesOut", json_integer((json_int_t)out));
        json_object_set_new(rec, "bytesIn", json_integer((json_int_t)in));
        json_object_set_new(rec, "durationMs",
                            json_integer((json_int_t)((now_monotonic() - since) / USEC_PER_MSEC)));
    }
    gw_audit(sb->gw, rec);
}

/* Requests over terminated TLS are audited as "tls" (with the SNI), plain ones as "http". */
static const char *http_proto(const struct gw_conn *c)
{
    return c->tls ? "tls" : "http";
}

/* The HTTP exchange in progress ends (allowed: its record goes now, with its traffic). */
static void exchange_end(struct gw_conn *c)
{
    if (c->ex_open) {
        c->ex_open = false;
        audit_conn(c, http_proto(c), true, c->reason, true, c->ex_out, c->ex_in, c->ex_start);
        free(c->secret);
        c->secret = NULL;
    }
}

/* ---- lifetime ---- */

static void conn_free(struct gw_conn *c)
{
    struct gateway *g = c->g;
    struct sandbox *sb = g->sb;

    if (c->prev) {
        c->prev->next = c->next;
    } else {
        g->conns = c->next;
    }
    if (c->next) {
        c->next->prev = c->prev;
    }
    g->n_conns--;
    sb->gw->n_conns--;
    if (c->from_listener && g->listener) {
        listener_release(g->listener, NULL);
    }
    if (c->client) {
        bufferevent_free(c->client);
    }
    if (c->upstream) {
        bufferevent_free(c->upstream);
    }
    relay_free(c->relay);
    if (c->ev) {
        event_free(c->ev);
    }
    if (c->dial_ev) {
        event_free(c->dial_ev);
    }
    if (c->timer) {
        event_free(c->timer);
    }
    if (c->reaper) {
        event_free(c->reaper);
    }
    if (c->sp_rd) {
        event_free(c->sp_rd);
    }
    if (c->sp_wr) {
        event_free(c->sp_wr);
    }
    close_safe(c->sp_pipe[0]);
    close_safe(c->sp_pipe[1]);
    close_safe(c->fd);
    close_safe(c->up_fd);
    strbuf_release(&c->fwd);
    free(c->tb_buf);
    free(c->secret);
    free(c);
}

static void reap_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct gw_conn *c = userdata;
    struct sandbox *sb = c->g->sb;

    conn_free(c);
    sandbox_maybe_free(sb); /* last: it may free the gateway */
}

/* libevent moves at most 16 KiB per read or write by default: a download then costs a wakeup
 * per 16 KiB. Up to the high water mark per call (the plain socket reads are topped up past
 * libevent's own 4 KiB by fill(), below). */
static void bev_tune(struct bufferevent *bev)
{
    (void)bufferevent_set_max_single_read(bev, GW_HIGH_WATER);
    (void)bufferevent_set_max_single_write(bev, GW_HIGH_WATER);
}

/*
 * From a plain socket bufferevent's read callback: more of what waits in
 * the socket, up to `limit` bytes of input (event-util.h says why). An
 * OpenSSL bufferevent reads whole records itself. Returns <0 on a socket
 * error (the connection then ends: the bufferevent will not report it).
 */
static int fill(struct gw_conn *c, struct bufferevent *bev, size_t limit)
{
    /* Less than one of libevent's reads (EVBUFFER_MAX_READ) waiting: that read took all
     * there was, and another would only say EAGAIN. */
    if (c->tls || evbuffer_get_length(bufferevent_get_input(bev)) < GW_LIBEVENT_READ) {
        return 0;
    }
    ssize_t n = event_util_bev_fill(bev, limit);
    return n < 0 ? (int)n : 0;
}

/* Stops all I/O now; the memory goes in reap_cb(), outside c's callbacks (R15). */
static void conn_close(struct gw_conn *c, const char *why)
{
    if (c->phase == PH_CLOSED) {
        return;
    }
    if (why) {
        log_sandbox_debug(c->g->sb->id, "gateway connection to %s:%u closed: %s", c->dst_str,
                          (unsigned)c->port, why);
    }
    exchange_end(c);
    c->phase = PH_CLOSED;
    if (c->ev) {
        event_del(c->ev);
    }
    if (c->dial_ev) {
        event_del(c->dial_ev);
    }
    event_del(c->timer);
    if (c->sp_rd) {
        event_del(c->sp_rd);
    }
    if (c->sp_wr) {
        event_del(c->sp_wr);
    }
    event_util_close_later(c->client, c->upstream, c->reaper);
}

/* Closes with a reset: a denied raw connection learns nothing but "no". */
static void conn_reset(struct gw_conn *c, const char *why)
{
    struct linger l = { 1, 0 };
    int fd = c->fd >= 0 ? c->fd : (c->client ? bufferevent_getfd(c->client) : -1);

    if (fd >= 0) {
        (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    }
    conn_close(c, why);
}

static void timer_in(struct gw_conn *c, usec_t usec)
{
    struct timeval tv = { (time_t)(usec / USEC_PER_SEC), (suseconds_t)(usec % USEC_PER_SEC) };
    evtimer_add(c->timer, &tv);
}

/* Time left of the accept -> first head/ClientHello deadline. */
static usec_t first_byte_left(const struct gw_conn *c)
{
    usec_t deadline = c->start + GW_FIRST_BYTE_SEC * USEC_PER_SEC, now = now_monotonic();
    return deadline > now ? deadline - now : 0;
}

/* ---- dialing ---- */

typedef void (*dial_done_fn)(struct gw_conn *c, int error);

static int dial_start(struct gw_conn *c, event_callback_fn cb)
{
    int one = 1;
    struct timeval tv = { GW_CONNECT_SEC, 0 };

    c->up_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->up_fd < 0) {
        return -errno;
    }
    (void)setsockopt(c->up_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(c->up_fd, (struct sockaddr *)&c->dst, sizeof(c->dst)) < 0 && errno != EINPROGRESS) {
        return -errno;
    }
    /* Reused for each dial of the connection (never pending here: it fired or never ran). */
    if (!c->dial_ev) {
        c->dial_ev = event_new(c->g->sb->gw->base, c->up_fd, EV_WRITE, cb, c);
    } else {
        event_del(c->dial_ev);
        event_assign(c->dial_ev, c->g->sb->gw->base, c->up_fd, EV_WRITE, cb, c);
    }
    if (!c->dial_ev || event_add(c->dial_ev, &tv) < 0) {
        return -ENOMEM;
    }
    return 0;
}

static int dial_result(struct gw_conn *c, short what)
{
    int err = 0;
    socklen_t l = sizeof(err);

    if (what & EV_TIMEOUT) {
        return -ETIMEDOUT;
    }
    if (getsockopt(c->up_fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0) {
        return -errno;
    }
    return -err;
}

/* ---- raw TCP ---- */

/* The audit reason of a passthrough relay: the gate's allow reason, marked as not terminated. */
static void passthrough_reason(const struct gw_conn *c, char *buf, size_t size)
{
    snprintf(buf, size, "%s-passthrough", c->pass_reason ?: "allow");
}

static void relay_done(struct relay *r, int error, void *userdata)
{
    struct gw_conn *c = userdata;
    char why[64];

    if (c->passthrough) {
        passthrough_reason(c, why, sizeof(why));
        audit_conn(c, "tls", true, why, true, relay_bytes(r, RELAY_B), relay_bytes(r, RELAY_A),
                   c->start);
    } else {
        audit_conn(c, "tcp", true, policy_reason_str(c->tcp_reason), true, relay_bytes(r, RELAY_B),
                   relay_bytes(r, RELAY_A), c->start);
    }
    conn_close(c, error == 0 ? "done" : error == -ETIMEDOUT ? "idle timeout" : "connection error");
}

static void tcp_connected_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct gw_conn *c = userdata;
    int r = dial_result(c, what);

    if (r >= 0) {
        r = relay_new(c->g->sb->gw->base, c->fd, c->up_fd, GW_IDLE_SEC, relay_done, c, &c->relay);
    }
    if (r < 0) {
        audit_conn(c, c->passthrough ? "tls" : "tcp", false, "upstream-unreachable", false, 0, 0,
                   0);
        conn_reset(c, "upstream unreachable");
        return;
    }
    c->fd = c->up_fd = -EBADF; /* the relay's now */
    c->phase = PH_TCP;
    event_del(c->timer);
    if (relay_start(c->relay) < 0) {
        conn_close(c, "cannot start the relay");
    }
}

static void start_tcp(struct gw_conn *c)
{
    struct sandbox *sb = c->g->sb;

    c->tcp_reason = policy_check_addr(sb->policy, &sb->gw->env, AF_INET, &c->dst.sin_addr, c->port);
    if (!policy_reason_allows(c->tcp_reason)) {
        audit_conn(c, "tcp", false, policy_reason_str(c->tcp_reason), false, 0, 0, 0);
        conn_reset(c, "raw TCP denied");
        return;
    }
    (void)setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &(int){ 1 }, sizeof(int));
    c->phase = PH_DIAL_TCP;
    if (dial_start(c, tcp_connected_cb) < 0) {
        audit_conn(c, "tcp", false, "upstream-unreachable", false, 0, 0, 0);
        conn_reset(c, "cannot dial");
    }
}

/*
 * An allowed, attributed SNI on the policy's passthrough list: no
 * termination, the guest's bytes (the ClientHello still unread in the
 * socket) go as they are to the destination it chose, through the same
 * relay as raw TCP. Weaker than terminating: nothing inside is checked.
 */
static void start_passthrough(struct gw_conn *c, const char *reason)
{
    c->passthrough = true;
    c->pass_reason = reason;
    event_del(c->ev); /* freed with c: this may be its own callback */
    (void)setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &(int){ 1 }, sizeof(int));
    c->phase = PH_DIAL_TCP;
    if (dial_start(c, tcp_connected_cb) < 0) {
        audit_conn(c, "tls", false, "upstream-unreachable", false, 0, 0, 0);
        conn_reset(c, "cannot dial");
    }
}

/* ---- HTTP ---- */

static void http_next(struct gw_conn *c);
static void http_head(struct gw_conn *c);
static void splice_start(struct gw_conn *c);

static void write_to_client(struct gw_conn *c, const char *buf, size_t len)
{
    (void)evbuffer_add(bufferevent_get_output(c->client), buf, len);
}

static void client_flush_close_cb(struct bufferevent *bev, void *userdata)
{
    struct gw_conn *c = userdata;

    if (c->close_after_flush && evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
        if (c->tls) {
            /* close_notify first (best effort), so the guest sees an end, not a truncation. */
            SSL *ssl = bufferevent_openssl_get_ssl(bev);
            if (ssl && SSL_is_init_finished(ssl)) {
                (void)SSL_shutdown(ssl);
            }
        }
        if (c->lingering) {
            return;
        }
        (void)shutdown(bufferevent_getfd(bev), SHUT_WR);
        if (c->client_eof) {
            conn_close(c, "done");
            return;
        }
        /* Read (and drop) what the guest still sends for a moment: closing with unread input
         * would reset the connection and could destroy the answer before it is read. */
        c->lingering = true;
        bufferevent_enable(bev, EV_READ);
        timer_in(c, GW_LINGER_SEC * USEC_PER_SEC);
    }
}

/* Everything written to the client goes out, then the connection closes. */
static void close_after_flush(struct gw_conn *c)
{
    c->close_after_flush = true;
    if (c->upstream) {
        event_util_bev_stop(c->upstream);
    }
    c->up = UP_DISCARD;
    evbuffer_drain(bufferevent_get_input(c->client),
                   evbuffer_get_length(bufferevent_get_input(c->client)));
    bufferevent_setwatermark(c->client, EV_WRITE, 0, 0);
    bufferevent_enable(c->client, EV_WRITE);
    timer_in(c, GW_HEAD_SEC * USEC_PER_SEC);
    client_flush_close_cb(c->client, c);
}

/* Our own answer (403, 400, 502...): short text, then close. */
static void http_reply(struct gw_conn *c, int status, const char *phrase, const char *reason)
{
    char buf[512], body[256];
    int bn = snprintf(body, sizeof(body), "space-gw: %s (%s)\n", phrase, reason);
    int n = snprintf(buf, sizeof(buf),
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     "Content-Length: %d\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n%s",
                     status, phrase, bn, body);
    if (!c->sent_response) {
        write_to_client(c, buf, (size_t)MIN(n, (int)sizeof(buf) - 1));
    }
    c->sent_response = true;
    close_after_flush(c);
}

static void http_deny(struct gw_conn *c, int status, const char *phrase, const char *reason)
{
    exchange_end(c);
    audit_conn(c, http_proto(c), false, reason, false, 0, 0, 0);
    http_reply(c, status, phrase, reason);
}

static void touch(struct gw_conn *c)
{
    c->last_active = now_monotonic();
}

/* Client bytes after a head that passed. */
static void up_pump(struct gw_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->client);
    struct evbuffer *out;

    touch(c);
    switch (c->up) {
    case UP_HEAD:
        http_head(c);
        return;
    case UP_DIAL:
    case UP_NEXT:
        return; /* held: read later (the read side is disabled meanwhile) */
    case UP_DISCARD:
        evbuffer_drain(in, evbuffer_get_length(in));
        return;
    case UP_RAW:
        if (fill(c, c->client, HTTP1_HEAD_MAX) < 0) {
            conn_close(c, "client error");
            return;
        }
        out = bufferevent_get_output(c->upstream);
        c->ex_out += evbuffer_get_length(in);
        (void)evbuffer_add_buffer(out, in);
        break;
    case UP_BODY:
        /* The client's input stays within its watermark: bytes past the body are the next
         * request's head, read no further ahead than a head may be. */
        if (fill(c, c->client, HTTP1_HEAD_MAX) < 0) {
            conn_close(c, "client error");
            return;
        }
        out = bufferevent_get_output(c->upstream);
        while (!c->body.done && evbuffer_get_length(in) > 0) {
            struct evbuffer_iovec v;
            if (evbuffer_peek(in, -1, NULL, &v, 1) < 1) {
                break;
            }
            ssize_t n = http1_body_feed(&c->body, v.iov_base, v.iov_len, NULL, NULL);
            if (n < 0) {
                http_deny(c, 400, "Bad Request", "malformed-body");
                return;
            }
            c->ex_out += (uint64_t)n;
            if (evbuffer_remove_buffer(in, out, (size_t)n) != (int)n) {
                conn_close(c, "out of memory");
                return;
            }
        }
        if (c->body.done) {
            /* What follows is the next request: it waits (unread) for this response. */
            c->up = c->keep_alive ? UP_NEXT : UP_DISCARD;
            if (c->up == UP_NEXT) {
                bufferevent_disable(c->client, EV_READ);
                return;
            }
            evbuffer_drain(in, evbuffer_get_length(in));
        }
        break;
    }
    if (c->upstream && evbuffer_get_length(bufferevent_get_output(c->upstream)) >= GW_HIGH_WATER) {
        bufferevent_disable(c->client, EV_READ);
    }
}

static void client_read_cb(struct bufferevent *bev, void *userdata)
{
    up_pump(userdata);
}

static void client_write_cb(struct bufferevent *bev, void *userdata)
{
    struct gw_conn *c = userdata;

    if (c->close_after_flush) {
        client_flush_close_cb(bev, c);
        return;
    }
    if (c->down == DOWN_SPLICE || c->down == DOWN_TLSBODY) {
        if (!c->sp_rd && evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
            splice_start(c); /* what was buffered went first */
        }
        return;
    }
    /* Below the high water mark again: the upstream may deliver more. */
    if (c->upstream && c->down != DOWN_NONE) {
        bufferevent_enable(c->upstream, EV_READ);
    }
}

/* What OpenSSL says went wrong on bev, for an audit reason ("prefix: why"). */
static void tls_error_reason(struct bufferevent *bev, const char *prefix, char *buf, size_t size)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);
    unsigned long e = bufferevent_get_openssl_error(bev);
    long v = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
    const char *why = v != X509_V_OK ? X509_verify_cert_error_string(v)
                      : e            ? ERR_reason_error_string(e)
                                     : NULL;

    snprintf(buf, size, "%s: %s", prefix, why ? why : "connection closed");
    while (bufferevent_get_openssl_error(bev)) {
    }
}

static void client_event_cb(struct bufferevent *bev, short what, void *userdata)
{
    struct gw_conn *c = userdata;

    if (what & BEV_EVENT_CONNECTED) {
        return; /* the guest's handshake is done: its requests follow */
    }
    if (c->lingering) {
        conn_close(c, "done");
        return;
    }
    if (c->tls && (what & BEV_EVENT_ERROR) && c->requests == 0 && !c->ex_open) {
        char why[160];
        tls_error_reason(bev, "tls-handshake-failed", why, sizeof(why));
        audit_conn(c, "tls", false, why, false, 0, 0, 0);
        conn_close(c, why);
        return;
    }
    if (what & BEV_EVENT_EOF) {
        c->client_eof = true;
        bufferevent_disable(bev, EV_READ);
        if (c->up == UP_HEAD || (c->up == UP_BODY && !c->body.done)) {
            /* Between requests, or in the middle of a body: nothing more can be forwarded. */
            conn_close(c, c->up == UP_HEAD ? "client closed" : "client closed mid-body");
            return;
        }
        if (c->up == UP_RAW && c->upstream) {
            (void)shutdown(bufferevent_getfd(c->upstream), SHUT_WR);
        }
        return;
    }
    conn_close(c, "client error");
}

/* The response is complete: the next request, or the end. */
static void upstream_drop(struct gw_conn *c)
{
    if (c->upstream) {
        bufferevent_free(c->upstream);
        c->upstream = NULL;
    }
}

/* A kept upstream connection said something, or closed, between requests: not reusable. */
static void idle_read_cb(struct bufferevent *bev, void *userdata)
{
    upstream_drop(userdata);
}

static void idle_event_cb(struct bufferevent *bev, short what, void *userdata)
{
    upstream_drop(userdata);
}

static void response_done(struct gw_conn *c)
{
    exchange_end(c);
    /* The destination is the same for every request of this connection (and over TLS the
     * SNI too): a kept-alive upstream takes the next one, saving a connect (and a handshake). */
    if (c->upstream && c->up_reusable && c->keep_alive && c->up == UP_NEXT && !c->client_eof &&
        evbuffer_get_length(bufferevent_get_input(c->upstream)) == 0) {
        bufferevent_setcb(c->upstream, idle_read_cb, NULL, idle_event_cb, c);
        bufferevent_enable(c->upstream, EV_READ);
    } else {
        upstream_drop(c);
    }
    c->down = DOWN_NONE;
    if (c->keep_alive && c->up == UP_NEXT && !c->client_eof) {
        http_next(c);
        return;
    }
    close_after_flush(c);
}

static void upstream_read_cb(struct bufferevent *bev, void *userdata);

/*
 * The rest of a plain response body, when it is long and its length known
 * (Content-Length, so where it ends is known without looking at it), goes
 * upstream socket -> pipe -> guest socket with splice(2): no copy through
 * our memory, a pipe's worth per call. Exactly resp_body.remaining bytes
 * are taken from the upstream socket, never more, so whatever the upstream
 * sends after the body stays there (and makes its connection unusable, as
 * any early byte does); the request side waits meanwhile (UP_NEXT: the
 * next request is read and checked only after this response), and every
 * byte is counted for the audit as before. Bytes the bufferevents hold go
 * first: the guest's output buffer is flushed before splicing starts.
 * Over TLS there is nothing to splice (the bytes are re-encrypted).
 */
static void splice_cb(evutil_socket_t fd, short what, void *userdata);

static void sp_set(struct event *ev, bool *on, bool want)
{
    if (want != *on) {
        if (want) {
            event_add(ev, NULL);
        } else {
            event_del(ev);
        }
        *on = want;
    }
}

static void splice_end(struct gw_conn *c)
{
    sp_set(c->sp_rd, &c->sp_rd_on, false);
    sp_set(c->sp_wr, &c->sp_wr_on, false);
    event_free(c->sp_rd);
    event_free(c->sp_wr);
    c->sp_rd = c->sp_wr = NULL;
    /* The pipe goes too: a kept-alive connection should not hold pipe pages while idle. */
    c->sp_pipe[0] = close_safe(c->sp_pipe[0]);
    c->sp_pipe[1] = close_safe(c->sp_pipe[1]);
    c->resp_body.done = true;
    c->down = DOWN_BODY;
    bufferevent_setwatermark(c->client, EV_WRITE, GW_HIGH_WATER / 2, 0);
    bufferevent_enable(c->client, EV_WRITE);
    response_done(c);
}

/* Moves bytes until both ends would block (or a bound, so one download cannot starve the loop). */
static void splice_pump(struct gw_conn *c)
{
    int up = bufferevent_getfd(c->upstream), down = bufferevent_getfd(c->client);
    ssize_t n;

    for (unsigned round = 0; round < 16; round++) {
        bool progress = false;
        if (c->sp_in_pipe > 0) {
            n = splice(c->sp_pipe[0], NULL, down, NULL, c->sp_in_pipe,
                       SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
            if (n < 0 && errno != EAGAIN && errno != EINTR) {
                conn_close(c, "client error");
                return;
            }
            if (n > 0) {
                c->sp_in_pipe -= (size_t)n;
                c->ex_in += (uint64_t)n;
                progress = true;
            }
        }
        /* Only into an empty pipe (relay.c says why: a pipe fills by page slots). */
        if (c->sp_in_pipe == 0 && c->resp_body.remaining > 0) {
            n = splice(up, NULL, c->sp_pipe[1], NULL,
                       (size_t)MIN(c->resp_body.remaining, (uint64_t)c->sp_cap), SPLICE_F_NONBLOCK);
            if (n == 0) {
                conn_close(c, "upstream closed mid-response");
                return;
            }
            if (n < 0 && errno != EAGAIN && errno != EINTR) {
                conn_close(c, "upstream error");
                return;
            }
            if (n > 0) {
                c->sp_in_pipe += (size_t)n;
                c->resp_body.remaining -= (uint64_t)n;
                progress = true;
            }
        }
        if (c->sp_in_pipe == 0 && c->resp_body.remaining == 0) {
            splice_end(c);
            return;
        }
        if (!progress) {
            break;
        }
        touch(c);
    }
    sp_set(c->sp_rd, &c->sp_rd_on, c->sp_in_pipe == 0 && c->resp_body.remaining > 0);
    sp_set(c->sp_wr, &c->sp_wr_on, c->sp_in_pipe > 0);
}

static void splice_cb(evutil_socket_t fd, short what, void *userdata)
{
    splice_pump(userdata);
}

static void tls_body_start(struct gw_conn *c);

static void splice_start(struct gw_conn *c)
{
    struct event_base *base = c->g->sb->gw->base;
    int cap;

    if (c->down == DOWN_TLSBODY) {
        tls_body_start(c);
        return;
    }
    if (pipe2(c->sp_pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
        c->sp_pipe[0] = c->sp_pipe[1] = -EBADF;
        conn_close(c, "no pipe for the body");
        return;
    }
    /* Bigger than the default 16 slots when the pipe limits allow (fcntl fails otherwise);
     * as big as the raw relay's bulk pipe for a body that fills it (a download). */
    (void)fcntl(c->sp_pipe[1], F_SETPIPE_SZ,
                (int)(c->resp_body.remaining >= GW_SPLICE_BULK ? GW_SPLICE_BULK : GW_SPLICE_PIPE));
    cap = fcntl(c->sp_pipe[1], F_GETPIPE_SZ);
    c->sp_cap = cap > 0 ? (size_t)cap : RELAY_BUFFER;
    c->sp_in_pipe = 0;
    c->sp_rd = event_new(base, bufferevent_getfd(c->upstream), EV_READ | EV_PERSIST, splice_cb, c);
    c->sp_wr = event_new(base, bufferevent_getfd(c->client), EV_WRITE | EV_PERSIST, splice_cb, c);
    c->sp_rd_on = c->sp_wr_on = false;
    if (!c->sp_rd || !c->sp_wr) {
        conn_close(c, "out of memory");
        return;
    }
    bufferevent_disable(c->client, EV_WRITE);
    splice_pump(c);
}

/*
 * The rest of a long body over terminated TLS (Content-Length, or chunked:
 * its end is found by the same framing code as on the bufferevent path):
 * the bytes must be decrypted and encrypted again, but not one record per
 * wakeup through two bufferevents and their evbuffers. The upstream SSL
 * reads ahead (one read() takes many records) and is drained with
 * SSL_read() into one buffer of GW_TLS_BATCH. The framing stays exact: a
 * Content-Length body is never read past its length, and of a chunked one
 * only the bytes http1_body_feed() counts as the body are kept; anything
 * the upstream sent after the body (left in its SSL, or read with the last
 * chunk) means its connection is not kept, as when an early byte arrives
 * on a kept connection; the next request is read and checked only after
 * this response, as when splicing. The buffer is written to the guest's
 * SSL whole, through a write buffer (tb_wbio, a BIO_f_buffer() over the
 * guest socket's BIO) that gathers a batch's records into one write() of
 * the socket instead of one per 16 KiB record (fewer syscalls, and
 * full-sized segments despite TCP_NODELAY); it is flushed after every
 * batch, so a slowly streamed body is still passed on as it arrives.
 * Backpressure: at most one batch in our memory each way, the sockets' own
 * buffers beyond it. Both bufferevents stand still meanwhile: their
 * evbuffers are empty when this starts (the guest's output flushed, the
 * upstream input consumed) and the SSLs are theirs again after it.
 */
static void tls_body_end(struct gw_conn *c)
{
    SSL *up = bufferevent_openssl_get_ssl(c->upstream);
    SSL *down = bufferevent_openssl_get_ssl(c->client);

    sp_set(c->sp_rd, &c->sp_rd_on, false);
    sp_set(c->sp_wr, &c->sp_wr_on, false);
    event_free(c->sp_rd);
    event_free(c->sp_wr);
    c->sp_rd = c->sp_wr = NULL;
    free(c->tb_buf); /* an idle kept-alive connection holds no batch buffer */
    c->tb_buf = NULL;
    c->tb_len = c->tb_off = 0;
    if (c->tb_wbio) {
        /* Flushed (tls_body_pump() ends only then): the socket BIO is the SSL's again, and
         * setting it frees the buffer BIO. */
        BIO *sock = BIO_pop(c->tb_wbio);
        SSL_set0_wbio(down, sock);
        c->tb_wbio = NULL;
    }
    /* libevent 2.1's bufferevent_openssl would not see records read ahead (only SSL_pending()),
     * so read-ahead goes off again, and an upstream with anything left after the body is not
     * reused (as when an early byte arrives on a kept connection). */
    SSL_set_read_ahead(up, 0);
    SSL_set_default_read_buffer_len(up, 0);
    if (SSL_has_pending(up)) {
        c->up_reusable = false;
    }
    c->resp_body.done = true;
    c->down = DOWN_BODY;
    bufferevent_setwatermark(c->client, EV_WRITE, GW_HIGH_WATER / 2, 0);
    bufferevent_enable(c->client, EV_WRITE);
    response_done(c);
}

/* Returns 1 if the operation would block, <0 if the connection ended (closed here). */
static int tls_body_err(struct gw_conn *c, SSL *ssl, int r, bool upstream)
{
    int e = SSL_get_error(ssl, r);

    if (e == SSL_ERROR_WANT_READ && upstream) {
        return 1;
    }
    if (e == SSL_ERROR_WANT_WRITE && !upstream) {
        return 1;
    }
    /* A renegotiation (refused) or key update needing the other direction, an alert, EOF. */
    ERR_clear_error();
    conn_close(c, upstream ? "upstream closed mid-response" : "client error");
    return -1;
}

/* Writes the batch to the guest's SSL and flushes its write buffer. Returns 1 when all of it is
 * in the socket, 0 when the socket is full (wait for EV_WRITE), <0 when the connection ended. */
static int tls_body_write(struct gw_conn *c, SSL *down, bool *progress)
{
    int r;

    while (c->tb_off < c->tb_len) {
        /* After WANT_WRITE the same bytes are offered again (same buffer, same length). */
        r = SSL_write(down, c->tb_buf + c->tb_off, (int)(c->tb_len - c->tb_off));
        if (r <= 0) {
            r = tls_body_err(c, down, r, false);
            return r < 0 ? r : 0;
        }
        c->tb_off += (size_t)r;
        c->ex_in += (uint64_t)r;
        *progress = true;
    }
    if (c->tb_wbio && BIO_ctrl_wpending(c->tb_wbio) > 0) {
        size_t before = BIO_ctrl_wpending(c->tb_wbio);
        if (BIO_flush(c->tb_wbio) <= 0) {
            if (!BIO_should_retry(c->tb_wbio)) {
                conn_close(c, "client error");
                return -1;
            }
            *progress = *progress || BIO_ctrl_wpending(c->tb_wbio) < before;
            return 0;
        }
        *progress = true;
    }
    return 1;
}

/* Reads the next batch from the upstream's SSL, never past the body. Returns 1 when the SSL
 * would block, 0 when the batch is full or the body complete, <0 when the connection ended. */
static int tls_body_read(struct gw_conn *c, SSL *up, bool *progress)
{
    int r;

    while (c->tb_len < GW_TLS_BATCH && !c->resp_body.done) {
        size_t want = GW_TLS_BATCH - c->tb_len;
        if (c->resp_body.kind == HTTP1_BODY_LENGTH) {
            want = (size_t)MIN(c->resp_body.remaining, (uint64_t)want);
        }
        r = SSL_read(up, c->tb_buf + c->tb_len, (int)want);
        if (r <= 0) {
            r = tls_body_err(c, up, r, true);
            return r < 0 ? r : 1;
        }
        ssize_t n = http1_body_feed(&c->resp_body, (const char *)c->tb_buf + c->tb_len, (size_t)r,
                                    NULL, NULL);
        if (n < 0) {
            conn_close(c, "malformed upstream body");
            return -1;
        }
        if (n < r) {
            c->up_reusable = false; /* bytes after the body: dropped, the connection not kept */
        }
        c->tb_len += (size_t)n;
        *progress = true;
    }
    return 0;
}

static void tls_body_pump(struct gw_conn *c)
{
    SSL *up = bufferevent_openssl_get_ssl(c->upstream);
    SSL *down = bufferevent_openssl_get_ssl(c->client);
    bool written = false;
    int r;

    for (unsigned round = 0; round < GW_TLS_ROUNDS; round++) {
        bool progress = false;
        r = tls_body_write(c, down, &progress);
        if (r < 0) {
            return;
        }
        written = r > 0;
        if (written) {
            c->tb_off = c->tb_len = 0;
            if (tls_body_read(c, up, &progress) < 0) {
                return;
            }
        }
        if (c->tb_len == 0 && c->resp_body.done) {
            tls_body_end(c);
            return;
        }
        if (!progress) {
            break;
        }
        touch(c);
    }
    /* Waiting for the upstream only with nothing left to write: SSL_read() said WANT_READ,
     * so the socket is empty and whatever record is partly in the SSL completes with bytes
     * still to come. Otherwise for the guest's socket: blocked, or (the round bound) a batch
     * read and not yet written. */
    bool want_rd = written && c->tb_len == 0 && !c->resp_body.done;
    sp_set(c->sp_rd, &c->sp_rd_on, want_rd);
    sp_set(c->sp_wr, &c->sp_wr_on, !want_rd);
}

static void tls_body_cb(evutil_socket_t fd, short what, void *userdata)
{
    tls_body_pump(userdata);
}

static void tls_body_start(struct gw_conn *c)
{
    struct event_base *base = c->g->sb->gw->base;
    SSL *up = bufferevent_openssl_get_ssl(c->upstream);
    SSL *down = bufferevent_openssl_get_ssl(c->client);
    BIO *sock = down ? SSL_get_wbio(down) : NULL;

    c->tb_buf = malloc(GW_TLS_BATCH);
    c->tb_len = c->tb_off = 0;
    c->sp_rd =
        event_new(base, bufferevent_getfd(c->upstream), EV_READ | EV_PERSIST, tls_body_cb, c);
    c->sp_wr = event_new(base, bufferevent_getfd(c->client), EV_WRITE | EV_PERSIST, tls_body_cb, c);
    c->sp_rd_on = c->sp_wr_on = false;
    if (!c->tb_buf || !c->sp_rd || !c->sp_wr || !up || !sock) {
        conn_close(c, "out of memory");
        return;
    }
    /* The guest's records gathered per batch (the comment above); without it (no memory),
     * one write() per record as before. The chain holds its own reference to the socket BIO,
     * which SSL_set0_wbio() takes from the SSL's. */
    c->tb_wbio = BIO_new(BIO_f_buffer());
    if (c->tb_wbio && BIO_set_write_buffer_size(c->tb_wbio, GW_TLS_WBUF) > 0 && BIO_up_ref(sock)) {
        BIO_push(c->tb_wbio, sock);
        SSL_set0_wbio(down, c->tb_wbio);
    } else {
        BIO_free(c->tb_wbio);
        c->tb_wbio = NULL;
    }
    bufferevent_disable(c->client, EV_WRITE);
    bufferevent_disable(c->upstream, EV_WRITE);
    SSL_set_read_ahead(up, 1);
    /* Room for several records per read() (the buffer is allocated at the next read). */
    SSL_set_default_read_buffer_len(up, GW_TLS_READ_BUF);
    tls_body_pump(c);
}

/* DOWN_BODY -> DOWN_SPLICE (DOWN_TLSBODY over terminated TLS): both bufferevents stand still
 * while the body is spliced (or moved in batches). */
static void splice_body(struct gw_conn *c)
{
    c->down = c->tls ? DOWN_TLSBODY : DOWN_SPLICE;
    bufferevent_disable(c->upstream, EV_READ);
    bufferevent_disable(c->client, EV_READ);
    if (evbuffer_get_length(bufferevent_get_output(c->client)) > 0) {
        /* client_write_cb() starts it once the output is empty. */
        bufferevent_setwatermark(c->client, EV_WRITE, 0, 0);
        bufferevent_enable(c->client, EV_WRITE);
        return;
    }
    splice_start(c);
}

/* A final or interim response head is complete in the upstream input. */
static int down_head(struct gw_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->upstream);
    size_t len = MIN(evbuffer_get_length(in), (size_t)HTTP1_HEAD_MAX);
    char *p = (char *)evbuffer_pullup(in, (ssize_t)len);
    size_t end = p ? http1_find_end(p, len, &c->scan) : 0;
    struct http1_response resp;
    struct strbuf sb = STRBUF_INIT;

    if (end == 0) {
        if (len >= HTTP1_HEAD_MAX) {
            return -E2BIG;
        }
        return 0; /* more to come */
    }
    c->scan = 0;
    if (http1_parse_response(p, end, &resp) < 0) {
        return -EBADMSG;
    }
    if (resp.status == 101) {
        if (!c->upgrade) {
            return -EBADMSG;
        }
        c->ex_in += end;
        (void)evbuffer_remove_buffer(in, bufferevent_get_output(c->client), end);
        c->up = UP_RAW;
        c->down = DOWN_RAW;
        c->sent_response = true;
        bufferevent_enable(c->client, EV_READ);
        return 1;
    }
    if (resp.status < 200) {
        /* Interim (100 Continue, 103): passed on as is, the final one follows. */
        c->ex_in += end;
        (void)evbuffer_remove_buffer(in, bufferevent_get_output(c->client), end);
        return 1;
    }
    if (resp.until_eof && !c->head_request && resp.status != 204 && resp.status != 304) {
        c->keep_alive = false; /* a body that ends at EOF can only end the connection */
    }
    /* Reused only after a request without a body (rewrite_request() says why). */
    c->up_reusable = !resp.close && !resp.until_eof && c->body.kind == HTTP1_BODY_NONE;
    if (http1_rewrite_response(p, &resp, c->keep_alive ? "keep-alive" : "close", &sb) < 0) {
        strbuf_release(&sb);
        return -E2BIG;
    }
    evbuffer_drain(in, end);
    c->ex_in += sb.len;
    (void)evbuffer_add(bufferevent_get_output(c->client), sb.buf, sb.len);
    strbuf_release(&sb);
    c->sent_response = true;
    http1_body_init_response(&c->resp_body, &resp, c->head_request);
    c->down = DOWN_BODY;
    return 1;
}

static void down_pump(struct gw_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->upstream);
    struct evbuffer *out = bufferevent_get_output(c->client);
    int r;

    touch(c);
    while (c->down == DOWN_HEAD && evbuffer_get_length(in) > 0) {
        r = down_head(c);
        if (r == 0) {
            return;
        }
        if (r < 0) {
            exchange_end(c);
            audit_conn(c, http_proto(c), false, "bad-upstream-response", false, 0, 0, 0);
            if (c->sent_response) {
                conn_close(c, "bad upstream response");
            } else {
                http_reply(c, 502, "Bad Gateway", "bad-upstream-response");
            }
            return;
        }
    }
    if ((c->down == DOWN_RAW || c->down == DOWN_BODY) && evbuffer_get_length(out) < GW_HIGH_WATER &&
        fill(c, c->upstream, GW_HIGH_WATER) < 0) {
        conn_close(c, "upstream error");
        return;
    }
    if (c->down == DOWN_RAW) {
        c->ex_in += evbuffer_get_length(in);
        (void)evbuffer_add_buffer(out, in);
    } else if (c->down == DOWN_BODY) {
        while (!c->resp_body.done && evbuffer_get_length(in) > 0) {
            struct evbuffer_iovec v;
            if (evbuffer_peek(in, -1, NULL, &v, 1) < 1) {
                break;
            }
            ssize_t n = http1_body_feed(&c->resp_body, v.iov_base, v.iov_len, NULL, NULL);
            if (n < 0) {
                conn_close(c, "malformed upstream body");
                return;
            }
            c->ex_in += (uint64_t)n;
            (void)evbuffer_remove_buffer(in, out, (size_t)n);
        }
        if (c->resp_body.done || c->resp_body.kind == HTTP1_BODY_NONE) {
            response_done(c);
            return;
        }
        /* A long Content-Length body is spliced (or batched over TLS); a chunked one is batched
         * over TLS once what came with the head is through (its end is found in the batches
         * as here), while plain it stays here: splicing would not see its framing. */
        bool batch = c->resp_body.kind == HTTP1_BODY_LENGTH
                         ? c->resp_body.remaining >= GW_SPLICE_MIN
                         : c->tls && c->resp_body.kind == HTTP1_BODY_CHUNKED;
        if (batch && evbuffer_get_length(in) == 0 && (c->up == UP_NEXT || c->up == UP_DISCARD)) {
            splice_body(c);
            return;
        }
    }
    if (evbuffer_get_length(out) >= GW_HIGH_WATER) {
        bufferevent_disable(c->upstream, EV_READ);
    }
}

static void upstream_read_cb(struct bufferevent *bev, void *userdata)
{
    struct gw_conn *c = userdata;

    c->resp_started = true;
    down_pump(c);
}

static void upstream_write_cb(struct bufferevent *bev, void *userdata)
{
    struct gw_conn *c = userdata;

    if (c->up == UP_BODY || c->up == UP_RAW) {
        bufferevent_enable(c->client, EV_READ);
    }
}

static void http_connected_cb(evutil_socket_t fd, short what, void *userdata);

static void upstream_event_cb(struct bufferevent *bev, short what, void *userdata)
{
    struct gw_conn *c = userdata;

    if (what & BEV_EVENT_CONNECTED) {
        return; /* upstream TLS verified (chain and name): the request is on its way */
    }
    if (c->up_reused && !c->resp_started && c->down == DOWN_HEAD &&
        c->body.kind == HTTP1_BODY_NONE) {
        /* A kept connection the upstream closed as we reused it (the usual keep-alive race):
         * a request without a body is sent again, once, on a fresh connection. */
        upstream_drop(c);
        c->up_reused = false;
        c->dialing = true;
        if (dial_start(c, http_connected_cb) < 0) {
            c->ex_open = false;
            audit_conn(c, http_proto(c), false, "upstream-unreachable", false, 0, 0, 0);
            http_reply(c, 502, "Bad Gateway", "upstream-unreachable");
        }
        return;
    }
    if (c->tls && (what & BEV_EVENT_ERROR) && !c->sent_response && c->down == DOWN_HEAD) {
        char why[160];
        tls_error_reason(bev, "upstream-tls", why, sizeof(why));
        c->ex_open = false;
        audit_conn(c, "tls", false, why, false, 0, 0, 0);
        http_reply(c, 502, "Bad Gateway", why);
        return;
    }
    if (what & BEV_EVENT_EOF) {
        if (c->down == DOWN_BODY && c->resp_body.kind == HTTP1_BODY_UNTIL_EOF) {
            response_done(c);
            return;
        }
        if (c->down == DOWN_RAW) {
            close_after_flush(c);
            return;
        }
        if (c->down == DOWN_HEAD && !c->sent_response) {
            exchange_end(c);
            http_reply(c, 502, "Bad Gateway", "upstream-closed");
            return;
        }
    }
    if (!c->sent_response) {
        c->ex_open = false;
        audit_conn(c, http_proto(c), false, "upstream-error", false, 0, 0, 0);
        http_reply(c, 502, "Bad Gateway", "upstream-error");
        return;
    }
    conn_close(c, "upstream closed mid-response");
}

static void send_request(struct gw_conn *c);

/* A dialed-ahead upstream that closed or failed before any request: dropped quietly (the
 * request, when it comes, dials again and meets the failure, audited, itself). */
static void predial_event_cb(struct bufferevent *bev, short what, void *userdata)
{
    struct gw_conn *c = userdata;

    if (what & BEV_EVENT_CONNECTED) {
        return; /* upstream TLS verified: ready for the first request */
    }
    c->up_fresh = false;
    upstream_drop(c);
}

static void http_connected_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct gw_conn *c = userdata;
    int r = dial_result(c, what);
    bool waiting = !c->dial_ahead; /* a checked request waits for this connection */

    c->dialing = c->dial_ahead = false;
    if (r < 0 && !waiting) {
        close_safe(c->up_fd);
        c->up_fd = -EBADF;
        return;
    }
    if (r < 0) {
        c->ex_open = false;
        audit_conn(c, http_proto(c), false, "upstream-unreachable", false, 0, 0, 0);
        close_safe(c->up_fd);
        c->up_fd = -EBADF;
        http_reply(c, 502, "Bad Gateway", "upstream-unreachable");
        return;
    }
    if (c->tls) {
        /* Our own TLS upstream: SNI = the guest's, chain and name verified (tls-term.h). */
        SSL *ssl = tls_term_client(c->g->sb->gw->tls, c->sni);
        c->upstream =
            ssl ? bufferevent_openssl_socket_new(c->g->sb->gw->base, c->up_fd, ssl,
                                                 BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE)
                : NULL;
        if (!c->upstream) {
            SSL_free(ssl);
        } else {
            bufferevent_openssl_set_allow_dirty_shutdown(c->upstream, 1);
        }
    } else {
        c->upstream = bufferevent_socket_new(c->g->sb->gw->base, c->up_fd, BEV_OPT_CLOSE_ON_FREE);
    }
    if (!c->upstream) {
        conn_close(c, "out of memory");
        return;
    }
    c->up_fd = -EBADF;
    if (!waiting) {
        /* Dialed ahead: the handshake runs on while the guest's request is on its way. */
        c->up_fresh = true;
        bufferevent_setcb(c->upstream, idle_read_cb, NULL, predial_event_cb, c);
        bev_tune(c->upstream);
        bufferevent_enable(c->upstream, EV_READ | EV_WRITE);
        return;
    }
    send_request(c);
}

/*
 * Terminated TLS: the upstream is dialed (TCP, then our verified TLS
 * handshake) as soon as the SNI passed, while the guest's own handshake
 * and first request are still on their way, so the first byte waits for
 * the two handshakes side by side rather than one after the other. Safe
 * before any request: the SNI is allowed and attributed to this very
 * destination (the one the upstream TLS names and verifies), and no byte
 * of the guest's goes upstream before its request's Host is checked
 * against it. A failure here is quiet; the first request dials again.
 */
static void predial(struct gw_conn *c)
{
    if (dial_start(c, http_connected_cb) < 0) {
        close_safe(c->up_fd);
        c->up_fd = -EBADF;
        return;
    }
    c->dialing = c->dial_ahead = true;
}

/* The checked, rewritten head goes out on c->upstream (new or kept); the body follows. */
static void send_request(struct gw_conn *c)
{
    bufferevent_setcb(c->upstream, upstream_read_cb, upstream_write_cb, upstream_event_cb, c);
    bev_tune(c->upstream);
    bufferevent_setwatermark(c->upstream, EV_WRITE, GW_HIGH_WATER / 2, 0);
    bufferevent_setwatermark(c->client, EV_WRITE, GW_HIGH_WATER / 2, 0);
    c->ex_out += c->fwd.len;
    c->resp_started = false;
    c->up_reusable = false;
    /* fwd is kept until the next request: sent again if a kept connection was stale. */
    (void)evbuffer_add(bufferevent_get_output(c->upstream), c->fwd.buf, c->fwd.len);
    bufferevent_enable(c->upstream, EV_READ | EV_WRITE);
    c->down = DOWN_HEAD;
    c->up = UP_BODY;
    if (c->body.kind == HTTP1_BODY_NONE || c->body.done) {
        c->body.done = true;
        c->up = c->keep_alive ? UP_NEXT : UP_DISCARD;
    }
    if (c->up != UP_NEXT) {
        bufferevent_enable(c->client, EV_READ);
    }
    up_pump(c);
}

/*
 * The head that goes upstream: hop-by-hop fields dropped (http1.h). An
 * upgrade keeps them (the upstream must see the Upgrade) and its
 * connection ends with it. A request with a body says "close": an upstream
 * that frames the body otherwise than we do (one that ignores
 * Content-Length) then cannot read the guest's body bytes as a request of
 * its own, unchecked, on a kept connection. Any other request asks to keep
 * the upstream connection alive for the next one.
 */
static int rewrite_request(const char *head, const struct http1_request *req, struct strbuf *out)
{
    bool body = req->chunked || (req->has_content_length && req->content_length > 0);

    return http1_rewrite_request_conn(head, req, body ? "close" : "keep-alive", out);
}

/* A complete request head is at the front of the client's input. */
static void http_request(struct gw_conn *c, const char *head, size_t len)
{
    struct sandbox *sb = c->g->sb;
    struct http1_request req;
    struct http_gate_result res;
    int r;

    c->host[0] = '\0';
    c->method[0] = '\0';
    free(c->secret); /* a record of this request never names the last one's secrets */
    c->secret = NULL;
    if (len >= 8 && memcmp(head, "CONNECT ", 8) == 0) {
        /* Refused by name before the parser (which has no authority-form): a tunnel. */
        snprintf(c->method, sizeof(c->method), "CONNECT");
        http_deny(c, 403, "Forbidden", "connect");
        return;
    }
    r = http1_parse_request(head, len, &req);
    if (r < 0) {
        const char *why = r == -E2BIG             ? "head-too-large"
                          : r == -EPROTONOSUPPORT ? "bad-version"
                                                  : "malformed-request";
        http_deny(c, r == -E2BIG ? 431 : 400, "Bad Request", why);
        return;
    }
    snprintf(c->method, sizeof(c->method), "%.*s", (int)MIN(req.method.n, (size_t)GW_METHOD_MAX),
             req.method.p);
    struct http_gate_input in = {
        .policy = sb->policy,
        .env = &sb->gw->env,
        .resolved = sb->resolved,
        .dst = c->dst.sin_addr,
        .port = c->port,
        .sni = c->tls ? c->sni : NULL,
        .now = now_monotonic(),
    };
    http_gate_check(&in, head, &req, &res);
    snprintf(c->host, sizeof(c->host), "%s", res.host);
    if (!res.allow) {
        http_deny(c, 403, "Forbidden", res.reason);
        return;
    }
    strbuf_release(&c->fwd);
    if (rewrite_request(head, &req, &c->fwd) < 0) {
        http_deny(c, 431, "Request Header Fields Too Large", "head-too-large");
        return;
    }
    /* Credentials (inject.h): the one hook; it may replace fields of c->fwd, or deny. */
    const char *why;
    r = inject_request(sb, c->tls ? c->sni : NULL, res.host, &req, c->dst.sin_addr, &c->fwd,
                       &c->secret, &why);
    if (r > 0) {
        http_deny(c, r, inject_phrase(r), why);
        return;
    }
    c->head_request = http1_span_eq(req.method, "HEAD"); /* req's spans die with the drain */
    evbuffer_drain(bufferevent_get_input(c->client), req.head_len);
    c->requests++;
    c->keep_alive = req.keep_alive && !req.upgrade;
    c->upgrade = req.upgrade;
    c->sent_response = false;
    http1_body_init_request(&c->body, &req);
    c->reason = res.reason;
    c->ex_open = true;
    c->ex_out = c->ex_in = 0;
    c->ex_start = now_monotonic();
    c->up = UP_DIAL;
    bufferevent_disable(c->client, EV_READ);
    timer_in(c, 10 * USEC_PER_SEC); /* the idle check from here on */
    if (c->body.kind != HTTP1_BODY_NONE && !c->up_fresh) {
        /* A body goes on a connection that never carried a request (dialed ahead, or now):
         * it is streamed, not kept, so it could not be sent again after a stale-reuse race. */
        upstream_drop(c);
    }
    c->up_reused = c->upstream != NULL && !c->up_fresh;
    c->up_fresh = false;
    if (c->upstream) {
        send_request(c);
        return;
    }
    if (c->dialing) {
        c->dial_ahead = false; /* dialed ahead, still connecting: http_connected_cb() sends it */
        return;
    }
    c->dialing = true;
    if (dial_start(c, http_connected_cb) < 0) {
        c->ex_open = false;
        audit_conn(c, http_proto(c), false, "upstream-unreachable", false, 0, 0, 0);
        http_reply(c, 502, "Bad Gateway", "upstream-unreachable");
    }
}

/* UP_HEAD: looks for the end of the request head in the client's input. */
static void http_head(struct gw_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->client);
    size_t len = MIN(evbuffer_get_length(in), (size_t)HTTP1_HEAD_MAX);
    char *p;
    size_t end;

    if (len == 0) {
        return;
    }
    if (c->deadline == 0) {
        /* The head's first byte: the whole head within GW_HEAD_SEC (slowloris). */
        c->deadline = now_monotonic() + GW_HEAD_SEC * USEC_PER_SEC;
        timer_in(c, GW_HEAD_SEC * USEC_PER_SEC);
    }
    p = (char *)evbuffer_pullup(in, (ssize_t)len);
    end = p ? http1_find_end(p, len, &c->scan) : 0;
    if (end == 0) {
        if (len >= HTTP1_HEAD_MAX) {
            http_deny(c, 431, "Request Header Fields Too Large", "head-too-large");
        }
        return;
    }
    c->scan = 0;
    c->deadline = 0;
    http_request(c, p, end);
}

/* Ready for the next request on a kept-alive connection. */
static void http_next(struct gw_conn *c)
{
    c->up = UP_HEAD;
    c->sent_response = false;
    c->scan = 0;
    c->deadline = 0;
    timer_in(c, GW_KEEPALIVE_SEC * USEC_PER_SEC);
    bufferevent_enable(c->client, EV_READ);
    if (evbuffer_get_length(bufferevent_get_input(c->client)) > 0) {
        http_head(c);
    }
}

/* ssl: the guest leg's server side (terminated TLS), NULL for plain HTTP. Owned. */
static void start_http(struct gw_conn *c, SSL *ssl)
{
    struct event_base *base = c->g->sb->gw->base;

    (void)setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &(int){ 1 }, sizeof(int));
    event_del(c->ev); /* freed with c: this may be its own callback */
    if (ssl) {
        /* The ClientHello is still in the socket (only peeked): OpenSSL reads it first. */
        c->client = bufferevent_openssl_socket_new(base, c->fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                   BEV_OPT_CLOSE_ON_FREE);
        if (!c->client) {
            SSL_free(ssl);
        } else {
            bufferevent_openssl_set_allow_dirty_shutdown(c->client, 1);
        }
    } else {
        c->client = bufferevent_socket_new(base, c->fd, BEV_OPT_CLOSE_ON_FREE);
    }
    if (!c->client) {
        conn_close(c, "out of memory");
        return;
    }
    c->fd = -EBADF;
    c->phase = PH_HTTP;
    bufferevent_setcb(c->client, client_read_cb, client_write_cb, client_event_cb, c);
    bev_tune(c->client);
    bufferevent_setwatermark(c->client, EV_READ, 0, HTTP1_HEAD_MAX);
    c->up = UP_HEAD;
    /* The first head keeps the accept deadline (GW_FIRST_BYTE_SEC): it is already running. */
    c->deadline = c->start + GW_FIRST_BYTE_SEC * USEC_PER_SEC;
    timer_in(c, first_byte_left(c));
    bufferevent_enable(c->client, EV_READ);
}

/* ---- sniffing ---- */

static bool is_upper(uint8_t b)
{
    return b >= 'A' && b <= 'Z';
}

static void tls_deny(struct gw_conn *c, const char *reason)
{
    audit_conn(c, "tls", false, reason, false, 0, 0, 0);
    conn_reset(c, reason);
}

/*
 * The first byte was a TLS handshake record: the ClientHello, peeked whole
 * (at most TLS_HELLO_MAX), must name an allowed SNI attributed to the
 * destination; then TLS is terminated with a leaf for that name.
 */
static void sniff_tls(struct gw_conn *c)
{
    static uint8_t buf[TLS_HELLO_MAX]; /* one loop thread; the bytes stay in the socket */
    struct sandbox *sb = c->g->sb;
    struct tls_hello hello;
    struct http_gate_result res;
    ssize_t n;
    int r;

    n = recv(c->fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
    if (n <= 0) {
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            return;
        }
        tls_deny(c, "tls-truncated");
        return;
    }
    r = tls_hello_parse(buf, (size_t)n, &hello);
    if (r == -EAGAIN) {
        /* Wait for more than what is there (no spinning on bytes already seen). */
        int lowat = (int)n + 1;
        if ((size_t)n <= c->peeked) {
            return; /* woken without new bytes: still waiting */
        }
        c->peeked = (size_t)n;
        (void)setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat));
        timer_in(c, first_byte_left(c));
        return;
    }
    event_del(c->timer);
    if (r == -E2BIG) {
        tls_deny(c, "tls-hello-too-large");
        return;
    }
    if (r < 0) {
        tls_deny(c, "tls-malformed-hello");
        return;
    }
    if (hello.has_ech) {
        tls_deny(c, "ech"); /* the outer SNI would say nothing of where it goes */
        return;
    }
    if (!hello.has_sni) {
        tls_deny(c, "no-sni");
        return;
    }
    snprintf(c->sni, sizeof(c->sni), "%s", hello.sni);
    struct http_gate_input in = {
        .policy = sb->policy,
        .env = &sb->gw->env,
        .resolved = sb->resolved,
        .dst = c->dst.sin_addr,
        .port = c->port,
        .now = now_monotonic(),
    };
    http_gate_check_name(&in, c->sni, &res);
    if (!res.allow) {
        tls_deny(c, res.reason);
        return;
    }
    if (policy_tls_passthrough(sb->policy, c->sni)) {
        start_passthrough(c, res.reason);
        return;
    }
    if (!sb->gw->tls) {
        tls_deny(c, "tls-unavailable");
        return;
    }
    SSL *ssl = tls_term_server(sb->gw->tls, c->sni);
    if (!ssl) {
        tls_deny(c, "tls-leaf-failed");
        return;
    }
    c->tls = true;
    start_http(c, ssl);
    if (c->phase == PH_HTTP) {
        predial(c);
    }
}

static void sniff_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct gw_conn *c = userdata;
    uint8_t buf[GW_SNIFF_MAX];
    ssize_t n;
    size_t i;

    if (what & EV_TIMEOUT) {
        return; /* the conn timer decides */
    }
    if (c->tls_sniff) {
        sniff_tls(c);
        return;
    }
    n = recv(c->fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) {
            return;
        }
        conn_close(c, "receive error");
        return;
    }
    if (n == 0) {
        conn_close(c, "closed before sending");
        return;
    }
    if (buf[0] == 0x16) {
        c->tls_sniff = true;
        sniff_tls(c);
        return;
    }
    event_del(c->timer);
    for (i = 0; i < (size_t)n && is_upper(buf[i]); i++) {
    }
    if (i > 0 && i < (size_t)n && i <= GW_METHOD_MAX && buf[i] == ' ') {
        start_http(c, NULL);
        return;
    }
    if (i == (size_t)n && i <= GW_METHOD_MAX) {
        /* Maybe a method still arriving: wake up when there is more than this. */
        int lowat = (int)n + 1;
        c->peeked = (size_t)n;
        (void)setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat));
        timer_in(c, first_byte_left(c));
        return;
    }
    event_del(c->ev);
    start_tcp(c);
}

static void conn_timer_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct gw_conn *c = userdata;
    usec_t now = now_monotonic();

    switch (c->phase) {
    case PH_SNIFF:
        if (c->peeked == 0 && now - c->start < GW_FIRST_BYTE_SEC * USEC_PER_SEC) {
            /* Silence: a server-speaks-first protocol, if the address may be reached raw. */
            struct sandbox *sb = c->g->sb;
            if (policy_reason_allows(policy_check_addr(sb->policy, &sb->gw->env, AF_INET,
                                                       &c->dst.sin_addr, c->port))) {
                event_del(c->ev);
                start_tcp(c);
                return;
            }
            timer_in(c, first_byte_left(c));
            return;
        }
        audit_conn(c, c->tls_sniff ? "tls" : "tcp", false, "first-byte-timeout", false, 0, 0, 0);
        conn_reset(c, "first byte timeout");
        return;
    case PH_HTTP:
        if (c->close_after_flush) {
            conn_close(c, "linger timeout");
            return;
        }
        if (c->up == UP_HEAD) {
            if (c->deadline && now >= c->deadline) {
                http_deny(c, 408, "Request Timeout", "head-timeout");
            } else if (c->deadline) {
                timer_in(c, c->deadline - now);
            } else {
                conn_close(c, "keep-alive timeout");
            }
            return;
        }
        if (now - c->last_active >= GW_IDLE_SEC * USEC_PER_SEC) {
            conn_close(c, "idle timeout");
            return;
        }
        timer_in(c, 10 * USEC_PER_SEC);
        return;
    default:
        return;
    }
}

/* ---- accepting ---- */

static void accept_cb(struct listener *l, int fd, const struct sockaddr *peer, socklen_t peer_len,
                      void *userdata)
{
    struct gateway *g = userdata;
    struct sandbox *sb = g->sb;
    struct gw *gw = sb->gw;
    struct gw_conn *c;
    socklen_t dl = sizeof(struct sockaddr_in);

    if (g->n_conns >= gw->limits.conns_per_sandbox || gw->n_conns >= gw->max_conns) {
        /* Over a cap: refused before any byte is read, audited at most once a second with a
         * count (a flood must not become an audit flood). */
        usec_t now = now_monotonic();
        listener_release(l, peer);
        close_safe(fd);
        g->refused++;
        if (now - g->refused_at >= USEC_PER_SEC) {
            json_t *rec = audit_record_new(sb->id, "tcp");
            if (rec) {
                json_object_set_new(rec, "verdict", json_string("deny"));
                json_object_set_new(rec, "reason", json_string("conn-limit"));
                json_object_set_new(rec, "count", json_integer((json_int_t)g->refused));
                gw_audit(gw, rec);
            }
            g->refused = 0;
            g->refused_at = now;
        }
        return;
    }
    c = calloc(1, sizeof(*c));
    if (!c) {
        listener_release(l, peer);
        close_safe(fd);
        return;
    }
    c->g = g;
    c->fd = fd;
    c->up_fd = -EBADF;
    c->sp_pipe[0] = c->sp_pipe[1] = -EBADF;
    c->from_listener = true;
    c->start = c->last_active = now_monotonic();
    c->next = g->conns;
    if (c->next) {
        c->next->prev = c;
    }
    g->conns = c;
    g->n_conns++;
    gw->n_conns++;
    c->timer = evtimer_new(gw->base, conn_timer_cb, c);
    c->reaper = event_new(gw->base, -1, 0, reap_cb, c);
    c->ev = event_new(gw->base, fd, EV_READ | EV_PERSIST, sniff_cb, c);
    if (!c->timer || !c->reaper || !c->ev) {
        if (c->reaper) {
            conn_close(c, "out of memory");
        } else {
            conn_free(c);
        }
        return;
    }
    if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &c->dst, &dl) < 0 || dl != sizeof(c->dst) ||
        c->dst.sin_family != AF_INET) {
        /* Not redirected by the sandbox's nftables: nowhere the guest chose to go. */
        audit_conn(c, "tcp", false, "no-original-dst", false, 0, 0, 0);
        conn_reset(c, "no original destination");
        return;
    }
    inet_ntop(AF_INET, &c->dst.sin_addr, c->dst_str, sizeof(c->dst_str));
    c->port = ntohs(c->dst.sin_port);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
    c->phase = PH_SNIFF;
    event_add(c->ev, NULL);
    timer_in(c, GW_SERVER_FIRST_MSEC * USEC_PER_MSEC);
}

int gateway_new(struct sandbox *sb, struct gateway **ret)
{
    struct gateway *g = calloc(1, sizeof(*g));

    if (!g) {
        return -ENOMEM;
    }
    g->sb = sb;
    *ret = g;
    return 0;
}

int gateway_listen(struct gateway *g, int fd)
{
    struct listener_limits lim = { .max_conns = g->sb->gw->limits.conns_per_sandbox * 2 };
    struct listener *l = NULL;
    int r;

    gateway_stop_listening(g);
    /* The node is asked for non-blocking sockets; a blocking one would stall the whole loop. */
    r = fd_set_nonblock(fd, 1);
    if (r < 0) {
        close_safe(fd);
        return r;
    }
    r = listener_new(g->sb->gw->base, fd, &lim, accept_cb, g, &l);
    if (r < 0) {
        return r;
    }
    g->listener = l;
    return 0;
}

void gateway_stop_listening(struct gateway *g)
{
    /* Connections from it no longer count against a listener. */
    for (struct gw_conn *c = g->conns; c; c = c->next) {
        c->from_listener = false;
    }
    g->listener = listener_free(g->listener);
}

void gateway_close_all(struct gateway *g)
{
    gateway_stop_listening(g);
    for (struct gw_conn *c = g->conns; c; c = c->next) {
        conn_close(c, "sandbox detached");
    }
}

unsigned gateway_conns(const struct gateway *g)
{
    return g ? g->n_conns : 0;
}

bool gateway_listening(const struct gateway *g)
{
    return g && g->listener;
}

struct gateway *gateway_free(struct gateway *g)
{
    if (!g) {
        return NULL;
    }
    gateway_stop_listening(g);
    while (g->conns) {
        conn_free(g->conns);
    }
    free(g);
    return NULL;
}
