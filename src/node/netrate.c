/*
 * Network rate limits on a sandbox's tap (the plan is in netrate.h). The
 * messages are built into one buffer (pure code, test-netrate.c) and sent in
 * one sendmsg() on a NETLINK_ROUTE socket of the calling thread's namespace;
 * rtnetlink handles them in order and acks each one, so a setup is two round
 * trips (the ifb device, then everything that names its ifindex) and a rate
 * change is one. The socket has NETLINK_CAP_ACK (acks without the request
 * copied back) and NETLINK_EXT_ACK (the kernel's message for the log).
 *
 * Units: htb takes bytes/s (a 64-bit attribute past 2^32) and its bucket as
 * the time the burst takes at the rate, in psched ticks of 64 ns. The burst is
 * 10 ms at the rate, at least 64 KiB + one MTU: a tap carries GSO frames up to
 * 64 KiB, and a bucket smaller than a frame shapes in lumps. The leaf queue is
 * a bfifo of 100 ms at the rate, at least 256 KiB and at most 16 MiB, so a
 * guest flooding its uplink holds a bounded amount of host memory.
 */
#include "node/netrate.h"

#include <errno.h>
#include <limits.h>
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/tc_act/tc_mirred.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "node/netns.h"
#include "node/netslot.h"
#include "shared/envd.h"

#define HTB_MAJOR 0x10000u            /* 1: */
#define HTB_CLASS (HTB_MAJOR | 0x10u) /* 1:10, the shaped class */
#define HTB_DIRECT HTB_MAJOR          /* 1:0, htb's unshaped direct queue */
#define LEAF_HANDLE 0x100000u         /* 10: */
#define PSCHED_TICK_NS 64u
#define IFB_TXQLEN 1000u

struct netrate_plan netrate_sandbox_plan(uint64_t bps)
{
    struct in_addr host, guest;
    (void)inet_pton(AF_INET, NETSLOT_HOST_IP, &host);
    (void)inet_pton(AF_INET, NETSLOT_GUEST_IP, &guest);
    return (struct netrate_plan){
        .tap = NETSLOT_TAP,
        .ifb = NETRATE_IFB,
        .host_ip = host.s_addr,
        .guest_ip = guest.s_addr,
        .guest_mac = { 0x02, 0, 0, 0, 0, 0x02 }, /* NETSLOT_GUEST_MAC */
        .agent_port = ENVD_PORT,
        .bps = bps,
    };
}

/* ---- message building ---- */

static void *put(struct netrate_batch *b, size_t len)
{
    size_t aligned = NLMSG_ALIGN(len);
    if (b->len + aligned > sizeof(b->buf)) {
        return NULL;
    }
    void *p = b->buf + b->len;
    memset(p, 0, aligned);
    b->len += aligned;
    return p;
}

static struct nlmsghdr *msg_begin(struct netrate_batch *b, uint16_t type, uint16_t flags,
                                  const char *what, bool may_fail)
{
    if (b->n >= ARRAY_SIZE(b->what)) {
        return NULL;
    }
    struct nlmsghdr *h = put(b, sizeof(*h));
    if (!h) {
        return NULL;
    }
    h->nlmsg_type = type;
    h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
    h->nlmsg_seq = b->seq0 + b->n;
    b->what[b->n] = what;
    if (may_fail) {
        b->may_fail |= 1u << b->n;
    }
    b->n++;
    return h;
}

static void msg_end(struct netrate_batch *b, struct nlmsghdr *h)
{
    h->nlmsg_len = (uint32_t)(b->buf + b->len - (unsigned char *)h);
}

static struct rtattr *attr(struct netrate_batch *b, unsigned short type, const void *data,
                           size_t len)
{
    struct rtattr *a = put(b, RTA_LENGTH(len));
    if (!a) {
        return NULL;
    }
    a->rta_type = type;
    a->rta_len = (unsigned short)RTA_LENGTH(len);
    if (len > 0) {
        memcpy(RTA_DATA(a), data, len);
    }
    return a;
}

