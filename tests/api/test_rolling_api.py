"""Rolling snapshots through space-api (issue 12 item 5): migration 0011's policies and what
the controller does with them.

PUT/GET/DELETE /v1/sandboxes/{id}/snapshot-policy and the create field "snapshots" set a
sandbox's policy (periods, age tiers, a byte bound); the controller's tick takes its due turns
as ordinary sandbox.snapshot operations whose snapshots say source "rolling" (user ones say
"user") and deletes, with the ordinary removal, the rolling ones retention no longer keeps:
beyond the last tier, then the oldest beyond max_bytes. User snapshots are never deleted by
it. Bad policies are 400, a missing (or killed) sandbox 404. space-api runs with
--rolling-min-period 1 (a test option) so periods of seconds are allowed. One platform per
store, one long-lived sandbox for the module plus one created with the field and killed
(two replicas on one database: test_rolling_replicas.py).
"""
import json
import subprocess
import time

import pytest

from lib.platform import SPACE, STORES, api_sandbox, store_platform


@pytest.fixture(scope="module", params=STORES)
def plat(request):
    with store_platform("rolling", request.param,
                        setup=lambda p: p.api_args.extend(["--rolling-min-period", "1"])) as p:
        yield p


@pytest.fixture(scope="module")
def sid(plat):
    with api_sandbox(plat) as s:
        yield s


def snapshots(plat, sid, source=None):
    status, res = plat.admin("GET", f"/v1/snapshots?sandbox={sid}&limit=1000")
    assert status == 200, res
    return [s for s in res["snapshots"] if source is None or s["source"] == source]


def wait_for(what, fn, timeout=180, every=0.5):
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every)


def delete_all(plat, sid):
    for s in snapshots(plat, sid):
        if s["state"] == "complete":
            plat.admin("DELETE", f"/v1/snapshots/{s['id']}")


def test_bad_policies(plat, sid):
    path = f"/v1/sandboxes/{sid}/snapshot-policy"
    bad = [
        [], {}, {"disk_every_s": 0}, {"disk_every_s": "60"}, {"disk_every_s": -5},
        {"disk_every_s": 1.5}, {"disk_every_s": 60, "colour": 1},
        {"disk_every_s": 60, "max_bytes": -1}, {"disk_every_s": 60, "tiers": []},
        {"disk_every_s": 60, "tiers": [{}]}, {"disk_every_s": 60, "tiers": [{"every_s": 60}]},
        {"disk_every_s": 60, "tiers": [{"every_s": 60, "for_s": 30}]},
        {"disk_every_s": 60, "tiers": [{"keep_all_s": 60, "every_s": 60}]},
        {"disk_every_s": 1, "tiers": [{"keep_all_s": 100000}]},  # > 1000 kept
        {"disk_every_s": 60, "tiers": [{"keep_all_s": 60}] * 9},
    ]
    for body in bad:
        status, res = plat.admin("PUT", path, body)
        assert status == 400 and res["message"], (body, status, res)
    assert plat.admin("GET", path)[0] == 404  # none was stored
    status, res = plat.admin("POST", "/v1/sandboxes", {"template": "base",
                                                       "snapshots": {"disk_every_s": 0}})
    assert status == 400 and "snapshots" in res["message"], res
    for method in ("PUT", "GET", "DELETE"):
        body = {"disk_every_s": 60} if method == "PUT" else None
        status, res = plat.admin(method, "/v1/sandboxes/aaaaaaaaaaaaaaaaaaaa/snapshot-policy", body)
        assert status == 404, (method, status, res)
    assert plat.admin("DELETE", path)[0] == 404  # no policy


