"""The real `e2b` npm SDK against a node with a warm pool (issue 11): pool_compat.mjs creates
two sandboxes while the pool is full; both are bound from it (the node's `served` counter),
each with its own envs, hostname and entropy."""
import time

from lib.platform import Platform
from lib.sdk import run_sdk_script, stop_and_leftovers


def full_pools(node, timeout=900):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        node.call("GET", "/v1/templates")  # starts the snapshot and registers the pool
        status, body = node.call("GET", "/v1/pools")
        assert status == 200, body
        pools = body["pools"]
        if pools and all(p["ready"] == p["target"] and not p["filling"] for p in pools):
            return pools
        time.sleep(0.5)
    raise AssertionError(f"pool not full: {node.log()}")


def test_e2b_sdk_creates_from_the_pool():
    p = Platform("pool-compat", node_args=["--snapshots", "on", "--pool", "2"])
    try:
        p.start()
        full_pools(p.node)
        run_sdk_script(p, "pool_compat.mjs", timeout=900)
        served = sum(x["served"] for x in full_pools(p.node))
        assert served == 2, (served, p.node.log())
        left = stop_and_leftovers(p)
    finally:
        p.destroy()
    assert not left, left
