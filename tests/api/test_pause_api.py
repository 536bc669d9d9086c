"""Pause and resume through space-api (issue 12 item 1): the lifecycle rows run.

Native: POST /v1/sandboxes/{id}/pause|resume return an operation (202) or, with ?wait=true,
the sandbox (200); a verb from a state its row does not start from is a 409 naming the state
(a second pause too). States show in get and list. E2B: pause is 204 (a second one 409),
connect of a paused sandbox resumes it (201), of a running one only extends its TTL (200);
getInfo and the v2 list say "paused". The CLI's `space sandbox pause|resume`. One platform,
one sandbox for the module (a second for the disk-only pause at the timeout).

Without memory (issue 12 item 6): E2B's pause {memory: false}, the native suspend
{memory: false} and create's autoPause + autoPauseMemory: false suspend the disk only (the
guest syncs, the VM goes): the resume boots from the disk, files written before are there
(also unsynced ones), processes are gone. connect/resume {memory: false} of a sandbox
suspended with memory drops the memory state (a reboot); of one paused natively is a 409.
"""
import base64
import subprocess
import time

import pytest

from lib.platform import SPACE, STORES, api_sandbox, e2b, store_platform


@pytest.fixture(scope="module", params=STORES)
def plat(request):
    with store_platform("pauseapi", request.param) as p:
        yield p


@pytest.fixture(scope="module")
def sid(plat):
    with api_sandbox(plat) as s:
        yield s


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
    # bad inputs: refused, the sandbox as it was
    for body in ({"memory": "no"}, {"memory": 0}, {"memory": False, "x": 1}):
        r = e2b(plat, "POST", f"/sandboxes/{sid}/pause", json=body)
        assert r.status_code == 400, (body, r.text)
    assert state(plat, sid) == "running"
    assert e2b(plat, "POST", f"/sandboxes/{sid}/pause", json={"other": 1}).status_code == 400
    r = e2b(plat, "POST", f"/sandboxes/{sid}/pause", json={})
    assert r.status_code == 204, r.text
    assert state(plat, sid) == "suspended"  # E2B's pause is space's suspend
    r = e2b(plat, "POST", f"/sandboxes/{sid}/pause", json={})
    assert r.status_code == 409 and "suspended" in r.json()["message"], r.text  # the SDK's false
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

    # the deprecated resume route resumes too, and a natively paused sandbox is E2B-paused
    assert plat.admin("POST", f"/v1/sandboxes/{sid}/pause?wait=true")[0] == 200
    assert e2b(plat, "GET", f"/sandboxes/{sid}").json()["state"] == "paused"
    assert e2b(plat, "POST", f"/sandboxes/{sid}/pause", json={}).status_code == 409
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


def test_native_suspend_restore(plat, sid):
    run(plat, sid, "echo unsynced > $HOME/s")
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/suspend?wait=true")
    assert status == 200 and res["state"] == "suspended", res
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/suspend")
    assert status == 409 and "suspended" in res["message"], res
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/resume")
    assert status == 409 and "suspended" in res["message"], res
    status, res = plat.admin("GET", "/v1/sandboxes?state=suspended")
    assert sid in [s["id"] for s in res["sandboxes"]], res
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/restore?wait=true")
    assert status == 200 and res["state"] == "running", res
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/restore")
    assert status == 409 and "running" in res["message"], res
    assert run(plat, sid, "cat $HOME/s") == "unsynced\n"


def test_paused_time_does_not_eat_the_timeout(plat, sid):
    """The rule (architecture.md "A sandbox's life"): pause and suspend stop the sandbox's
    clock; resume and restore give back what was left."""
    assert plat.admin("POST", f"/v1/sandboxes/{sid}/timeout", {"timeout_s": 120})[0] == 200
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/pause?wait=true")
    assert status == 200 and 110 <= res["remaining_s"] <= 120, res
    time.sleep(8)  # paused: none of this is taken from it
    # a timeout set while paused is what it gets back
    assert plat.admin("POST", f"/v1/sandboxes/{sid}/timeout", {"timeout_s": 90})[0] == 200
    assert plat.admin("GET", f"/v1/sandboxes/{sid}")[1]["remaining_s"] == 90
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/resume?wait=true")
    assert status == 200 and res["remaining_s"] is None, res
    left = e2b_seconds_left(plat, sid)
    assert 80 <= left <= 90, left
    # suspend keeps it the same way, and connect's timeout only extends it
    assert e2b(plat, "POST", f"/sandboxes/{sid}/pause", json={}).status_code == 204
    time.sleep(3)
    r = e2b(plat, "POST", f"/sandboxes/{sid}/connect", json={"timeout": 5})
    assert r.status_code == 201, r.text
    assert 75 <= e2b_seconds_left(plat, sid) <= 90


