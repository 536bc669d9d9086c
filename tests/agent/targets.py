"""Where the agent under test runs: on the host in test mode, or inside a real guest.

Every agent test runs against both (conftest.py parametrizes them). The two kinds of
target offer the same small interface, so a test reads the same either way:

  agent.url        base URL of the agent (host: loopback; guest: the ingress or a tunnel)
  agent.http       a requests.Session that reaches the agent as an ordinary client would:
                   through the ingress it carries the routing headers and the access token
  agent.bare       the same without the access token (for tests of the token itself)
  agent.token      the access token the agent holds (None on the host until a test sets one)
  agent.envd()     an envd_client.Envd for the agent
  agent.default_user, agent.home, agent.e2b_dir
  agent.alive()    the agent still runs the server it started with (no crash, no restart)

  fs               file operations on the agent's machine (HostFS: os calls; GuestFS: one
                   root process in the guest per call), on pure paths (PurePosixPath), so a
                   test can never touch the host by mistake when it meant the guest.

A guest comes from GuestLab: a real space-node + space-api (tests/lib/platform.py) with
sandboxes made through the E2B API. The shared sandbox is reached through the api's
ingress (E2b-Sandbox-Id/-Port headers, one tunnel per HTTP request). Tests that need the
agent's /init (which the ingress refuses: the platform owns it) get a fresh sandbox
reached through the node's tunnel socket directly (TunnelForwarder), as the api does.
"""
import base64
import os
import pwd
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import PurePosixPath

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, HERE)

from envd_client import Envd  # noqa: E402

ENVD_PORT = 49983


class Unavailable(Exception):
    """The target cannot run here (a missing binary, not root); tests skip with this reason."""


def agent_binary():
    build = os.environ.get("SPACE_BUILD_DIR", "build")
    if not os.path.isabs(build):
        build = os.path.join(ROOT, build)
    path = os.path.join(build, "src", "agent", "space-agent")
    if not os.path.exists(path):
        raise Unavailable(f"{path} not built")
    return path


# ---- the host ----

