"""A stand-in for space-gw's side of the control socket (src/shared/gw-proto.h), for tests
of the node (and of the api through a node) that must see every message and descriptor the
node sends, or must play a gateway that misbehaves, restarts or changes its CA.

It listens where space-gw would (AF_UNIX SOCK_SEQPACKET, mode 0600), reads one JSON object
per datagram with its SCM_RIGHTS descriptors, and answers as space-gw does: hello with
{"ok": true, "caCert": <ca>}, every other request with {"type", "instance", "ok": true}, in
order. Like space-gw it lets go of the descriptors of a session when the next hello comes.
It is not a gateway: it serves nothing on the descriptors (a test that wants the guest's
traffic accepts on them itself). The real space-gw: tests/gw, tests/egress. The node's side
of the same protocol, driving a real space-gw: tests/gw/gwctl.py.
"""
import contextlib
import json
import os
import queue
import socket
import subprocess
import threading
import time

MSG_MAX = 65536  # GW_PROTO_MSG_MAX
_cas = {}


def make_ca(cn="space gw stub CA"):
    """A real self-signed CA certificate (PEM): the guest's agent installs what hello carries
    and checks it is one. One per common name per test process (openssl is slow under load)."""
    if cn not in _cas:
        _cas[cn] = subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-nodes", "-keyout", "/dev/null", "-subj", f"/CN={cn}", "-days", "1",
             "-addext", "basicConstraints=critical,CA:TRUE"],
            check=True, capture_output=True, text=True, timeout=120).stdout
    return _cas[cn]


class GwStub:
    def __init__(self, path, ca=None):
        self.path = path
        self.ca = ca if ca is not None else make_ca()  # what the next hello reply carries
        self.messages = queue.Queue()  # (message dict, [fds]) in arrival order
        self.hellos = 0  # sessions begun (hello messages read), for wait_hello()
        self.conn = None  # the current session, None between sessions
        self.held = []  # descriptors of the current session, closed on the next hello
        self.lock = threading.Lock()
        self.listener = None
        self.thread = None

    def start(self):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(self.path)
        os.chmod(self.path, 0o600)
        self.listener.listen(4)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _reply(self, msg):
        if msg.get("type") == "hello":
            with self.lock:
                for fd in self.held:  # as space-gw does: the old session's are let go
                    os.close(fd)
                self.held = []
            return {"type": "hello", "ok": True, "caCert": self.ca}
        reply = {"type": msg.get("type"), "ok": True}
        if "instance" in msg:
            reply["instance"] = msg["instance"]
        return reply

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # stop(): the listener was shut down
            self.conn = conn
            while True:
                try:
                    data, fds, _, _ = socket.recv_fds(conn, MSG_MAX + 1, 8)
                except OSError:
                    break
                if not data:
                    break
                msg = json.loads(data)
                reply = self._reply(msg)
                with self.lock:
                    self.held += fds
                if msg.get("type") == "hello":
                    self.hellos += 1
                self.messages.put((msg, fds))
                try:
                    conn.send(json.dumps(reply).encode())
                except OSError:
                    break
            self.conn = None
            conn.close()

    def expect(self, type_, timeout=60, instance=None):
        """The next message of that type (and instance) from the node, as (message, fds);
        the messages before it are passed over."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                msg, fds = self.messages.get(timeout=left)
            except queue.Empty:
                break
            if msg["type"] == type_ and (instance is None or msg.get("instance") == instance):
                return msg, fds
        raise AssertionError(f"no {type_} message from the node in {timeout} s")

    def wait_hello(self, n=1, timeout=60):
        """Until the node has begun its n-th session with this stub."""
        deadline = time.monotonic() + timeout
        while self.hellos < n:
            assert time.monotonic() < deadline, f"the node never said hello #{n}"
            time.sleep(0.05)

    def send(self, msg):
        """An unsolicited message to the node (an audit batch, or one it must refuse)."""
        self.send_raw(json.dumps(msg).encode())

    def send_raw(self, data, fds=()):
        if fds:
            socket.send_fds(self.conn, [data], list(fds))
        else:
            self.conn.send(data)

    def audit(self, records):
        self.send({"type": "audit", "records": records})

    def end_session(self):
        """Ends the current session, the listener staying up: the node connects again at once
        (the next hello carries the then current self.ca)."""
        conn = self.conn
        if conn:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def stop(self):
        """As space-gw exiting: the listener and the session go, the path is removed."""
        if self.listener is None:
            return
        # shutdown() wakes the accept() of the serving thread (close() alone would not).
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + 30
        while self.thread.is_alive() and time.monotonic() < deadline:
            self.end_session()  # again: a session may have been accepted meanwhile
            self.thread.join(timeout=0.1)
        self.listener.close()
        self.listener = None
        with self.lock:
            for fd in self.held:
                os.close(fd)
            self.held = []
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
