"""A small envd (Connect protocol) client for the space-agent tests.

Speaks exactly what the E2B SDKs send (e2b-compat.md §6.1): unary calls as
application/json, server streams as application/connect+json with one
request envelope, responses read envelope by envelope until the
end-of-stream frame.
"""
import base64
import json
import struct

import requests

FLAG_END_STREAM = 0x02


def envelope(msg, flags=0):
    body = json.dumps(msg).encode() if not isinstance(msg, (bytes, bytearray)) else bytes(msg)
    return bytes([flags]) + struct.pack(">I", len(body)) + body


def basic_auth(user):
    return "Basic " + base64.b64encode(f"{user}:".encode()).decode()


def b64(data):
    return base64.b64encode(data).decode()


def unb64(s):
    return base64.b64decode(s)


class StreamError(Exception):
    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class Stream:
    """Iterates the messages of a server stream; .end holds the end-stream frame."""

    def __init__(self, resp):
        self.resp = resp
        self.end = None
        self._buf = b""
        self._it = resp.iter_content(chunk_size=None)

    def _read(self, n):
        while len(self._buf) < n:
            try:
                chunk = next(self._it)
            except StopIteration:
                raise EOFError("stream ended without an end-of-stream frame")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def next_frame(self):
        hdr = self._read(5)
        flags = hdr[0]
        (n,) = struct.unpack(">I", hdr[1:])
        payload = self._read(n)
        return flags, json.loads(payload)

    def __iter__(self):
        return self

    def __next__(self):
        if self.end is not None:
            raise StopIteration
        flags, msg = self.next_frame()
        if flags & FLAG_END_STREAM:
            self.end = msg
            raise StopIteration
        return msg

    def close(self):
        self.resp.close()

    def error(self):
        """The end-stream error as (code, message), or None."""
        if self.end and "error" in self.end:
            return self.end["error"]["code"], self.end["error"].get("message", "")
        return None


class ProcessResult:
    def __init__(self):
        self.pid = None
        self.stdout = b""
        self.stderr = b""
        self.pty = b""
        self.end = None
        self.events = []
        self.stream_end = None


class Envd:
    """headers: sent with every request (the ingress's E2b-Sandbox-Id/-Port for a guest)."""

    def __init__(self, base_url, token=None, headers=None):
        self.base = base_url.rstrip("/")
        self.token = token
        self.session = requests.Session()
        self.session.headers.update(headers or {})

    def headers(self, user=None, extra=None):
        h = {"Connect-Protocol-Version": "1"}
        if user is not None:
            h["Authorization"] = basic_auth(user)
        if self.token:
            h["X-Access-Token"] = self.token
        if extra:
            h.update(extra)
        return h

    def unary(self, method, msg, user=None, headers=None):
        h = self.headers(user, headers)
        h["Content-Type"] = "application/json"
        r = self.session.post(f"{self.base}/{method}", data=json.dumps(msg), headers=h, timeout=30)
        try:
            body = r.json()
        except ValueError:
            body = r.text
        return r.status_code, body

    def stream(self, method, msg, user=None, headers=None, timeout=60):
        h = self.headers(user, headers)
        h["Content-Type"] = "application/connect+json"
        r = self.session.post(f"{self.base}/{method}", data=envelope(msg), headers=h, stream=True,
                              timeout=timeout)
        assert r.status_code == 200, (r.status_code, r.text)
        assert r.headers["Content-Type"].startswith("application/connect+json")
        return Stream(r)

    def start(self, cmd, args=(), envs=None, cwd=None, stdin=False, pty=None, tag=None,
              user=None, timeout_ms=None, keepalive=None):
        proc = {"cmd": cmd, "args": list(args)}
        if envs is not None:
            proc["envs"] = envs
        if cwd is not None:
            proc["cwd"] = cwd
        msg = {"process": proc}
        if stdin is not None:
            msg["stdin"] = stdin
        if pty is not None:
            msg["pty"] = {"size": {"cols": pty[0], "rows": pty[1]}}
        if tag is not None:
            msg["tag"] = tag
        extra = {}
        if timeout_ms is not None:
            extra["Connect-Timeout-Ms"] = str(timeout_ms)
        if keepalive is not None:
            extra["Keepalive-Ping-Interval"] = str(keepalive)
        return self.stream("process.Process/Start", msg, user=user, headers=extra)

    def run(self, cmd, args=(), **kw):
        """Start and collect everything until the stream ends."""
        s = self.start(cmd, args, **kw)
        return collect(s)

    def sh(self, script, **kw):
        return self.run("/bin/bash", ["-l", "-c", script], **kw)


def collect(stream):
    res = ProcessResult()
    for msg in stream:
        ev = msg["event"]
        res.events.append(ev)
        if "start" in ev:
            res.pid = ev["start"]["pid"]
        elif "data" in ev:
            d = ev["data"]
            if "stdout" in d:
                res.stdout += unb64(d["stdout"])
            if "stderr" in d:
                res.stderr += unb64(d["stderr"])
            if "pty" in d:
                res.pty += unb64(d["pty"])
        elif "end" in ev:
            res.end = ev["end"]
    res.stream_end = stream.end
    stream.close()
    return res
