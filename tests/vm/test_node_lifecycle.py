"""Node lifecycle across stops and crashes (issue 7 items 2 and 5): instances, re-attach,
a graceful stop that leaves sandboxes running, and `space up`/`space down` idempotence.

Every test makes its own node (or whole stack) and checks that nothing is left behind.
"""
import concurrent.futures
import json
import os
import signal
import subprocess
import time

import pytest

from lib.platform import AGENT, API, NODE, ROOT, SPACE, Node, UnixHTTPConnection, free_port, \
    live_qemu_pids, netns_names


def record(node, sb):
    with open(os.path.join(node.instance_dir(sb), "instance.json")) as f:
        return json.load(f)


def qemu_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_instance_record_and_binding():
    n = Node("inst")
    try:
        n.start()
        sb = n.create()
        iid = sb["instance_id"]
        assert len(iid) == 12 and iid.isalnum() and iid != sb["id"]
        rec = record(n, sb)
        assert rec["iid"] == iid and rec["sandbox_id"] == sb["id"]
        assert rec["state"] == "running" and rec["pid"] == sb["pid"]
        with open(f"/proc/{sb['pid']}/stat") as f:
            assert rec["pid_start_time"] == int(f.read().rsplit(")", 1)[1].split()[19])
        assert rec["dir"] == n.instance_dir(sb)
        assert rec["netns"] == f"/run/netns/space-{iid}" and f"space-{iid}" in netns_names()
        status, body = n.call("GET", "/v1/instances")
        assert status == 200 and [(i["instance_id"], i["id"]) for i in body["instances"]] == \
            [(iid, sb["id"])]
        # The api's id is the address; creating it again is idempotent.
        status, again = n.call("POST", "/v1/sandboxes", {"id": sb["id"]})
        assert status == 200 and again["instance_id"] == iid
        n.kill(sb["id"])
        assert not n.leftovers(), n.leftovers()
        assert f"space-{iid}" not in netns_names()
    finally:
        n.destroy()


def test_sigterm_with_exec_in_flight_leaves_sandbox_running():
    n = Node("term")
    try:
        n.start()
        sb = n.create()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pending = pool.submit(lambda: n.call("POST", f"/v1/sandboxes/{sb['id']}/exec",
                                                 {"cmd": "sleep", "args": ["60"]}, timeout=120))
            time.sleep(1.5)  # the exec is running in the guest
            t0 = time.monotonic()
            n.proc.send_signal(signal.SIGTERM)
            n.proc.wait(timeout=30)
            elapsed = time.monotonic() - t0
            n.proc = None
            with pytest.raises(Exception):
                pending.result()
        print(f"SIGTERM with an exec in flight: node exited in {elapsed:.2f} s")
        assert elapsed < 5, f"node took {elapsed:.1f} s to stop"
        assert qemu_alive(sb["pid"]), "a graceful stop must leave the sandbox running"
        assert f"space-{sb['instance_id']}" in netns_names()
        n.start()
        status, body = n.call("GET", f"/v1/sandboxes/{sb['id']}")
        assert status == 200 and body["state"] == "running", body
        assert body["instance_id"] == sb["instance_id"] and body["pid"] == sb["pid"]
        assert n.exec(sb["id"], "echo", "back")["stdout"] == b"back\n"
        n.kill(sb["id"])
        n.stop()
        assert not n.leftovers(), n.leftovers()
    finally:
        n.destroy()


def test_kill9_then_restart_reattaches_by_record():
    n = Node("reattach")
    try:
        n.start()
        sbs = [n.create(), n.create()]
        n.crash()
        for sb in sbs:
            assert qemu_alive(sb["pid"])
        # A record naming a recycled pid (same number, other start time) is not re-attached,
        # and the VMM it really had is still found (by the runtime's own pidfile) and removed.
        victim = sbs[1]
        path = os.path.join(n.instance_dir(victim), "instance.json")
        rec = record(n, victim)
        rec["pid_start_time"] += 1
        with open(path, "w") as f:
            json.dump(rec, f)
        t0 = time.monotonic()
        n.start()
        res = n.exec(sbs[0]["id"], "echo", "alive", timeout_ms=10000)
        assert time.monotonic() - t0 < 10 + 60  # node start includes reconcile; exec is quick
        assert res["stdout"] == b"alive\n"
        status, body = n.call("GET", "/v1/sandboxes")
        assert [s["id"] for s in body["sandboxes"]] == [sbs[0]["id"]]
        assert not qemu_alive(victim["pid"])
        assert f"space-{victim['instance_id']}" not in netns_names()
        assert not os.path.exists(n.instance_dir(victim))
        n.kill(sbs[0]["id"])
        n.stop()
        assert not n.leftovers(), n.leftovers()
    finally:
        n.destroy()


