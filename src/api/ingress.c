/*
 * The ingress proxy (ingress.h has the contract).
 *
 * One struct ingress_conn per client connection:
 *
 *   HEAD --routed, token ok, lookup ok--> TUNNEL --"OK" from the node--> PROXY --101--> RELAY
 *     ^ |                                    |                             |             |
 *     | +--- our own error response -------> REPLY (then a lingering close)|             |
 *     +------ response done, keep-alive: next request ---------------------+             |
 *   any -------------------------------------------------------------------------> CLOSED
 *
 *   transition          function
 *   HEAD -> TUNNEL      head_complete() -> open_tunnel()
 *   TUNNEL -> PROXY     tunnel_read_cb() -> start_proxy()
 *   PROXY -> HEAD       response_done() -> next_request(): tunnel closed, next head
 *   PROXY -> RELAY      down_pump() -> start_relay(): the shared relay (relay.h) owns both
 *   * -> REPLY          conn_reply() (HEAD, TUNNEL; PROXY while nothing was sent back)
 *   * -> CLOSED         conn_close(); reap_cb() frees it later (style.md R15)
 *
 * Every request is parsed (shared/http1.h), routed, looked up and
 * authenticated in HEAD, and gets a tunnel of its own: keep-alive is
 * between the client and us only, so a kept-alive connection can never
 * carry a request past the checks (docs/architecture.md, Ingress).
 *
 * In PROXY each direction has a mode:
 *
 *   client -> sandbox (up):   HOLD  upgrade request: nothing until the response is known
 *                             BODY  the request body, counted by http1_body_feed()
 *                             NEXT  after the request, kept alive: what follows is the next
 *                                   request, left unread until the response is done
 *                             DISCARD  after the request, closing: read and dropped
 *                             RAW   after 101 Switching Protocols (until the relay starts)
 *   sandbox -> client (down): HEAD  response heads: 1xx passed on, the final one gets
 *                                   "Connection: keep-alive" or "close"; 101 only for upgrades
 *                             BODY  the response body, counted like the request's
 *                             RAW   after 101 (until the relay starts)
 *                             DONE  the response is complete: the sandbox side is
 *                                   closed even if it would keep the connection
 *
 * Heads are copied out of libevent's buffers into a per-direction buffer of
 * at most HTTP1_HEAD_MAX bytes and scanned incrementally, so a client or
 * guest sending a byte at a time costs linear work. Bodies are never copied:
 * evbuffer chains move from one side's input to the other's output. When an
 * output holds INGRESS_HIGH_WATER bytes we stop reading its source until it
 * has drained to half of that, so a slow reader costs bounded memory.
 *
 * Closing mirrors TCP: an EOF from one side becomes shutdown(SHUT_WR) on the
 * other once its output is drained; so a sandbox that dies mid-body leaves
 * the client a body without its end (no last chunk), never a clean end.
 * When the sandbox has finished its response and the client has nothing
 * left to send (DISCARD), we shut the client's write side and drain its
 * input for a short linger, so the response is not lost to a reset. Idle
 * connections close after INGRESS_IDLE_TIMEOUT_SEC without a byte either
 * way; Connect streams send keepalives every 50 s, well within it.
 */
#include "api/ingress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "api/ingress-head.h"
#include "basic/fd-util.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/rlimit-util.h"
#include "basic/strbuf.h"
#include "basic/time-util.h"
#include "shared/envd.h"
#include "shared/event-util.h"
#include "shared/listener.h"
#include "shared/relay.h"
#include "shared/sandbox-id.h"
#include "shared/tunnel-proto.h"

#define INGRESS_HEAD_TIMEOUT_SEC 10   /* the whole request head */
#define INGRESS_TUNNEL_TIMEOUT_SEC 15 /* the node answers within its 10 s connect deadline */
#define INGRESS_IDLE_TIMEOUT_SEC (15 * 60)
/*
 * A client that sent EOF before any of the response: TCP cannot tell a
 * half-close from a client gone for good, and a guest that never answers
 * would hold the connection (and its tunnel, counted against the sandbox's
 * cap) for the whole idle timeout; so, as proxies do, the sandbox gets this
 * long to begin its response, then both sides are closed.
 */
#define INGRESS_ABANDONED_SEC 30
#define INGRESS_REPLY_TIMEOUT_SEC 10 /* to write our own response */
#define INGRESS_LINGER_SEC 2
#define INGRESS_HIGH_WATER (256u * 1024) /* per direction */
/*
 * Descriptors per connection for the connection cap: the client and the
 * tunnel, and after 101 the relay's two duplicates and two pipes.
 */
#define INGRESS_FDS_PER_CONN 6
#define INGRESS_MAX_PER_SANDBOX_MIN 64      /* per sandbox: an eighth of the cap, at least this */
#define INGRESS_UNAUTH_BODY_MAX (64u << 20) /* signed /files uploads (no token) */
#define INGRESS_ACCEPT_RETRY_MSEC 100
#define INGRESS_KEEPALIVE_SEC 60 /* waiting for the next request on a kept-alive connection */
/* Requests held while their sandbox is woken (auto-resume, ingress.h -EINPROGRESS). */
#define INGRESS_HOLD_MAX 16
#define INGRESS_HOLD_SEC 60
#define INGRESS_HOLD_POLL_MSEC 100

enum conn_state {
    CONN_HEAD,
    CONN_HOLD,
    CONN_TUNNEL,
    CONN_PROXY,
    CONN_RELAY,
    CONN_REPLY,
    CONN_CLOSED
};
enum up_mode { UP_HOLD, UP_BODY, UP_DISCARD, UP_NEXT, UP_RAW };
enum down_mode { DOWN_HEAD, DOWN_BODY, DOWN_RAW, DOWN_DONE };

/* A head being collected: bytes copied out of an evbuffer, scanned incrementally. */
struct headbuf {
    char *buf;
    size_t len, alloc, scan;
};

struct ingress_conn {
    struct ingress *ig;
    struct ingress_conn *prev, *next;
    enum conn_state state;
    enum up_mode up;
    enum down_mode down;
    struct bufferevent *client, *upstream;
    struct event *timer, *reaper;
    usec_t last_active;
    bool lingering;
    char id[SANDBOX_ID_LEN + 1]; /* "" until routed */
    uint16_t port;
    bool html;          /* our error pages as HTML (Accept prefers it) */
    bool upgrade;       /* the request asks for a protocol switch */
    bool sent_response; /* response bytes went to the client: no error page any more */
    bool head_request;  /* HEAD: the response has no body */
    size_t hold_len;    /* CONN_HOLD: the head's length, parsed again when it is looked up */
    usec_t hold_until;  /* CONN_HOLD: then 504 */
    bool paused_reply;  /* our answer is E2B's "paused" one (canAutoResume in it) */
    bool keep_alive;    /* another request may follow this exchange */
    bool head_started;  /* the next request's first bytes arrived (keep-alive) */
    unsigned requests;  /* served on this connection so far */
    struct sockaddr_storage peer; /* for listener_release() */
    bool has_peer;
    struct relay *relay;         /* CONN_RELAY: after 101, both sockets are the relay's */
    struct http1_body body;      /* the request's */
    struct http1_body resp_body; /* the final response's */
    struct headbuf head;         /* request head, then the response heads */
    struct strbuf forward;       /* request head to send once the tunnel is open */
    bool client_eof, upstream_eof, client_shut, upstream_shut;
};

