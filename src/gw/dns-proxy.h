#pragma once
/*
 * The DNS proxy of one sandbox: reads the guest's queries on the UDP socket
 * space-node bound at 169.254.0.1:53 in the sandbox's namespace, answers
 * what the policy denies itself, forwards the rest to --upstream-dns from a
 * socket of its own, and records the addresses it hands out (resolved.h).
 *
 *   - A denied name is answered NXDOMAIN and NEVER forwarded: nothing the
 *     guest puts in a name it may not resolve leaves the host (no DNS
 *     tunnelling). NXDOMAIN rather than REFUSED: stub resolvers take it as
 *     final, where REFUSED makes them retry and try the next server.
 *   - Only A queries go upstream. AAAA (the sandbox has no IPv6), HTTPS/SVCB
 *     (ECH keys, alternative endpoints) and every other type of an allowed
 *     name are answered NOERROR with no records, locally.
 *   - Forwarded queries are rebuilt from the parsed question (dns-msg.h)
 *     with a fresh random id, on a connected UDP socket (the kernel drops
 *     datagrams from any other source); a reply counts only if it comes from
 *     the upstream address and matches a pending id + question. The answer
 *     the guest gets is rebuilt too: CNAME chain and A records only, TTLs in
 *     [DNS_PROXY_TTL_MIN, DNS_PROXY_TTL_MAX].
 *   - No reply within DNS_PROXY_TIMEOUT_MSEC: SERVFAIL to the guest, audited.
 *   - Per sandbox: a token bucket of limits.dns_qps queries per second
 *     (burst twice that) and at most limits.dns_inflight forwarded queries;
 *     past either, queries are dropped, counted, and audited once per
 *     second as reason "dns-rate-limit" with the count.
 *
 * Allowed queries answered upstream and every denied or failed query make
 * one audit record (proto "dns"); the local empty answers for allowed names
 * do not (nothing left the host). Malformed queries are dropped unanswered
 * and, like the limits, audited at most once a second with a count.
 */
struct sandbox;
struct dns_proxy;

#define DNS_PROXY_TTL_MIN 5
#define DNS_PROXY_TTL_MAX 300
#define DNS_PROXY_TIMEOUT_MSEC 3000
#define DNS_PROXY_BATCH 64 /* datagrams read per wakeup: other sandboxes get their turn */

/* fd: the sandbox's UDP socket (owned from here on, also on failure). */
int dns_proxy_new(struct sandbox *sb, int fd, struct dns_proxy **ret);
struct dns_proxy *dns_proxy_free(struct dns_proxy *p);