def test_exec_deadline_and_pool_limits():
    n = Node("bounded", extra_args=["--max-exec-timeout", "3", "--max-workers", "2",
                                    "--max-queue", "0"])
    try:
        n.start()
        sb = n.create()
        path = f"/v1/sandboxes/{sb['id']}/exec"
        # No timeout_ms: the node's maximum applies, so a hung command cannot pin a worker.
        t0 = time.monotonic()
        status, body = n.call("POST", path, {"cmd": "sleep", "args": ["30"]})
        assert time.monotonic() - t0 < 15, body
        assert status in (200, 504), (status, body)
        if status == 200:
            assert body["exit_code"] != 0 or not body["exited"], body
        status, body = n.call("POST", path, {"cmd": "true", "timeout_ms": 4000})
        assert status == 400 and "max-exec-timeout" in body["message"]
        # Two workers, no queue: a third concurrent job is refused with 503, not queued forever.
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            futs = [pool.submit(n.call, "POST", path, {"cmd": "sleep", "args": ["2"]})
                    for _ in range(3)]
            codes = sorted(f.result()[0] for f in futs)
        assert codes.count(503) >= 1 and codes.count(200) >= 1, codes
        n.kill(sb["id"])
        n.stop()
        assert not n.leftovers(), n.leftovers()
    finally:
        n.destroy()


def test_no_tcp_listener():
    n = Node("nolisten", template=False)
    try:
        port = free_port()
        r = subprocess.run([NODE, "--data-dir", n.data, "--socket", n.socket,
                            "--listen", f"127.0.0.1:{port}"], capture_output=True, timeout=30)
        assert r.returncode == 2
    finally:
        n.destroy()


class Stack:
    """The whole platform through `space up --detach` / `space down`, own dirs and ports."""

    def __init__(self, name):
        self.node = Node(name)  # data dir + base template
        self.data = self.node.data
        base = os.path.basename(self.data)
        self.run = os.path.join(self.data, "run")
        os.makedirs(self.run, exist_ok=True)
        self.api_socket = f"/run/space/{base}-api.sock"
        self.node_socket = f"/run/space/{base}-node.sock"
        self.tunnel_socket = f"/run/space/{base}-tunnel.sock"
        self.env = dict(os.environ, SPACE_DATA_DIR=self.data, SPACE_SOCKET=self.api_socket,
                        SPACE_NODE_SOCKET=self.node_socket, SPACE_TUNNEL_SOCKET=self.tunnel_socket,
                        SPACE_RUN_DIR=self.run, SPACE_API_LISTEN=f"127.0.0.1:{free_port()}",
                        SPACE_INGRESS_LISTEN=f"127.0.0.1:{free_port()}",
                        SPACE_INGRESS_TLS_LISTEN=f"127.0.0.1:{free_port()}", SPACE_NODE=NODE,
                        SPACE_API=API, SPACE_AGENT=AGENT, SPACE_SHARE_DIR=ROOT)

    def space(self, *args, timeout=600):
        return subprocess.run([SPACE, *args], env=self.env, capture_output=True, timeout=timeout)

    def up(self):
        r = self.space("up", "--detach")
        assert r.returncode == 0, r.stderr.decode()
        return r

    def call(self, socket, method, path, body=None, timeout=300):
        conn = UnixHTTPConnection(socket, timeout=timeout)
        try:
            data = json.dumps(body) if body is not None else None
            conn.request(method, path, body=data,
                         headers={"Content-Type": "application/json"} if data else {})
            resp = conn.getresponse()
            text = resp.read()
            return resp.status, (json.loads(text) if text else None)
        finally:
            conn.close()

    def create(self):
        status, res = self.call(self.api_socket, "POST", "/v1/sandboxes?wait=true",
                                {"template": "base"})
        assert status in (200, 201), res
        sid = res.get("id") or res["sandbox"]["id"]
        status, sb = self.call(self.node_socket, "GET", f"/v1/sandboxes/{sid}")
        assert status == 200 and sb["state"] == "running", sb
        return sb

    def exec_echo(self, sid, timeout=30):
        return self.call(self.api_socket, "POST", f"/v1/sandboxes/{sid}/exec",
                         {"cmd": "echo", "args": [sid]}, timeout=timeout)

    def pid(self, name):
        try:
            with open(os.path.join(self.run, f"{name}.pid")) as f:
                return int(f.read())
        except (OSError, ValueError):
            return None

    def destroy(self):
        self.space("down", "--kill-sandboxes", timeout=120)
        for name in ("api", "node"):
            pid = self.pid(name)
            if pid and qemu_alive(pid):  # any live process
                os.kill(pid, signal.SIGKILL)
        self.node.destroy()