struct ingress {
    struct event_base *base;
    struct listener *listener;
    char *domain;
    SSL_CTX *tls; /* NULL: plain HTTP */
    ingress_lookup_fn lookup;
    void *userdata;
    uint16_t port;
    struct ingress_conn *conns;
    unsigned n_conns;
};

/* ---- small helpers ---- */

static void headbuf_reset(struct headbuf *h)
{
    free(h->buf);
    *h = (struct headbuf){ 0 };
}

/* Moves up to HTTP1_HEAD_MAX - h->len bytes from in. Returns 0 or -ENOMEM. */
static int headbuf_fill(struct headbuf *h, struct evbuffer *in)
{
    size_t want = MIN(evbuffer_get_length(in), (size_t)HTTP1_HEAD_MAX - h->len);

    if (want == 0) {
        return 0;
    }
    if (h->len + want > h->alloc) {
        size_t n = MAX(h->alloc * 2, (size_t)4096);
        while (n < h->len + want) {
            n *= 2;
        }
        n = MIN(n, (size_t)HTTP1_HEAD_MAX);
        char *p = realloc(h->buf, n);
        if (!p) {
            return -ENOMEM;
        }
        h->buf = p;
        h->alloc = n;
    }
    int got = evbuffer_remove(in, h->buf + h->len, want);
    if (got > 0) {
        h->len += (size_t)got;
    }
    return 0;
}

/* Gives the bytes after the head back to the front of in, and empties h. */
static int headbuf_return_rest(struct headbuf *h, size_t head_len, struct evbuffer *in)
{
    int r = 0;
    if (h->len > head_len) {
        r = evbuffer_prepend(in, h->buf + head_len, h->len - head_len) < 0 ? -ENOMEM : 0;
    }
    headbuf_reset(h);
    return r;
}

static void timer_set(struct ingress_conn *c, unsigned sec)
{
    struct timeval tv = { sec, 0 };
    evtimer_add(c->timer, &tv);
}

static const char *reason_phrase(int status)
{
    switch (status) {
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 411:
        return "Length Required";
    case 413:
        return "Content Too Large";
    case 431:
        return "Request Header Fields Too Large";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Internal Server Error";
    }
}

/* Appends s escaped for a JSON string (json) or for HTML text. */
static int append_escaped(struct strbuf *sb, const char *s, bool json)
{
    int r = 0;
    for (; r >= 0 && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (json && (ch == '"' || ch == '\\')) {
            r = strbuf_appendf(sb, "\\%c", ch);
        } else if (json && ch < 0x20) {
            r = strbuf_appendf(sb, "\\u%04x", ch);
        } else if (!json && ch == '<') {
            r = strbuf_appends(sb, "&lt;");
        } else if (!json && ch == '>') {
            r = strbuf_appends(sb, "&gt;");
        } else if (!json && ch == '&') {
            r = strbuf_appends(sb, "&amp;");
        } else if (!json && ch == '"') {
            r = strbuf_appends(sb, "&quot;");
        } else {
            r = strbuf_append(sb, s, 1);
        }
    }
    return r;
}

/*
 * The proxy's own error body (e2b-compat.md 4.2): JSON
 * {"sandboxId","message"[,"port"],"code"} (the shape of E2B's proxy, port a
 * string as there), or a small HTML page for browsers.
 */
static int error_body(const struct ingress_conn *c, int status, const char *message, bool with_port,
                      struct strbuf *sb)
{
    char port[8];
    int r;

    snprintf(port, sizeof(port), "%u", (unsigned)c->port);
    if (!c->html) {
        r = strbuf_appends(sb, "{");
        if (r >= 0 && c->id[0]) {
            r = strbuf_appendf(sb, "\"sandboxId\":\"%s\",", c->id);
        }
        if (r >= 0) {
            r = strbuf_appends(sb, "\"message\":\"");
        }
        if (r >= 0) {
            r = append_escaped(sb, message, true);
        }
        if (r >= 0 && with_port) {
            r = strbuf_appendf(sb, "\",\"port\":\"%s", port);
        }
        if (r >= 0) {
            /* E2B's paused answer says whether traffic would wake it: never, in space yet. */
            r = strbuf_appendf(sb, "\",\"code\":%d%s}", status,
                               c->paused_reply ? ",\"canAutoResume\":false" : "");
        }
        return r;
    }
    r = strbuf_appendf(sb,
                       "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%d %s</title>"
                       "</head>\n<body><h1>",
                       status, reason_phrase(status));
    if (r >= 0) {
        r = append_escaped(sb, message, false);
    }
    if (r >= 0) {
        r = strbuf_appends(sb, "</h1>\n");
    }
    if (r >= 0 && c->id[0]) {
        r = strbuf_appendf(sb, "<p>Sandbox <code>%s</code>%s%s</p>\n", c->id,
                           with_port ? ", port " : "", with_port ? port : "");
    }
    if (r >= 0) {
        r = strbuf_appends(sb, "</body></html>\n");
    }
    return r;
}

static bool secret_equal(struct http1_span got, const char *want)
{
    size_t n = strlen(want);
    unsigned char diff = got.n != n;

    /* Constant time in the length of the expected token. */
    for (size_t i = 0; i < n; i++) {
        diff |= (unsigned char)(want[i] ^ (got.p && i < got.n ? got.p[i] : 0));
    }
    return diff == 0;
}

/* ---- lifetime ---- */

static void conn_free(struct ingress_conn *c)
{
    struct ingress *ig = c->ig;

    if (c->prev) {
        c->prev->next = c->next;
    } else {
        ig->conns = c->next;
    }
    if (c->next) {
        c->next->prev = c->prev;
    }
    ig->n_conns--;
    listener_release(ig->listener, c->has_peer ? (struct sockaddr *)&c->peer : NULL);
    if (c->client) {
        bufferevent_free(c->client);
    }
    if (c->upstream) {
        bufferevent_free(c->upstream);
    }
    relay_free(c->relay);
    if (c->timer) {
        event_free(c->timer);
    }
    if (c->reaper) {
        event_free(c->reaper);
    }
    headbuf_reset(&c->head);
    strbuf_release(&c->forward);
    free(c);
}

static void reap_cb(evutil_socket_t fd, short what, void *userdata)
{
    conn_free(userdata);
}

/* Stops all I/O now; the memory goes in reap_cb(), outside any callback of c. */
static void conn_close(struct ingress_conn *c, const char *why)
{
    if (c->state == CONN_CLOSED) {
        return;
    }
    if (why) {
        log_sandbox_debug(c->id[0] ? c->id : NULL, "ingress connection closed: %s", why);
    }
    c->state = CONN_CLOSED;
    event_del(c->timer);
    event_util_close_later(c->client, c->upstream, c->reaper);
}

/*
 * Ends the client's write side. Over TLS a close_notify goes first (best
 * effort: the output is drained, so it rarely has to wait), so clients
 * see a clean end of a close-delimited body rather than a truncation.
 */
