"""Start and stop a real space-node for tests, and talk to its API.

Each Node gets its own data directory (under the reflink-capable data
filesystem), its own Unix socket and pidfile, so tests never touch a
platform a developer has running. Teardown checks that nothing the node made
is left: no network namespace, no live QEMU process, no sandbox directory.
"""
import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("SPACE_BUILD_DIR", os.path.join(ROOT, "build")))
# The guest agent always comes from the release build: the guest has no sanitizer runtime.
AGENT_BUILD = os.path.abspath(os.environ.get("SPACE_AGENT_BUILD_DIR", BUILD))
SPACE = os.path.join(BUILD, "src/cli/space")
NODE = os.path.join(BUILD, "src/node/space-node")
API = os.path.join(BUILD, "src/api/space-api")
GW = os.path.join(BUILD, "src/gw/space-gw")
AGENT = os.path.join(AGENT_BUILD, "src/agent/space-agent")
DATA_ROOT = os.environ.get("SPACE_TEST_DATA_ROOT", "/var/lib/space")


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=300):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


def live_qemu_pids(marker):
    """Pids of non-zombie processes whose command line contains marker."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and "qemu-system" in cmd and state not in ("Z", "X"):
            pids.append(int(pid))
    return pids


def netns_names():
    try:
        return set(os.listdir("/run/netns"))
    except FileNotFoundError:
        return set()


class Node:
    def __init__(self, name="node", extra_args=(), template=True):
        os.makedirs(DATA_ROOT, exist_ok=True)
        self.data = tempfile.mkdtemp(prefix=f"test-{name}-", dir=DATA_ROOT)
        self.socket = f"/run/space/{os.path.basename(self.data)}.sock"
        self.log_path = os.path.join(self.data, "node.log")
        self.extra_args = no_snapshots_unless_asked(no_gw_unless_asked(extra_args))
        self.proc = None
        self.env = dict(os.environ, SPACE_DATA_DIR=self.data, SPACE_SOCKET=self.socket,
                        SPACE_PIDFILE=os.path.join(self.data, "node.pid"), SPACE_AGENT=AGENT,
                        SPACE_NODE=NODE)
        if template:
            self.cli("template", "build", "base", check=True, capture=False)

    def cli(self, *args, check=False, capture=True, input=None, timeout=600):
        res = subprocess.run([SPACE, *args], env=self.env, input=input, timeout=timeout,
                             stdout=subprocess.PIPE if capture else None,
                             stderr=subprocess.PIPE if capture else None)
        if check and res.returncode != 0:
            raise AssertionError(f"space {' '.join(args)} failed ({res.returncode}): "
                                 f"{res.stderr!r}")
        return res

    def start(self, timeout=120):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([NODE, "--data-dir", self.data, "--socket", self.socket,
                                      *self.extra_args], stdout=log, stderr=log,
                                     start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"space-node exited: {self.log()}")
            try:
                status, _ = self.call("GET", "/health", timeout=2)
                if status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"space-node did not start: {self.log()}")

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def call(self, method, path, body=None, timeout=300, raw=None):
        conn = UnixHTTPConnection(self.socket, timeout=timeout)
        try:
            data = raw if raw is not None else (json.dumps(body) if body is not None else None)
            headers = {"Content-Type": "application/json"} if data is not None else {}
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            text = resp.read()
            payload = json.loads(text) if text else None
            return resp.status, payload
        finally:
            conn.close()

    def create(self, **kw):
        status, body = self.call("POST", "/v1/sandboxes", dict(kw))
        assert status == 201, (status, body)
        return body

    def exec(self, sid, cmd, *args, **kw):
        import base64
        status, body = self.call("POST", f"/v1/sandboxes/{sid}/exec",
                                 dict(cmd=cmd, args=list(args), **kw))
        assert status == 200, (status, body)
        body["stdout"] = base64.b64decode(body["stdout_b64"])
        body["stderr"] = base64.b64decode(body["stderr_b64"])
        return body

    def sh(self, sid, script, user="root", timeout_ms=60000):
        """Runs a shell script in the guest, asserts it exited 0, returns its stdout as text."""
        res = self.exec(sid, "/bin/sh", "-c", script, user=user, timeout_ms=timeout_ms)
        assert res["exit_code"] == 0, res
        return res["stdout"].decode()

    def kill(self, sid):
        status, body = self.call("DELETE", f"/v1/sandboxes/{sid}")
        assert status == 204, (status, body)

    def crash(self):
        """kill -9, as a host crash of the daemon would."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.proc = None

    def stop(self):
        """SIGTERM: the node exits within seconds and leaves its sandboxes running."""
        if self.proc:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def instance_dir(self, sb):
        """The node-local directory of a sandbox (its instance's), from the node's JSON."""
        return os.path.join(self.data, "instances", sb["instance_id"])

    def instances(self):
        path = os.path.join(self.data, "instances")
        return sorted(os.listdir(path)) if os.path.isdir(path) else []

    def leftovers(self):
        """Everything this node made that still exists."""
        left = []
        if self.instances():
            left.append(f"instance dirs: {self.instances()}")
        pids = live_qemu_pids(self.data)
        if pids:
            left.append(f"qemu processes: {pids}")
        return left

    def destroy(self):
        self.stop()  # a graceful stop leaves sandboxes running: remove them here
        # Whatever a failed test left: kill it so the machine stays clean.
        for pid in live_qemu_pids(self.data):
            os.kill(pid, signal.SIGKILL)
        for iid in self.instances():
            if f"space-{iid}" in netns_names():
                subprocess.run(["ip", "netns", "delete", f"space-{iid}"], check=False)
        shutil.rmtree(self.data, ignore_errors=True)


