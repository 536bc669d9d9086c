/*
 * Network namespace + tap per sandbox, through iproute2 (`ip netns add`, then
 * one `ip -batch` inside the namespace so the whole setup costs two spawns).
 * Moving to netlink directly is a later optimisation; the contract in
 * netslot.h does not change with it. The addressing plan is in netslot.h.
 */
#include "node/netslot.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "node/instance.h"
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

int netslot_create(const char *id)
{
    char name[64], *out = NULL;
    int r;

    if (!instance_id_is_valid(id)) {
        return -EINVAL;
    }
    snprintf(name, sizeof(name), NETSLOT_NETNS_PREFIX "%s", id);
    if (!netslot_exists(id)) {
        const char *add[] = { "ip", "netns", "add", name, NULL };
        r = spawn_run(add, -1, NULL, &out, 4096);
        if (r != 0) {
            log_debug("ip netns add %s: %s", name, out ? out : "");
            free(out);
            return r < 0 ? r : -EIO;
        }
        free(out);
        out = NULL;
    }
    /* `-force` keeps going past "File exists" so a half-made slot is completed. */
    const char *batch_argv[] = { "ip", "-n", name, "-force", "-batch", "-", NULL };
    const char *batch =
        "link set lo up\n"
        "tuntap add " NETSLOT_TAP " mode tap\n"
        "link set " NETSLOT_TAP " address " NETSLOT_HOST_MAC "\n"
        "addr add " NETSLOT_HOST_IP "/30 dev " NETSLOT_TAP "\n"
        "link set " NETSLOT_TAP " up\n"
        /* A permanent neighbour entry: no ARP round trip before the first connect. */
        "neigh replace " NETSLOT_GUEST_IP " lladdr " NETSLOT_GUEST_MAC " dev " NETSLOT_TAP
        " nud permanent\n";
    r = spawn_run(batch_argv, -1, batch, &out, 4096);
    if (r != 0 && !(out && strstr(out, "File exists"))) {
        log_debug("ip -batch in %s: %s", name, out ? out : "");
        free(out);
        return r < 0 ? r : -EIO;
    }
    free(out);
    return 0;
}

int netslot_destroy(const char *id)
{
    char name[64], *out = NULL;
    int r;

    if (!instance_id_is_valid(id)) {
        return -EINVAL;
    }
    if (!netslot_exists(id)) {
        return 0;
    }
    snprintf(name, sizeof(name), NETSLOT_NETNS_PREFIX "%s", id);
    const char *argv[] = { "ip", "netns", "delete", name, NULL };
    r = spawn_run(argv, -1, NULL, &out, 4096);
    if (r != 0 && netslot_exists(id)) {
        log_debug("ip netns delete %s: %s", name, out ? out : "");
        free(out);
        return r < 0 ? r : -EIO;
    }
    free(out);
    return 0;
}
