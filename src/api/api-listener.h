#pragma once
/*
 * The public API's TCP listener, bounded (issue 7 "bounded daemons") with what libevent
 * 2.1's evhttp allows:
 *   - a connection cap: at the cap the listener stops accepting (the kernel's backlog holds
 *     the rest) until a connection closes;
 *   - no busy loop on EMFILE/ENFILE: an accept error pauses accepting for 100 ms;
 *   - a request deadline: from when a connection is ready for a request until that request
 *     has been read whole (head and body), so a head or body streamed a byte at a time, or a
 *     keep-alive connection left idle, is closed; evhttp's own timeout only bounds silence;
 *   - the head and body caps and the inactivity timeout are evhttp settings (api.c).
 * evhttp 2.1 has no new-connection hook (evhttp_set_newreqcb is 2.2): connections are
 * counted from evhttp_set_bevcb, bound to their evhttp_connection by the bufferevent's
 * callback argument right after evhttp sets it, and uncounted by the connection's close
 * callback. Nothing else in space-api may set a close callback on public connections.
 * The API key is checked after evhttp has read the body (2.1 has no server-side header
 * hook): an unauthenticated client can make it buffer at most the body cap per connection,
 * for at most the deadline.
 */
#include <event2/event.h>
#include <event2/http.h>
#include <stdint.h>

#include "basic/time-util.h"

struct api_listener;

struct api_limits {
    uint32_t max_connections;
    usec_t request_deadline;
};

/* Binds http to a new listener on addr ("IP:PORT", "[IPv6]:PORT") and wraps dispatch as
 * http's request callback. */
int api_listener_new(struct event_base *base, struct evhttp *http, const char *addr,
                     const struct api_limits *limits,
                     void (*dispatch)(struct evhttp_request *req, void *userdata), void *userdata,
                     struct api_listener **ret);
/* Before evhttp_free(): stops accepting for good (evhttp frees the listener itself). */
void api_listener_stop(struct api_listener *l);
/* After evhttp_free(). Returns NULL. */
struct api_listener *api_listener_free(struct api_listener *l);
/* Connections open now (accepted, not yet closed). */
uint32_t api_listener_connections(const struct api_listener *l);
