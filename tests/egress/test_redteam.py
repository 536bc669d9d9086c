"""The red-team suite of issue 9: root in a real guest attacks the egress path, through the
full platform (space-api + space-node + space-gw) and the simulated internet of
tests/lib/internet.py, where allowed.test and forbidden.test share one address.

One sandbox with the policy {"allow": ["allowed.test"]} runs every probe (batched into a few
guest scripts, tests/egress/redteam_probes.py, that print JSON); a second one, created with no
policy, is "another sandbox" and shows the native default (deny everything). Each denied
case is checked three ways where it can be:
  - in the guest: the probe failed (no answer, an error status, a refused handshake) and no
    byte of any server but the allowed vhost came back;
  - in the audit log (GET /v1/sandboxes/{id}/egress): a `deny` record naming what was tried,
    with a reason; packets the sandbox's nftables drop (UDP, QUIC, ICMP, IPv6, spoofed
    IP/MAC/ARP, direct TCP to the host side) never reach space-gw, so for them it is that
    table's per-reason counter instead (CONTRACTS.md: "dropped with counters");
  - in the simulated internet: no connection attempt into `inet` but the gateway's own to
    the allowed address and DNS (nft flow log), no request to any vhost but allowed.test
    (nginx log), no query for anything but allowed names (dnsmasq log), nothing at the
    host service in the gateway's namespace.
"""
import json
import os
import subprocess
import time

import pytest

from lib.internet import (ALLOWED, DNS_IP, DOH_IP, FORBIDDEN, FORBIDDEN_IP, HOST_SERVICE_PORT,
                          METADATA_IP, UPLINK_IP, WEB_IP, internet)  # noqa: F401 (fixture)
from lib.platform import GW, EgressPlatform, node_has_option

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "redteam_probes.py")) as _f:
    PROBES = _f.read()
POLICY = {"allow": [ALLOWED]}
BIG_TLS_BYTES = 16 << 20


# ---- fixtures ----

@pytest.fixture(scope="module")
def plat(internet):
    # Not a skip: until space-gw and the node's egress options exist this suite fails, loudly.
    missing = [w for w, ok in (("build/src/gw/space-gw", os.path.exists(GW)),
                               ("space-node --gw-socket", node_has_option("--gw-socket")))
               if not ok]
    assert not missing, f"egress is not built here: {missing}"
    p = EgressPlatform(internet, "redteam")
    left = None
    try:
        p.start()
        yield p
        p.stop_api()
        p.node.stop()
        left = p.node.leftovers()
    finally:
        p.destroy()
    assert not left, left


@pytest.fixture(scope="module")
def sandboxes(plat):
    """(attacker, other): the attacker allows allowed.test; the other has no policy."""
    made = []
    try:
        made.append(plat.create_sandbox(network=POLICY))
        made.append(plat.create_sandbox())
        status, info = plat.admin("GET", f"/v1/sandboxes/{made[0]}")
        assert status == 200 and info.get("network", {}).get("allow") == [ALLOWED], info
        yield tuple(made)
    finally:
        for sid in made:
            plat.admin("DELETE", f"/v1/sandboxes/{sid}?wait=true")


# ---- helpers ----

def cfg(plat, internet, other=None):
    return dict(allowed=ALLOWED, forbidden=FORBIDDEN, web_ip=WEB_IP, forbidden_ip=FORBIDDEN_IP,
                doh_ip=DOH_IP, dns_ip=DNS_IP, metadata_ip=METADATA_IP, uplink_ip=UPLINK_IP,
                host_service_port=HOST_SERVICE_PORT, api_port=plat.port,
                ingress_port=plat.ingress_port, big_name=internet.big_name,
                big_tls_bytes=BIG_TLS_BYTES,
                other_sandbox=other, timeout=8.0)


def probe(plat, sid, phase, config, timeout_s=900):
    res = plat.exec(sid, "python3", "-c", PROBES, json.dumps(config), phase, user="root",
                    timeout_ms=timeout_s * 1000)
    assert res["exit_code"] == 0, (phase, res["stderr"][-3000:])
    out = json.loads(res["stdout"].strip().splitlines()[-1])
    trust = out.pop("trust", {})
    print(f"--- {phase} (egress CA in the guest's bundle: {trust.get('ok')}):")
    for k, v in out.items():
        print(f"  {k}: {json.dumps(v)[:400]}")
    return out


