"""The ingress behind TLS (ingress_new_tls(), issue 8 point 8): ingress-harness --tls-dir serves
a *.space.test leaf from the deployment CA; clients trust only that CA. The same guest servers
as test_ingress.py (its fixtures, its own node and sandbox for this module): keep-alive, a large
body, a chunked stream, a 101 upgrade copied through the bufferevents (no splice over TLS), and
the handshake's refusals (SNI outside the domain, no SNI, TLS 1.1)."""
import http.client
import os
import shutil
import socket
import ssl
import tempfile

import pytest

from test_ingress import (DOMAIN, Harness, host, node, recv_until, sandbox,  # noqa: F401
                          ingress)


@pytest.fixture(scope="module")
def tls_ingress(node):  # noqa: F811
    d = tempfile.mkdtemp(prefix="ingress-tls-")
    h = Harness(node, node.tunnel, "--tls-dir", d)
    h.ca = os.path.join(d, "ca.crt")
    yield h
    h.stop()
    shutil.rmtree(d, ignore_errors=True)


def context(h, **kw):
    ctx = ssl.create_default_context(cafile=h.ca)
    for k, v in kw.items():
        setattr(ctx, k, v)
    return ctx


def tls_socket(h, server_hostname, ctx=None):
    s = socket.create_connection(("127.0.0.1", h.port), timeout=30)
    return (ctx or context(h)).wrap_socket(s, server_hostname=server_hostname)


class Conn(http.client.HTTPSConnection):
    """HTTPS to the harness' port, with the SNI and Host of a sandbox name."""

    def __init__(self, h, name):
        super().__init__(name, h.port, timeout=60, context=context(h))
        self.h = h

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.h.port), timeout=self.timeout)
        self.sock = self._context.wrap_socket(s, server_hostname=self.host)


def test_keepalive_and_bodies_over_tls(tls_ingress, sandbox):  # noqa: F811
    sid = sandbox["id"]
    c = Conn(tls_ingress, host(8001, sid))
    try:
        for i in range(3):
            c.request("POST", "/echo", body=b"x" * (1000 * (i + 1)))
            r = c.getresponse()
            assert r.status == 200 and r.read() == b"x" * (1000 * (i + 1))
            assert r.getheader("Connection") == "keep-alive"
        n = 8 << 20
        c.request("GET", f"/big/{n}")
        r = c.getresponse()
        data = r.read()
        assert r.status == 200 and len(data) == n
        assert data == bytes(range(256)) * 256 * (n // 65536)
        # A port-8000 request on the same connection: routed on its own.
        c2 = Conn(tls_ingress, host(8000, sid))
        c2.request("GET", "/")
        assert c2.getresponse().status == 200
        c2.close()
    finally:
        c.close()


def test_unknown_sandbox_answers_over_tls(tls_ingress):
    c = Conn(tls_ingress, host(8000, "aaaaaaaaaaaaaaaaaaaa"))
    try:
        c.request("GET", "/")
        r = c.getresponse()
        assert r.status == 502 and b"The sandbox was not found" in r.read()
    finally:
        c.close()


def test_upgrade_over_tls_is_copied(tls_ingress, sandbox):  # noqa: F811
    name = host(8001, sandbox["id"])
    s = tls_socket(tls_ingress, name)
    try:
        s.sendall(f"GET /ws HTTP/1.1\r\nHost: {name}\r\n"
                  "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n".encode())
        head = recv_until(s, b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101 "), head
        for msg in (b"ping", b"x" * 300000):
            s.sendall(msg)
            got = b""
            while len(got) < len(msg):
                d = s.recv(65536)
                assert d
                got += d
            assert got == msg
    finally:
        s.close()


def test_handshake_refusals(tls_ingress):
    with pytest.raises(ssl.SSLError, match="UNRECOGNIZED_NAME|unrecognized name"):
        tls_socket(tls_ingress, "8000-x.other.test", context(tls_ingress, check_hostname=False))
    # No SNI at all (an IP literal sends none).
    with pytest.raises(ssl.SSLError, match="UNRECOGNIZED_NAME|unrecognized name"):
        tls_socket(tls_ingress, None, context(tls_ingress, check_hostname=False))
    old = context(tls_ingress, check_hostname=False)
    old.minimum_version = ssl.TLSVersion.TLSv1
    old.maximum_version = ssl.TLSVersion.TLSv1_1
    old.set_ciphers("DEFAULT:@SECLEVEL=0")
    with pytest.raises(ssl.SSLError):
        tls_socket(tls_ingress, f"8000-x.{DOMAIN}", old)
    # The domain itself and names under it are fine.
    for name in (DOMAIN, f"8000-aaaaaaaaaaaaaaaaaaaa.{DOMAIN}"):
        s = tls_socket(tls_ingress, name)
        assert s.version() in ("TLSv1.2", "TLSv1.3")
        s.close()
