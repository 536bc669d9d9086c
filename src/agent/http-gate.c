/*
 * The per-connection request-head gate (http-gate.h).
 *
 * Per connection, from accept to its close callback:
 *
 *   in_head  the next request's head is incomplete: each byte read is
 *            copied to acc until a blank line ends the head; then the
 *            limit is set and in_head cleared. [gate_input_cb]
 *   !in_head the body: bytes pass unseen. When the request is complete
 *            route() calls http_gate_request_done(): what evhttp has not
 *            consumed starts the next head, decided at once when complete,
 *            else copied to acc (in_head again).
 *
 * A head longer than GATE_MAX_HEAD without an end gets the small limit;
 * evhttp refuses it anyway (AGENT_MAX_HEADERS). The connection of a
 * bufferevent is the argument evhttp gives every callback it sets on it
 * (http.c, libevent 2.1), checked with evhttp_connection_get_bufferevent()
 * before use. evhttp makes the connection right after http_gate_bevcb()
 * returns, in the same call: a zero-delay event then takes its close
 * callback, which frees the gate.
 */
#include "agent/http-gate.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "agent/agent.h"
#include "agent/auth.h"
#include "agent/files-http.h"
#include "agent/limits.h"
#include "basic/macro.h"

#define GATE_MAX_HEAD (AGENT_MAX_HEADERS + 8192)

struct http_gate {
    struct agent *agent;
    struct bufferevent *bev;
    struct evhttp_connection *evcon; /* NULL until gate_setup_cb */
    struct evbuffer_cb_entry *input_cb;
    struct event *setup_ev;
    bool in_head;
    char *acc; /* GATE_MAX_HEAD bytes once the first byte arrives: the head read so far */
    size_t acc_len;
    void (*closecb)(struct evhttp_connection *, void *); /* a module's, called first */
    void *closecb_arg;
    struct http_gate *prev, *next;
};

/* Length of the head in buf (request line through the blank line), or 0 when it is incomplete. */
static size_t head_length(const char *buf, size_t n)
{
    size_t line = 0;

    for (size_t i = 0; i < n; i++) {
        if (buf[i] != '\n') {
            continue;
        }
        /* evhttp reads lines ending in LF with an optional CR (EVBUFFER_EOL_CRLF) */
        if (line > 0 && (i == line || (i == line + 1 && buf[line] == '\r'))) {
            return i + 1;
        }
        if (line == 0 && i == 0) {
            return i + 1; /* an empty request line: evhttp refuses it */
        }
        line = i + 1;
    }
    return 0;
}

/*
 * The X-Access-Token header of a head as evhttp_find_header() would give
 * it (first occurrence, leading spaces and trailing whitespace trimmed),
 * copied into out; false when absent or folded (obs-fold: we do not guess).
 */
static bool head_token(const char *head, size_t n, char *out, size_t out_size)
{
    static const char name[] = "X-Access-Token:";
    const char *p = memchr(head, '\n', n), *end = head + n;

    while (p && ++p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        size_t len = eol ? (size_t)(eol - p) : (size_t)(end - p);
        if (len >= sizeof(name) - 1 && strncasecmp(p, name, sizeof(name) - 1) == 0) {
            const char *v = p + sizeof(name) - 1, *ve = p + len;
            if (eol && eol + 1 < end && (eol[1] == ' ' || eol[1] == '\t')) {
                return false;
            }
            while (v < ve && *v == ' ') {
                v++;
            }
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t' || ve[-1] == '\r')) {
                ve--;
            }
            if ((size_t)(ve - v) >= out_size) {
                return false;
            }
            memcpy(out, v, (size_t)(ve - v));
            out[ve - v] = '\0';
            return true;
        }
        p = eol;
    }
    return false;
}

