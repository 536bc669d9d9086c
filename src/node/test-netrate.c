#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <linux/if_tun.h>
#include <linux/netlink.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "node/netrate.h"

static struct netrate_plan plan(uint64_t bps)
{
    return (struct netrate_plan){ .tap = "tap0",
                                  .ifb = "ifb0",
                                  .host_ip = htonl(0xa9fe0001u),  /* 169.254.0.1 */
                                  .guest_ip = htonl(0xa9fe0002u), /* 169.254.0.2 */
                                  .guest_mac = { 2, 0, 0, 0, 0, 2 },
                                  .agent_port = 49983,
                                  .bps = bps };
}

/* The i-th message of a batch. */
static const struct nlmsghdr *nth(const struct netrate_batch *b, unsigned i)
{
    size_t left = b->len;
    const struct nlmsghdr *h = (const void *)b->buf;
    for (unsigned k = 0; NLMSG_OK(h, left); k++, h = NLMSG_NEXT(h, left)) {
        if (k == i) {
            return h;
        }
    }
    return NULL;
}

/* The first attribute of type in [a, a + len), or NULL. */
static const struct rtattr *find(const struct rtattr *a, size_t len, unsigned short type)
{
    for (; RTA_OK(a, len); a = RTA_NEXT(a, len)) {
        if (a->rta_type == type) {
            return a;
        }
    }
    return NULL;
}

static const struct rtattr *tc_attr(const struct nlmsghdr *h, unsigned short type)
{
    const struct rtattr *a =
        (const void *)((const char *)NLMSG_DATA(h) + NLMSG_ALIGN(sizeof(struct tcmsg)));
    return find(a, h->nlmsg_len - NLMSG_LENGTH(NLMSG_ALIGN(sizeof(struct tcmsg))), type);
}

static const struct rtattr *nested(const struct rtattr *parent, unsigned short type)
{
    return find(RTA_DATA(parent), RTA_PAYLOAD(parent), type);
}

static void test_batches_are_well_formed(void **state)
{
    struct netrate_plan p = plan(1 << 20);
    struct netrate_batch b;

    assert_int_equal(netrate_build_setup(&p, 2, 3, 100, &b), 0);
    assert_int_equal(b.n, 13);
    size_t left = b.len;
    unsigned n = 0;
    for (const struct nlmsghdr *h = (const void *)b.buf; NLMSG_OK(h, left);
         h = NLMSG_NEXT(h, left), n++) {
        assert_int_equal(h->nlmsg_seq, 100 + n);
        assert_true(h->nlmsg_flags & NLM_F_ACK);
    }
    assert_int_equal(n, b.n);
    assert_int_equal(left, 0);
    /* Only the three deletes may fail. */
    assert_int_equal(b.may_fail, 0x7);

    assert_int_equal(netrate_build_link(&p, 1, &b), 0);
    assert_int_equal(b.n, 1);
    assert_int_equal(nth(&b, 0)->nlmsg_type, RTM_NEWLINK);
}

static void test_rate_and_bucket(void **state)
{
    struct netrate_plan p = plan(1 << 20);
    struct netrate_batch b;

    assert_int_equal(netrate_build_rate(&p, 2, 3, 1, &b), 0);
    assert_int_equal(b.n, 2);
    for (unsigned i = 0; i < 2; i++) {
        const struct nlmsghdr *h = nth(&b, i);
        const struct tcmsg *t = NLMSG_DATA(h);
        assert_int_equal(h->nlmsg_type, RTM_NEWTCLASS);
        assert_int_equal(t->tcm_ifindex, i == 0 ? 2 : 3);
        assert_int_equal(t->tcm_handle, 0x10010);
        assert_int_equal(t->tcm_parent, 0x10000);
        const struct rtattr *o = tc_attr(h, TCA_OPTIONS);
        assert_non_null(o);
        const struct rtattr *parms = nested(o, TCA_HTB_PARMS);
        assert_non_null(parms);
        const struct tc_htb_opt *opt = RTA_DATA(parms);
        assert_int_equal(opt->rate.rate, 1 << 20);
        assert_int_equal(opt->ceil.rate, 1 << 20);
        /* 64 KiB + 1600 at 1 MiB/s: 64 ms, in 64 ns ticks. */
        assert_int_equal(opt->buffer, (uint64_t)(65536 + 1600) * 1000000000ull / (1 << 20) / 64);
        assert_null(nested(o, TCA_HTB_RATE64));
    }
    /* Past 2^32 B/s the rate goes in the 64-bit attribute. */
    p.bps = 1ull << 36;
    assert_int_equal(netrate_build_rate(&p, 2, 3, 1, &b), 0);
    const struct rtattr *o = tc_attr(nth(&b, 0), TCA_OPTIONS);
    const struct rtattr *r64 = nested(o, TCA_HTB_RATE64);
    assert_non_null(r64);
    uint64_t rate64; /* netlink attributes are 4-byte aligned only */
    memcpy(&rate64, RTA_DATA(r64), sizeof(rate64));
    assert_int_equal(rate64, 1ull << 36);
}

