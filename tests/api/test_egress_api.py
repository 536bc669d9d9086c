"""The egress policy and audit log at the api (issue 9; docs/architecture.md "Network").

Against a real space-node and space-api, on SQLite and (with SPACE_TEST_PG_URL) PostgreSQL:
- the policy at create, native (`network`) and E2B (`allow_internet_access`,
  `network.allowOut`/`denyOut`), read back natively in canonical form and by E2B getInfo
  as it was given; defaults (native: deny everything; E2B: internet);
- bad policies are 400 naming the bad entry, egressProxy 501, unknown fields 400 (rules:
  tests/api/test_secrets_api.py);
- the live replace, native `PUT /v1/sandboxes/{id}/network` and E2B
  `PUT /sandboxes/{id}/network` (Sandbox.updateNetwork), stored first, then handed to the node
  (its `PUT /v1/sandboxes/{id}/network`; the parts that need the node's side are skipped, with
  the reason, on a node that does not have that route yet);
- `GET /v1/sandboxes/{id}/egress`: filters, paging, bad parameters, a killed sandbox's log.
  Records are written into the store's egress_audit table here, as the controller's puller
  writes what the node's GET /v1/egress-audit hands it (the puller itself: the redteam suite,
  with a gateway).
"""
import json
import os
import sqlite3
import subprocess
import time
import uuid

import pytest

from lib.gwstub import GwStub
from lib.platform import STORES, store_platform, e2b


@pytest.fixture(scope="module", params=STORES)
def plat(request):
    with store_platform("egress", request.param) as p:
        yield p


DENY_ALL = {"internet": False, "allow": [], "deny": []}


def error(r, status, needle=None):
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert body["code"] == status and body["message"], body
    if needle:
        assert needle.lower() in body["message"].lower(), body
    return body["message"]


def native_create(plat, **kw):
    r = e2b(plat, "POST", "/v1/sandboxes?wait=true", json=dict(template="base", **kw))
    assert r.status_code == 201, r.text
    return r.json()


@pytest.fixture(scope="module")
def native_sb(plat):
    """One running sandbox created natively with a policy."""
    sb = native_create(plat, network={"allow": ["Allowed.Test.", "*.pkg.test:443",
                                                "198.18.1.10/32:80,443"],
                                      "deny": ["forbidden.test"]})
    yield sb
    e2b(plat, "DELETE", f"/v1/sandboxes/{sb['id']}?wait=true")


@pytest.fixture(scope="module")
def e2b_sb(plat):
    """One running sandbox created through the E2B API with a policy."""
    r = e2b(plat, "POST", "/v2/sandboxes", json={
        "templateID": "base", "allow_internet_access": False,
        "network": {"allowOut": ["allowed.test", "198.18.1.10:443"],
                    "allowPublicTraffic": True}})
    assert r.status_code == 201, r.text
    sid = r.json()["sandboxID"]
    yield sid
    e2b(plat, "DELETE", f"/sandboxes/{sid}")


# ---- policy at create ----

def test_native_policy_is_canonical(plat, native_sb):
    assert native_sb["network"] == {
        "internet": False,
        "allow": ["allowed.test", "*.pkg.test:443", "198.18.1.10/32:80,443"],
        "deny": ["forbidden.test"],
    }
    got = e2b(plat, "GET", f"/v1/sandboxes/{native_sb['id']}").json()
    assert got["network"] == native_sb["network"]
    # E2B getInfo of a natively made sandbox: derived from the native form.
    info = e2b(plat, "GET", f"/sandboxes/{native_sb['id']}").json()
    assert info["allowInternetAccess"] is False
    assert info["network"]["allowOut"] == native_sb["network"]["allow"]
    assert info["network"]["denyOut"] == ["forbidden.test"]
    assert info["network"]["allowPublicTraffic"] is True


def test_e2b_policy_echoed_as_given(plat, e2b_sb):
    info = e2b(plat, "GET", f"/sandboxes/{e2b_sb}").json()
    assert info["allowInternetAccess"] is False
    assert info["network"] == {"allowOut": ["allowed.test", "198.18.1.10:443"],
                               "allowPublicTraffic": True}
    # allow_internet_access: false is E2B's denyOut 0.0.0.0/0: the native form has no internet.
    native = e2b(plat, "GET", f"/v1/sandboxes/{e2b_sb}").json()["network"]
    assert native == {"internet": False, "allow": ["allowed.test", "198.18.1.10:443"],
                      "deny": []}


