#pragma once
/*
 * Authentication before any request body is read. evhttp reads a whole
 * request body (up to the connection's max body size) before our callback
 * sees the request, and /files uploads need a large limit: without this
 * gate any client could make the agent buffer max_upload bytes without a
 * token.
 *
 * libevent 2.1 has no hook between a request's head and its body. The gate
 * watches each connection's input buffer: an evbuffer callback on the
 * socket bufferevent we give evhttp (evhttp_set_bevcb) runs as bytes are
 * read, before evhttp parses them. It copies the request head as it
 * arrives and, when the blank line arrives, decides from the head alone
 * whether the request is authenticated (no token set, the right
 * X-Access-Token, or a valid /files signature), then sets the connection's
 * max body size to max_upload or AGENT_MAX_UNAUTH_BODY, still before evhttp
 * sees the end of the head. Where the next request starts is evhttp's to
 * know: at the end of each request (route() calls http_gate_request_done())
 * the bytes evhttp has not consumed start the next head. The gate only
 * bounds memory; route() still authenticates every request itself.
 */
#include <stddef.h>

struct agent;
struct bufferevent;
struct event_base;
struct evhttp_connection;
struct evhttp_request;

/* Largest body of a request whose head proves nothing (/init carries its token in the body). */
#define AGENT_MAX_UNAUTH_BODY (256u * 1024)

/* For evhttp_set_bevcb(http, http_gate_bevcb, agent): a new connection's bufferevent. */
struct bufferevent *http_gate_bevcb(struct event_base *base, void *userdata);

/* At the start of every request callback: sizes the limit of the connection's next request. */
void http_gate_request_done(struct agent *a, struct evhttp_request *req);

/*
 * evhttp_connection_set_closecb() for the agent's modules: evhttp keeps one
 * close callback per connection and the gate frees its state from it.
 */
void http_gate_set_closecb(struct agent *a, struct evhttp_connection *evcon,
                           void (*cb)(struct evhttp_connection *, void *), void *arg);

/* Connections the gate tracks (not yet closed). */
size_t http_gate_count(const struct agent *a);
