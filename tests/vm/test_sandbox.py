"""End-to-end tests of issue #2: real space-node, real QEMU guests, real netns.

One node (module fixture) serves most tests; crash/restart and boot-failure
tests make their own nodes. Every test that creates a sandbox kills it, and
the fixture's teardown asserts the node left nothing behind.
"""
import concurrent.futures
import os
import platform
import subprocess
import time

import pytest

from lib.platform import Node, live_qemu_pids, netns_names, node_sandbox, started_node


@pytest.fixture(scope="module")
def node():
    with started_node("vm") as n:
        yield n


@pytest.fixture
def sandbox(node):
    with node_sandbox(node) as sb:
        yield sb


def assert_gone(node, sb, pid=None):
    iid = sb["instance_id"]
    assert f"space-{iid}" not in netns_names()
    assert not os.path.exists(node.instance_dir(sb))
    if pid:
        try:
            with open(f"/proc/{pid}/stat") as f:
                assert f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
        except FileNotFoundError:
            pass


def test_guest_runs_its_own_kernel(node, sandbox):
    res = node.exec(sandbox["id"], "uname", "-r")
    assert res["exit_code"] == 0
    guest = res["stdout"].decode().strip()
    assert guest.startswith("6.1.")
    assert guest != platform.release()


def test_python_runs(node, sandbox):
    res = node.exec(sandbox["id"], "python3", "-c", "print(6 * 7)")
    assert (res["exit_code"], res["stdout"], res["stderr"]) == (0, b"42\n", b"")


def test_stdout_stderr_exit_code_exact(node, sandbox):
    res = node.exec(sandbox["id"], "/bin/sh", "-c", "printf 'out\\n'; printf 'err' >&2; exit 3")
    assert (res["exit_code"], res["stdout"], res["stderr"]) == (3, b"out\n", b"err")


def test_binary_and_large_output(node, sandbox):
    script = "import sys; sys.stdout.buffer.write(bytes(range(256)) * 4096)"
    res = node.exec(sandbox["id"], "python3", "-c", script)
    assert res["exit_code"] == 0
    assert res["stdout"] == bytes(range(256)) * 4096  # 1 MiB, every byte value


def test_env_cwd_user(node, sandbox):
    res = node.exec(sandbox["id"], "/bin/sh", "-c", 'echo "$FOO $(pwd) $(id -un)"',
                    env={"FOO": "bar"}, cwd="/tmp", user="user")
    assert res["stdout"] == b"bar /tmp user\n"
    res = node.exec(sandbox["id"], "id", "-u", user="root")
    assert res["stdout"] == b"0\n"


def test_command_not_found_is_a_result(node, sandbox):
    res = node.exec(sandbox["id"], "/bin/sh", "-c", "no-such-command-xyz")
    assert res["exit_code"] == 127
    assert b"not found" in res["stderr"]


def test_cli_exec_passes_output_and_code(node, sandbox):
    r = node.cli("sandbox", "exec", sandbox["id"], "--", "/bin/sh", "-c",
                 "printf hello; printf oops >&2; exit 7")
    assert (r.returncode, r.stdout, r.stderr) == (7, b"hello", b"oops")


def test_cli_create_ls_kill(node):
    r = node.cli("sandbox", "create", check=True)
    sid = r.stdout.decode().strip()
    assert len(sid) == 20 and sid.isalnum() and sid.islower()
    assert sid in node.cli("sandbox", "ls", check=True).stdout.decode()
    sb = node.call("GET", f"/v1/sandboxes/{sid}")[1]
    node.cli("sandbox", "kill", sid, check=True)
    assert sid not in node.cli("sandbox", "ls", check=True).stdout.decode()
    assert_gone(node, sb)


def test_eight_sandboxes_see_only_their_own_files(node):
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        sbs = list(pool.map(lambda _: node.create(), range(8)))
    try:
        ids = [sb["id"] for sb in sbs]
        assert len(set(ids)) == 8

        def write_and_list(sid):
            node.exec(sid, "/bin/sh", "-c", f"echo {sid} > /tmp/owner-{sid}")
            return node.exec(sid, "/bin/sh", "-c", "cat /tmp/owner-*")["stdout"].decode()

        seen = list(pool_map(write_and_list, ids))
        for sid, out in zip(ids, seen):
            assert out == f"{sid}\n"
    finally:
        for sb in sbs:
            node.kill(sb["id"])
    for sb in sbs:
        assert_gone(node, sb, sb.get("pid"))


def pool_map(fn, items):
    with concurrent.futures.ThreadPoolExecutor(len(items)) as pool:
        return list(pool.map(fn, items))


def test_kill_leaves_nothing(node):
    sb = node.create()
    assert live_qemu_pids(node.instance_dir(sb))
    assert f"space-{sb['instance_id']}" in netns_names()
    node.kill(sb["id"])
    assert_gone(node, sb, sb["pid"])
    assert not live_qemu_pids(node.instance_dir(sb))


