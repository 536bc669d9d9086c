/* See api-listener.h. */
#include "api/api-listener.h"

#include <errno.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "basic/log.h"

#define ACCEPT_PAUSE_USEC (100 * 1000)
#define LISTEN_BACKLOG 511

struct api_conn {
    struct api_listener *l;
    struct bufferevent *bev;
    struct evhttp_connection *evcon; /* NULL while pending */
    struct event *deadline;
    LIST_ENTRY(api_conn) link; /* in l->conns, or l->pending until bound */
};

struct api_listener {
    struct event_base *base;
    struct evconnlistener *lev; /* owned by the evhttp once bound; NULL once stopped */
    struct event *bind;         /* binds accepted bufferevents to their connections */
    struct event *resume;       /* ends an accept pause */
    struct api_limits limits;
    void (*dispatch)(struct evhttp_request *req, void *userdata);
    void *userdata;
    LIST_HEAD(, api_conn) conns, pending;
    uint32_t n_conns;
    usec_t last_warning;
    bool accepting, paused, registered;
    LIST_ENTRY(api_listener) link;
};

/* The only global: once bound, an evconnlistener's callback argument is the evhttp's, so
 * its error callback finds its api_listener here (one per process in practice). */
static LIST_HEAD(, api_listener) listeners = LIST_HEAD_INITIALIZER(listeners);

static void update_accepting(struct api_listener *l)
{
    bool want = l->lev && !l->paused && l->n_conns < l->limits.max_connections;

    if (want == l->accepting) {
        return;
    }
    l->accepting = want;
    if (want) {
        (void)evconnlistener_enable(l->lev);
    } else if (l->lev) {
        (void)evconnlistener_disable(l->lev);
    }
}

static void conn_free(struct api_conn *c)
{
    struct api_listener *l = c->l;

    LIST_REMOVE(c, link);
    if (c->deadline) {
        event_free(c->deadline);
    }
    free(c);
    l->n_conns--;
    update_accepting(l);
}

static void arm_deadline(struct api_conn *c)
{
    struct timeval tv = { .tv_sec = (time_t)(c->l->limits.request_deadline / USEC_PER_SEC),
                          .tv_usec = (suseconds_t)(c->l->limits.request_deadline % USEC_PER_SEC) };
    evtimer_add(c->deadline, &tv);
}

/* The request was not read in time: fail the connection as evhttp's own read timeout does
 * (it closes without a reply); its close callback frees c. */
static void deadline_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct api_conn *c = userdata;
    bufferevent_trigger_event(c->bev, BEV_EVENT_READING | BEV_EVENT_TIMEOUT, 0);
}

static void conn_closed(struct evhttp_connection *evcon, void *userdata)
{
    conn_free(userdata);
}

static struct bufferevent *bev_cb(struct event_base *base, void *userdata)
{
    struct api_listener *l = userdata;
    struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    struct api_conn *c = bev ? calloc(1, sizeof(*c)) : NULL;

    if (c) {
        c->deadline = evtimer_new(base, deadline_cb, c);
    }
    if (!c || !c->deadline) {
        free(c);
        return bev; /* served, uncounted; evhttp makes its own bufferevent if NULL */
    }
    c->l = l;
    c->bev = bev;
    /* Our reference keeps bev valid until bind_cb, whatever evhttp does meanwhile. */
    bufferevent_incref(bev);
    LIST_INSERT_HEAD(&l->pending, c, link);
    l->n_conns++;
    event_active(l->bind, EV_TIMEOUT, 0);
    update_accepting(l);
    return bev;
}

/* Runs right after the accept: evhttp has made the connection and set itself as bev's
 * callback argument (or already freed it, which clears the callbacks). */
static void bind_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct api_listener *l = userdata;
    struct api_conn *c;

    while ((c = LIST_FIRST(&l->pending))) {
        struct bufferevent *bev = c->bev;
        void *evcon = NULL;

        bufferevent_getcb(bev, NULL, NULL, NULL, &evcon);
        if (!evcon) {
            conn_free(c);
        } else {
            LIST_REMOVE(c, link);
            LIST_INSERT_HEAD(&l->conns, c, link);
            c->evcon = evcon;
            evhttp_connection_set_closecb(evcon, conn_closed, c);
            arm_deadline(c);
        }
        bufferevent_decref(bev);
    }
}

static void request_done(struct evhttp_request *req, void *userdata)
{
    arm_deadline(userdata); /* the next request on this keep-alive connection */
}