static struct rtattr *attr_str(struct netrate_batch *b, unsigned short type, const char *s)
{
    return attr(b, type, s, strlen(s) + 1);
}

static struct rtattr *attr_u32(struct netrate_batch *b, unsigned short type, uint32_t v)
{
    return attr(b, type, &v, sizeof(v));
}

static void nest_end(struct netrate_batch *b, struct rtattr *nest)
{
    nest->rta_len = (unsigned short)(b->buf + b->len - (unsigned char *)nest);
}

/* A tc message header: put right after the nlmsghdr. */
static struct tcmsg *tc_header(struct netrate_batch *b, int ifindex, uint32_t parent,
                               uint32_t handle, uint32_t info)
{
    struct tcmsg *t = put(b, sizeof(*t));
    if (t) {
        t->tcm_family = AF_UNSPEC;
        t->tcm_ifindex = ifindex;
        t->tcm_parent = parent;
        t->tcm_handle = handle;
        t->tcm_info = info;
    }
    return t;
}

static bool plan_ok(const struct netrate_plan *p)
{
    return p->tap && p->ifb && strlen(p->tap) < IFNAMSIZ && strlen(p->ifb) < IFNAMSIZ &&
           p->bps >= NETRATE_MIN_BPS && p->bps <= NETRATE_MAX_BPS && p->agent_port != 0 &&
           p->host_ip != 0 && p->guest_ip != 0;
}

int netrate_build_link(const struct netrate_plan *p, uint32_t seq0, struct netrate_batch *ret)
{
    struct netrate_batch *b = ret;
    *b = (struct netrate_batch){ .seq0 = seq0 };
    if (!plan_ok(p)) {
        return -EINVAL;
    }
    /* CREATE without EXCL: an existing ifb0 is kept, brought up, its queue length set. */
    struct nlmsghdr *h = msg_begin(b, RTM_NEWLINK, NLM_F_CREATE, "add the ifb device", false);
    struct ifinfomsg *ifi = h ? put(b, sizeof(*ifi)) : NULL;
    if (!ifi) {
        return -ENOBUFS;
    }
    ifi->ifi_family = AF_UNSPEC;
    ifi->ifi_flags = IFF_UP;
    ifi->ifi_change = IFF_UP;
    struct rtattr *info = NULL;
    if (!attr_str(b, IFLA_IFNAME, p->ifb) || !attr_u32(b, IFLA_TXQLEN, IFB_TXQLEN) ||
        !(info = attr(b, IFLA_LINKINFO, NULL, 0)) || !attr_str(b, IFLA_INFO_KIND, "ifb")) {
        return -ENOBUFS;
    }
    nest_end(b, info);
    msg_end(b, h);
    return 0;
}

static void ratespec(struct tc_ratespec *r, uint64_t bps)
{
    r->linklayer = TC_LINKLAYER_ETHERNET; /* the kernel computes; no rate table */
    r->rate = bps >= UINT32_MAX ? UINT32_MAX : (uint32_t)bps;
}

static uint64_t burst_bytes(uint64_t bps)
{
    return MAX(bps / 100, (uint64_t)(64u << 10) + 1600u);
}

static uint32_t bucket_ticks(uint64_t bps)
{
    uint64_t ns = burst_bytes(bps) * 1000000000ull / bps;
    uint64_t ticks = ns / PSCHED_TICK_NS;
    return ticks > UINT32_MAX ? UINT32_MAX : (uint32_t)ticks;
}

static uint32_t leaf_limit(uint64_t bps)
{
    uint64_t limit = bps / 10;
    return (uint32_t)MIN(MAX(limit, (uint64_t)256u << 10), (uint64_t)16u << 20);
}