def test_listing_shows_the_policy(plat, native_sb):
    listed = e2b(plat, "GET", "/v1/sandboxes").json()["sandboxes"]
    mine = [s for s in listed if s["id"] == native_sb["id"]]
    assert mine and mine[0]["network"] == native_sb["network"]


@pytest.mark.parametrize("network,needle", [
    ({"allow": ["a..b"]}, "allow[0]"),
    ({"allow": ["ok.test", "*"]}, "allow[1]"),
    ({"deny": ["198.18.0.0/33"]}, "deny[0]"),
    ({"allow": ["x.test:99999"]}, "allow[0]"),
    ({"allow": "x.test"}, "allow"),
    ({"allow": [1]}, "allow[0]"),
    ({"internet": "yes"}, "internet"),
    ({"bogus": 1}, "bogus"),
    ({"passthrough": ["198.18.1.10"]}, "passthrough[0]"),
    ([], "object"),
])
def test_native_bad_policy_is_400_naming_the_entry(plat, network, needle):
    # A template the node does not have: a policy that passed by mistake makes no VM.
    error(e2b(plat, "POST", "/v1/sandboxes", json={"template": "nosuchtemplate",
                                                   "network": network}), 400, needle)


@pytest.mark.parametrize("body,status,needle", [
    ({"network": {"allowOut": ["a..b"]}}, 400, "allowOut[0]"),
    ({"network": {"allowOut": ["ok.test", "bad name.test"]}}, 400, "allowOut[1]"),
    # E2B takes only addresses in denyOut.
    ({"network": {"denyOut": ["example.com"]}}, 400, "denyOut[0]"),
    ({"network": {"denyOut": "0.0.0.0/0"}}, 400, "denyOut"),
    ({"allow_internet_access": "yes"}, 400, "allow_internet_access"),
    ({"network": {"egressProxy": {"address": "p:1080"}}}, 501, "egressProxy"),
    ({"network": {"rules": {"api.test": [{"x": 1}]}}}, 400, "rules"),
    ({"network": {"maskRequestHost": "x"}}, 501, "maskRequestHost"),
])
def test_e2b_bad_policy(plat, body, status, needle):
    error(e2b(plat, "POST", "/v2/sandboxes", json=dict(templateID="nosuchtemplate", **body)),
          status, needle)


def test_policies_that_pass_validation(plat):
    # Reaching the node (which has no such template) proves validation passed.
    for body in [{"network": {"allowOut": ["*.test", "198.18.0.0/15:80,443,8000-8100"],
                              "denyOut": ["0.0.0.0/0"]}},
                 {"allow_internet_access": True, "network": {"egressProxy": None}},
                 {"network": {"allowOut": None, "denyOut": []}}]:
        error(e2b(plat, "POST", "/v2/sandboxes", json=dict(templateID="nosuchtemplate", **body)),
              404)
    r = e2b(plat, "POST", "/v1/sandboxes?wait=true",
            json={"template": "nosuchtemplate", "network": {"internet": True, "allow": [],
                                                            "deny": ["198.18.0.0/15"]}})
    error(r, 404)


# ---- live replace ----

def node_lacks_network_route(r):
    """A node built before its PUT /v1/sandboxes/{id}/network route (node helper, issue 9)."""
    return r.status_code in (404, 405, 502) and "no route" in r.text


def test_native_replace(plat, native_sb):
    sid = native_sb["id"]
    new = {"internet": True, "deny": ["198.18.1.66", "*.forbidden.test"]}
    r = e2b(plat, "PUT", f"/v1/sandboxes/{sid}/network", json=new)
    # Stored first, whatever the node says: the native GET shows it at once.
    got = e2b(plat, "GET", f"/v1/sandboxes/{sid}").json()["network"]
    assert got == {"internet": True, "allow": [], "deny": ["198.18.1.66", "*.forbidden.test"]}
    if node_lacks_network_route(r):
        pytest.skip("the node has no PUT /v1/sandboxes/{id}/network yet: " + r.text)
    assert r.status_code == 200, r.text
    assert r.json() == {"network": got}
    # The operation that carried it (kind sandbox.network) succeeded.
    ops = e2b(plat, "GET", f"/v1/sandboxes/{sid}").json()
    assert ops["state"] == "running"


