#!/usr/bin/env python3
"""Ingress added latency and streaming throughput vs talking to the agent directly.

Starts a real space-node + space-api (tests/lib/platform.py), creates one sandbox and
measures, in the same run:
  * latency of GET /health: through the ingress (E2B headers) vs directly to the agent
    from inside the sandbox's network namespace (the baseline);
  * throughput of downloading a 64 MiB file with GET /files the same two ways.
Prints p50/p90/p99 and the ratios. Usage: bench/ingress_bench.py [-n 200]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from lib.platform import Platform  # noqa: E402

import http.client  # noqa: E402

DIRECT = r"""
import http.client, sys, time
n, path, token = int(sys.argv[1]), sys.argv[2], sys.argv[3]
out = []
for _ in range(n):
    t = time.perf_counter()
    c = http.client.HTTPConnection("169.254.0.2", 49983, timeout=60)
    c.request("GET", path, headers={"X-Access-Token": token})
    r = c.getresponse(); size = len(r.read()); c.close()
    out.append((time.perf_counter() - t, size))
print(" ".join(f"{d:.6f}:{s}" for d, s in out))
"""


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]


def via_ingress(plat, sid, token, n, path):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        c = http.client.HTTPConnection("127.0.0.1", plat.ingress_port, timeout=60)
        c.request("GET", path, headers={"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983",
                                        "X-Access-Token": token})
        r = c.getresponse()
        size = len(r.read())
        assert r.status == 200 or r.status == 204, r.status
        c.close()
        out.append((time.perf_counter() - t, size))
    return out


def direct(sid, token, n, path):
    res = subprocess.run(["ip", "netns", "exec", f"space-{sid}", "/usr/bin/python3", "-c", DIRECT,
                          str(n), path, token], capture_output=True, text=True, check=True)
    return [(float(d), int(s)) for d, s in (x.split(":") for x in res.stdout.split())]


def report(name, ingress, base):
    li = [d * 1000 for d, _ in ingress]
    lb = [d * 1000 for d, _ in base]
    print(f"{name}:")
    for label, v in (("ingress", li), ("direct ", lb)):
        print(f"  {label}  p50 {pct(v, .5):8.2f} ms  p90 {pct(v, .9):8.2f} ms  p99 {pct(v, .99):8.2f} ms")
    print(f"  ratio ingress/direct at p50: {pct(li, .5) / pct(lb, .5):.2f}x")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=200)
    args = ap.parse_args()
    plat = Platform("bench-ingress")
    try:
        plat.start()
        import requests
        r = requests.post(plat.url + "/v2/sandboxes", json={"templateID": "base"},
                          headers={"X-API-Key": plat.key}, timeout=300)
        sb = r.json()
        sid, token = sb["sandboxID"], sb["envdAccessToken"]
        report("GET /health latency", via_ingress(plat, sid, token, args.n, "/health"),
               direct(sid, token, args.n, "/health"))
        plat.admin("POST", f"/v1/sandboxes/{sid}/exec",
                   {"cmd": "/bin/sh", "args": ["-c", "head -c 67108864 /dev/zero > /tmp/big"]})
        path = "/files?path=/tmp/big&username=root"
        ing = via_ingress(plat, sid, token, 5, path)
        dct = direct(sid, token, 5, path)
        for name, runs in (("ingress", ing), ("direct ", dct)):
            mbs = [s / d / 1e6 for d, s in runs]
            print(f"64 MiB download {name}: median {statistics.median(mbs):7.1f} MB/s")
        print(f"  ratio ingress/direct throughput: "
              f"{statistics.median([s / d for d, s in ing]) / statistics.median([s / d for d, s in dct]):.2f}x")
    finally:
        plat.destroy()


if __name__ == "__main__":
    main()