/* RTM_NEWTCLASS 1:10 at p->bps; replaces an existing class's rate. */
static int put_class(struct netrate_batch *b, const struct netrate_plan *p, int ifindex,
                     const char *what)
{
    struct nlmsghdr *h = msg_begin(b, RTM_NEWTCLASS, NLM_F_CREATE | NLM_F_REPLACE, what, false);
    struct rtattr *opts = NULL;
    struct tc_htb_opt o = { .quantum = 60000 };

    if (!h || !tc_header(b, ifindex, HTB_MAJOR, HTB_CLASS, 0) || !attr_str(b, TCA_KIND, "htb") ||
        !(opts = attr(b, TCA_OPTIONS, NULL, 0))) {
        return -ENOBUFS;
    }
    ratespec(&o.rate, p->bps);
    ratespec(&o.ceil, p->bps);
    o.buffer = o.cbuffer = bucket_ticks(p->bps);
    if (!attr(b, TCA_HTB_PARMS, &o, sizeof(o))) {
        return -ENOBUFS;
    }
    if (p->bps >= UINT32_MAX) {
        uint64_t r64 = p->bps;
        if (!attr(b, TCA_HTB_RATE64, &r64, sizeof(r64)) ||
            !attr(b, TCA_HTB_CEIL64, &r64, sizeof(r64))) {
            return -ENOBUFS;
        }
    }
    nest_end(b, opts);
    msg_end(b, h);
    return 0;
}

/* Root htb 1: (unclassified to 1:10), its class, and the class's byte-bounded leaf. */
static int put_htb(struct netrate_batch *b, const struct netrate_plan *p, int ifindex,
                   const char *qdisc_what, const char *class_what)
{
    struct nlmsghdr *h = msg_begin(b, RTM_NEWQDISC, NLM_F_CREATE | NLM_F_EXCL, qdisc_what, false);
    struct tc_htb_glob g = { .version = 3, .rate2quantum = 10, .defcls = HTB_CLASS & 0xffff };
    struct rtattr *opts = NULL;
    int r;

    if (!h || !tc_header(b, ifindex, TC_H_ROOT, HTB_MAJOR, 0) || !attr_str(b, TCA_KIND, "htb") ||
        !(opts = attr(b, TCA_OPTIONS, NULL, 0)) || !attr(b, TCA_HTB_INIT, &g, sizeof(g)) ||
        !attr_u32(b, TCA_HTB_DIRECT_QLEN, IFB_TXQLEN)) {
        return -ENOBUFS;
    }
    nest_end(b, opts);
    msg_end(b, h);
    r = put_class(b, p, ifindex, class_what);
    if (r < 0) {
        return r;
    }
    struct tc_fifo_qopt fifo = { .limit = leaf_limit(p->bps) };
    h = msg_begin(b, RTM_NEWQDISC, NLM_F_CREATE | NLM_F_EXCL, "add the class's bfifo", false);
    if (!h || !tc_header(b, ifindex, HTB_CLASS, LEAF_HANDLE, 0) ||
        !attr_str(b, TCA_KIND, "bfifo") || !attr(b, TCA_OPTIONS, &fifo, sizeof(fifo))) {
        return -ENOBUFS;
    }
    msg_end(b, h);
    return 0;
}

/* TCA_U32_SEL: a terminal selector and its keys, which follow it (a flexible array). */
static struct rtattr *attr_sel(struct netrate_batch *b, const struct tc_u32_key *keys, size_t n)
{
    struct tc_u32_sel sel = { .flags = TC_U32_TERMINAL, .nkeys = (unsigned char)n };
    unsigned char buf[sizeof(sel) + 8 * sizeof(*keys)];

    if (n > 8) {
        return NULL;
    }
    memcpy(buf, &sel, sizeof(sel));
    memcpy(buf + sizeof(sel), keys, n * sizeof(*keys));
    return attr(b, TCA_U32_SEL, buf, sizeof(sel) + n * sizeof(*keys));
}

/*
 * The agent filter on one htb: to the direct queue (1:0) when the packet is
 * IPv4 without options, not a later fragment, TCP, the host side at
 * host_off (12: source, 16: destination) and the agent's port at port_shift
 * (16: source port, 0: destination port) of the TCP header's first word.
 */
