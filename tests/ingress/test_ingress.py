"""End-to-end tests of the sandbox ingress: a real space-node (with its tunnel
socket), real QEMU guests, and src/api/ingress-harness running the proxy of
src/api/ingress.c on loopback.

    client --TCP--> ingress-harness --Unix: TUNNEL id port--> space-node
           --netns socket--> guest 169.254.0.2:port

One node and one sandbox (module fixtures) serve most tests; the kill test
makes its own sandbox. Guest servers are started through the node's exec
API. Every process and sandbox made here is removed again, and the node
fixture asserts that nothing is left behind.
"""
import hashlib
import http.client
import json
import os
import re
import socket
import stat
import subprocess
import time

import pytest

from lib.platform import BUILD, Node

HARNESS = os.path.join(BUILD, "src/api/ingress-harness")
DOMAIN = "space.test"
TOKEN = "s3cret-token"
UNKNOWN = "aaaaaaaaaaaaaaaaaaaa"

# A small HTTP server for the guest on port 8001 with exact control over the
# bytes: /stream (chunked, gated on /tmp/go), /echo, /big, /ws (101 + echo),
# /keepalive (answers and then waits for another request on the connection).
GUEST_SERVER = r"""
import os, socket, threading, time

def read_head(f):
    line = f.readline()
    if not line:
        return None, None, None
    method, path, _ = line.decode().split(" ", 2)
    headers = {}
    while True:
        h = f.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        k, v = h.decode().split(":", 1)
        headers[k.strip().lower()] = v.strip()
    return method, path, headers

def read_body(f, headers):
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int(f.readline().split(b";")[0], 16)
            if size == 0:
                while f.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return body
            body += f.read(size)
            f.readline()
    return f.read(int(headers.get("content-length", "0")))

def handle(conn):
    f = conn.makefile("rb")
    try:
        method, path, headers = read_head(f)
        if path is None:
            return
        if path == "/stream":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/connect+json\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n6\r\nfirst\n\r\n")
            while not os.path.exists("/tmp/go"):
                time.sleep(0.02)
            os.unlink("/tmp/go")
            conn.sendall(b"7\r\nsecond\n\r\n0\r\n\r\n")
        elif path == "/echo":
            body = read_body(f, headers)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        elif path.startswith("/big/"):
            n = int(path[5:])
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n)
            block = bytes(range(256)) * 256
            sent = 0
            while sent < n:
                piece = block[: min(len(block), n - sent)]
                conn.sendall(piece)
                sent += len(piece)
        elif path == "/ws":
            conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                         b"Connection: Upgrade\r\n\r\n")
            while True:
                d = f.read1(65536)
                if not d:
                    break
                conn.sendall(d)
        elif path == "/keepalive":
            # Ignores "Connection: close" on purpose: a second request on this
            # connection would be served, and leaves a mark.
            while path is not None:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                method, path, headers = read_head(f)
                if path is not None:
                    open("/tmp/pipelined", "w").write(path)
        else:
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    except Exception as e:
        open("/tmp/server-error", "a").write(repr(e) + "\n")
    finally:
        f.close()
        conn.close()

s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8001))
s.listen(64)
while True:
    c, _ = s.accept()
    threading.Thread(target=handle, args=(c,), daemon=True).start()
"""


def sanitizer_reports(path):
    """ASan/UBSan/LSan reports in a log (builds with -Db_sanitize)."""
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return ""
    return "\n".join(line for line in text.splitlines()
                     if "Sanitizer" in line or "runtime error:" in line)


class Harness:
    def __init__(self, node, tunnel, *extra):
        self.log_path = os.path.join(node.data, f"harness-{len(extra)}.log")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [HARNESS, "--node-socket", node.socket, "--tunnel-socket", tunnel,
                 "--listen", "127.0.0.1:0", "--domain", DOMAIN, "--log-level", "debug", *extra],
                stdout=subprocess.PIPE, stderr=log, text=True)
        line = self.proc.stdout.readline()
        m = re.match(r"listening on 127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            raise AssertionError(f"ingress-harness did not start: {line!r}")
        self.port = int(m.group(1))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        assert self.proc.returncode == 0, sanitizer_reports(self.log_path)
        assert not sanitizer_reports(self.log_path)

    def request(self, method, path, host=None, headers=None, body=None, timeout=60,
                encode_chunked=False):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            h = dict(headers or {})
            if host:
                h["Host"] = host
            conn.request(method, path, body=body, headers=h, encode_chunked=encode_chunked)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), data
        finally:
            conn.close()

    def raw(self, data, timeout=30):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        s.sendall(data)
        return s