def open_cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def answers_within(stack, sids, seconds):
    deadline = time.monotonic() + seconds
    pending = set(sids)
    while pending and time.monotonic() < deadline:
        for sid in list(pending):
            try:
                status, res = stack.exec_echo(sid, timeout=5)
                if status == 200:
                    pending.discard(sid)
            except OSError:
                pass
        time.sleep(0.1)
    return pending


def is_console_pump(pid):
    """The serial console pumps are forks of space-node (console.c) named space-console."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip() == "space-console"
    except OSError:
        return False


def test_space_up_is_idempotent_and_down_keeps_sandboxes():
    st = Stack("up")
    try:
        st.up()
        sbs = [st.create(), st.create()]
        sids = [sb["id"] for sb in sbs]
        node_pid = st.pid("node")

        # kill -9 of space-node: `space up` starts it again, and it re-attaches.
        os.kill(node_pid, signal.SIGKILL)
        time.sleep(0.2)
        t0 = time.monotonic()
        st.up()
        assert st.pid("node") != node_pid
        t1 = time.monotonic()
        left = answers_within(st, sids, 10)
        print(f"kill -9 of space-node: `space up --detach` took {t1 - t0:.2f} s, then every "
              f"sandbox answered an exec in {time.monotonic() - t1:.2f} s")
        assert not left, f"no exec answer within 10 s of `space up` from {left}"
        assert time.monotonic() - t0 < 120
        # Nothing leaked or doubled: one node, one instance, netns and VMM per sandbox.
        assert st.node.instances() == sorted(sb["instance_id"] for sb in sbs)
        assert len(live_qemu_pids(st.data)) == len(sbs)
        assert all(f"space-{sb['instance_id']}" in netns_names() for sb in sbs)
        assert len([p for p in os.listdir("/proc") if p.isdigit() and
                    open_cmdline(p).startswith(NODE) and st.data in open_cmdline(p) and
                not is_console_pump(p)]) == 1

        # kill -9 of space-api: `space up` starts just the api; the node keeps its pid.
        api_pid, node_pid = st.pid("api"), st.pid("node")
        os.kill(api_pid, signal.SIGKILL)
        time.sleep(0.2)
        st.up()
        assert st.pid("api") != api_pid and st.pid("node") == node_pid
        assert not answers_within(st, sids, 10)

        # A second `space up` with both daemons healthy changes nothing.
        api_pid, node_pid = st.pid("api"), st.pid("node")
        st.up()
        assert (st.pid("api"), st.pid("node")) == (api_pid, node_pid)

        # down keeps the sandboxes; up re-attaches them.
        r = st.space("down")
        assert r.returncode == 0, r.stderr.decode()
        for sb in sbs:
            assert qemu_alive(sb["pid"])
        st.up()
        assert not answers_within(st, sids, 10)

        # down --kill-sandboxes leaves no VMM, netns or instance behind.
        r = st.space("down", "--kill-sandboxes")
        assert r.returncode == 0, r.stderr.decode()
        for sb in sbs:
            assert not qemu_alive(sb["pid"])
            assert f"space-{sb['instance_id']}" not in netns_names()
        assert not live_qemu_pids(st.data)
        assert st.node.instances() == []
    finally:
        st.destroy()
