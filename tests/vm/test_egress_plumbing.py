"""The node's half of egress (issue 9 items 1 and 3): nftables in each sandbox's namespace,
the DNS and gateway sockets it opens there and hands to space-gw over the control socket
(src/shared/gw-proto.h), policy updates, the audit ring, and re-attaching after restarts.

space-gw itself is not started here: a stand-in for its side of the control socket
(tests/lib/gwstub.py) plays its part, so every message and descriptor the node sends can be
checked. It is not a gateway: serve_one() below accepts one TCP connection on the
descriptor the node handed it and answers it, and reads one datagram from the DNS descriptor.
"""
import fcntl
import json
import os
import socket
import struct
import subprocess
import tempfile
import threading
import time

import pytest

from lib.gwstub import GwStub
from lib.platform import Node

SO_ORIGINAL_DST = 80
SIOCGSKNS = 0x894C


def netns_inode(fd):
    """The inode of the network namespace socket fd belongs to (SIOCGSKNS)."""
    nsfd = fcntl.ioctl(fd, SIOCGSKNS)
    try:
        return os.fstat(nsfd).st_ino
    finally:
        os.close(nsfd)


def counters(iid):
    out = subprocess.run(["ip", "netns", "exec", f"space-{iid}", "nft", "-j", "list",
                          "counters"], check=True, capture_output=True, text=True).stdout
    return {c["counter"]["name"]: c["counter"]["packets"]
            for c in json.loads(out)["nftables"] if "counter" in c}


def guest_py(node, sid, code, timeout_ms=30000):
    res = node.exec(sid, "python3", "-c", code, user="root", timeout_ms=timeout_ms)
    return res


def check_attach(msg, fds, sb, policy):
    iid = sb["instance_id"]
    assert msg["sandbox"] == sb["id"] and msg["policy"] == policy, msg
    assert len(fds) == 2, fds
    dns = socket.socket(fileno=os.dup(fds[0]))
    gw = socket.socket(fileno=os.dup(fds[1]))
    try:
        assert dns.type == socket.SOCK_DGRAM and dns.getsockname() == ("169.254.0.1", 53)
        assert gw.type == socket.SOCK_STREAM and gw.getsockname() == ("169.254.0.1", 15001)
        assert gw.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1
        # Both bound inside the sandbox's namespace, not the host's.
        ns = os.stat(f"/run/netns/space-{iid}").st_ino
        assert netns_inode(fds[0]) == ns and netns_inode(fds[1]) == ns
        assert netns_inode(fds[0]) != os.stat("/proc/self/ns/net").st_ino
        for fd in fds:
            assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK
    finally:
        dns.close()
        gw.close()


def serve_one(fds, results):
    """Accepts one redirected connection and one DNS datagram on the node's descriptors."""
    gw = socket.socket(fileno=os.dup(fds[1]))
    dns = socket.socket(fileno=os.dup(fds[0]))
    gw.setblocking(True)
    dns.setblocking(True)
    gw.settimeout(60)
    dns.settimeout(60)
    try:
        conn, peer = gw.accept()
        od = conn.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
        port, ip = struct.unpack("!2xH4s8x", od)
        results["peer"] = peer
        results["original_dst"] = (socket.inet_ntoa(ip), port)
        conn.settimeout(30)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(4096)
            if not chunk:
                break
            head += chunk
        results["head"] = head
        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 16\r\n\r\nhello via driver")
        conn.close()
        data, peer = dns.recvfrom(512)
        results["dns"] = (data, peer)
        dns.sendto(b"dns-answer", peer)
    except OSError as e:
        results["error"] = repr(e)
    finally:
        gw.close()
        dns.close()