static void client_shutdown_write(struct ingress_conn *c)
{
    if (c->ig->tls) {
        SSL *ssl = bufferevent_openssl_get_ssl(c->client);
        if (ssl) {
            (void)SSL_shutdown(ssl);
        }
    }
    (void)shutdown(bufferevent_getfd(c->client), SHUT_WR);
}

/* ---- our own responses ---- */

static void reply_read_cb(struct bufferevent *bev, void *userdata)
{
    struct evbuffer *in = bufferevent_get_input(bev);
    evbuffer_drain(in, evbuffer_get_length(in));
}

static void reply_write_cb(struct bufferevent *bev, void *userdata)
{
    struct ingress_conn *c = userdata;

    if (c->client_shut) {
        return;
    }
    /* All out: stop sending, and read what the client still sends for a moment. */
    c->client_shut = true;
    client_shutdown_write(c);
    if (c->client_eof) {
        conn_close(c, NULL);
        return;
    }
    timer_set(c, INGRESS_LINGER_SEC);
}

static void reply_event_cb(struct bufferevent *bev, short what, void *userdata)
{
    struct ingress_conn *c = userdata;

    /* A client that half-closed after its request still gets the whole answer. */
    if ((what & BEV_EVENT_EOF) && !c->client_shut) {
        c->client_eof = true;
        bufferevent_disable(bev, EV_READ);
        return;
    }
    conn_close(c, NULL);
}

/*
 * Answers the client ourselves and closes: the upstream, if any, is shut at
 * once. with_port adds the "port" field (port-closed errors).
 */
static void conn_reply(struct ingress_conn *c, int status, const char *message, bool with_port,
                       const char *extra_header)
{
    struct strbuf body = STRBUF_INIT, head = STRBUF_INIT;
    int r;

    log_sandbox_debug(c->id[0] ? c->id : NULL, "ingress answers %d: %s", status, message);
    if (c->upstream) {
        event_util_bev_stop(c->upstream);
        (void)shutdown(bufferevent_getfd(c->upstream), SHUT_RDWR);
    }
    c->state = CONN_REPLY;
    c->sent_response = true;
    r = error_body(c, status, message, with_port, &body);
    if (r >= 0) {
        r = strbuf_appendf(&head,
                           "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                           "Cache-Control: no-store\r\n%sConnection: close\r\n\r\n",
                           status, reason_phrase(status),
                           c->html ? "text/html; charset=utf-8" : "application/json; charset=utf-8",
                           body.len, extra_header ? extra_header : "");
    }
    struct evbuffer *in = bufferevent_get_input(c->client);
    struct evbuffer *out = bufferevent_get_output(c->client);
    /*
     * Pipelined requests after this one are dropped (we close). The output
     * is kept: on a kept-alive connection it may still hold the previous
     * response's tail, and never holds any of this exchange's.
     */
    evbuffer_drain(in, evbuffer_get_length(in));
    if (r < 0 || evbuffer_add(out, head.buf, head.len) < 0 ||
        evbuffer_add(out, body.buf, body.len) < 0) {
        strbuf_release(&body);
        strbuf_release(&head);
        conn_close(c, "out of memory");
        return;
    }
    strbuf_release(&body);
    strbuf_release(&head);
    bufferevent_setcb(c->client, reply_read_cb, reply_write_cb, reply_event_cb, c);
    bufferevent_setwatermark(c->client, EV_READ, 0, 0);
    bufferevent_setwatermark(c->client, EV_WRITE, 0, 0);
    bufferevent_enable(c->client, EV_READ | EV_WRITE);
    timer_set(c, INGRESS_REPLY_TIMEOUT_SEC);
}

static void reply_not_found(struct ingress_conn *c)
{
    conn_reply(c, 502, "The sandbox was not found", false, NULL);
}

static void reply_port_closed(struct ingress_conn *c)
{
    conn_reply(c, 502, "The sandbox is running but port is not open", true, NULL);
}

/* ---- proxying ---- */

static void conn_touch(struct ingress_conn *c)
{
    c->last_active = now_monotonic();
}

static void shut_upstream(struct ingress_conn *c)
{
    if (!c->upstream_shut) {
        c->upstream_shut = true;
        (void)shutdown(bufferevent_getfd(c->upstream), SHUT_WR);
    }
    if (c->client_shut) {
        conn_close(c, "done");
    }
}

/*
 * The response is complete and the client has nothing more for the sandbox:
 * drain what it still sends for a moment, then close (a close with unread
 * input would reset the connection and could destroy the response).
 */
static void check_linger(struct ingress_conn *c)
{
    if (c->client_shut && !c->lingering && c->up == UP_DISCARD) {
        c->lingering = true;
        timer_set(c, INGRESS_LINGER_SEC);
    }
}

/* The response is complete: shut the client's write side. */
static void shut_client(struct ingress_conn *c)
{
    if (!c->client_shut) {
        c->client_shut = true;
        client_shutdown_write(c);
    }
    if (c->upstream_shut) {
        conn_close(c, "done");
        return;
    }
    check_linger(c);
}

static void up_check_eof(struct ingress_conn *c)
{
    if (c->state == CONN_PROXY && c->client_eof && c->up != UP_HOLD &&
        evbuffer_get_length(bufferevent_get_output(c->upstream)) == 0) {
        shut_upstream(c);
    }
}

static void down_check_eof(struct ingress_conn *c)
{
    if (c->state == CONN_PROXY && c->upstream_eof && c->down != DOWN_HEAD &&
        evbuffer_get_length(bufferevent_get_output(c->client)) == 0) {
        shut_client(c);
    }
}

/* Client bytes after the head, by mode. */
static void up_pump(struct ingress_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->client);
    struct evbuffer *out = bufferevent_get_output(c->upstream);

    conn_touch(c);
    switch (c->up) {
    case UP_HOLD:
        return;
    case UP_NEXT:
        /* A pipelined request waits unread (bounded by the read watermark); a client that
         * went away ends the wait: no further request comes, so the sandbox sees the EOF
         * (a stream it serves ends) instead of holding the tunnel until it answers. */
        if (!c->client_eof) {
            return;
        }
        c->keep_alive = false;
        c->up = UP_DISCARD;
        evbuffer_drain(in, evbuffer_get_length(in));
        break;
    case UP_RAW:
        if (evbuffer_add_buffer(out, in) < 0) {
            conn_close(c, "out of memory");
            return;
        }
        break;
    case UP_BODY:
        while (!c->body.done && evbuffer_get_length(in) > 0) {
            struct evbuffer_iovec v;
            if (evbuffer_peek(in, -1, NULL, &v, 1) < 1) {
                break;
            }
            ssize_t n = http1_body_feed(&c->body, v.iov_base, v.iov_len, NULL, NULL);
            if (n < 0) {
                if (!c->sent_response) {
                    conn_reply(c, 400, "malformed chunked request body", false, NULL);
                } else {
                    conn_close(c, "malformed chunked request body");
                }
                return;
            }
            if (evbuffer_remove_buffer(in, out, (size_t)n) != (int)n) {
                conn_close(c, "out of memory");
                return;
            }
        }
        if (!c->body.done) {
            break;
        }
        if (c->keep_alive) {
            /* What follows is the next request: left in the buffer (at most a head's worth
             * is read) until this response is done; reading goes on so an EOF is seen. */
            c->up = UP_NEXT;
            bufferevent_setwatermark(c->client, EV_READ, 0, HTTP1_HEAD_MAX);
            return;
        }
        /* What follows the body is not for the sandbox. */
        c->up = UP_DISCARD;
        check_linger(c);
        __attribute__((fallthrough));
    case UP_DISCARD:
        evbuffer_drain(in, evbuffer_get_length(in));
        break;
    }
    if (evbuffer_get_length(out) >= INGRESS_HIGH_WATER) {
        bufferevent_disable(c->client, EV_READ);
    }
    up_check_eof(c);
}

