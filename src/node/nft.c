/*
 * Sandbox nftables tables (see nft.h for the design). The ruleset is text in
 * nft's own syntax handed to libnftables, which turns it into one netlink
 * transaction: both tables are deleted and re-made atomically, so applying it
 * again (a half-made slot being completed) is safe, and a reader never sees
 * a half-loaded policy.
 */
#include "node/nft.h"

#include <errno.h>
#include <nftables/libnftables.h>
#include <pthread.h>
#include <stdio.h>

#include "basic/fresh-fds.h"
#include "basic/macro.h"
#include "basic/strbuf.h"

/* Addresses go into nft syntax: accept only what the fixed plan can hold. */
static bool nft_word_ok(const char *s)
{
    if (!s || !*s || strlen(s) > 32) {
        return false;
    }
    for (const char *p = s; *p; p++) {
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || *p == '.' || *p == ':')) {
            return false;
        }
    }
    return true;
}

int nft_sandbox_ruleset(const struct nft_sandbox *s, char **ret)
{
    struct strbuf sb = STRBUF_INIT;
    int r;

    if (!nft_word_ok(s->tap) || !nft_word_ok(s->guest_ip) || !nft_word_ok(s->guest_mac) ||
        !nft_word_ok(s->host_ip) || s->dns_port == 0 || s->gateway_port == 0) {
        return -EINVAL;
    }
    /* `table x {}` first makes the delete succeed when the table does not exist yet. */
    r = strbuf_appendf(&sb,
                       "table netdev space {}\n"
                       "delete table netdev space\n"
                       "table inet space {}\n"
                       "delete table inet space\n"
                       "table netdev space {\n"
                       "  counter spoofed_mac {}\n"
                       "  counter spoofed_arp {}\n"
                       "  counter spoofed_ip {}\n"
                       "  counter not_ipv4 {}\n"
                       "  chain tap_ingress {\n"
                       "    type filter hook ingress device \"%1$s\" priority -500; policy drop;\n"
                       "    ether saddr != %3$s counter name \"spoofed_mac\" drop\n"
                       "    ether type arp jump guest_arp\n"
                       "    ether type ip jump guest_ip\n"
                       "    counter name \"not_ipv4\" drop\n"
                       "  }\n"
                       "  chain guest_arp {\n"
                       "    arp saddr ether != %3$s counter name \"spoofed_arp\" drop\n"
                       "    arp saddr ip != %2$s counter name \"spoofed_arp\" drop\n"
                       "    accept\n"
                       "  }\n"
                       "  chain guest_ip {\n"
                       "    ip saddr != %2$s counter name \"spoofed_ip\" drop\n"
                       "    accept\n"
                       "  }\n"
                       "}\n"
                       "table inet space {\n"
                       "  counter guest_invalid {}\n"
                       "  counter guest_new {}\n"
                       "  counter guest_other {}\n"
                       "  counter guest_direct {}\n"
                       "  counter guest_udp {}\n"
                       "  counter guest_icmp {}\n"
                       "  counter host_out {}\n"
                       "  counter forward {}\n"
                       /* Before routing: a guest packet to anywhere but the host side is
                        * never local, so with forwarding off the kernel would drop it
                        * uncounted; every verdict on what the guest sends is taken here. */
                       "  chain prerouting {\n"
                       "    type filter hook prerouting priority -150; policy accept;\n"
                       "    iifname \"%1$s\" jump guest_pre\n"
                       "  }\n"
                       "  chain guest_pre {\n"
                       "    ct state established,related accept\n"
                       "    ct state invalid counter name \"guest_invalid\" drop\n"
                       /* Elsewhere: redirected below; to the host side: input decides. */
                       "    meta l4proto tcp accept\n"
                       "    ip daddr %4$s udp dport %5$u accept\n"
                       "    meta l4proto udp counter name \"guest_udp\" drop\n"
                       "    meta l4proto icmp counter name \"guest_icmp\" drop\n"
                       "    counter name \"guest_other\" drop\n"
                       "  }\n"
                       /* Every TCP connection the guest opens goes to the gateway's
                        * listener; SO_ORIGINAL_DST tells it where the guest meant to go. */
                       "  chain nat_prerouting {\n"
                       "    type nat hook prerouting priority dstnat; policy accept;\n"
                       "    iifname \"%1$s\" ip daddr != %4$s meta l4proto tcp redirect to :%6$u\n"
                       "  }\n"
                       "  chain input {\n"
                       "    type filter hook input priority filter; policy drop;\n"
                       "    iif \"lo\" accept\n"
                       "    iifname \"%1$s\" ip saddr %2$s ip daddr %4$s jump guest_to_host\n"
                       "    counter name \"guest_other\" drop\n"
                       "  }\n"
                       "  chain guest_to_host {\n"
                       "    ct state established,related accept\n"
                       "    ct state invalid counter name \"guest_invalid\" drop\n"
                       "    jump guest_services\n"
                       "    counter name \"guest_new\" drop\n"
                       "  }\n"
                       /* The gateway port only through the redirect (so a guest cannot pick
                        * the destination the gateway sees), DNS only to the proxy. */
                       "  chain guest_services {\n"
                       "    tcp dport %6$u ct status dnat accept\n"
                       "    tcp dport %6$u counter name \"guest_direct\" drop\n"
                       "    udp dport %5$u accept\n"
                       "  }\n"
                       "  chain output {\n"
                       "    type filter hook output priority filter; policy drop;\n"
                       "    oif \"lo\" accept\n"
                       "    oifname \"%1$s\" ip saddr %4$s ip daddr %2$s accept\n"
                       "    counter name \"host_out\" drop\n"
                       "  }\n"
                       "  chain forward {\n"
                       "    type filter hook forward priority filter; policy drop;\n"
                       "    counter name \"forward\" drop\n"
                       "  }\n"
                       "}\n",
                       s->tap, s->guest_ip, s->guest_mac, s->host_ip, s->dns_port, s->gateway_port);
    if (r < 0) {
        strbuf_release(&sb);
        return r;
    }
    *ret = strbuf_detach(&sb, NULL);
    return *ret ? 0 : -ENOMEM;
}

