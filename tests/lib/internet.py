"""A simulated internet for the egress tests (CONTRACTS.md "Simulated internet").

Two network namespaces of the test's own, joined by a veth pair; nothing in them is routed
to the host or beyond (network safety: only 198.18.0.0/15 and one 169.254.0.0/16 address,
inside namespaces the test creates):

  uplink  198.18.0.1/24 on `up0`; routes 198.18.0.0/15 and 169.254.169.254/32 via the inet
          side and nothing else. space-gw runs here (`ip netns exec`), so what it dials
          upstream lands in inet. /etc/netns/<uplink>/resolv.conf names the dnsmasq.
  inet    198.18.0.2/24 on `in0`, and on lo:
            198.18.0.53      dnsmasq (--log-queries to a file the test reads)
            198.18.1.10      nginx: allowed.test and forbidden.test on one address (the CDN
                             case), HTTP 80 and HTTPS 443 with a test CA; any other Host/SNI
                             gets the default vhost. Also 8080 and 22 ("port-leak").
            198.18.1.66      a forbidden address: nginx on 80/443 answering "leak"
            198.18.1.10      also (credentials, issue 10): api.secret.test on 80/443, 200
                             only with "Authorization: Bearer <secret_token>" (a random
                             token per run) and 401 otherwise, /v1/redirect a 302 to
                             https://allowed.test/landed; impostor upstreams
                             selfsigned.test (a self-signed certificate) and
                             wrongname.test (the test CA's certificate for allowed.test)
            198.18.1.53      a DNS-over-HTTPS/TLS server a guest could hard-code: 443 and
                             853 answering "doh-leak"/"dot-leak"
            169.254.169.254  a cloud metadata service answering "metadata-leak"

And in uplink itself, standing for the host space-gw runs on: a TCP service on 0.0.0.0:18080
(HOST_SERVICE_PORT: reachable as 127.0.0.x and 198.18.0.1 there) answering "host-leak" and
logging every peer, as the host's API and ingress would.

Every response names the vhost that answered (body `vhost=<name> ...` and header
X-Vhost), so a test can tell allowed from forbidden. The nginx access log (JSON lines)
records each request with its address, port, SNI and Host; an nftables table in inet
records every new connection attempt (TCP/UDP 5-tuple, ICMP) that reaches the namespace,
so a leak through the gateway is caught there even when no server answers.

Use as a context manager (`with Internet() as net:`) or the pytest fixture `internet`
(module scope: import it into the test module). Teardown always runs: processes, then
namespaces, then /etc/netns files and the tmp dir; namespaces left by a killed earlier
run (their pid is dead) are removed at the next start.
"""
import contextlib
import hashlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

UPLINK_IP = "198.18.0.1"
INET_IP = "198.18.0.2"
DNS_IP = "198.18.0.53"
WEB_IP = "198.18.1.10"
FORBIDDEN_IP = "198.18.1.66"
DOH_IP = "198.18.1.53"
METADATA_IP = "169.254.169.254"
TEST_NET = "198.18.0.0/15"
ALLOWED = "allowed.test"
FORBIDDEN = "forbidden.test"
# Names dnsmasq answers, and with what. *.allowed.test and *.forbidden.test match too
# (dnsmasq's --address covers subdomains).
DNS_NAMES = {
    ALLOWED: WEB_IP,
    FORBIDDEN: WEB_IP,
    "leak.test": FORBIDDEN_IP,
    "dns.test": DOH_IP,
    "metadata.test": METADATA_IP,
    "secret.test": WEB_IP,
    "selfsigned.test": WEB_IP,
    "wrongname.test": WEB_IP,
}
# Credentials (issue 10): the token-protected service and the impostors.
SECRET_API = "api.secret.test"
SELFSIGNED = "selfsigned.test"
WRONGNAME = "wrongname.test"
BIG_SIZE = 64 << 20
HOST_SERVICE_PORT = 18080