static int put_agent_filter(struct netrate_batch *b, const struct netrate_plan *p, int ifindex,
                            int host_off, unsigned port_shift, const char *what)
{
    struct tc_u32_key keys[5];
    struct nlmsghdr *h = msg_begin(b, RTM_NEWTFILTER, NLM_F_CREATE | NLM_F_EXCL, what, false);
    struct rtattr *opts = NULL;

    keys[0] = (struct tc_u32_key){ .mask = htonl(0xff000000u), .val = htonl(0x45000000u) };
    keys[1] = (struct tc_u32_key){ .mask = htonl(0x00001fffu), .val = 0, .off = 4 };
    keys[2] = (struct tc_u32_key){ .mask = htonl(0x00ff0000u), .val = htonl(6u << 16), .off = 8 };
    keys[3] = (struct tc_u32_key){ .mask = 0xffffffffu, .val = p->host_ip, .off = host_off };
    keys[4] = (struct tc_u32_key){ .mask = htonl(0xffffu << port_shift),
                                   .val = htonl((uint32_t)p->agent_port << port_shift),
                                   .off = 20 };
    if (!h || !tc_header(b, ifindex, HTB_MAJOR, 0, TC_H_MAKE(1u << 16, htons(ETH_P_IP))) ||
        !attr_str(b, TCA_KIND, "u32") || !(opts = attr(b, TCA_OPTIONS, NULL, 0)) ||
        !attr_u32(b, TCA_U32_CLASSID, HTB_DIRECT) || !attr_sel(b, keys, ARRAY_SIZE(keys))) {
        return -ENOBUFS;
    }
    nest_end(b, opts);
    msg_end(b, h);
    return 0;
}

static int put_del_qdisc(struct netrate_batch *b, int ifindex, uint32_t parent, const char *what)
{
    struct nlmsghdr *h = msg_begin(b, RTM_DELQDISC, 0, what, true);
    if (!h || !tc_header(b, ifindex, parent, 0, 0)) {
        return -ENOBUFS;
    }
    msg_end(b, h);
    return 0;
}

