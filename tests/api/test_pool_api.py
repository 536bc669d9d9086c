"""GET /v1/pools through space-api and `space pool ls` over it (issue 11 item 4): each pool's
min, max, target, level and creates per minute, the node's own answer relayed, on both stores.
One node with --pool 1 --pool-max 2: one create through the E2B API raises the rate and the
target, within a window long enough that the test never races it."""
import os
import time

import pytest

from lib.platform import STORES, Platform, e2b

WINDOW = 300


@pytest.fixture(scope="module", params=STORES)
def plat(request):
    store = os.environ["SPACE_TEST_PG_URL"] if request.param == "postgresql" else None
    p = Platform(f"poolapi-{request.param}", store=store,
                 node_args=["--snapshots", "on", "--pool", "1", "--pool-max", "2",
                            "--pool-window", str(WINDOW)])
    try:
        p.start()
        yield p
        wait_pool(p, lambda x: not x["filling"])  # no refill in flight at the stop
        p.stop_api()
        p.node.stop()
        left = p.node.leftovers()
    finally:
        p.destroy()
    assert not left, left


def pools(plat):
    status, body = plat.admin("GET", "/v1/pools")
    assert status == 200, body
    return body


def wait_pool(plat, pred, timeout=900):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        plat.node.call("GET", "/v1/templates")  # a listing registers the pool and its snapshot
        body = pools(plat)
        base = [x for x in body["pools"] if x["template"] == "base"]
        if base and pred(base[0]):
            return base[0]
        time.sleep(0.5)
    raise AssertionError(f"pool never got there: {pools(plat)} {plat.node.log()}")


def test_pools_show_min_max_target_level_and_rate(plat):
    body = pools(plat)
    assert (body["target"], body["min"], body["max"], body["window_s"]) == (1, 1, 2, WINDOW), body
    p = wait_pool(plat, lambda x: x["ready"] == 1 and not x["filling"])
    assert (p["min"], p["max"], p["target"], p["level"], p["rate_per_minute"]) == (1, 2, 1, 1, 0)

    r = e2b(plat, "POST", "/v2/sandboxes", json={"templateID": "base", "timeout": 120})
    assert r.status_code == 201, r.text
    sid = r.json()["sandboxID"]
    r = e2b(plat, "DELETE", f"/sandboxes/{sid}")
    assert r.status_code == 204, r.text
    # One create in the window: demand 1, the floor; a second one raises the target to 2.
    r = e2b(plat, "POST", "/v2/sandboxes", json={"templateID": "base", "timeout": 120})
    assert r.status_code == 201, r.text
    e2b(plat, "DELETE", f"/sandboxes/{r.json()['sandboxID']}")
    p = wait_pool(plat, lambda x: x["ready"] == 2 and not x["filling"])
    assert (p["target"], p["level"]) == (2, 2), p
    assert p["rate_per_minute"] == pytest.approx(2 * 60 / WINDOW), p
    assert p["served"] >= 1, p

    node = plat.node
    env_backup = node.env
    node.env = plat.env
    try:
        out = node.cli("pool", "ls", check=True).stdout.decode().splitlines()
    finally:
        node.env = env_backup
    head = out[0].split("\t")
    row = dict(zip(head, out[1].split("\t")))
    assert (row["TEMPLATE"], row["MIN"], row["MAX"], row["TARGET"], row["LEVEL"]) == \
        ("base", "1", "2", "2", "2"), out
    assert float(row["CREATES/MIN"]) == pytest.approx(2 * 60 / WINDOW, abs=0.05), out


def test_pools_over_tcp_need_a_key(plat):
    r = e2b(plat, "GET", "/v1/pools")
    assert r.status_code == 200 and r.json()["max"] == 2, r.text
    r = e2b(plat, "GET", "/v1/pools", key="")
    assert r.status_code == 401, r.text
