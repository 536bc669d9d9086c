"""Pause and resume on the node (issue 12 item 1): QMP stop/cont with the memory resident.

One node and one sandbox for the module: a process counting in memory keeps its count, files
written just before the pause (never fsync'd) are there after it, the guest is frozen while
paused (QEMU says so, and the guest's own uptime does not advance), its clock is re-synced on
resume, a verb in the wrong state is a 409 naming the state, and a paused VM stays paused
across a node crash and restart.
"""
import json
import os
import socket
import time

import pytest

from lib.platform import COUNTER, node_sandbox, started_node



@pytest.fixture(scope="module")
def node():
    with started_node("pause") as n:
        yield n


@pytest.fixture(scope="module")
def sb(node):
    with node_sandbox(node) as sb:
        yield sb


def qmp_status(node, sb):
    """QEMU's own run state, over the instance's QMP socket (one client at a time)."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(os.path.join(node.instance_dir(sb), "qmp.sock"))
    f = s.makefile("rw")
    try:
        json.loads(f.readline())  # greeting
        for cmd in ("qmp_capabilities", "query-status"):
            f.write(json.dumps({"execute": cmd}) + "\n")
            f.flush()
            while True:
                msg = json.loads(f.readline())
                if "return" in msg or "error" in msg:
                    break
        return msg["return"]["status"]
    finally:
        f.close()
        s.close()


def pause(node, sid):
    status, body = node.call("POST", f"/v1/sandboxes/{sid}/pause")
    assert status == 200, (status, body)
    assert body["state"] == "paused"
    return body


def resume(node, sid):
    status, body = node.call("POST", f"/v1/sandboxes/{sid}/resume")
    assert status == 200, (status, body)
    assert body["state"] == "running"
    return body


def test_pause_keeps_memory_and_files_and_freezes_the_guest(node, sb):
    sid = sb["id"]
    node.sh(sid, f"nohup sh -c '{COUNTER}' >/dev/null 2>&1 & echo $! > /dev/shm/counter.pid")
    time.sleep(1)
    pid = node.sh(sid, "cat /dev/shm/counter.pid").strip()
    # Written just before the pause and never synced: only memory holds it.
    before = node.sh(sid, "echo unsynced-1 > /root/unsynced; cat /dev/shm/count; "
                "cut -d' ' -f1 /proc/uptime").split()
    count_before, uptime_before = int(before[0]), float(before[1])
    assert count_before > 0

    paused = pause(node, sid)
    print(f"node pause: {paused['pause_ms']:.1f} ms")
    assert qmp_status(node, sb) == "paused"
    # While paused nothing runs in the guest: exec is refused with the state, not hung.
    status, body = node.call("POST", f"/v1/sandboxes/{sid}/exec", {"cmd": "true"})
    assert status == 409 and "paused" in body["message"], (status, body)
    status, body = node.call("GET", f"/v1/sandboxes/{sid}")
    assert status == 200 and body["state"] == "paused"
    with open(os.path.join(node.instance_dir(sb), "instance.json")) as f:
        assert json.load(f)["state"] == "paused"
    t0 = time.monotonic()
    time.sleep(6)

    resumed = resume(node, sid)
    print(f"node resume: {resumed['resume_ms']:.1f} ms")
    wall = time.monotonic() - t0
    assert qmp_status(node, sb) == "running"
    after = node.sh(sid, "cat /dev/shm/count; cut -d' ' -f1 /proc/uptime; cat /root/unsynced; "
               "cat /dev/shm/counter.pid; date +%s").split()
    count_after, uptime_after = int(after[0]), float(after[1])
    # The same process kept counting from where it was (its count lives in its memory).
    assert after[3] == pid
    assert count_after >= count_before
    assert after[2] == "unsynced-1"
    # Frozen: the guest's own clock (uptime) stood still for the 6 s it was paused.
    assert uptime_after - uptime_before < wall - 4, (uptime_before, uptime_after, wall)
    # ... and its wall clock was stepped back to ours by the resume's /init timestamp.
    assert abs(int(after[4]) - time.time()) < 3, (after[4], time.time())
    # It goes on counting.
    time.sleep(1)
    assert int(node.sh(sid, "cat /dev/shm/count")) > count_after


def test_wrong_state_is_409_and_verbs_are_idempotent(node, sb):
    sid = sb["id"]
    status, body = node.call("POST", f"/v1/sandboxes/{sid}/resume")
    # A running VM asked to resume: already there (the api re-runs operations after a crash).
    assert status == 200 and body["state"] == "running", (status, body)
    pause(node, sid)
    status, body = node.call("POST", f"/v1/sandboxes/{sid}/pause")
    assert status == 200 and body["state"] == "paused", (status, body)
    status, body = node.call("PUT", f"/v1/sandboxes/{sid}/network", {"internet": False})
    assert status == 404 and "not running" in body["message"], (status, body)
    resume(node, sid)
    status, body = node.call("POST", "/v1/sandboxes/nosuchsandboxxxxxxxx/pause")
    assert status in (400, 404), (status, body)


def test_paused_vm_stays_paused_across_a_node_crash(node, sb):
    sid = sb["id"]
    node.sh(sid, "echo unsynced-2 > /root/unsynced2")
    pause(node, sid)
    node.crash()
    assert qmp_status(node, sb) == "paused"
    node.start()
    status, body = node.call("GET", f"/v1/sandboxes/{sid}")
    assert status == 200 and body["state"] == "paused", (status, body)
    assert body["instance_id"] == sb["instance_id"] and body["pid"] == sb["pid"]
    assert qmp_status(node, sb) == "paused"
    resume(node, sid)
    assert node.sh(sid, "cat /root/unsynced2").strip() == "unsynced-2"


def test_kill_of_a_paused_sandbox(node):
    other = node.create()
    pause(node, other["id"])
    node.kill(other["id"])
    assert node.call("GET", f"/v1/sandboxes/{other['id']}")[0] == 404
    assert not os.path.exists(node.instance_dir(other))


def verb(node, sid, name, want, body=None):
    status, res = node.call("POST", f"/v1/sandboxes/{sid}/{name}", body)
    assert status == 200, (name, status, res)
    assert res["state"] == want, res
    return res


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_suspend_restore_cycles_keep_memory_and_unsynced_files(node):
    """Several suspend/restore cycles in a row (E2B#884): the counting process, its count and
    files never fsync'd survive each; the VMM is gone while suspended; a node crash while
    suspended keeps it suspended."""
    with_sb = node.create()
    sid = with_sb["id"]
    try:
        node.sh(sid, f"nohup sh -c '{COUNTER}' >/dev/null 2>&1 & echo $! > /dev/shm/counter.pid")
        time.sleep(1)
        pid = node.sh(sid, "cat /dev/shm/counter.pid").strip()
        last = 0
        qemu_pid = with_sb["pid"]
        for cycle in range(1, 4):
            node.sh(sid, f"echo cycle-{cycle} > /root/unsynced-{cycle}")
            count = int(node.sh(sid, "cat /dev/shm/count"))
            assert count >= last
            body = verb(node, sid, "suspend", "suspended")
            print(f"cycle {cycle}: node suspend {body['suspend_ms']:.1f} ms")
            assert "pid" not in body and not pid_alive(qemu_pid), "the VMM is released"
            status, res = node.call("POST", f"/v1/sandboxes/{sid}/exec", {"cmd": "true"})
            assert status == 409 and "suspended" in res["message"], (status, res)
            status, res = node.call("POST", f"/v1/sandboxes/{sid}/suspend")
            assert status == 200 and res["state"] == "suspended"  # idempotent at the node
            status, res = node.call("POST", f"/v1/sandboxes/{sid}/pause")
            assert status == 409 and "suspended" in res["message"], (status, res)
            if cycle == 2:
                node.crash()
                node.start()
                status, res = node.call("GET", f"/v1/sandboxes/{sid}")
                assert status == 200 and res["state"] == "suspended", (status, res)
            body = verb(node, sid, "restore", "running")
            print(f"cycle {cycle}: node restore {body['restore_ms']:.1f} ms")
            qemu_pid = body["pid"]
            for k in range(1, cycle + 1):
                assert node.sh(sid, f"cat /root/unsynced-{k}").strip() == f"cycle-{k}"
            assert node.sh(sid, "cat /dev/shm/counter.pid").strip() == pid
            last = int(node.sh(sid, "cat /dev/shm/count"))
            assert last >= count, (count, last)
            assert abs(int(node.sh(sid, "date +%s")) - time.time()) < 3
        snap_dir = os.path.join(node.instance_dir(with_sb), "suspend")
        assert not os.path.exists(snap_dir), "a restored sandbox keeps no stale snapshot"
        time.sleep(1)
        assert int(node.sh(sid, "cat /dev/shm/count")) > last
        # a suspended sandbox can be killed: everything goes
        verb(node, sid, "suspend", "suspended")
    finally:
        node.kill(sid)
    assert not os.path.exists(node.instance_dir(with_sb))
