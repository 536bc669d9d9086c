#pragma once
/*
 * Per-sandbox network rate limits: the guest's traffic both ways is shaped
 * to one rate (bytes/s, each direction on its own) on its tap, inside the
 * sandbox's namespace (netslot.h), by rtnetlink messages this module builds
 * itself (no tc spawn):
 *
 *   guest-bound  tap0 root htb 1: default 1:10; class 1:10 at the rate, a
 *                bfifo leaf bounding its queue in bytes;
 *   guest-sent   tap0 ingress qdisc, one u32 filter whose mirred action
 *                redirects to ifb0 every frame the netdev nftables table
 *                would pass as IPv4 (the guest's MAC, ethertype IPv4, the
 *                guest's source address); ifb0 carries the same htb as tap0.
 *                The frame re-enters tap0's receive path after ifb0, past the
 *                tc and netdev ingress hooks (the kernel skips both for a
 *                frame ifb hands back) but through the inet table. Every
 *                other frame (ARP, spoofed, IPv6) is not redirected: the
 *                netdev table drops and counts it as before (nft.h); ARP is
 *                left unshaped, it never leaves the namespace.
 *
 * The agent (envd) connection is never shaped, so a guest saturating its
 * own link stays controllable: one u32 filter per htb sends it to the htb's
 * direct queue (classid 1:0). It matches what the guest cannot forge into a
 * way out: IPv4 without options, not a later fragment, TCP, and the host side
 * of the tap as the other end (source for guest-bound, destination for
 * guest-sent) with the agent's port on the guest's side. Everything the guest
 * sends through the gateway or DNS has another destination before the nat
 * redirect (tc ingress runs before it) or is UDP; TCP to the host side is
 * only the node's own agent connection (nft.h drops the rest).
 *
 * Setup runs when the namespace is made (netslot_create(), a warm-pool
 * member's too) and is idempotent: the qdiscs are deleted and made again.
 * At bind only the two classes' rate is replaced (netrate_set()).
 */
#include <stddef.h>
#include <stdint.h>

#define NETRATE_IFB "ifb0"
/* Bounds of --net-bps and of a create's net_bps (0 is "off" only for the node option). */
#define NETRATE_MIN_BPS 4096ull
#define NETRATE_MAX_BPS (1ull << 40)

struct netrate_plan {
    const char *tap;      /* the guest's tap inside the namespace */
    const char *ifb;      /* the ifb device its received frames are shaped on */
    uint32_t host_ip;     /* the host side of the tap, network byte order */
    uint32_t guest_ip;    /* the guest's only source address, network byte order */
    uint8_t guest_mac[6]; /* the guest's only source MAC */
    uint16_t agent_port;  /* the agent's TCP port in the guest (never shaped) */
    uint64_t bps;         /* the rate, each direction, bytes/s (NETRATE_MIN_BPS..MAX) */
};

/* An rtnetlink batch: messages back to back, each with NLM_F_ACK and its own seq. */
#define NETRATE_BATCH_MAX 4096
struct netrate_batch {
    unsigned char buf[NETRATE_BATCH_MAX];
    size_t len;
    unsigned n;           /* messages */
    uint32_t seq0;        /* seq of the first; the i-th has seq0 + i */
    uint32_t may_fail;    /* bit i: the i-th message's error is expected (a delete) */
    const char *what[16]; /* the i-th message in words, for logs */
};

/* Pure builders (unit-tested): the batch that makes the ifb device, the one that makes
 * the qdiscs, classes and filters on devices with these ifindexes, and the one that
 * replaces the rate of both classes. -EINVAL on a bad plan, -ENOBUFS past the buffer. */
int netrate_build_link(const struct netrate_plan *p, uint32_t seq0, struct netrate_batch *ret);
int netrate_build_setup(const struct netrate_plan *p, int tap_ifindex, int ifb_ifindex,
                        uint32_t seq0, struct netrate_batch *ret);
int netrate_build_rate(const struct netrate_plan *p, int tap_ifindex, int ifb_ifindex,
                       uint32_t seq0, struct netrate_batch *ret);

/* In the calling thread's namespace (netns.h): makes everything of the plan, at its rate.
 * id (the instance) names the sandbox in the log of a failing step. */
int netrate_setup_here(const char *id, const struct netrate_plan *p);
/* Joins the namespace at netns_path and replaces the rate of both classes. */
int netrate_set(const char *id, const char *netns_path, const struct netrate_plan *p);
/* The plan of a sandbox namespace (netslot.h addresses) at rate bps. */
struct netrate_plan netrate_sandbox_plan(uint64_t bps);