static void request_cb(struct evhttp_request *req, void *userdata)
{
    struct api_listener *l = userdata;
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct api_conn *c;

    LIST_FOREACH (c, &l->conns, link) {
        if (c->evcon == evcon) {
            evtimer_del(c->deadline); /* read whole: the handler may take its time */
            evhttp_request_set_on_complete_cb(req, request_done, c);
            break;
        }
    }
    l->dispatch(req, l->userdata);
}

static void resume_cb(evutil_socket_t fd, short what, void *userdata)
{
    struct api_listener *l = userdata;
    l->paused = false;
    update_accepting(l);
}

/* accept() failed for a reason other than EAGAIN/EINTR/ECONNABORTED, usually EMFILE or
 * ENFILE: the pending connection stays in the backlog and the listener would fire again at
 * once, forever. Pause instead; closing connections frees descriptors meanwhile. */
static void accept_error_cb(struct evconnlistener *lev, void *userdata)
{
    struct api_listener *l;
    struct timeval tv = { .tv_sec = 0, .tv_usec = ACCEPT_PAUSE_USEC };
    int err = EVUTIL_SOCKET_ERROR();

    LIST_FOREACH (l, &listeners, link) {
        if (l->lev == lev) {
            break;
        }
    }
    if (!l) {
        return;
    }
    if (now_monotonic() - l->last_warning > 10 * USEC_PER_SEC) {
        l->last_warning = now_monotonic();
        log_warning("api: accept failed (%s) with %u connections open; pausing accepts",
                    strerror(err), l->n_conns);
    }
    l->paused = true;
    update_accepting(l);
    evtimer_add(l->resume, &tv);
}

int api_listener_new(struct event_base *base, struct evhttp *http, const char *addr,
                     const struct api_limits *limits,
                     void (*dispatch)(struct evhttp_request *req, void *userdata), void *userdata,
                     struct api_listener **ret)
{
    struct sockaddr_storage ss;
    int sslen = sizeof(ss);
    struct api_listener *l;

    if (evutil_parse_sockaddr_port(addr, (struct sockaddr *)&ss, &sslen) < 0) {
        return -EINVAL;
    }
    l = calloc(1, sizeof(*l));
    if (!l) {
        return -ENOMEM;
    }
    *l = (struct api_listener){ .base = base,
                                .limits = *limits,
                                .dispatch = dispatch,
                                .userdata = userdata,
                                .accepting = true };
    LIST_INIT(&l->conns);
    LIST_INIT(&l->pending);
    l->bind = event_new(base, -1, 0, bind_cb, l);
    l->resume = evtimer_new(base, resume_cb, l);
    if (!l->bind || !l->resume) {
        api_listener_free(l);
        return -ENOMEM;
    }
    l->lev = evconnlistener_new_bind(
        base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
        LISTEN_BACKLOG, (struct sockaddr *)&ss, sslen);
    if (!l->lev) {
        int r = -errno;
        api_listener_free(l);
        return r < 0 ? r : -EADDRINUSE;
    }
    if (!evhttp_bind_listener(http, l->lev)) {
        evconnlistener_free(l->lev);
        l->lev = NULL;
        api_listener_free(l);
        return -ENOMEM;
    }
    evconnlistener_set_error_cb(l->lev, accept_error_cb);
    LIST_INSERT_HEAD(&listeners, l, link);
    l->registered = true;
    evhttp_set_bevcb(http, bev_cb, l);
    evhttp_set_gencb(http, request_cb, l);
    *ret = l;
    return 0;
}

void api_listener_stop(struct api_listener *l)
{
    if (!l) {
        return;
    }
    if (l->lev && l->accepting) {
        (void)evconnlistener_disable(l->lev);
    }
    l->accepting = false;
    l->lev = NULL;
    evtimer_del(l->resume);
}

struct api_listener *api_listener_free(struct api_listener *l)
{
    struct api_conn *c;

    if (!l) {
        return NULL;
    }
    l->lev = NULL;
    if (l->registered) {
        LIST_REMOVE(l, link);
    }
    while ((c = LIST_FIRST(&l->pending))) {
        struct bufferevent *bev = c->bev;
        conn_free(c);
        bufferevent_decref(bev);
    }
    /* Only left when the evhttp was not freed first; their close callbacks must not run. */
    while ((c = LIST_FIRST(&l->conns))) {
        evhttp_connection_set_closecb(c->evcon, NULL, NULL);
        conn_free(c);
    }
    if (l->bind) {
        event_free(l->bind);
    }
    if (l->resume) {
        event_free(l->resume);
    }
    free(l);
    return NULL;
}

uint32_t api_listener_connections(const struct api_listener *l)
{
    return l->n_conns;
}