def e2b_seconds_left(plat, sid):
    import datetime
    end = e2b(plat, "GET", f"/sandboxes/{sid}").json()["endAt"]
    end = datetime.datetime.fromisoformat(end.replace("Z", "+00:00"))
    return (end - datetime.datetime.now(datetime.timezone.utc)).total_seconds()


def start_counter(plat, sid):
    """A background process, and a file nobody fsync's: what a disk-only pause keeps or not."""
    run(plat, sid, "nohup sh -c 'while :; do sleep 1; done # bgloop' >/dev/null 2>&1 & "
                   "echo $! > $HOME/bg.pid; echo unsynced-$$ > $HOME/nosync")
    return run(plat, sid, "cat $HOME/bg.pid").strip()


def bg_alive(plat, sid, pid):
    # by its command line: a booted guest may reuse the pid
    out = run(plat, sid, f"grep -q bg[l]oop /proc/{pid}/cmdline 2>/dev/null && echo yes || echo no")
    return out.strip() == "yes"


def test_e2b_pause_without_memory_reboots_from_the_disk(plat, sid):
    pid = start_counter(plat, sid)
    want = run(plat, sid, "cat $HOME/nosync")
    r = e2b(plat, "POST", f"/sandboxes/{sid}/pause", json={"memory": False})
    assert r.status_code == 204, r.text
    assert state(plat, sid) == "suspended"
    assert e2b(plat, "GET", f"/sandboxes/{sid}").json()["state"] == "paused"
    r = e2b(plat, "POST", f"/sandboxes/{sid}/pause", json={"memory": False})
    assert r.status_code == 409, r.text
    # connect (with memory, the SDK's default) of a disk-only pause boots from the disk
    r = e2b(plat, "POST", f"/sandboxes/{sid}/connect", json={"timeout": 600})
    assert r.status_code == 201, r.text
    assert run(plat, sid, "cat $HOME/nosync") == want
    assert not bg_alive(plat, sid, pid), "a disk-only pause keeps no process"

    # connect {memory: false} of a sandbox paused with memory: its memory is dropped
    pid = start_counter(plat, sid)
    run(plat, sid, "sync")
    assert e2b(plat, "POST", f"/sandboxes/{sid}/pause", json={}).status_code == 204
    r = e2b(plat, "POST", f"/sandboxes/{sid}/connect", json={"timeout": 600, "memory": False})
    assert r.status_code == 201, r.text
    assert not bg_alive(plat, sid, pid)
    # the deprecated resume route takes memory: false the same way
    pid = start_counter(plat, sid)
    assert e2b(plat, "POST", f"/sandboxes/{sid}/pause", json={"memory": True}).status_code == 204
    r = e2b(plat, "POST", f"/sandboxes/{sid}/resume", json={"memory": True})
    assert r.status_code == 201, r.text
    assert bg_alive(plat, sid, pid), "with memory the process goes on"
    # a natively paused sandbox (memory resident) cannot reboot: 409 naming why
    assert plat.admin("POST", f"/v1/sandboxes/{sid}/pause?wait=true")[0] == 200
    for route in (f"/sandboxes/{sid}/connect", f"/sandboxes/{sid}/resume"):
        r = e2b(plat, "POST", route, json={"memory": False})
        assert r.status_code == 409 and "memory resident" in r.json()["message"], r.text
    assert state(plat, sid) == "paused"
    r = e2b(plat, "POST", f"/sandboxes/{sid}/connect", json={"memory": "no"})
    assert r.status_code == 400, r.text
    assert plat.admin("POST", f"/v1/sandboxes/{sid}/resume?wait=true")[0] == 200
    # connect {memory: false} of a running sandbox: nothing to reboot, it runs on
    r = e2b(plat, "POST", f"/sandboxes/{sid}/connect", json={"memory": False})
    assert r.status_code == 200, r.text
    assert bg_alive(plat, sid, pid)


