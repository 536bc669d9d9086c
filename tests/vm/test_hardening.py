"""End-to-end tests of the sandbox's confinement on the host (issue #7, item 6 and the serial
log cap): real space-node, real QEMU guests, real netns.

- every sandbox netns: forwarding off, IPv6 off, nftables anti-spoofing and default drop, proven
  by frames a root process in the guest crafts (AF_PACKET) and the tables' own counters;
- QEMU as its slot's uid, no capabilities, no_new_privs, seccomp;
- console.log capped while the guest floods its serial port.
"""
import json
import os
import subprocess
import time

import pytest

from lib.platform import Node, live_qemu_pids, netns_names, node_sandbox, started_node

LEASES = "/run/space/slots"
UID_BASE = 900000
# The module's node caps console.log at the smallest --console-log-max (CONSOLE_LOG_MAX_MIN), so
# that a flood of a few times the cap (each time over it, the pump compacts: the bound is the same
# code whatever the cap) costs seconds of TCG serial output rather than minutes.
CONSOLE_MAX = 128 << 10

# Runs in the guest as root: sends `count` raw Ethernet frames of `kind` out of eth0.
GUEST_SENDER = r'''
import socket, struct, sys
kind, count = sys.argv[1], int(sys.argv[2])
HOST_MAC, GUEST_MAC = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")

def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff)
    s += s >> 16
    return ~s & 0xffff

def ipv4_udp(src, dst, payload=b"spoofed"):
    udp = struct.pack("!HHHH", 40000, 9999, 8 + len(payload), 0) + payload
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                      socket.inet_aton(src), socket.inet_aton(dst))
    hdr = hdr[:10] + struct.pack("!H", csum(hdr)) + hdr[12:]
    return hdr + udp

def arp_reply(sender_mac, sender_ip):
    return struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 2, sender_mac,
                       socket.inet_aton(sender_ip), HOST_MAC, socket.inet_aton("169.254.0.1"))

def icmpv6_echo():
    body = struct.pack("!BBHHH", 128, 0, 0, 1, 1) + b"ping"
    src = bytes.fromhex("fe800000000000000000000000000002")
    dst = bytes.fromhex("ff020000000000000000000000000001")
    pseudo = src + dst + struct.pack("!I3xB", len(body), 58)
    body = body[:2] + struct.pack("!H", csum(pseudo + body)) + body[4:]
    return struct.pack("!IHBB", 0x60000000, len(body), 58, 255) + src + dst + body

frames = {
    "spoof-ip": (GUEST_MAC, 0x0800, ipv4_udp("169.254.0.3", "169.254.0.1")),
    "spoof-mac": (bytes.fromhex("020000000099"), 0x0800, ipv4_udp("169.254.0.2", "169.254.0.1")),
    "spoof-arp": (GUEST_MAC, 0x0806, arp_reply(GUEST_MAC, "169.254.0.3")),
    "ipv6": (GUEST_MAC, 0x86dd, icmpv6_echo()),
}
src, ethertype, payload = frames[kind]
dst = bytes.fromhex("333300000001") if kind == "ipv6" else HOST_MAC
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x86dd))
s.bind(("eth0", 0))
for _ in range(count):
    s.send(dst + src + struct.pack("!H", ethertype) + payload)
if kind == "ipv6":
    # Nothing may answer: the host side has no IPv6, and the tap drops it before the stack.
    s.settimeout(1.5)
    try:
        while True:
            frame = s.recv(2048)
            if frame[6:12] != GUEST_MAC:
                print("answered")
                break
    except socket.timeout:
        print("silence")
'''


@pytest.fixture(scope="module")
def node():
    with started_node("hard", extra_args=["--console-log-max", str(CONSOLE_MAX)]) as n:
        yield n


@pytest.fixture
def sandbox(node):
    with node_sandbox(node) as sb:
        yield sb


def in_netns(iid, *cmd):
    return subprocess.run(["ip", "netns", "exec", f"space-{iid}", *cmd], check=True,
                          capture_output=True, text=True).stdout


def counters(iid):
    out = json.loads(in_netns(iid, "nft", "-j", "list", "counters"))
    return {f"{c['family']}/{c['name']}": c["packets"]
            for c in (e["counter"] for e in out["nftables"] if "counter" in e)}


def guest_send(node, sid, kind, count=5):
    res = node.exec(sid, "python3", "-c", GUEST_SENDER, kind, str(count), user="root")
    assert res["exit_code"] == 0, res["stderr"]
    return res["stdout"].decode().strip()


