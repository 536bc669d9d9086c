"""A small world for space-gw's own end-to-end tests, made of network namespaces
this test creates (unique names per run, always removed):

    guest  169.254.0.2/30 on g0, default route via 169.254.0.1, resolv.conf -> 169.254.0.1
      |  veth                              (World(n) makes n guest/sbx pairs: n sandboxes)
    sbx    169.254.0.1/30 on s0 (the sandbox namespace space-node would own): nftables
           redirects the guest's TCP to :15001; the driver opens the DNS socket (:53) and
           the gateway listener (:15001) here and hands them to space-gw
    inet   the simulated internet, where space-gw itself runs (ip netns exec): dnsmasq on
           198.18.0.53, HTTP on 198.18.1.10 (allowed.test and forbidden.test: one address,
           the CDN case) and 198.18.1.66 (a forbidden address, answers "leak")

No route leaves these namespaces; nothing touches the host's own namespace. The gateway
dials from "inet", the only place 198.18.0.0/15 exists.
"""
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL("libc.so.6", use_errno=True)

HTTP_SERVER = r'''
import http.server, os, socketserver, ssl, sys, threading, time
CHUNKED_SIZE = 3 << 20
log = open(sys.argv[1], "a", buffering=1)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        host = self.headers.get("Host", "")
        local = self.connection.getsockname()[0]
        log.write(f"{local} {host} {self.path} conn={self.headers.get('Connection','')} "
                  f"peer={self.client_address[1]}\n")
        if self.path == "/ws" and self.headers.get("Upgrade") == "echo":
            # A protocol switch, then an echo of raw bytes until EOF.
            self.send_response(101)
            self.send_header("Upgrade", "echo")
            self.send_header("Connection", "Upgrade")
            self.end_headers()
            self.wfile.flush()
            while True:
                data = self.connection.recv(65536)
                if not data:
                    break
                self.connection.sendall(data)
            self.close_connection = True
            return
        if self.path.startswith("/chunked"):
            self.chunked(self.path)
            return
        body = (b"leak\n" if local == "198.18.1.66" else
                f"host={host} path={self.path}\n".encode())
        if self.path.startswith("/big"):
            body = b"x" * (4 << 20)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_POST = do_GET
    def chunked(self, path):
        # /chunked: CHUNKED_SIZE bytes in chunks of varied sizes (and a trailer);
        # /chunked-extra: a short one, then the bytes of a second response right behind it
        # (an upstream the gateway must not believe); /chunked-wait: one chunk, then the rest
        # once the file named by the query exists (a stream passed on as it comes).
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        w = self.wfile
        if path.startswith("/chunked-wait"):
            w.write(b"5\r\nfirst\r\n")
            flag = path.split("?", 1)[1]
            for _ in range(600):
                if os.path.exists(flag):
                    break
                time.sleep(0.05)
            w.write(b"4\r\nrest\r\n0\r\n\r\n")
            return
        if path.startswith("/chunked-extra"):
            w.write(b"%x\r\n" % 200000 + b"e" * 200000 + b"\r\n0\r\n\r\n"
                    b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nevil!\n")
            return
        left, k = CHUNKED_SIZE, 0
        while left:
            n = min(left, (1, 7, 4096, 16384, 65536, 100003)[k % 6])
            w.write(b"%x\r\n" % n + bytes([97 + k % 26]) * n + b"\r\n")
            left -= n
            k += 1
        w.write(b"0\r\nX-Trailer: t\r\n\r\n")
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
for ip in ("198.18.1.10", "198.18.1.66"):
    s = S((ip, 80), H)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    # HTTPS with the test CA's certificate for allowed.test and forbidden.test (not
    # badcert.test, which DNS also points here: the upstream verification case).
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[2], sys.argv[3])
    t = S((ip, 443), H)
    t.socket = ctx.wrap_socket(t.socket, server_side=True)
    threading.Thread(target=t.serve_forever, daemon=True).start()
print("serving", flush=True)
threading.Event().wait()
'''


def run(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, **kw)