def instance_id(plat, sid):
    status, sb = plat.node.call("GET", f"/v1/sandboxes/{sid}")
    assert status == 200, sb
    return sb["instance_id"]


def counters(iid):
    out = subprocess.run(["ip", "netns", "exec", f"space-{iid}", "nft", "-j", "list",
                          "counters"], check=True, capture_output=True, text=True).stdout
    return {f"{c['family']}/{c['name']}": c["packets"]
            for c in (e["counter"] for e in json.loads(out)["nftables"] if "counter" in e)}


def matches(rec, want):
    if callable(want):
        return want(rec)
    for k, v in want.items():
        got = rec.get(k)
        if isinstance(v, str) and isinstance(got, str):
            if got.lower() != v.lower():
                return False
        elif got != v:
            return False
    return True


def wait_audit(plat, sid, expect, since, timeout=45):
    """Polls the sandbox's audit log until every matcher in expect (name -> (verdict, want))
    has a record at or after since (realtime, s); returns (records, {name: first match})."""
    deadline = time.monotonic() + timeout
    while True:
        recs = [r for r in plat.egress(sid) if (r.get("time") or 0) >= since * 1e6]
        found = {}
        for name, (verdict, want) in expect.items():
            want, count = want if isinstance(want, tuple) else (want, 1)
            hits = [r for r in recs if r.get("verdict") == verdict and matches(r, want)]
            found[name] = hits[0] if len(hits) >= count else None
        if all(found.values()) or time.monotonic() > deadline:
            return recs, found
        time.sleep(1)


# The reason a deny must give where one is the only sensible one (space-gw's tokens and
# policy_reason_str()); every other deny must at least be a policy one ("deny-...").
REASONS = {
    "sni_allowed_host_forbidden": {"host-mismatch"},
    "keepalive_second_forbidden_tls": {"host-mismatch"},
    "connect_method": {"connect"},
    "absolute_uri_other_host": {"host-mismatch"},
    "raw_ip_443": {"unresolved-destination"},  # the allowed SNI to an address not its own
    "clienthello_no_sni": {"no-sni"},
    "clienthello_ech": {"ech"},
    "metadata": {"deny-forbidden"},
    "metadata_tls": {"deny-forbidden"},
    "forged_tls": {"unresolved-destination"},
    "forged_http": {"unresolved-destination"},
    "loopback": {"deny-forbidden"},
}


def check_audit(plat, sid, expect, since):
    recs, found = wait_audit(plat, sid, expect, since)
    missing = [n for n, r in found.items() if r is None]
    summary = "\n".join(json.dumps(r, sort_keys=True) for r in recs[-80:])
    assert not missing, f"no audit record for {missing}; the log's last records:\n{summary}"
    for name, rec in found.items():
        reason = rec.get("reason") or ""
        if expect[name][0] == "allow":
            assert reason.startswith("allow-"), (name, rec)
        elif name in REASONS:
            assert reason in REASONS[name], (name, REASONS[name], rec)
        elif not callable(expect[name][1]):
            assert reason.startswith("deny-"), (name, rec)
        else:
            assert reason and not reason.startswith("allow"), (name, rec)
    print("--- audit: " + ", ".join(f"{n}={r.get('reason')}" for n, r in found.items()))
    return recs


def denied(out, name):
    r = out[name]
    assert not r["leak"], (name, r)
    assert not r["ok"], (name, r)


def internet_clean(internet, what):
    """Nothing but the gateway's own connections to the allowed address and DNS reached the
    simulated internet; only the allowed vhost answered; only allowed names were asked."""
    assert internet.leaks() == [], (what, internet.leaks())
    bad = [q for q in internet.requests() if q["vhost"] != ALLOWED or
           q["host"].split(":")[0] != ALLOWED or q["sni"] not in ("", ALLOWED)]
    assert not bad, (what, bad)
    names = [n for n in internet.dns_queries() if n != ALLOWED]
    assert not names, (what, names)
    assert internet.host_service_hits() == [], (what, internet.host_service_hits())


# ---- the allowed paths ----

