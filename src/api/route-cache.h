#pragma once
/*
 * Where each sandbox's traffic goes, in memory (architecture.md "Ingress";
 * issue 7 item 3: the ingress never waits on the store). The ingress asks
 * this cache once per connection and never the store, so a slow or locked
 * database delays API calls but not traffic to running sandboxes.
 *
 * Kept current on the api's loop thread:
 *  - every write that changes what the ingress needs (state, desired state,
 *    placement, tokens) is followed, in the same loop turn as its commit, by
 *    route_cache_sync() for that sandbox (controller.c, lifecycle.c);
 *  - route_cache_load() fills it before the ingress listens and, as a
 *    backstop, every ROUTE_CACHE_RELOAD_USEC;
 *  - route_cache_poll() on the controller's 1 s tick reads the rows changed
 *    since the previous poll (updated_at, indexed by migration "route-cache"),
 *    so a sandbox another replica created or killed on the same PostgreSQL is
 *    routable, or refused, here within about a second.
 *
 * An entry is the store's row reduced to what routing needs; killed and
 * being-killed sandboxes have none (the ingress answers them as unknown).
 * Loop thread only; not thread-safe.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/store.h"
#include "api/traffic-token.h"
#include "basic/time-util.h"
#include "shared/sandbox-id.h"

/* The full reload's period: it repairs anything a missed sync or poll left wrong. */
#define ROUTE_CACHE_RELOAD_USEC (60 * USEC_PER_SEC)
/*
 * How far back each poll looks before the previous poll's start: covers a
 * transaction that stamped updated_at before the previous poll and committed
 * after it, and clock skew between replicas up to this much.
 */
#define ROUTE_CACHE_POLL_OVERLAP_USEC (5 * USEC_PER_SEC)
/* The longest token an entry holds (the envd token is 32 hex chars today). */
#define ROUTE_CACHE_TOKEN_MAX 127

struct route_cache;

struct route_entry {
    char id[SANDBOX_ID_LEN + 1];
    bool running; /* else: exists but is not running (creating) */
    /* Not running because it is paused or suspended, or on its way there or back (what
     * E2B calls paused): the ingress gives E2B's paused answer, not "not found". */
    bool paused;
    bool auto_resume; /* paused: traffic wakes it (E2B lifecycle.autoResume) */
    bool has_token;
    char access_token[ROUTE_CACHE_TOKEN_MAX + 1]; /* envd's, when has_token */
    /* User ports demand traffic_token in e2b-traffic-access-token. Empty when it cannot be
     * derived (no envd token): then nothing matches and every user-port request is refused. */
    bool private_traffic;
    char traffic_token[TRAFFIC_TOKEN_LEN + 1];
    int64_t updated_at; /* the row's, as last applied */
};

int route_cache_new(struct route_cache **ret);
struct route_cache *route_cache_free(struct route_cache *rc);

/*
 * Applies a row as the store has it: a live row is added or replaced, a
 * killed or being-killed one removed. -EINVAL for an invalid id or a token
 * longer than ROUTE_CACHE_TOKEN_MAX (the entry is removed: fail closed).
 */
int route_cache_apply(struct route_cache *rc, const struct store_sandbox *sb);
void route_cache_remove(struct route_cache *rc, const char *id);
/* 0 with *ret for a running sandbox, -EHOSTDOWN for a paused one (entry.paused), -EAGAIN for
 * one that is not running otherwise (creating), -ENOENT. */
int route_cache_lookup(const struct route_cache *rc, const char *id, struct route_entry *ret);
size_t route_cache_size(const struct route_cache *rc);

/*
 * Re-reads one sandbox from the store and applies it; called right after a
 * commit that changed it. NULL-safe on rc. When the read fails the entry is
 * removed (fail closed: the next poll or reload puts it back).
 */
void route_cache_sync(struct route_cache *rc, struct store *s, const char *id);
/* Replaces the whole cache with the store's live sandboxes. On error the cache is unchanged. */
int route_cache_load(struct route_cache *rc, struct store *s, int64_t now);
/* Applies the rows whose updated_at is at or after the previous poll (or load) minus the
 * overlap; now is the realtime clock in microseconds. On error nothing is lost: the next
 * poll looks back as far. */
int route_cache_poll(struct route_cache *rc, struct store *s, int64_t now);
