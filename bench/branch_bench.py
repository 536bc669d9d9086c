#!/usr/bin/env python3
"""Snapshot latencies on the node (issue 12, snapshots item 3; branch into N is not built yet).

Starts a real space-node (tests/lib/platform.py Node), creates one sandbox, and times N disk
snapshots, M full snapshots and M rollbacks onto a disk snapshot through the node's routes
(the caller's wait: the guest's sync, QMP stop, reflink, cont, fsync, hashing, the commit
rename), with the guest-stopped window (`paused_ms`) next to it, and a same-run baseline: a
plain exec of `true` (the agent round trip every snapshot starts with). Prints numbers and
asserts nothing. Needs root; SPACE_BUILD_DIR (default build/).

Usage: sudo /usr/bin/python3 bench/branch_bench.py [-n 30] [-m 5]
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from lib.platform import Node  # noqa: E402
from stats import pct  # noqa: E402


def show(name, ms):
    print(f"{name:30s} n={len(ms):3d}  p50 {statistics.median(ms):8.1f} ms  "
          f"p90 {pct(ms, 90):8.1f} ms  p99 {pct(ms, 99):8.1f} ms")


def timed(node, method, path, body=None, want=201):
    t0 = time.monotonic()
    status, res = node.call(method, path, body)
    ms = (time.monotonic() - t0) * 1000
    assert status == want, (status, res)
    return ms, res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=30, help="disk snapshots")
    ap.add_argument("-m", type=int, default=5, help="full snapshots and rollbacks")
    a = ap.parse_args()
    node = Node("branchbench")
    try:
        node.start()
        sid = node.create()["id"]
        base, disk, paused, full, fpaused, rb = [], [], [], [], [], []
        for _ in range(a.n):
            t0 = time.monotonic()
            node.exec(sid, "true")
            base.append((time.monotonic() - t0) * 1000)
        for i in range(a.n):
            node.exec(sid, "sh", "-c", f"echo {i} > /root/n")
            ms, res = timed(node, "POST", f"/v1/sandboxes/{sid}/snapshots", {})
            disk.append(ms)
            paused.append(res["paused_ms"])
        for _ in range(a.m):
            ms, res = timed(node, "POST", f"/v1/sandboxes/{sid}/snapshots", {"kind": "full"})
            full.append(ms)
            fpaused.append(res["paused_ms"])
        _, snaps = node.call("GET", f"/v1/sandboxes/{sid}/snapshots")
        first = next(s["id"] for s in snaps["snapshots"] if s["kind"] == "disk")
        for _ in range(a.m):
            ms, _ = timed(node, "POST", f"/v1/sandboxes/{sid}/rollback", {"snapshot": first},
                          want=200)
            rb.append(ms)
        show("baseline: exec true", base)
        show("disk snapshot", disk)
        show("  of which guest stopped", paused)
        show("full snapshot", full)
        show("  of which guest stopped", fpaused)
        show("rollback (disk, a reboot)", rb)
        print(f"ratio disk snapshot p50 / exec p50: {statistics.median(disk) / statistics.median(base):.1f}")
        print("load:", os.getloadavg())
        for s in node.call("GET", "/v1/snapshots")[1]["snapshots"]:
            node.call("DELETE", f"/v1/snapshots/{s['id']}")
        node.kill(sid)
        node.stop()
    finally:
        node.destroy()


if __name__ == "__main__":
    main()