def test_native_passthrough_round_trips(plat, native_sb):
    # The gateway's "passthrough" list (native only) flows through as canonical form.
    sid = native_sb["id"]
    r = e2b(plat, "PUT", f"/v1/sandboxes/{sid}/network",
            json={"allow": ["allowed.test"], "passthrough": ["Allowed.Test."]})
    got = e2b(plat, "GET", f"/v1/sandboxes/{sid}").json()["network"]
    assert got == {"internet": False, "allow": ["allowed.test"], "deny": [],
                   "passthrough": ["allowed.test"]}
    if not node_lacks_network_route(r):
        assert r.status_code == 200 and r.json() == {"network": got}, r.text


def test_native_replace_refused(plat, native_sb):
    sid = native_sb["id"]
    before = e2b(plat, "GET", f"/v1/sandboxes/{sid}").json()["network"]
    error(e2b(plat, "PUT", f"/v1/sandboxes/{sid}/network", json={"allow": ["a..b"]}), 400,
          "allow[0]")
    error(e2b(plat, "PUT", f"/v1/sandboxes/{sid}/network", json={"allowOut": []}), 400,
          "allowOut")
    error(e2b(plat, "PUT", f"/v1/sandboxes/{sid}/network", data=b"{nope"), 400)
    # Nothing was stored.
    assert e2b(plat, "GET", f"/v1/sandboxes/{sid}").json()["network"] == before
    error(e2b(plat, "PUT", "/v1/sandboxes/sb0000000000000000zz/network", json={}), 404)


def test_e2b_update_network(plat, e2b_sb):
    body = {"allowOut": ["allowed.test"], "denyOut": ["0.0.0.0/0"],
            "allow_internet_access": True}
    r = e2b(plat, "PUT", f"/sandboxes/{e2b_sb}/network", json=body)
    info = e2b(plat, "GET", f"/sandboxes/{e2b_sb}").json()
    assert info["allowInternetAccess"] is True
    assert info["network"]["allowOut"] == ["allowed.test"]
    assert info["network"]["denyOut"] == ["0.0.0.0/0"]
    native = e2b(plat, "GET", f"/v1/sandboxes/{e2b_sb}").json()["network"]
    assert native == {"internet": True, "allow": ["allowed.test"], "deny": ["0.0.0.0/0"]}
    if node_lacks_network_route(r):
        pytest.skip("the node has no PUT /v1/sandboxes/{id}/network yet: " + r.text)
    assert r.status_code == 204, r.text
    # Omitted fields are cleared (the SDK: "replaces the current egress configuration").
    r = e2b(plat, "PUT", f"/sandboxes/{e2b_sb}/network", json={})
    assert r.status_code == 204, r.text
    info = e2b(plat, "GET", f"/sandboxes/{e2b_sb}").json()
    assert info["allowInternetAccess"] is None
    assert "allowOut" not in info["network"] and "denyOut" not in info["network"]


@pytest.mark.parametrize("body,status,needle", [
    ({"allowOut": ["a..b"]}, 400, "allowOut[0]"),
    ({"denyOut": ["name.test"]}, 400, "denyOut[0]"),
    ({"allow_internet_access": 1}, 400, "allow_internet_access"),
    # Ingress settings are not part of this body.
    ({"allowPublicTraffic": False}, 400, "allowPublicTraffic"),
    ({"bogus": True}, 400, "bogus"),
    ({"egressProxy": {"address": "p:1080"}}, 501, "egressProxy"),
    ({"rules": {"a.test": [{"transform": {"body": {}}}]}}, 400, "rules"),
])
def test_e2b_update_network_refused(plat, e2b_sb, body, status, needle):
    error(e2b(plat, "PUT", f"/sandboxes/{e2b_sb}/network", json=body), status, needle)


def test_e2b_update_network_missing_sandbox(plat):
    error(e2b(plat, "PUT", "/sandboxes/sb0000000000000000zz/network", json={}), 404)
    error(e2b(plat, "PUT", "/sandboxes/NOT-AN-ID/network", json={}), 404)


# ---- the audit log ----

