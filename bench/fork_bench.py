#!/usr/bin/env python3
"""Branching a running sandbox into N (issue 12), through space-api.

Starts a real space-node + space-api (tests/lib/platform.py), creates one sandbox running a
counter, and times `POST /v1/sandboxes/{id}/branch {count: N}` for each N asked (the caller's
whole wait: the full snapshot of the parent, N creates restoring it side by side, the
snapshot removed), R times each, killing the branches between runs. For scale, the same run
also times a plain full snapshot (`POST .../snapshots?wait=true`) and one create from it, and
prints the node's per-phase timings of the last run's branches (`timings_ms`: network, the
vmstate load, the agent). Prints p50/p90/p99 and asserts nothing. Needs root; SPACE_BUILD_DIR
(default build/) for the daemons.

Usage: sudo /usr/bin/python3 bench/fork_bench.py [--counts 1,3,10] [-r 3]
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from lib.platform import Platform  # noqa: E402
from stats import pct  # noqa: E402

COUNTER = ('i=0; while :; do i=$((i+1)); echo $i > /dev/shm/count; sleep 0.2; done')


def show(name, ms):
    print(f"{name:30s} n={len(ms):3d}  p50 {statistics.median(ms):8.1f} ms  "
          f"p90 {pct(ms, 90):8.1f} ms  p99 {pct(ms, 99):8.1f} ms")


def timed(plat, method, path, body=None, want=201):
    t0 = time.monotonic()
    status, res = plat.admin(method, path, body, timeout=900)
    ms = (time.monotonic() - t0) * 1000
    assert status == want, (status, res)
    return ms, res


def kill(plat, ids):
    for sid in ids:
        plat.admin("DELETE", f"/v1/sandboxes/{sid}?wait=true")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--counts", default="1,3,10", help="branch counts, comma-separated")
    ap.add_argument("-r", type=int, default=3, help="runs per count")
    a = ap.parse_args()
    counts = [int(c) for c in a.counts.split(",")]
    plat = Platform("forkbench", api_args=["--max-sandboxes", str(max(counts) + 2)])
    try:
        plat.start()
        _, sb = timed(plat, "POST", "/v1/sandboxes?wait=true", {"template": "base"})
        sid = sb["id"]
        plat.admin("POST", f"/v1/sandboxes/{sid}/exec",
                   {"cmd": "sh", "args": ["-c", f"nohup sh -c '{COUNTER}' >/dev/null 2>&1 &"]})
        snap_ms, one_ms = [], []
        for _ in range(a.r):
            ms, snap = timed(plat, "POST", f"/v1/sandboxes/{sid}/snapshots?wait=true", {})
            snap_ms.append(ms)
            ms, b = timed(plat, "POST", "/v1/sandboxes?wait=true", {"snapshot": snap["id"]})
            one_ms.append(ms)
            kill(plat, [b["id"]])
            plat.admin("DELETE", f"/v1/snapshots/{snap['id']}")
        show("full snapshot (wait)", snap_ms)
        show("create from it (wait)", one_ms)
        timings = []
        for n in counts:
            runs = []
            for _ in range(a.r):
                ms, res = timed(plat, "POST", f"/v1/sandboxes/{sid}/branch", {"count": n})
                ids = [i["sandbox"]["id"] for i in res["sandboxes"] if "sandbox" in i]
                failed = [i["error"] for i in res["sandboxes"] if "error" in i]
                assert not failed, failed
                runs.append(ms)
                timings = [plat.node.call("GET", f"/v1/sandboxes/{i}")[1].get("timings_ms")
                           for i in ids]
                kill(plat, ids)
            show(f"branch into {n}", runs)
            print(f"  per branch, ms: {statistics.median(runs) / n:.0f}; node timings_ms of "
                  f"the last run's branches: {timings}")
        print("load:", os.getloadavg())
        kill(plat, [sid])
    finally:
        plat.destroy()


if __name__ == "__main__":
    main()
