#!/usr/bin/env python3
"""Warm-pool creates end to end through the whole platform (issue 11), against the same
bind at the node, one run, interleaved.

Starts a real space-node (--snapshots on --pool P) and space-api (tests/lib/platform.py),
waits for a full pool, then N rounds of:
  platform  E2B `POST /sandboxes` on a kept-alive connection (as an SDK does) until the 201,
            then `GET /health` through the ingress (E2B headers, the envd access token)
            until the agent answers: the create a user's code sees, control plane included;
  node      `POST /v1/sandboxes` on the node's socket until the 201: the same bind without
            space-api, the store and the operation (the ingress routes only sandboxes the
            API knows, so this baseline has no second leg).
Each sandbox is killed and the pool refilled before the next create. Prints p50/p90/p99 of
"create returned" for both and "agent answering through the ingress" for the platform, and
the control plane's share (platform less node at p50). Asserts nothing. Needs root; SPACE_BUILD_DIR.

Usage: sudo SPACE_BUILD_DIR=build /usr/bin/python3 bench/platform_create_bench.py [-n 20] [--pool 2]
"""
import argparse
import http.client
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from lib.platform import Platform  # noqa: E402
from pool_bench import pool_level, show, wait_pool_full  # noqa: E402


def health(plat, sid, token):
    c = http.client.HTTPConnection("127.0.0.1", plat.ingress_port, timeout=60)
    c.request("GET", "/health", headers={"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983",
                                         "X-Access-Token": token})
    r = c.getresponse()
    r.read()
    c.close()
    assert r.status in (200, 204), r.status


def via_platform(plat, api):
    t0 = time.monotonic()
    api.request("POST", "/sandboxes", body=json.dumps({"templateID": "base"}),
                headers={"X-API-Key": plat.key, "Content-Type": "application/json"})
    r = api.getresponse()
    sb = json.loads(r.read())
    t1 = time.monotonic()
    assert r.status == 201, (r.status, sb)
    health(plat, sb["sandboxID"], sb["envdAccessToken"])
    t2 = time.monotonic()
    api.request("DELETE", f"/sandboxes/{sb['sandboxID']}", headers={"X-API-Key": plat.key})
    r = api.getresponse()
    r.read()
    assert r.status == 204, r.status
    return (t1 - t0) * 1000, (t2 - t0) * 1000


def via_node(plat):
    node = plat.node
    t0 = time.monotonic()
    status, sb = node.call("POST", "/v1/sandboxes", {})
    t1 = time.monotonic()
    assert status == 201, (status, sb)
    assert sb["timings_ms"]["mode"] == "pool", sb["timings_ms"]
    node.kill(sb["id"])
    return (t1 - t0) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20, help="rounds (one create each way)")
    ap.add_argument("--pool", type=int, default=2, help="--pool of the node")
    args = ap.parse_args()

    res = {"platform": ([], []), "node": ([],)}
    misses = 0
    plat = Platform("bench-pcreate", node_args=["--snapshots", "on", "--pool", str(args.pool)])
    try:
        plat.start()
        wait_pool_full(plat.node, args.pool)
        api = http.client.HTTPConnection("127.0.0.1", plat.port, timeout=300)
        for _ in range(args.n):
            wait_pool_full(plat.node, args.pool)
            served = pool_level(plat.node)["served"]  # the E2B answer does not say the mode
            create, ready = via_platform(plat, api)
            if pool_level(plat.node)["served"] == served:
                misses += 1
            res["platform"][0].append(create)
            res["platform"][1].append(ready)
            wait_pool_full(plat.node, args.pool)
            res["node"][0].append(via_node(plat))
        print(f"bench platform create: {args.n} rounds, warm pool (--pool {args.pool}), "
              f"through space-api vs at the node, interleaved; load: {os.getloadavg()}; "
              f"platform creates not served by the pool: {misses}")
        for name, legs in res.items():
            print(name)
            show("create returned", legs[0])
            if len(legs) > 1:
                show("agent via ingress", legs[1])
        p = sorted(res["platform"][0])[len(res["platform"][0]) // 2]
        q = sorted(res["node"][0])[len(res["node"][0]) // 2]
        print(f"control plane at p50 (platform - node create): {p - q:.1f} ms")
    finally:
        plat.destroy()


if __name__ == "__main__":
    main()
