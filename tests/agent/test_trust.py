"""/init's caBundle (issue 9: guest trust of the egress CA). The node sends the egress CA's
PEM at every /init; the agent installs it in the trust store (as init: the guest's own; on the
host: --trust-root DIR) and points SSL_CERT_FILE, REQUESTS_CA_BUNDLE, PIP_CERT, CURL_CA_BUNDLE
and NODE_EXTRA_CA_CERTS at it, so that curl and Python trust a server whose certificate that
CA signed without being told. Repeated /init adds it once; bad bundles are refused."""
import json
import os
import shlex
import tempfile

import pytest

from conftest import host_agent, stop_host_agent
from lib.internet import make_ca, make_leaf

BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
CERT = "/usr/local/share/ca-certificates/space-egress.crt"


@pytest.fixture
def trust_agent(target, request, tmp_path):
    """An agent nobody has called /init on but the platform, with a trust root: "" in a guest,
    a fresh directory on the host (its bundle starts with one stand-in system certificate)."""
    if target == "host":
        root = tmp_path / "root"
        a = host_agent(extra_args=["--trust-root", str(root)])
        a.root = str(root)
        a.tmp = str(tmp_path)
        yield a
        stop_host_agent(a)
    else:
        a = request.getfixturevalue("fresh_agent")
        a.root = ""
        a.tmp = str(a.tmp)
        yield a


@pytest.fixture(scope="module")
def pki():
    with tempfile.TemporaryDirectory(prefix="space-trust-") as d:
        make_ca(d, cn="space egress test CA")
        make_leaf(d, "localhost", ["DNS:localhost", "IP:127.0.0.1"])
        with open(os.path.join(d, "ca.crt")) as f:
            ca = f.read()
        with open(os.path.join(d, "localhost.crt")) as f:
            leaf = f.read()
        with open(os.path.join(d, "localhost.key")) as f:
            key = f.read()
        yield ca, leaf, key


def init(agent, **body):
    if agent.token:
        body.setdefault("accessToken", agent.token)
    return agent.bare.post(agent.url + "/init", json=body, timeout=60,
                           headers=dict(agent.route))


SERVER = r"""
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"trusted-ok")
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
s.socket = ctx.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"""

CLIENT = r"""
import json, os, ssl, urllib.request, sys
url = sys.argv[1]
out = {k: os.environ.get(k) for k in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT",
                                      "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")}
out["urllib"] = urllib.request.urlopen(url, timeout=20).read().decode()
out["default_context"] = len(ssl.create_default_context().get_ca_certs())
print(json.dumps(out))
"""


def test_ca_bundle_trusted_by_curl_and_python(trust_agent, pki):
    a = trust_agent
    ca, leaf, key = pki
    fs, envd = a.fs, a.envd()
    tmp = a.tmp
    if a.kind == "host":
        # A stand-in for the system bundle, to show it is kept.
        os.makedirs(a.root + "/etc/ssl/certs")
        with open(a.root + BUNDLE, "w") as f:
            f.write("# system\n" + leaf)
    before = fs.read(a.root + BUNDLE).decode() if fs.exists(a.root + BUNDLE) else ""
    for _ in range(3):  # the node repeats /init after every resume
        r = init(a, caBundle=ca, envVars={"CURL_CA_BUNDLE": a.root + BUNDLE})
        assert r.status_code == 204, r.text
    bundle = fs.read(a.root + BUNDLE).decode()
    assert bundle.startswith(before.rstrip("\n")) and bundle.count(ca.strip()) == 1
    assert fs.read(a.root + CERT).decode() == ca
    mode = envd.sh(f"stat -c %a {shlex.quote(a.root + CERT)} {shlex.quote(a.root + BUNDLE)}")
    assert mode.stdout.split() == [b"644", b"644"], mode.stderr

    fs.write(f"{tmp}/srv.py", SERVER)
    fs.write(f"{tmp}/cli.py", CLIENT)
    fs.write(f"{tmp}/leaf.crt", leaf)
    fs.write(f"{tmp}/leaf.key", key)
    fs.chmod(tmp, 0o777)
    for f in ("srv.py", "cli.py", "leaf.crt", "leaf.key"):
        fs.chmod(f"{tmp}/{f}", 0o644)
    # Server and clients in one script: the clients run as the default user, told nothing.
    script = (f"python3 {tmp}/srv.py {tmp}/leaf.crt {tmp}/leaf.key > {tmp}/port.$$ & "
              f"for i in $(seq 100); do [ -s {tmp}/port.$$ ] && break; sleep 0.1; done; "
              f"port=$(cat {tmp}/port.$$); "
              "curl -sS -m 20 https://127.0.0.1:$port/; echo; "
              f"python3 {tmp}/cli.py https://127.0.0.1:$port/; kill $!")
    res = envd.sh(script)
    out = res.stdout.decode().splitlines()
    assert out[0] == "trusted-ok", (res.stdout, res.stderr)
    got = json.loads(out[1])
    assert got["urllib"] == "trusted-ok"
    assert got["SSL_CERT_FILE"] == got["REQUESTS_CA_BUNDLE"] == got["PIP_CERT"] == a.root + BUNDLE
    assert got["CURL_CA_BUNDLE"] == a.root + BUNDLE  # the user's own value (the same path) kept
    assert got["NODE_EXTRA_CA_CERTS"] == a.root + CERT

    # A user's own value wins over the default, at the next /init too.
    r = init(a, caBundle=ca, envVars={"SSL_CERT_FILE": "/mine.pem"})
    assert r.status_code == 204, r.text
    env = a.http.get(a.url + "/envs", timeout=30).json()
    assert env["SSL_CERT_FILE"] == "/mine.pem" and env["PIP_CERT"] == a.root + BUNDLE


@pytest.mark.parametrize("bundle, why", [
    ("", "caBundle holds no certificate"),
    ("-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49\n-----END PRIVATE KEY-----\n",
     "caBundle must hold only PEM CERTIFICATE blocks"),
    ("-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n",
     "caBundle: a block is not a DER certificate"),
    (7, "caBundle must be a string"),
])
def test_ca_bundle_refused(trust_agent, bundle, why):
    a = trust_agent
    before = a.fs.read(a.root + BUNDLE) if a.fs.exists(a.root + BUNDLE) else None
    r = init(a, caBundle=bundle, envVars={"NOT_APPLIED": "1"})
    assert r.status_code == 400, r.text
    assert r.json()["message"] == why
    after = a.fs.read(a.root + BUNDLE) if a.fs.exists(a.root + BUNDLE) else None
    assert before == after
    assert "NOT_APPLIED" not in a.http.get(a.url + "/envs", timeout=30).json()


def test_ca_bundle_bounded(trust_agent, pki):
    a = trust_agent
    ca = pki[0]
    big = ca * (64 * 1024 // len(ca) + 1)
    r = init(a, caBundle=big)
    assert r.status_code == 400 and r.json()["message"] == "caBundle is larger than 64 KiB"


@pytest.mark.host_only("a guest's agent always has its own trust store")
def test_ca_bundle_needs_a_trust_root(pki):
    a = host_agent()
    try:
        r = a.http.post(a.url + "/init", json={"caBundle": pki[0]}, timeout=30)
        assert r.status_code == 400 and "trust store" in r.json()["message"]
    finally:
        stop_host_agent(a)