int netrate_build_setup(const struct netrate_plan *p, int tap_ifindex, int ifb_ifindex,
                        uint32_t seq0, struct netrate_batch *ret)
{
    struct netrate_batch *b = ret;
    struct nlmsghdr *h;
    struct rtattr *opts = NULL, *act = NULL, *one = NULL, *aopts = NULL;
    int r;

    *b = (struct netrate_batch){ .seq0 = seq0 };
    if (!plan_ok(p) || tap_ifindex <= 0 || ifb_ifindex <= 0) {
        return -EINVAL;
    }
    /* Idempotent: whatever an earlier run left goes first (errors expected: none there). */
    if ((r = put_del_qdisc(b, tap_ifindex, TC_H_INGRESS, "delete the tap's ingress qdisc")) < 0 ||
        (r = put_del_qdisc(b, tap_ifindex, TC_H_ROOT, "delete the tap's root qdisc")) < 0 ||
        (r = put_del_qdisc(b, ifb_ifindex, TC_H_ROOT, "delete the ifb's root qdisc")) < 0) {
        return r;
    }
    /* Guest-bound: on the tap; the agent's packets come from the host side to its port. */
    if ((r = put_htb(b, p, tap_ifindex, "add the tap's htb", "add the tap's class")) < 0 ||
        (r = put_agent_filter(b, p, tap_ifindex, 12, 0, "add the tap's agent filter")) < 0) {
        return r;
    }
    /* Guest-sent: on the ifb, ready before the redirect; the agent's packets go from its
     * port to the host side. */
    if ((r = put_htb(b, p, ifb_ifindex, "add the ifb's htb", "add the ifb's class")) < 0 ||
        (r = put_agent_filter(b, p, ifb_ifindex, 16, 16, "add the ifb's agent filter")) < 0) {
        return r;
    }
    h = msg_begin(b, RTM_NEWQDISC, NLM_F_CREATE | NLM_F_EXCL, "add the tap's ingress qdisc", false);
    if (!h || !tc_header(b, tap_ifindex, TC_H_INGRESS, TC_H_MAKE(TC_H_INGRESS, 0), 0) ||
        !attr_str(b, TCA_KIND, "ingress")) {
        return -ENOBUFS;
    }
    msg_end(b, h);
    /*
     * What the guest sends as itself, to the ifb (and from there back into the tap's rx,
     * past the netdev table): the guest's MAC (bytes -8..-3 from the IP header) and
     * ethertype IPv4 (-2..-1; the filter's protocol says so too), the guest's source
     * address. The rest stays here for the netdev table to drop and count.
     */
    const uint8_t *mac = p->guest_mac;
    struct tc_u32_key all[3];
    all[0] = (struct tc_u32_key){
        .mask = 0xffffffffu,
        .val =
            htonl((uint32_t)mac[0] << 24 | (uint32_t)mac[1] << 16 | (uint32_t)mac[2] << 8 | mac[3]),
        .off = -8,
    };
    all[1] = (struct tc_u32_key){
        .mask = 0xffffffffu,
        .val = htonl((uint32_t)mac[4] << 24 | (uint32_t)mac[5] << 16 | ETH_P_IP),
        .off = -4,
    };
    all[2] = (struct tc_u32_key){ .mask = 0xffffffffu, .val = p->guest_ip, .off = 12 };
    struct tc_mirred mirred = { .action = TC_ACT_STOLEN,
                                .eaction = TCA_EGRESS_REDIR,
                                .ifindex = (uint32_t)ifb_ifindex };
    h = msg_begin(b, RTM_NEWTFILTER, NLM_F_CREATE | NLM_F_EXCL, "add the tap's redirect", false);
    if (!h ||
        !tc_header(b, tap_ifindex, TC_H_MAKE(TC_H_INGRESS, 0), 0,
                   TC_H_MAKE(1u << 16, htons(ETH_P_IP))) ||
        !attr_str(b, TCA_KIND, "u32") || !(opts = attr(b, TCA_OPTIONS, NULL, 0)) ||
        !attr_sel(b, all, ARRAY_SIZE(all)) || !(act = attr(b, TCA_U32_ACT, NULL, 0)) ||
        !(one = attr(b, 1, NULL, 0)) || !attr_str(b, TCA_ACT_KIND, "mirred") ||
        !(aopts = attr(b, TCA_ACT_OPTIONS, NULL, 0)) ||
        !attr(b, TCA_MIRRED_PARMS, &mirred, sizeof(mirred))) {
        return -ENOBUFS;
    }
    nest_end(b, aopts);
    nest_end(b, one);
    nest_end(b, act);
    nest_end(b, opts);
    msg_end(b, h);
    return 0;
}

int netrate_build_rate(const struct netrate_plan *p, int tap_ifindex, int ifb_ifindex,
                       uint32_t seq0, struct netrate_batch *ret)
{
    int r;

    *ret = (struct netrate_batch){ .seq0 = seq0 };
    if (!plan_ok(p) || tap_ifindex <= 0 || ifb_ifindex <= 0) {
        return -EINVAL;
    }
    r = put_class(ret, p, tap_ifindex, "set the tap's rate");
    if (r >= 0) {
        r = put_class(ret, p, ifb_ifindex, "set the ifb's rate");
    }
    return r;
}

/* ---- talking to the kernel ---- */

static int rtnl_open(void)
{
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    int one = 1;

    if (fd < 0) {
        return -errno;
    }
    /* rtnetlink acks at once; a kernel that never does must not hang a worker. */
    struct timeval tv = { .tv_sec = 5 };
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
        int r = -errno;
        close_safe(fd);
        return r;
    }
    /* Best effort: older kernels answer without the extras. */
    (void)setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
    (void)setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
    return fd;
}

