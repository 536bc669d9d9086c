#pragma once
/*
 * The per-sandbox network: a network namespace holding the tap the VMM
 * opens. Every sandbox sees the same addresses (so snapshot clones need no
 * re-addressing; e2b network/slot.go does the same):
 *
 *   guest eth0  169.254.0.2/30  MAC 02:00:00:00:00:02   (kernel ip= parameter)
 *   tap0        169.254.0.1/30  MAC 02:00:00:00:00:01   (inside netns space-<iid>)
 *
 * Only the host side of that namespace can reach the guest (the agent on
 * :49983); the namespace has no route anywhere else, so the default is no
 * network at all. Inside it: IPv4 forwarding off, IPv6 off on every device,
 * and the nftables tables of nft.h (anti-spoofing on the tap, default drop
 * for everything but guest <-> host side of the tap).
 *
 * Each namespace also holds a slot: a host-wide number (lease.h, under
 * NETSLOT_LEASE_DIR) unique among live sandboxes of every node on the host.
 * The VMM runs as uid = gid = NETSLOT_UID_BASE + slot; the egress issue will
 * derive the slot's veth addresses from it.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NETSLOT_GUEST_IP "169.254.0.2"
#define NETSLOT_HOST_IP "169.254.0.1"
#define NETSLOT_GUEST_MAC "02:00:00:00:00:02"
#define NETSLOT_HOST_MAC "02:00:00:00:00:01"
#define NETSLOT_TAP "tap0"
/* Kernel ip= parameter for the guest: client::gateway:netmask:hostname:device:autoconf */
#define NETSLOT_KERNEL_IP_ARG                                                                      \
    "ip=" NETSLOT_GUEST_IP "::" NETSLOT_HOST_IP ":255.255.255.252:sandbox:eth0:off"

#define NETSLOT_NETNS_PREFIX "space-"
#define NETSLOT_LEASE_DIR "/run/space/slots"
#define NETSLOT_MAX 65536u
/* Above the usual /etc/subuid ranges (100000 + 65536 per user) of a few hundred users. */
#define NETSLOT_UID_BASE 900000u

/* Every `id` below is an instance id (instance.h), not a sandbox id. */
/* /run/netns/space-<iid> into buf. */
int netslot_netns_path(const char *id, char *buf, size_t n);
/* Creates the namespace, its tap, sysctls, nftables tables, the tap's rate limit
 * (netrate.h; net_bps 0: none) and slot lease. Idempotent: an existing namespace is
 * completed and reused. */
int netslot_create(const char *id, uint64_t net_bps);
/* Deletes the namespace (and so the tap) and releases the slot. Missing is success. */
int netslot_destroy(const char *id);
bool netslot_exists(const char *id);
/*
 * Opens the egress sockets of the sandbox inside its namespace, on the host
 * side of the tap (gw-proto.h): a UDP socket bound to
 * GW_PROTO_LISTEN_IP:GW_PROTO_DNS_PORT and a TCP socket listening on
 * GW_PROTO_LISTEN_IP:GW_PROTO_GATEWAY_PORT (backlog NETSLOT_GATEWAY_BACKLOG),
 * both nonblocking and CLOEXEC. The node holds them for the instance's life
 * and hands copies to space-gw. Any thread (it joins the namespace for the
 * duration, netns.h). -EADDRINUSE while an earlier holder still has them.
 */
#define NETSLOT_GATEWAY_BACKLOG 128
int netslot_open_listeners(const char *id, int *ret_dns_fd, int *ret_gateway_fd);
/* The slot the sandbox's namespace holds, or -ENOENT. */
int netslot_slot(const char *id, unsigned *ret);