/*
 * The response is complete: whatever else the sandbox sends is not for this
 * client, and a body still being uploaded is no longer wanted.
 */
static void next_request(struct ingress_conn *c);

static void response_done(struct ingress_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->upstream);
    struct evbuffer *out = bufferevent_get_output(c->upstream);

    if (c->keep_alive && c->up == UP_NEXT) {
        next_request(c);
        return;
    }
    if (c->up == UP_NEXT) {
        c->up = UP_DISCARD;
    }
    c->down = DOWN_DONE;
    c->upstream_eof = true;
    event_util_bev_stop(c->upstream);
    evbuffer_drain(in, evbuffer_get_length(in));
    evbuffer_drain(out, evbuffer_get_length(out));
    (void)shutdown(bufferevent_getfd(c->upstream), SHUT_RDWR);
    if (c->up == UP_BODY) {
        c->up = UP_DISCARD;
    }
    if (c->up == UP_DISCARD && !c->client_eof) {
        bufferevent_enable(c->client, EV_READ);
    }
}

/* The final (non-1xx) response head is complete in c->head. */
static int down_final_head(struct ingress_conn *c, const struct http1_response *resp)
{
    struct evbuffer *out = bufferevent_get_output(c->client);
    struct strbuf sb = STRBUF_INIT;
    int r;

    if (resp->status == 101) {
        r = evbuffer_add(out, c->head.buf, resp->head_len) < 0 ? -ENOMEM : 0;
        c->up = UP_RAW;
        c->down = DOWN_RAW;
    } else {
        /* A body that ends at EOF can only end the connection. */
        if (resp->until_eof && !c->head_request && resp->status >= 200 && resp->status != 204 &&
            resp->status != 304) {
            c->keep_alive = false;
        }
        r = http1_rewrite_response(c->head.buf, resp, c->keep_alive ? "keep-alive" : "close", &sb);
        if (r >= 0 && evbuffer_add(out, sb.buf, sb.len) < 0) {
            r = -ENOMEM;
        }
        strbuf_release(&sb);
        if (c->up == UP_HOLD) {
            c->up = UP_DISCARD; /* an upgrade request has no body */
        }
        if (c->up == UP_NEXT && !c->keep_alive) {
            c->up = UP_DISCARD;
        }
        http1_body_init_response(&c->resp_body, resp, c->head_request);
        c->down = DOWN_BODY;
    }
    c->sent_response = true;
    if (r >= 0 && !c->client_eof) {
        bufferevent_enable(c->client, EV_READ);
    }
    return r;
}

static void relay_done(struct relay *r, int error, void *userdata)
{
    conn_close(userdata, error == 0            ? "done"
                         : error == -ETIMEDOUT ? "idle timeout"
                                               : "connection error");
}

/* Pushes everything buffered in b to the relay's side `to`, in order. */
static int push_evbuffer(struct relay *r, int to, struct evbuffer *b)
{
    size_t n = evbuffer_get_length(b);
    return n == 0 ? 0 : relay_push(r, to, evbuffer_pullup(b, (ssize_t)n), n);
}

/*
 * After 101 the exchange is plain bytes both ways: the shared relay
 * (splice, half-close, bounded) takes both sockets over. What libevent
 * still buffers goes first, in order: toward the client its output (the
 * 101 head) then what the sandbox sent after the head; toward the sandbox
 * its output then what the client sent after its request.
 */
static void start_relay(struct ingress_conn *c)
{
    int cfd = fcntl(bufferevent_getfd(c->client), F_DUPFD_CLOEXEC, 3);
    int ufd = fcntl(bufferevent_getfd(c->upstream), F_DUPFD_CLOEXEC, 3);
    int r = cfd < 0 || ufd < 0 ? -errno : 0;

    if (r >= 0) {
        r = relay_new(c->ig->base, cfd, ufd, INGRESS_IDLE_TIMEOUT_SEC, relay_done, c, &c->relay);
    }
    if (r < 0) {
        close_safe(cfd);
        close_safe(ufd);
        conn_close(c, "cannot start the relay");
        return;
    }
    r = push_evbuffer(c->relay, RELAY_A, bufferevent_get_output(c->client));
    if (r >= 0) {
        r = push_evbuffer(c->relay, RELAY_A, bufferevent_get_input(c->upstream));
    }
    if (r >= 0) {
        r = push_evbuffer(c->relay, RELAY_B, bufferevent_get_output(c->upstream));
    }
    if (r >= 0) {
        r = push_evbuffer(c->relay, RELAY_B, bufferevent_get_input(c->client));
    }
    if (c->client_eof) {
        relay_set_eof(c->relay, RELAY_A);
    }
    if (c->upstream_eof) {
        relay_set_eof(c->relay, RELAY_B);
    }
    /* The originals close with their bufferevents; the relay has the duplicates. */
    event_util_bev_stop(c->client);
    event_util_bev_stop(c->upstream);
    bufferevent_free(c->client);
    bufferevent_free(c->upstream);
    c->client = c->upstream = NULL;
    c->state = CONN_RELAY;
    event_del(c->timer);
    if (r < 0 || relay_start(c->relay) < 0) {
        conn_close(c, "out of memory");
    }
}

