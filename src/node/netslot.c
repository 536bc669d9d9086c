/*
 * Network namespace + tap per sandbox (the plan is in netslot.h). Steps, each
 * idempotent so a half-made slot is completed by running create again:
 *
 *   1. `ip netns add` (one spawn; iproute2 also bind-mounts it on /run/netns);
 *   2. on this thread, inside the namespace (netns.h): sysctls first, so the
 *      tap is born with IPv6 off and nothing forwards; then one `ip -batch`
 *      for lo and the tap (a child spawned here starts in the namespace);
 *      then the nftables tables (nft.h); then the per-device sysctls of the
 *      devices that now exist, each read back; then the tap's rate limit
 *      (netrate.h: its ifb device, qdiscs and filters, by rtnetlink);
 *   3. the slot lease (lease.h), taken after the namespace exists, so a lease
 *      whose namespace is gone is abandoned and can be reused.
 *
 * Sysctls are written from the thread that joined the namespace, not
 * through `ip netns exec sysctl`: no extra spawns, and the write is verified
 * where it happened.
 */
#include "node/netslot.h"

#include <errno.h>
#include <limits.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "node/lease.h"
#include "node/netns.h"
#include "node/netrate.h"
#include "node/nft.h"
#include "node/instance.h"
#include "shared/gw-proto.h"
#include "shared/spawn.h"

int netslot_netns_path(const char *id, char *buf, size_t n)
{
    if (!instance_id_is_valid(id)) {
        return -EINVAL;
    }
    return snprintf(buf, n, "/run/netns/" NETSLOT_NETNS_PREFIX "%s", id) >= (int)n ? -ENAMETOOLONG
                                                                                   : 0;
}

bool netslot_exists(const char *id)
{
    char path[PATH_MAX];
    return netslot_netns_path(id, path, sizeof(path)) >= 0 && access(path, F_OK) == 0;
}

/* Before any device exists: `default` is what lo's peers and the tap are born with. */
static const char *const sysctls_early[][2] = {
    { "net/ipv4/ip_forward", "0" },
    { "net/ipv4/conf/all/forwarding", "0" },
    { "net/ipv4/conf/default/forwarding", "0" },
    { "net/ipv6/conf/all/disable_ipv6", "1" },
    { "net/ipv6/conf/default/disable_ipv6", "1" },
};
/* After the devices exist: set explicitly (and read back) rather than trusting inheritance. */
static const char *const sysctls_late[][2] = {
    { "net/ipv6/conf/lo/disable_ipv6", "1" },
    { "net/ipv6/conf/" NETSLOT_TAP "/disable_ipv6", "1" },
    { "net/ipv4/conf/" NETSLOT_TAP "/forwarding", "0" },
};

static int write_sysctls(const char *id, const char *const (*list)[2], size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int r = netns_sysctl_write(list[i][0], list[i][1]);
        if (r < 0) {
            return log_sandbox_warning_errno(id, r, "cannot set %s=%s in its netns: %m", list[i][0],
                                             list[i][1]);
        }
    }
    return 0;
}

/* Everything inside the namespace, on this thread while it has joined it. */
static int netslot_setup_inside(const char *id, uint64_t net_bps)
{
    static const struct nft_sandbox plan = {
        .tap = NETSLOT_TAP,
        .guest_ip = NETSLOT_GUEST_IP,
        .guest_mac = NETSLOT_GUEST_MAC,
        .host_ip = NETSLOT_HOST_IP,
        .dns_port = GW_PROTO_DNS_PORT,
        .gateway_port = GW_PROTO_GATEWAY_PORT,
    };
    char *out = NULL, *ruleset = NULL, *nft_error = NULL;
    int r;

    r = write_sysctls(id, sysctls_early, ARRAY_SIZE(sysctls_early));
    if (r < 0) {
        return r;
    }
    /* Idempotent as a whole: the tap is added only when missing, the rest replaces. */
    const char *batch_argv[] = { "ip", "-batch", "-", NULL };
    const char *batch =
        "tuntap add " NETSLOT_TAP " mode tap\n"
        "link set lo up\n"
        "link set " NETSLOT_TAP " address " NETSLOT_HOST_MAC "\n"
        "addr replace " NETSLOT_HOST_IP "/30 dev " NETSLOT_TAP "\n"
        "link set " NETSLOT_TAP " up\n"
        /* A permanent neighbour entry: no ARP round trip before the first connect. */
        "neigh replace " NETSLOT_GUEST_IP " lladdr " NETSLOT_GUEST_MAC " dev " NETSLOT_TAP
        " nud permanent\n";
    /* if_nametoindex() asks this thread's namespace; an existing tap is kept. */
    if (if_nametoindex(NETSLOT_TAP) > 0) {
        batch = strchr(batch, '\n') + 1;
    }
    r = spawn_run(batch_argv, -1, batch, &out, 4096);
    if (r != 0) {
        log_sandbox_warning(id, "ip -batch in its netns: %s", out ? out : "");
        free(out);
        return r < 0 ? r : -EIO;
    }
    free(out);

    r = nft_sandbox_ruleset(&plan, &ruleset);
    if (r < 0) {
        return r;
    }
    r = nft_apply(ruleset, &nft_error);
    free(ruleset);
    if (r < 0) {
        log_sandbox_warning(id, "cannot load its nftables tables: %s", nft_error ? nft_error : "");
        free(nft_error);
        return r;
    }
    r = write_sysctls(id, sysctls_late, ARRAY_SIZE(sysctls_late));
    if (r >= 0 && net_bps > 0) {
        struct netrate_plan rate = netrate_sandbox_plan(net_bps);
        r = netrate_setup_here(id, &rate);
    }
    return r;
}