def test_allowed_paths_work(plat, internet, sandboxes):
    sid = sandboxes[0]
    since = time.time() - 1
    internet.reset_logs()
    out = probe(plat, sid, "allowed", cfg(plat, internet))
    assert out["resolve"]["ok"] and out["resolve"]["addrs"] == [WEB_IP], out["resolve"]
    assert out["getaddrinfo"]["addrs"] == [WEB_IP]
    assert 65 not in out["https_record_stripped"].get("types", []), out["https_record_stripped"]
    for name in ("curl_http", "curl_https", "curl_system_store", "urllib_https",
                 "pip_style_https"):
        r = out[name]
        assert r["ok"] and r["body"].startswith(f"vhost={ALLOWED} host={ALLOWED}"), (name, r)
        assert not r["leak"], (name, r)
    # HTTPS reached nginx with the allowed SNI (the gateway's upstream leg, verified there).
    assert f"sni={ALLOWED}" in out["curl_https"]["body"]
    bundle = "/etc/ssl/certs/ca-certificates.crt"
    assert out["env"]["env"] == {
        "SSL_CERT_FILE": bundle, "REQUESTS_CA_BUNDLE": bundle, "PIP_CERT": bundle,
        "CURL_CA_BUNDLE": bundle,
        "NODE_EXTRA_CA_CERTS": "/usr/local/share/ca-certificates/space-egress.crt"}
    assert out["keepalive_https"]["ok"] and out["keepalive_https"]["status"] == [200] * 3
    assert out["keepalive_http"]["ok"] and out["keepalive_http"]["status"] == [200] * 2
    r = out["big_https"]
    assert r["ok"] and r["size"] == BIG_TLS_BYTES, r
    assert r["sha256"] == internet.big_sha256_prefix(BIG_TLS_BYTES), r
    r = out["big_http"]
    assert r["ok"] and r["size"] == internet.big_size and r["sha256"] == internet.big_sha256, r
    print(f"--- through the gateway: {BIG_TLS_BYTES >> 20} MiB over terminated TLS in "
          f"{out['big_https']['seconds']} s, {internet.big_size >> 20} MiB over HTTP in "
          f"{out['big_http']['seconds']} s")

    recs = check_audit(plat, sid, {
        "dns": ("allow", {"proto": "dns", "name": ALLOWED}),
        "http": ("allow", {"proto": "http", "host": ALLOWED, "dst": WEB_IP, "port": 80}),
        "tls": ("allow", {"proto": "tls", "sni": ALLOWED, "dst": WEB_IP, "port": 443}),
        "big_tls": ("allow", lambda r: r.get("proto") == "tls" and
                    (r.get("bytesIn") or 0) >= BIG_TLS_BYTES),
        "big_http": ("allow", lambda r: r.get("proto") == "http" and
                     (r.get("bytesIn") or 0) >= internet.big_size),
    }, since)
    assert not [r for r in recs if r.get("verdict") == "deny"], \
        [r for r in recs if r.get("verdict") == "deny"]
    internet_clean(internet, "allowed")
    # Every request went to the allowed vhost, over TLS with its SNI when HTTPS.
    assert {q["port"] for q in internet.requests()} == {"80", "443"}


# ---- the denied probes ----