# The uplink's "host service": accepts, logs the peer, answers host-leak, closes.
_HOST_SERVICE = r"""
import socket, sys, threading
log = open(sys.argv[1], "a", buffering=1)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[2])))
s.listen(64)
print("ready", flush=True)
def serve(c, peer):
    log.write(f"{peer[0]}:{peer[1]} -> {c.getsockname()[0]}\n")
    try:
        c.settimeout(5)
        c.recv(4096)
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\nhost-leak\n")
    except OSError:
        pass
    c.close()
while True:
    c, peer = s.accept()
    threading.Thread(target=serve, args=(c, peer), daemon=True).start()
"""

_PREFIX = "spnet"
_counter = itertools.count()


def _sh(*args, check=True, input=None, timeout=60):
    res = subprocess.run(args, input=input, capture_output=True, text=True, timeout=timeout)
    if check and res.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({res.returncode}): {res.stderr.strip()}")
    return res


def _netns_list():
    try:
        return os.listdir("/run/netns")
    except FileNotFoundError:
        return []


def _reap_stale():
    """Namespaces of earlier runs whose test process is gone (killed before teardown)."""
    for ns in _netns_list():
        m = re.fullmatch(_PREFIX + r"[ui](\d+)x\d+", ns)
        if not m or os.path.exists(f"/proc/{m.group(1)}"):
            continue
        for pid in _sh("ip", "netns", "pids", ns, check=False).stdout.split():
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGKILL)
        _sh("ip", "netns", "delete", ns, check=False)
        shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)


def _openssl(*args, cwd):
    res = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if res.returncode != 0:
        raise AssertionError(f"openssl {' '.join(args)}: {res.stderr.strip()}")


def make_ca(d, cn="space test internet CA"):
    """A P-256 CA in d/ca.key, d/ca.crt (openssl CLI: the python `cryptography` is absent)."""
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", "ca.key", "-out", "ca.crt", "-days", "3", "-subj", f"/CN={cn}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    return os.path.join(d, "ca.crt")


def make_leaf(d, name, sans):
    """d/<name>.key + d/<name>.crt signed by d/ca.*, with subjectAltName sans ("DNS:x",
    "IP:y")."""
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}",
             "-addext", "subjectAltName=" + ",".join(sans),
             "-addext", "basicConstraints=critical,CA:FALSE",
             "-addext", "extendedKeyUsage=serverAuth", cwd=d)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "3", "-copy_extensions", "copy",
             "-out", f"{name}.crt", cwd=d)
    os.unlink(os.path.join(d, f"{name}.csr"))
    return os.path.join(d, f"{name}.crt"), os.path.join(d, f"{name}.key")


# Each nginx server block: (listen addresses, server_name or None for default, body word,
# certificate name or None for plain HTTP).
def _secret_servers(tmp, token):
    """api.secret.test (200 only with the token) and the two impostor upstreams."""
    pki = os.path.join(tmp, "pki")
    out = []
    for port, tls in ((80, None), (443, SECRET_API)):
        lines = ["  server {", f"    listen {WEB_IP}:{port}{' ssl' if tls else ''};",
                 f"    server_name {SECRET_API};"]
        if tls:
            lines += [f"    ssl_certificate {pki}/{tls}.crt;",
                      f"    ssl_certificate_key {pki}/{tls}.key;"]
        lines += [
            f"    add_header X-Vhost {SECRET_API} always;",
            "    location = /v1/redirect { return 302 https://allowed.test/landed; }",
            "    location / {",
            f'      if ($http_authorization != "Bearer {token}") {{',
            f"        return 401 'vhost={SECRET_API} unauthorized uri=$request_uri\\n';",
            "      }",
            f"      return 200 'vhost={SECRET_API} authorized uri=$request_uri\\n';",
            "    }",
            "  }"]
        out.append("\n".join(lines))
    for name, cert in ((SELFSIGNED, SELFSIGNED), (WRONGNAME, ALLOWED)):
        out.append("\n".join([
            "  server {", f"    listen {WEB_IP}:443 ssl;", f"    server_name {name};",
            f"    ssl_certificate {pki}/{cert}.crt;", f"    ssl_certificate_key {pki}/{cert}.key;",
            f"    add_header X-Vhost {name} always;",
            f"    location / {{ return 200 'vhost={name} impostor\\n'; }}", "  }"]))
    return out


