"""space-api end to end: real space-node, real guests, SQLite and PostgreSQL stores.

Covers issue #4's control plane: the E2B REST routes with their exact fields and
statuses, the native API with operations, API keys, timeouts, capacity, bad
input, and crash recovery of space-api in the middle of a create.
"""
import base64
import os
import time

import pytest
import requests

from lib.platform import STORES, Platform, store_platform, e2b

@pytest.fixture(scope="module", params=STORES)
def plat(request):
    with store_platform("api", request.param) as p:
        yield p



def test_e2b_create_get_list_kill(plat):
    r = e2b(plat, "POST", "/v2/sandboxes", json={
        "templateID": "base", "timeout": 120, "metadata": {"run": "a b&c", "suite": "x"},
        "envVars": {"FOO": "bar"}})
    assert r.status_code == 201, r.text
    sb = r.json()
    sid = sb["sandboxID"]
    for field in ("templateID", "clientID", "envdVersion", "envdAccessToken"):
        assert sb[field]
    assert sb["envdVersion"] >= "0.6.4"
    assert sid.isalnum() and sid.islower() and len(sid) == 20

    r = e2b(plat, "GET", f"/sandboxes/{sid}")
    assert r.status_code == 200
    d = r.json()
    for field in ("templateID", "sandboxID", "clientID", "startedAt", "endAt", "envdVersion",
                  "cpuCount", "memoryMB", "diskSizeMB", "state"):
        assert field in d, field
    assert d["state"] == "running" and d["metadata"] == {"run": "a b&c", "suite": "x"}

    # metadata filter, triple-encoded as the SDK does (e2b-compat.md §3.3)
    from urllib.parse import quote, urlencode
    inner = urlencode({quote("run"): quote("a b&c")})
    r = e2b(plat, "GET", "/v2/sandboxes", params={"metadata": inner})
    assert [s["sandboxID"] for s in r.json()] == [sid]
    r = e2b(plat, "GET", "/v2/sandboxes", params={"metadata": urlencode({"run": "other"})})
    assert r.json() == []
    r = e2b(plat, "GET", "/v2/sandboxes", params={"state": "paused"})
    assert r.json() == []
    r = e2b(plat, "GET", "/sandboxes")
    assert sid in [s["sandboxID"] for s in r.json()]

    # sandbox env reaches the guest, with E2B's own variables
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/exec",
                             {"cmd": "/bin/sh", "args": ["-c", "echo $FOO $E2B_SANDBOX_ID"]})
    assert status == 200, res
    assert base64.b64decode(res["stdout_b64"]).decode() == f"bar {sid}\n"
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/exec",
                             {"cmd": "/bin/true", "stdin": "dropped?"})
    assert status == 400 and "'stdin'" in res["message"], res

    assert e2b(plat, "DELETE", f"/sandboxes/{sid}").status_code == 204
    r = e2b(plat, "DELETE", f"/sandboxes/{sid}")
    assert r.status_code == 404 and r.json()["code"] == 404
    r = e2b(plat, "GET", f"/sandboxes/{sid}")
    assert r.status_code == 404 and r.json()["code"] == 404
    assert sid not in [s["sandboxID"] for s in e2b(plat, "GET", "/v2/sandboxes").json()]


def test_v1_create_connect_resume_timeout(plat):
    r = e2b(plat, "POST", "/sandboxes", json={"templateID": "base", "secure": True})
    assert r.status_code == 201, r.text
    sid = r.json()["sandboxID"]
    end0 = e2b(plat, "GET", f"/sandboxes/{sid}").json()["endAt"]
    r = e2b(plat, "POST", f"/sandboxes/{sid}/connect", json={"timeout": 3600})
    assert r.status_code == 200 and r.json()["sandboxID"] == sid
    end1 = e2b(plat, "GET", f"/sandboxes/{sid}").json()["endAt"]
    assert end1 > end0
    r = e2b(plat, "POST", f"/v2/sandboxes/{sid}/connect", json={"timeout": 10})
    assert r.status_code == 200  # connect never shortens
    assert e2b(plat, "GET", f"/sandboxes/{sid}").json()["endAt"] == end1
    assert e2b(plat, "POST", f"/sandboxes/{sid}/resume", json={}).status_code == 409
    # pause / connect-resume: tests/api/test_pause_api.py
    assert e2b(plat, "POST", f"/sandboxes/{sid}/refreshes", json={"duration": 60}).status_code == 204
    # setTimeout may shorten: the sandbox dies by itself.
    assert e2b(plat, "POST", f"/sandboxes/{sid}/timeout", json={"timeout": 1}).status_code == 204
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if e2b(plat, "GET", f"/sandboxes/{sid}").status_code == 404:
            break
        time.sleep(0.5)
    assert e2b(plat, "GET", f"/sandboxes/{sid}").status_code == 404
    r = e2b(plat, "POST", f"/sandboxes/{sid}/connect", json={"timeout": 10})
    assert r.status_code == 404