static void test_agent_filters(void **state)
{
    struct netrate_plan p = plan(1 << 20);
    struct netrate_batch b;
    unsigned found = 0;

    assert_int_equal(netrate_build_setup(&p, 2, 3, 1, &b), 0);
    for (unsigned i = 0; i < b.n; i++) {
        const struct nlmsghdr *h = nth(&b, i);
        const struct tcmsg *t = NLMSG_DATA(h);
        if (h->nlmsg_type != RTM_NEWTFILTER || t->tcm_parent != 0x10000) {
            continue;
        }
        const struct rtattr *o = tc_attr(h, TCA_OPTIONS);
        const struct rtattr *cls = nested(o, TCA_U32_CLASSID);
        const struct rtattr *sel = nested(o, TCA_U32_SEL);
        assert_non_null(cls);
        assert_non_null(sel);
        assert_int_equal(*(const uint32_t *)RTA_DATA(cls), 0x10000); /* htb's direct queue */
        const struct tc_u32_sel *s = RTA_DATA(sel);
        assert_int_equal(s->nkeys, 5);
        assert_int_equal(s->keys[0].val, htonl(0x45000000u)); /* IPv4, no options */
        assert_int_equal(s->keys[2].val, htonl(6u << 16));    /* TCP */
        assert_int_equal(s->keys[3].val, p.host_ip);
        if (t->tcm_ifindex == 2) {
            /* Guest-bound: from the host side to the agent's port. */
            assert_int_equal(s->keys[3].off, 12);
            assert_int_equal(s->keys[4].mask, htonl(0xffffu));
            assert_int_equal(s->keys[4].val, htonl(49983u));
        } else {
            /* Guest-sent: from the agent's port to the host side. */
            assert_int_equal(t->tcm_ifindex, 3);
            assert_int_equal(s->keys[3].off, 16);
            assert_int_equal(s->keys[4].mask, htonl(0xffff0000u));
            assert_int_equal(s->keys[4].val, htonl(49983u << 16));
        }
        found |= 1u << t->tcm_ifindex;
    }
    assert_int_equal(found, (1u << 2) | (1u << 3));
}

/* Only what the netdev table would pass as IPv4 is redirected; the rest meets that table. */
static void test_redirect_takes_only_the_guests_ipv4(void **state)
{
    struct netrate_plan p = plan(1 << 20);
    struct netrate_batch b;
    const struct nlmsghdr *h = NULL;

    assert_int_equal(netrate_build_setup(&p, 2, 3, 1, &b), 0);
    h = nth(&b, b.n - 1);
    const struct tcmsg *t = NLMSG_DATA(h);
    assert_int_equal(h->nlmsg_type, RTM_NEWTFILTER);
    assert_int_equal(t->tcm_parent, 0xffff0000u);
    assert_int_equal(t->tcm_info & 0xffff, htons(0x0800));
    const struct rtattr *o = tc_attr(h, TCA_OPTIONS);
    const struct tc_u32_sel *s = RTA_DATA(nested(o, TCA_U32_SEL));
    assert_int_equal(s->nkeys, 3);
    assert_int_equal(s->keys[0].off, -8);
    assert_int_equal(s->keys[0].val, htonl(0x02000000u));
    assert_int_equal(s->keys[1].off, -4);
    assert_int_equal(s->keys[1].val, htonl(0x00020800u));
    assert_int_equal(s->keys[2].off, 12);
    assert_int_equal(s->keys[2].val, p.guest_ip);
    assert_non_null(nested(o, TCA_U32_ACT));
}

static void test_bad_plans(void **state)
{
    struct netrate_plan p = plan(100);
    struct netrate_batch b;

    assert_int_equal(netrate_build_rate(&p, 2, 3, 1, &b), -EINVAL);
    p = plan((1ull << 40) + 1);
    assert_int_equal(netrate_build_setup(&p, 2, 3, 1, &b), -EINVAL);
    p = plan(1 << 20);
    assert_int_equal(netrate_build_setup(&p, 0, 3, 1, &b), -EINVAL);
    p.tap = "a-name-too-long-for-ifnamsiz";
    assert_int_equal(netrate_build_link(&p, 1, &b), -EINVAL);
}

/* Against the kernel, as root: a fresh namespace with a tap, set up twice (idempotent),
 * then the rate replaced; tc shows what was made. */
static int live_child(void)
{
    struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI };
    struct netrate_plan p = plan(1 << 20);
    int fd;

    if (unshare(CLONE_NEWNET) < 0) {
        return 10;
    }
    fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "tap0");
    if (fd < 0 || ioctl(fd, TUNSETIFF, &ifr) < 0) {
        return 11;
    }
    if (system("ip link set tap0 up") != 0) {
        return 12;
    }
    if (netrate_setup_here("test", &p) < 0 || netrate_setup_here("test", &p) < 0) {
        return 13;
    }
    p.bps = 3 << 20;
    char self[64];
    snprintf(self, sizeof(self), "/proc/%d/ns/net", getpid());
    if (netrate_set("test", self, &p) < 0) {
        return 14;
    }
    if (system("tc class show dev tap0 | grep -q 'rate 25165Kbit' && "
               "tc class show dev ifb0 | grep -q 'rate 25165Kbit' && "
               "tc filter show dev tap0 ingress | grep -q 'Redirect to device ifb0' && "
               "tc filter show dev tap0 | grep -q 'flowid 1:' && "
               "tc qdisc show dev ifb0 | grep -q bfifo") != 0) {
        int shown = system("tc qdisc show; tc class show dev tap0; tc filter show dev tap0; "
                           "tc filter show dev tap0 ingress");
        return shown == 0 ? 15 : 16;
    }
    return 0;
}

static void test_live_namespace(void **state)
{
    if (geteuid() != 0 || access("/dev/net/tun", R_OK | W_OK) < 0) {
        skip();
    }
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        _exit(live_child());
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batches_are_well_formed),
        cmocka_unit_test(test_rate_and_bucket),
        cmocka_unit_test(test_agent_filters),
        cmocka_unit_test(test_redirect_takes_only_the_guests_ipv4),
        cmocka_unit_test(test_bad_plans),
        cmocka_unit_test(test_live_namespace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
