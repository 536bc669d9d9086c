#pragma once
/*
 * Which IPv4 addresses the DNS proxy gave one sandbox for which name, until
 * when: the gateway lets a connection for name N (SNI or Host) go to
 * address A only when A is here for N (issue 9: the CDN case, where an
 * allowed and a forbidden name share one address, is decided by the name
 * the guest *asked*, and a name the guest never resolved through us, by
 * /etc/hosts or a forged reply, gets nothing).
 *
 * Bounded per sandbox: at most `max` entries; when full, the one expiring
 * first goes (expired ones first of all). An entry lives for the TTL the
 * guest was given plus RESOLVED_GRACE_USEC, because a resolver may hand out
 * a cached answer up to its TTL and a connection opened then must still be
 * attributed. Pure: the caller passes the time.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/time-util.h"

#define RESOLVED_MAX_DEFAULT 4096
#define RESOLVED_GRACE_USEC (120 * USEC_PER_SEC)

struct resolved;

int resolved_new(size_t max, struct resolved **ret);
struct resolved *resolved_free(struct resolved *r);

/* name: normalised (dns-msg.h). addr: network order. Refreshes an existing entry's expiry. */
int resolved_add(struct resolved *r, const char *name, uint32_t addr, usec_t expires);

/* True when addr was given for name and has not expired at now. */
bool resolved_has(const struct resolved *r, const char *name, uint32_t addr, usec_t now);

size_t resolved_count(const struct resolved *r);