def sql(plat, statement):
    """Runs one statement on the platform's store (SQLite file or PostgreSQL)."""
    if plat.store:
        res = subprocess.run(["psql", plat.store, "-XAtqc", statement], capture_output=True,
                             text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        return res.stdout
    db = sqlite3.connect(os.path.join(plat.data, "space.db"), timeout=30)
    try:
        with db:
            return "\n".join("|".join(map(str, row)) for row in db.execute(statement))
    finally:
        db.close()


def insert_records(plat, records):
    """As the puller stores a node's page: one row each, ids after the largest."""
    epoch = uuid.uuid4().hex
    for seq, rec in enumerate(records, 1):
        text = json.dumps(rec).replace("'", "''")
        sb = f"'{rec['sandbox']}'" if rec.get("sandbox") else "NULL"
        proto = f"'{rec['proto']}'" if rec.get("proto") else "NULL"
        verdict = f"'{rec['verdict']}'" if rec.get("verdict") else "NULL"
        sql(plat, "INSERT INTO egress_audit (id, node_id, epoch, seq, sandbox_id, time_us, "
                  "proto, verdict, record) SELECT COALESCE(MAX(id), 0) + 1, 'local', "
                  f"'{epoch}', {seq}, {sb}, {rec['time']}, {proto}, {verdict}, '{text}' "
                  "FROM egress_audit")


def records_for(sid, n):
    out = []
    for i in range(n):
        proto = ["dns", "tls", "http", "tcp"][i % 4]
        verdict = "deny" if i % 3 == 0 else "allow"
        rec = {"sandbox": sid, "time": 1_800_000_000_000_000 + i, "proto": proto,
               "verdict": verdict, "reason": "deny-default" if verdict == "deny" else
               "allow-name", "dst": "198.18.1.10", "port": 443, "i": i}
        if proto == "dns":
            rec["name"] = "allowed.test"
        out.append(rec)
    return out


def egress(plat, sid, query=""):
    return e2b(plat, "GET", f"/v1/sandboxes/{sid}/egress{query}")


def test_audit_paging_and_filters(plat, native_sb):
    sid = native_sb["id"]
    recs = records_for(sid, 25)
    insert_records(plat, recs)
    insert_records(plat, records_for("sb00000000000000other", 5))

    got, after, pages = [], None, 0
    while True:
        r = egress(plat, sid, "?limit=10" + (f"&after={after}" if after else ""))
        assert r.status_code == 200, r.text
        page = r.json()
        got += page["records"]
        pages += 1
        after = page["next"]
        if after is None:
            break
        assert isinstance(after, str)
    assert pages == 3
    assert [g["i"] for g in got] == list(range(25))
    ids = [g["id"] for g in got]
    assert ids == sorted(ids) and len(set(ids)) == 25
    assert got[0]["name"] == "allowed.test" and got[0]["sandbox"] == sid
    assert "seq" not in got[0]

    denied = egress(plat, sid, "?verdict=deny&limit=1000").json()
    assert [g["i"] for g in denied["records"]] == [i for i in range(25) if i % 3 == 0]
    assert denied["next"] is None
    tls = egress(plat, sid, "?proto=tls&verdict=allow").json()["records"]
    assert [g["i"] for g in tls] == [i for i in range(25) if i % 4 == 1 and i % 3 != 0]
    # A cursor from the middle: strictly after it.
    tail = egress(plat, sid, f"?after={ids[19]}").json()["records"]
    assert [g["i"] for g in tail] == list(range(20, 25))


@pytest.mark.parametrize("query,needle", [
    ("?verdict=maybe", "verdict"),
    ("?proto=udp", "proto"),
    ("?after=abc", "after"),
    ("?after=-1", "after"),
    ("?limit=0", "limit"),
    ("?limit=1001", "limit"),
    ("?limit=ten", "limit"),
    ("?denied=1", "denied"),
    ("?verdict=deny&verdict=allow", "more than once"),
])
def test_audit_bad_parameters(plat, native_sb, query, needle):
    error(egress(plat, native_sb["id"], query), 400, needle)


def test_audit_missing_sandbox(plat):
    error(egress(plat, "sb0000000000000000zz"), 404)
    error(egress(plat, "NOT-AN-ID"), 404)


def test_audit_of_a_killed_sandbox(plat):
    r = e2b(plat, "POST", "/v2/sandboxes", json={"templateID": "base"})
    assert r.status_code == 201, r.text
    sid = r.json()["sandboxID"]
    # E2B's default: internet.
    assert e2b(plat, "GET", f"/v1/sandboxes/{sid}").json()["network"] == \
        {"internet": True, "allow": [], "deny": []}
    assert e2b(plat, "GET", f"/sandboxes/{sid}").json()["allowInternetAccess"] is None
    insert_records(plat, records_for(sid, 3))
    assert e2b(plat, "DELETE", f"/sandboxes/{sid}").status_code == 204
    error(e2b(plat, "GET", f"/sandboxes/{sid}"), 404)
    page = egress(plat, sid).json()
    assert [g["i"] for g in page["records"]] == [0, 1, 2]
    # A killed sandbox's policy cannot be replaced.
    error(e2b(plat, "PUT", f"/v1/sandboxes/{sid}/network", json={}), 404)
    error(e2b(plat, "PUT", f"/sandboxes/{sid}/network", json={}), 404)


def test_native_default_is_deny_all(plat):
    sb = native_create(plat)
    try:
        assert sb["network"] == DENY_ALL
        info = e2b(plat, "GET", f"/sandboxes/{sb['id']}").json()
        assert info["allowInternetAccess"] is False
        assert "allowOut" not in info["network"]
    finally:
        e2b(plat, "DELETE", f"/v1/sandboxes/{sb['id']}?wait=true")


# ---- the CLI: space sandbox create/network/egress ----

def space(plat, *args, timeout=300):
    from lib.platform import SPACE
    return subprocess.run([SPACE, *args], env=plat.env, capture_output=True, text=True,
                          timeout=timeout)


def test_cli_policy_and_egress(plat):
    r = space(plat, "sandbox", "create", "--internet", "--allow", "allowed.test:443",
              "--deny", "198.18.1.66", "--json")
    assert r.returncode == 0, r.stderr
    sb = json.loads(r.stdout)
    sid = sb["id"]
    try:
        assert sb["network"] == {"internet": True, "allow": ["allowed.test:443"],
                                 "deny": ["198.18.1.66"]}
        got = json.loads(space(plat, "sandbox", "get", sid).stdout)
        assert got["network"] == sb["network"]

        recs = records_for(sid, 6)
        recs[0]["sni"] = "allowed.test"
        insert_records(plat, recs)
        r = space(plat, "sandbox", "egress", sid, "--json")
        assert r.returncode == 0, r.stderr
        lines = [json.loads(line) for line in r.stdout.splitlines()]
        assert [x["i"] for x in lines] == list(range(6))
        r = space(plat, "sandbox", "egress", sid, "--denied", "--json")
        assert [json.loads(x)["i"] for x in r.stdout.splitlines()] == [0, 3]
        table = space(plat, "sandbox", "egress", sid).stdout.splitlines()
        assert table[0].split()[:3] == ["TIME", "VERDICT", "PROTO"], table
        assert len(table) == 7 and "allowed.test" in table[1] and "deny" in table[1], table

        # --follow prints what arrives later, until interrupted.
        from lib.platform import SPACE
        follow = subprocess.Popen([SPACE, "sandbox", "egress", sid, "--json", "--follow"],
                                  env=plat.env, stdout=subprocess.PIPE, text=True)
        try:
            seen = [json.loads(follow.stdout.readline())["i"] for _ in range(6)]
            assert seen == list(range(6))
            insert_records(plat, [dict(records_for(sid, 1)[0], i=100)])
            assert json.loads(follow.stdout.readline())["i"] == 100
        finally:
            follow.terminate()
            assert follow.wait(timeout=30) == 0

        r = space(plat, "sandbox", "network", sid, "--allow", "pkg.test", "--deny", "a..b")
        assert r.returncode == 1 and "deny[0]" in r.stderr, r.stderr
        r = space(plat, "sandbox", "network", sid, "--allow", "pkg.test")
        now = json.loads(space(plat, "sandbox", "get", sid).stdout)["network"]
        assert now == {"internet": False, "allow": ["pkg.test"], "deny": []}
        if r.returncode != 0 and "no route" in r.stderr:
            pytest.skip("the node has no PUT /v1/sandboxes/{id}/network yet: " + r.stderr)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == now
    finally:
        space(plat, "sandbox", "kill", sid)


def test_cli_bad_policy(plat):
    r = space(plat, "sandbox", "create", "--template", "nosuchtemplate", "--allow", "a..b")
    assert r.returncode == 1 and "allow[0]" in r.stderr, r.stderr
    r = space(plat, "sandbox", "egress", "NOT-AN-ID")
    assert r.returncode == 2
    r = space(plat, "sandbox", "egress", "sb0000000000000000zz")
    assert r.returncode == 1 and "not found" in r.stderr, r.stderr


def up_env(node, **extra):
    from lib.platform import NODE, API, AGENT, ROOT, free_port
    base = os.path.basename(node.data)
    run = os.path.join(node.data, "run")
    os.makedirs(run, exist_ok=True)
    return dict(os.environ, SPACE_DATA_DIR=node.data, SPACE_SOCKET=f"/run/space/{base}-api.sock",
                SPACE_NODE_SOCKET=f"/run/space/{base}-node.sock",
                SPACE_TUNNEL_SOCKET=f"/run/space/{base}-tunnel.sock", SPACE_RUN_DIR=run,
                SPACE_API_LISTEN=f"127.0.0.1:{free_port()}",
                SPACE_INGRESS_LISTEN=f"127.0.0.1:{free_port()}", SPACE_INGRESS_TLS_LISTEN="off",
                SPACE_NODE=NODE, SPACE_API=API, SPACE_AGENT=AGENT, SPACE_SHARE_DIR=ROOT, **extra)


def pid_of(run, name):
    try:
        with open(os.path.join(run, f"{name}.pid")) as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def proc_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, TypeError):
        return False


