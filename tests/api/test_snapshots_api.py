"""Snapshots through space-api (issue 12): migration 0009's rows and the routes over them.

Native: POST /v1/sandboxes/{id}/snapshots {kind?, name?} records a sandbox.snapshot operation
(202) or with ?wait=true answers the snapshot once the node committed it (201, state
complete); GET /v1/snapshots pages newest first (sandbox, name, limit, after); GET/DELETE
/v1/snapshots/{id}. E2B, as the SDK calls them: POST /sandboxes/{id}/snapshots {name?} → 201
{snapshotID, names}; GET /snapshots (sandboxID, name, limit, nextToken + X-Next-Token);
DELETE /templates/{id} → 204 for a snapshot, 404 otherwise. Bad input: 400 (fields, names,
queries), 404 (unknown sandbox or snapshot), 409 (a taken name, a suspended sandbox). The
CLI's `space snapshot create|ls|rm`. One platform per store, one sandbox for the module.
"""
import json
import subprocess

import pytest

from lib.platform import SPACE, STORES, api_sandbox, e2b, store_platform


@pytest.fixture(scope="module", params=STORES)
def plat(request):
    with store_platform("snapapi", request.param) as p:
        yield p


@pytest.fixture(scope="module")
def sid(plat):
    with api_sandbox(plat) as s:
        yield s


def node_snapshots(plat):
    status, res = plat.node.call("GET", "/v1/snapshots")
    assert status == 200, res
    return {s["id"]: s for s in res["snapshots"]} if isinstance(res, dict) else {
        s["id"]: s for s in res}


def test_native_snapshot_operation_and_wait(plat, sid):
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/snapshots", {"kind": "disk"})
    assert status == 202 and res["operation_id"], res
    snap = res["snapshot"]
    assert snap["state"] == "pending" and snap["kind"] == "disk" and snap["sandbox_id"] == sid
    status, op = plat.admin("POST", f"/v1/operations/{res['operation_id']}/wait?timeout_s=300")
    assert status == 200 and op["state"] == "succeeded" and op["kind"] == "sandbox.snapshot", op
    status, got = plat.admin("GET", f"/v1/snapshots/{snap['id']}")
    assert status == 200 and got["state"] == "complete", got
    assert got["template"] == "base" and got["memory_mb"] == 512 and got["name"] is None
    assert snap["id"] in node_snapshots(plat)

    status, full = plat.admin("POST", f"/v1/sandboxes/{sid}/snapshots?wait=true",
                              {"name": "native-one"})
    assert status == 201 and full["state"] == "complete" and full["kind"] == "full", full
    assert node_snapshots(plat)[full["id"]]["kind"] == "full"
    # The sandbox goes on as it was.
    status, res = plat.admin("GET", f"/v1/sandboxes/{sid}")
    assert res["state"] == "running", res

    for i in (snap["id"], full["id"]):
        assert plat.admin("DELETE", f"/v1/snapshots/{i}")[0] == 204
        assert plat.admin("GET", f"/v1/snapshots/{i}")[0] == 404
        assert i not in node_snapshots(plat)
    assert plat.admin("DELETE", f"/v1/snapshots/{snap['id']}")[0] == 404


def test_native_bad_input(plat, sid):
    cases = [
        ({"kind": "memory"}, 400), ({"name": ""}, 400), ({"name": "a/b"}, 400),
        ({"name": ".hidden"}, 400), ({"name": "x" * 65}, 400), ({"name": 3}, 400),
        ({"memory": True}, 400),
    ]
    for body, want in cases:
        status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/snapshots", body)
        assert status == want and res["message"], (body, status, res)
    status, res = plat.admin("POST", "/v1/sandboxes/aaaaaaaaaaaaaaaaaaaa/snapshots", {})
    assert status == 404, res
    status, res = plat.admin("POST", "/v1/sandboxes/nope/snapshots", {})
    assert status == 404, res
    for q in ("limit=0", "limit=1001", "limit=x", "sandbox=bad", "after=bad", "name=a/b",
              "after=aaaaaaaaaaaaaaaaaaaa", "color=red"):
        status, res = plat.admin("GET", f"/v1/snapshots?{q}")
        assert status == 400 and res["message"], (q, res)
    assert plat.admin("GET", "/v1/snapshots/aaaaaaaaaaaaaaaaaaaa")[0] == 404
    assert plat.admin("DELETE", "/v1/snapshots/not-an-id")[0] == 404
    # Creates from what is not a restorable snapshot.
    status, res = plat.admin("POST", "/v1/sandboxes", {"snapshot": "aaaaaaaaaaaaaaaaaaaa"})
    assert status == 404, res
    status, res = plat.admin("POST", "/v1/sandboxes", {"snapshot": 7})
    assert status == 404, res
    status, disk = plat.admin("POST", f"/v1/sandboxes/{sid}/snapshots?wait=true",
                              {"kind": "disk"})
    assert status == 201, disk
    status, res = plat.admin("POST", "/v1/sandboxes", {"snapshot": disk["id"]})
    assert status == 400 and "disk snapshot" in res["message"], res
    status, res = plat.admin("POST", "/v1/sandboxes",
                             {"snapshot": disk["id"], "memory_mb": 1024})
    assert status == 400, res
    r = e2b(plat, "POST", "/v2/sandboxes", json={"templateID": disk["id"]})
    assert r.status_code == 400, r.text
    assert plat.admin("DELETE", f"/v1/snapshots/{disk['id']}")[0] == 204


def test_name_taken_is_409(plat, sid):
    status, a = plat.admin("POST", f"/v1/sandboxes/{sid}/snapshots?wait=true",
                           {"name": "taken", "kind": "disk"})
    assert status == 201, a
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/snapshots", {"name": "taken"})
    assert status == 409 and "taken" in res["message"], res
    r = e2b(plat, "POST", f"/sandboxes/{sid}/snapshots", json={"name": "taken"})
    assert r.status_code == 409, r.text
    assert plat.admin("DELETE", f"/v1/snapshots/{a['id']}")[0] == 204