class Netns:
    """setns(2) into a namespace for the duration of a call: sockets made inside stay there."""

    def __init__(self, name):
        self.name = name

    def call(self, fn, *args):
        orig = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(f"/run/netns/{self.name}", os.O_RDONLY)
        try:
            if _libc.setns(target, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns")
            try:
                return fn(*args)
            finally:
                if _libc.setns(orig, CLONE_NEWNET) != 0:
                    os._exit(99)  # never go on in the wrong namespace
        finally:
            os.close(orig)
            os.close(target)

    def socket(self, *args):
        return self.call(socket.socket, *args)

    def exec(self, *cmd, **kw):
        return subprocess.run(["ip", "netns", "exec", self.name, *cmd], **kw)

    def popen(self, *cmd, **kw):
        return subprocess.Popen(["ip", "netns", "exec", self.name, *cmd],
                                start_new_session=True, **kw)


class World:
    def __init__(self, n=1):
        tag = uuid.uuid4().hex[:6]
        self.tmp = tempfile.mkdtemp(prefix="gwtest-")
        self.guests = [Netns(f"gwt-g{i}-{tag}") for i in range(n)]
        self.sbxs = [Netns(f"gwt-s{i}-{tag}") for i in range(n)]
        self.guest, self.sbx = self.guests[0], self.sbxs[0]
        self.inet = Netns(f"gwt-i-{tag}")
        self.procs = []
        self.dns_log = os.path.join(self.tmp, "dnsmasq.log")
        self.http_log = os.path.join(self.tmp, "http.log")

    def namespaces(self):
        return [n.name for n in self.guests + self.sbxs] + [self.inet.name]

    def start(self):
        i = self.inet.name
        for ns in self.namespaces():
            run("ip", "netns", "add", ns)
            run("ip", "-n", ns, "link", "set", "lo", "up")
        for guest, sbx in zip(self.guests, self.sbxs):
            self._link(guest, sbx)
        self._internet(i)
        return self

    def _link(self, guest, sbx):
        g, s = guest.name, sbx.name
        run("ip", "-n", g, "link", "add", "g0", "type", "veth", "peer", "name", "s0", "netns", s)
        run("ip", "-n", g, "addr", "add", "169.254.0.2/30", "dev", "g0")
        run("ip", "-n", g, "link", "set", "g0", "up")
        run("ip", "-n", g, "route", "add", "default", "via", "169.254.0.1")
        run("ip", "-n", s, "addr", "add", "169.254.0.1/30", "dev", "s0")
        run("ip", "-n", s, "link", "set", "s0", "up")
        rules = ('table ip gwtest {\n chain pre {\n type nat hook prerouting priority dstnat;'
                 ' policy accept;\n iifname "s0" ip daddr != 169.254.0.1 meta l4proto tcp '
                 'redirect to :15001\n }\n}\n')
        sbx.exec("nft", "-f", "-", input=rules.encode(), check=True)
        os.makedirs(f"/etc/netns/{g}", exist_ok=True)
        with open(f"/etc/netns/{g}/resolv.conf", "w") as f:
            f.write("nameserver 169.254.0.1\noptions attempts:1 timeout:2\n")
        with open(f"/etc/netns/{g}/hosts", "w") as f:
            f.write("127.0.0.1 localhost\n")

    def _internet(self, i):
        for ip in ("198.18.0.53", "198.18.1.10", "198.18.1.66"):
            run("ip", "-n", i, "addr", "add", f"{ip}/32", "dev", "lo")
        self.dnsmasq = self.inet.popen(
            "dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts", "--no-poll",
            "--conf-file=/dev/null", "--listen-address=198.18.0.53", "--bind-interfaces",
            "--address=/allowed.test/198.18.1.10", "--address=/forbidden.test/198.18.1.10",
            "--address=/other.test/198.18.1.66", "--address=/badcert.test/198.18.1.10",
            "--log-queries",
            f"--log-facility={self.dns_log}", "--pid-file=", "--user=root",
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(self.dnsmasq)
        self.make_test_ca()
        script = os.path.join(self.tmp, "http_server.py")
        with open(script, "w") as f:
            f.write(HTTP_SERVER)
        p = self.inet.popen("/usr/bin/python3", script, self.http_log, self.srv_crt, self.srv_key,
                            stdout=subprocess.PIPE)
        self.procs.append(p)
        assert p.stdout.readline().strip() == b"serving"
        deadline = time.monotonic() + 10
        while not os.path.exists(self.dns_log) and time.monotonic() < deadline:
            time.sleep(0.05)

    def make_test_ca(self):
        """The simulated internet's own CA (space-gw trusts it by --upstream-ca)."""
        d = self.tmp
        self.test_ca = os.path.join(d, "test-ca.crt")
        self.srv_crt = os.path.join(d, "srv.crt")
        self.srv_key = os.path.join(d, "srv.key")
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        q = dict(check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        run("openssl", "req", "-x509", *ec, "-keyout", os.path.join(d, "test-ca.key"), "-out",
            self.test_ca, "-days", "2", "-subj", "/CN=gwtest CA", "-addext",
            "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign", **q)
        run("openssl", "req", *ec, "-keyout", self.srv_key, "-out", os.path.join(d, "srv.csr"),
            "-subj", "/CN=allowed.test", **q)
        ext = os.path.join(d, "srv.ext")
        with open(ext, "w") as f:
            f.write("subjectAltName=DNS:allowed.test,DNS:forbidden.test\n"
                    "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
        run("openssl", "x509", "-req", "-in", os.path.join(d, "srv.csr"), "-CA", self.test_ca,
            "-CAkey", os.path.join(d, "test-ca.key"), "-CAcreateserial", "-out", self.srv_crt,
            "-days", "2", "-extfile", ext, **q)

    def read(self, path):
        try:
            with open(path, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        for ns in self.namespaces():
            run("ip", "netns", "delete", ns, check=False, stderr=subprocess.DEVNULL)
        for g in self.guests:
            shutil.rmtree(f"/etc/netns/{g.name}", ignore_errors=True)
        shutil.rmtree(self.tmp, ignore_errors=True)