@contextlib.contextmanager
def started_node(name, **kw):
    """A started Node (Node's arguments); on exit it stops and proves it left nothing behind."""
    n = Node(name, **kw)
    try:
        n.start()
        yield n
        n.stop()
        left = n.leftovers()
    finally:
        n.destroy()
    assert not left, left


def build_sized_template(node, name, vcpus, memory_mb):
    """Builds template `name` into node's data dir: the base recipe (its packages and setup.sh,
    so every step but publish is the base template's, cached) with a size file of its own
    (templates/<name>/size: the template's default size)."""
    share = tempfile.mkdtemp(prefix="test-share-", dir=DATA_ROOT)
    try:
        os.symlink(os.path.join(ROOT, "tools"), os.path.join(share, "tools"))
        recipe = os.path.join(share, "templates", name)
        os.makedirs(recipe)
        for f in ("packages", "setup.sh"):
            os.symlink(os.path.join(ROOT, "templates/base", f), os.path.join(recipe, f))
        with open(os.path.join(recipe, "size"), "w") as f:
            f.write(f"# test template\nvcpus={vcpus}\nmemory_mb={memory_mb}\n")
        res = subprocess.run([SPACE, "template", "build", name], timeout=1800,
                             env=dict(node.env, SPACE_SHARE_DIR=share), capture_output=True,
                             text=True)
        assert res.returncode == 0, res.stderr[-3000:]
    finally:
        shutil.rmtree(share)


# A guest process that counts in memory and publishes each value atomically to /dev/shm/count:
# a verb that loses or rewinds the process's memory shows up as a count that went backwards.
COUNTER = ("i=0; while :; do i=$((i+1)); echo $i > /dev/shm/count.tmp; "
           "mv /dev/shm/count.tmp /dev/shm/count; sleep 0.1; done")


@contextlib.contextmanager
def node_sandbox(node, **kw):
    """A sandbox made on the node (Node.create's fields), killed on exit unless already gone."""
    sb = node.create(**kw)
    try:
        yield sb
    finally:
        if node.proc and node.call("GET", f"/v1/sandboxes/{sb['id']}")[0] == 200:
            node.kill(sb["id"])


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def pg_store_key():
    """The --store-key every test space-api on PostgreSQL shares: made once, 0600."""
    os.makedirs(DATA_ROOT, exist_ok=True)
    path = os.path.join(DATA_ROOT, "test-pg-store.key")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path
    try:
        os.write(fd, os.urandom(32))
    finally:
        os.close(fd)
    return path