def _nginx_conf(tmp, big_name, token=None):
    www = os.path.join(tmp, "www")
    cert = lambda n: (os.path.join(tmp, "pki", f"{n}.crt"), os.path.join(tmp, "pki", f"{n}.key"))
    servers = []

    def server(listens, name, vhost, tls):
        lines = ["  server {"]
        for addr in listens:
            lines.append(f"    listen {addr}{' ssl' if tls else ''}"
                         f"{' default_server' if name is None else ''};")
        lines.append(f"    server_name {name or '_'};")
        if tls:
            c, k = cert(tls)
            lines += [f"    ssl_certificate {c};", f"    ssl_certificate_key {k};"]
        lines += [
            f"    add_header X-Vhost {vhost} always;",
            f"    location = /{big_name} {{ root {www}; }}",
            "    location / {",
            f"      return 200 'vhost={vhost} host=$host sni=$ssl_server_name uri=$request_uri\\n';",
            "    }",
            "  }",
        ]
        servers.append("\n".join(lines))

    for port, tls in ((80, None), (443, "web")):
        listen = [f"{WEB_IP}:{port}"]
        server(listen, ALLOWED, ALLOWED, tls and ALLOWED)
        server(listen, FORBIDDEN, FORBIDDEN, tls and FORBIDDEN)
        server(listen, None, "default", tls and "default")
    for port in (8080, 22):
        server([f"{WEB_IP}:{port}"], None, "port-leak", None)
    server([f"{FORBIDDEN_IP}:80"], None, "leak", None)
    server([f"{FORBIDDEN_IP}:443"], None, "leak", "leak")
    server([f"{DOH_IP}:443"], None, "doh-leak", "doh")
    server([f"{DOH_IP}:853"], None, "dot-leak", "doh")
    server([f"{METADATA_IP}:80"], None, "metadata-leak", None)
    if token:
        servers += _secret_servers(tmp, token)
    logs = os.path.join(tmp, "log")
    temp = os.path.join(tmp, "nginx-tmp")
    return f"""
daemon off;
master_process on;
user root;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {logs}/nginx-error.log info;
events {{ worker_connections 512; }}
http {{
  default_type application/octet-stream;
  client_body_temp_path {temp}/body;
  proxy_temp_path {temp}/proxy;
  fastcgi_temp_path {temp}/fastcgi;
  uwsgi_temp_path {temp}/uwsgi;
  scgi_temp_path {temp}/scgi;
  # nginx 1.22 leaves TLS 1.3 out by default; the internet speaks it.
  ssl_protocols TLSv1.2 TLSv1.3;
  keepalive_requests 1000;
  keepalive_timeout 120s;
  sendfile on;
  log_format lines escape=json '{{"remote":"$remote_addr","addr":"$server_addr",'
      '"port":"$server_port","sni":"$ssl_server_name","host":"$http_host",'
      '"vhost":"$sent_http_x_vhost","request":"$request","status":"$status",'
      '"bytes":"$body_bytes_sent","conn":"$connection","reqs":"$connection_requests",'
      '"auth":"$http_authorization"}}';
  access_log {logs}/access.log lines;
{chr(10).join(servers)}
}}
"""