def test_rolling_snapshots_appear_and_retire(plat, sid):
    status, user = plat.admin("POST", f"/v1/sandboxes/{sid}/snapshots?wait=true",
                              {"kind": "disk", "name": "mine"})
    assert status == 201 and user["source"] == "user" and user["bytes"] > 0, user

    path = f"/v1/sandboxes/{sid}/snapshot-policy"
    status, res = plat.admin("PUT", path, {"disk_every_s": 2, "full_every_s": 7,
                                           "tiers": [{"keep_all_s": 10}]})
    assert status == 200, res
    assert res["sandbox_id"] == sid and res["next_disk_at"] and res["next_full_at"], res
    assert res["policy"] == {"disk_every_s": 2, "full_every_s": 7,
                             "tiers": [{"keep_all_s": 10}], "max_bytes": 0}, res
    assert plat.admin("GET", path) == (200, res)

    # Rolling ones appear, disk and full, complete with their size.
    def some():
        done = [s for s in snapshots(plat, sid, "rolling") if s["state"] == "complete"]
        kinds = {s["kind"] for s in done}
        return done if len(done) >= 3 and kinds == {"disk", "full"} else None
    first = wait_for("rolling disk and full snapshots", some)
    assert all(s["bytes"] > 0 and s["name"] is None for s in first), first
    status, op = plat.admin("GET", f"/v1/sandboxes/{sid}")
    assert op["state"] == "running", op

    # Retention: what is older than the 10 s band goes; the user snapshot stays.
    oldest = min(first, key=lambda s: s["created_at"])["id"]
    wait_for("retention to delete the oldest rolling snapshot",
             lambda: oldest not in [s["id"] for s in snapshots(plat, sid)], timeout=120)
    assert user["id"] in [s["id"] for s in snapshots(plat, sid, "user")]
    assert "retention deletes" in plat.api_log_full()

    # Removing the policy stops the turns; what was taken stays (the default tiers keep it).
    assert plat.admin("DELETE", path)[0] == 204
    assert plat.admin("GET", path)[0] == 404
    time.sleep(3)  # a turn already recorded finishes
    before = {s["id"] for s in snapshots(plat, sid, "rolling")}
    time.sleep(6)
    after = {s["id"] for s in snapshots(plat, sid, "rolling")}
    assert after == before, (before, after)
    delete_all(plat, sid)


def test_max_bytes(plat, sid):
    path = f"/v1/sandboxes/{sid}/snapshot-policy"
    status, one = plat.admin("POST", f"/v1/sandboxes/{sid}/snapshots?wait=true", {"kind": "disk"})
    assert status == 201, one
    bound = one["bytes"] * 3 // 2  # room for one rolling disk snapshot, not two
    status, res = plat.admin("PUT", path, {"disk_every_s": 2, "tiers": [{"keep_all_s": 600}],
                                           "max_bytes": bound})
    assert status == 200 and res["policy"]["max_bytes"] == bound, res
    seen = set()

    def bounded():
        done = [s for s in snapshots(plat, sid, "rolling") if s["state"] == "complete"]
        seen.update(s["id"] for s in done)
        return len(seen) >= 3 and len(done) <= 1
    wait_for("three rolling snapshots taken and the byte bound kept", bounded, timeout=180)
    # The user snapshot is not counted against it and is not deleted.
    assert one["id"] in [s["id"] for s in snapshots(plat, sid, "user")]
    assert plat.admin("DELETE", path)[0] == 204
    time.sleep(3)
    delete_all(plat, sid)


def test_create_field_kill_and_cli(plat, sid):
    def space(*args, check=True):
        return subprocess.run([SPACE, "snapshot", *args], env=dict(plat.env, SPACE_API_KEY=plat.key),
                              capture_output=True, text=True, timeout=600, check=check)

    out = json.loads(space("policy", "set", sid, "--disk-every", "3600", "--tier", "all:3600",
                           "--tier", "3600:86400", "--max-bytes", "1000000").stdout)
    assert out["policy"] == {"disk_every_s": 3600, "full_every_s": 0,
                             "tiers": [{"keep_all_s": 3600}, {"every_s": 3600, "for_s": 86400}],
                             "max_bytes": 1000000}, out
    assert json.loads(space("policy", "get", sid).stdout)["policy"] == out["policy"]
    assert space("policy", "set", sid, "--disk-every", "0", check=False).returncode == 1
    space("policy", "rm", sid)
    assert space("policy", "get", sid, check=False).returncode == 1
    assert "SOURCE" in space("ls").stdout

    status, sb = plat.admin("POST", "/v1/sandboxes?wait=true",
                            {"template": "base", "snapshots": {"full_every_s": 3600}})
    assert status == 201, sb
    try:
        status, res = plat.admin("GET", f"/v1/sandboxes/{sb['id']}/snapshot-policy")
        assert status == 200 and res["policy"]["full_every_s"] == 3600, res
        assert res["policy"]["tiers"][0] == {"keep_all_s": 3600}, res  # the default tiers
        assert res["next_disk_at"] is None and res["next_full_at"], res
    finally:
        assert plat.admin("DELETE", f"/v1/sandboxes/{sb['id']}?wait=true")[0] == 204
    for method in ("GET", "PUT"):
        body = {"disk_every_s": 60} if method == "PUT" else None
        status, res = plat.admin(method, f"/v1/sandboxes/{sb['id']}/snapshot-policy", body)
        assert status == 404, (method, status, res)

