#!/usr/bin/env python3
"""Egress numbers (issue 9): what space-gw adds over a direct connection, in one run.

  sudo /usr/bin/python3 bench/egress_bench.py [--build-dir build] [--samples 400]
       [--requests 1000] [--rounds 4] [--big-mib 256] [--downloads 3] [--dns-seconds 5]
       [--dns-clients 2]
       [--modes tcp,http,tls,tlspass] [--json]

Builds the simulated internet of the tests (tests/lib/internet.py: an `uplink` namespace
where space-gw runs, an `inet` one with nginx and dnsmasq on 198.18.0.0/15) plus a
namespace standing in for a sandbox: this script plays space-node, opening the DNS and
gateway sockets inside it on 169.254.0.1 and handing them to space-gw over its control
socket (src/shared/gw-proto.h), with an nftables rule that sends the sandbox's TCP to the
gateway as the node's redirect does. Nothing leaves the namespaces it creates; all of
them are removed at the end.

Each mode is measured direct (from the uplink namespace, as space-gw itself dials) and
through space-gw (from the sandbox namespace), interleaved in rounds so both see the same
machine load:

  tcp    a CIDR allow entry (198.18.1.10:8080). The clients speak HTTP, so this goes through
         the HTTP relay too (the Host, an address, checked against the CIDR entry); only
         bytes that are not HTTP take the raw splice relay
  http   an allowed name on port 80: the HTTP relay that checks every request's Host
  tls    an allowed name on 443: TLS terminated with the egress CA, re-encrypted upstream
  tlspass  the same name on 443 with the policy's "passthrough" list naming it: checked by
         SNI + DNS attribution, then spliced as it is (the client trusts the upstream's CA)

  connection  connect + request + first byte of the answer, a new connection each time
  request     one request + its whole answer on a kept-alive connection
  download    a --big-mib file with curl (-o /dev/null), MB/s: --downloads direct/gateway
              pairs, the medians (and the median of the pairs' ratios)
  dns         A queries per second for an allowed name (--dns-clients processes, each with
              a window of 64 outstanding queries), through the DNS proxy vs straight to the
              upstream dnsmasq (one without query logging)

The clients are Python (latency) and curl (throughput); their own costs are in both
columns, so the difference is what the gateway adds. Prints a table (or --json), the
space-gw CPU time per download MiB and per DNS query (less load-dependent than the
rates on a shared host), the load average before and after, and one PASS/MISS line per
target of issue 9:

  relay adds <= 0.3 ms p50         kept-alive request, tcp and http (and tlspass: spliced)
  terminated TLS adds <= 2 ms p50  to the first byte of a new connection
  throughput >= 0.8 of direct      each mode's download
  DNS >= 20,000 queries/s          through the proxy
"""
import argparse
import contextlib
import ctypes
import json
import os
import signal
import socket
import ssl
import struct
import subprocess
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_internet():
    """tests/lib/internet.py, by path: putting tests/lib on sys.path would let its
    platform.py shadow the standard library's."""
    import importlib.util

    path = os.environ.get("SPACE_BENCH_INTERNET", os.path.join(ROOT, "tests", "lib", "internet.py"))
    spec = importlib.util.spec_from_file_location("space_internet", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


inet_lib = _load_internet()

WEB_IP = inet_lib.WEB_IP
ALLOWED = inet_lib.ALLOWED
QUIET_DNS_IP = "198.18.0.54"  # a dnsmasq without query logging, for the qps numbers
GW_IP = "169.254.0.1"
SB_IP = "169.254.0.2"
TCP_PORT = 8080
CLONE_NEWNET = 0x40000000
SANDBOX_ID = "benchsandbox00000001"  # 20 of [a-z0-9], as sandbox-id.h wants

_libc = ctypes.CDLL(None, use_errno=True)


def sh(*args, check=True, input=None, timeout=120):
    r = subprocess.run(args, input=input, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r


@contextlib.contextmanager
def netns(name):
    """Runs the block's socket calls in namespace `name` (this thread only), then returns."""
    here = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    there = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if _libc.setns(there, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {name}")
        yield
    finally:
        _libc.setns(here, CLONE_NEWNET)
        os.close(here)
        os.close(there)


def pct(xs, p):
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summary_ms(xs):
    return {f"p{p}": round(pct(xs, p) * 1000, 3) for p in (50, 90, 99)} | {"n": len(xs)}


# ---- the sandbox namespace and the node's side of the control channel -------------------


class Sandbox:
    """A namespace with the gateway's sockets on 169.254.0.1, as space-node makes one."""

    def __init__(self, name):
        self.name = name
        sh("ip", "netns", "add", name)
        try:
            self._setup()
        except BaseException:
            self.close()
            raise

    def _setup(self):
        name = self.name
        # Both addresses on lo, and a route for the test net through it: every connection
        # there is rewritten to the gateway below before it would be sent anywhere.
        for cmd in (
            ["link", "set", "lo", "up"],
            ["addr", "add", f"{SB_IP}/32", "dev", "lo"],
            ["addr", "add", f"{GW_IP}/32", "dev", "lo"],
            ["route", "add", inet_lib.TEST_NET, "dev", "lo", "src", SB_IP],
        ):
            sh("ip", "-n", name, *cmd)
        # Locally made connections here stand in for the guest's: every TCP connection
        # not to the gateway itself goes to it (SO_ORIGINAL_DST keeps the destination).
        rules = f"""
table ip bench {{
  chain out {{
    type nat hook output priority -100; policy accept;
    ip daddr != {GW_IP} meta l4proto tcp dnat to {GW_IP}:15001
  }}
}}
"""
        sh("ip", "netns", "exec", name, "nft", "-f", "-", input=rules)
        etc = f"/etc/netns/{name}"
        os.makedirs(etc, exist_ok=True)
        with open(f"{etc}/resolv.conf", "w") as f:
            f.write(f"nameserver {GW_IP}\n")
        with netns(name):
            self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM | socket.SOCK_NONBLOCK)
            self.udp.bind((GW_IP, 53))
            self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
            self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.tcp.bind((GW_IP, 15001))
            self.tcp.listen(128)

    def close(self):
        for s in (getattr(self, "udp", None), getattr(self, "tcp", None)):
            if s:
                s.close()
        for pid in sh("ip", "netns", "pids", self.name, check=False).stdout.split():
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGKILL)
        sh("ip", "netns", "delete", self.name, check=False)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"/etc/netns/{self.name}/resolv.conf")
            os.rmdir(f"/etc/netns/{self.name}")


