"""Traffic to a paused sandbox through the ingress (issue 12, autoResume).

With autoResume (E2B lifecycle {onTimeout: "pause", autoResume: true}: create's
autoPause + autoResume.enabled, echoed by getInfo's lifecycle.autoResume), a
request through the ingress to the suspended sandbox restores it and is held
until it runs, then served; at most 16 are held per sandbox (503 beyond).
Without it, a request through the ingress to a sandbox E2B calls paused (suspended by E2B's
pause, or paused through the native API) does not resume it: it gets E2B's
proxy answer, 409 {"sandboxId", "message": "The sandbox is paused", "code":
409, "canAutoResume": false}, and the sandbox stays paused. After connect the
same request is served again. One platform, one sandbox for the module.
"""
import concurrent.futures
import time

import pytest
import requests

from lib.platform import e2b, store_platform

DOMAIN = "space.test"


def through_ingress(plat, sid, port=8000, path="/", timeout=30):
    h = {"Host": f"{port}-{sid}.{DOMAIN}"}
    return requests.get(plat.ingress_url + path, headers=h, timeout=timeout)


@pytest.fixture(scope="module")
def plat():
    with store_platform("autoresume", "sqlite") as p:
        yield p


def serving(plat, **extra):
    r = e2b(plat, "POST", "/sandboxes", json={"templateID": "base", "timeout": 900, **extra})
    assert r.status_code == 201, r.text
    sid = r.json()["sandboxID"]
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/exec", {
        "cmd": "/bin/sh", "args": ["-c", "cd /tmp && echo hello >index.txt && nohup python3 -m "
                                         "http.server 8000 --bind 0.0.0.0 >/dev/null 2>&1 &"]})
    assert status == 200 and res["exit_code"] == 0, res
    deadline = time.monotonic() + 60
    while through_ingress(plat, sid, path="/index.txt").status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    return sid


@pytest.fixture(scope="module")
def sid(plat):
    sid = serving(plat)
    yield sid
    e2b(plat, "DELETE", f"/sandboxes/{sid}")


@pytest.fixture(scope="module")
def auto_sid(plat):
    sid = serving(plat, autoPause=True, autoResume={"enabled": True})
    yield sid
    e2b(plat, "DELETE", f"/sandboxes/{sid}")


def paused_answer(r, sid):
    assert r.status_code == 409, (r.status_code, r.text)
    assert r.headers["Content-Type"].startswith("application/json"), r.headers
    assert r.json() == {"sandboxId": sid, "message": "The sandbox is paused", "code": 409,
                        "canAutoResume": False}, r.text


def state(plat, sid):
    r = e2b(plat, "GET", f"/sandboxes/{sid}")
    assert r.status_code == 200, r.text
    return r.json()["state"], r.json()["lifecycle"]


def test_autoresume_needs_autopause(plat):
    r = e2b(plat, "POST", "/sandboxes", json={"templateID": "base",
                                              "autoResume": {"enabled": True}})
    assert r.status_code == 400 and "autoPause" in r.text, r.text


def test_suspended_probe_does_not_resume(plat, sid):
    assert e2b(plat, "POST", f"/sandboxes/{sid}/pause", json={}).status_code == 204
    for port, path in ((8000, "/index.txt"), (49983, "/health")):
        paused_answer(through_ingress(plat, sid, port, path), sid)
    time.sleep(1)
    st, lifecycle = state(plat, sid)
    assert st == "paused" and lifecycle["autoResume"] is False, (st, lifecycle)
    status, res = plat.admin("GET", f"/v1/sandboxes/{sid}")
    assert res["state"] == "suspended", res
    r = e2b(plat, "POST", f"/sandboxes/{sid}/connect", json={"timeout": 900})
    assert r.status_code == 201, r.text
    r = through_ingress(plat, sid, path="/index.txt")
    assert r.status_code == 200 and r.text == "hello\n", (r.status_code, r.text)


def test_native_paused_probe(plat, sid):
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/pause?wait=true")
    assert status == 200 and res["state"] == "paused", res
    paused_answer(through_ingress(plat, sid, path="/index.txt"), sid)
    status, res = plat.admin("GET", f"/v1/sandboxes/{sid}")
    assert res["state"] == "paused", res
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/resume?wait=true")
    assert status == 200 and res["state"] == "running", res
    r = through_ingress(plat, sid, path="/index.txt")
    assert r.status_code == 200 and r.text == "hello\n", (r.status_code, r.text)


def test_held_request_served_after_restore(plat, auto_sid):
    sid = auto_sid
    assert state(plat, sid)[1] == {"onTimeout": "pause", "autoResume": True}
    assert e2b(plat, "POST", f"/sandboxes/{sid}/pause", json={}).status_code == 204
    status, res = plat.admin("GET", f"/v1/sandboxes/{sid}")
    assert res["state"] == "suspended", res
    r = through_ingress(plat, sid, path="/index.txt", timeout=90)
    assert r.status_code == 200 and r.text == "hello\n", (r.status_code, r.text)
    status, res = plat.admin("GET", f"/v1/sandboxes/{sid}")
    assert res["state"] == "running", res


def test_concurrent_held_requests_bounded(plat, auto_sid):
    sid = auto_sid
    assert e2b(plat, "POST", f"/sandboxes/{sid}/pause", json={}).status_code == 204
    with concurrent.futures.ThreadPoolExecutor(24) as pool:
        answers = list(pool.map(
            lambda _: through_ingress(plat, sid, path="/index.txt", timeout=90), range(24)))
    codes = [r.status_code for r in answers]
    assert set(codes) <= {200, 503}, codes
    assert codes.count(200) >= 16, codes
    for r in answers:
        if r.status_code == 503:
            assert r.headers.get("Retry-After") == "1" and "resume" in r.json()["message"], r.text
        else:
            assert r.text == "hello\n", r.text