/* Sandbox bytes, by mode. */
static void down_pump(struct ingress_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->upstream);
    struct evbuffer *out = bufferevent_get_output(c->client);
    struct http1_response resp;

    conn_touch(c);
    while (c->down == DOWN_HEAD && evbuffer_get_length(in) > 0) {
        if (headbuf_fill(&c->head, in) < 0) {
            conn_close(c, "out of memory");
            return;
        }
        size_t end = http1_find_end(c->head.buf, c->head.len, &c->head.scan);
        if (end == 0) {
            if (c->head.len < HTTP1_HEAD_MAX) {
                return;
            }
            log_sandbox_debug(c->id, "response head from port %u is too long", (unsigned)c->port);
        }
        if (end == 0 || http1_parse_response(c->head.buf, end, &resp) < 0 ||
            (resp.status == 101 && !c->upgrade)) {
            if (!c->sent_response) {
                conn_reply(c, 502, "The sandbox sent an invalid HTTP response", false, NULL);
            } else {
                conn_close(c, "invalid response from the sandbox");
            }
            return;
        }
        int r = 0;
        if (resp.status >= 200 || resp.status == 101) {
            r = down_final_head(c, &resp);
        } else {
            /* 100 Continue, 103 Early Hints: passed on, the real head follows. */
            r = evbuffer_add(out, c->head.buf, end) < 0 ? -ENOMEM : 0;
            c->sent_response = true;
        }
        if (r >= 0) {
            r = headbuf_return_rest(&c->head, end, in);
        }
        if (r < 0) {
            conn_close(c, "out of memory");
            return;
        }
        if (c->down != DOWN_HEAD) {
            /* Client bytes held or discarded so far can move now. */
            up_pump(c);
            if (c->state != CONN_PROXY) {
                return;
            }
        }
    }
    if (c->down == DOWN_RAW && !c->ig->tls) {
        start_relay(c);
        return;
    }
    /*
     * Over TLS the client's bytes are records, not the stream: no splice.
     * The upgraded connection stays on the bufferevents, copied with the
     * same watermarks and idle timer as a body.
     */
    if (c->down == DOWN_RAW && evbuffer_add_buffer(out, in) < 0) {
        conn_close(c, "out of memory");
        return;
    }
    while (c->down == DOWN_BODY && !c->resp_body.done && evbuffer_get_length(in) > 0) {
        struct evbuffer_iovec v;
        if (evbuffer_peek(in, -1, NULL, &v, 1) < 1) {
            break;
        }
        ssize_t n = http1_body_feed(&c->resp_body, v.iov_base, v.iov_len, NULL, NULL);
        if (n < 0) {
            conn_close(c, "malformed chunked response body");
            return;
        }
        if (evbuffer_remove_buffer(in, out, (size_t)n) != (int)n) {
            conn_close(c, "out of memory");
            return;
        }
    }
    if (c->down == DOWN_BODY && c->resp_body.done) {
        response_done(c);
        if (c->state != CONN_PROXY) {
            return; /* kept alive: the upstream is gone, the next request is being read */
        }
    }
    if (c->down != DOWN_DONE && evbuffer_get_length(out) >= INGRESS_HIGH_WATER) {
        bufferevent_disable(c->upstream, EV_READ);
    }
    down_check_eof(c);
}

static void client_read_cb(struct bufferevent *bev, void *userdata)
{
    up_pump(userdata);
}

static void upstream_read_cb(struct bufferevent *bev, void *userdata)
{
    down_pump(userdata);
}

/* The client's output drained below the low-water mark. */
static void client_write_cb(struct bufferevent *bev, void *userdata)
{
    struct ingress_conn *c = userdata;

    conn_touch(c);
    if (!c->upstream_eof) {
        bufferevent_enable(c->upstream, EV_READ);
    }
    down_check_eof(c);
}

static void upstream_write_cb(struct bufferevent *bev, void *userdata)
{
    struct ingress_conn *c = userdata;

    conn_touch(c);
    if (!c->client_eof && c->up != UP_HOLD) {
        bufferevent_enable(c->client, EV_READ);
    }
    up_check_eof(c);
}

static void client_event_cb(struct bufferevent *bev, short what, void *userdata)
{
    struct ingress_conn *c = userdata;

    if (!(what & BEV_EVENT_EOF)) {
        conn_close(c, "client connection error");
        return;
    }
    c->client_eof = true;
    if (c->lingering) {
        conn_close(c, "done");
        return;
    }
    if (c->state == CONN_PROXY && !c->sent_response) {
        timer_set(c, INGRESS_ABANDONED_SEC); /* see timer_cb() */
    }
    up_pump(c);
}

static void upstream_event_cb(struct bufferevent *bev, short what, void *userdata)
{
    struct ingress_conn *c = userdata;

    if (!(what & BEV_EVENT_EOF)) {
        conn_close(c, "sandbox connection error");
        return;
    }
    c->upstream_eof = true;
    if (c->down == DOWN_HEAD) {
        if (!c->sent_response) {
            conn_reply(c, 502, "The sandbox closed the connection without a response", false, NULL);
        } else {
            conn_close(c, "sandbox closed the connection inside a response head");
        }
        return;
    }
    down_pump(c);
}

static void start_proxy(struct ingress_conn *c)
{
    struct evbuffer *up_out = bufferevent_get_output(c->upstream);

    c->state = CONN_PROXY;
    c->up = c->upgrade ? UP_HOLD : !c->body.done ? UP_BODY : c->keep_alive ? UP_NEXT : UP_DISCARD;
    c->down = DOWN_HEAD;
    if (evbuffer_add(up_out, c->forward.buf, c->forward.len) < 0) {
        conn_close(c, "out of memory");
        return;
    }
    strbuf_release(&c->forward);
    log_sandbox_debug(c->id, "ingress connected to port %u", (unsigned)c->port);

    bufferevent_setcb(c->client, client_read_cb, client_write_cb, client_event_cb, c);
    bufferevent_setcb(c->upstream, upstream_read_cb, upstream_write_cb, upstream_event_cb, c);
    bufferevent_setwatermark(c->client, EV_READ, 0, c->up == UP_NEXT ? HTTP1_HEAD_MAX : 0);
    bufferevent_setwatermark(c->upstream, EV_READ, 0, 0);
    bufferevent_setwatermark(c->client, EV_WRITE, INGRESS_HIGH_WATER / 2, 0);
    bufferevent_setwatermark(c->upstream, EV_WRITE, INGRESS_HIGH_WATER / 2, 0);
    bufferevent_enable(c->upstream, EV_READ | EV_WRITE);
    bufferevent_enable(c->client, EV_WRITE);
    if (c->up != UP_HOLD) {
        bufferevent_enable(c->client, EV_READ);
    }
    conn_touch(c);
    timer_set(c, INGRESS_IDLE_TIMEOUT_SEC);

    /* Body bytes that came with the head, and anything after the node's OK. */
    up_pump(c);
    if (c->state == CONN_PROXY && evbuffer_get_length(bufferevent_get_input(c->upstream)) > 0) {
        down_pump(c);
    }
}

/* ---- the tunnel handshake ---- */

static void tunnel_read_cb(struct bufferevent *bev, void *userdata)
{
    struct ingress_conn *c = userdata;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t n;
    char *line = evbuffer_readln(in, &n, EVBUFFER_EOL_LF);

    if (!line) {
        if (evbuffer_get_length(in) >= TUNNEL_PROTO_LINE_MAX) {
            conn_reply(c, 502, "invalid answer from the sandbox's node", false, NULL);
        }
        return;
    }
    int status = 0;
    if (tunnel_proto_parse_reply(line, n, &status, NULL, NULL) == 0 && status == 0) {
        free(line);
        start_proxy(c);
        return;
    }
    log_sandbox_debug(c->id, "node refused the tunnel to port %u: %s", (unsigned)c->port, line);
    if (status == 404) {
        reply_not_found(c);
    } else if (status == 502 || status == 504) {
        reply_port_closed(c);
    } else if (status == 503) {
        conn_reply(c, 503, "The sandbox's node is busy", false, "Retry-After: 1\r\n");
    } else {
        log_sandbox_warning(c->id, "unexpected tunnel answer '%.64s'", line);
        conn_reply(c, 502, "The sandbox is not reachable", false, NULL);
    }
    free(line);
}