def host(port, sid):
    return f"{port}-{sid}.{DOMAIN}"


def recv_until(s, marker, limit=1 << 20):
    buf = b""
    while marker not in buf:
        d = s.recv(65536)
        if not d:
            break
        buf += d
        assert len(buf) < limit
    return buf


def recv_all(s):
    buf = b""
    while True:
        d = s.recv(65536)
        if not d:
            return buf
        buf += d


def start_in_guest(node, sid, code):
    res = node.exec(sid, "/bin/sh", "-c", 'nohup python3 -c "$0" >/tmp/srv.log 2>&1 &', code)
    assert res["exit_code"] == 0, res


def wait_ready(harness, sid, port, path="/", timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        status, _, body = harness.request("GET", path, host=host(port, sid))
        if status != 502:
            return status
        assert time.monotonic() < deadline, body
        time.sleep(0.2)


@pytest.fixture(scope="module")
def node():
    if not os.path.exists(HARNESS):
        pytest.skip(f"{HARNESS} not built")
    n = Node("ingress")
    n.tunnel = n.socket[: -len(".sock")] + "-tunnel.sock"
    n.extra_args += ["--tunnel-socket", n.tunnel]
    n.start()
    yield n
    n.stop()
    left = n.leftovers()
    if os.path.exists(n.tunnel):
        left.append(f"tunnel socket {n.tunnel}")
    reports = sanitizer_reports(n.log_path)
    n.destroy()
    assert not left, left
    assert not reports, reports


@pytest.fixture(scope="module")
def ingress(node):
    h = Harness(node, node.tunnel)
    yield h
    h.stop()


@pytest.fixture(scope="module")
def token_ingress(node):
    h = Harness(node, node.tunnel, "--token", TOKEN)
    yield h
    h.stop()


@pytest.fixture(scope="module")
def sandbox(node, ingress):
    sb = node.create()
    sid = sb["id"]
    try:
        res = node.exec(sid, "/bin/sh", "-c", "cd /tmp && nohup python3 -m http.server 8000 "
                                              "--bind 0.0.0.0 >/dev/null 2>&1 &")
        assert res["exit_code"] == 0, res
        start_in_guest(node, sid, GUEST_SERVER)
        assert wait_ready(ingress, sid, 8000) == 200
        assert wait_ready(ingress, sid, 8001, "/nothing") == 404
        yield sb
    finally:
        if node.call("GET", f"/v1/sandboxes/{sid}")[0] == 200:
            node.kill(sid)


def test_tunnel_socket_protocol(node, sandbox):
    """The node side alone: the line protocol and its errors."""
    assert stat.S_IMODE(os.stat(node.tunnel).st_mode) == 0o660

    def tunnel(line):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(node.tunnel)
        s.sendall(line)
        return s

    for line, want in [(b"HELLO\n", b"ERR 400 "), (b"TUNNEL abc 80\n", b"ERR 400 "),
                       (b"TUNNEL " + sandbox["id"].encode() + b" 0\n", b"ERR 400 "),
                       (b"TUNNEL " + sandbox["id"].encode() + b" 65536\n", b"ERR 400 "),
                       (b"TUNNEL " + UNKNOWN.encode() + b" 80\n", b"ERR 404 "),
                       (b"TUNNEL " + sandbox["id"].encode() + b" 8009\n", b"ERR 502 "),
                       (b"X" * 200, b"ERR 400 ")]:
        s = tunnel(line)
        reply = recv_all(s)
        s.close()
        assert reply.startswith(want) and reply.endswith(b"\n"), (line, reply)

    # OK, then a raw HTTP exchange with envd; a half-close travels through.
    s = tunnel(b"TUNNEL " + sandbox["id"].encode() + b" 49983\n")
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    s.shutdown(socket.SHUT_WR)
    reply = recv_all(s)
    s.close()
    assert reply.startswith(b"OK\nHTTP/1.1 204"), reply


def test_route_by_host(ingress, sandbox):
    status, headers, body = ingress.request("GET", "/", host=host(8000, sandbox["id"]))
    assert status == 200
    assert b"Directory listing" in body
    # Kept alive toward the client, although the guest (HTTP/1.0) closes its side.
    assert headers["connection"] == "keep-alive"
    # Upper case in the Host is fine: host names are case-insensitive.
    status, _, _ = ingress.request("GET", "/", host=host(8000, sandbox["id"]).upper())
    assert status == 200


def test_route_by_headers(ingress, sandbox):
    hdrs = {"E2b-Sandbox-Id": sandbox["id"], "E2b-Sandbox-Port": "8000"}
    status, _, body = ingress.request("GET", "/", host=f"127.0.0.1:{ingress.port}", headers=hdrs)
    assert status == 200 and b"Directory listing" in body
    # The SDK sends the headers along with a routing Host: the Host decides (E2B host.go).
    hdrs = {"E2b-Sandbox-Id": sandbox["id"], "E2b-Sandbox-Port": "49983"}
    status, _, body = ingress.request("GET", "/", host=host(8000, sandbox["id"]), headers=hdrs)
    assert status == 200 and b"Directory listing" in body


def test_envd_health(ingress, sandbox):
    status, headers, body = ingress.request("GET", "/health", host=host(49983, sandbox["id"]))
    assert status == 204 and body == b""
    assert "x-envd-version" in headers


def test_stream_flows_as_it_arrives(node, ingress, sandbox):
    sid = sandbox["id"]
    s = ingress.raw(f"POST /stream HTTP/1.1\r\nHost: {host(8001, sid)}\r\n"
                    "Content-Type: application/connect+json\r\nContent-Length: 0\r\n\r\n"
                    .encode())
    try:
        first = recv_until(s, b"first\n\r\n")
        assert first.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"\r\nConnection: keep-alive\r\n" in first
        assert first.endswith(b"\r\n\r\n6\r\nfirst\n\r\n")
        # The second chunk is not even written yet.
        s.settimeout(0.5)
        with pytest.raises(socket.timeout):
            extra = s.recv(1)
            assert extra != b"", "connection closed early"
        node.exec(sid, "touch", "/tmp/go")
        s.settimeout(30)
        rest = recv_until(s, b"0\r\n\r\n")
        assert rest == b"7\r\nsecond\n\r\n0\r\n\r\n"
        # Kept alive: the connection stays open for another request.
        s.settimeout(0.5)
        with pytest.raises(socket.timeout):
            s.recv(1)
    finally:
        s.close()


def test_post_1mib_echo(ingress, sandbox):
    body = os.urandom(1 << 20)
    status, _, data = ingress.request("POST", "/echo", host=host(8001, sandbox["id"]), body=body)
    assert status == 200 and hashlib.sha256(data).digest() == hashlib.sha256(body).digest()
    # A chunked request body streams through as well.
    status, _, data = ingress.request("POST", "/echo", host=host(8001, sandbox["id"]),
                                      body=iter([body[:1000], body[1000:]]), encode_chunked=True)
    assert status == 200 and data == body


def test_large_download(ingress, sandbox):
    n = 8 << 20
    status, _, data = ingress.request("GET", f"/big/{n}", host=host(8001, sandbox["id"]))
    assert status == 200 and len(data) == n
    assert data == (bytes(range(256)) * 256 * (n // 65536))


def test_slow_reader_gets_everything(ingress, sandbox):
    n = 4 << 20
    s = ingress.raw(f"GET /big/{n} HTTP/1.1\r\nHost: {host(8001, sandbox['id'])}\r\n"
                    "Connection: close\r\n\r\n".encode())
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        head = recv_until(s, b"\r\n\r\n")
        got = len(head) - head.index(b"\r\n\r\n") - 4
        time.sleep(2)  # the proxy must hold back, not buffer megabytes
        got += len(recv_all(s))
        assert got == n
    finally:
        s.close()


def test_unknown_sandbox(ingress):
    status, headers, body = ingress.request("GET", "/", host=host(8000, UNKNOWN))
    assert status == 502
    assert headers["content-type"].startswith("application/json")
    assert json.loads(body) == {"sandboxId": UNKNOWN, "message": "The sandbox was not found",
                                "code": 502}
    status, headers, body = ingress.request(
        "GET", "/", host=host(8000, UNKNOWN),
        headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    assert status == 502
    assert headers["content-type"].startswith("text/html")
    assert b"The sandbox was not found" in body and UNKNOWN.encode() in body


def test_port_not_open(ingress, sandbox):
    status, _, body = ingress.request("GET", "/", host=host(8009, sandbox["id"]))
    assert status == 502
    assert json.loads(body) == {"sandboxId": sandbox["id"], "port": "8009", "code": 502,
                                "message": "The sandbox is running but port is not open"}


def test_bad_requests(ingress):
    for raw, want in [
        (b"garbage\r\n\r\n", b"HTTP/1.1 400 "),
        (b"GET / HTTP/1.1\r\nHost: nothing.example\r\n\r\n", b"HTTP/1.1 400 "),
        (b"GET / HTTP/1.1\r\nHost: 8000-" + UNKNOWN.encode() + b".space.test\r\nHost: x\r\n\r\n",
         b"HTTP/1.1 400 "),
        (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nE2b-Sandbox-Id: " + UNKNOWN.encode() + b"\r\n\r\n",
         b"HTTP/1.1 400 "),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX: " + b"a" * (70 * 1024) + b"\r\n\r\n", b"HTTP/1.1 431 "),
        (b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", b"HTTP/1.1 505 "),
    ]:
        s = ingress.raw(raw)
        reply = recv_all(s)
        s.close()
        assert reply.startswith(want), (raw[:80], reply[:200])
        body = reply.split(b"\r\n\r\n", 1)[1]
        assert json.loads(body)["code"] == int(want.split()[1])


def test_token(token_ingress, sandbox):
    h = host(49983, sandbox["id"])
    for hdrs in ({}, {"X-Access-Token": "wrong"}, {"X-Access-Token": TOKEN + "x"}):
        status, _, body = token_ingress.request("GET", "/envs", host=h, headers=hdrs)
        assert status == 401, hdrs
        assert json.loads(body)["code"] == 401
    status, _, body = token_ingress.request("GET", "/envs", host=h,
                                            headers={"X-Access-Token": TOKEN})
    assert status == 200, body
    # Exempt: /health, and /files with a signature (envd checks that itself).
    assert token_ingress.request("GET", "/health", host=h)[0] == 204
    status, _, body = token_ingress.request("GET", "/files?path=/etc/hostname&signature=v1_x",
                                            host=h)
    assert not (status == 401 and b"sandboxId" in body), body  # envd answered, not the proxy
    # Other ports are the user's business.
    assert token_ingress.request("GET", "/", host=host(8000, sandbox["id"]))[0] == 200
    # envd's internal routes never pass, token or not.
    status, _, _ = token_ingress.request("POST", "/init", host=h, body=b"{}",
                                         headers={"X-Access-Token": TOKEN})
    assert status == 403


def test_unauthenticated_paths_get_small_bodies(token_ingress, sandbox):
    """What passes without envd's token cannot push a large body at the agent."""
    h = host(49983, sandbox["id"])
    status, _, body = token_ingress.request("GET", "/health", host=h, body=b"x")
    assert status == 413 and json.loads(body)["code"] == 413
    s = token_ingress.raw(f"POST /files?path=/tmp/x&signature=v1_x HTTP/1.1\r\nHost: {h}\r\n"
                          "Transfer-Encoding: chunked\r\n\r\n".encode())
    assert recv_all(s).startswith(b"HTTP/1.1 411 "), "chunked without a token"
    s.close()
    s = token_ingress.raw(f"POST /files?path=/tmp/x&signature=v1_x HTTP/1.1\r\nHost: {h}\r\n"
                          f"Content-Length: {(64 << 20) + 1}\r\n\r\n".encode())
    assert recv_all(s).startswith(b"HTTP/1.1 413 ")
    s.close()


def test_upgrade_passthrough(ingress, sandbox):
    s = ingress.raw(f"GET /ws HTTP/1.1\r\nHost: {host(8001, sandbox['id'])}\r\n"
                    "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n".encode())
    try:
        head = recv_until(s, b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101 ")
        assert b"Connection: close" not in head
        for msg in (b"ping", b"x" * 100000):
            s.sendall(msg)
            got = b""
            while len(got) < len(msg):
                d = s.recv(65536)
                assert d
                got += d
            assert got == msg
        s.shutdown(socket.SHUT_WR)
        assert recv_all(s) == b""
    finally:
        s.close()


def test_one_request_per_upstream_connection(node, ingress, sandbox):
    """Keep-alive is between the client and the ingress only: the sandbox
    gets one request per connection, even if it would serve another."""
    sid = sandbox["id"]
    node.exec(sid, "/bin/rm", "-f", "/tmp/pipelined")
    req = f"GET /keepalive HTTP/1.1\r\nHost: {host(8001, sid)}\r\n\r\n".encode()
    close = f"GET /keepalive HTTP/1.1\r\nHost: {host(8001, sid)}\r\nConnection: close\r\n\r\n"
    s = ingress.raw(req + req + close.encode())
    reply = recv_all(s)
    s.close()
    assert reply.count(b"HTTP/1.1 200 OK\r\n") == 3, reply
    assert reply.count(b"\r\nConnection: keep-alive\r\n") == 2, reply
    assert reply.endswith(b"Connection: close\r\n\r\nok"), reply
    res = node.exec(sid, "/bin/sh", "-c", "test -e /tmp/pipelined && cat /tmp/pipelined; true")
    assert res["stdout"] == b""


def test_keepalive_routes_every_request(node, ingress, sandbox):
    """Each request on a kept-alive connection is routed, looked up and
    checked on its own: one that fails ends the connection with its error,
    after the earlier responses."""
    sid = sandbox["id"]
    s = ingress.raw(f"GET /health HTTP/1.1\r\nHost: {host(49983, sid)}\r\n\r\n"
                    f"GET /keepalive HTTP/1.1\r\nHost: {host(8001, sid)}\r\n\r\n"
                    f"GET / HTTP/1.1\r\nHost: {host(8001, UNKNOWN)}\r\n\r\n"
                    f"GET /health HTTP/1.1\r\nHost: {host(49983, sid)}\r\n\r\n".encode())
    reply = recv_all(s)
    s.close()
    statuses = re.findall(rb"HTTP/1.1 (\d{3}) ", reply)
    assert statuses == [b"204", b"200", b"502"], reply
    assert b"The sandbox was not found" in reply


def test_keepalive_http_client(ingress, sandbox):
    """A stock client reuses one connection for many requests."""
    conn = http.client.HTTPConnection("127.0.0.1", ingress.port, timeout=30)
    for i in range(20):
        conn.request("POST", "/echo", body=str(i).encode() * 100,
                     headers={"Host": host(8001, sandbox["id"])})
        res = conn.getresponse()
        assert res.status == 200 and res.read() == str(i).encode() * 100
        assert res.getheader("Connection") == "keep-alive"
    conn.close()


def test_envd_paths_are_canonical(token_ingress, sandbox):
    """Only one spelling of a path reaches envd, so /init's block cannot be
    walked around (issue 7: //x/init passed)."""
    h = host(49983, sandbox["id"])
    hdrs = {"X-Access-Token": TOKEN}
    for path in ("//x/init", "/./init", "/x/../init", "/%2Finit", "/%69nit", "//init"):
        status, _, body = token_ingress.request("POST", path, host=h, body=b"{}", headers=hdrs)
        assert status == 400 and b"non-canonical" in body, (path, status, body)
    for path in ("/INIT", "/init/", "/Init/x"):
        status, _, _ = token_ingress.request("POST", path, host=h, body=b"{}", headers=hdrs)
        assert status == 403, path


def test_parallel_requests(ingress, sandbox):
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        futs = [pool.submit(ingress.request, "POST", "/echo", host(8001, sandbox["id"]), None,
                            str(i).encode() * 1000) for i in range(48)]
        for i, f in enumerate(futs):
            status, _, body = f.result()
            assert status == 200 and body == str(i).encode() * 1000


def test_killed_sandbox_closes_its_streams(node, ingress):
    sb = node.create()
    sid = sb["id"]
    killed = False
    try:
        start_in_guest(node, sid, GUEST_SERVER)
        assert wait_ready(ingress, sid, 8001, "/nothing") == 404
        s = ingress.raw(f"GET /stream HTTP/1.1\r\nHost: {host(8001, sid)}\r\n\r\n".encode())
        assert recv_until(s, b"first\n\r\n").endswith(b"first\n\r\n")
        node.kill(sid)
        killed = True
        s.settimeout(15)
        t0 = time.monotonic()
        rest = b""
        try:
            rest = recv_all(s)  # EOF (or a reset): the stream does not hang
        except ConnectionResetError:
            pass
        assert time.monotonic() - t0 < 10
        # Never a clean end: no last chunk, so every client sees a cut stream.
        assert b"0\r\n\r\n" not in rest, rest
        s.close()
        status, _, body = ingress.request("GET", "/", host=host(8001, sid), timeout=30)
        assert status == 502 and json.loads(body)["message"] == "The sandbox was not found"
    finally:
        if not killed:
            node.kill(sid)
    # The proxy still serves others.
    status, _, _ = ingress.request("GET", "/health", host=host(49983, UNKNOWN))
    assert status == 502


def test_envd_connect_stream(ingress, sandbox):
    """A Connect server stream from envd (process.Process/Start) through the proxy,
    routed by headers as with E2B_SANDBOX_URL: events arrive as they happen,
    keepalives included, and the end-of-stream frame comes last."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agent"))
    from envd_client import Envd, unb64

    envd = Envd(f"http://127.0.0.1:{ingress.port}")
    route = {"E2b-Sandbox-Id": sandbox["id"], "E2b-Sandbox-Port": "49983",
             "Keepalive-Ping-Interval": "1"}
    s = envd.stream("process.Process/Start",
                    {"process": {"cmd": "/bin/sh", "args": ["-c", "echo one; sleep 3; echo two"]}},
                    headers=route)
    seen = []
    for msg in s:
        ev = msg["event"]
        kind = next(iter(ev))
        data = unb64(ev["data"].get("stdout", "")) if kind == "data" else b""
        seen.append((time.monotonic(), kind, data))
    s.close()
    kinds = [k for _, k, _ in seen]
    assert kinds[0] == "start" and kinds[-1] == "end", kinds
    assert "keepalive" in kinds, kinds
    one = next(t for t, k, d in seen if d == b"one\n")
    two = next(t for t, k, d in seen if d == b"two\n")
    assert two - one >= 2, seen  # "one" was delivered while the command slept
    assert s.end == {}


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def test_stalled_reader_costs_bounded_memory(node, ingress, sandbox):
    """64 MiB offered to a client that does not read: the proxy and the node
    each hold at most their watermarks, the rest waits in the guest."""
    n = 64 << 20
    before = (rss_kib(ingress.proc.pid), rss_kib(node.proc.pid))
    s = ingress.raw(f"GET /big/{n} HTTP/1.1\r\nHost: {host(8001, sandbox['id'])}\r\n"
                    "Connection: close\r\n\r\n".encode())
    try:
        time.sleep(3)
        after = (rss_kib(ingress.proc.pid), rss_kib(node.proc.pid))
        assert after[0] - before[0] < 8 * 1024, (before, after)
        assert after[1] - before[1] < 8 * 1024, (before, after)
        got = len(recv_all(s))
        assert got > n
    finally:
        s.close()


def test_half_closed_client(ingress, sandbox):
    """A client that sends its request and then shuts its write side (nc -N)
    still gets the whole answer, proxied or generated."""
    for h, want in ((host(49983, sandbox["id"]), b"HTTP/1.1 204 "),
                    (host(8000, UNKNOWN), b"HTTP/1.1 502 ")):
        s = ingress.raw(f"GET /health HTTP/1.1\r\nHost: {h}\r\n\r\n".encode())
        s.shutdown(socket.SHUT_WR)
        reply = recv_all(s)
        s.close()
        assert reply.startswith(want), reply