class Internet:
    """The simulated internet; start() builds it, close() tears it down (idempotent)."""

    def __init__(self, big_size=BIG_SIZE):
        _reap_stale()
        n = next(_counter)
        self.uplink = f"{_PREFIX}u{os.getpid()}x{n}"
        self.inet = f"{_PREFIX}i{os.getpid()}x{n}"
        # Made by start(): the CA, logs, nginx's files and the big file live here.
        self.tmp = None
        self.big_name = "big.bin"
        self.big_size = big_size
        self.big_sha256 = None
        # For space-gw (CONTRACTS.md): --upstream-dns, --upstream-ca, --egress-test-net.
        self.upstream_dns = DNS_IP
        self.upstream_ca = None
        self.test_net = TEST_NET
        # What api.secret.test wants in "Authorization: Bearer ...": fresh each run, so no
        # file or cache anywhere can hold it by chance (credentials tests look for it).
        self.secret_token = "sk-space-" + os.urandom(18).hex()
        self.procs = []
        self._made = []

    # ---- building --------------------------------------------------------------------

    def start(self):
        self.tmp = tempfile.mkdtemp(prefix="space-internet-")
        self.pki = os.path.join(self.tmp, "pki")
        self.ca = self.upstream_ca = os.path.join(self.pki, "ca.crt")
        self.dns_log = os.path.join(self.tmp, "log", "dnsmasq.log")
        self.access_log = os.path.join(self.tmp, "log", "access.log")
        os.makedirs(os.path.join(self.tmp, "log"))
        try:
            self._pki()
            self._big_file()
            self._namespaces()
            self._dnsmasq()
            self._nginx()
            self._flow_log()
            self._host_service()
            self._wait_ready()
        except BaseException:
            self.close()
            raise
        return self

    def _pki(self):
        os.makedirs(self.pki)
        make_ca(self.pki)
        make_leaf(self.pki, ALLOWED, [f"DNS:{ALLOWED}"])
        make_leaf(self.pki, FORBIDDEN, [f"DNS:{FORBIDDEN}"])
        make_leaf(self.pki, "default", ["DNS:default.test", f"IP:{WEB_IP}"])
        make_leaf(self.pki, "leak", ["DNS:leak.test", f"IP:{FORBIDDEN_IP}"])
        make_leaf(self.pki, "doh", ["DNS:dns.test", f"IP:{DOH_IP}"])
        make_leaf(self.pki, SECRET_API, [f"DNS:{SECRET_API}"])
        # An impostor: self-signed, so no CA the gateway trusts vouches for it.
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                 "-nodes", "-keyout", f"{SELFSIGNED}.key", "-out", f"{SELFSIGNED}.crt", "-days",
                 "3", "-subj", f"/CN={SELFSIGNED}", "-addext", f"subjectAltName=DNS:{SELFSIGNED}",
                 cwd=self.pki)
        for f in os.listdir(self.pki):
            os.chmod(os.path.join(self.pki, f), 0o600 if f.endswith(".key") else 0o644)
        os.chmod(self.pki, 0o755)
        os.chmod(self.tmp, 0o755)  # space-gw may drop to another user and reads the CA

    def _big_file(self):
        """A random file (fresh each run, so no cache anywhere can fake the checksum)."""
        www = os.path.join(self.tmp, "www")
        os.makedirs(www)
        h = hashlib.sha256()
        with open(os.path.join(www, self.big_name), "wb") as f:
            left = self.big_size
            while left:
                chunk = os.urandom(min(left, 1 << 20))
                h.update(chunk)
                f.write(chunk)
                left -= len(chunk)
        self.big_sha256 = h.hexdigest()

    def big_sha256_prefix(self, n):
        """sha256 of the big file's first n bytes (for a Range download)."""
        h = hashlib.sha256()
        with open(os.path.join(self.tmp, "www", self.big_name), "rb") as f:
            while n > 0:
                b = f.read(min(n, 1 << 20))
                if not b:
                    break
                h.update(b)
                n -= len(b)
        return h.hexdigest()

    def _namespaces(self):
        for ns in (self.uplink, self.inet):
            _sh("ip", "netns", "add", ns)
            self._made.append(ns)
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
        _sh("ip", "-n", self.uplink, "link", "add", "up0", "type", "veth", "peer", "name", "in0",
            "netns", self.inet)
        _sh("ip", "-n", self.uplink, "addr", "add", f"{UPLINK_IP}/24", "dev", "up0")
        _sh("ip", "-n", self.uplink, "link", "set", "up0", "up")
        _sh("ip", "-n", self.inet, "addr", "add", f"{INET_IP}/24", "dev", "in0")
        _sh("ip", "-n", self.inet, "link", "set", "in0", "up")
        # No IPv6 anywhere in this internet: a v6 leak would have nowhere to go anyway.
        for ns in (self.uplink, self.inet):
            _sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        for addr in (DNS_IP, WEB_IP, FORBIDDEN_IP, DOH_IP, METADATA_IP):
            _sh("ip", "-n", self.inet, "addr", "add", f"{addr}/32", "dev", "lo")
        _sh("ip", "-n", self.uplink, "route", "add", TEST_NET, "via", INET_IP)
        _sh("ip", "-n", self.uplink, "route", "add", f"{METADATA_IP}/32", "via", INET_IP)
        # inet answers only the uplink's /24 (connected): it has no default route either.
        etc = f"/etc/netns/{self.uplink}"
        os.makedirs(etc, exist_ok=True)
        with open(f"{etc}/resolv.conf", "w") as f:
            f.write(f"nameserver {DNS_IP}\noptions timeout:1 attempts:2\n")
        with open(f"{etc}/hosts", "w") as f:
            f.write("127.0.0.1 localhost\n")

    def _spawn(self, ns, args, log_name):
        log = open(os.path.join(self.tmp, "log", log_name), "ab")
        try:
            p = subprocess.Popen(["ip", "netns", "exec", ns, *args], stdout=log, stderr=log,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            log.close()
        self.procs.append(p)
        return p

    def _dnsmasq(self):
        args = ["dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv",
                "--no-hosts", "--no-poll", "--bind-interfaces", f"--listen-address={DNS_IP}",
                "--port=53", "--user=root", f"--pid-file={self.tmp}/dnsmasq.pid",
                "--log-queries=extra", f"--log-facility={self.dns_log}", "--log-async=0",
                "--cache-size=0"]
        for name, addr in DNS_NAMES.items():
            args.append(f"--address=/{name}/{addr}")
        # A record type the DNS proxy must strip (HTTPS/SVCB carry ECH keys and hints).
        args.append(f"--dns-rr={ALLOWED},65,000100")
        self._spawn(self.inet, args, "dnsmasq.out")

    def _nginx(self):
        for d in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            os.makedirs(os.path.join(self.tmp, "nginx-tmp", d), exist_ok=True)
        conf = os.path.join(self.tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(_nginx_conf(self.tmp, self.big_name, self.secret_token))
        _sh("ip", "netns", "exec", self.inet, "nginx", "-t", "-q", "-c", conf, "-p", self.tmp)
        self._spawn(self.inet, ["nginx", "-c", conf, "-p", self.tmp], "nginx.out")

    def _host_service(self):
        self.host_service_log = os.path.join(self.tmp, "log", "host-service.log")
        open(self.host_service_log, "w").close()
        self._spawn(self.uplink, ["python3", "-c", _HOST_SERVICE, self.host_service_log,
                                  str(HOST_SERVICE_PORT)], "host-service.out")

    def host_service_hits(self):
        """Peers that reached the uplink's host service ("addr:port -> local addr")."""
        with open(self.host_service_log) as f:
            return f.read().splitlines()

    def _flow_log(self):
        """Every new connection attempt into inet, by 5-tuple, in a dynamic nft set."""
        rules = """
table inet flows {
  set tcpudp { type ipv4_addr . ipv4_addr . inet_proto . inet_service; flags dynamic; }
  set pings { type ipv4_addr . ipv4_addr; flags dynamic; }
  counter v6 { }
  chain pre {
    type filter hook prerouting priority -150; policy accept;
    iifname "lo" return
    meta nfproto ipv6 counter name v6
    ip protocol tcp tcp flags & (syn|ack) == syn add @tcpudp { ip saddr . ip daddr . ip protocol . tcp dport }
    ip protocol udp ct state new add @tcpudp { ip saddr . ip daddr . ip protocol . udp dport }
    ip protocol icmp add @pings { ip saddr . ip daddr }
  }
}
"""
        _sh("ip", "netns", "exec", self.inet, "nft", "-f", "-", input=rules)

    def _wait_ready(self, timeout=30):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise AssertionError(f"internet: a server exited: {self.logs()}")
            try:
                r = self.run_uplink(["dig", "+short", "+time=1", "+tries=1", f"@{DNS_IP}",
                                     ALLOWED], timeout=5)
                if r.returncode == 0 and WEB_IP in r.stdout:
                    r = self.run_uplink(["curl", "-sS", "-m", "3", f"http://{WEB_IP}/",
                                         "-H", f"Host: {ALLOWED}"], timeout=5)
                    if r.returncode == 0 and f"vhost={ALLOWED}" in r.stdout:
                        r = self.run_uplink(["curl", "-sS", "-m", "3",
                                             f"http://127.0.0.1:{HOST_SERVICE_PORT}/"], timeout=5)
                        if "host-leak" in r.stdout:
                            self.reset_logs()
                            return
                last = r.stderr
            except subprocess.TimeoutExpired as e:
                last = str(e)
            time.sleep(0.1)
        raise AssertionError(f"internet did not come up: {last} {self.logs()}")

    # ---- using -----------------------------------------------------------------------

    def run_uplink(self, argv, timeout=60, **kw):
        """Runs argv inside the uplink namespace (where space-gw runs)."""
        return subprocess.run(["ip", "netns", "exec", self.uplink, *argv], capture_output=True,
                              text=True, timeout=timeout, **kw)

    def dns_queries(self):
        """Names dnsmasq was asked, in order (from its --log-queries file)."""
        try:
            with open(self.dns_log, errors="replace") as f:
                text = f.read()
        except FileNotFoundError:
            return []
        return [m.group(1).lower() for m in re.finditer(r"query\[[A-Za-z0-9]+\] (\S+) from", text)]

    def requests(self):
        """nginx access-log records (dicts: addr, port, sni, host, vhost, request, status...)."""
        try:
            with open(self.access_log, errors="replace") as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def flows(self):
        """Connection attempts that reached inet: [(proto, src, dst, dport)], proto "tcp",
        "udp" or "icmp" (dport None), plus ("ipv6", count) when any IPv6 arrived."""
        out = []
        r = _sh("ip", "netns", "exec", self.inet, "nft", "-j", "list", "table", "inet", "flows")
        for item in json.loads(r.stdout)["nftables"]:
            s = item.get("set")
            if s and s.get("elem"):
                for e in s["elem"]:
                    v = e["elem"]["val"] if isinstance(e, dict) and "elem" in e else e
                    parts = v["concat"]
                    if s["name"] == "pings":
                        out.append(("icmp", parts[0], parts[1], None))
                    else:
                        proto = {6: "tcp", 17: "udp"}.get(parts[2], parts[2])
                        out.append((proto, parts[0], parts[1], int(parts[3])))
            c = item.get("counter")
            if c and c["name"] == "v6" and c["packets"]:
                out.append(("ipv6", None, None, c["packets"]))
        return out

    def reset_logs(self):
        """Forget what was logged so far (between probe batches)."""
        for path in (self.dns_log, self.access_log, self.host_service_log):
            with contextlib.suppress(FileNotFoundError):
                os.truncate(path, 0)
        _sh("ip", "netns", "exec", self.inet, "nft", "flush", "set", "inet", "flows", "tcpudp")
        _sh("ip", "netns", "exec", self.inet, "nft", "flush", "set", "inet", "flows", "pings")
        _sh("ip", "netns", "exec", self.inet, "nft", "reset", "counter", "inet", "flows", "v6")

    def leaks(self, allowed=((WEB_IP, 443), (WEB_IP, 80), (DNS_IP, 53))):
        """Flows into inet that are not to an allowed (address, port): what a test asserts
        empty after denied probes."""
        return [f for f in self.flows() if (f[2], f[3]) not in allowed]

    def logs(self):
        out = []
        for name in ("dnsmasq.out", "nginx.out", "nginx-error.log"):
            with contextlib.suppress(OSError):
                with open(os.path.join(self.tmp, "log", name), errors="replace") as f:
                    out.append(f"--- {name}\n{f.read()[-2000:]}")
        return "\n".join(out)

    # ---- teardown --------------------------------------------------------------------

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        self.procs = []
        for ns in self._made:
            # Anything else a test started in there (space-gw, probes) goes too.
            for pid in _sh("ip", "netns", "pids", ns, check=False).stdout.split():
                with contextlib.suppress(OSError):
                    os.kill(int(pid), signal.SIGKILL)
            _sh("ip", "netns", "delete", ns, check=False)
            shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)
        self._made = []
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()


try:
    import pytest

    @pytest.fixture(scope="module")
    def internet():
        """A started Internet for the test module; always torn down."""
        net = Internet()
        net.start()
        try:
            yield net
        finally:
            net.close()
        assert net.uplink not in _netns_list() and net.inet not in _netns_list()
except ImportError:  # used outside pytest (bench/)
    pass
