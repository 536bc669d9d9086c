"""Credential injection on space-gw (issue 10, src/gw/inject.h), end to end: the real
daemon in the simulated internet of tests/lib/internet.py (in its uplink namespace, as
--user nobody), driven over its control socket as space-node drives it (gwctl.py), with
curl in two guest namespaces of this test's own whose TCP nftables redirects to the
gateway. Secrets are sealed here (sealing.py) to the gateway's own secrets.pub, so the
Python and C implementations of the format are checked against each other too.

api.secret.test answers 200 only with "Authorization: Bearer <internet.secret_token>";
nginx's access log records the Authorization each request arrived with."""
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import uuid

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gwctl import GwControl  # noqa: E402
from gwnet import Netns  # noqa: E402
import sealing  # noqa: E402
from lib.internet import (ALLOWED, SECRET_API, SELFSIGNED, WRONGNAME,  # noqa: E402
                          internet)  # noqa: F401 (fixture)
from lib.platform import Gateway  # noqa: E402

SANDBOXES = (("injtest00001", "injtestsandboxaaaaa1"), ("injtest00002", "injtestsandboxbbbbb2"))
RULE = {"host": SECRET_API, "method": "GET", "pathPrefix": "/v1/", "header": "Authorization",
        "value": "Bearer {{secret:tok}}"}
ALLOW = [SECRET_API, ALLOWED, SELFSIGNED, WRONGNAME]


class Guest:
    """A guest namespace and its sandbox namespace (what space-node builds around a VM):
    the guest's TCP goes to the gateway listener in the sandbox namespace, its DNS to the
    proxy there; nothing routes anywhere else."""

    def __init__(self, tag):
        self.guest, self.sbx = Netns(f"inj-g{tag}"), Netns(f"inj-s{tag}")

    def start(self):
        g, s = self.guest.name, self.sbx.name
        for ns in (g, s):
            subprocess.run(["ip", "netns", "add", ns], check=True)
            subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        run = lambda *a: subprocess.run(list(a), check=True)  # noqa: E731
        run("ip", "-n", g, "link", "add", "g0", "type", "veth", "peer", "name", "s0", "netns", s)
        run("ip", "-n", g, "addr", "add", "169.254.0.2/30", "dev", "g0")
        run("ip", "-n", g, "link", "set", "g0", "up")
        run("ip", "-n", g, "route", "add", "default", "via", "169.254.0.1")
        run("ip", "-n", s, "addr", "add", "169.254.0.1/30", "dev", "s0")
        run("ip", "-n", s, "link", "set", "s0", "up")
        rules = ('table ip injtest {\n chain pre {\n type nat hook prerouting priority dstnat;'
                 ' policy accept;\n iifname "s0" ip daddr != 169.254.0.1 meta l4proto tcp '
                 'redirect to :15001\n }\n}\n')
        self.sbx.exec("nft", "-f", "-", input=rules.encode(), check=True)
        os.makedirs(f"/etc/netns/{g}", exist_ok=True)
        with open(f"/etc/netns/{g}/resolv.conf", "w") as f:
            f.write("nameserver 169.254.0.1\noptions attempts:1 timeout:2\n")
        with open(f"/etc/netns/{g}/hosts", "w") as f:
            f.write("127.0.0.1 localhost\n")
        return self

    def sockets(self):
        import socket

        def make():
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            u.bind(("169.254.0.1", 53))
            t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            t.bind(("169.254.0.1", 15001))
            t.listen(64)
            return u, t
        return self.sbx.call(make)

    def stop(self):
        for ns in (self.guest.name, self.sbx.name):
            subprocess.run(["ip", "netns", "delete", ns], check=False, stderr=subprocess.DEVNULL)
        shutil.rmtree(f"/etc/netns/{self.guest.name}", ignore_errors=True)


class Env:
    pass