/* The kernel's extended-ack message of an error, or "". */
static const char *ext_ack_msg(const struct nlmsghdr *h)
{
    const struct nlmsgerr *e = NLMSG_DATA(h);
    if (!(h->nlmsg_flags & NLM_F_ACK_TLVS) || !(h->nlmsg_flags & NLM_F_CAPPED)) {
        return "";
    }
    size_t off = NLMSG_HDRLEN + sizeof(*e);
    if (h->nlmsg_len < off) {
        return "";
    }
    size_t left = h->nlmsg_len - off;
    const struct rtattr *a = (const void *)((const char *)h + off);
    for (; RTA_OK(a, left); a = RTA_NEXT(a, left)) {
        if (a->rta_type == NLMSGERR_ATTR_MSG && RTA_PAYLOAD(a) > 0) {
            const char *s = RTA_DATA(a);
            return memchr(s, '\0', RTA_PAYLOAD(a)) ? s : "";
        }
    }
    return "";
}

/*
 * Sends b and reads one ack per message. Returns the first error of a
 * message not expected to fail, logged with what it was and the kernel's
 * words; 0 when all were acked.
 */
static int rtnl_run(int fd, const struct netrate_batch *b, const char *id)
{
    struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
    unsigned char buf[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
    uint32_t acked = 0, want = b->n >= 32 ? UINT32_MAX : (1u << b->n) - 1;
    int first = 0;

    if (sendto(fd, b->buf, b->len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
        return -errno;
    }
    while (acked != want) {
        ssize_t k = recv(fd, buf, sizeof(buf), 0);
        if (k < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        size_t left = (size_t)k;
        for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
            uint32_t i = h->nlmsg_seq - b->seq0;
            if (h->nlmsg_type != NLMSG_ERROR || i >= b->n ||
                h->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr))) {
                continue;
            }
            const struct nlmsgerr *e = NLMSG_DATA(h);
            acked |= 1u << i;
            if (e->error < 0 && !(b->may_fail & (1u << i))) {
                const char *msg = ext_ack_msg(h);
                log_sandbox_warning(id, "network rate: cannot %s: %s%s%s", b->what[i],
                                    strerror(-e->error), msg[0] ? ": " : "", msg);
                if (first == 0) {
                    first = e->error;
                }
            }
        }
    }
    return first;
}

static int ifindexes(const struct netrate_plan *p, int *ret_tap, int *ret_ifb)
{
    unsigned tap = if_nametoindex(p->tap), ifb = if_nametoindex(p->ifb);
    if (tap == 0 || ifb == 0 || tap > INT_MAX || ifb > INT_MAX) {
        return -ENODEV;
    }
    *ret_tap = (int)tap;
    *ret_ifb = (int)ifb;
    return 0;
}

int netrate_setup_here(const char *id, const struct netrate_plan *p)
{
    struct netrate_batch b;
    int fd = -EBADF, tap, ifb, r;

    r = netrate_build_link(p, 1, &b);
    if (r < 0) {
        return r;
    }
    fd = rtnl_open();
    if (fd < 0) {
        return fd;
    }
    r = rtnl_run(fd, &b, id);
    if (r >= 0) {
        r = ifindexes(p, &tap, &ifb);
    }
    if (r >= 0) {
        r = netrate_build_setup(p, tap, ifb, 100, &b);
    }
    if (r >= 0) {
        r = rtnl_run(fd, &b, id);
    }
    close_safe(fd);
    return r;
}

int netrate_set(const char *id, const char *netns_path, const struct netrate_plan *p)
{
    struct netrate_batch b;
    int saved, fd = -EBADF, tap, ifb, r;

    r = netns_enter(netns_path, &saved);
    if (r < 0) {
        return r;
    }
    r = ifindexes(p, &tap, &ifb);
    if (r >= 0) {
        r = netrate_build_rate(p, tap, ifb, 1, &b);
    }
    if (r >= 0) {
        fd = rtnl_open();
        r = fd < 0 ? fd : 0;
    }
    netns_leave(saved);
    if (r >= 0) {
        r = rtnl_run(fd, &b, id);
    }
    close_safe(fd);
    return r;
}
