#!/usr/bin/env python3
"""space-agent inside a real guest, through the ingress, vs the same agent on the host.

Starts a real space-node + space-api (tests/lib/platform.py), creates one sandbox and
reaches its agent the way an E2B SDK does (space-api's ingress: E2b-Sandbox-Id/-Port
headers, one tunnel per HTTP request). The baseline is the same agent binary on this host
in test mode on loopback (a keep-alive client, no ingress, no VM). Measures, in the same
run, for both:
  * exec round trip: process.Process/Start of /bin/true until the end of its stream;
  * stdout streaming: Start of `head -c <M> /dev/zero`, every byte read by the client;
  * /files upload (multipart, as the SDKs send it) and download, 1 MiB and 100 MiB of
    random data, to and from the default user's home;
  * concurrent processes: N Starts of `sleep 30`, each stream held open, first one by
    one (the Start latency as they pile up), then all N at once from N client threads
    (how long until all have started); how many ran at the same time.
Prints numbers and asserts nothing. Needs root; uses SPACE_BUILD_DIR (default build/) for
the daemons and the host agent, SPACE_AGENT_BUILD_DIR (default the same) for the guest's.

Usage: bench/agent_bench.py [-n 200] [--stream-mib 256] [--procs 200]
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "agent"))
from targets import AgentProcess, GuestLab  # noqa: E402
from envd_client import FLAG_END_STREAM, collect  # noqa: E402

MIB = 1024 * 1024


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]


def ms3(v):
    return f"p50 {pct(v, .5) * 1000:8.2f} ms  p90 {pct(v, .9) * 1000:8.2f} ms  " \
           f"p99 {pct(v, .99) * 1000:8.2f} ms"


def exec_rtt(agent, n):
    envd = agent.envd()
    for _ in range(5):
        envd.run("/bin/true")
    out = []
    for _ in range(n):
        t = time.perf_counter()
        res = envd.run("/bin/true")
        out.append(time.perf_counter() - t)
        assert res.end == {"exited": True, "status": "exit status 0"}, res.end
    return out


def stream_mbs(agent, mib):
    """Reads the whole stdout of head -c; counts bytes from the base64 without decoding."""
    envd = agent.envd()
    t = time.perf_counter()
    s = envd.start("/usr/bin/head", ["-c", str(mib * MIB), "/dev/zero"], stdin=False)
    n = 0
    while True:
        flags, msg = s.next_frame()
        if flags & FLAG_END_STREAM:
            break
        data = msg["event"].get("data", {}).get("stdout")
        if data:
            n += len(data) // 4 * 3 - data.count("=", -2)
    dt = time.perf_counter() - t
    s.close()
    assert n == mib * MIB, n
    return n / dt / 1e6


def multipart(name, data):
    boundary = uuid.uuid4().hex
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n").encode()
    return head + data + f"\r\n--{boundary}--\r\n".encode(), \
        f"multipart/form-data; boundary={boundary}"


def files_mbs(agent, directory, size, reps):
    data = os.urandom(size)
    body, ctype = multipart("blob", data)
    path = f"{directory}/blob-{size}"
    url = agent.url + "/files"
    up, down = [], []
    for _ in range(reps):
        t = time.perf_counter()
        r = agent.http.post(url, params={"path": path}, data=body,
                            headers={"Content-Type": ctype}, timeout=600)
        up.append(size / (time.perf_counter() - t) / 1e6)
        assert r.status_code == 200, r.text
        t = time.perf_counter()
        r = agent.http.get(url, params={"path": path}, headers={"Accept-Encoding": "identity"},
                           stream=True, timeout=600)
        n = sum(len(c) for c in r.iter_content(MIB))
        down.append(size / (time.perf_counter() - t) / 1e6)
        assert r.status_code == 200 and n == size, (r.status_code, n)
    return statistics.median(up), statistics.median(down)


def start_sleep(envd):
    s = envd.start("/bin/sleep", ["30"], stdin=False)
    return s, next(s)["event"]["start"]["pid"]


def kill_all(agent, started):
    envd = agent.envd()
    code, body = envd.unary("process.Process/List", {})
    running = len({pid for _, pid in started} & {p["pid"] for p in body.get("processes", [])})
    for _, pid in started:
        envd.unary("process.Process/SendSignal",
                   {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})
    for s, _ in started:
        collect(s)
    return running


def sleeps_one_by_one(agent, n):
    """Starts `sleep 30` n times in a row, holding every stream: Start latency as they pile up."""
    envd = agent.envd()
    lat, started, error = [], [], None
    for _ in range(n):
        t = time.perf_counter()
        try:
            started.append(start_sleep(envd))
        except Exception as e:  # noqa: BLE001  (a failure is a result here)
            error = repr(e)[:200]
            break
        lat.append(time.perf_counter() - t)
    return kill_all(agent, started), lat, error


def sleeps_at_once(agent, n):
    """n threads Start `sleep 30` at the same moment; time until the last start event."""
    barrier = threading.Barrier(n + 1)
    started, errors = [], []
    lock = threading.Lock()

    def one():
        envd = agent.envd()
        barrier.wait()
        try:
            r = start_sleep(envd)
        except Exception as e:  # noqa: BLE001
            with lock:
                errors.append(repr(e)[:200])
            return
        with lock:
            started.append(r)
    threads = [threading.Thread(target=one) for _ in range(n)]
    for th in threads:
        th.start()
    barrier.wait()
    t = time.perf_counter()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t
    return kill_all(agent, started), wall, errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=200, help="exec round trips")
    ap.add_argument("--stream-mib", type=int, default=256)
    ap.add_argument("--procs", type=int, default=200)
    args = ap.parse_args()

    host = AgentProcess()
    host_dir = tempfile.mkdtemp(prefix="space-agent-bench-")
    lab = GuestLab("bench-agent")
    try:
        guest = lab.shared()
        targets = [("host", host, host_dir), ("guest", guest, guest.home)]
        print(f"host agent: {host.proc.args[0]}; guest: sandbox {guest.sid} via "
              f"{lab.plat.ingress_url}")

        print(f"\nexec round trip, Start /bin/true to end of stream (n={args.n}):")
        for name, a, _ in targets:
            print(f"  {name:5}  {ms3(exec_rtt(a, args.n))}")

        print(f"\nstdout streaming, head -c {args.stream_mib}M /dev/zero (connect+json):")
        for name, a, _ in targets:
            print(f"  {name:5}  {stream_mbs(a, args.stream_mib):8.1f} MB/s")

        print("\n/files, median MB/s (upload multipart / download identity):")
        for size, reps in ((MIB, 10), (100 * MIB, 3)):
            for name, a, d in targets:
                up, down = files_mbs(a, d, size, reps)
                print(f"  {size // MIB:3} MiB  {name:5}  upload {up:8.1f} MB/s  "
                      f"download {down:8.1f} MB/s")

        print(f"\nconcurrent processes, `sleep 30` x {args.procs}, every stream held open:")
        for name, a, _ in targets:
            running, lat, error = sleeps_one_by_one(a, args.procs)
            print(f"  {name:5}  one by one: {len(lat)} started, {running} running at once; "
                  f"Start to start event {ms3(lat) if lat else '-'}")
            if error:
                print(f"         stopped by: {error}")
        for name, a, _ in targets:
            running, wall, errors = sleeps_at_once(a, args.procs)
            print(f"  {name:5}  all at once: {running} running at once, all started "
                  f"{wall * 1000:.0f} ms after the first request")
            if errors:
                print(f"         {len(errors)} failed, first: {errors[0]}")
    finally:
        host.stop()
        shutil.rmtree(host_dir, ignore_errors=True)
        lab.destroy()


if __name__ == "__main__":
    main()
