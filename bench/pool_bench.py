#!/usr/bin/env python3
"""Create latency by source (issue 11): cold boot vs snapshot restore vs warm-pool bind, one
node, one run, interleaved (so machine load hits all three alike).

Starts a real space-node with --snapshots on --pool P (tests/lib/platform.py), waits for the
template snapshot and a full pool, then N rounds of: a cold boot ("snapshot": false), a
snapshot restore ("pool": false) and a pool create (after the pool refilled, so it is a hit).
Each sandbox is killed before the next create. Per create, measured at the client:

  create   POST /v1/sandboxes until the 201 (the agent has answered its /init)
  e2e      create + the first exec of `true` answered (the sandbox serving a caller)
  platform create less the guest's time (timings_ms.boot, the boot or the restore's resume
           until the agent answers, and the re-identifying /init round trip, timings_ms.init):
           time spent in space-node, its HTTP, its worker hand-off, QEMU's start and QMP

Prints p50/p90/p99 and the cold/pool, restore/pool ratios; asserts nothing. Needs root;
SPACE_BUILD_DIR (default build/) for the daemons.

Usage: sudo /usr/bin/python3 bench/pool_bench.py [-n 30] [--pool 2]
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from lib.platform import started_node  # noqa: E402


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round((len(v) - 1) * p / 100)))]


def show(name, ms):
    print(f"  {name:24s} n={len(ms):3d}  p50 {statistics.median(ms):8.1f}  p90 {pct(ms, 90):8.1f}"
          f"  p99 {pct(ms, 99):8.1f}  max {max(ms):8.1f} ms")


def pool_level(node):
    status, body = node.call("GET", "/v1/pools")
    assert status == 200, body
    pools = [p for p in body["pools"] if p["template"] == "base"]
    return pools[0] if pools else None


def wait_pool_full(node, target, timeout=900):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        node.call("GET", "/v1/templates")  # starts the snapshot and registers the pool
        p = pool_level(node)
        if p and p["ready"] == target and not p["filling"]:
            return
        time.sleep(0.2)
    raise SystemExit(f"pool not full after {timeout} s: {pool_level(node)}")


def one(node, body, want_mode):
    t0 = time.monotonic()
    status, sb = node.call("POST", "/v1/sandboxes", body)
    t1 = time.monotonic()
    assert status == 201, (status, sb)
    assert sb["timings_ms"]["mode"] == want_mode, (want_mode, sb["timings_ms"])
    status, res = node.call("POST", f"/v1/sandboxes/{sb['id']}/exec", {"cmd": "true"})
    t2 = time.monotonic()
    assert status == 200 and res["exit_code"] == 0, (status, res)
    node.kill(sb["id"])
    create = (t1 - t0) * 1000
    t = sb["timings_ms"]
    guest = t["boot"] + (t["init"] if t["mode"] != "pool" else 0)  # a bind's /init is in boot
    return create, (t2 - t0) * 1000, create - guest, t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=30, help="rounds (one create of each source)")
    ap.add_argument("--pool", type=int, default=2, help="--pool of the node")
    args = ap.parse_args()

    sources = [("cold boot", {"snapshot": False}, "boot"),
               ("snapshot restore", {"pool": False}, "restore"),
               ("warm pool", {}, "pool")]
    res = {name: ([], [], []) for name, _, _ in sources}
    node_times = {name: [] for name, _, _ in sources}
    with started_node("poolbench", extra_args=["--snapshots", "on", "--pool", str(args.pool)]) as n:
        wait_pool_full(n, args.pool)
        for _ in range(args.n):
            for name, body, mode in sources:
                if mode == "pool":
                    wait_pool_full(n, args.pool)
                create, e2e, platform, timings = one(n, body, mode)
                res[name][0].append(create)
                res[name][1].append(e2e)
                res[name][2].append(platform)
                node_times[name].append(timings)
        wait_pool_full(n, args.pool)
    print(f"bench pool: {args.n} rounds of cold boot, snapshot restore, warm-pool create "
          f"(--pool {args.pool}), interleaved, one at a time; load: {os.getloadavg()}")
    for name, _, _ in sources:
        print(name)
        show("create (client)", res[name][0])
        show("create + first exec", res[name][1])
        show("platform (outside guest)", res[name][2])
        show("node: clone (disk)", [t["clone"] for t in node_times[name]])
        show("node: network (slot)", [t["network"] for t in node_times[name]])
        show("node: vmm", [t["vmm"] for t in node_times[name]])
        show("node: boot (pool: /init)", [t["boot"] for t in node_times[name]])
        show("node: /init round trip", [t["init"] for t in node_times[name]])
        if name == "warm pool":
            show("node: record write", [t["record"] for t in node_times[name]])
    c, r, p = (statistics.median(res[name][0]) for name, _, _ in sources)
    print(f"ratio at p50: cold/pool {c / p:.1f}x, restore/pool {r / p:.1f}x, cold/restore {c / r:.1f}x")


if __name__ == "__main__":
    main()