def test_list_pagination(plat):
    ids = []
    for i in range(3):
        r = e2b(plat, "POST", "/v2/sandboxes", json={"templateID": "base",
                                                      "metadata": {"page": "yes"}})
        assert r.status_code == 201
        ids.append(r.json()["sandboxID"])
    try:
        seen, token = [], None
        while True:
            params = {"limit": 2, "metadata": "page=yes"}
            if token:
                params["nextToken"] = token
            r = e2b(plat, "GET", "/v2/sandboxes", params=params)
            assert r.status_code == 200
            seen += [s["sandboxID"] for s in r.json()]
            token = r.headers.get("X-Next-Token")
            if not token:
                break
        assert sorted(seen) == sorted(ids)
    finally:
        for sid in ids:
            e2b(plat, "DELETE", f"/sandboxes/{sid}")


def test_bad_input_and_auth(plat):
    assert e2b(plat, "GET", "/v2/sandboxes", key="").status_code == 401
    r = e2b(plat, "GET", "/v2/sandboxes", key="e2b_" + "0" * 40)
    assert r.status_code == 401 and r.json()["code"] == 401
    r = e2b(plat, "POST", "/v2/sandboxes", data="{nope")
    assert r.status_code == 400 and r.json()["code"] == 400
    for body in ({}, {"templateID": 1}, {"templateID": "../x"}, {"templateID": "base", "timeout": 0},
                 {"templateID": "base", "timeout": "1"}, {"templateID": "base", "metadata": {"a": 1}},
                 {"templateID": "base", "envVars": []}):
        r = e2b(plat, "POST", "/v2/sandboxes", json=body)
        assert r.status_code == 400 and r.json()["code"] == 400, body
    r = e2b(plat, "POST", "/v2/sandboxes", json={"templateID": "missing"})
    assert r.status_code == 404 and r.json()["code"] == 404
    assert e2b(plat, "GET", "/sandboxes/NOT-AN-ID").status_code == 404
    assert e2b(plat, "GET", "/v2/sandboxes", params={"limit": 0}).status_code == 400
    assert e2b(plat, "GET", "/v2/sandboxes", params={"state": "weird"}).status_code == 400
    r = e2b(plat, "POST", "/v2/sandboxes", data="x" * (2 << 20))
    assert r.status_code == 413
    assert requests.get(plat.url + "/health", timeout=10).status_code == 200
    # nothing half-made is visible after all that
    assert e2b(plat, "GET", "/v2/sandboxes").json() == []


def test_native_operations_and_keys(plat):
    status, res = plat.admin("POST", "/v1/sandboxes", {"template": "base", "metadata": {"k": "v"}})
    assert status == 202, res
    op, sid = res["operation_id"], res["sandbox"]["id"]
    status, res = plat.admin("POST", f"/v1/operations/{op}/wait?timeout_s=300")
    assert status == 200 and res["state"] == "succeeded", res
    status, res = plat.admin("GET", f"/v1/sandboxes/{sid}")
    assert res["state"] == "running"
    status, res = plat.admin("GET", "/v1/sandboxes?metadata=k=v")
    assert [s["id"] for s in res["sandboxes"]] == [sid]

    status, key = plat.admin("POST", "/v1/keys", {"name": "ci"})
    assert status == 201 and key["key"].startswith("e2b_")
    r = requests.get(plat.url + f"/v1/sandboxes/{sid}",
                     headers={"Authorization": "Bearer " + key["key"]}, timeout=30)
    assert r.status_code == 200
    assert plat.admin("DELETE", f"/v1/keys/{key['id']}")[0] == 204
    r = requests.get(plat.url + f"/v1/sandboxes/{sid}", headers={"X-API-Key": key["key"]},
                     timeout=30)
    assert r.status_code == 401

    status, res = plat.admin("DELETE", f"/v1/sandboxes/{sid}?wait=true")
    assert status == 204
    status, res = plat.admin("GET", f"/v1/sandboxes/{sid}")
    assert status == 200 and res["state"] == "killed"
    assert plat.admin("GET", "/v1/operations/" + "0" * 32)[0] == 404
    assert plat.admin("GET", "/v1/operations/xyz")[0] == 404