static void tunnel_event_cb(struct bufferevent *bev, short what, void *userdata)
{
    conn_reply(userdata, 502, "The sandbox is not reachable", false, NULL);
}

static int open_tunnel(struct ingress_conn *c, const struct ingress_target *target)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t n = strnlen(target->tunnel_socket, sizeof(target->tunnel_socket));
    int fd = -EBADF;

    if (n == 0 || n >= sizeof(sa.sun_path)) {
        return -EINVAL;
    }
    memcpy(sa.sun_path, target->tunnel_socket, n);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return -errno;
    }
    /* A Unix connect completes at once, or fails (EAGAIN: the node's backlog is full). */
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int r = -errno;
        close_safe(fd);
        return r;
    }
    c->upstream = bufferevent_socket_new(c->ig->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!c->upstream) {
        close_safe(fd);
        return -ENOMEM;
    }
    char line[TUNNEL_PROTO_LINE_MAX];
    int len = tunnel_proto_format_request(line, sizeof(line), c->id, c->port);
    if (len < 0) {
        return len;
    }
    if (evbuffer_add(bufferevent_get_output(c->upstream), line, (size_t)len) < 0) {
        return -ENOMEM;
    }
    bufferevent_setcb(c->upstream, tunnel_read_cb, NULL, tunnel_event_cb, c);
    bufferevent_setwatermark(c->upstream, EV_READ, 0, TUNNEL_PROTO_LINE_MAX);
    if (bufferevent_enable(c->upstream, EV_READ | EV_WRITE) < 0) {
        return -ENOMEM;
    }
    c->state = CONN_TUNNEL;
    timer_set(c, INGRESS_TUNNEL_TIMEOUT_SEC);
    return 0;
}

/* ---- the request head ---- */

/*
 * envd routes only the platform may call (e2b-compat.md 6.6). The path is
 * canonical by now (http1_path_is_canonical()), so "//x/init", "/./init" and
 * "/%69nit" never get here; the match ignores case and covers sub-paths, so
 * "/INIT" and "/init/" are blocked too whatever envd's router makes of them.
 */
static bool envd_internal_path(const struct ingress_head_request *req)
{
    static const char *const internal[] = {
        "/init", "/freeze", "/unfreeze", "/fsfreeze", "/fsthaw", "/collapse", "/upgrade",
    };
    struct http1_span path = req->http.path;

    for (size_t i = 0; i < ARRAY_SIZE(internal); i++) {
        size_t n = strlen(internal[i]);
        if (path.n >= n && strncasecmp(path.p, internal[i], n) == 0 &&
            (path.n == n || path.p[n] == '/')) {
            return true;
        }
    }
    return false;
}

/* Requests envd authenticates itself (e2b-compat.md 5.1). */
static bool envd_token_exempt(const struct ingress_head_request *req)
{
    if (http1_span_eq(req->http.method, "GET") && http1_span_eq(req->http.path, "/health")) {
        return true;
    }
    return http1_span_eq(req->http.path, "/files") && ingress_head_query_has(req, "signature");
}

/* Connections past their head that target sandbox id (this one included once routed). */
static unsigned sandbox_conns(const struct ingress *ig, const char *id)
{
    unsigned n = 0;
    for (const struct ingress_conn *k = ig->conns; k; k = k->next) {
        if (k->state != CONN_HEAD && k->state != CONN_CLOSED && k->state != CONN_REPLY &&
            strcmp(k->id, id) == 0) {
            n++;
        }
    }
    return n;
}

static unsigned max_per_sandbox(const struct ingress *ig)
{
    return MAX(listener_max_conns(ig->listener) / 8, (unsigned)INGRESS_MAX_PER_SANDBOX_MIN);
}

static unsigned sandbox_held(const struct ingress *ig, const char *id)
{
    unsigned n = 0;
    for (const struct ingress_conn *k = ig->conns; k; k = k->next) {
        n += k->state == CONN_HOLD && strcmp(k->id, id) == 0;
    }
    return n;
}

/* Waits for a sandbox being woken (auto-resume): timer_cb() looks it up again. */
static void hold(struct ingress_conn *c, size_t head_len)
{
    struct timeval tv = { 0, INGRESS_HOLD_POLL_MSEC * 1000 };

    if (c->state != CONN_HOLD) {
        if (sandbox_held(c->ig, c->id) >= INGRESS_HOLD_MAX) {
            conn_reply(c, 503, "too many requests waiting for this sandbox to resume", false,
                       "Retry-After: 1\r\n");
            return;
        }
        c->state = CONN_HOLD;
        c->hold_len = head_len;
        c->hold_until = now_monotonic() + INGRESS_HOLD_SEC * USEC_PER_SEC;
        bufferevent_disable(c->client, EV_READ); /* the body waits in the kernel */
    }
    if (now_monotonic() >= c->hold_until) {
        conn_reply(c, 504, "The sandbox did not resume in time", false, NULL);
        return;
    }
    evtimer_add(c->timer, &tv);
}

