#pragma once
/*
 * space-gw's state: the process context (struct gw) and the table of
 * attached sandboxes. A sandbox entry holds what space-node handed over for
 * one instance (the DNS socket and the gateway listener, both bound inside
 * the sandbox's namespace), its current policy, its name -> address
 * attribution (resolved.h) and its live connections (gateway.h).
 *
 * Lifetime: an entry exists while it is attached or still has live
 * connections. Detach closes everything; a new control session ("hello")
 * closes the descriptors only and lets accepted connections run to their
 * end (gw-proto.h). The policy is immutable; a live replace swaps the
 * pointer, and every decision reads sb->policy at the time it is made, so
 * new connections and the next request on a kept-alive one see the new
 * policy at once.
 */
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "basic/time-util.h"
#include "gw/control-msg.h"
#include "gw/policy.h"
#include "shared/sandbox-id.h"

struct event_base;
struct audit;
struct control;
struct dns_proxy;
struct evp_pkey_st;
struct gateway;
struct inject;
struct resolved;
struct tls_term;

/* Per-sandbox limits (issue 9 point 7): one sandbox's flood stays its own. */
struct gw_limits {
    unsigned conns_per_sandbox; /* open gateway connections */
    unsigned dns_qps;           /* queries per second (token bucket, burst 2x) */
    unsigned dns_inflight;      /* forwarded queries waiting for upstream */
    unsigned max_sandboxes;
};

struct gw {
    struct event_base *base;
    struct policy_env env;
    struct sockaddr_in upstream_dns;
    struct gw_limits limits;
    struct audit *audit;
    struct control *control;
    struct tls_term *tls;            /* NULL until TLS termination is wired */
    struct evp_pkey_st *secrets_key; /* opens sealed secrets (sealed-secret.h); NULL: none */
    struct sandbox *sandboxes;
    size_t n_sandboxes;
    unsigned n_conns, max_conns; /* over all sandboxes: bounded by RLIMIT_NOFILE */
};

struct sandbox {
    struct gw *gw;
    struct sandbox *prev, *next;
    char iid[CONTROL_INSTANCE_MAX + 1];
    char id[SANDBOX_ID_LEN + 1];
    struct policy *policy;
    struct inject *inject; /* policy's opened secrets (inject.h); NULL when it has none */
    struct resolved *resolved;
    struct dns_proxy *dns;   /* NULL when not attached */
    usec_t orphaned;         /* when a new node session took its descriptors; 0 otherwise */
    struct gateway *gateway; /* listener (NULL when not attached) + live connections */
};

struct sandbox *sandbox_find(struct gw *gw, const char *iid);

/*
 * Attaches (or re-attaches) instance iid: takes ownership of *policy (set
 * to NULL), dns_fd and tcp_fd (closed on failure too). The policy's sealed
 * secrets are opened first (inject_new()): one that does not open refuses
 * the whole attach, nothing changed. Returns 0 or -errno with err
 * (CONTROL_ERROR_MAX) filled.
 */
int sandbox_attach(struct gw *gw, const char *iid, const char *sandbox_id, struct policy **policy,
                   int dns_fd, int tcp_fd, char *err);

/* Replaces the policy (stolen, also on failure) and its opened secrets, the old ones wiped.
 * -ENOENT when iid is not attached; a secret that does not open refuses it (the old policy
 * stays). err (CONTROL_ERROR_MAX) says why. */
int sandbox_set_policy(struct gw *gw, const char *iid, struct policy **policy, char *err);

/* Closes the descriptors and every connection. -ENOENT when unknown. */
int sandbox_detach(struct gw *gw, const char *iid);

/* A new node session: closes every sandbox's descriptors, lets connections finish. */
void sandbox_release_all_fds(struct gw *gw);

/*
 * Frees sb when it is neither attached nor has connections (gateway calls
 * it). An entry a new node session orphaned (hello) is kept up to
 * SANDBOX_ORPHAN_USEC for the node to attach it again: its attribution
 * (what the guest resolved, and may still hold in its cache) survives a
 * node restart.
 */
void sandbox_maybe_free(struct sandbox *sb);

#define SANDBOX_ORPHAN_USEC (300 * USEC_PER_SEC) /* DNS_PROXY_TTL_MAX */

/* Frees the orphans whose time is up (gw.c calls it every few seconds). */
void sandbox_sweep(struct gw *gw);

/* Everything, at exit. */
void sandbox_free_all(struct gw *gw);

/* Queues an audit record (stolen) and tells the control channel to flush. */
void gw_audit(struct gw *gw, json_t *rec);