def test_bad_input_gets_json_errors(node):
    status, body = node.call("POST", "/v1/sandboxes", {"template": "nope"})
    assert status == 404 and body["code"] == 404 and "nope" in body["message"]
    status, body = node.call("POST", "/v1/sandboxes", {"template": "../etc"})
    assert status == 400 and body["code"] == 400
    status, body = node.call("POST", "/v1/sandboxes", {"vcpus": "many"})
    assert status == 400 and "vcpus" in body["message"]
    status, body = node.call("POST", "/v1/sandboxes", {"memory_mb": 1 << 40})
    assert status == 400
    status, body = node.call("POST", "/v1/sandboxes", raw="{not json")
    assert status == 400 and body["code"] == 400
    status, body = node.call("GET", "/v1/sandboxes/UPPERCASE")
    assert status == 400
    status, body = node.call("GET", "/v1/sandboxes/" + "a" * 20)
    assert status == 404 and body["code"] == 404
    status, body = node.call("POST", "/v1/sandboxes/" + "a" * 20 + "/exec", {"cmd": "true"})
    assert status == 404


def test_exec_on_killed_sandbox_is_404(node):
    sb = node.create()
    node.kill(sb["id"])
    status, body = node.call("POST", f"/v1/sandboxes/{sb['id']}/exec", {"cmd": "true"})
    assert status == 404 and body["code"] == 404
    r = node.cli("sandbox", "exec", sb["id"], "--", "true")
    assert r.returncode == 1 and b"not found" in r.stderr


def test_exec_validates_its_body(node, sandbox):
    path = f"/v1/sandboxes/{sandbox['id']}/exec"
    for body in ({}, {"cmd": ""}, {"cmd": "true", "args": "x"}, {"cmd": "true", "args": [1]},
                 {"cmd": "true", "env": {"A": 1}}, {"cmd": "true", "timeout_ms": -1},
                 {"cmd": "true", "user": "a:b"}):
        status, res = node.call("POST", path, body)
        assert status == 400 and res["code"] == 400, body


def test_crash_and_restart_leaves_nothing():
    n = Node("crash")
    try:
        n.start()
        running = n.create()
        # Crash in the middle of a create: the node dies while QEMU boots.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pending = pool.submit(lambda: n.call("POST", "/v1/sandboxes", {}))
            deadline = time.monotonic() + 30
            while len(n.instances()) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.3)  # inside clone / network / QEMU start / boot
            n.crash()
            with pytest.raises(Exception):
                pending.result()
        n.start()
        # The finished sandbox was re-attached and still works ...
        res = n.exec(running["id"], "echo", "alive")
        assert res["stdout"] == b"alive\n"
        status, body = n.call("GET", "/v1/sandboxes")
        assert [s["id"] for s in body["sandboxes"]] == [running["id"]]
        # ... and the half-made one is gone without a trace.
        n.kill(running["id"])
        assert_gone(n, running, running["pid"])
        n.stop()
        assert not n.leftovers(), n.leftovers()
    finally:
        n.destroy()


def test_guest_that_never_becomes_ready_fails_cleanly(tmp_path):
    """A template whose init never starts the agent: create fails in bounded time, with the
    serial log tail in the error, and leaves nothing behind."""
    n = Node("noready", extra_args=["--ready-timeout", "15"])
    try:
        broken = os.path.join(n.data, "templates", "broken")
        base = os.path.join(n.data, "templates", "base")
        subprocess.run(["cp", "-a", "--reflink=auto", base, broken], check=True)
        sleeper = tmp_path / "sleeper"
        sleeper.write_text("#!/bin/sh\necho broken-init-started\nexec sleep 100000\n")
        os.chmod(sleeper, 0o755)
        rootfs = os.path.join(broken, "rootfs.ext4")
        for cmd in ("rm /usr/local/sbin/space-agent",
                    f"write {sleeper} /usr/local/sbin/space-agent",
                    "sif /usr/local/sbin/space-agent mode 0100755"):
            subprocess.run(["debugfs", "-w", "-R", cmd, rootfs], check=True,
                           capture_output=True)
        n.start()
        t0 = time.monotonic()
        status, body = n.call("POST", "/v1/sandboxes", {"template": "broken"})
        elapsed = time.monotonic() - t0
        assert status == 504, (status, body)
        assert "did not become ready" in body["message"]
        assert "broken-init-started" in body["message"]  # the serial console tail
        assert elapsed < 40
        status, body = n.call("GET", "/v1/sandboxes")
        assert body["sandboxes"] == []
        assert not n.leftovers(), n.leftovers()
    finally:
        n.destroy()


def test_debian_kernel_fallback(node):
    """A template built with Debian's cloud kernel + module initramfs (the fallback flavour)
    boots through the same node: microvm with ACPI and -initrd instead of acpi=off."""
    from lib.platform import AGENT, ROOT
    out = os.path.join(node.data, "templates", "debian")
    subprocess.run(["bash", os.path.join(ROOT, "tools/template-build.sh"), "--kernel", "debian",
                    "--recipe", os.path.join(ROOT, "templates/base"), "--agent", AGENT,
                    "--cache", os.environ.get("SPACE_CACHE_DIR", "/var/cache/space"),
                    "--out", out, "--name", "debian"], check=True, stdout=subprocess.DEVNULL)
    sb = node.create(template="debian")
    try:
        res = node.exec(sb["id"], "uname", "-r")
        assert res["stdout"].decode().strip().endswith("-cloud-amd64")
        assert node.exec(sb["id"], "python3", "-c", "print(1)")["stdout"] == b"1\n"
    finally:
        node.kill(sb["id"])
    assert_gone(node, sb, sb["pid"])
