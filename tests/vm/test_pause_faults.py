"""kill -9 of space-node at every step of suspend and restore (basic/fault.h), one sandbox.

After each crash and a restart the sandbox is in its old state or its new one, never a broken
one: running (and running: its vCPUs given back) when the crash came before the suspend's
record said suspended, suspended from then on (a leftover VMM stopped); suspended when a
restore crashed before its record said running (the VMM it had spawned swept), running after.
A counting process and a file never fsync'd survive every one of them.
"""
import os
import time

import pytest

from lib.platform import COUNTER, live_qemu_pids, started_node


# (verb, fault point, the state a restarted node shows)
POINTS = [
    ("suspend", "suspend.snapshot", "running"),
    ("suspend", "suspend.published", "running"),
    ("suspend", "suspend.recorded", "suspended"),
    ("restore", "restore.vmm", "suspended"),
    ("restore", "restore.running", "running"),
]


@pytest.fixture(scope="module")
def node():
    with started_node("pausefault") as n:
        yield n


@pytest.fixture(scope="module")
def sb(node):
    sb = node.create()
    sid = sb["id"]
    node.sh(sid, f"nohup sh -c '{COUNTER}' >/dev/null 2>&1 & echo $! > /dev/shm/counter.pid")
    node.sh(sid, "echo kept > /root/unsynced")
    # The counter's first write can trail its start on a loaded host: wait for it (bounded).
    node.sh(sid, "for i in $(seq 300); do [ -s /dev/shm/count ] && exit 0; sleep 0.1; done; exit 1")
    yield sb
    if node.proc and node.call("GET", f"/v1/sandboxes/{sid}")[0] == 200:
        node.kill(sid)


def restart_with_fault(node, spec):
    node.stop()
    saved = dict(os.environ)
    os.environ["SPACE_FAULT"] = spec
    try:
        node.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)


def settle(node, sid, want):
    status, body = node.call("GET", f"/v1/sandboxes/{sid}")
    assert status == 200 and body["state"] == want, (status, body)
    if want == "suspended":
        assert "pid" not in body
        status, body = node.call("POST", f"/v1/sandboxes/{sid}/restore")
        assert status == 200 and body["state"] == "running", (status, body)


@pytest.mark.parametrize("verb,point,after", POINTS)
def test_crash_at_every_step_leaves_old_or_new_state(node, sb, verb, point, after):
    sid = sb["id"]
    if verb == "restore":
        status, body = node.call("POST", f"/v1/sandboxes/{sid}/suspend")
        assert status == 200 and body["state"] == "suspended", (status, body)
    count = int(node.sh(sid, "cat /dev/shm/count")) if verb == "suspend" else None
    restart_with_fault(node, f"{point}:crash")
    with pytest.raises(Exception):
        node.call("POST", f"/v1/sandboxes/{sid}/{verb}", timeout=300)
    node.proc.wait(timeout=30)
    node.proc = None
    node.start()
    settle(node, sid, after)
    # Whatever happened, the guest is whole and runs on.
    assert node.sh(sid, "cat /root/unsynced").strip() == "kept"
    pid = node.sh(sid, "cat /dev/shm/counter.pid").strip()
    assert pid and node.sh(sid, f"test -d /proc/{pid} && echo alive").strip() == "alive"
    now = int(node.sh(sid, "cat /dev/shm/count"))
    if count is not None:
        assert now >= count
    time.sleep(0.5)
    assert int(node.sh(sid, "cat /dev/shm/count")) > now, "its vCPUs run"
    # One VMM for the one sandbox: no leftover of the crashed verb.
    assert len(live_qemu_pids(node.data)) == 1, live_qemu_pids(node.data)
    assert not os.path.exists(os.path.join(node.instance_dir(sb), "suspend.new"))
