"""Credentials that never enter the sandbox (issue 10), on the full platform: space-api
(with --secrets-key, space-gw's secrets.pub), space-node and space-gw, a real guest, and the
simulated internet of tests/lib/internet.py, where api.secret.test answers 200 only with
"Authorization: Bearer <token>" (a random token per run).

The token is created as a secret through the native API and named by an inject rule of
the sandbox's policy. Code in the guest calls the service and gets 200 without holding
it; then the token's bytes (plain, base64, hex, URL-encoded) are looked for and found
nowhere: the guest's environment and process memory (every /proc/<pid>/mem, read as root
in the guest), a dump of the VM's whole RAM (QMP dump-guest-memory through the node's QMP
socket), every file of the platform's data directory (the sandbox's disk, the database
and its WAL, the instance records) and the platform's logs. The request that got it is
audited by the secret's name.
"""
import base64
import contextlib
import json
import os
import socket
import tempfile
import time
import urllib.parse

import pytest

from lib.internet import ALLOWED, SECRET_API, internet  # noqa: F401 (fixture)
from lib.platform import EgressPlatform

RULE = {"host": SECRET_API, "pathPrefix": "/v1/", "header": "Authorization",
        "value": "Bearer {{secret:apitoken}}"}

# Run in the guest as root: every readable mapping of every process but our own, and
# every environment, searched for the needles (argv[1]: JSON list of hex strings).
GUEST_SCAN = r"""
import json, os, re, sys
needles = [bytes.fromhex(h) for h in json.loads(sys.argv[1])]
me = os.getpid()
hits, scanned = [], 0
def look(where, data):
    for n in needles:
        if n in data:
            hits.append(where)
for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != me]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            look(f"{pid}/environ", f.read())
        maps = open(f"/proc/{pid}/maps").read().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb", 0)
    except OSError:
        continue
    for line in maps:
        addr, perms = line.split()[:2]
        if "r" not in perms or "[vsyscall]" in line:
            continue
        lo, hi = (int(x, 16) for x in addr.split("-"))
        try:
            mem.seek(lo)
            data = mem.read(hi - lo)
        except (OSError, OverflowError, ValueError):
            continue
        scanned += len(data)
        look(f"{pid}:{line}", data)
    mem.close()
print(json.dumps({"hits": hits, "scanned": scanned}))
"""


def encodings(value):
    """The byte strings a leak of value could look like."""
    b = value.encode()
    forms = {b, base64.b64encode(b), base64.urlsafe_b64encode(b).rstrip(b"="),
             b.hex().encode(), b.hex().upper().encode(), urllib.parse.quote(value, safe="").encode(),
             base64.b64encode(b"Bearer " + b)}
    return sorted(forms)


def scan_file(path, needles, chunk=8 << 20):
    """The needles found in the file at path (read in overlapping chunks)."""
    found = set()
    keep = max(len(n) for n in needles)
    with open(path, "rb") as f:
        tail = b""
        while True:
            block = f.read(chunk)
            if not block:
                return found
            data = tail + block
            for n in needles:
                if n in data:
                    found.add(n)
            tail = data[-keep:]


class Qmp:
    """A client of the VM's QMP socket (the node's, qmp.sock in the instance directory)."""

    def __init__(self, path, timeout=30):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = b""
        assert "QMP" in self.read(), "no QMP greeting"
        self.call("qmp_capabilities")

    def read(self):
        while b"\n" not in self.buf:
            data = self.s.recv(65536)
            if not data:
                raise EOFError("QMP closed")
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def call(self, cmd, fds=(), **args):
        msg = json.dumps({"execute": cmd, "arguments": args} if args else {"execute": cmd})
        if fds:
            socket.send_fds(self.s, [msg.encode() + b"\n"], list(fds))
        else:
            self.s.sendall(msg.encode() + b"\n")
        while True:
            rep = self.read()
            if "return" in rep or "error" in rep:
                return rep

    def close(self):
        self.s.close()


@pytest.fixture(scope="module")
def plat(internet):
    p = EgressPlatform(internet, "creds")
    # The api seals to space-gw's key: space-gw (started first) creates it in its data dir.
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
    assert internet.secret_token not in json.dumps(res)
    sid = plat.create_sandbox(network={"allow": [SECRET_API, ALLOWED], "inject": [RULE]})
    try:
        yield sid
    finally:
        plat.admin("DELETE", f"/v1/sandboxes/{sid}?wait=true")