def lease_of(iid):
    for name in os.listdir(LEASES):
        if name.isdigit():
            with open(os.path.join(LEASES, name)) as f:
                if f.read() == iid:
                    return int(name)
    return None


def qemu_status(node, sb):
    pids = live_qemu_pids(node.instance_dir(sb))
    assert len(pids) == 1, pids
    with open(f"/proc/{pids[0]}/status") as f:
        return pids[0], dict(line.split(":\t", 1) for line in f.read().splitlines() if ":\t" in line)


def test_netns_forwarding_and_ipv6_off(node, sandbox):
    sid, iid = sandbox["id"], sandbox["instance_id"]
    for key, want in (("net/ipv4/ip_forward", "0"), ("net/ipv4/conf/all/forwarding", "0"),
                      ("net/ipv4/conf/tap0/forwarding", "0"),
                      ("net/ipv6/conf/all/disable_ipv6", "1"),
                      ("net/ipv6/conf/default/disable_ipv6", "1"),
                      ("net/ipv6/conf/lo/disable_ipv6", "1"),
                      ("net/ipv6/conf/tap0/disable_ipv6", "1")):
        assert in_netns(iid, "cat", f"/proc/sys/{key}").strip() == want, key
    assert in_netns(iid, "ip", "-6", "addr", "show").strip() == ""
    # The tables are there with their chains and policies.
    ruleset = in_netns(iid, "nft", "list", "ruleset")
    assert "table netdev space" in ruleset and "table inet space" in ruleset
    assert 'hook ingress device "tap0" priority -500; policy drop;' in ruleset
    assert "chain guest_services" in ruleset


def test_guest_ipv6_reaches_nothing(node, sandbox):
    sid, iid = sandbox["id"], sandbox["instance_id"]
    before = counters(iid)["netdev/not_ipv4"]
    assert guest_send(node, sid, "ipv6", 5) == "silence"
    assert counters(iid)["netdev/not_ipv4"] >= before + 5


@pytest.mark.parametrize("kind,counter", [("spoof-ip", "netdev/spoofed_ip"),
                                          ("spoof-mac", "netdev/spoofed_mac"),
                                          ("spoof-arp", "netdev/spoofed_arp")])