class Platform:
    """A real space-node plus a real space-api (own sockets, ports, data dir and store).

    store: None for the default SQLite file, or a PostgreSQL URL (a fresh schema is not
    needed: each Platform uses its own database name via the URL the caller passes).
    share_node: another Platform whose space-node (and tunnel) this one's space-api uses
    instead of starting its own: a second replica, for tests of several space-api on one
    store. It gets its own data dir, sockets, ports and bootstrap key; start() and destroy()
    leave the shared node alone.
    """

    def __init__(self, name="platform", store=None, api_args=(), node_args=(), share_node=None):
        self.shared = share_node is not None
        if self.shared:
            self.node = share_node.node
            os.makedirs(DATA_ROOT, exist_ok=True)
            self.data = tempfile.mkdtemp(prefix=f"test-{name}-", dir=DATA_ROOT)
            base = os.path.basename(self.data)
            self.tunnel_socket = share_node.tunnel_socket
        else:
            self.node = Node(name, extra_args=["--tunnel-socket", "PLACEHOLDER", "--share-dir",
                                               ROOT, "--agent", AGENT, *node_args])
            self.data = self.node.data
            base = os.path.basename(self.data)
            self.tunnel_socket = f"/run/space/{base}-tunnel.sock"
            self.node.extra_args[1] = self.tunnel_socket
        self.api_socket = f"/run/space/{base}-api.sock"
        self.port = free_port()
        self.ingress_port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ingress_url = f"http://127.0.0.1:{self.ingress_port}"
        self.key_file = os.path.join(self.data, "default-api-key")
        self.store = store
        self.api_args = list(api_args)
        if store and store.startswith(("postgresql://", "postgres://")):
            # Every Platform on the one test PostgreSQL (replicas, and the modules that reuse
            # its database) must seal tokens under one key (docs/security.md "Tokens at rest").
            self.api_args = ["--store-key", pg_store_key(), *self.api_args]
        self.api = None
        self.env = dict(self.node.env, SPACE_SOCKET=self.api_socket,
                        SPACE_NODE_SOCKET=self.node.socket, SPACE_API=API)

    @property
    def key(self):
        with open(self.key_file) as f:
            return f.read().strip()

    def start(self):
        if not self.shared:
            self.node.start()
        self.start_api()
        return self

    def start_api(self, timeout=60):
        args = [API, "--data-dir", self.data, "--socket", self.api_socket,
                "--node-socket", self.node.socket, "--tunnel-socket", self.tunnel_socket,
                "--listen", f"127.0.0.1:{self.port}",
                "--ingress", f"127.0.0.1:{self.ingress_port}",
                "--domain", "space.test", "--bootstrap-key", self.key_file, *self.api_args]
        if self.store:
            args += ["--store", self.store]
        log = open(os.path.join(self.data, "api.log"), "ab")
        self.api = subprocess.Popen(args, stdout=log, stderr=log, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.api.poll() is not None:
                raise AssertionError(f"space-api exited: {self.api_log()}")
            try:
                if self.admin("GET", "/health", timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"space-api did not start: {self.api_log()}")

    def api_log(self):
        try:
            with open(os.path.join(self.data, "api.log"), errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def api_log_full(self):
        with open(os.path.join(self.data, "api.log"), errors="replace") as f:
            return f.read()

    def admin(self, method, path, body=None, timeout=300):
        conn = UnixHTTPConnection(self.api_socket, timeout=timeout)
        try:
            data = json.dumps(body) if body is not None else None
            conn.request(method, path, body=data,
                         headers={"Content-Type": "application/json"} if data else {})
            resp = conn.getresponse()
            text = resp.read()
            return resp.status, (json.loads(text) if text else None)
        finally:
            conn.close()

    def exec(self, sid, cmd, *args, user="root", timeout_ms=300000, env=None):
        import base64
        body = dict(cmd=cmd, args=list(args), user=user, timeout_ms=timeout_ms)
        if env:
            body["env"] = env
        status, res = self.admin("POST", f"/v1/sandboxes/{sid}/exec", body,
                                 timeout=timeout_ms / 1000 + 60)
        assert status == 200, (status, res)
        res["stdout"] = base64.b64decode(res["stdout_b64"]).decode(errors="replace")
        res["stderr"] = base64.b64decode(res["stderr_b64"]).decode(errors="replace")
        return res

    def sh(self, sid, script, user="root", timeout_ms=60000):
        """Runs a shell script in the guest, asserts it exited 0, returns its stdout as text."""
        res = self.exec(sid, "/bin/sh", "-c", script, user=user, timeout_ms=timeout_ms)
        assert res["exit_code"] == 0, res
        return res["stdout"]

    def crash_api(self):
        self.api.send_signal(signal.SIGKILL)
        self.api.wait(timeout=30)
        self.api = None

    def stop_api(self):
        if self.api:
            self.api.send_signal(signal.SIGTERM)
            try:
                self.api.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.api.kill()
                self.api.wait()
            self.api = None

    def destroy(self):
        self.stop_api()
        if self.shared:
            shutil.rmtree(self.data, ignore_errors=True)
        else:
            self.node.destroy()


# The stores every store-generic suite runs on: SQLite always, PostgreSQL when tools/test.sh
# started one.
STORES = ["sqlite"] + (["postgresql"] if os.environ.get("SPACE_TEST_PG_URL") else [])


@contextlib.contextmanager
def store_platform(prefix, store_param, setup=None):
    """A started Platform on the store STORES names (setup(p), if given, runs before the start);
    on exit it stops and proves the node left nothing behind."""
    store = os.environ["SPACE_TEST_PG_URL"] if store_param == "postgresql" else None
    p = Platform(f"{prefix}-{store_param}", store=store)
    try:
        if setup:
            setup(p)
        p.start()
        yield p
        p.stop_api()
        p.node.stop()
        left = p.node.leftovers()
    finally:
        p.destroy()
    assert not left, left


@contextlib.contextmanager
def api_sandbox(plat, **body):
    """A sandbox created through space-api's native API (waited for, template base unless
    body says otherwise); yields its id and kills it on exit."""
    status, res = plat.admin("POST", "/v1/sandboxes?wait=true", {"template": "base", **body})
    assert status == 201, res
    try:
        yield res["id"]
    finally:
        plat.admin("DELETE", f"/v1/sandboxes/{res['id']}?wait=true")


@contextlib.contextmanager
def replica_pair(prefix, store, api_args=()):
    """Two started space-api replicas on one store (a PostgreSQL URL) sharing one space-node,
    both given api_args: yields (a, b); on exit both stop and the node proves it left nothing
    behind."""
    a = Platform(f"{prefix}-a", store=store, api_args=api_args)
    b = None
    try:
        a.start()
        b = Platform(f"{prefix}-b", store=store, share_node=a, api_args=api_args)
        b.start()
        yield a, b
        b.stop_api()
        a.stop_api()
        a.node.stop()
        left = a.node.leftovers()
    finally:
        if b:
            b.destroy()
        a.destroy()
    assert not left, left


def e2b(plat, method, path, key=None, **kw):
    """One request to the platform's public API with its bootstrap key (or key)."""
    import requests
    headers = {"X-API-Key": key if key is not None else plat.key}
    return requests.request(method, plat.url + path, headers=headers, timeout=300, **kw)


# ---- egress: space-gw in the simulated internet's uplink namespace (tests/lib/internet.py) ----

_node_help = None


def node_has_option(opt):
    """Whether this build's space-node knows opt (egress options land branch by branch)."""
    global _node_help
    if _node_help is None:
        try:
            res = subprocess.run([NODE, "--help"], capture_output=True, text=True, timeout=30)
            _node_help = res.stdout + res.stderr
        except OSError:
            _node_help = ""
    return opt in _node_help


def no_gw_unless_asked(args):
    """A node that was not given --gw-socket gets --no-gw: no egress, no dialling a gateway
    that is not there (once space-node has the option)."""
    args = list(args)
    if "--gw-socket" not in args and "--no-gw" not in args and node_has_option("--no-gw"):
        args.append("--no-gw")
    return args


def no_snapshots_unless_asked(args):
    """Template snapshots (issue 11) are built by a VM of the node's own in the background, which
    tests that count VMs and instance dirs would see: only nodes that ask get them."""
    args = list(args)
    if "--snapshots" not in args and node_has_option("--snapshots"):
        args += ["--snapshots", "off"]
    return args


_gw_counter = iter(range(1 << 30))


class Gateway:
    """A real space-gw run inside internet's uplink namespace (`ip netns exec`), so what it
    dials upstream reaches only the simulated internet. Its control socket is in /run/space
    (a Unix socket crosses namespaces); its data dir (the egress CA) is data_dir."""

    def __init__(self, internet, data_dir, extra_args=(), socket=None):
        self.internet = internet
        self.data = data_dir
        self.socket = socket or f"/run/space/test-gw-{os.getpid()}-{next(_gw_counter)}.sock"
        self.log_path = data_dir + ".log"
        self.extra_args = list(extra_args)
        self.proc = None

    def args(self):
        net = self.internet
        return ["ip", "netns", "exec", net.uplink, GW, "--control-socket", self.socket,
                "--data-dir", self.data, "--upstream-dns", net.upstream_dns,
                "--upstream-ca", net.upstream_ca, "--egress-test-net", net.test_net,
                *self.extra_args]

    def start(self, timeout=60):
        if not os.path.exists(GW):
            raise AssertionError(f"{GW} is not built (the gateway lands with issue 9)")
        os.makedirs("/run/space", exist_ok=True)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.args(), stdout=log, stderr=log,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"space-gw exited ({self.proc.returncode}): {self.log()}")
            if "space-gw: ready" in self.log() and os.path.exists(self.socket):
                return self
            time.sleep(0.05)
        raise AssertionError(f"space-gw did not start: {self.log()}")

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-8000:]
        except OSError:
            return ""

    def ca_pem(self):
        with open(os.path.join(self.data, "ca.crt")) as f:
            return f.read()

    def stop(self):
        if self.proc:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            self.proc = None

    def destroy(self):
        self.stop()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.log_path)


