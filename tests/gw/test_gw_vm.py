"""space-gw with everything real around it: space-api, space-node (its gw-client, the
sandbox's nftables redirect) and a booted guest, against the simulated internet
(tests/lib/internet.py). One sandbox, one allowed name: the allowed paths work from inside
the guest (HTTP, HTTPS through the egress CA the guest trusts), the forbidden ones do not,
and the decisions come back through the node and the api as the sandbox's egress log."""
import time

import pytest

from lib.internet import ALLOWED, FORBIDDEN, FORBIDDEN_IP, Internet
from lib.platform import EgressPlatform


@pytest.fixture(scope="module")
def plat():
    net = Internet(big_size=1 << 20)
    with net:
        p = EgressPlatform(net, name="gwvm")
        try:
            p.start()
            yield p
        finally:
            p.destroy()


def sh(plat, sid, script):
    return plat.exec(sid, "/bin/sh", "-c", script)


def test_guest_through_space_gw(plat):
    sid = plat.create_sandbox(network={"allow": [ALLOWED]})
    r = sh(plat, sid, f"curl -sS -m 20 http://{ALLOWED}/a http://{ALLOWED}/b")
    assert r["exit_code"] == 0 and r["stdout"].count(f"vhost={ALLOWED}") == 2, r
    r = sh(plat, sid, f"curl -sS -m 20 https://{ALLOWED}/tls")
    assert r["exit_code"] == 0 and f"vhost={ALLOWED}" in r["stdout"], r
    # Forbidden: the name does not resolve, the shared address refuses its Host and SNI,
    # the forbidden address gets nothing.
    r = sh(plat, sid, f"curl -sS -m 10 http://{FORBIDDEN}/")
    assert r["exit_code"] != 0, r
    r = sh(plat, sid, f"curl -sS -m 10 -H 'Host: {FORBIDDEN}' http://{ALLOWED}/")
    assert "403" in r["stdout"] or "space-gw" in r["stdout"], r
    r = sh(plat, sid, f"curl -sS -m 10 --connect-to {FORBIDDEN}:443:{ALLOWED}:443 "
                      f"https://{FORBIDDEN}/")
    assert r["exit_code"] != 0, r
    r = sh(plat, sid, f"curl -sS -m 10 http://{FORBIDDEN_IP}/")
    assert "leak" not in r["stdout"], r
    assert FORBIDDEN not in plat.internet.dns_queries()
    # The decisions, through node and api, in the sandbox's egress log.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        recs = plat.egress(sid)
        denied = [x for x in recs if x.get("verdict") == "deny"]
        if any(x.get("proto") == "tls" and x.get("verdict") == "allow" for x in recs) and \
                any(x.get("host") == FORBIDDEN for x in denied) and \
                any(x.get("sni") == FORBIDDEN for x in denied):
            break
        time.sleep(1)
    else:
        raise AssertionError(f"audit records missing: {plat.egress(sid)}")
    assert any(x.get("proto") == "dns" and x.get("name") == FORBIDDEN for x in denied)


# Runs as root in the flooding guest: opens as many TCP connections to the allowed web
# server as it can within 20 s (held open, silent), then reports how many connected and how
# many the gateway closed on it.
CONN_FLOOD = r'''
import resource, socket, time
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))  # root: past the default 1024
held, failed = [], 0
end = time.time() + 20
while time.time() < end and len(held) + failed < 3000:
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(("198.18.1.10", 80))
        held.append(s)
    except OSError:
        failed += 1
        s.close()
time.sleep(1)
closed = 0
for s in held:
    s.setblocking(False)
    try:
        closed += s.recv(1) == b""
    except BlockingIOError:
        pass
    except OSError:
        closed += 1
print(len(held), failed, closed)
'''


def test_guest_connection_flood_stays_in_its_sandbox(plat):
    """Issue 13's connection flood at the gateway from a real guest as root: thousands of
    connections are cut at the gateway's per-sandbox cap (audited as conn-limit), the host
    and a quiet sandbox keep answering, and the flooder's allowed requests work again after."""
    flooder = plat.create_sandbox(network={"allow": [ALLOWED]})
    quiet = plat.create_sandbox(network={"allow": [ALLOWED]})

    def quiet_fetch():
        t = time.monotonic()
        r = sh(plat, quiet, f"curl -sS -m 20 http://{ALLOWED}/quiet")
        assert r["exit_code"] == 0 and f"vhost={ALLOWED}" in r["stdout"], r
        return time.monotonic() - t

    base = min(quiet_fetch() for _ in range(3))
    # Detached: the exec returns, the flood runs 20 s and writes its counts.
    r = plat.exec(flooder, "/bin/sh", "-c",
                  "setsid python3 -c \"$FLOOD\" > /tmp/flood.out 2>&1 < /dev/null &",
                  env={"FLOOD": CONN_FLOOD})
    assert r["exit_code"] == 0, r
    time.sleep(8)
    loaded = max(quiet_fetch() for _ in range(3))
    deadline = time.monotonic() + 60
    while True:
        text = sh(plat, flooder, "cat /tmp/flood.out 2>/dev/null")["stdout"]
        out = text.split()
        if len(out) == 3 or "Traceback" in text or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert len(out) == 3, text
    held, failed, closed = map(int, out)
    print(f"guest connection flood: {held} connected, {failed} failed, {closed} closed by the "
          f"gateway; the quiet sandbox's fetch {base * 1000:.0f} ms idle -> "
          f"{loaded * 1000:.0f} ms during it ({loaded / base:.1f}x)")
    # Past its cap (256 by default) every further connection is closed at once.
    assert held + failed > 256 and closed + failed >= held + failed - 256, out
    assert loaded < 10 * base + 2, (base, loaded)
    deadline = time.monotonic() + 60
    while not any(x.get("reason") == "conn-limit" for x in plat.egress(flooder)):
        assert time.monotonic() < deadline, plat.egress(flooder)[-5:]
        time.sleep(1)
    # The flood is over (its sockets closed with its process): allowed requests work again.
    r = sh(plat, flooder, f"curl -sS -m 20 http://{ALLOWED}/after")
    assert r["exit_code"] == 0 and f"vhost={ALLOWED}" in r["stdout"], r