@pytest.fixture(scope="module")
def env(internet):
    e = Env()
    e.internet = internet
    e.tmp = tempfile.mkdtemp(prefix="gwinject-")
    os.chmod(e.tmp, 0o755)
    tag = uuid.uuid4().hex[:6]
    e.guests = [Guest(f"a{tag}"), Guest(f"b{tag}")]
    e.gw = Gateway(internet, os.path.join(e.tmp, "gw"), extra_args=["--user", "nobody"])
    ctl = None
    try:
        for g in e.guests:
            g.start()
        e.gw.start()
        e.ctl = ctl = GwControl(e.gw.socket)
        hello = ctl.hello("inject-test")
        assert hello["ok"] is True, hello
        e.egress_ca = os.path.join(e.tmp, "egress-ca.crt")
        with open(e.egress_ca, "w") as f:
            f.write(hello["caCert"])
        os.chmod(e.egress_ca, 0o644)
        e.pub = sealing.load_public(os.path.join(e.gw.data, "secrets.pub"))
        for g, (iid, sid) in zip(e.guests, SANDBOXES):
            u, t = g.sockets()
            rep = ctl.attach(iid, sid, {"allow": ALLOW}, u, t)
            u.close()
            t.close()
            assert rep["ok"] is True, (rep, e.gw.log())
        yield e
    finally:
        if ctl:
            ctl.close()
        if os.environ.get("GW_TEST_SHOW_LOG"):
            print(e.gw.log())
        e.gw.destroy()
        for g in e.guests:
            g.stop()
        shutil.rmtree(e.tmp, ignore_errors=True)


def policy(e, rules, secrets, allow=ALLOW):
    """A native policy with rules and secrets {name: plaintext} sealed to the gateway."""
    return {"allow": list(allow), "inject": rules,
            "secrets": {n: sealing.seal(e.pub, n, v) for n, v in secrets.items()}}


def set_policy(e, k, pol):
    rep = e.ctl.policy(SANDBOXES[k][0], pol)
    assert rep["ok"] is True, (rep, e.gw.log())


def curl(e, url, *args, k=0):
    """(status, body) of a request from guest k (the egress CA trusted)."""
    res = e.guests[k].guest.exec("curl", "-sS", "--max-time", "15", "--cacert", e.egress_ca,
                                 "-o", "-", "-w", "\n%{http_code}", *args, url,
                                 capture_output=True, text=True)
    body, _, code = res.stdout.rpartition("\n")
    return int(code or 0), body + res.stderr


def arrived(e, host, since):
    """What nginx saw for host after the first `since` log records: [(request, auth)]."""
    return [(r["request"], r["auth"]) for r in e.internet.requests()[since:] if r["host"] == host]


def mark(e):
    return len(e.internet.requests())


def token(e):
    return "Bearer " + e.internet.secret_token


def test_keys_are_the_gateways_alone(env):
    e = env
    nobody = pwd.getpwnam("nobody")
    st = os.stat(e.gw.data)
    assert st.st_uid == nobody.pw_uid and st.st_mode & 0o777 == 0o700, oct(st.st_mode)
    for name, mode in (("ca.key", 0o600), ("secrets.key", 0o600), ("ca.crt", 0o644),
                       ("secrets.pub", 0o644)):
        st = os.stat(os.path.join(e.gw.data, name))
        assert st.st_uid == nobody.pw_uid and st.st_mode & 0o777 == mode, (name, oct(st.st_mode))
    with open(os.path.join(e.gw.data, "secrets.key")) as f:
        assert f.read().startswith("-----BEGIN PRIVATE KEY-----")
    # The gateway itself runs as nobody, not dumpable (the keys and secrets are in memory).
    pid = int(subprocess.run(["pgrep", "-f", "-n", e.gw.socket], capture_output=True,
                             text=True).stdout.split()[0])
    with open(f"/proc/{pid}/status") as f:
        uid = [line for line in f if line.startswith("Uid:")][0].split()
    assert int(uid[1]) == nobody.pw_uid, uid


