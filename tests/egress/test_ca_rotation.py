"""Rotation of the deployment CA (issue 10 item 4: the egress gateway's CA, which space-gw
terminates guest TLS with), end to end: space-api, space-node, space-gw, real guests and the
simulated internet of tests/lib/internet.py (allowed.test on HTTPS).

One rotation, step by step, through the api's POST /v1/egress-ca/rotate, checked at every
step in the guest (its trust store, an HTTPS request with Python's default context, and which
CA issued the leaf it was shown) and in space-gw's data directory:

  stable    the guest trusts the current CA; leaves are the current CA's
  stage     a next CA: the guest's bundle holds both, leaves still the current CA's; a
            switch is refused (409) while a running sandbox's agent has not taken the bundle
            (its VMM stopped with SIGSTOP)
  restart   space-gw restarted while staged keeps the phase and both CAs
  switch    leaves are the next CA's; HTTPS still works; a sandbox paused before the stage
            trusts the new CA as soon as its resume is answered
  restart   and again while switched
  finish    the next CA is the current one: the old one is gone from space-gw's data
            directory and from the guests' bundle; HTTPS still works; a sandbox created
            under the old CA, suspended and restored from its disk, trusts the new one when
            the restore is answered (its create's /init, which that restore replays, named
            the old one)

Plus the status codes of both APIs (400 unknown step/field, 403 without the host admin's
socket, 409 out of order).
"""
import base64
import json
import os
import signal
import subprocess
import tempfile
import time

import pytest

from lib.internet import ALLOWED, internet  # noqa: F401 (fixture)
from lib.platform import SPACE, EgressPlatform, live_qemu_pids

GUEST_CERT = "/usr/local/share/ca-certificates/space-egress.crt"

# In the guest: an HTTPS GET with the default trust (the system bundle the agent installed
# the caBundle into), then the leaf the gateway showed, as base64 DER.
GUEST_TLS = r"""
import base64, socket, ssl, sys, urllib.request
res = urllib.request.urlopen("https://%s/", timeout=30)
print(res.status)
ctx = ssl.create_default_context()
with socket.create_connection(("%s", 443), timeout=30) as s:
    with ctx.wrap_socket(s, server_hostname="%s") as t:
        print(base64.b64encode(t.getpeercert(binary_form=True)).decode())
""" % (ALLOWED, ALLOWED, ALLOWED)


@pytest.fixture(scope="module")
def plat(internet):
    p = EgressPlatform(internet, "carot")
    try:
        p.start()
        yield p
    finally:
        p.destroy()


@pytest.fixture(scope="module")
def sandboxes(plat):
    """Two sandboxes allowed to reach allowed.test: a (running throughout) and b (paused
    before the stage, resumed after the switch)."""
    sids = [plat.create_sandbox(network={"allow": [ALLOWED]}) for _ in range(2)]
    try:
        yield sids
    finally:
        for sid in sids:
            plat.admin("DELETE", f"/v1/sandboxes/{sid}?wait=true")


def gw_file(plat, name):
    with open(os.path.join(plat.gw.data, name)) as f:
        return f.read()


def certs(pem):
    """The PEM blocks of pem, normalised."""
    out, cur = [], None
    for line in pem.splitlines():
        if line.startswith("-----BEGIN CERTIFICATE"):
            cur = [line]
        elif cur is not None:
            cur.append(line)
            if line.startswith("-----END CERTIFICATE"):
                out.append("\n".join(cur) + "\n")
                cur = None
    return out


def guest_bundle(plat, sid):
    return certs(plat.sh(sid, f"cat {GUEST_CERT}"))


def guest_tls(plat, sid):
    """(status, leaf PEM) of an HTTPS request from the guest through space-gw."""
    res = plat.exec(sid, "python3", "-c", GUEST_TLS, user="user", timeout_ms=120000)
    assert res["exit_code"] == 0, res["stderr"][-2000:]
    status, leaf = res["stdout"].split()
    der = base64.b64decode(leaf)
    body = base64.encodebytes(der).decode()
    return int(status), "-----BEGIN CERTIFICATE-----\n" + body + "-----END CERTIFICATE-----\n"


def issued_by(leaf_pem, ca_pem):
    """openssl verify of the leaf against ca_pem alone (both CAs have the same name)."""
    with tempfile.TemporaryDirectory() as d:
        leaf, ca = os.path.join(d, "leaf.pem"), os.path.join(d, "ca.pem")
        with open(leaf, "w") as f:
            f.write(leaf_pem)
        with open(ca, "w") as f:
            f.write(ca_pem)
        r = subprocess.run(["openssl", "verify", "-CAfile", ca, leaf], capture_output=True,
                           text=True, timeout=30)
        return r.returncode == 0


