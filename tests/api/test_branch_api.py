"""Branching a live sandbox into N through space-api (issue 12): native POST
/v1/sandboxes/{id}/branch {count?, timeout_s?} and E2B POST /sandboxes/{id}/fork {count?,
timeout?}, on both stores.

Bad input is refused before anything is recorded: unknown fields, a count outside 1..16, a bad
timeout (400), an unknown sandbox (404), a suspended one (409 naming the state). A branch that
runs answers 201 with one entry per requested branch; with --max-sandboxes 2 a count of 3 gives
one sandbox and two capacity entries (503 native, 429 E2B), and the intermediate snapshot is
gone afterwards (from the store and the node). A paused parent branches too (the branch
runs, the parent stays paused). `space snapshot branch` prints the new ids. A leftover intermediate snapshot (a crash
mid-branch) is swept by the controller's tick. The VM-level proof (memory, files, identity,
divergence) is tests/vm/test_branch.py; the SDK's is tests/compat/test_fork_compat.py.
"""
import os
import subprocess
import time

import pytest

from lib.platform import SPACE, STORES, api_sandbox, e2b, store_platform

UNKNOWN = "aaaaaaaaaaaaaaaaaaaa"


@pytest.fixture(scope="module", params=STORES)
def plat(request):
    def small(p):
        p.api_args += ["--max-sandboxes", "2"]
    with store_platform("branchapi", request.param, setup=small) as p:
        yield p


@pytest.fixture(scope="module")
def sid(plat):
    with api_sandbox(plat) as s:
        yield s


def snapshots(plat):
    status, res = plat.admin("GET", "/v1/snapshots")
    assert status == 200, res
    return res["snapshots"]


def node_snapshots(plat):
    status, res = plat.node.call("GET", "/v1/snapshots")
    assert status == 200, res
    return res["snapshots"] if isinstance(res, dict) else res


def test_bad_input(plat, sid):
    native = [{"count": 0}, {"count": 17}, {"count": "2"}, {"count": 1.5}, {"timeout_s": -1},
              {"timeout_s": "x"}, {"timeout": 10}, {"template": "base"}, {"snapshot": sid}]
    for body in native:
        status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/branch", body)
        assert status == 400 and res["message"], (body, status, res)
    fork = [{"count": 0}, {"count": 17}, {"count": True}, {"timeout": 0}, {"timeout": 10 ** 9},
            {"timeout_s": 10}, {"name": "x"}]
    for body in fork:
        r = e2b(plat, "POST", f"/sandboxes/{sid}/fork", json=body)
        assert r.status_code == 400 and r.json()["code"] == 400, (body, r.text)
    status, res = plat.admin("POST", f"/v1/sandboxes/{UNKNOWN}/branch", {})
    assert status == 404, res
    status, res = plat.admin("POST", "/v1/sandboxes/not-an-id/branch", {})
    assert status == 404, res
    r = e2b(plat, "POST", f"/sandboxes/{UNKNOWN}/fork", json={})
    assert r.status_code == 404 and r.json()["code"] == 404, r.text
    r = e2b(plat, "POST", f"/sandboxes/{sid}/fork", key="no", json={})
    assert r.status_code == 401
    # Nothing was recorded by any of them.
    assert snapshots(plat) == []


def test_suspended_is_409(plat, sid):
    status, sb = plat.admin("POST", "/v1/sandboxes?wait=true", {"template": "base"})
    assert status == 201, sb
    try:
        assert plat.admin("POST", f"/v1/sandboxes/{sb['id']}/suspend?wait=true")[0] == 200
        status, res = plat.admin("POST", f"/v1/sandboxes/{sb['id']}/branch", {"count": 2})
        assert status == 409 and "suspended" in res["message"], res
        r = e2b(plat, "POST", f"/sandboxes/{sb['id']}/fork", json={})
        assert r.status_code == 409 and "suspended" in r.json()["message"], r.text
        assert snapshots(plat) == []
    finally:
        plat.admin("DELETE", f"/v1/sandboxes/{sb['id']}?wait=true")