def test_egress_plumbing():
    gw_path = tempfile.mktemp(prefix="gw-", suffix=".sock", dir="/run/space")
    gw = GwStub(gw_path).start()
    n = Node("egress", extra_args=["--gw-socket", gw_path])
    try:
        n.start()
        hello, _ = gw.expect("hello")
        assert hello["node"]

        policy = {"internet": False, "allow": ["allowed.test"], "deny": []}
        status, body = n.call("POST", "/v1/sandboxes", {"network": {"allow": ["*.bad..x"]}})
        assert status == 400 and "network" in body["message"], body
        sb = n.create(network={"allow": ["allowed.test"]})
        sid, iid = sb["id"], sb["instance_id"]
        assert sb["network"] == policy, sb
        msg, fds = gw.expect("attach", instance=iid)
        check_attach(msg, fds, sb, policy)
        with open(os.path.join(n.instance_dir(sb), "instance.json")) as f:
            assert json.load(f)["network"] == policy
        # The CA of the hello reply went to the agent's /init (caBundle), which installed it.
        res = n.exec(sid, "cat", "/usr/local/share/ca-certificates/space-egress.crt")
        assert res["stdout"].decode().strip() == gw.ca.strip(), res

        # The guest's TCP to anywhere arrives at the gateway descriptor with its original
        # destination; its DNS to the proxy address arrives at the DNS descriptor.
        results = {}
        t = threading.Thread(target=serve_one, args=(fds, results), daemon=True)
        t.start()
        res = n.exec(sid, "curl", "-sS", "-m", "20", "http://198.18.1.10/", timeout_ms=40000)
        assert res["exit_code"] == 0 and res["stdout"] == b"hello via driver", res
        res = guest_py(n, sid, "import socket; s = socket.socket(socket.AF_INET, "
                       "socket.SOCK_DGRAM); s.settimeout(20); "
                       "s.sendto(b'query', ('169.254.0.1', 53)); print(s.recvfrom(64)[0])")
        t.join(timeout=60)
        assert "error" not in results, results
        assert results["original_dst"] == ("198.18.1.10", 80), results
        assert results["peer"][0] == "169.254.0.2"
        assert b"Host: 198.18.1.10" in results["head"]
        assert results["dns"][0] == b"query" and results["dns"][1][0] == "169.254.0.2"
        assert res["stdout"].strip() == b"b'dns-answer'", res

        # What the guest may not do is dropped and counted by reason.
        before = counters(iid)
        code = ("import socket\n"
                "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                "for dst in [('198.18.0.53', 53), ('198.18.1.10', 443), ('169.254.0.1', 5353)]:\n"
                "    u.sendto(b'x', dst)\n"
                "i = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)\n"
                "i.sendto(b'\\x08\\x00\\xf7\\xff\\x00\\x00\\x00\\x00', ('198.18.1.10', 0))\n"
                "i.sendto(b'\\x08\\x00\\xf7\\xff\\x00\\x00\\x00\\x00', ('169.254.0.1', 0))\n"
                "t = socket.socket(); t.settimeout(2)\n"
                "for port in (15001, 22):\n"
                "    try:\n"
                "        t.connect(('169.254.0.1', port)); print('CONNECTED', port)\n"
                "    except OSError as e:\n"
                "        print('refused', port, e)\n"
                "    t = socket.socket(); t.settimeout(2)\n"
                # An IPv6 frame from the guest's own MAC, whatever the guest kernel allows.
                "p = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n"
                "p.bind(('eth0', 0))\n"
                "hdr = bytes.fromhex('333300000001' '020000000002' '86dd')\n"
                "ip6 = bytes.fromhex('60000000000811ff') + bytes(15) + b'\\x01' + "
                "bytes.fromhex('ff02') + bytes(13) + b'\\x01'\n"
                "for _ in range(3):\n"
                "    p.send(hdr + ip6 + bytes.fromhex('0035003500080000'))\n")
        res = guest_py(n, sid, code)
        assert b"CONNECTED" not in res["stdout"], res
        after = counters(iid)
        print("nft counters moved:", {k: after[k] - before[k] for k in after
                                      if after[k] != before[k]})
        assert after["guest_udp"] - before["guest_udp"] >= 3, (before, after)
        assert after["guest_icmp"] - before["guest_icmp"] >= 2, (before, after)
        # Straight to the gateway's port (not redirected), and to another host port.
        assert after["guest_direct"] - before["guest_direct"] >= 1, (before, after)
        assert after["guest_new"] - before["guest_new"] >= 1, (before, after)
        assert after["not_ipv4"] - before["not_ipv4"] >= 3, (before, after)

        # A new policy reaches space-gw; a bad one is refused.
        status, body = n.call("PUT", f"/v1/sandboxes/{sid}/network", {"internet": True})
        assert status == 200 and body == {}, body
        msg, _ = gw.expect("policy", instance=iid)
        assert msg["policy"] == {"internet": True, "allow": [], "deny": []}, msg
        status, body = n.call("PUT", f"/v1/sandboxes/{sid}/network", {"allow": ["a..b"]})
        assert status == 400, body
        status, body = n.call("PUT", f"/v1/sandboxes/{sid}/network", {"bogus": 1})
        assert status == 400, body
        # Valid, but more than one control datagram can carry: refused, not half-applied.
        long_names = [".".join([f"{i:03d}" + "a" * 60] + ["b" * 63] * 2 + ["c" * 55, "test"])
                      for i in range(256)]
        status, body = n.call("PUT", f"/v1/sandboxes/{sid}/network", {"allow": long_names})
        assert status == 400 and "too large" in body["message"], body
        status, body = n.call("GET", f"/v1/sandboxes/{sid}")
        assert body["network"]["internet"] is True

        # Audit records space-gw sends are served, numbered, from the node's ring.
        status, body = n.call("GET", "/v1/egress-audit")
        assert status == 200 and body["records"] == [] and body["next"] == 0, body
        epoch = body["epoch"]
        recs = [{"sandbox": sid, "time": 1, "proto": "dns", "name": "forbidden.test",
                 "verdict": "deny", "reason": "deny-default", "junk": "x"},
                {"sandbox": sid, "time": 2, "proto": "http", "host": "allowed.test",
                 "dst": "198.18.1.10", "port": 80, "verdict": "allow",
                 "reason": "allow-name", "bytesOut": 10, "bytesIn": 20, "durationMs": 3},
                {"proto": "smtp"}]
        gw.audit(recs)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            status, body = n.call("GET", "/v1/egress-audit?after=0&limit=10")
            if body["records"]:
                break
            time.sleep(0.1)
        assert body["epoch"] == epoch and body["next"] == 2, body
        assert [r["seq"] for r in body["records"]] == [1, 2]
        assert body["records"][0]["name"] == "forbidden.test"
        assert "junk" not in body["records"][0]
        assert body["records"][1]["bytesIn"] == 20
        status, body = n.call("GET", "/v1/egress-audit?after=1")
        assert [r["seq"] for r in body["records"]] == [2]
        for bad in ("limit=0", "limit=10001", "after=x", "since=1"):
            status, body = n.call("GET", f"/v1/egress-audit?{bad}")
            assert status == 400, (bad, body)

        # A misbehaving gateway (garbage, descriptors sent to the node, a reply to nothing)
        # gets its session ended; the node is unharmed and attaches again on the next one.
        devnull = os.open("/dev/null", os.O_RDONLY)
        for bad in (lambda: gw.send_raw(b"\xff{not json"),
                    lambda: gw.send_raw(b'{"type":"audit","records":[]}', [devnull]),
                    lambda: gw.send({"type": "detach", "instance": iid, "ok": True})):
            bad()
            gw.expect("hello", timeout=30)
            msg, fds = gw.expect("attach", instance=iid, timeout=30)
            check_attach(msg, fds, sb, {"internet": True, "allow": [], "deny": []})
        os.close(devnull)
        status, _ = n.call("GET", "/health")
        assert status == 200

        # space-gw restarts: the node comes back on its own and attaches everything again.
        gw.stop()
        gw = GwStub(gw_path).start()
        t0 = time.monotonic()
        gw.expect("hello", timeout=30)
        msg, fds = gw.expect("attach", instance=iid, timeout=30)
        print(f"re-attached {time.monotonic() - t0:.2f} s after space-gw came back")
        check_attach(msg, fds, sb, {"internet": True, "allow": [], "deny": []})

        # The node restarts: after its hello, the sockets are opened again and attached.
        n.stop()
        n.start()
        gw.expect("hello", timeout=60)
        msg, fds = gw.expect("attach", instance=iid, timeout=60)
        check_attach(msg, fds, sb, {"internet": True, "allow": [], "deny": []})
        results = {}
        t = threading.Thread(target=serve_one, args=(fds, results), daemon=True)
        t.start()
        res = n.exec(sid, "curl", "-sS", "-m", "20", "http://198.18.1.66:8080/x",
                     timeout_ms=40000)
        assert res["stdout"] == b"hello via driver", res
        guest_py(n, sid, "import socket; s = socket.socket(socket.AF_INET, "
                 "socket.SOCK_DGRAM); s.settimeout(20); s.sendto(b'q2', ('169.254.0.1', 53)); "
                 "s.recvfrom(64)")
        t.join(timeout=60)
        assert results.get("original_dst") == ("198.18.1.66", 8080), results

        # Killing the sandbox detaches it.
        n.kill(sid)
        gw.expect("detach", instance=iid, timeout=30)
        assert not n.leftovers(), n.leftovers()
    finally:
        n.destroy()
        gw.stop()


@pytest.mark.parametrize("mode", ["missing", "off"])
def test_without_gateway_sandboxes_still_work(mode):
    """No space-gw listening (one warning, quiet retries) or --no-gw (none): sandboxes work,
    and the guest's connections are refused at once, not left hanging."""
    gw_path = tempfile.mktemp(prefix="gw-none-", suffix=".sock", dir="/run/space")
    n = Node("nogw", extra_args=["--gw-socket", gw_path] if mode == "missing" else ["--no-gw"])
    try:
        n.start()
        sb = n.create()
        res = n.exec(sb["id"], "curl", "-sS", "-m", "10", "http://198.18.1.10/",
                     timeout_ms=60000)
        # 7 = could not connect: the redirect found no listener and the guest got a reset
        # (left hanging, curl would have given up at -m 10 with 28; no wall-clock check,
        # which a loaded machine's exec round trip would make flaky).
        assert res["exit_code"] == 7, res
        time.sleep(2.5)  # a few retries
        assert n.log().count("cannot connect") == (1 if mode == "missing" else 0), n.log()
        status, body = n.call("GET", "/v1/egress-audit")
        assert status == 200 and body["records"] == [], body
        n.kill(sb["id"])
    finally:
        n.destroy()