class AgentProcess:
    """space-agent in host test mode on a free loopback port."""

    kind = "host"
    token = None
    route = {}

    def __init__(self, extra_args=(), e2b_dir=None):
        args = list(extra_args)
        if e2b_dir:
            args += ["--e2b-dir", e2b_dir]
        self.e2b_dir = e2b_dir
        self.proc = subprocess.Popen(
            [agent_binary(), "--listen", "127.0.0.1:0", "--log-level", "debug", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.match(r"listening on 127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"agent did not start: {line!r} {self.proc.stderr.read()}")
        self.port = int(m.group(1))
        self.url = f"http://127.0.0.1:{self.port}"
        self.http = requests.Session()
        self.bare = self.http
        pw = pwd.getpwuid(os.geteuid())
        # Run as root, the agent's default user is root; otherwise it is ourselves.
        self.default_user = pw.pw_name
        self.home = pw.pw_dir
        self.fs = HostFS()

    def envd(self, token=None):
        return Envd(self.url, token=token)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.http.close()
        return self.proc.stderr.read()

    def alive(self):
        return self.proc.poll() is None

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def fd_count(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))


class HostFS:
    """File operations on this machine, for tests of the agent on the host."""

    def write(self, path, data):
        with open(path, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)

    def read(self, path):
        with open(path, "rb") as f:
            return f.read()

    def exists(self, path):
        return os.path.exists(path)

    def is_dir(self, path):
        return os.path.isdir(path)

    def mkdir(self, path):
        os.mkdir(path)

    def makedirs(self, path):
        os.makedirs(path, exist_ok=True)

    def symlink(self, target, path):
        os.symlink(target, path)

    def chmod(self, path, mode):
        os.chmod(path, mode)

    def unlink(self, path):
        os.unlink(path)

    def rename(self, src, dst):
        os.rename(src, dst)

    def rmdir(self, path):
        os.rmdir(path)

    def rmtree(self, path):
        shutil.rmtree(path, ignore_errors=True)

    def uid(self, path):
        return os.stat(path).st_uid

    def user_uid(self, name):
        return pwd.getpwnam(name).pw_uid

    def getxattr(self, path, name):
        return os.getxattr(path, name)

    def setxattr(self, path, name, value):
        os.setxattr(path, name, value)

    def listxattr(self, path):
        return sorted(os.listxattr(path))

    def mkdtemp(self):
        return PurePosixPath(tempfile.mkdtemp(prefix="space-agent-test-"))

    def now(self):
        return time.time()


# ---- a guest ----

class GuestFS:
    """File operations inside a guest, each one a root process started through the agent.

    The agent under test runs them, but only its process service: what a filesystem test
    checks (Stat, ListDir, /files, watchers) is still checked against files made by
    coreutils. Writing with `base64 -d > path` makes the same inotify events as a host
    write: a create, then one write.
    """

    ARG_MAX_DATA = 48 * 1024  # inline in the command line; larger writes go through /files

    def __init__(self, agent):
        self.agent = agent
        self.envd = agent.envd()

    def sh(self, script, check=True):
        # cwd: a test may have pointed the default workdir somewhere gone
        res = self.envd.run("/bin/sh", ["-c", script], user="root", cwd="/")
        ok = res.end is not None and res.end.get("exited") and not res.end.get("exitCode")
        if check and not ok:
            raise AssertionError(f"in the guest: {script!r} failed: {res.end} {res.stderr!r}")
        return res.stdout

    def test(self, expr):
        return self.sh(f"if {expr}; then echo y; fi") == b"y\n"

    def write(self, path, data):
        data = data.encode() if isinstance(data, str) else bytes(data)
        if len(data) <= self.ARG_MAX_DATA:
            self.sh(f"printf %s {base64.b64encode(data).decode()} | base64 -d > {q(path)}")
            return
        r = self.agent.http.post(self.agent.url + "/files", params={"path": str(path),
                                                                    "username": "root"},
                                 data=data, headers={"Content-Type": "application/octet-stream"},
                                 timeout=120)
        assert r.status_code == 200, r.text

    def read(self, path):
        return base64.b64decode(self.sh(f"base64 -w0 {q(path)}"))

    def exists(self, path):
        return self.test(f"[ -e {q(path)} ]")

    def is_dir(self, path):
        return self.test(f"[ -d {q(path)} ]")

    def mkdir(self, path):
        self.sh(f"mkdir {q(path)}")

    def makedirs(self, path):
        self.sh(f"mkdir -p {q(path)}")

    def symlink(self, target, path):
        self.sh(f"ln -s {q(target)} {q(path)}")

    def chmod(self, path, mode):
        self.sh(f"chmod {mode:o} {q(path)}")

    def unlink(self, path):
        self.sh(f"rm {q(path)}")

    def rename(self, src, dst):
        self.sh(f"mv -T {q(src)} {q(dst)}")

    def rmdir(self, path):
        self.sh(f"rmdir {q(path)}")

    def rmtree(self, path):
        self.sh(f"rm -rf {q(path)}")

    def uid(self, path):
        return int(self.sh(f"stat -c %u {q(path)}"))

    def user_uid(self, name):
        return int(self.sh(f"id -u {q(name)}"))

    def getxattr(self, path, name):
        # no attr package in the base template; its python3 has os.getxattr
        return self.sh("python3 -c 'import os, sys; "
                       "sys.stdout.buffer.write(os.getxattr(sys.argv[1], sys.argv[2]))' "
                       f"{q(path)} {q(name)}")

    def setxattr(self, path, name, value):
        self.sh("python3 -c 'import os, sys, base64; "
                "os.setxattr(sys.argv[1], sys.argv[2], base64.b64decode(sys.argv[3]))' "
                f"{q(path)} {q(name)} {base64.b64encode(value).decode()}")

    def listxattr(self, path):
        out = self.sh(f"python3 -c 'import os, sys; print(*sorted(os.listxattr(sys.argv[1])))' "
                      f"{q(path)}")
        return out.decode().split()

    def mkdtemp(self):
        # /var/tmp, not /tmp: the guest's /tmp is a tmpfs, and a 6.1 tmpfs has no user.* xattrs
        return PurePosixPath(self.sh("mktemp -d /var/tmp/space-agent-test-XXXXXX").decode().strip())

    def now(self):
        return float(self.sh("date +%s.%N"))


def q(path):
    return shlex.quote(str(path))


class GuestAgent:
    """The agent inside one sandbox of a GuestLab.

    route: the headers that reach the agent at url (the ingress's E2B headers, or none
    through a TunnelForwarder).
    """

    kind = "guest"
    default_user = "user"  # space-api's /init sets it, as E2B's control plane does
    home = "/home/user"
    e2b_dir = "/run/e2b"

    def __init__(self, lab, sid, token, url, route, forwarder=None):
        self.lab = lab
        self.sid = sid
        self.token = token
        self.url = url
        self.route = dict(route)
        self.forwarder = forwarder
        self.bare = requests.Session()
        self.bare.headers.update(self.route)
        self.http = requests.Session()
        self.http.headers.update(self.route)
        if token:
            self.http.headers["X-Access-Token"] = token
        self.fs = GuestFS(self)
        self.server = self.server_pid()

    def envd(self, token=None):
        return Envd(self.url, token=token or self.token, headers=self.route)

    def server_pid(self):
        """The pid of the agent's server process (PID 1 restarts it if it dies)."""
        return int(self.fs.sh("echo $PPID"))

    def alive(self):
        r = self.http.get(self.url + "/health", timeout=30)
        return r.status_code == 204 and self.server_pid() == self.server

    def rss_kib(self):
        return int(self.fs.sh(f"awk '/^VmRSS:/ {{ print $2 }}' /proc/{self.server}/status"))

    def fd_count(self):
        """Open fds of the server; the process that counts them holds the same few each time."""
        return int(self.fs.sh(f"ls /proc/{self.server}/fd | wc -l"))

    def ready_line(self):
        """The line the agent prints for the serial console once it serves."""
        lines = [ln.strip() for ln in self.console().splitlines()]
        return "space-agent: ready" if "space-agent: ready" in lines else lines[-1:]

    def wait_restarted(self, timeout=30):
        """After its server was killed: waits for PID 1's new one; returns the url."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                # the new server restores the /init state PID 1 kept: the token still applies
                res = Envd(self.url, token=self.token, headers=self.route).run(
                    "/bin/sh", ["-c", "echo $PPID"], user="root")
                if res.stdout.strip() and int(res.stdout) != self.server:
                    self.server = int(res.stdout)
                    return self.url
            except (requests.RequestException, AssertionError, ValueError, EOFError):
                pass
            time.sleep(0.1)
        raise AssertionError(f"no new server in the guest; console:\n{self.console()}")

    def console(self):
        import glob  # the node keeps it in its instance dir, bound to the sandbox id
        paths = [p for p in glob.glob(os.path.join(self.lab.plat.data, "instances", "*",
                                                   "instance.json"))
                 if f'"sandbox_id":"{self.sid}"' in open(p).read()]
        path = os.path.join(os.path.dirname(paths[0]) if paths else "/nonexistent",
                            "console.log")
        try:
            with open(path, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def close(self):
        self.bare.close()
        self.http.close()
        self.fs.envd.session.close()
        if self.forwarder:
            self.forwarder.close()


class TunnelForwarder:
    """127.0.0.1:<port> -> the node's tunnel socket -> <sandbox>:<port>, one tunnel a connection.

    The same path the ingress takes, without the ingress: no routing headers, no token
    check, no refusal of /init. Threads, one pair per connection: test traffic only.
    """

    def __init__(self, tunnel_socket, sid, port=ENVD_PORT):
        self.tunnel_socket = tunnel_socket
        self.sid = sid
        self.port = port
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.conns = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        up = socket.socket(socket.AF_UNIX)
        with self.lock:
            self.conns += [client, up]
        try:
            up.connect(self.tunnel_socket)
            up.sendall(f"TUNNEL {self.sid} {self.port}\n".encode())
            buf = b""
            while b"\n" not in buf:
                chunk = up.recv(4096)
                if not chunk:
                    raise OSError("tunnel closed before its answer")
                buf += chunk
            line, rest = buf.split(b"\n", 1)
            if line != b"OK":
                raise OSError(f"tunnel refused: {line!r}")
            if rest:
                client.sendall(rest)
        except OSError:
            client.close()
            up.close()
            return
        t = threading.Thread(target=_pump, args=(up, client), daemon=True)
        t.start()
        _pump(client, up)
        t.join()
        client.close()
        up.close()

    def close(self):
        self.listener.close()
        with self.lock:
            for s in self.conns:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def _pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


class GuestLab:
    """A real space-node + space-api and the sandboxes (real guests) the agent tests use."""

    def __init__(self, name="agent"):
        if os.geteuid() != 0:
            raise Unavailable("a real guest needs root (namespaces, taps, QEMU)")
        from lib.platform import API, NODE, Platform
        for path in (NODE, API):
            if not os.path.exists(path):
                raise Unavailable(f"{path} not built")
        self.plat = Platform(name)
        self.agents = []
        self._shared = None
        try:
            self.plat.start()
        except BaseException:
            self.plat.destroy()
            raise

    def create(self):
        r = requests.post(self.plat.url + "/v2/sandboxes",
                          json={"templateID": "base", "timeout": 3600},
                          headers={"X-API-Key": self.plat.key}, timeout=300)
        assert r.status_code == 201, (r.status_code, r.text, self.plat.api_log())
        sb = r.json()
        return sb["sandboxID"], sb["envdAccessToken"]

    def kill(self, sid):
        requests.delete(self.plat.url + f"/sandboxes/{sid}", headers={"X-API-Key": self.plat.key},
                        timeout=120)

    def shared(self):
        """The session's sandbox, through the ingress exactly as an SDK reaches it."""
        if self._shared is None:
            sid, token = self.create()
            self._shared = GuestAgent(self, sid, token, self.plat.ingress_url,
                                      {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": str(ENVD_PORT)})
            self.agents.append(self._shared)
        return self._shared

    def fresh(self):
        """A new sandbox of its own, reached through the node's tunnel (its /init is open)."""
        sid, token = self.create()
        fwd = TunnelForwarder(self.plat.tunnel_socket, sid)
        a = GuestAgent(self, sid, token, fwd.url, {}, forwarder=fwd)
        self.agents.append(a)
        return a

    def discard(self, agent):
        agent.close()
        self.kill(agent.sid)
        self.agents.remove(agent)

    def destroy(self):
        for a in self.agents:
            a.close()
        self.agents = []
        self._shared = None
        self.plat.destroy()
