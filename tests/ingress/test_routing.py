"""The ingress reads routes from memory, never from the store (issue 7 item 3).

A real space-api (its ingress on loopback) with a real space-node and guests:

- routes follow every write the controller commits: a sandbox is refused
  while it is being created, routed as soon as its create returns, and
  refused as soon as its kill is accepted;
- with the SQLite store's write lock held by another process (the sqlite3
  CLI in an open BEGIN EXCLUSIVE, longer than the store's 5 s busy timeout),
  requests through the ingress to a running sandbox still answer at once;
- two replicas on one PostgreSQL (SPACE_TEST_PG_URL): a sandbox created
  through one is routed by the other's ingress within about a second (the
  route cache's poll on the 1 s tick), and refused there after its kill.
"""
import os
import subprocess
import time

import pytest
import requests

from lib.platform import e2b, replica_pair, store_platform

DOMAIN = "space.test"
PG_URL = os.environ.get("SPACE_TEST_PG_URL")


def through_ingress(plat, sid, port=8000, path="/", timeout=10, headers=None):
    h = {"Host": f"{port}-{sid}.{DOMAIN}", **(headers or {})}
    return requests.get(plat.ingress_url + path, headers=h, timeout=timeout)


def create(plat, **extra):
    r = e2b(plat, "POST", "/sandboxes", json={"templateID": "base", "timeout": 900, **extra})
    assert r.status_code == 201, r.text
    return r.json()


def serve_http(plat, sid, port=8000):
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/exec", {
        "cmd": "/bin/sh", "args": ["-c", f"cd /tmp && echo hello >index.txt && nohup python3 -m "
                                         f"http.server {port} --bind 0.0.0.0 >/dev/null 2>&1 &"]})
    assert status == 200 and res["exit_code"] == 0, res
    deadline = time.monotonic() + 60
    while True:
        r = through_ingress(plat, sid, port, "/index.txt")
        if r.status_code == 200:
            return
        assert time.monotonic() < deadline, (r.status_code, r.text)
        time.sleep(0.2)


def not_found(r):
    return r.status_code == 502 and "not found" in r.text


@pytest.fixture(scope="module")
def plat():
    with store_platform("routing", "sqlite") as p:
        yield p


def test_routes_follow_create_and_kill(plat):
    assert not_found(through_ingress(plat, "aaaaaaaaaaaaaaaaaaaa"))
    sb = create(plat)
    sid = sb["sandboxID"]
    # Routed as soon as the create returned: no poll interval to wait for.
    r = through_ingress(plat, sid, 49983, "/health")
    assert r.status_code in (200, 204), (r.status_code, r.text)
    serve_http(plat, sid)
    assert through_ingress(plat, sid, 8000, "/index.txt").text == "hello\n"
    # Refused as soon as the kill was accepted, before any tick.
    assert e2b(plat, "DELETE", f"/sandboxes/{sid}").status_code == 204
    assert not_found(through_ingress(plat, sid, 8000, "/index.txt"))
    assert not_found(through_ingress(plat, sid, 49983, "/health"))


def test_locked_store_does_not_hold_traffic(plat):
    sid = create(plat)["sandboxID"]
    serve_http(plat, sid)
    db = os.path.join(plat.data, "space.db")
    lock = subprocess.Popen(["sqlite3", db], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        lock.stdin.write(".timeout 10000\nBEGIN EXCLUSIVE;\nSELECT 'locked';\n")
        lock.stdin.flush()
        assert lock.stdout.readline().strip() == "locked"
        t_end = time.monotonic() + 8  # longer than the store's busy timeout (5 s)
        latencies = []
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            r = through_ingress(plat, sid, 8000, "/index.txt", timeout=10)
            latencies.append(time.monotonic() - t0)
            assert r.status_code == 200 and r.text == "hello\n", (r.status_code, r.text)
            time.sleep(0.1)
        print(f"\nstore locked 8 s: {len(latencies)} ingress requests, "
              f"max {max(latencies) * 1000:.0f} ms, "
              f"median {sorted(latencies)[len(latencies) // 2] * 1000:.0f} ms")
        assert max(latencies) < 1.0, latencies
    finally:
        lock.stdin.write("ROLLBACK;\n.quit\n")
        lock.stdin.close()
        lock.wait(timeout=30)
    # The API works again once the lock is gone.
    assert e2b(plat, "DELETE", f"/sandboxes/{sid}").status_code == 204


@pytest.mark.skipif(not PG_URL, reason="needs SPACE_TEST_PG_URL")
def test_replica_routes_within_a_second():
    with replica_pair("route", PG_URL) as (a, b):
        sid = create(a)["sandboxID"]
        t0 = time.monotonic()
        while through_ingress(b, sid, 49983, "/health").status_code not in (200, 204):
            assert time.monotonic() - t0 < 3, "replica b never routed the sandbox"
            time.sleep(0.05)
        print(f"\nreplica b routed a sandbox of replica a after {time.monotonic() - t0:.2f} s")
        assert e2b(a, "DELETE", f"/sandboxes/{sid}").status_code == 204
        t0 = time.monotonic()
        while not not_found(through_ingress(b, sid, 49983, "/health")):
            assert time.monotonic() - t0 < 3, "replica b kept routing a killed sandbox"
            time.sleep(0.05)
        print(f"replica b refused it {time.monotonic() - t0:.2f} s after the kill")


def test_private_traffic_demands_the_traffic_token(plat):
    """E2B network.allowPublicTraffic: false: user ports need e2b-traffic-access-token."""
    sb = create(plat, network={"allowPublicTraffic": False})
    sid, token = sb["sandboxID"], sb["trafficAccessToken"]
    assert isinstance(token, str) and len(token) == 32, sb
    info = e2b(plat, "GET", f"/sandboxes/{sid}").json()
    assert info["network"] == {"allowPublicTraffic": False}, info
    hdr = {"e2b-traffic-access-token": token}
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/exec", {
        "cmd": "/bin/sh", "args": ["-c", "cd /tmp && echo hello >index.txt && nohup python3 -m "
                                         "http.server 8000 --bind 0.0.0.0 >/dev/null 2>&1 &"]})
    assert status == 200 and res["exit_code"] == 0, res
    deadline = time.monotonic() + 60
    while through_ingress(plat, sid, 8000, "/index.txt", headers=hdr).status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    r = through_ingress(plat, sid, 8000, "/index.txt")
    assert r.status_code == 403, (r.status_code, r.text)
    assert r.json() == {"sandboxId": sid, "code": 403, "message":
                        "Sandbox is secured with traffic access token. Token header "
                        "'e2b-traffic-access-token' is missing"}, r.text
    r = through_ingress(plat, sid, 8000, "/index.txt",
                        headers={"e2b-traffic-access-token": "0" * 32})
    assert r.status_code == 403 and "invalid" in r.json()["message"], r.text
    assert through_ingress(plat, sid, 8000, "/index.txt", headers=hdr).text == "hello\n"
    # envd keeps its own token and needs no traffic token.
    r = through_ingress(plat, sid, 49983, "/health")
    assert r.status_code in (200, 204), (r.status_code, r.text)
    # A public sandbox: null token, no check.
    pub = create(plat)
    assert pub["trafficAccessToken"] is None
    assert e2b(plat, "GET", f"/sandboxes/{pub['sandboxID']}").json()["network"] == {
        "allowPublicTraffic": True}
    for s in (sid, pub["sandboxID"]):
        assert e2b(plat, "DELETE", f"/sandboxes/{s}").status_code == 204