def test_pagination_and_filters(plat, sid):
    ids = []
    for i in range(5):
        status, s = plat.admin("POST", f"/v1/sandboxes/{sid}/snapshots?wait=true",
                               {"kind": "disk", "name": f"page-{i}"})
        assert status == 201, s
        ids.append(s["id"])
    newest_first = list(reversed(ids))
    # Native: after cursor.
    seen, after = [], None
    while True:
        q = "limit=2&sandbox=" + sid + (f"&after={after}" if after else "")
        status, page = plat.admin("GET", f"/v1/snapshots?{q}")
        assert status == 200 and len(page["snapshots"]) <= 2, page
        seen += [s["id"] for s in page["snapshots"]]
        after = page.get("next")
        if not after:
            break
    assert seen == newest_first, (seen, newest_first)
    status, page = plat.admin("GET", "/v1/snapshots?name=page-3")
    assert [s["id"] for s in page["snapshots"]] == [ids[3]], page
    # E2B: nextToken in X-Next-Token, items {snapshotID, names}.
    seen, token = [], None
    while True:
        params = {"limit": 2, "sandboxID": sid}
        if token:
            params["nextToken"] = token
        r = e2b(plat, "GET", "/snapshots", params=params)
        assert r.status_code == 200, r.text
        seen += [s["snapshotID"] for s in r.json()]
        assert all(set(s) == {"snapshotID", "names"} for s in r.json()), r.json()
        token = r.headers.get("X-Next-Token")
        if not token:
            break
    assert seen == newest_first
    r = e2b(plat, "GET", "/snapshots", params={"name": "page-1"})
    assert r.json() == [{"snapshotID": ids[1], "names": ["page-1"]}], r.json()
    r = e2b(plat, "GET", "/snapshots", params={"sandboxID": "aaaaaaaaaaaaaaaaaaaa"})
    assert r.status_code == 200 and r.json() == []
    for params in ({"limit": 0}, {"nextToken": "zz"}, {"sandboxID": "x"}, {"other": 1}):
        r = e2b(plat, "GET", "/snapshots", params=params)
        assert r.status_code == 400, (params, r.text)
    for i in ids:
        assert e2b(plat, "DELETE", f"/templates/{i}").status_code == 204


def test_e2b_routes(plat, sid):
    r = e2b(plat, "POST", f"/sandboxes/{sid}/snapshots", json={})
    assert r.status_code == 201, r.text
    body = r.json()
    assert set(body) == {"snapshotID", "names"} and body["names"] == [], body
    r = e2b(plat, "POST", f"/sandboxes/{sid}/snapshots", json={"name": "e2b-named"})
    assert r.status_code == 201 and r.json()["names"] == ["e2b-named"], r.text
    named = r.json()["snapshotID"]
    assert node_snapshots(plat)[named]["kind"] == "full"  # E2B's are memory snapshots
    r = e2b(plat, "POST", f"/sandboxes/{sid}/snapshots", json={"kind": "disk"})
    assert r.status_code == 400, r.text  # not an E2B field
    r = e2b(plat, "POST", "/sandboxes/aaaaaaaaaaaaaaaaaaaa/snapshots", json={})
    assert r.status_code == 404 and r.json()["code"] == 404, r.text
    r = e2b(plat, "POST", f"/sandboxes/{sid}/snapshots", key="no", json={})
    assert r.status_code == 401
    listed = [s["snapshotID"] for s in e2b(plat, "GET", "/snapshots").json()]
    assert listed[:2] == [named, body["snapshotID"]], listed
    for i in (body["snapshotID"], named):
        assert e2b(plat, "DELETE", f"/templates/{i}").status_code == 204
        assert e2b(plat, "DELETE", f"/templates/{i}").status_code == 404
    # A template (or anything that is no snapshot) is not deleted through E2B: 404 = false.
    assert e2b(plat, "DELETE", "/templates/base").status_code == 404
    assert e2b(plat, "DELETE", "/templates/tags").status_code != 204


def test_suspended_sandbox_is_409(plat):
    status, sb = plat.admin("POST", "/v1/sandboxes?wait=true", {"template": "base"})
    assert status == 201, sb
    try:
        assert plat.admin("POST", f"/v1/sandboxes/{sb['id']}/suspend?wait=true")[0] == 200
        status, res = plat.admin("POST", f"/v1/sandboxes/{sb['id']}/snapshots", {})
        assert status == 409 and "suspended" in res["message"], res
        status, res = plat.admin("GET", f"/v1/snapshots?sandbox={sb['id']}")
        assert res["snapshots"] == [], res  # nothing recorded
    finally:
        plat.admin("DELETE", f"/v1/sandboxes/{sb['id']}?wait=true")


def test_cli(plat, sid):
    def space(*args, check=True):
        return subprocess.run([SPACE, "snapshot", *args], env=dict(plat.env, SPACE_API_KEY=plat.key),
                              capture_output=True, text=True, timeout=600, check=check)

    out = space("create", sid, "--name", "cli-one", "--kind", "disk").stdout
    snap_id = out.split()[0]
    assert len(snap_id) == 20, out
    ls = space("ls").stdout
    assert snap_id in ls and "cli-one" in ls and "complete" in ls, ls
    listed = json.loads(space("ls", "--json").stdout)
    assert snap_id in [s["id"] for s in listed], listed
    space("rm", snap_id)
    assert snap_id not in space("ls").stdout
    assert space("rm", snap_id, check=False).returncode != 0
    assert space("create", check=False).returncode != 0
