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