def status(plat):
    code, res = plat.admin("GET", "/v1/egress-ca")
    assert code == 200, (code, res)
    return res


def rotate(plat, step, want=200):
    code, res = plat.admin("POST", "/v1/egress-ca/rotate", {"step": step}, timeout=120)
    assert code == want, (step, code, res)
    return res


def wait_all_have_bundle(plat, timeout=120):
    deadline = time.monotonic() + timeout
    while True:
        res = status(plat)
        if res["with_bundle"] == res["sandboxes"]:
            return res
        assert time.monotonic() < deadline, (res, plat.node.log())
        time.sleep(0.5)


def restart_gw(plat):
    plat.gw.stop()
    plat.gw.start()
    deadline = time.monotonic() + 60
    while True:
        code, res = plat.admin("GET", "/v1/egress-ca")
        if code == 200:
            return res
        assert code == 503 and time.monotonic() < deadline, (code, res)
        time.sleep(0.2)


def verb(plat, sid, name, state, body=None):
    code, res = plat.admin("POST", f"/v1/sandboxes/{sid}/{name}?wait=true", body, timeout=900)
    assert code == 200 and res["state"] == state, (code, res)


def instance_id(plat, sid):
    code, res = plat.node.call("GET", f"/v1/sandboxes/{sid}")
    assert code == 200, (code, res)
    return res["instance_id"]


def tick_pushes(plat, sid):
    """How often the node's tick (egress_push_ca) sent a CA to sid's agent so far."""
    iid = instance_id(plat, sid)
    with open(plat.node.log_path, errors="replace") as f:
        return sum(1 for line in f if "sending the egress CA" in line and iid in line)


def vmm_pids(plat, sid):
    pids = live_qemu_pids(instance_id(plat, sid))
    assert pids, sid
    return pids


