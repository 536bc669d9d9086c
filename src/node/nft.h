#pragma once
/*
 * The nftables tables inside one sandbox's network namespace, applied with
 * libnftables. Two tables, named so later issues extend rather than replace
 * them:
 *
 *   netdev space  ingress of the tap, before the IP stack: anti-spoofing.
 *                 Only frames from the guest's MAC carrying ARP or IPv4 from
 *                 the guest's address pass; everything else is counted by
 *                 reason and dropped.
 *   inet space    input/output/forward, default drop: only guest <-> host side
 *                 of the tap. Connections the host side opens are allowed;
 *                 connections the guest opens go through chain
 *                 `guest_services` (empty today: the egress issue adds the DNS
 *                 proxy and gateway there) and are otherwise dropped.
 *
 * Named counters, one per drop reason (what `nft list counters` shows):
 * spoofed_mac, spoofed_arp, spoofed_ip, not_ipv4 (IPv6 and any other
 * ethertype), guest_invalid, guest_new, guest_other, host_out, forward.
 */
#include <stddef.h>

struct nft_sandbox {
    const char *tap;       /* the tap device inside the namespace */
    const char *guest_ip;  /* the only source address the guest may use */
    const char *guest_mac; /* the only source MAC the guest may use */
    const char *host_ip;   /* the host side of the tap */
};

/* The ruleset text for s (replaces both tables atomically when applied). *ret: caller frees. */
int nft_sandbox_ruleset(const struct nft_sandbox *s, char **ret);
/*
 * Applies ruleset (one nft transaction) in the calling thread's network
 * namespace (see netns.h). On failure *ret_error (may be NULL) gets
 * libnftables' message; caller frees.
 */
int nft_apply(const char *ruleset, char **ret_error);