def test_space_up_starts_the_gateway():
    """`space up` starts space-gw (unprivileged, its flags passed on) before the node, which
    connects to it; `space down` stops it last. No sandbox: nothing is resolved upstream."""
    from lib.platform import Node, SPACE, BUILD
    if not os.access(os.path.join(BUILD, "src/gw/space-gw"), os.X_OK):
        pytest.skip("no space-gw in this build")
    node = Node("egress-upgw")
    env = up_env(node)
    run = env["SPACE_RUN_DIR"]

    def sp(*args):
        return subprocess.run([SPACE, *args], env=env, capture_output=True, text=True,
                              timeout=600)
    try:
        r = sp("up", "--detach", "--egress-ceiling", "allowlist", "--upstream-dns",
               "127.0.0.1:9")
        assert r.returncode == 0, r.stderr
        gw = pid_of(run, "gw")
        assert proc_alive(gw), r.stderr
        with open(f"/proc/{gw}/status") as f:
            uid = [line.split()[1] for line in f if line.startswith("Uid:")][0]
        assert uid != "0", "space-gw still runs as root"
        with open(f"/proc/{pid_of(run, 'node')}/cmdline", "rb") as f:
            cmd = f.read().split(b"\0")
        assert b"--gw-socket" in cmd and os.path.join(run, "gw.sock").encode() in cmd, cmd
        with open(os.path.join(node.data, "gw.log")) as f:
            log = f.read()
        assert "ceiling allowlist" in log and "127.0.0.1:9" in log, log
        # Idempotent: a second up finds it listening and starts nothing.
        r = sp("up", "--detach")
        assert r.returncode == 0 and "starting gw" not in r.stderr, r.stderr
        assert pid_of(run, "gw") == gw
        r = sp("down")
        assert r.returncode == 0, r.stderr
        deadline = time.monotonic() + 30
        while proc_alive(gw) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not proc_alive(gw)
    finally:
        sp("down", "--kill-sandboxes")
        for name in ("api", "node", "gw"):
            pid = pid_of(run, name)
            if proc_alive(pid):
                os.kill(pid, 9)
        node.destroy()


