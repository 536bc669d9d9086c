#pragma once
/*
 * A small per-sandbox cache of the DNS proxy's upstream answers, so that a
 * guest asking the same allowed name again (every `curl`, every pip
 * request) is answered without a round trip upstream.
 *
 * What is kept is what the guest was given: the records on the CNAME chain
 * of the asked name (dns_reply_foreach_chain()), TTLs already clamped to
 * the proxy's bounds, for NOERROR answers that end in addresses and hold
 * at most DNS_CACHE_RECORDS records. An entry lives for the smallest of its
 * TTLs; a hit hands out each record with its TTL lowered by the entry's age
 * (at least 1 s left), so nothing outlives what upstream said. Keyed by
 * (normalised name, type): the question's letter case and id are the
 * asker's, put back when the answer is built (dns_build_reply()).
 *
 * The cache decides nothing: the proxy checks the policy before it looks
 * (a narrowed policy answers NXDOMAIN at once), records the addresses of a
 * hit for the gateway's attribution as for an upstream answer, and audits
 * it. Bounded: at most `max` entries (the one expiring first makes room).
 * Pure: the caller passes the time.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/time-util.h"
#include "gw/dns-msg.h"

#define DNS_CACHE_MAX_DEFAULT 128
#define DNS_CACHE_RECORDS 8

struct dns_cache;

int dns_cache_new(size_t max, struct dns_cache **ret);
struct dns_cache *dns_cache_free(struct dns_cache *c);

/*
 * Keeps r's answer to its own question (r->qname, r->qtype), TTLs clamped
 * to [ttl_min, ttl_max] (ttl_min >= 1). Returns 1 when kept, 0 when r is not
 * cacheable (not NOERROR, truncated, no address at the end of its chain, more
 * than DNS_CACHE_RECORDS records), -ENOMEM.
 */
int dns_cache_put(struct dns_cache *c, const struct dns_reply *r, uint32_t ttl_min,
                  uint32_t ttl_max, usec_t now);

/*
 * On a hit (the entry not expired at now): fills the header, question and
 * answers of *ret as an upstream reply to (name, qtype, class IN) with the
 * cached records, TTLs lowered by the age, and returns true. *ret is not
 * cleared (it is large): only those fields are written.
 */
bool dns_cache_get(struct dns_cache *c, const char *name, uint16_t qtype, usec_t now,
                   struct dns_reply *ret);

void dns_cache_clear(struct dns_cache *c);
size_t dns_cache_count(const struct dns_cache *c);