def test_capacity_refusals_are_entries_and_the_snapshot_goes(plat, sid):
    # --max-sandboxes 2: the parent and one branch; the other two are refused, per entry.
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/branch", {"count": 3,
                                                                      "timeout_s": 600})
    assert status == 201, res
    items = res["sandboxes"]
    assert len(items) == 3, items
    made = [i["sandbox"] for i in items if "sandbox" in i]
    errors = [i["error"] for i in items if "error" in i]
    try:
        assert len(made) == 1 and made[0]["state"] == "running", items
        assert made[0]["template"] == "base" and made[0]["id"] != sid, made
        assert made[0]["end_at"], made  # timeout_s applies
        assert [e["code"] for e in errors] == [503, 503], errors
        assert all("capacity" in e["message"] for e in errors), errors
        assert set(items[0]) == {"sandbox"}, items[0]  # the first one got the slot
        assert snapshots(plat) == [] and node_snapshots(plat) == []
    finally:
        for sb in made:
            plat.admin("DELETE", f"/v1/sandboxes/{sb['id']}?wait=true")

    # E2B: the same through fork, in E2B's shapes (a Sandbox per entry, 429 when full).
    r = e2b(plat, "POST", f"/sandboxes/{sid}/fork", json={"count": 2, "timeout": 120})
    assert r.status_code == 201, r.text
    items = r.json()
    assert isinstance(items, list) and len(items) == 2, items
    try:
        sb = items[0]["sandbox"]
        assert {"sandboxID", "templateID", "envdVersion", "envdAccessToken",
                "clientID"} <= set(sb), sb
        assert sb["sandboxID"] != sid and sb["templateID"] == "base", sb
        assert items[1] == {"error": items[1]["error"]} and items[1]["error"]["code"] == 429
        info = e2b(plat, "GET", f"/sandboxes/{sb['sandboxID']}").json()
        assert info["state"] == "running" and info["templateID"] == "base", info
        assert snapshots(plat) == [] and node_snapshots(plat) == []
    finally:
        for i in items:
            if "sandbox" in i:
                e2b(plat, "DELETE", f"/sandboxes/{i['sandbox']['sandboxID']}")


def test_a_paused_parent_branches_and_stays_paused(plat, sid):
    assert plat.admin("POST", f"/v1/sandboxes/{sid}/pause?wait=true")[0] == 200
    made = []
    try:
        status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/branch", {})
        assert status == 201 and len(res["sandboxes"]) == 1, res
        made = [i["sandbox"]["id"] for i in res["sandboxes"] if "sandbox" in i]
        assert len(made) == 1, res
        status, sb = plat.admin("GET", f"/v1/sandboxes/{made[0]}")
        assert sb["state"] == "running", sb
        status, out = plat.admin("POST", f"/v1/sandboxes/{made[0]}/exec",
                                 {"cmd": "hostname", "timeout_ms": 60000})
        assert status == 200 and out["exit_code"] == 0, out
        assert plat.admin("GET", f"/v1/sandboxes/{sid}")[1]["state"] == "paused"
        assert snapshots(plat) == []
    finally:
        for b in made:
            plat.admin("DELETE", f"/v1/sandboxes/{b}?wait=true")
        assert plat.admin("POST", f"/v1/sandboxes/{sid}/resume?wait=true")[0] == 200


def test_cli(plat, sid):
    # `space snapshot branch`: the new ids on stdout, one a line; a refused branch on stderr
    # and exit 1 (--max-sandboxes 2: the parent and one branch fit).
    r = subprocess.run([SPACE, "snapshot", "branch", sid, "-n", "2", "--timeout", "600"],
                       env=dict(plat.env, SPACE_API_KEY=plat.key), capture_output=True,
                       text=True, timeout=900)
    ids = r.stdout.split()
    try:
        assert r.returncode == 1 and len(ids) == 1 and len(ids[0]) == 20, (r.stdout, r.stderr)
        assert "branch 2:" in r.stderr and "capacity" in r.stderr, r.stderr
        assert plat.admin("GET", f"/v1/sandboxes/{ids[0]}")[1]["state"] == "running"
    finally:
        for i in ids:
            plat.admin("DELETE", f"/v1/sandboxes/{i}?wait=true")


def sql(plat, statement):
    """Runs SQL on the platform's own store, as an operator (or a crashed replica) would."""
    if plat.store:
        cmd = ["psql", plat.store, "-XAtc", statement]
    else:
        cmd = ["sqlite3", "-cmd", ".timeout 5000", os.path.join(plat.data, "space.db"), statement]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr


def test_a_leftover_intermediate_snapshot_is_swept(plat, sid):
    # What a space-api that died between the snapshot and its removal leaves: a complete row
    # named .branch-<id> (no caller can give that name). The tick removes it once it is older
    # than the grace (30 s) and nothing restores it; a snapshot of the caller's own stays.
    old = int((time.time() - 120) * 1e6)
    rows = {"bbbbbbbbbbbbbbbbbbbb": ".branch-bbbbbbbbbbbbbbbbbbbb",
            "cccccccccccccccccccc": "kept-cccc"}
    for i, name in rows.items():
        sql(plat, "INSERT INTO snapshots (id, owner, sandbox_id, node_id, template_id, kind, name, "
                  "state, operation_id, vcpus, memory_mb, created_at, updated_at) VALUES "
                  f"('{i}', 'space', '{sid}', 'local', 'base', 'full', '{name}', 'complete', "
                  f"'{'0' * 32}', 1, 512, {old}, {old})")
    deadline = time.monotonic() + 60
    while "bbbbbbbbbbbbbbbbbbbb" in [s["id"] for s in snapshots(plat)]:
        assert time.monotonic() < deadline, snapshots(plat)
        time.sleep(1)
    assert [s["id"] for s in snapshots(plat)] == ["cccccccccccccccccccc"]
    assert plat.admin("DELETE", "/v1/snapshots/cccccccccccccccccccc")[0] == 204