DENIED_AUDIT = {
    "sni_forbidden_direct_ip": {"proto": "tls", "sni": FORBIDDEN, "dst": WEB_IP, "port": 443},
    "sni_forbidden_etc_hosts": {"sni": f"etchosts.{FORBIDDEN}"},
    "sni_allowed_host_forbidden": {"host": f"hostx.{FORBIDDEN}"},
    "keepalive_second_forbidden_tls": {"host": f"ka2.{FORBIDDEN}"},
    "keepalive_second_forbidden_http": {"host": f"kh2.{FORBIDDEN}"},
    "http_host_forbidden": {"host": f"plain.{FORBIDDEN}"},
    # Both CONNECT probes (to a forbidden name, and to an address with an allowed Host).
    "connect_method": ({"method": "CONNECT", "port": 80}, 2),
    # The authority of the absolute URI is not the Host header's: whichever the record names.
    "absolute_uri_other_host": lambda r: r.get("port") == 80 and r.get("method") != "CONNECT"
    and ("absolute" in (r.get("host") or "") or r.get("reason") == "host-mismatch"),
    "raw_ip_80": {"dst": FORBIDDEN_IP, "port": 80},
    "raw_ip_443": {"dst": FORBIDDEN_IP, "port": 443},
    "raw_ip_8080": {"dst": WEB_IP, "port": 8080},
    "raw_ip_22": {"dst": WEB_IP, "port": 22},
    "raw_ip_443_no_dns": {"sni": f"nodns.{FORBIDDEN}"},
    # (The ECH probe's record has no SNI either: told apart by its reason.)
    "clienthello_no_sni": lambda r: r.get("proto") == "tls" and not r.get("sni") and
    r.get("dst") == WEB_IP and r.get("port") == 443 and r.get("reason") != "ech",
    "clienthello_ech": lambda r: r.get("proto") == "tls" and r.get("reason") == "ech",
    "dns_forbidden": {"proto": "dns", "name": f"dnsq.{FORBIDDEN}"},
    "dns_forbidden_exact": {"proto": "dns", "name": FORBIDDEN},
    "dns_tunnel": {"proto": "dns", "name": f"c2VjcmV0LWRhdGE.exfil.{FORBIDDEN}"},
    "dns_other_resolver_tcp": {"dst": DNS_IP, "port": 53},
    "doh": {"dst": DOH_IP, "port": 443},
    "dot": {"dst": DOH_IP, "port": 853},
    "metadata": {"dst": METADATA_IP, "port": 80},
    "metadata_tls": {"dst": METADATA_IP, "port": 443},
    "gateway_host_addr": {"dst": UPLINK_IP, "port": HOST_SERVICE_PORT},
}
# Dropped by the sandbox's nftables before space-gw: (counters summed, probes, at least one
# packet each). TCP to the host side of the tap is dropped by whichever of the node's rules
# sees it first (a direct connect in prerouting, or input's default).
HOST_SIDE_TCP = ("inet/guest_direct", "inet/guest_new", "inet/guest_not_dnat")
DENIED_NFT = {
    ("inet/guest_udp",): ["udp_9999", "quic_443", "udp_dns_metadata", "dns_direct_upstream"],
    ("inet/guest_icmp",): ["icmp_web", "icmp_gateway"],
    HOST_SIDE_TCP: ["host_side_tcp_15001", "host_side_tcp_49983", "host_side_tcp_22",
                    "host_side_tcp_80", "host_side_dns_tcp"],
}


def test_denied_probes_fail_and_are_audited(plat, internet, sandboxes):
    sid, other = sandboxes
    iid = instance_id(plat, sid)
    since = time.time() - 1
    internet.reset_logs()
    before = counters(iid)
    config = cfg(plat, internet, other=other)
    out = probe(plat, sid, "denied", config)
    after = counters(iid)

    for name in out:
        denied(out, name)
    for name in ("keepalive_second_forbidden_tls", "keepalive_second_forbidden_http"):
        st = out[name]["status"]
        assert st[:1] == [200] and (len(st) == 1 or st[1] >= 400), (name, out[name])
    for name in ("dns_forbidden", "dns_forbidden_exact", "dns_tunnel"):
        assert out[name].get("addrs", []) == [] and out[name].get("rcode") in (None, 2, 3, 5), \
            (name, out[name])

    expect = {n: ("deny", w) for n, w in DENIED_AUDIT.items()}
    expect["other_sandbox_by_name"] = ("deny", {"sni": f"49983-{other}.space.test"})
    expect["other_sandbox_host_header"] = ("deny", {"host": f"49983-{other}.space.test"})
    nft = {c: list(names) for c, names in DENIED_NFT.items()}
    # Direct TCP to the host side is dropped in the netns (no gateway record).
    nft[HOST_SIDE_TCP] += [f"host_side_tcp_{p}" for p in (plat.port, plat.ingress_port)]
    check_audit(plat, sid, expect, since)
    grew = {c: after.get(c, 0) - before.get(c, 0) for c in after}
    print(f"--- nft: {grew}")
    for group, names in nft.items():
        assert sum(grew.get(c, 0) for c in group) >= len(set(names)), (group, names, grew)
    internet_clean(internet, "denied")


# ---- spoofing, ARP, IPv6, forged DNS, the host's loopback ----