static void head_complete(struct ingress_conn *c, size_t head_len)
{
    struct ingress_head_request req;
    struct ingress_target target = { 0 };
    struct evbuffer *in = bufferevent_get_input(c->client);
    const char *error = NULL;
    int r;

    r = ingress_head_parse_request(c->head.buf, head_len, &req);
    if (r < 0) {
        int status = r == -E2BIG ? 431 : r == -EPROTONOSUPPORT ? 505 : r == -EOPNOTSUPP ? 501 : 400;
        conn_reply(c, status,
                   status == 431   ? "request header fields too large"
                   : status == 505 ? "HTTP version not supported"
                   : status == 501 ? "transfer coding not supported"
                                   : "malformed request",
                   false, NULL);
        return;
    }
    c->html = ingress_head_prefers_html(&req);
    r = ingress_head_route(&req, c->ig->domain, c->id, &c->port, &error);
    if (r < 0) {
        c->id[0] = '\0';
        conn_reply(c, 400, error, false, NULL);
        return;
    }
    r = c->ig->lookup(c->ig->userdata, c->id, &target);
    if (r == -ENOENT || r == -EAGAIN) {
        reply_not_found(c);
        return;
    }
    if (r == -EINPROGRESS) {
        hold(c, head_len);
        return;
    }
    if (r == -EHOSTDOWN) {
        /* E2B's proxy answer for a paused sandbox: traffic does not resume it. */
        c->paused_reply = true;
        conn_reply(c, 409, "The sandbox is paused", false, NULL);
        return;
    }
    if (r < 0) {
        log_sandbox_warning_errno(c->id, r, "cannot look up sandbox: %m");
        conn_reply(c, 502, "The sandbox is not reachable", false, NULL);
        return;
    }
    target.access_token[sizeof(target.access_token) - 1] = '\0';
    /* One sandbox (say, a guest that accepts and never answers) cannot take every slot. */
    if (sandbox_conns(c->ig, c->id) >= max_per_sandbox(c->ig)) {
        explicit_bzero(target.access_token, sizeof(target.access_token));
        conn_reply(c, 503, "too many connections to this sandbox", false, "Retry-After: 1\r\n");
        return;
    }
    if (c->port == ENVD_PORT) {
        /* Route on the path envd will see: one spelling only (security.md, ingress). */
        if (!http1_path_is_canonical(req.http.path)) {
            conn_reply(c, 400, "non-canonical request path", false, NULL);
            return;
        }
        if (envd_internal_path(&req)) {
            conn_reply(c, 403, "this envd route is internal to the platform", false, NULL);
            return;
        }
        /* What passes without the token gets a small body: none for /health. */
        if (target.has_token && envd_token_exempt(&req) &&
            (req.http.chunked ||
             req.http.content_length >
                 (http1_span_eq(req.http.path, "/health") ? 0 : INGRESS_UNAUTH_BODY_MAX))) {
            explicit_bzero(target.access_token, sizeof(target.access_token));
            conn_reply(c, req.http.chunked ? 411 : 413,
                       req.http.chunked ? "a length is required without an access token"
                                        : "request body too large without an access token",
                       false, NULL);
            return;
        }
        if (target.has_token && !envd_token_exempt(&req) &&
            !secret_equal(req.access_token, target.access_token)) {
            conn_reply(c, 401, "unauthorized access, please provide a valid access token", false,
                       NULL);
            return;
        }
    }
    explicit_bzero(target.access_token, sizeof(target.access_token));
    /* Private user ports (E2B allowPublicTraffic: false); envd has its own token above. */
    if (c->port != ENVD_PORT && target.private_traffic) {
        target.traffic_token[sizeof(target.traffic_token) - 1] = '\0';
        bool ok = req.traffic_token.p && target.traffic_token[0] &&
                  secret_equal(req.traffic_token, target.traffic_token);
        explicit_bzero(target.traffic_token, sizeof(target.traffic_token));
        if (!ok) {
            conn_reply(
                c, 403,
                !req.traffic_token.p || req.traffic_token.n == 0
                    ? "Sandbox is secured with traffic access token. Token header "
                      "'" INGRESS_TRAFFIC_TOKEN_HEADER "' is missing"
                    : "Sandbox is secured with traffic access token. Provided token is invalid.",
                false, NULL);
            return;
        }
    }
    explicit_bzero(target.traffic_token, sizeof(target.traffic_token));

    c->upgrade = req.http.upgrade && !req.http.chunked && req.http.content_length == 0;
    c->head_request = http1_span_eq(req.http.method, "HEAD");
    /* HTTP/1.1 clients only: a 1.0 client could get a chunked body it cannot frame. */
    c->keep_alive = req.http.keep_alive && !req.http.http10 && !c->upgrade;
    req.http.upgrade = c->upgrade; /* an upgrade with a body is forwarded as a plain request */
    http1_body_init_request(&c->body, &req.http);
    strbuf_init(&c->forward, HTTP1_HEAD_MAX + 1024); /* + CRLFs and Connection */
    r = http1_rewrite_request(c->head.buf, &req.http, &c->forward);
    if (r >= 0) {
        r = headbuf_return_rest(&c->head, head_len, in);
    }
    if (r < 0) {
        conn_close(c, "out of memory");
        return;
    }
    /* Body bytes wait in the kernel until the tunnel is open. */
    bufferevent_disable(c->client, EV_READ);
    r = open_tunnel(c, &target);
    if (r < 0) {
        log_sandbox_warning_errno(c->id, r, "cannot open tunnel '%s': %m", target.tunnel_socket);
        conn_reply(c, 502, "The sandbox is not reachable", false, NULL);
    }
}

static void head_read_cb(struct bufferevent *bev, void *userdata)
{
    struct ingress_conn *c = userdata;

    if (c->state != CONN_HEAD) {
        return;
    }
    if (headbuf_fill(&c->head, bufferevent_get_input(bev)) < 0) {
        conn_close(c, "out of memory");
        return;
    }
    if (!c->head_started && c->head.len > 0) {
        /* A kept-alive connection waited up to INGRESS_KEEPALIVE_SEC; the head itself gets less. */
        c->head_started = true;
        timer_set(c, INGRESS_HEAD_TIMEOUT_SEC);
    }
    size_t end = http1_find_end(c->head.buf, c->head.len, &c->head.scan);
    if (end > 0) {
        head_complete(c, end);
    } else if (c->head.len >= HTTP1_HEAD_MAX) {
        conn_reply(c, 431, "request header fields too large", false, NULL);
    }
}

static void drained_write_cb(struct bufferevent *bev, void *userdata)
{
    conn_close(userdata, "done");
}

static void head_event_cb(struct bufferevent *bev, short what, void *userdata)
{
    struct ingress_conn *c = userdata;

    if (what == BEV_EVENT_CONNECTED) {
        return; /* TLS: the handshake is done; the head comes next */
    }
    /* EOF between kept-alive requests: the previous response may still be flushing. */
    if ((what & BEV_EVENT_EOF) && c->head.len == 0 &&
        evbuffer_get_length(bufferevent_get_output(bev)) > 0) {
        c->client_eof = true;
        bufferevent_disable(bev, EV_READ);
        bufferevent_setcb(bev, NULL, drained_write_cb, reply_event_cb, c);
        bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
        return;
    }
    conn_close(c, c->requests > 0 && c->head.len == 0
                      ? "done"
                      : "client went away before its request was complete");
}

/*
 * The response is complete and the client asked to keep the connection:
 * the tunnel closes (one upstream connection per request, so routing,
 * lookup and the token are checked again for every request) and the
 * connection goes back to reading a head. Pipelined bytes already read
 * are processed from the loop, not from here (we are inside down_pump()).
 */
static void next_request(struct ingress_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->client);

    event_util_bev_stop(c->upstream);
    bufferevent_free(c->upstream);
    c->upstream = NULL;
    headbuf_reset(&c->head);
    strbuf_release(&c->forward);
    c->state = CONN_HEAD;
    c->up = UP_HOLD;
    c->down = DOWN_HEAD;
    c->id[0] = '\0';
    c->port = 0;
    c->html = c->upgrade = c->sent_response = c->head_request = c->keep_alive = false;
    c->head_started = false;
    c->upstream_eof = c->upstream_shut = false;
    c->requests++;
    bufferevent_setcb(c->client, head_read_cb, NULL, head_event_cb, c);
    bufferevent_setwatermark(c->client, EV_READ, 0, HTTP1_HEAD_MAX);
    bufferevent_setwatermark(c->client, EV_WRITE, 0, 0);
    bufferevent_enable(c->client, EV_READ | EV_WRITE);
    timer_set(c, INGRESS_KEEPALIVE_SEC);
    if (evbuffer_get_length(in) > 0) {
        bufferevent_trigger(c->client, EV_READ,
                            BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
    }
}

/* ---- timers ---- */

