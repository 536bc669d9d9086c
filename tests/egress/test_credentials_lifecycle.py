"""Credentials across a sandbox's lifecycle (issue 10; docs/architecture.md "Credentials"),
on the full platform of tests/egress/test_credentials.py (space-api with --secrets-key,
space-node, space-gw, a real guest, the simulated internet's api.secret.test):

- a template's default policy (PUT /v1/templates/base/network): a sandbox created from it
  without a policy of its own gets the injected token without naming the rule;
- a secret rotated while the sandbox is paused, and again while it is suspended, applies
  from the first request after resume / restore (the api re-sends the policy then);
- while it is suspended, no file of the platform (its suspend snapshot and memory file, its
  disk, the store) holds the token in any encoding (plain, base64, hex, URL-encoded);
- nor does a full node snapshot (disk-snapshot.h: rootfs.ext4 and vmstate) taken right
  after an injected request.
"""
import os
import random
import string
import time
import uuid

import pytest

from lib.internet import ALLOWED, SECRET_API, internet  # noqa: F401 (fixture)
from lib.platform import EgressPlatform
from test_credentials import RULE, encodings, guest_get, scan_file


@pytest.fixture(scope="module")
def plat(internet):
    p = EgressPlatform(internet, "creds-life")
    p.api_args += ["--secrets-key", os.path.join(p.gw.data, "secrets.pub")]
    try:
        p.start()
        yield p
    finally:
        p.destroy()


@pytest.fixture(scope="module")
def sandbox(plat, internet):
    status, res = plat.admin("POST", "/v1/secrets", {"name": "apitoken",
                                                     "value": internet.secret_token})
    assert status in (200, 201), (status, res)
    status, res = plat.admin("PUT", "/v1/templates/base/network",
                             {"allow": [SECRET_API, ALLOWED], "inject": [RULE]})
    assert status == 200, (status, res)
    sid = plat.create_sandbox()  # no policy: the template's
    try:
        yield sid
    finally:
        plat.admin("DELETE", f"/v1/sandboxes/{sid}?wait=true")
        plat.admin("DELETE", "/v1/templates/base/network")


def last_auth(internet, n):
    got = [r["auth"] for r in internet.requests()[n:] if r["host"] == SECRET_API]
    assert got, internet.requests()[n:]
    return got[-1]


def get_until(plat, internet, sid, want_auth, timeout=120):
    """A guest request until the upstream sees want_auth (the re-sent policy reaches space-gw
    through an operation that runs just after the resume's)."""
    deadline = time.monotonic() + timeout
    while True:
        n = len(internet.requests())
        status, body = guest_get(plat, sid, f"https://{SECRET_API}/v1/user")
        auth = last_auth(internet, n)
        if auth == want_auth or time.monotonic() > deadline:
            return status, auth
        time.sleep(1)


def scan_tree(plat, roots, needles):
    """(files holding a needle, {path: size} of every file scanned) under roots."""
    hits, sizes = [], {}
    for root in roots:
        for d, _, files in os.walk(root):
            for name in files:
                p = os.path.realpath(os.path.join(d, name))
                if p in sizes or os.path.islink(p) or not os.path.isfile(p):
                    continue
                try:
                    sizes[p] = os.path.getsize(p)
                    if scan_file(p, needles):
                        hits.append(p)
                except OSError:
                    continue
    return hits, sizes


def rotate(plat, value):
    status, res = plat.admin("PUT", "/v1/secrets/apitoken", {"value": value})
    assert status == 200, (status, res)


def verb(plat, sid, name, state):
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/{name}?wait=true", timeout=900)
    assert status == 200 and res["state"] == state, (status, res)


def test_template_default_injects(plat, internet, sandbox):
    status, res = plat.admin("GET", f"/v1/sandboxes/{sandbox}")
    assert res["network"]["inject"] == [RULE], res
    n = len(internet.requests())
    status, body = guest_get(plat, sandbox, f"https://{SECRET_API}/v1/user")
    assert status == 200 and f"vhost={SECRET_API} authorized" in body, (status, body)
    assert last_auth(internet, n) == "Bearer " + internet.secret_token


def test_rotation_while_paused_and_suspended(plat, internet, sandbox):
    token = internet.secret_token
    paused_value = "rotated-" + uuid.uuid4().hex
    verb(plat, sandbox, "pause", "paused")
    rotate(plat, paused_value)
    verb(plat, sandbox, "resume", "running")
    status, auth = get_until(plat, internet, sandbox, "Bearer " + paused_value)
    assert auth == "Bearer " + paused_value and status == 401, (status, auth)

    verb(plat, sandbox, "suspend", "suspended")
    rotate(plat, token)
    # Suspended after injected requests: no file holds any value it had, in any encoding.
    hits, sizes = scan_tree(plat, [plat.data, plat.node.data], encodings(token) +
                            encodings(paused_value))
    assert hits == [], hits
    assert max(sizes.values()) > 64 << 20, sizes  # the memory file (or the disk) among them
    verb(plat, sandbox, "restore", "running")
    status, auth = get_until(plat, internet, sandbox, "Bearer " + token)
    assert auth == "Bearer " + token and status == 200, (status, auth)


def test_full_snapshot_holds_no_value(plat, internet, sandbox):
    token = internet.secret_token
    n = len(internet.requests())
    status, _ = guest_get(plat, sandbox, f"https://{SECRET_API}/v1/before-snapshot")
    assert status == 200 and last_auth(internet, n) == "Bearer " + token
    snap = "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(20))
    status, meta = plat.node.call("POST", f"/v1/sandboxes/{sandbox}/snapshots",
                                  {"id": snap, "kind": "full"}, timeout=900)
    assert status in (200, 201), (status, meta)
    try:
        root = os.path.join(plat.node.data, "snapshots", snap)
        hits, sizes = scan_tree(plat, [root], encodings(token))
        assert hits == [], hits
        names = {os.path.basename(p) for p in sizes}
        assert {"rootfs.ext4", "vmstate"} <= names, sizes
        assert sizes[os.path.realpath(os.path.join(root, "vmstate"))] > 1 << 20, sizes
    finally:
        status, _ = plat.node.call("DELETE", f"/v1/snapshots/{snap}")
        assert status == 204, status