class Control:
    """The node's end of gw-proto.h: requests in order, audit batches counted on the side."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.connect(path)
        self.replies = []
        self.audit = []
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        while True:
            try:
                data = self.sock.recv(1 << 20)
            except OSError:
                data = b""
            with self.cond:
                if not data:
                    self.replies.append(None)
                    self.cond.notify_all()
                    return
                msg = json.loads(data)
                if msg.get("type") == "audit":
                    self.audit.extend(msg.get("records", []))
                else:
                    self.replies.append(msg)
                self.cond.notify_all()

    def request(self, msg, fds=()):
        data = json.dumps(msg).encode()
        if fds:
            socket.send_fds(self.sock, [data], list(fds))
        else:
            self.sock.send(data)
        with self.cond:
            if not self.cond.wait_for(lambda: self.replies, timeout=10):
                raise RuntimeError(f"space-gw did not answer {msg['type']}")
            reply = self.replies.pop(0)
        if not reply or not reply.get("ok"):
            raise RuntimeError(f"space-gw refused {msg['type']}: {reply}")
        return reply

    def close(self):
        self.sock.close()


# ---- clients -----------------------------------------------------------------------------

REQUEST = f"GET / HTTP/1.1\r\nHost: {ALLOWED}\r\nUser-Agent: egress-bench\r\n\r\n".encode()


def read_response(sock, buf):
    """Reads one HTTP/1.1 response with Content-Length; returns leftover bytes."""
    while b"\r\n\r\n" not in buf:
        d = sock.recv(65536)
        if not d:
            raise RuntimeError("connection closed before the response head")
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"unexpected response: {head[:200]!r}")
    while len(rest) < length:
        d = sock.recv(65536)
        if not d:
            raise RuntimeError("connection closed inside the body")
        rest += d
    return rest[length:]


def dial(ip, port, tls_ctx):
    s = socket.create_connection((ip, port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if tls_ctx:
        s = tls_ctx.wrap_socket(s, server_hostname=ALLOWED)
    return s


def conn_latency(ip, port, tls_ctx, n):
    """connect (+ TLS handshake) + request until the first byte of the answer."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        s = dial(ip, port, tls_ctx)
        s.sendall(REQUEST)
        first = s.recv(65536)
        t1 = time.perf_counter()
        if not first:
            raise RuntimeError("no answer")
        read_response(s, first)
        s.close()
        out.append(t1 - t0)
    return out


