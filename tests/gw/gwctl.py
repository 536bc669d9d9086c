"""space-node's side of the space-gw control socket (src/shared/gw-proto.h), as a test
driver: SOCK_SEQPACKET, one JSON object per datagram, descriptors by SCM_RIGHTS. A reader
thread files replies (in order) and audit records apart."""
import json
import queue
import socket
import threading
import time


class GwControl:
    def __init__(self, path, timeout=10):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.connect(path)
        self.timeout = timeout
        self.replies = queue.Queue()
        self.records = []
        self.batches = 0
        self.lock = threading.Lock()
        self.closed = threading.Event()
        threading.Thread(target=self._reader, daemon=True).start()

    def _reader(self):
        while True:
            try:
                data = self.sock.recv(65536 + 1)
            except OSError:
                break
            if not data:
                break
            msg = json.loads(data)
            if msg.get("type") == "audit":
                assert len(data) <= 65536 and len(msg["records"]) <= 256
                with self.lock:
                    self.records.extend(msg["records"])
                    self.batches += 1
            else:
                self.replies.put(msg)
        self.closed.set()

    def request(self, msg, fds=(), raw=None):
        data = raw if raw is not None else json.dumps(msg).encode()
        if fds:
            socket.send_fds(self.sock, [data], list(fds))
        else:
            self.sock.send(data)
        return self.replies.get(timeout=self.timeout)

    def hello(self, node="test-node"):
        return self.request({"type": "hello", "node": node})

    def attach(self, instance, sandbox, policy, dns_sock, tcp_sock):
        return self.request({"type": "attach", "instance": instance, "sandbox": sandbox,
                             "policy": policy}, fds=(dns_sock.fileno(), tcp_sock.fileno()))

    def policy(self, instance, policy):
        return self.request({"type": "policy", "instance": instance, "policy": policy})

    def detach(self, instance):
        return self.request({"type": "detach", "instance": instance})

    def wait_record(self, pred, timeout=5):
        """The first audit record pred() accepts, waiting for it to arrive."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for r in self.records:
                    if pred(r):
                        return r
            time.sleep(0.05)
        with self.lock:
            raise AssertionError(f"no such audit record in {self.records[-20:]}")

    def close(self):
        self.sock.close()