def test_status_codes(plat, sandboxes):
    res = status(plat)
    assert res["phase"] == "stable" and res["nodes"][0]["next"] is None, res
    assert res["nodes"][0]["current"] and len(res["nodes"][0]["current"]) == 64, res
    for body, want in [({"step": "rollback"}, 400), ({"step": "stage", "force": True}, 400),
                       ({}, 400), ({"step": 1}, 400), ([], 400)]:
        code, res = plat.admin("POST", "/v1/egress-ca/rotate", body)
        assert code == want and res["code"] == want and res["message"], (body, code, res)
    # Out of order: nothing to switch to, nothing to finish.
    assert "next step: stage" in rotate(plat, "switch", 409)["message"]
    assert "next step: stage" in rotate(plat, "finish", 409)["message"]
    # An API key reads the state but cannot rotate: that is the host admin's.
    import urllib.error
    import urllib.request
    hdr = {"X-API-Key": plat.key, "Content-Type": "application/json"}
    with urllib.request.urlopen(urllib.request.Request(f"{plat.url}/v1/egress-ca",
                                                       headers=hdr), timeout=30) as r:
        assert json.load(r)["phase"] == "stable"
    req = urllib.request.Request(f"{plat.url}/v1/egress-ca/rotate", method="POST", headers=hdr,
                                 data=json.dumps({"step": "stage"}).encode())
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=30)
    assert e.value.code == 403
    # The node's own routes refuse the same.
    for body in ({"step": "nope"}, {"step": "stage", "x": 1}):
        code, res = plat.node.call("POST", "/v1/egress-ca/rotate", body)
        assert code == 400, (code, res)
    # The CLI (the api's local socket): status as text and JSON, a refused step is exit 1.
    r = subprocess.run([SPACE, "ca", "status"], env=plat.env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("egress CA: stable;"), (r.stdout, r.stderr)
    r = subprocess.run([SPACE, "ca", "status", "--json"], env=plat.env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and json.loads(r.stdout)["phase"] == "stable", r.stdout
    r = subprocess.run([SPACE, "ca", "rotate", "finish"], env=plat.env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1 and "next step: stage" in r.stderr, (r.stdout, r.stderr)
    assert status(plat)["phase"] == "stable"
    assert not os.path.exists(os.path.join(plat.gw.data, "ca-next.key"))


def test_rotation_end_to_end(plat, sandboxes):
    a, b = sandboxes
    old_ca = gw_file(plat, "ca.crt")
    res = wait_all_have_bundle(plat)
    assert res["sandboxes"] == 2, res

    # stable: the guest trusts the current CA, whose leaf it is shown.
    assert guest_bundle(plat, a) == certs(old_ca)
    code, leaf = guest_tls(plat, a)
    assert code == 200 and issued_by(leaf, old_ca)

    verb(plat, b, "pause", "paused")
    # stage while a's VMM is stopped: its agent cannot take the bundle, so switch is refused.
    pids = vmm_pids(plat, a)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        res = rotate(plat, "stage")
        assert res["phase"] == "staged" and res["nodes"][0]["next"], res
        res = rotate(plat, "switch", 409)
        assert "have not acknowledged" in res["message"], res
        assert status(plat)["phase"] == "staged"
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    new_ca = gw_file(plat, "ca-next.crt")
    assert certs(new_ca) != certs(old_ca)
    assert os.stat(os.path.join(plat.gw.data, "ca-next.key")).st_mode & 0o777 == 0o600
    rotate(plat, "stage")  # a repeat: nothing changes
    assert gw_file(plat, "ca-next.crt") == new_ca
    res = wait_all_have_bundle(plat)
    assert res["sandboxes"] == 1 and res["not_running"] == 1, res  # b is paused

    # staged: both CAs trusted, the current one still signs.
    assert guest_bundle(plat, a) == certs(old_ca) + certs(new_ca)
    code, leaf = guest_tls(plat, a)
    assert code == 200 and issued_by(leaf, old_ca) and not issued_by(leaf, new_ca)

    # A gateway restart keeps the phase and both CAs.
    res = restart_gw(plat)
    assert res["phase"] == "staged", res
    assert gw_file(plat, "ca.crt") == old_ca and gw_file(plat, "ca-next.crt") == new_ca
    wait_all_have_bundle(plat)

    # switch: the next CA signs; the guest, which trusts both, still gets 200.
    res = rotate(plat, "switch")
    assert res["phase"] == "switched", res
    code, leaf = guest_tls(plat, a)
    assert code == 200 and issued_by(leaf, new_ca) and not issued_by(leaf, old_ca)

    # b slept through the stage: its resume gives it the bundle before it is answered.
    pushes = tick_pushes(plat, b)
    verb(plat, b, "resume", "running")
    assert f"to instance {instance_id(plat, b)}'s agent with its resume" in plat.node.log()
    code, leaf = guest_tls(plat, b)
    assert code == 200 and issued_by(leaf, new_ca)
    assert guest_bundle(plat, b) == certs(old_ca) + certs(new_ca)
    assert tick_pushes(plat, b) == pushes  # the resume did it, not the tick's re-send

    res = restart_gw(plat)
    assert res["phase"] == "switched", res
    code, leaf = guest_tls(plat, a)
    assert code == 200 and issued_by(leaf, new_ca)

    # finish: the next is the current; the old CA is gone from the gateway and the guests.
    res = rotate(plat, "finish")
    assert res["phase"] == "stable" and res["nodes"][0]["next"] is None, res
    assert gw_file(plat, "ca.crt") == new_ca
    for name in ("ca-next.key", "ca-next.crt", "ca-phase"):
        assert not os.path.exists(os.path.join(plat.gw.data, name)), name
    assert os.stat(os.path.join(plat.gw.data, "ca.key")).st_mode & 0o777 == 0o600
    res = wait_all_have_bundle(plat)
    assert res["sandboxes"] == 2, res
    for sid in (a, b):
        assert guest_bundle(plat, sid) == certs(new_ca)
        code, leaf = guest_tls(plat, sid)
        assert code == 200 and issued_by(leaf, new_ca)
    rotate(plat, "finish", 409)

    # a was created under the old CA, which its create's /init carried: a restore that boots
    # from the disk replays that /init, so it hands over the bundle before it answers.
    verb(plat, a, "suspend", "suspended")
    pushes = tick_pushes(plat, a)
    verb(plat, a, "restore", "running", {"memory": False})
    assert f"to instance {instance_id(plat, a)}'s agent with its restore" in plat.node.log()
    assert guest_bundle(plat, a) == certs(new_ca)
    code, leaf = guest_tls(plat, a)
    assert code == 200 and issued_by(leaf, new_ca)
    assert tick_pushes(plat, a) == pushes  # the restore did it, not the tick's re-send

    # A sandbox created now is given the new CA alone.
    c = plat.create_sandbox(network={"allow": [ALLOWED]})
    try:
        assert guest_bundle(plat, c) == certs(new_ca)
        code, _ = guest_tls(plat, c)
        assert code == 200
    finally:
        plat.admin("DELETE", f"/v1/sandboxes/{c}?wait=true")
