"""The egress policy and audit log at the api (issue 9; docs/architecture.md "Network").

Against a real space-node and space-api, on SQLite and (with SPACE_TEST_PG_URL) PostgreSQL:
- the policy at create, native (`network`) and E2B (`allow_internet_access`,
  `network.allowOut`/`denyOut`), read back natively in canonical form and by E2B getInfo
  as it was given; defaults (native: deny everything; E2B: internet);
- bad policies are 400 naming the bad entry, egressProxy/rules 501, unknown fields 400;
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
import uuid

import pytest

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
    ({"network": {"rules": {"api.test": [{}]}}}, 501, "rules"),
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
    ({"rules": {"a.test": []}}, 501, "rules"),
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