/* Whether the head alone proves the request may send a large body. */
static bool head_authenticated(struct agent *a, const char *head, size_t n)
{
    char line[8192], token[1024];
    const char *eol = memchr(head, '\n', n), *path, *query;
    char *sp1, *sp2;
    struct evhttp_uri *uri;
    struct evkeyvalq q;
    const char *msg;
    bool ok = false;
    size_t len;

    if (!a->access_token) {
        return true;
    }
    if (head_token(head, n, token, sizeof(token)) && auth_secret_equal(token, a->access_token)) {
        return true;
    }
    /* Otherwise only a signed /files URL: "GET|POST SP uri SP version". */
    len = eol ? (size_t)(eol - head) : n;
    if (len >= sizeof(line)) {
        return false;
    }
    memcpy(line, head, len);
    line[len] = '\0';
    sp1 = strchr(line, ' ');
    sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    if (!sp2) {
        return false;
    }
    *sp1 = *sp2 = '\0';
    if (strcmp(line, "GET") != 0 && strcmp(line, "POST") != 0) {
        return false;
    }
    uri = evhttp_uri_parse_with_flags(sp1 + 1, EVHTTP_URI_NONCONFORMANT);
    path = uri ? evhttp_uri_get_path(uri) : NULL;
    query = uri ? evhttp_uri_get_query(uri) : NULL;
    TAILQ_INIT(&q);
    if (path && strcmp(path, "/files") == 0 && query && evhttp_parse_query_str(query, &q) == 0) {
        ok = files_check_access(a, NULL, &q, line[0] == 'G' ? "read" : "write", &msg) == 0;
    }
    evhttp_clear_headers(&q);
    if (uri) {
        evhttp_uri_free(uri);
    }
    return ok;
}

static void gate_set_limit(struct evhttp_connection *evcon, struct agent *a, bool authenticated)
{
    evhttp_connection_set_max_body_size(evcon, authenticated ? (ev_ssize_t)a->max_upload
                                                             : (ev_ssize_t)AGENT_MAX_UNAUTH_BODY);
}

/* evhttp's connection of a bufferevent, from the callback argument evhttp set on it. */
static struct evhttp_connection *gate_evcon(struct http_gate *g)
{
    void *arg = NULL;

    bufferevent_getcb(g->bev, NULL, NULL, NULL, &arg);
    if (!arg || evhttp_connection_get_bufferevent(arg) != g->bev) {
        return NULL;
    }
    return arg;
}

static void gate_setup_cb(evutil_socket_t fd, short what, void *userdata);

static void gate_decide(struct http_gate *g, size_t end)
{
    if (g->evcon) {
        gate_set_limit(g->evcon, g->agent, end > 0 && head_authenticated(g->agent, g->acc, end));
    }
    g->in_head = false;
    g->acc_len = 0;
}

/* Runs inside evbuffer_read(), before evhttp's read callback parses the new bytes. */
static void gate_input_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *userdata)
{
    struct http_gate *g = userdata;
    struct evbuffer_ptr pos;
    size_t take, end;

    if (info->n_added == 0 || !g->in_head) {
        return;
    }
    if (!g->evcon) {
        gate_setup_cb(-1, 0, g); /* bytes before the setup event ran */
    }
    if (!g->acc && !(g->acc = malloc(GATE_MAX_HEAD))) {
        return; /* the connection keeps the small limit */
    }
    take = MIN(info->n_added, GATE_MAX_HEAD - g->acc_len);
    if (evbuffer_ptr_set(buf, &pos, evbuffer_get_length(buf) - info->n_added, EVBUFFER_PTR_SET) <
            0 ||
        evbuffer_copyout_from(buf, &pos, g->acc + g->acc_len, take) < 0) {
        take = 0;
    }
    g->acc_len += take;
    end = head_length(g->acc, g->acc_len);
    if (end > 0 || g->acc_len == GATE_MAX_HEAD) {
        gate_decide(g, end);
    }
}