def test_spoofed_frames_are_dropped_on_the_tap(node, sandbox, kind, counter):
    sid, iid = sandbox["id"], sandbox["instance_id"]
    # A listener on the host side of the tap: a spoofed datagram must never reach it.
    listener = subprocess.Popen(
        ["ip", "netns", "exec", f"space-{iid}", "python3", "-c",
         "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM);"
         "s.bind(('169.254.0.1', 9999)); s.settimeout(4); print('ready', flush=True)\n"
         "try: print(s.recvfrom(100))\nexcept socket.timeout: print('nothing')"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert listener.stdout.readline().strip() == "ready"
        before = counters(iid)
        guest_send(node, sid, kind, 7)
        after = counters(iid)
        assert after[counter] == before[counter] + 7, (before, after)
        assert listener.wait(timeout=30) == 0
        assert listener.stdout.read().strip() == "nothing"
    finally:
        listener.kill()
        listener.wait()
    # The agent is unaffected.
    assert node.exec(sid, "echo", "ok")["stdout"] == b"ok\n"


def test_guest_cannot_open_connections_to_the_host_side(node, sandbox):
    sid, iid = sandbox["id"], sandbox["instance_id"]
    before = counters(iid)["inet/guest_new"]
    res = node.exec(sid, "python3", "-c",
                    "import socket\ns = socket.socket(); s.settimeout(2)\n"
                    "try: s.connect(('169.254.0.1', 22)); print('connected')\n"
                    "except OSError as e: print('refused' if isinstance(e, ConnectionRefusedError)"
                    " else 'dropped')")
    assert res["stdout"] == b"dropped\n"  # not even a RST: the SYN never reached the stack
    assert counters(iid)["inet/guest_new"] > before


def test_slot_lease_lives_as_long_as_the_netns(node):
    sb = node.create()
    slot = lease_of(sb["instance_id"])
    assert slot is not None
    node.kill(sb["id"])
    assert lease_of(sb["instance_id"]) is None
    assert f"space-{sb['instance_id']}" not in netns_names()


def processes_of_uid(uid, zombies=False):
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status") as f:
                st = dict(l.split(":\t", 1) for l in f.read().splitlines() if ":\t" in l)
        except OSError:
            continue
        if int(st["Uid"].split()[0]) == uid and (zombies or st["State"][0] not in "ZX"):
            found.append((int(pid), st["Name"]))
    return found


def test_qemu_runs_confined(node):
    sb = node.create()
    sid, iid = sb["id"], sb["instance_id"]
    uid = UID_BASE + lease_of(iid)
    pid, st = qemu_status(node, sb)
    assert st["Uid"].split() == [str(uid)] * 4
    assert st["Gid"].split() == [str(uid)] * 4
    assert st["Groups"].strip() == ""
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(st[cap], 16) == 0, (cap, st[cap])
    assert st["NoNewPrivs"].strip() == "1"
    assert st["Seccomp"].strip() == "2"
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    assert b"on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny" in argv
    # It opens nothing of ours by path: every file it has came from the node.
    assert not any(a.startswith(b"ifname=") for a in argv)
    # The sandbox works as before, and its only processes are QEMU and the console pump.
    assert node.exec(sid, "python3", "-c", "print(6 * 7)")["stdout"] == b"42\n"
    names = sorted(name for _, name in processes_of_uid(uid))
    assert names == ["qemu-system-x86", "space-console"], names
    node.kill(sid)
    assert processes_of_uid(uid, zombies=True) == []  # QEMU and the pump both reaped
    assert lease_of(iid) is None
    assert not live_qemu_pids(node.instance_dir(sb))


def test_two_sandboxes_get_different_uids(node):
    a, b = node.create(), node.create()
    try:
        ua, ub = qemu_status(node, a)[1]["Uid"], qemu_status(node, b)[1]["Uid"]
        assert ua != ub
    finally:
        node.kill(a["id"])
        node.kill(b["id"])


def test_serial_flood_leaves_console_log_capped(node, sandbox):
    sid, iid = sandbox["id"], sandbox["instance_id"]
    log = os.path.join(node.instance_dir(sandbox), "console.log")
    # 4 times the cap: the pump compacts about 7 times (each time the newest half is kept).
    flood = 4 * CONSOLE_MAX
    script = ("import os\nfd = os.open('/dev/ttyS0', os.O_WRONLY | os.O_NOCTTY)\n"
              "line = b'flood-' + b'x' * 1017 + b'\\n'\n"
              f"for i in range({flood // 1024}):\n    os.write(fd, line)\n"
              "os.write(fd, b'flood-done\\n')\n")
    t0 = time.monotonic()
    res = node.exec(sid, "python3", "-c", script, user="root")
    took = time.monotonic() - t0
    assert res["exit_code"] == 0, res["stderr"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with open(log, "rb") as f:
            data = f.read()
        if data.rstrip().endswith(b"flood-done"):
            break
        time.sleep(0.2)
    print(f"{flood} bytes to the serial port in {took:.1f} s; console.log {len(data)} bytes")
    assert len(data) <= CONSOLE_MAX
    assert os.path.getsize(log) <= CONSOLE_MAX
    assert data.startswith(b"[space: earlier console output dropped]\n")
    assert data.rstrip().endswith(b"flood-done")
    assert b"flood-" + b"x" * 1017 in data[-1100:]  # the newest is what was kept
    # The guest and its agent are fine afterwards.
    assert node.exec(sid, "echo", "ok")["stdout"] == b"ok\n"


def test_console_survives_a_node_crash():
    """The pump is not a thread of the node: after kill -9 of space-node and a restart that
    re-attaches the sandbox, what the guest prints still lands in console.log."""
    n = Node("hardcrash")
    try:
        n.start()
        sb = n.create()
        sid, iid = sb["id"], sb["instance_id"]
        uid = UID_BASE + lease_of(iid)
        n.crash()
        n.start()
        n.exec(sid, "/bin/sh", "-c", "echo after-the-crash > /dev/ttyS0", user="root")
        log = os.path.join(n.instance_dir(sb), "console.log")
        deadline = time.monotonic() + 10
        while b"after-the-crash" not in open(log, "rb").read() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert b"after-the-crash" in open(log, "rb").read()
        n.kill(sid)
        deadline = time.monotonic() + 10  # the orphaned pump is reaped by init, not by us
        while processes_of_uid(uid, zombies=True) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert processes_of_uid(uid, zombies=True) == []
        assert lease_of(iid) is None
    finally:
        n.destroy()
