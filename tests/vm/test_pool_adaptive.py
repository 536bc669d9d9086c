"""The warm pool's size follows the recent create rate (issue 11 item 4; pool-target.h, pool.c).

One node with --pool 1 --pool-max 3 and a short --pool-window: a burst of creates raises the
target to 3 and the level follows; with no creates for longer than the window the extra members
are destroyed and the level is back at 1. Restarted with a memory budget that fits only two
instances, the same burst gets a target of 2, never 3. At most one sandbox at a time (each is
killed before the next create) and at most three members: a small VM count on a shared host.
"""
import os
import time

import pytest

from lib.platform import started_node

WINDOW = 20  # seconds: the refills of a burst (one at a time, about a second each) fit inside it
INSTANCE_MIB = 512 + 256  # the default guest RAM plus the default VMM overhead


@pytest.fixture(scope="module")
def node():
    args = ["--snapshots", "on", "--pool", "1", "--pool-max", "3", "--pool-window", str(WINDOW)]
    with started_node("pooladapt", extra_args=args) as n:
        yield n
        wait_level(n, lambda p: not p["filling"])  # no refill in flight at the stop


def pool(node):
    status, body = node.call("GET", "/v1/pools")
    assert status == 200, body
    assert (body["min"], body["max"], body["window_s"]) == (1, 3, WINDOW), body
    pools = [p for p in body["pools"] if p["template"] == "base"]
    return pools[0] if pools else None


def wait_level(node, pred, timeout=900):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        node.call("GET", "/v1/templates")  # a listing registers the pool and its snapshot
        p = pool(node)
        if p and pred(p):
            return p
        time.sleep(0.5)
    raise AssertionError(f"pool never got there: {pool(node)} {node.log()}")


def burst(node, n):
    """n creates that each ask the pool, one sandbox alive at a time."""
    for _ in range(n):
        sb = node.create()
        node.kill(sb["id"])
    return time.monotonic()


def test_level_rises_with_a_burst_and_falls_back_when_quiet(node):
    p = wait_level(node, lambda p: p["ready"] == 1 and not p["filling"])
    assert (p["min"], p["max"], p["target"], p["level"]) == (1, 3, 1, 1), p
    assert p["rate_per_minute"] == 0, p

    end = burst(node, 3)
    p = pool(node)
    assert p["target"] == 3, p
    assert p["rate_per_minute"] == pytest.approx(3 * 60 / WINDOW), p
    full = wait_level(node, lambda p: p["ready"] == 3, timeout=WINDOW)
    rose = time.monotonic()
    members = [m["instance_id"] for m in full["members"]]
    # The CLI shows the same columns.
    out = node.cli("pool", "ls", check=True).stdout.decode()
    assert out.split("\n")[0].split("\t")[3:8] == ["MIN", "MAX", "TARGET", "LEVEL", "READY"], out

    # No creates: held while the burst is in the window, back to min once it is out of it.
    p = wait_level(node, lambda p: p["level"] == 1 and not p["filling"], timeout=WINDOW + 60)
    fell = time.monotonic()
    assert fell - end >= WINDOW - WINDOW / 12 - 1, (fell - end, rose - end)
    assert (p["target"], p["ready"], p["rate_per_minute"]) == (1, 1, 0), p
    # The oldest went first; their instances are gone from disk.
    assert p["members"][0]["instance_id"] == members[-1], (p, members)
    deadline = time.monotonic() + 60
    while any(os.path.exists(os.path.join(node.data, "instances", i)) for i in members[:2]):
        assert time.monotonic() < deadline, node.log()
        time.sleep(0.5)
    assert "above the target 1" in open(node.log_path).read()


def test_budget_caps_the_target(node):
    wait_level(node, lambda p: not p["filling"])
    node.stop()
    saved = list(node.extra_args)
    # Room for two instances, not three: the target stops at 2 whatever the demand.
    node.extra_args += ["--memory-budget-mib", str(2 * INSTANCE_MIB + INSTANCE_MIB // 2)]
    node.start()
    try:
        wait_level(node, lambda p: p["ready"] == 1 and not p["filling"])
        burst(node, 3)
        p = pool(node)
        assert p["rate_per_minute"] == pytest.approx(3 * 60 / WINDOW), p
        assert p["target"] == 2, p
        p = wait_level(node, lambda p: p["ready"] == 2 and not p["filling"], timeout=WINDOW)
        assert p["target"] == 2, p
        # Still well inside the window: the demand is 3, the budget keeps it at 2.
        for _ in range(6):
            p = pool(node)
            assert p["target"] == 2 and p["level"] == 2, p
            time.sleep(0.5)
        status, cap = node.call("GET", "/v1/capacity")
        assert status == 200 and cap["sandboxes"]["pool_members"] == 2, cap
    finally:
        wait_level(node, lambda p: not p["filling"])
        node.stop()
        node.extra_args = saved
        node.start()
