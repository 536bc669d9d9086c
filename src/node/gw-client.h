#pragma once
/*
 * space-node's client of space-gw's control socket (src/shared/gw-proto.h),
 * on the node's event loop, never blocking it.
 *
 * Session: connect (AF_UNIX SOCK_SEQPACKET), hello, and once space-gw has
 * answered it (so it has closed whatever an earlier session handed it) the
 * resync callback attaches every live instance. After that the manager
 * sends attach/policy/detach as sandboxes come and go. Replies are matched
 * to requests in order and logged when they fail; audit batches go into the
 * ring (egress-audit.h). When the socket is missing, refused, closed or
 * misbehaves (a reply out of order, a malformed datagram, descriptors sent
 * to us, no reply within GW_CLIENT_REPLY_TIMEOUT), the session is dropped and tried again every
 * GW_CLIENT_RETRY; the first failure is logged, the retries are quiet. Nothing is lost by a reset:
 * every new session re-attaches everything with the current policy.
 *
 * Bounded: at most GW_CLIENT_QUEUE_MAX requests wait to be sent or for
 * their reply; a gateway that falls that far behind gets a new session
 * instead (it is resynchronised, not silently skipped). Loop thread only.
 */
#include <event2/event.h>
#include <stdbool.h>

#include "basic/time-util.h"
#include "node/egress-audit.h"

#define GW_CLIENT_RETRY (1 * USEC_PER_SEC)
#define GW_CLIENT_QUEUE_MAX 1024u
/* A request space-gw has not answered in this long ends the session (hung gateway). */
#define GW_CLIENT_REPLY_TIMEOUT (10 * USEC_PER_SEC)

struct gw_client;

/* The session is ready: attach every live instance now (gw_client_attach()). */
typedef void (*gw_client_resync_fn)(struct gw_client *gw, void *userdata);

/* Starts connecting to path at once. audit (kept, not owned) gets the records received. */
int gw_client_new(struct event_base *base, const char *path, const char *node_name,
                  struct egress_audit *audit, gw_client_resync_fn resync, void *userdata,
                  struct gw_client **ret);
struct gw_client *gw_client_free(struct gw_client *gw);

/* hello answered: requests are sent. Before that they are not needed (resync follows). */
bool gw_client_ready(const struct gw_client *gw);
/* The egress CA bundle's PEM from the last hello or ca-rotate reply, or NULL. */
const char *gw_client_ca_pem(const struct gw_client *gw);

/* The egress CA's rotation state as space-gw last reported it (src/gw/ca-set.h). */
struct gw_client_ca {
    char phase[16];       /* "stable" | "staged" | "switched" */
    char current[64 + 1]; /* sha256 hex of the current CA ("" from an older gateway) */
    char next[64 + 1];    /* the next CA's, "" when none */
};
/* NULL until a hello was answered. */
const struct gw_client_ca *gw_client_ca(const struct gw_client *gw);

/*
 * The outcome of a ca-rotate: r 0 (gw_client_ca_pem() and gw_client_ca() are
 * the new state already), -EBUSY when space-gw refused it (error says why:
 * a step out of order, or the files could not be written), -ECONNRESET when
 * the session ended first. Called once, from the loop.
 */
typedef void (*gw_client_ca_fn)(void *userdata, int r, const char *error);

/*
 * Sends {"type":"ca-rotate","step":step}. 0 queued (cb follows), -EINVAL
 * for a step other than stage/switch/finish, -ENOTCONN when no session is
 * ready (cb is not called).
 */
int gw_client_ca_rotate(struct gw_client *gw, const char *step, gw_client_ca_fn cb, void *userdata);

/*
 * Queue requests; each returns 0 when queued or when no session is ready
 * (nothing to do: the next resync covers it), -EINVAL for invalid
 * arguments. attach sends copies of dns_fd and gateway_fd (the caller keeps
 * its own). policy_json: native policy text, NULL = deny everything.
 */
int gw_client_attach(struct gw_client *gw, const char *iid, const char *sandbox_id,
                     const char *policy_json, int dns_fd, int gateway_fd);
int gw_client_policy(struct gw_client *gw, const char *iid, const char *policy_json);
int gw_client_detach(struct gw_client *gw, const char *iid);