def req_latency(ip, port, tls_ctx, n):
    s = dial(ip, port, tls_ctx)
    out = []
    buf = b""
    for _ in range(n):
        t0 = time.perf_counter()
        s.sendall(REQUEST)
        buf = read_response(s, buf)
        out.append(time.perf_counter() - t0)
    s.close()
    return out


def dns_query(qid, name):
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\x00" + struct.pack("!HH", 1, 1)


def dns_resolve(server, name):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(3)
        s.sendto(dns_query(0x4242, name), (server, 53))
        reply = s.recv(4096)
    # the last answer's RDATA (an A record for dnsmasq's --address names)
    if reply[3] & 0x0F != 0 or struct.unpack("!H", reply[6:8])[0] == 0:
        raise RuntimeError(f"DNS {name} via {server}: rcode {reply[3] & 0x0F}, no answer")
    return socket.inet_ntoa(reply[-4:])


def dns_qps(server, name, seconds, window=64):
    """Answers per second with `window` queries outstanding (lost ones re-sent after 1 s)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((server, 53))
    s.settimeout(1.0)
    packets = [dns_query(i, name) for i in range(65536)]
    qid = 0
    for _ in range(window):
        s.send(packets[qid])
        qid = (qid + 1) & 0xFFFF
    answered = lost = 0
    end = time.perf_counter() + seconds
    t0 = time.perf_counter()
    while time.perf_counter() < end:
        try:
            s.recv(4096)
            answered += 1
        except socket.timeout:
            lost += window
            for _ in range(window):
                s.send(packets[qid])
                qid = (qid + 1) & 0xFFFF
            continue
        s.send(packets[qid])
        qid = (qid + 1) & 0xFFFF
    elapsed = time.perf_counter() - t0
    s.close()
    return {"qps": round(answered / elapsed), "timeouts": lost}


def _dns_worker(server, name, seconds, window, conn):
    conn.send(dns_qps(server, name, seconds, window))
    conn.close()


def dns_qps_parallel(server, name, seconds, clients, window=64):
    """dns_qps() in `clients` processes forked here (so in this thread's namespace)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    pipes, procs = [], []
    for _ in range(clients):
        a, b = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_dns_worker, args=(server, name, seconds, window, b))
        p.start()
        pipes.append(a)
        procs.append(p)
    results = [a.recv() for a in pipes]
    for p in procs:
        p.join()
    return {"qps": sum(r["qps"] for r in results),
            "timeouts": sum(r["timeouts"] for r in results), "clients": clients}


def curl_download(ns, url, cacert, big_size):
    args = ["ip", "netns", "exec", ns, "curl", "-sS", "-o", "/dev/null", "--max-time", "300",
            "-w", "%{speed_download} %{size_download}", url]
    if cacert:
        args += ["--cacert", cacert]
    r = sh(*args, timeout=320)
    speed, size = r.stdout.split()
    if int(size) != big_size:
        raise RuntimeError(f"{url}: got {size} bytes of {big_size}")
    return float(speed) / 1e6


# ---- the run -----------------------------------------------------------------------------