def test_space_up_without_gateway_binary():
    """`space up` goes on without egress when there is no space-gw, and says so; asked for
    egress (--egress-ceiling and friends), it refuses to start without it."""
    from lib.platform import Node, SPACE
    node = Node("egress-up")
    env = up_env(node, SPACE_GW=os.path.join(node.data, "no-such-space-gw"))
    run = env["SPACE_RUN_DIR"]

    def sp(*args):
        return subprocess.run([SPACE, *args], env=env, capture_output=True, text=True,
                              timeout=600)
    try:
        r = sp("up", "--detach", "--egress-ceiling", "allowlist")
        assert r.returncode == 1 and "need space-gw" in r.stderr, r.stderr
        assert not os.path.exists(os.path.join(run, "node.pid"))
        r = sp("up", "--detach", "--upstream-ca", "/nonexistent/ca.pem")
        assert r.returncode == 2 and "upstream-ca" in r.stderr, r.stderr
        r = sp("up", "--detach")
        assert r.returncode == 0, r.stderr
        assert "without egress" in r.stderr, r.stderr
        assert not os.path.exists(os.path.join(run, "gw.pid"))
        r = sp("down")
        assert r.returncode == 0, r.stderr
    finally:
        sp("down", "--kill-sandboxes")
        node.destroy()