/* libnftables keeps process-wide state (symbol tables, its gmp allocator): one caller at a time. */
static pthread_mutex_t nft_lock = PTHREAD_MUTEX_INITIALIZER;

struct nft_apply_job {
    const char *ruleset;
    char **ret_error;
};

static int nft_apply_now(void *userdata)
{
    struct nft_apply_job *j = userdata;
    struct nft_ctx *ctx;
    int r;

    /* A fresh context per call: its netlink socket belongs to this thread's namespace. */
    ctx = nft_ctx_new(NFT_CTX_DEFAULT);
    if (!ctx) {
        return -ENOMEM;
    }
    (void)nft_ctx_buffer_output(ctx);
    (void)nft_ctx_buffer_error(ctx);
    r = nft_run_cmd_from_buffer(ctx, j->ruleset) == 0 ? 0 : -EIO;
    if (r < 0 && j->ret_error) {
        const char *e = nft_ctx_get_error_buffer(ctx);
        *j->ret_error = strdup(e ? e : "");
    }
    nft_ctx_free(ctx);
    return r;
}

int nft_apply(const char *ruleset, char **ret_error)
{
    struct nft_apply_job j = { .ruleset = ruleset, .ret_error = ret_error };
    int r;

    pthread_mutex_lock(&nft_lock);
    /*
     * libnftables select()s on its netlink socket: with the node holding over
     * 1,024 descriptors (tunnels) that socket would be >= FD_SETSIZE and glibc
     * aborts the node. On a thread of its own with a fresh fd table it is fd 3.
     */
    r = fresh_fds_run(nft_apply_now, &j);
    pthread_mutex_unlock(&nft_lock);
    return r;
}