def cpu_seconds(pid):
    """utime + stime of a process, in seconds (proc(5) fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_gw(build_dir, net, tmp):
    gw_bin = os.path.join(build_dir, "src", "gw", "space-gw")
    if not os.access(gw_bin, os.X_OK):
        raise SystemExit(f"egress_bench: no {gw_bin}: build space-gw first")
    ctl = os.path.join(tmp, "gw.sock")
    log = open(os.path.join(tmp, "space-gw.log"), "w")
    p = subprocess.Popen(
        ["ip", "netns", "exec", net.uplink, gw_bin, "--control-socket", ctl,
         "--data-dir", os.path.join(tmp, "gw"), "--upstream-dns", QUIET_DNS_IP,
         "--upstream-ca", net.upstream_ca, "--egress-ceiling", "internet",
         "--egress-test-net", net.test_net, "--dns-qps", "1000000", "--dns-inflight", "4096",
         "--max-conns-per-sandbox", "65536", "--log-level", "warning"],
        stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
    log.close()
    line = p.stdout.readline()
    if "ready" not in line:
        p.kill()
        p.wait()
        raise SystemExit(f"egress_bench: space-gw did not start: {line!r}, see {tmp}")
    # Keep reading stdout so a chatty gateway never blocks on a full pipe.
    threading.Thread(target=lambda: p.stdout.read(), daemon=True).start()
    return p, ctl


def quiet_dnsmasq(net):
    sh("ip", "-n", net.inet, "addr", "add", f"{QUIET_DNS_IP}/32", "dev", "lo")
    args = ["dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv",
            "--no-hosts", "--no-poll", "--bind-interfaces", f"--listen-address={QUIET_DNS_IP}",
            "--port=53", "--user=root", f"--pid-file={net.tmp}/dnsmasq-quiet.pid",
            f"--address=/{ALLOWED}/{WEB_IP}",
            "--local-ttl=60", "--dns-forward-max=4096"]
    return net._spawn(net.inet, args, "dnsmasq-quiet.out")


def measure_mode(args, net, sb, mode, port_tls, direct_ctx, gw_ctx, egress_ca, gw_pid):
    port, tls = port_tls
    if mode == "tlspass":
        gw_ctx, egress_ca = direct_ctx, net.upstream_ca  # nothing terminated: the upstream's CA
    res = {"direct": {"conn": [], "req": []}, "gw": {"conn": [], "req": []}}
    per_round = max(1, args.samples // args.rounds)
    reqs_round = max(1, args.requests // args.rounds)
    for _ in range(args.rounds):
        for path, ns, ctx in (("direct", net.uplink, direct_ctx), ("gw", sb.name, gw_ctx)):
            with netns(ns):
                if path == "gw":
                    dns_resolve(GW_IP, ALLOWED)  # keep the attribution fresh
                c = ctx if tls else None
                res[path]["conn"] += conn_latency(WEB_IP, port, c, per_round)
                res[path]["req"] += req_latency(WEB_IP, port, c, reqs_round)
    out = {}
    for path in ("direct", "gw"):
        out[path] = {"conn_ms": summary_ms(res[path]["conn"]),
                     "req_ms": summary_ms(res[path]["req"])}
    for kind in ("conn_ms", "req_ms"):
        out[f"added_{kind}"] = {
            p: round(out["gw"][kind][p] - out["direct"][kind][p], 3)
            for p in ("p50", "p90", "p99")}
    scheme = "https" if tls else "http"
    host = WEB_IP if mode == "tcp" else ALLOWED
    url = f"{scheme}://{host}:{port}/{net.big_name}"
    with netns(sb.name):
        dns_resolve(GW_IP, ALLOWED)
    # Direct and gateway downloads alternate, --downloads pairs: a neighbour's burst lands
    # on one pair, and the median of the pairs' ratios leaves it out.
    ds, gs, ratios, cpu = [], [], [], 0.0
    for _ in range(args.downloads):
        d = curl_download(net.uplink, url, net.upstream_ca if tls else None, net.big_size)
        cpu0 = cpu_seconds(gw_pid)
        g = curl_download(sb.name, url, egress_ca if tls else None, net.big_size)
        cpu += cpu_seconds(gw_pid) - cpu0
        ds.append(d)
        gs.append(g)
        ratios.append(g / d)
    out["download_MBps"] = {"direct": round(pct(ds, 50), 1), "gw": round(pct(gs, 50), 1),
                            "ratio": round(pct(ratios, 50), 3),
                            "ratios": [round(x, 3) for x in ratios],
                            "gw_cpu_ms_per_MiB": round(cpu * 1000 / args.big_mib / len(gs), 2)}
    return out


def targets(results):
    """One line per target of issue 9 that this run measured: PASS or MISS."""
    out = []

    def add(target, ok, measured):
        out.append({"target": target, "verdict": "PASS" if ok else "MISS", "measured": measured})

    modes = results["modes"]
    for mode in ("tcp", "http", "tlspass"):
        m = modes.get(mode)
        if m and "error" not in m:
            added = m["added_req_ms"]["p50"]
            add(f"{mode} relay adds <= 0.3 ms p50 (request)", added <= 0.3, f"{added:+.3f} ms")
    m = modes.get("tls")
    if m and "error" not in m:
        added = m["added_conn_ms"]["p50"]
        add("tls terminated adds <= 2 ms p50 (1st byte)", added <= 2.0, f"{added:+.3f} ms")
    for mode, m in modes.items():
        if "error" in m:
            add(f"{mode} works", False, m["error"])
            continue
        ratio = m["download_MBps"]["ratio"]
        add(f"{mode} download >= 0.8 of direct", ratio >= 0.8, f"x{ratio:.2f}")
    if results["dns"]:
        qps = results["dns"]["gw"]["qps"]
        add("dns >= 20,000 queries/s", qps >= 20000, f"{qps} /s")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--samples", type=int, default=400, help="new connections per mode and path")
    ap.add_argument("--requests", type=int, default=1000, help="keep-alive requests per mode")
    ap.add_argument("--rounds", type=int, default=4, help="direct/gateway alternations")
    ap.add_argument("--big-mib", type=int, default=256)
    ap.add_argument("--downloads", type=int, default=3,
                    help="direct/gateway download pairs per mode (the median ratio counts)")
    ap.add_argument("--dns-seconds", type=float, default=5)
    ap.add_argument("--dns-clients", type=int, default=2, help="query processes")
    ap.add_argument("--modes", default="tcp,http,tls,tlspass")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("egress_bench: run as root (it creates network namespaces)")
    modes = args.modes.split(",")

    tmp = tempfile.mkdtemp(prefix="space-egress-bench-")
    os.chmod(tmp, 0o755)
    net = inet_lib.Internet(big_size=args.big_mib << 20)
    sb = gw = ctl = None
    results = {"modes": {}, "dns": {}, "loadavg_start": [round(x, 2) for x in os.getloadavg()]}
    t_start = time.monotonic()
    try:
        net.start()
        quiet_dnsmasq(net)
        sb = Sandbox(f"spbench{os.getpid()}")
        gw, ctl_path = start_gw(args.build_dir, net, tmp)
        ctl = Control(ctl_path)
        hello = ctl.request({"type": "hello", "node": "bench"})
        egress_ca = os.path.join(tmp, "egress-ca.pem")
        with open(egress_ca, "w") as f:
            f.write(hello["caCert"])
        policy = {"allow": [ALLOWED, f"{WEB_IP}:{TCP_PORT}"]}
        pass_policy = dict(policy, passthrough=[ALLOWED])
        ctl.request({"type": "attach", "instance": "bench", "sandbox": SANDBOX_ID,
                     "policy": policy}, fds=(sb.udp.fileno(), sb.tcp.fileno()))

        direct_ctx = ssl.create_default_context(cafile=net.upstream_ca)
        gw_ctx = ssl.create_default_context(cafile=egress_ca)
        # name -> address through the proxy first: the gateway lets a name through only to
        # an address its DNS proxy gave this sandbox for it.
        with netns(sb.name):
            if dns_resolve(GW_IP, ALLOWED) != WEB_IP:
                raise RuntimeError("the DNS proxy did not answer allowed.test")
        with netns(net.uplink):
            if dns_resolve(QUIET_DNS_IP, ALLOWED) != WEB_IP:
                raise RuntimeError("the quiet dnsmasq did not answer")

        ports = {"tcp": (TCP_PORT, False), "http": (80, False), "tls": (443, True),
                 "tlspass": (443, True)}
        for mode in modes:
            try:
                if mode == "tlspass":
                    rep = ctl.request({"type": "policy", "instance": "bench",
                                       "policy": pass_policy})
                    if not rep.get("ok"):
                        raise RuntimeError(f"passthrough policy refused: {rep}")
                try:
                    results["modes"][mode] = measure_mode(args, net, sb, mode, ports[mode],
                                                          direct_ctx, gw_ctx, egress_ca, gw.pid)
                finally:
                    if mode == "tlspass":
                        ctl.request({"type": "policy", "instance": "bench", "policy": policy})
            except (OSError, RuntimeError, ssl.SSLError, subprocess.SubprocessError) as e:
                # A mode the gateway refuses (or cannot do yet) still leaves the others.
                results["modes"][mode] = {"error": f"{type(e).__name__}: {e}"}

        if args.dns_seconds > 0:
            with netns(net.uplink):
                results["dns"]["direct"] = dns_qps_parallel(QUIET_DNS_IP, ALLOWED,
                                                            args.dns_seconds, args.dns_clients)
            with netns(sb.name):
                cpu0 = cpu_seconds(gw.pid)
                results["dns"]["gw"] = dns_qps_parallel(GW_IP, ALLOWED, args.dns_seconds,
                                                        args.dns_clients)
                cpu = cpu_seconds(gw.pid) - cpu0
                answered = results["dns"]["gw"]["qps"] * args.dns_seconds
                results["dns"]["gw"]["gw_cpu_us_per_query"] = round(cpu * 1e6 / max(1, answered), 1)
        time.sleep(0.5)  # the last audit batch
        results["audit_records"] = len(ctl.audit)
        results["denied"] = sum(1 for r in ctl.audit if r.get("verdict") == "deny")
        results["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        results["seconds"] = round(time.monotonic() - t_start, 1)
    finally:
        if ctl:
            ctl.close()
        if gw:
            gw.terminate()
            try:
                gw.wait(timeout=10)
            except subprocess.TimeoutExpired:
                gw.kill()
                gw.wait()
        if sb:
            sb.close()
        net.close()
        subprocess.run(["rm", "-rf", tmp])

    results["targets"] = targets(results)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"egress bench: {args.samples} connections and {args.requests} keep-alive requests "
          f"per mode and path, {args.big_mib} MiB download, DNS {args.dns_seconds:g} s")
    print(f"load average (1/5/15 min): {'/'.join(map(str, results['loadavg_start']))} at the "
          f"start, {'/'.join(map(str, results['loadavg_end']))} at the end, "
          f"{os.cpu_count()} CPUs, {results['seconds']:g} s")
    print(f"{'mode':7} {'what':22} {'direct p50/p90/p99 ms':>24} {'space-gw p50/p90/p99 ms':>26}"
          f" {'added p50':>10}")
    for mode, out in results["modes"].items():
        if "error" in out:
            print(f"{mode:7} failed: {out['error']}")
            continue
        for kind, what in (("conn_ms", "connection, 1st byte"), ("req_ms", "keep-alive request")):
            d, g = out["direct"][kind], out["gw"][kind]
            fmt = lambda x: f"{x['p50']:.3f}/{x['p90']:.3f}/{x['p99']:.3f}"
            print(f"{mode:7} {what:22} {fmt(d):>24} {fmt(g):>26} "
                  f"{out['added_' + kind]['p50']:>+10.3f}")
        dl = out["download_MBps"]
        print(f"{mode:7} {'download MB/s':22} {dl['direct']:>24.1f} {dl['gw']:>26.1f} "
              f"{'x' + format(dl['ratio'], '.2f'):>10}   space-gw CPU "
              f"{dl['gw_cpu_ms_per_MiB']:.2f} ms/MiB, pairs "
              f"{' '.join('x' + format(x, '.2f') for x in dl['ratios'])}")
    if results["dns"]:
        d, g = results["dns"]["direct"], results["dns"]["gw"]
        print(f"{'dns':7} {'queries/s':22} {d['qps']:>24} {g['qps']:>26} "
              f"{'x' + format(g['qps'] / max(1, d['qps']), '.2f'):>10}   space-gw CPU "
              f"{g['gw_cpu_us_per_query']:.1f} us/query")
    print(f"audit records: {results['audit_records']} ({results['denied']} denied)")
    for t in results["targets"]:
        print(f"{t['verdict']:4}  {t['target']:38} {t['measured']}")


if __name__ == "__main__":
    main()
