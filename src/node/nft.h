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
 *   inet space    what the guest may open, default drop. Connections the host
 *                 side opens are allowed; the guest may open only these (the
 *                 egress plan, docs/architecture.md "Network"):
 *                   - TCP to any address but the host side: redirected (nat
 *                     prerouting) to the gateway's listener on the host side,
 *                     which space-gw holds (gw-proto.h); input accepts the
 *                     gateway port only with `ct status dnat`, so a guest
 *                     cannot reach it, or any other host port, directly;
 *                   - UDP to the host side's port 53 (the DNS proxy).
 *                 Other UDP (incl. QUIC and DNS elsewhere), ICMP and other
 *                 protocols are dropped in a prerouting filter chain, where
 *                 they are still visible: with forwarding off, a packet for a
 *                 non-local address would otherwise die in routing,
 *                 uncounted. TCP straight to the host side meets input's
 *                 default drop.
 *
 * Named counters, one per drop reason (what `nft list counters` shows):
 *   netdev: spoofed_mac, spoofed_arp, spoofed_ip, not_ipv4 (IPv6 and any other
 *   ethertype);
 *   inet: guest_invalid (conntrack says invalid), guest_direct (TCP to the
 *   gateway's port on the host side, not through the redirect), guest_udp
 *   (UDP but DNS to the proxy), guest_icmp, guest_other (any other
 *   protocol), guest_new (a new connection to any other port of the host
 *   side), host_out, forward.
 */
#include <stddef.h>

struct nft_sandbox {
    const char *tap;       /* the tap device inside the namespace */
    const char *guest_ip;  /* the only source address the guest may use */
    const char *guest_mac; /* the only source MAC the guest may use */
    const char *host_ip;   /* the host side of the tap */
    unsigned dns_port;     /* the DNS proxy's UDP port on host_ip */
    unsigned gateway_port; /* where every guest TCP connection is redirected (on host_ip) */
};

/* The ruleset text for s (replaces both tables atomically when applied). *ret: caller frees. */
int nft_sandbox_ruleset(const struct nft_sandbox *s, char **ret);
/*
 * Applies ruleset (one nft transaction) in the calling thread's network
 * namespace (see netns.h). On failure *ret_error (may be NULL) gets
 * libnftables' message; caller frees.
 */
int nft_apply(const char *ruleset, char **ret_error);
