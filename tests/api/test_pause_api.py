"""Pause and resume through space-api (issue 12 item 1): the lifecycle rows run.

Native: POST /v1/sandboxes/{id}/pause|resume return an operation (202) or, with ?wait=true,
the sandbox (200); a verb from a state its row does not start from is a 409 naming the state
(a second pause too). States show in get and list. E2B: pause is 204 (a second one 409),
connect of a paused sandbox resumes it (201), of a running one only extends its TTL (200);
getInfo and the v2 list say "paused". The CLI's `space sandbox pause|resume`. One platform,
one sandbox for the module.
"""
import base64
import subprocess
import time

import pytest

from lib.platform import SPACE, STORES, e2b, store_platform


@pytest.fixture(scope="module", params=STORES)
def plat(request):
    with store_platform("pauseapi", request.param) as p:
        yield p


@pytest.fixture(scope="module")
def sid(plat):
    status, res = plat.admin("POST", "/v1/sandboxes?wait=true", {"template": "base"})
    assert status == 201, res
    yield res["id"]
    plat.admin("DELETE", f"/v1/sandboxes/{res['id']}?wait=true")


def state(plat, sid):
    status, res = plat.admin("GET", f"/v1/sandboxes/{sid}")
    assert status == 200, res
    return res["state"]


def run(plat, sid, script):
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/exec",
                             {"cmd": "sh", "args": ["-c", script]})
    assert status == 200 and res["exit_code"] == 0, res
    return base64.b64decode(res["stdout_b64"]).decode()


def test_native_pause_resume_and_409s(plat, sid):
    run(plat, sid, "echo before > $HOME/f")
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/pause")
    assert status == 202 and res["operation_id"], res
    status, op = plat.admin("POST", f"/v1/operations/{res['operation_id']}/wait?timeout_s=120")
    assert status == 200 and op["state"] == "succeeded" and op["kind"] == "sandbox.pause", op
    assert state(plat, sid) == "paused"
    status, res = plat.admin("GET", "/v1/sandboxes?state=paused")
    assert sid in [s["id"] for s in res["sandboxes"]], res
    status, res = plat.admin("GET", "/v1/sandboxes?state=running")
    assert sid not in [s["id"] for s in res["sandboxes"]], res

    # A second pause, and other verbs that need it running, name the state.
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/pause")
    assert status == 409 and "paused" in res["message"], res
    status, res = plat.admin("PUT", f"/v1/sandboxes/{sid}/network", {"internet": False})
    assert status == 409 and "paused" in res["message"], res
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/exec", {"cmd": "true"})
    assert status == 409 and "paused" in res["message"], res
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/pause", {"memory": True})
    assert status == 400, res  # no fields: refused, not ignored

    t0 = time.monotonic()
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/resume?wait=true")
    print(f"api resume (wait): {(time.monotonic() - t0) * 1000:.1f} ms")
    assert status == 200 and res["state"] == "running", res
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/resume")
    assert status == 409 and "running" in res["message"], res
    assert run(plat, sid, "cat $HOME/f") == "before\n"

    t0 = time.monotonic()
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/pause?wait=true")
    print(f"api pause (wait): {(time.monotonic() - t0) * 1000:.1f} ms")
    assert status == 200 and res["state"] == "paused", res
    assert plat.admin("POST", f"/v1/sandboxes/{sid}/resume?wait=true")[0] == 200


def test_e2b_pause_connect_and_states(plat, sid):
    assert e2b(plat, "POST", f"/sandboxes/{sid}/pause", json={"memory": False}).status_code == 501
    assert e2b(plat, "POST", f"/sandboxes/{sid}/pause", json={"other": 1}).status_code == 400
    r = e2b(plat, "POST", f"/sandboxes/{sid}/pause", json={})
    assert r.status_code == 204, r.text
    r = e2b(plat, "POST", f"/sandboxes/{sid}/pause", json={})
    assert r.status_code == 409 and "paused" in r.json()["message"], r.text  # the SDK's false
    assert e2b(plat, "GET", f"/sandboxes/{sid}").json()["state"] == "paused"
    listed = {s["sandboxID"]: s["state"] for s in e2b(plat, "GET", "/v2/sandboxes").json()}
    assert listed.get(sid) == "paused", listed
    r = e2b(plat, "GET", "/v2/sandboxes", params={"state": "running"})
    assert sid not in [s["sandboxID"] for s in r.json()]
    r = e2b(plat, "GET", "/v2/sandboxes", params={"state": "paused"})
    assert sid in [s["sandboxID"] for s in r.json()]

    r = e2b(plat, "POST", f"/v2/sandboxes/{sid}/connect", json={"timeout": 600})
    assert r.status_code == 201 and r.json()["sandboxID"] == sid, r.text
    assert e2b(plat, "GET", f"/sandboxes/{sid}").json()["state"] == "running"
    r = e2b(plat, "POST", f"/sandboxes/{sid}/connect", json={"timeout": 10})
    assert r.status_code == 200, r.text
    assert e2b(plat, "POST", f"/sandboxes/{sid}/resume", json={}).status_code == 409

    # the deprecated resume route resumes too
    assert e2b(plat, "POST", f"/sandboxes/{sid}/pause", json={}).status_code == 204
    r = e2b(plat, "POST", f"/sandboxes/{sid}/resume", json={"timeout": 600})
    assert r.status_code == 201, r.text
    assert state(plat, sid) == "running"


def test_cli_pause_resume(plat, sid):
    env = dict(plat.env, SPACE_API_KEY=plat.key)
    res = subprocess.run([SPACE, "sandbox", "pause", sid], env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0 and res.stdout.split() == [sid, "paused"], res
    res = subprocess.run([SPACE, "sandbox", "pause", sid], env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode != 0 and "paused" in res.stderr, res
    res = subprocess.run([SPACE, "sandbox", "resume", sid], env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0 and res.stdout.split() == [sid, "running"], res