def test_raw_frames_forged_dns_spoofing_arp_ipv6(plat, internet, sandboxes):
    sid = sandboxes[0]
    iid = instance_id(plat, sid)
    since = time.time() - 1
    internet.reset_logs()
    before = counters(iid)
    out = probe(plat, sid, "raw", cfg(plat, internet))
    after = counters(iid)
    grew = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    print(f"--- nft: {grew}")

    # The forged reply changed nothing: allowed.test still resolves to its real address, and
    # the forbidden address is refused with the allowed SNI/Host.
    assert out["forged_dns_then_resolve"]["addrs"] == [WEB_IP], out["forged_dns_then_resolve"]
    denied(out, "forged_dns_connect_tls")
    denied(out, "forged_dns_connect_http")
    assert grew["netdev/spoofed_ip"] >= 101 + 6, grew  # forged replies + spoof probes
    # Spoofed IP and MAC: dropped on the tap, nothing came back.
    assert not out["spoof_ip"]["answered"] and not out["spoof_mac"]["answered"]
    assert grew["netdev/spoofed_mac"] >= 3 + 2, grew
    # ARP claiming the gateway's address (or from another MAC): dropped, counted.
    assert grew["netdev/spoofed_arp"] >= 4, grew
    neigh = subprocess.run(["ip", "netns", "exec", f"space-{iid}", "ip", "neigh", "show"],
                           capture_output=True, text=True).stdout
    assert "02:00:00:00:00:77" not in neigh, neigh
    # IPv6: never answered, counted.
    assert not out["ipv6"]["answered"] and grew["netdev/not_ipv4"] >= 5, grew
    # The host's loopback through the tap: the route trick took, and led nowhere.
    assert out["loopback_route"]["ok"], out["loopback_route"]
    for name in ("loopback_host_api", "loopback_host_ingress", "loopback_host_service",
                 "loopback_raw_tcp"):
        denied(out, name)
    # After all that, the sandbox's own allowed traffic still works.
    assert out["after_raw_still_works"]["ok"], out["after_raw_still_works"]

    check_audit(plat, sid, {
        "forged_tls": ("deny", {"dst": FORBIDDEN_IP, "port": 443}),
        "forged_http": ("deny", {"dst": FORBIDDEN_IP, "port": 80}),
        "forged_reply_refused": ("deny", lambda r: r.get("proto") == "dns" and
                                 "malformed" in (r.get("reason") or "")),
        "loopback": ("deny", {"dst": "127.0.0.2", "port": HOST_SERVICE_PORT}),
    }, since)
    internet_clean(internet, "raw")


# ---- the other sandbox: the native default denies everything ----

def test_default_policy_denies_everything(plat, internet, sandboxes):
    other = sandboxes[1]
    since = time.time() - 1
    internet.reset_logs()
    out = probe(plat, other, "default", cfg(plat, internet))
    for name in out:
        denied(out, name)
    check_audit(plat, other, {
        "dns": ("deny", {"proto": "dns", "name": ALLOWED}),
        "tls": ("deny", {"dst": WEB_IP, "port": 443}),
    }, since)
    assert internet.dns_queries() == [] and internet.requests() == []
    assert internet.leaks() == []


# ---- a policy narrowed while a connection is open ----

def test_policy_narrowed_live(plat, internet, sandboxes):
    sid = sandboxes[0]
    config = cfg(plat, internet)
    out = probe(plat, sid, "hold", config)
    assert out["hold"]["ok"], out
    narrowed = {"allow": ["only-this.test"]}
    res = plat.set_network(sid, narrowed)
    assert res.get("network", {}).get("allow") == ["only-this.test"], res
    t0, since = time.monotonic(), time.time()
    time.sleep(1.0)  # "effective for new connections within a second"
    internet.reset_logs()
    try:
        out = probe(plat, sid, "after", config)
    finally:
        plat.set_network(sid, POLICY)
    print(f"--- probes {time.monotonic() - t0:.1f} s after the change")
    assert "hold_error" not in out, out
    assert out["held_first"]["ok"], out
    # New connections and queries see the narrowed policy.
    denied(out, "new_connection")
    assert not out["new_resolve"]["ok"], out["new_resolve"]
    # The open connection: whatever it did, nothing but the allowed vhost answered it.
    assert not out["held_second"]["leak"], out["held_second"]
    print(f"--- the held connection after the change: {out['held_second']}")
    check_audit(plat, sid, {
        "new_tls": ("deny", {"proto": "tls", "sni": ALLOWED, "port": 443}),
        "new_dns": ("deny", {"proto": "dns", "name": f"after.{ALLOWED}"}),
    }, since)
    assert [n for n in internet.dns_queries()] == []