def guest_get(plat, sid, url, *headers):
    """(status, body) of a GET from the guest with Python (the guest trusts the egress CA)."""
    code = ("import sys, urllib.request, urllib.error\n"
            "r = urllib.request.Request(sys.argv[1])\n"
            "for h in sys.argv[2:]:\n"
            "    k, v = h.split(': ', 1); r.add_header(k, v)\n"
            "try:\n"
            "    res = urllib.request.urlopen(r, timeout=30); print(res.status, res.read().decode())\n"
            "except urllib.error.HTTPError as e:\n"
            "    print(e.code, e.read().decode())\n")
    res = plat.exec(sid, "python3", "-c", code, url, *headers, user="user", timeout_ms=120000)
    assert res["exit_code"] == 0, res["stderr"][-2000:]
    status, _, body = res["stdout"].strip().partition(" ")
    return int(status), body


def test_guest_gets_200_without_the_token(plat, internet, sandbox):
    n = len(internet.requests())
    status, body = guest_get(plat, sandbox, f"https://{SECRET_API}/v1/user")
    assert status == 200 and f"vhost={SECRET_API} authorized" in body, (status, body)
    # Outside the rule's path prefix: no token, 401; a guest placeholder is sent literally.
    status, _ = guest_get(plat, sandbox, f"https://{SECRET_API}/v2/user",
                          "Authorization: Bearer {{secret:apitoken}}")
    assert status == 401
    got = [(r["request"], r["auth"]) for r in internet.requests()[n:] if r["host"] == SECRET_API]
    assert got == [("GET /v1/user HTTP/1.1", "Bearer " + internet.secret_token),
                   ("GET /v2/user HTTP/1.1", "Bearer {{secret:apitoken}}")], got
    # The api's audit view names the secret, never its value.
    deadline = time.monotonic() + 60
    while True:
        recs = [r for r in plat.egress(sandbox) if r.get("host") == SECRET_API]
        if any(r.get("secret") == "apitoken" for r in recs) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert any(r.get("secret") == "apitoken" and r.get("verdict") == "allow" for r in recs), recs
    assert internet.secret_token not in json.dumps(recs)


def test_the_token_is_nowhere_in_the_guest(plat, internet, sandbox):
    guest_get(plat, sandbox, f"https://{SECRET_API}/v1/again")
    needles = encodings(internet.secret_token)
    res = plat.exec(sandbox, "python3", "-c", GUEST_SCAN, json.dumps([n.hex() for n in needles]),
                    user="root", timeout_ms=600000)
    assert res["exit_code"] == 0, res["stderr"][-2000:]
    out = json.loads(res["stdout"].strip().splitlines()[-1])
    assert out["hits"] == [] and out["scanned"] > 1 << 20, out

    # The whole RAM of the VM, from the host: QMP dump-guest-memory into a file we hand over.
    status, sb = plat.node.call("GET", f"/v1/sandboxes/{sandbox}")
    assert status == 200, sb
    qmp_path = os.path.join(plat.node.instance_dir(sb), "qmp.sock")
    with tempfile.TemporaryFile(dir=plat.data) as dump:
        q = Qmp(qmp_path)
        try:
            rep = q.call("getfd", fds=[dump.fileno()], fdname="credsdump")
            assert "return" in rep, rep
            rep = q.call("dump-guest-memory", paging=False, protocol="fd:credsdump")
            assert "return" in rep, rep
        finally:
            q.close()
        dump.flush()
        size = os.fstat(dump.fileno()).st_size
        assert size > 64 << 20, size
        found = scan_file(f"/proc/self/fd/{dump.fileno()}", needles)
    assert not found, found


def test_the_token_is_nowhere_on_the_platform(plat, internet, sandbox):
    """Every file of the platform's data dir (the sandbox's disk, the store and its WAL, the
    instance records, space-gw's data dir) and every log."""
    guest_get(plat, sandbox, f"https://{SECRET_API}/v1/once-more")
    plat.exec(sandbox, "sync")
    needles = encodings(internet.secret_token)
    hits, scanned = [], 0
    roots = [plat.data]
    for root in roots:
        for d, _, files in os.walk(root):
            for name in files:
                p = os.path.join(d, name)
                with contextlib.suppress(OSError):
                    if not os.path.isfile(p) or os.path.islink(p):
                        continue
                    scanned += os.path.getsize(p)
                    if scan_file(p, needles):
                        hits.append(p)
    for log in (plat.api_log_full(), plat.node.log(), plat.gw.log()):
        hits += [n for n in needles if n.decode(errors="replace") in log]
    assert scanned > 1 << 20, scanned
    assert hits == [], hits
