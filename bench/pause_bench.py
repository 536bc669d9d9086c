#!/usr/bin/env python3
"""Pause / resume and suspend / restore latencies (issue 12), through space-api.

Starts a real space-node + space-api (tests/lib/platform.py), creates one sandbox and runs
N pause/resume cycles and M suspend/restore cycles with the native API's ?wait=true (the
time a caller waits: store transaction, the controller's claim, the node's verb, the
outcome recorded). Also reports the node's own time for each verb (the `<verb>_ms` the node
answers, from its log) and the suspend artifact's size against the guest's RAM and against
what the guest had written (an idle guest, then one that filled N MiB of tmpfs). Prints
numbers and asserts nothing. Needs root; SPACE_BUILD_DIR (default build/) for the daemons.

Usage: sudo /usr/bin/python3 bench/pause_bench.py [-n 20] [-m 5] [--fill-mib 128]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from lib.platform import Platform  # noqa: E402
from stats import pct  # noqa: E402


def show(name, ms):
    print(f"{name:28s} n={len(ms):3d}  p50 {statistics.median(ms):8.1f} ms  "
          f"p90 {pct(ms, 90):8.1f} ms  max {max(ms):8.1f} ms")


def timed(plat, method, path, body=None):
    t0 = time.monotonic()
    status, res = plat.admin(method, path, body)
    ms = (time.monotonic() - t0) * 1000
    assert status == 200, (status, res)
    return ms, res


def du(path):
    out = subprocess.run(["du", "-sb", path], capture_output=True, text=True).stdout
    return int(out.split()[0]) if out else 0


def node_ms(plat, verb):
    with open(plat.node.log_path, errors="replace") as f:
        text = f.read()
    return [float(x) for x in re.findall(rf"{verb} instance \S+ in ([0-9.]+) ms", text)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20, help="pause/resume cycles")
    ap.add_argument("-m", type=int, default=5, help="suspend/restore cycles")
    ap.add_argument("--fill-mib", type=int, default=128)
    args = ap.parse_args()

    plat = Platform("pausebench")
    try:
        plat.start()
        status, sb = plat.admin("POST", "/v1/sandboxes?wait=true", {"template": "base"})
        assert status == 201, sb
        sid = sb["id"]
        _, node_sb = plat.node.call("GET", f"/v1/sandboxes/{sid}")
        inst = os.path.join(plat.data, "instances", node_sb["instance_id"])
        print(f"guest: {sb['vcpus']} vCPU, {sb['memory_mb']} MiB RAM; node accel "
              f"{plat.node.call('GET', '/health')[1]['accel']}")

        pause, resume = [], []
        for _ in range(args.n):
            ms, _ = timed(plat, "POST", f"/v1/sandboxes/{sid}/pause?wait=true")
            pause.append(ms)
            ms, _ = timed(plat, "POST", f"/v1/sandboxes/{sid}/resume?wait=true")
            resume.append(ms)
        show("api pause (wait)", pause)
        show("api resume (wait)", resume)
        show("node pause", node_ms(plat, "paused"))
        show("node resume", node_ms(plat, "resumed"))

        def cycles(label):
            susp, rest, sizes = [], [], []
            for _ in range(args.m):
                ms, _ = timed(plat, "POST", f"/v1/sandboxes/{sid}/suspend?wait=true")
                susp.append(ms)
                sizes.append(du(os.path.join(inst, "suspend")))
                ms, _ = timed(plat, "POST", f"/v1/sandboxes/{sid}/restore?wait=true")
                rest.append(ms)
            show(f"api suspend (wait), {label}", susp)
            show(f"api restore (wait), {label}", rest)
            print(f"{'artifact, ' + label:28s} p50 {statistics.median(sizes) / 2**20:8.1f} MiB")

        cycles("idle")
        status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/exec", {
            "cmd": "sh", "args": ["-c", f"head -c {args.fill_mib}M /dev/urandom > /dev/shm/fill"],
            "user": "root"})
        assert status == 200 and res["exit_code"] == 0, res
        cycles(f"+{args.fill_mib} MiB written")
        show("node suspend", node_ms(plat, "suspended"))
        show("node restore", node_ms(plat, "restored"))
        plat.admin("DELETE", f"/v1/sandboxes/{sid}?wait=true")
    finally:
        plat.destroy()


if __name__ == "__main__":
    main()
