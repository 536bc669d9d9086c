#!/usr/bin/env python3
"""Bursts against a fixed and an adaptive warm pool (issue 11 item 4; pool-target.h).

For each configuration, a real space-node (tests/lib/platform.py) with --snapshots on and
  fixed     --pool 2
  adaptive  --pool 2 --pool-max B --pool-window W
then R bursts of B back-to-back creates (each sandbox killed before the next create), a pause
of P seconds between bursts. A fixed pool of 2 serves two creates of a burst (plus what one
refill at a time makes meanwhile); an adaptive one has grown toward B by the next burst.
Per configuration: creates served by the pool (timings_ms.mode), create latency at the
client (p50/p90), the level the pool had at the start of each burst, and the pool's idle
level once quiet for W. The first burst finds both at 2 and is reported apart. Asserts
nothing. Needs root; SPACE_BUILD_DIR (default build/).

Usage: sudo /usr/bin/python3 bench/pool_burst_bench.py [-b 5] [-r 4] [-p 15] [-w 60]
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from lib.platform import started_node  # noqa: E402
from pool_bench import pct, pool_level  # noqa: E402


def wait(node, pred, timeout=900):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        node.call("GET", "/v1/templates")  # registers the pool and starts the snapshot
        p = pool_level(node)
        if p and pred(p):
            return p
        time.sleep(0.2)
    raise SystemExit(f"pool never got there: {pool_level(node)}")


def run(name, args, a):
    with started_node(f"burst-{name}", extra_args=["--snapshots", "on", *args]) as node:
        wait(node, lambda p: p["ready"] == 2 and not p["filling"])
        rounds = []
        for r in range(a.rounds):
            start_level = pool_level(node)["ready"]
            modes, ms = [], []
            for _ in range(a.burst):
                t0 = time.monotonic()
                status, sb = node.call("POST", "/v1/sandboxes", {})
                ms.append((time.monotonic() - t0) * 1000)
                assert status == 201, sb
                modes.append(sb["timings_ms"]["mode"])
                node.kill(sb["id"])
            rounds.append((start_level, modes, ms))
            if r + 1 < a.rounds:
                time.sleep(a.pause)
        t_quiet = time.monotonic()
        idle = wait(node, lambda p: p["target"] == p["level"] == 2 and not p["filling"],
                    timeout=a.window + 120)
        quiet_s = time.monotonic() - t_quiet
        peak = max(r[0] for r in rounds)
    later = rounds[1:]
    hits = sum(m.count("pool") for _, m, _ in later)
    n = sum(len(m) for _, m, _ in later)
    ms = [x for _, _, l in later for x in l]
    print(f"{name}: bursts after the first: {hits}/{n} creates from the pool, create p50 "
          f"{statistics.median(ms):.1f} ms p90 {pct(ms, 90):.1f} ms; level at each burst's "
          f"start {[r[0] for r in rounds]} (peak {peak}); first burst "
          f"{rounds[0][1].count('pool')}/{len(rounds[0][1])} from the pool; back to "
          f"{idle['level']} members {quiet_s:.0f} s after the last create")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-b", "--burst", type=int, default=5)
    ap.add_argument("-r", "--rounds", type=int, default=4)
    ap.add_argument("-p", "--pause", type=float, default=15)
    ap.add_argument("-w", "--window", type=int, default=60)
    a = ap.parse_args()
    print(f"bursts of {a.burst} creates, {a.rounds} rounds, {a.pause:.0f} s apart; "
          f"load {os.getloadavg()}")
    run("fixed", ["--pool", "2"], a)
    run("adaptive", ["--pool", "2", "--pool-max", str(a.burst), "--pool-window",
                     str(a.window)], a)
    print(f"load at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