class EgressPlatform(Platform):
    """A Platform whose node sandboxes reach the simulated internet through a real space-gw:
    space-gw in internet.uplink (--upstream-dns/--upstream-ca/--egress-test-net from the
    internet), the node with --gw-socket. gw_args go to space-gw."""

    def __init__(self, internet, name="egress", gw_args=(), node_args=(), **kw):
        gw_socket = f"/run/space/test-gw-{os.getpid()}-{next(_gw_counter)}.sock"
        super().__init__(name, node_args=["--gw-socket", gw_socket, *node_args], **kw)
        self.gw = Gateway(internet, os.path.join(self.data, "gw"), extra_args=gw_args,
                          socket=gw_socket)
        self.internet = internet

    def start(self):
        self.gw.start()
        super().start()
        self.wait_gw_session()
        return self

    def wait_gw_session(self, timeout=30):
        """Until the node's hello reached space-gw (and, a moment later, its reply with the
        CA the node puts in every /init): a sandbox created before then gets no caBundle."""
        deadline = time.monotonic() + timeout
        while "control session: hello from node" not in self.gw.log():
            if time.monotonic() > deadline:
                raise AssertionError(f"space-node never said hello to space-gw: "
                                     f"{self.gw.log()} {self.node.log()}")
            time.sleep(0.05)
        time.sleep(0.5)

    def destroy(self):
        try:
            super().destroy()
        finally:
            self.gw.destroy()

    # -- the native API, as a user of egress calls it (CONTRACTS.md) --

    def create_sandbox(self, network=None, timeout=600, **kw):
        """POST /v1/sandboxes with the policy, waits until it runs; returns its id."""
        body = dict(template="base", **kw)
        if network is not None:
            body["network"] = network
        status, res = self.admin("POST", "/v1/sandboxes", body)
        assert status == 202, (status, res)
        op, sid = res["operation_id"], res["sandbox"]["id"]
        status, res = self.admin("POST", f"/v1/operations/{op}/wait?timeout_s={timeout}",
                                 timeout=timeout + 30)
        assert status == 200 and res["state"] == "succeeded", (status, res, self.node.log())
        return sid

    def set_network(self, sid, policy):
        status, res = self.admin("PUT", f"/v1/sandboxes/{sid}/network", policy)
        assert status == 200, (status, res)
        return res

    def egress(self, sid, **query):
        """Every audit record of sid (GET /v1/sandboxes/{id}/egress, all pages)."""
        from urllib.parse import urlencode
        out, cursor = [], None
        while True:
            q = dict(query, limit=1000)
            if cursor:
                q["after"] = cursor
            status, res = self.admin("GET", f"/v1/sandboxes/{sid}/egress?{urlencode(q)}")
            assert status == 200, (status, res)
            out += res["records"]
            cursor = res.get("next")
            if not cursor or not res["records"]:
                return out
