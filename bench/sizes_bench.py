#!/usr/bin/env python3
"""Create latency per size (issue 11 item 5): one snapshot per size, so a create at any size
the node has used restores instead of booting.

Starts a real space-node with --snapshots on (no warm pool: every create restores), makes the
snapshot of each size (a first create at a new size cold-boots and starts it; the bench waits
until the listing shows it ready), then N rounds of one create per size, interleaved (so
machine load hits every size alike), each sandbox killed before the next create. Per create,
measured at the client: POST /v1/sandboxes until the 201 (the agent has answered its /init).
Every create must say timings_ms.mode "restore".

Prints p50/p90/p99 per size; asserts nothing else. Needs root; SPACE_BUILD_DIR (default
build/) for the daemons.

Usage: sudo /usr/bin/python3 bench/sizes_bench.py [-n 20] [--sizes 1x512,2x768,2x1024]
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.path.insert(0, HERE)
from lib.platform import started_node  # noqa: E402
from stats import pct  # noqa: E402


def snapshot_status(node, vcpus, memory_mb):
    status, body = node.call("GET", "/v1/templates")
    assert status == 200, body
    base = {t["name"]: t for t in body["templates"]}["base"]
    for s in base["snapshots"]:
        if (s["vcpus"], s["memory_mb"]) == (vcpus, memory_mb):
            return s["status"]
    return "none"


def create(node, vcpus, memory_mb):
    t0 = time.monotonic()
    status, sb = node.call("POST", "/v1/sandboxes",
                           {"template": "base", "vcpus": vcpus, "memory_mb": memory_mb})
    ms = (time.monotonic() - t0) * 1000
    assert status == 201, (status, sb)
    node.kill(sb["id"])
    return ms, sb["timings_ms"]["mode"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--sizes", default="1x512,2x768,2x1024")
    args = ap.parse_args()
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
    with started_node("sizes-bench", extra_args=["--snapshots", "on"]) as node:
        for vcpus, mem in sizes:
            first_ms, mode = create(node, vcpus, mem)
            deadline = time.monotonic() + 900
            while snapshot_status(node, vcpus, mem) != "ready":
                if time.monotonic() > deadline:
                    raise SystemExit(f"no snapshot at {vcpus}x{mem}: {node.log()}")
                time.sleep(0.5)
            print(f"{vcpus}x{mem}: first create {first_ms:.0f} ms ({mode}); snapshot ready")
        samples = {s: [] for s in sizes}
        for _ in range(args.n):
            for vcpus, mem in sizes:
                ms, mode = create(node, vcpus, mem)
                if mode != "restore":
                    raise SystemExit(f"{vcpus}x{mem}: a create said {mode}, not restore")
                samples[(vcpus, mem)].append(ms)
        print(f"create by restore, per size (n={args.n} each, client-side ms):")
        for (vcpus, mem), ms in samples.items():
            print(f"  {vcpus} vCPU {mem:5d} MiB  p50 {pct(ms, 50):7.1f}  p90 {pct(ms, 90):7.1f}"
                  f"  p99 {pct(ms, 99):7.1f}  max {max(ms):7.1f}")


if __name__ == "__main__":
    main()