def test_token_arrives_only_where_the_rule_says(env):
    e = env
    set_policy(e, 0, policy(e, [RULE], {"tok": e.internet.secret_token}))
    n = mark(e)
    # The guest holds no token and gets 200; its own Authorization fields are replaced.
    assert curl(e, f"https://{SECRET_API}/v1/user")[0] == 200
    status, body = curl(e, f"https://{SECRET_API}/v1/x", "-H", "Authorization: Bearer stolen",
                        "-H", "authorization: second-copy")
    assert status == 200 and "authorized" in body, body
    # Outside the rule's method or path: no token (401), and nothing of it in the answer.
    assert curl(e, f"https://{SECRET_API}/v2/x")[0] == 401
    assert curl(e, f"https://{SECRET_API}/v1/x", "-X", "POST")[0] == 401
    assert curl(e, f"https://{SECRET_API}/v1/../x", "--path-as-is")[0] == 401
    # Another host: the guest's placeholder goes out literally, never expanded.
    status, _ = curl(e, f"https://{ALLOWED}/p", "-H", "Authorization: Bearer {{secret:tok}}",
                     "-H", "X-Other: ${e2b.secrets.tok}")
    assert status == 200
    got = arrived(e, SECRET_API, n)
    assert got == [("GET /v1/user HTTP/1.1", token(e)), ("GET /v1/x HTTP/1.1", token(e)),
                   ("GET /v2/x HTTP/1.1", ""), ("POST /v1/x HTTP/1.1", ""),
                   ("GET /v1/../x HTTP/1.1", "")], got
    assert arrived(e, ALLOWED, n) == [("GET /p HTTP/1.1", "Bearer {{secret:tok}}")]
    # Audited by name, never by value.
    rec = e.ctl.wait_record(lambda r: r.get("host") == SECRET_API and r.get("secret") == "tok")
    assert rec["verdict"] == "allow" and rec["proto"] == "tls" and rec["sandbox"] == SANDBOXES[0][1]
    with e.ctl.lock:
        text = json.dumps(e.ctl.records)
    assert e.internet.secret_token not in text
    assert not [r for r in e.ctl.records if r.get("host") == ALLOWED and "secret" in r]


def test_impostor_upstreams_get_nothing(env):
    e = env
    rules = [dict(RULE, host=h, pathPrefix="/") for h in (SELFSIGNED, WRONGNAME)]
    set_policy(e, 0, policy(e, rules, {"tok": e.internet.secret_token}))
    n = mark(e)
    for host in (SELFSIGNED, WRONGNAME):
        status, body = curl(e, f"https://{host}/v1/x")
        assert status == 502 and "upstream-tls" in body, (host, status, body)
        e.ctl.wait_record(lambda r, h=host: r.get("host") == h and r.get("verdict") == "deny"
                          and r.get("reason", "").startswith("upstream-tls"))
    # The handshake failed before a byte of the request: nginx logged nothing for them.
    assert arrived(e, SELFSIGNED, n) == [] and arrived(e, WRONGNAME, n) == []


def test_redirect_to_another_host_carries_nothing(env):
    e = env
    set_policy(e, 0, policy(e, [RULE], {"tok": e.internet.secret_token}))
    n = mark(e)
    status, body = curl(e, f"https://{SECRET_API}/v1/redirect", "-L")
    assert status == 200 and f"vhost={ALLOWED}" in body, body
    assert arrived(e, SECRET_API, n) == [("GET /v1/redirect HTTP/1.1", token(e))]
    assert arrived(e, ALLOWED, n) == [("GET /landed HTTP/1.1", "")]


def test_rotation_applies_to_the_next_request(env):
    e = env
    set_policy(e, 0, policy(e, [RULE], {"tok": "old-value"}))
    n = mark(e)
    assert curl(e, f"https://{SECRET_API}/v1/a")[0] == 401
    set_policy(e, 0, policy(e, [RULE], {"tok": e.internet.secret_token}))
    assert curl(e, f"https://{SECRET_API}/v1/b")[0] == 200
    assert arrived(e, SECRET_API, n) == [("GET /v1/a HTTP/1.1", "Bearer old-value"),
                                         ("GET /v1/b HTTP/1.1", token(e))]