# ---- the puller: records from the node's ring into the store (needs the node's gateway side) ----
# space-gw is played by tests/lib/gwstub.py: it answers the node's requests and sends it audit
# batches, so that records go through the real node's ring and the real api's puller. (The
# real space-gw, with real traffic: tests/egress.)

def node_has_gateway_side():
    from lib.platform import NODE
    out = subprocess.run([NODE, "--help"], capture_output=True, text=True, timeout=60)
    return "--gw-socket" in out.stdout + out.stderr


def wait_records(plat, sid, n, query="", timeout=120):
    deadline = time.monotonic() + timeout
    while True:
        recs = egress(plat, sid, "?limit=1000" + query).json()["records"]
        if len(recs) >= n or time.monotonic() > deadline:
            return recs
        time.sleep(0.2)


def own_pg_database(prefix):
    """A database of its own on the test PostgreSQL: this module's `plat` (another api with
    another node) runs on the shared one at the same time, and its node sync would mark a
    sandbox of this test's node as lost."""
    url = os.environ["SPACE_TEST_PG_URL"]
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    res = subprocess.run(["psql", url, "-XAtqc", f"CREATE DATABASE {name}"], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    base, _, query = url.partition("?")
    return base.rsplit("/", 1)[0] + "/" + name + ("?" + query if query else "")


def drop_pg_database(url):
    name = url.partition("?")[0].rsplit("/", 1)[1]
    shared = os.environ["SPACE_TEST_PG_URL"]
    subprocess.run(["psql", shared, "-XAtqc", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"],
                   capture_output=True, timeout=60)


@pytest.mark.parametrize("store_param", STORES)
def test_audit_pulled_from_the_node(store_param):
    if not node_has_gateway_side():
        pytest.skip("this space-node has no --gw-socket yet (the node helper's issue-9 work)")
    from lib.platform import Platform
    store = own_pg_database("egress_pull") if store_param == "postgresql" else None
    gw = GwStub(f"/run/space/test-egress-gw-{uuid.uuid4().hex[:8]}.sock").start()
    p = Platform(f"egress-pull-{store_param}", store=store, node_args=["--gw-socket", gw.path])
    try:
        p.start()
        gw.expect("hello")
        r = e2b(p, "POST", "/v1/sandboxes?wait=true",
                json={"template": "base", "network": {"allow": ["Allowed.Test"]}})
        assert r.status_code == 201, r.text
        sid = r.json()["id"]
        # The create body carried the canonical policy to the node, which attached with it.
        attach, _ = gw.expect("attach")
        assert attach["sandbox"] == sid
        assert attach["policy"] == {"internet": False, "allow": ["allowed.test"], "deny": []}

        # A live replace reaches the gateway through the node.
        r = e2b(p, "PUT", f"/v1/sandboxes/{sid}/network",
                json={"allow": ["pkg.test:443"], "deny": ["198.18.1.66"]})
        assert r.status_code == 200, r.text
        policy, _ = gw.expect("policy")
        assert policy["policy"] == {"internet": False, "allow": ["pkg.test:443"],
                                    "deny": ["198.18.1.66"]}
        assert policy["instance"] == attach["instance"]

        # The stored policy is the desired one: a node that enforces another (here: told so
        # behind the api's back) gets it again from the reconcile (every 10 s).
        status, _ = p.node.call("PUT", f"/v1/sandboxes/{sid}/network", {"internet": True})
        assert status == 200
        assert gw.expect("policy")[0]["policy"]["internet"] is True
        try:
            again, _ = gw.expect("policy", timeout=120)
        except AssertionError as e:
            raise AssertionError(f"{e}: {p.api_log()}") from None
        assert again["policy"] == policy["policy"], again

        now = int(time.time() * 1e6)
        gw.audit([{"sandbox": sid, "time": now + i, "proto": "dns", "name": f"n{i}.test",
                   "verdict": "deny" if i == 2 else "allow", "reason": "allow-name"}
                  for i in range(5)])
        t0 = time.monotonic()
        recs = wait_records(p, sid, 5)
        took = time.monotonic() - t0
        assert [r["name"] for r in recs] == [f"n{i}.test" for i in range(5)], recs
        print(f"audit records visible through the api after {took:.2f} s")
        assert [r["name"] for r in egress(p, sid, "?verdict=deny").json()["records"]] == \
            ["n2.test"]

        # A restarted api reads the node's ring from the start again: nothing twice. Once a
        # record sent after the restart is in, the puller has read past the first five.
        p.stop_api()
        p.start_api()
        gw.audit([{"sandbox": sid, "time": now + 5, "proto": "dns", "name": "n5.test",
                   "verdict": "allow", "reason": "allow-name"}])
        recs = wait_records(p, sid, 6)
        assert [r["name"] for r in recs] == [f"n{i}.test" for i in range(6)], recs

        # A restarted node has a new epoch: its records are read from its start.
        p.node.stop()
        p.node.start()
        gw.expect("hello")
        gw.expect("attach")
        gw.audit([{"sandbox": sid, "time": now + 10, "proto": "tls", "sni": "pkg.test",
                   "verdict": "allow", "reason": "allow-name", "bytesOut": 10, "bytesIn": 20}])
        recs = wait_records(p, sid, 7)
        assert len(recs) == 7 and recs[-1]["sni"] == "pkg.test", recs

        assert e2b(p, "DELETE", f"/v1/sandboxes/{sid}?wait=true").status_code == 204
        assert len(egress(p, sid).json()["records"]) == 7
        p.stop_api()
        p.node.stop()
        left = p.node.leftovers()
    except Exception:
        print("--- api log ---\n" + p.api_log_full()[-6000:] + "\n--- node log ---\n" +
              p.node.log())
        raise
    finally:
        p.destroy()
        gw.stop()
        if store:
            drop_pg_database(store)
    assert not left, left


# ---- the egress CA's rotation (issue 10 item 4; with a real gateway and guests:
# tests/egress/test_ca_rotation.py) ----

def test_egress_ca_without_a_gateway(plat):
    """This platform's node runs --no-gw: nothing to show or rotate (404), and the rotate's
    rules hold before that: an API key is not the host admin (403), bad bodies are 400."""
    r = e2b(plat, "GET", "/v1/egress-ca")
    error(r, 404, "no egress gateway")
    error(e2b(plat, "POST", "/v1/egress-ca/rotate", json={"step": "stage"}), 403, "host admin")
    for body, needle in [({"step": "rollback"}, "step"), ({"step": "stage", "x": 1}, "x"),
                         ({}, "step"), ([], "body")]:
        status, res = plat.admin("POST", "/v1/egress-ca/rotate", body)
        assert status == 400 and needle in res["message"], (body, status, res)
    status, res = plat.admin("POST", "/v1/egress-ca/rotate", {"step": "stage"})
    assert status == 404 and res["code"] == 404, (status, res)


def test_egress_ca_gateway_and_node_down():
    """With a gateway (the stub): the state is the gateway's (stable: it sent no rotation
    fields, as a gateway before rotation would); 503 with Retry-After once it is gone, 502
    once the node is."""
    from lib.platform import Platform
    gw = GwStub(f"/run/space/test-egress-gw-{uuid.uuid4().hex[:8]}.sock").start()
    p = Platform("egress-ca", node_args=["--gw-socket", gw.path])
    try:
        p.start()
        gw.expect("hello")
        deadline = time.monotonic() + 30
        while True:
            status, res = p.admin("GET", "/v1/egress-ca")
            if status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert status == 200 and res["phase"] == "stable", (status, res)
        assert res["sandboxes"] == 0 and res["nodes"][0]["node"] == "local", res
        gw.stop()
        deadline = time.monotonic() + 30
        while True:
            status, res = p.admin("GET", "/v1/egress-ca")
            if status == 503 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert status == 503 and "space-gw" in res["message"], (status, res)
        status, res = p.admin("POST", "/v1/egress-ca/rotate", {"step": "stage"})
        assert status == 503, (status, res)
        p.node.stop()
        status, res = p.admin("GET", "/v1/egress-ca")
        assert status == 502 and "unreachable" in res["message"], (status, res)
    finally:
        p.destroy()
        gw.stop()