static void timer_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct ingress_conn *c = userdata;

    switch (c->state) {
    case CONN_HEAD:
        conn_close(c, "request head timeout");
        break;
    case CONN_HOLD:
        head_complete(c, c->hold_len); /* looks it up again: held, routed or answered */
        break;
    case CONN_TUNNEL:
        conn_reply(c, 502, "The sandbox is not reachable", false, NULL);
        break;
    case CONN_PROXY: {
        usec_t idle = now_monotonic() - c->last_active;
        bool abandoned = c->client_eof && !c->sent_response;
        usec_t limit =
            (abandoned ? INGRESS_ABANDONED_SEC : INGRESS_IDLE_TIMEOUT_SEC) * USEC_PER_SEC;
        if (c->lingering) {
            conn_close(c, "done");
        } else if (idle >= limit) {
            conn_close(c, abandoned ? "client left before the response began" : "idle timeout");
        } else {
            struct timeval tv = { (time_t)((limit - idle) / USEC_PER_SEC) + 1, 0 };
            evtimer_add(c->timer, &tv);
        }
        break;
    }
    case CONN_RELAY: /* the relay has its own idle timeout */
        break;
    case CONN_REPLY:
    case CONN_CLOSED:
        conn_close(c, NULL);
        break;
    }
}

/* ---- listener ---- */

/* A connection under the listener's caps (listener.h: total from RLIMIT_NOFILE, per peer). */
static void accept_cb(struct listener *l, int fd, const struct sockaddr *sa, socklen_t socklen,
                      void *userdata)
{
    struct ingress *ig = userdata;
    struct ingress_conn *c;
    int one = 1;

    c = calloc(1, sizeof(*c));
    if (!c) {
        close_safe(fd);
        listener_release(l, sa);
        return;
    }
    /* Stream events are small and must not wait for Nagle. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    *c = (struct ingress_conn){ .ig = ig, .state = CONN_HEAD };
    if (sa && socklen <= sizeof(c->peer)) {
        memcpy(&c->peer, sa, socklen);
        c->has_peer = true;
    }
    if (ig->tls) {
        SSL *ssl = SSL_new(ig->tls);
        c->client = ssl ? bufferevent_openssl_socket_new(
                              ig->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE)
                        : NULL;
        if (!c->client) {
            SSL_free(ssl);
        } else {
            /* A client that closes without close_notify has still sent whole requests. */
            bufferevent_openssl_set_allow_dirty_shutdown(c->client, 1);
        }
    } else {
        c->client = bufferevent_socket_new(ig->base, fd, BEV_OPT_CLOSE_ON_FREE);
    }
    if (!c->client) {
        close_safe(fd);
    }
    c->timer = evtimer_new(ig->base, timer_cb, c);
    c->reaper = evtimer_new(ig->base, reap_cb, c);
    c->next = ig->conns;
    if (ig->conns) {
        ig->conns->prev = c;
    }
    ig->conns = c;
    ig->n_conns++;
    if (!c->client || !c->timer || !c->reaper) {
        conn_free(c);
        return;
    }
    bufferevent_setcb(c->client, head_read_cb, NULL, head_event_cb, c);
    /* libevent reads no further ahead than one head. */
    bufferevent_setwatermark(c->client, EV_READ, 0, HTTP1_HEAD_MAX);
    if (bufferevent_enable(c->client, EV_READ) < 0) {
        conn_free(c);
        return;
    }
    timer_set(c, INGRESS_HEAD_TIMEOUT_SEC);
}

/*
 * The TLS handshake's server name must be the domain or one of its
 * subdomains (what the leaf covers); a connection without one, or for
 * another name, fails with unrecognized_name before any request.
 */
static int servername_cb(SSL *ssl, int *alert, void *userdata)
{
    const struct ingress *ig = userdata;
    const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    size_t n = name ? strlen(name) : 0, d = strlen(ig->domain);

    if (n == d && strcasecmp(name, ig->domain) == 0) {
        return SSL_TLSEXT_ERR_OK;
    }
    if (n > d + 1 && name[n - d - 1] == '.' && strcasecmp(name + n - d, ig->domain) == 0) {
        return SSL_TLSEXT_ERR_OK;
    }
    log_debug("ingress TLS: refused server name '%.253s'", name ? name : "(none)");
    *alert = SSL_AD_UNRECOGNIZED_NAME;
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

int ingress_new(struct event_base *base, const char *listen_ip, uint16_t port, const char *domain,
                ingress_lookup_fn lookup, void *userdata, struct ingress **ret)
{
    return ingress_new_tls(base, listen_ip, port, domain, NULL, lookup, userdata, ret);
}

int ingress_new_tls(struct event_base *base, const char *listen_ip, uint16_t port,
                    const char *domain, SSL_CTX *tls, ingress_lookup_fn lookup, void *userdata,
                    struct ingress **ret)
{
    struct ingress *ig = NULL;
    int r;

    assert(base);
    assert(listen_ip);
    assert(domain);
    assert(lookup);
    assert(ret);

    if (!*domain || strlen(domain) > 253) {
        return -EINVAL;
    }
    ig = calloc(1, sizeof(*ig));
    if (!ig) {
        return -ENOMEM;
    }
    *ig = (struct ingress){ .base = base, .lookup = lookup, .userdata = userdata };
    ig->domain = strdup(domain);
    if (!ig->domain) {
        r = -ENOMEM;
        goto fail;
    }
    if (tls) {
        if (SSL_CTX_up_ref(tls) != 1) {
            r = -ENOMEM;
            goto fail;
        }
        ig->tls = tls;
        SSL_CTX_set_tlsext_servername_callback(tls, servername_cb);
        SSL_CTX_set_tlsext_servername_arg(tls, ig);
    }
    /*
     * Descriptors: space-api's public API has API_FD_SHARE (25%) of those
     * above the reserve (api.c); the plain ingress 60% and the TLS one 15%
     * (a TLS connection costs 2 fds, never a relay's pipes), so all three
     * loaded at once still leave the reserve to the store and the node
     * clients: ingress load never fails a create or an exec for EMFILE.
     */
    int64_t nofile = (int64_t)listener_raise_nofile();
    struct listener_limits limits = {
        .max_conns = rlimit_conn_cap(nofile, LISTENER_FD_RESERVE, tls ? 15 : 60,
                                     tls ? 2 : INGRESS_FDS_PER_CONN, 16),
    };
    limits.max_per_peer = MAX(limits.max_conns / 2, 1u);
    r = listener_new_tcp(base, listen_ip, port, &limits, accept_cb, ig, &ig->listener);
    if (r < 0) {
        goto fail;
    }
    ig->port = listener_port(ig->listener);
    /* tests/ingress/test_load.py reads the caps here. */
    log_info("ingress%s on %s:%u: at most %u connections, %u per sandbox, %u per client address",
             tls ? " (tls)" : "", listen_ip, (unsigned)ig->port, listener_max_conns(ig->listener),
             max_per_sandbox(ig), limits.max_per_peer);
    *ret = ig;
    return 0;
fail:
    ingress_free(ig);
    return r;
}

uint16_t ingress_port(const struct ingress *ig)
{
    return ig->port;
}

unsigned ingress_connections(const struct ingress *ig)
{
    return ig->n_conns;
}

struct ingress *ingress_free(struct ingress *ig)
{
    if (!ig) {
        return NULL;
    }
    while (ig->conns) {
        conn_free(ig->conns);
    }
    listener_free(ig->listener);
    SSL_CTX_free(ig->tls);
    free(ig->domain);
    free(ig);
    return NULL;
}