def test_a_secret_that_does_not_open_refuses_the_policy(env):
    e = env
    good = policy(e, [RULE], {"tok": e.internet.secret_token})
    set_policy(e, 0, good)
    other = sealing.X25519PrivateKey.generate().public_key()
    for sealed, why in ((sealing.seal(other, "tok", "x"), "sealed to another gateway's key"),
                        (sealing.seal(e.pub, "other", "x"), "does not open"),
                        (good["secrets"]["tok"][:-8] + "AAAAAAA=", "does not open")):
        bad = dict(good, secrets={"tok": sealed})
        rep = e.ctl.policy(SANDBOXES[0][0], bad)
        assert rep["ok"] is False and 'secret "tok"' in rep["error"] and why in rep["error"], rep
    rep = e.ctl.policy(SANDBOXES[0][0], dict(good, secrets={}))
    assert rep["ok"] is False and 'secret "tok"' in rep["error"], rep
    crlf = dict(good, secrets={"tok": sealing.seal(e.pub, "tok", "a\r\nX-Evil: 1")})
    rep = e.ctl.policy(SANDBOXES[0][0], crlf)
    assert rep["ok"] is False and "control characters" in rep["error"], rep
    # The policy in force is still the good one, whole.
    assert curl(e, f"https://{SECRET_API}/v1/still")[0] == 200


def test_sandbox_a_rules_never_apply_to_b(env):
    e = env
    set_policy(e, 0, policy(e, [RULE], {"tok": e.internet.secret_token}))
    set_policy(e, 1, {"allow": ALLOW})
    n = mark(e)
    assert curl(e, f"https://{SECRET_API}/v1/from-b", k=1)[0] == 401
    assert curl(e, f"https://{SECRET_API}/v1/from-a", k=0)[0] == 200
    assert arrived(e, SECRET_API, n) == [("GET /v1/from-b HTTP/1.1", ""),
                                         ("GET /v1/from-a HTTP/1.1", token(e))]
    # B's own rule with A's sealed value: it is B's policy that carries it (the api adds only
    # the owner's secrets); B gets nothing from A's state.
    set_policy(e, 1, policy(e, [dict(RULE, value="Bearer {{secret:b}}")], {"b": "b-value"}))
    assert curl(e, f"https://{SECRET_API}/v1/b2", k=1)[0] == 401
    assert arrived(e, SECRET_API, n)[-1] == ("GET /v1/b2 HTTP/1.1", "Bearer b-value")


def test_plain_http_and_rate(env):
    e = env
    set_policy(e, 0, policy(e, [RULE], {"tok": e.internet.secret_token}))
    n = mark(e)
    # Plain HTTP to the rule's host without the opt-in: denied, not sent without the token.
    status, body = curl(e, f"http://{SECRET_API}/v1/plain")
    assert status == 403 and "inject-plain-http" in body, body
    set_policy(e, 0, policy(e, [dict(RULE, plainHttp=True, ratePerMinute=2)],
                            {"tok": e.internet.secret_token}))
    assert curl(e, f"http://{SECRET_API}/v1/p1")[0] == 200
    assert curl(e, f"https://{SECRET_API}/v1/p2")[0] == 200
    status, body = curl(e, f"https://{SECRET_API}/v1/p3")
    assert status == 429 and "inject-rate-limit" in body, body
    rec = e.ctl.wait_record(lambda r: r.get("reason") == "inject-rate-limit")
    assert rec["verdict"] == "deny" and rec["secret"] == "tok", rec
    assert arrived(e, SECRET_API, n) == [("GET /v1/p1 HTTP/1.1", token(e)),
                                         ("GET /v1/p2 HTTP/1.1", token(e))]