static void gate_free(struct http_gate *g)
{
    struct agent *a = g->agent;

    if (g->prev) {
        g->prev->next = g->next;
    } else {
        a->gates = g->next;
    }
    if (g->next) {
        g->next->prev = g->prev;
    }
    if (g->setup_ev) {
        event_free(g->setup_ev);
    }
    free(g->acc);
    free(g);
}

static void gate_closed_cb(struct evhttp_connection *evcon, void *userdata)
{
    struct http_gate *g = userdata;

    if (g->closecb) {
        g->closecb(evcon, g->closecb_arg);
    }
    evhttp_connection_set_closecb(evcon, NULL, NULL);
    evbuffer_remove_cb_entry(bufferevent_get_input(g->bev), g->input_cb);
    gate_free(g);
}

static void gate_setup_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct http_gate *g = userdata;
    struct evhttp_connection *evcon;

    if (g->evcon) {
        return;
    }
    evcon = gate_evcon(g);
    if (!evcon) {
        /* Not evhttp's (cannot happen with 2.1): never decide, the small limit stays. */
        g->in_head = false;
        return;
    }
    g->evcon = evcon;
    evhttp_connection_set_closecb(evcon, gate_closed_cb, g);
}

struct bufferevent *http_gate_bevcb(struct event_base *base, void *userdata)
{
    struct agent *a = userdata;
    struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    struct http_gate *g;

    if (!bev) {
        return NULL;
    }
    g = calloc(1, sizeof(*g));
    if (!g) {
        return bev; /* no gate: the server-wide limit (the small one) applies */
    }
    g->agent = a;
    g->bev = bev;
    g->in_head = true;
    g->setup_ev = event_new(base, -1, 0, gate_setup_cb, g);
    g->input_cb =
        g->setup_ev ? evbuffer_add_cb(bufferevent_get_input(bev), gate_input_cb, g) : NULL;
    if (!g->input_cb) {
        if (g->setup_ev) {
            event_free(g->setup_ev);
        }
        free(g);
        return bev;
    }
    event_active(g->setup_ev, EV_TIMEOUT, 0);
    g->next = a->gates;
    if (a->gates) {
        a->gates->prev = g;
    }
    a->gates = g;
    return bev;
}

static struct http_gate *gate_of(struct agent *a, struct evhttp_connection *evcon)
{
    struct http_gate *g;

    for (g = a->gates; g && (!evcon || g->evcon != evcon); g = g->next) {
    }
    return g;
}

void http_gate_request_done(struct agent *a, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct http_gate *g = gate_of(a, evcon);
    struct evbuffer *in;
    size_t n, end;

    if (!g) {
        return;
    }
    if (!g->acc && !(g->acc = malloc(GATE_MAX_HEAD))) {
        gate_set_limit(evcon, a, false);
        g->in_head = false;
        return;
    }
    /* evhttp has read this request to its end: what it has not consumed starts the next one. */
    in = bufferevent_get_input(g->bev);
    n = MIN(evbuffer_get_length(in), (size_t)GATE_MAX_HEAD);
    evbuffer_copyout(in, g->acc, n);
    g->acc_len = n;
    end = head_length(g->acc, n);
    if (end > 0 || n == GATE_MAX_HEAD) {
        gate_decide(g, end);
        return;
    }
    g->in_head = true;
    /* Until that head is complete, the next request has the small limit. */
    gate_set_limit(evcon, a, false);
}

void http_gate_set_closecb(struct agent *a, struct evhttp_connection *evcon,
                           void (*cb)(struct evhttp_connection *, void *), void *arg)
{
    struct http_gate *g = gate_of(a, evcon);

    if (!g) {
        evhttp_connection_set_closecb(evcon, cb, arg);
        return;
    }
    g->closecb = cb;
    g->closecb_arg = arg;
}

size_t http_gate_count(const struct agent *a)
{
    size_t n = 0;

    for (const struct http_gate *g = a->gates; g; g = g->next) {
        n++;
    }
    return n;
}
