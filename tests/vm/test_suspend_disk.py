"""Suspend without memory at the node (E2B's pause {memory: false}, issue 12 item 6).

The guest syncs, the VMM stops, the disk clone stays; restore boots from that disk: every
file written before the suspend is there (also ones the writer never fsync'd: the suspend
syncs), the processes are gone, and the agent has its identity again (token, env).
"""
import os
import time

import pytest

from lib.platform import COUNTER, started_node

from test_pause import pid_alive, verb

TOKEN = "disk-only-token-1234567890"


@pytest.fixture(scope="module")
def node():
    with started_node("suspenddisk") as n:
        yield n


def start_writer(node, sid):
    """A counter, and files written just before the suspend: some never fsync'd."""
    node.sh(sid, f"nohup sh -c '{COUNTER}' >/dev/null 2>&1 & echo $! > /root/counter.pid")
    node.sh(sid, "echo synced > /root/synced && sync /root/synced; "
                 "echo unsynced > /root/unsynced; "
                 "head -c 3000000 /dev/urandom > /root/big; md5sum /root/big > /root/big.md5")
    time.sleep(0.5)
    return node.sh(sid, "cat /root/counter.pid").strip()


def check_after_boot(node, sid, pid):
    assert node.sh(sid, "cat /root/synced /root/unsynced").split() == ["synced", "unsynced"]
    node.sh(sid, "md5sum -c /root/big.md5")
    # a cold boot: the counter is gone and so is its tmpfs
    out = node.sh(sid, f"grep -q count[.]tmp /proc/{pid}/cmdline 2>/dev/null && echo alive; "
                       "test -e /dev/shm/count && echo shm; true")  # a pid may be reused
    assert out.strip() == "", out
    assert node.sh(sid, "echo $FOO").strip() == "bar", "the env of the create is back"
    assert abs(int(node.sh(sid, "date +%s")) - time.time()) < 5


def test_bad_memory_bodies_are_400(node):
    sb = node.create()
    sid = sb["id"]
    try:
        for body, what in (({"memory": "no"}, "boolean"), ({"memory": 1}, "boolean"),
                           ({"memory": False, "x": 1}, "only 'memory'")):
            for v in ("suspend", "restore"):
                status, res = node.call("POST", f"/v1/sandboxes/{sid}/{v}", body)
                assert status == 400 and what in res["message"], (v, body, status, res)
        status, res = node.call("POST", f"/v1/sandboxes/{sid}/suspend", raw="[1]")
        assert status == 400, (status, res)
        status, res = node.call("GET", f"/v1/sandboxes/{sid}")
        assert res["state"] == "running", res
    finally:
        node.kill(sid)


def test_disk_only_suspend_boots_from_the_disk(node):
    sb = node.create(init={"accessToken": TOKEN, "envVars": {"FOO": "bar"}})
    sid = sb["id"]
    try:
        pid = start_writer(node, sid)
        res = verb(node, sid, "suspend", "suspended", {"memory": False})
        print(f"disk-only suspend {res['suspend_ms']:.1f} ms")
        assert res["memory"] is False
        assert "pid" not in res and not pid_alive(sb["pid"]), "the VMM is released"
        snap = os.path.join(node.instance_dir(sb), "suspend")
        assert sorted(os.listdir(snap)) == ["disk-only", "init.json"], os.listdir(snap)
        # a node crash while suspended keeps it suspended, disk-only
        node.crash()
        node.start()
        status, res = node.call("GET", f"/v1/sandboxes/{sid}")
        assert status == 200 and res["state"] == "suspended", (status, res)
        res = verb(node, sid, "restore", "running")
        print(f"restore from the disk {res['restore_ms']:.1f} ms")
        assert res["memory"] is False
        assert not os.path.exists(snap), "a restored sandbox keeps no stale suspend"
        check_after_boot(node, sid, pid)
        # and again: the booted sandbox suspends with its memory as any other
        node.sh(sid, f"nohup sh -c '{COUNTER}' >/dev/null 2>&1 & echo $! > /dev/shm/pid2")
        pid2 = node.sh(sid, "cat /dev/shm/pid2").strip()
        assert verb(node, sid, "suspend", "suspended")["memory"] is True
        assert verb(node, sid, "restore", "running")["memory"] is True
        assert node.sh(sid, f"kill -0 {pid2} && echo alive").strip() == "alive"
    finally:
        node.kill(sid)
    assert not os.path.exists(node.instance_dir(sb))


def test_restore_without_memory_drops_a_memory_suspend(node):
    sb = node.create(init={"envVars": {"FOO": "bar"}})
    sid = sb["id"]
    try:
        pid = start_writer(node, sid)
        node.sh(sid, "sync")  # a memory suspend does not sync the guest: this test does
        assert verb(node, sid, "suspend", "suspended")["memory"] is True
        res = verb(node, sid, "restore", "running", {"memory": False})
        assert res["memory"] is False
        check_after_boot(node, sid, pid)
    finally:
        node.kill(sid)
