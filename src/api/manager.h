#pragma once
/*
 * space-api's state: one libevent loop owning the store handle, the HTTP
 * listeners (TCP for API-key clients, a Unix socket for the local CLI), the
 * ingress proxy and the controller. Passed explicitly, never global (R13).
 */
#include <event2/event.h>
#include <event2/http.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/store.h"
#include "basic/time-util.h"

struct egress_audit;
struct evp_pkey_st;
struct ingress;
struct route_cache;
struct waiter;

/* An operation this process holds the lease of and runs on a worker (controller.c). */
struct inflight_op {
    char id[33];
    usec_t renewed_at; /* monotonic */
};

/* Which listener a request came in on: the Unix socket is the local admin's (no API key). */
struct listener {
    struct manager *m;
    bool admin;
};

struct manager {
    struct event_base *base;
    struct evhttp *http;       /* TCP: API keys required */
    struct evhttp *admin_http; /* Unix socket: trusted local CLI */
    struct listener public_listener, admin_listener;
    struct store *store;
    struct ingress *ingress;
    struct ingress *ingress_tls; /* the same proxy behind TLS (ingress-tls.h), or NULL */
    struct route_cache *routes;  /* what the ingress reads instead of the store (route-cache.h) */
    usec_t last_route_reload;    /* monotonic */
    struct event *tick, *sigterm, *sigint;
    const char *node_socket;
    const char *tunnel_socket;
    const char *domain;         /* for E2B `domain` and Host routing; may be NULL */
    const char *ingress_listen; /* IP:PORT of the sandbox ingress, or NULL */
    int64_t default_timeout_s;  /* E2B: 300 */
    int64_t max_timeout_s;
    unsigned max_sandboxes;
    unsigned jobs; /* worker jobs in flight */
    struct waiter *waiters;
    struct inflight_op *inflight; /* operations a worker is running, leased by owner_id */
    size_t n_inflight;
    char owner_id[33]; /* this process's lease owner id: random per start */
    usec_t last_node_sync;
    struct egress_audit *egress_audit; /* the audit puller's cursor (egress-audit.c) */
    struct evp_pkey_st *secrets_key;   /* space-gw's public key (--secrets-key): secrets are
                                          sealed to it (secrets.h); NULL = secrets unavailable */
    usec_t last_secret_sweep;          /* monotonic (secrets_tick()) */
    usec_t last_branch_sweep;          /* monotonic (branch_tick()) */
    /* Rolling snapshots (rolling.h): the shortest period a policy may ask for (seconds,
     * --rolling-min-period), the api-wide bound on their bytes (--rolling-max-bytes), the
     * last retention pass and policy sweep (monotonic), retention's deletions in flight. */
    int64_t rolling_min_period_s;
    int64_t rolling_max_bytes;
    usec_t last_rolling_retention, last_rolling_sweep;
    unsigned rolling_deleting;
    bool stopping;
};

/* Installs the routes on both listeners (routes.c). */
void routes_register(struct manager *m);