def test_native_create_asks_its_own_io_limits(plat):
    """net_bps / disk_bps / disk_iops in the native create reach the node (its sandbox JSON
    and the VMM's drive throttling) and the row; out of bounds 400 at the api, beyond the
    node's own maxima the node's 400 passed through."""
    limits = {"net_bps": 1 << 20, "disk_bps": 4 << 20, "disk_iops": 100}
    status, sb = plat.admin("POST", "/v1/sandboxes?wait=true", {"template": "base", **limits})
    assert status == 201, sb
    assert {k: sb[k] for k in limits} == limits, sb
    status, on_node = plat.node.call("GET", f"/v1/sandboxes/{sb['id']}")
    assert status == 200 and {k: on_node[k] for k in limits} == limits, on_node
    assert plat.admin("DELETE", f"/v1/sandboxes/{sb['id']}?wait=true")[0] == 204
    # The disk is the template image's: another size is refused, never silently ignored.
    for key, bad in (("net_bps", 100), ("disk_bps", "fast"), ("disk_iops", 0),
                     ("disk_mb", 4096), ("disk_mb", 1024)):
        status, res = plat.admin("POST", "/v1/sandboxes", {"template": "base", key: bad})
        assert status == 400 and key in res["message"], (key, bad, status, res)
    status, res = plat.admin("POST", "/v1/sandboxes?wait=true",
                             {"template": "base", "disk_iops": 5001})
    assert status == 400 and "--disk-iops" in res["message"], (status, res)
    # The CLI's flags are the same fields.
    node, env_backup = plat.node, plat.node.env
    node.env = plat.env
    try:
        sid = node.cli("sandbox", "create", "--disk-iops", "200", "--net-bps", "2097152",
                       check=True).stdout.decode().strip()
        status, on_node = node.call("GET", f"/v1/sandboxes/{sid}")
        assert (on_node["disk_iops"], on_node["net_bps"]) == (200, 2 << 20), on_node
        node.cli("sandbox", "kill", sid, check=True)
        r = node.cli("sandbox", "create", "--disk-bps", "fast")
        assert r.returncode == 2 and b"invalid number" in r.stderr, r
    finally:
        node.env = env_backup


def test_cli_over_the_api(plat):
    node = plat.node
    env_backup = node.env
    node.env = plat.env
    try:
        r = node.cli("sandbox", "create", "--env", "A=1", "--metadata", "who=cli", check=True)
        sid = r.stdout.decode().strip()
        r = node.cli("sandbox", "exec", sid, "--", "/bin/sh", "-c", "echo $A; exit 4")
        assert (r.returncode, r.stdout) == (4, b"1\n")
        assert sid in node.cli("sandbox", "ls", check=True).stdout.decode()
        local = os.path.join(plat.data, "payload.bin")
        payload = bytes(range(256)) * 4096 + b"tail"
        with open(local, "wb") as f:
            f.write(payload)
        node.cli("sandbox", "cp", local, f"{sid}:/home/user/up/payload.bin", check=True)
        r = node.cli("sandbox", "exec", "--user", "user", sid, "--", "/bin/sh", "-c",
                     "stat -c '%U %s' /home/user/up/payload.bin")
        assert r.stdout == f"user {len(payload)}\n".encode()
        back = os.path.join(plat.data, "back.bin")
        node.cli("sandbox", "cp", f"{sid}:/home/user/up/payload.bin", back, check=True)
        with open(back, "rb") as f:
            assert f.read() == payload
        r = node.cli("sandbox", "cp", f"{sid}:/nope", back)
        assert r.returncode == 1 and b"copy failed" in r.stderr
        r = node.cli("keys", "create", "cli-key", check=True)
        assert r.stdout.decode().startswith("e2b_")
        assert b"cli-key" in node.cli("keys", "ls", check=True).stdout
        node.cli("sandbox", "kill", sid, check=True)
        r = node.cli("sandbox", "get", sid, check=True)
        assert b'"killed"' in r.stdout
    finally:
        node.env = env_backup


def test_api_crash_during_create_recovers(plat):
    """kill -9 of space-api while a create runs: after restart the operation finishes."""
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(lambda: e2b(plat, "POST", "/v2/sandboxes",
                                          json={"templateID": "base"}))
        time.sleep(0.5)
        plat.crash_api()
        with pytest.raises(Exception):
            pending.result()
    plat.start_api()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status, res = plat.admin("GET", "/v1/sandboxes?state=creating,running,killed")
        states = {s["id"]: s["state"] for s in res["sandboxes"]}
        if states and all(v != "creating" for v in states.values()):
            break
        time.sleep(0.5)
    running = [sid for sid, st in states.items() if st == "running"]
    assert running, states
    for sid in running:
        assert e2b(plat, "DELETE", f"/sandboxes/{sid}").status_code == 204
    # the node has nothing the store does not know about
    status, res = plat.node.call("GET", "/v1/sandboxes")
    assert res["sandboxes"] == []


def test_capacity_is_a_clear_429():
    p = Platform("cap", api_args=["--max-sandboxes", "1"])
    try:
        p.start()
        r = e2b(p, "POST", "/v2/sandboxes", json={"templateID": "base"})
        assert r.status_code == 201
        r2 = e2b(p, "POST", "/v2/sandboxes", json={"templateID": "base"})
        assert r2.status_code == 429 and r2.json()["code"] == 429
        assert int(r2.headers["Retry-After"]) > 0
        e2b(p, "DELETE", f"/sandboxes/{r.json()['sandboxID']}")
    finally:
        p.destroy()


def test_template_build_through_the_api(plat):
    status, res = plat.admin("POST", "/v1/templates/base/build")
    assert status == 200, res
    assert res["name"] == "base" and res["kernel"] == "vmlinux"
    r = e2b(plat, "POST", "/v1/templates/nope/build")
    assert r.status_code == 404 and r.json()["code"] == 404
    r = e2b(plat, "POST", "/v1/templates/..%2Fetc/build")
    assert r.status_code in (400, 404)
    status, res = plat.admin("GET", "/v1/templates")
    assert "base" in [t["name"] for t in res["templates"]]
