#!/usr/bin/env python3
"""Credential injection numbers (issue 10): what an injected HTTPS request costs against a
passthrough one and a direct one, same run.

  sudo /usr/bin/python3 bench/credentials_bench.py [--build-dir build] [--samples 200]
       [--requests 500] [--rounds 4] [--json]

The world is egress_bench.py's (tests/lib/internet.py's simulated internet, space-gw in its
uplink namespace, a namespace standing in for the sandbox, this script playing space-node
over the control socket); the service is api.secret.test, which answers 200 only with
"Authorization: Bearer <token>". Four modes, interleaved in rounds:

  direct       from the uplink namespace (as space-gw dials), the client sends the token
  passthrough  through space-gw, the name on the policy's "passthrough" list: SNI check,
               then spliced (the client trusts the upstream's CA and sends the token)
  terminated   through space-gw, TLS terminated, no rule: the client sends the token
  injected     through space-gw, TLS terminated, an inject rule adds the token (sealed to
               space-gw's key, opened when the policy arrived); the client sends none

  connection  connect + TLS handshake + request until the first byte of the answer
  request     one request + its whole answer on a kept-alive connection

Prints p50/p90/p99 in ms (or --json); injected - terminated is what injection itself adds.
"""
import argparse
import importlib.util
import json
import os
import ssl
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


eb = _load("space_egress_bench", os.path.join(ROOT, "bench", "egress_bench.py"))
sealing = _load("space_sealing", os.path.join(ROOT, "tests", "gw", "sealing.py"))
inet_lib = eb.inet_lib
API = inet_lib.SECRET_API
WEB_IP = inet_lib.WEB_IP


def request(token):
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return f"GET /v1/bench HTTP/1.1\r\nHost: {API}\r\n{auth}User-Agent: creds-bench\r\n\r\n".encode()


def dial(ip, ctx):
    s = eb.socket.create_connection((ip, 443), timeout=10)
    s.setsockopt(eb.socket.IPPROTO_TCP, eb.socket.TCP_NODELAY, 1)
    return ctx.wrap_socket(s, server_hostname=API)


def conn_latency(ctx, req, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        s = dial(WEB_IP, ctx)
        s.sendall(req)
        first = s.recv(65536)
        t1 = time.perf_counter()
        eb.read_response(s, first)
        s.close()
        out.append(t1 - t0)
    return out


def req_latency(ctx, req, n):
    s = dial(WEB_IP, ctx)
    out, buf = [], b""
    for _ in range(n):
        t0 = time.perf_counter()
        s.sendall(req)
        buf = eb.read_response(s, buf)
        out.append(time.perf_counter() - t0)
    s.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    gw_bin = os.path.join(ROOT, a.build_dir, "src", "gw", "space-gw")
    tmp = tempfile.mkdtemp(prefix="creds-bench-")
    net = inet_lib.Internet(big_size=1 << 20)
    sb = gw = ctl = None
    try:
        net.start()
        token = net.secret_token
        sb = eb.Sandbox(f"credsb{os.getpid()}")
        sock = os.path.join(tmp, "gw.sock")
        data = os.path.join(tmp, "gw")
        gw = eb.subprocess.Popen(["ip", "netns", "exec", net.uplink, gw_bin, "--control-socket",
                                  sock, "--data-dir", data, "--upstream-dns", net.upstream_dns,
                                  "--upstream-ca", net.upstream_ca, "--egress-test-net",
                                  net.test_net, "--log-level", "warning"],
                                 stdout=eb.subprocess.PIPE, stderr=eb.subprocess.DEVNULL)
        assert gw.stdout.readline().strip() == b"space-gw: ready"
        ctl = eb.Control(sock)
        hello = ctl.request({"type": "hello", "node": "creds-bench"})
        egress_ca = os.path.join(tmp, "egress-ca.crt")
        with open(egress_ca, "w") as f:
            f.write(hello["caCert"])
        pub = sealing.load_public(os.path.join(data, "secrets.pub"))
        iid = "credsbench01"
        policies = {
            "passthrough": {"allow": [API], "passthrough": [API]},
            "terminated": {"allow": [API]},
            "injected": {"allow": [API], "inject": [{
                "host": API, "header": "Authorization", "value": "Bearer {{secret:tok}}"}],
                "secrets": {"tok": sealing.seal(pub, "tok", token)}},
        }
        ctl.request({"type": "attach", "instance": iid, "sandbox": eb.SANDBOX_ID,
                     "policy": policies["terminated"]}, fds=(sb.udp.fileno(), sb.tcp.fileno()))
        upstream_ctx = ssl.create_default_context(cafile=net.upstream_ca)
        egress_ctx = ssl.create_default_context(cafile=egress_ca)
        results = {m: {"connection": [], "request": []}
                   for m in ("direct", "passthrough", "terminated", "injected")}
        for _ in range(a.rounds):
            for mode in results:
                ctx = egress_ctx if mode in ("terminated", "injected") else upstream_ctx
                req = request(None if mode == "injected" else token)
                n, k = a.samples // a.rounds, a.requests // a.rounds
                if mode == "direct":
                    with eb.netns(net.uplink):
                        results[mode]["connection"] += conn_latency(ctx, req, n)
                        results[mode]["request"] += req_latency(ctx, req, k)
                    continue
                ctl.request({"type": "policy", "instance": iid, "policy": policies[mode]})
                with eb.netns(sb.name):
                    eb.dns_resolve(eb.GW_IP, API)  # the attribution the gateway checks
                    results[mode]["connection"] += conn_latency(ctx, req, n)
                    results[mode]["request"] += req_latency(ctx, req, k)
        out = {m: {k: eb.summary_ms(v) for k, v in r.items()} for m, r in results.items()}
        out["load"] = open("/proc/loadavg").read().split()[:3]
        if a.json:
            print(json.dumps(out, indent=2))
        else:
            print(f"{'mode':<12} {'connection p50/p90/p99 ms':<30} {'request p50/p90/p99 ms':<30}")
            for m in results:
                c, r = out[m]["connection"], out[m]["request"]
                print(f"{m:<12} {c['p50']:>8} {c['p90']:>8} {c['p99']:>8}      "
                      f"{r['p50']:>8} {r['p90']:>8} {r['p99']:>8}")
            print(f"load average {' '.join(out['load'])}")
        injected = [x for x in ctl.audit if x.get("secret") == "tok"]
        if not injected:
            print("warning: no audit record names the secret", file=sys.stderr)
    finally:
        if ctl:
            ctl.close()
        if gw and gw.poll() is None:
            gw.terminate()
            gw.wait(timeout=30)
        if sb:
            sb.close()
        net.close()
        eb.subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