/* A lease is abandoned when its namespace is gone (see step 3 above). */
static bool slot_stale(const char *owner, void *userdata)
{
    return !netslot_exists(owner);
}

int netslot_create(const char *id, uint64_t net_bps)
{
    char name[64], path[PATH_MAX], *out = NULL;
    unsigned slot;
    int saved, r;

    r = netslot_netns_path(id, path, sizeof(path));
    if (r < 0) {
        return r;
    }
    snprintf(name, sizeof(name), NETSLOT_NETNS_PREFIX "%s", id);
    if (!netslot_exists(id)) {
        const char *add[] = { "ip", "netns", "add", name, NULL };
        r = spawn_run(add, -1, NULL, &out, 4096);
        if (r != 0) {
            log_sandbox_warning(id, "ip netns add %s: %s", name, out ? out : "");
            free(out);
            return r < 0 ? r : -EIO;
        }
        free(out);
    }
    r = netns_enter(path, &saved);
    if (r < 0) {
        return r;
    }
    r = netslot_setup_inside(id, net_bps);
    netns_leave(saved);
    if (r < 0) {
        return r;
    }
    return lease_acquire(NETSLOT_LEASE_DIR, NETSLOT_MAX, id, slot_stale, NULL, &slot);
}

int netslot_slot(const char *id, unsigned *ret)
{
    if (!instance_id_is_valid(id)) {
        return -EINVAL;
    }
    return lease_find(NETSLOT_LEASE_DIR, id, ret);
}

int netslot_destroy(const char *id)
{
    char name[64], *out = NULL;
    int r;

    if (!instance_id_is_valid(id)) {
        return -EINVAL;
    }
    if (netslot_exists(id)) {
        snprintf(name, sizeof(name), NETSLOT_NETNS_PREFIX "%s", id);
        const char *argv[] = { "ip", "netns", "delete", name, NULL };
        r = spawn_run(argv, -1, NULL, &out, 4096);
        if (r != 0 && netslot_exists(id)) {
            log_debug("ip netns delete %s: %s", name, out ? out : "");
            free(out);
            return r < 0 ? r : -EIO;
        }
        free(out);
    }
    /* After the namespace: a crash in between leaves a lease that slot_stale() reclaims. */
    return lease_release(NETSLOT_LEASE_DIR, id);
}

/* One socket bound to the host side of the tap, in the calling thread's namespace. */
static int open_bound(int type, uint16_t port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
    int fd, one = 1, r;

    if (inet_pton(AF_INET, GW_PROTO_LISTEN_IP, &sa.sin_addr) != 1) {
        return -EINVAL;
    }
    fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    /* TCP only: connections space-gw accepted from an earlier listener may still be open
     * on this port (hello lets it keep them) and must not keep a new listener out. For
     * UDP the option would let two sockets share the port: never. */
    if (type == SOCK_STREAM && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0) {
        r = -errno;
        goto fail;
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        (type == SOCK_STREAM && listen(fd, NETSLOT_GATEWAY_BACKLOG) < 0)) {
        r = -errno;
        goto fail;
    }
    return fd;
fail:
    close_safe(fd);
    return r;
}

int netslot_open_listeners(const char *id, int *ret_dns_fd, int *ret_gateway_fd)
{
    char path[PATH_MAX];
    int saved, dns = -EBADF, gw = -EBADF;
    int r;

    r = netslot_netns_path(id, path, sizeof(path));
    if (r < 0) {
        return r;
    }
    r = netns_enter(path, &saved);
    if (r < 0) {
        return r;
    }
    dns = open_bound(SOCK_DGRAM, GW_PROTO_DNS_PORT);
    gw = dns < 0 ? -EBADF : open_bound(SOCK_STREAM, GW_PROTO_GATEWAY_PORT);
    netns_leave(saved);
    if (dns < 0 || gw < 0) {
        r = dns < 0 ? dns : gw;
        close_safe(dns);
        return r;
    }
    *ret_dns_fd = dns;
    *ret_gateway_fd = gw;
    return 0;
}