def test_native_suspend_without_memory(plat, sid):
    for v in ("suspend", "restore"):
        for body in ({"memory": "no"}, {"memory": False, "x": 1}):
            status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/{v}", body)
            assert status == 400, (v, body, res)
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/pause", {"memory": False})
    assert status == 400, res  # pause has no fields
    assert state(plat, sid) == "running"
    pid = start_counter(plat, sid)
    want = run(plat, sid, "cat $HOME/nosync")
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/suspend", {"memory": False})
    assert status == 202, res
    status, op = plat.admin("POST", f"/v1/operations/{res['operation_id']}/wait?timeout_s=120")
    assert op["state"] == "succeeded" and op["kind"] == "sandbox.suspend-disk", op
    assert state(plat, sid) == "suspended"
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/suspend", {"memory": False})
    assert status == 409 and "suspended" in res["message"], res
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/restore?wait=true")
    assert status == 200 and res["state"] == "running", res
    assert run(plat, sid, "cat $HOME/nosync") == want
    assert not bg_alive(plat, sid, pid)
    # and restore {memory: false} of a suspend with memory
    pid = start_counter(plat, sid)
    assert plat.admin("POST", f"/v1/sandboxes/{sid}/suspend?wait=true")[0] == 200
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/restore", {"memory": False})
    assert status == 202, res
    status, op = plat.admin("POST", f"/v1/operations/{res['operation_id']}/wait?timeout_s=120")
    assert op["state"] == "succeeded" and op["kind"] == "sandbox.restore-disk", op
    assert not bg_alive(plat, sid, pid)
    # the CLI: space sandbox suspend|restore --no-memory
    pid = start_counter(plat, sid)
    env = dict(plat.env, SPACE_API_KEY=plat.key)
    for verb, want in (("suspend", "suspended"), ("restore", "running")):
        res = subprocess.run([SPACE, "sandbox", verb, "--no-memory", sid], env=env,
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0 and res.stdout.split() == [sid, want], res
    assert not bg_alive(plat, sid, pid)
    res = subprocess.run([SPACE, "sandbox", "pause", "--no-memory", sid], env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "usage" in res.stderr, res


def test_native_auto_pause_memory_inputs(plat):
    for body, needle in (({"auto_pause_memory": False}, "needs 'auto_pause'"),
                         ({"auto_pause": True, "auto_pause_memory": "no"}, "boolean")):
        status, res = plat.admin("POST", "/v1/sandboxes", dict(template="base", **body))
        assert status == 400 and needle in res["message"], (body, res)


def test_auto_pause_without_memory_at_the_timeout(plat):
    r = e2b(plat, "POST", "/sandboxes", json={"templateID": "base", "timeout": 8,
                                               "autoPause": True, "autoPauseMemory": False})
    assert r.status_code == 201, r.text
    sid = r.json()["sandboxID"]
    try:
        status, res = plat.admin("GET", f"/v1/sandboxes/{sid}")
        assert res["auto_pause"] is True and res["auto_pause_memory"] is False, res
        pid = start_counter(plat, sid)
        want = run(plat, sid, "cat $HOME/nosync")
        deadline = time.monotonic() + 120
        while state(plat, sid) != "suspended":
            assert time.monotonic() < deadline, state(plat, sid)
            time.sleep(0.5)
        r = e2b(plat, "POST", f"/sandboxes/{sid}/connect", json={"timeout": 600})
        assert r.status_code == 201, r.text
        assert run(plat, sid, "cat $HOME/nosync") == want
        assert not bg_alive(plat, sid, pid), "paused at the timeout without memory"
    finally:
        plat.admin("DELETE", f"/v1/sandboxes/{sid}?wait=true")
