"""Create by restoring a template snapshot (issue 11; snapshot.h, vm.c create path).

One node with --snapshots on: it builds the base template's snapshot in the background, creates
restore from it copy-on-write, and every clone is re-identified (hostname, machine-id, CRNG
reseeded with fresh entropy, clock). A corrupt snapshot is detected and rebuilt, never restored.
"""
import glob
import os
import time

import pytest

from lib.platform import node_sandbox, started_node


@pytest.fixture(scope="module")
def node():
    with started_node("fast", extra_args=["--snapshots", "on"]) as n:
        yield n


def snapshot_state(node):
    status, body = node.call("GET", "/v1/templates")
    assert status == 200, body
    return {t["name"]: t.get("snapshot") for t in body["templates"]}["base"]


def wait_snapshot_ready(node, timeout=600):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = snapshot_state(node)  # listing also starts the build
        if state == "ready":
            return
        assert state in ("building", "none"), (state, node.log())
        time.sleep(0.5)
    raise AssertionError(f"snapshot not ready: {node.log()}")


IDENTITY = ("hostname; cat /etc/machine-id; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'; "
            "echo; python3 -c 'import os; print(os.urandom(32).hex())'; date +%s")


def test_clones_differ_and_are_isolated(node):
    wait_snapshot_ready(node)
    with node_sandbox(node) as a, node_sandbox(node) as b:
        assert a["timings_ms"]["mode"] == "restore", a
        assert b["timings_ms"]["mode"] == "restore", b
        ids = {}
        for sb in (a, b):
            host, machine_id, urandom, pyrandom, clock = node.sh(sb["id"], IDENTITY).split()
            assert host == sb["id"]
            assert len(machine_id) == 32
            assert abs(int(clock) - time.time()) < 30  # stepped to the host's clock at create
            ids[sb["id"]] = (machine_id, urandom, pyrandom)
        (ma, ua, pa), (mb, ub, pb) = ids.values()
        assert ma != mb and ua != ub and pa != pb
        # A write to one clone's memory (tmpfs) or disk is invisible to the other.
        node.sh(a["id"], "echo a > /dev/shm/only-a && echo a > /root/only-a && sync")
        assert node.sh(b["id"], "ls /dev/shm/only-a /root/only-a 2>/dev/null; true") == ""
        assert node.sh(a["id"], "cat /dev/shm/only-a /root/only-a") == "a\na\n"


def test_corrupt_snapshot_is_rebuilt_not_restored(node):
    wait_snapshot_ready(node)
    node.stop()
    (memory,) = glob.glob(os.path.join(node.data, "templates/base/snapshots/*/memory"))
    os.truncate(memory, os.path.getsize(memory) // 2)
    node.start()
    with node_sandbox(node) as sb:
        # Detected when the node first looks at it: the create cold-boots meanwhile.
        assert sb["timings_ms"]["mode"] == "boot", sb
    wait_snapshot_ready(node)
    assert "is bad" in open(node.log_path).read()
    with node_sandbox(node) as sb:
        assert sb["timings_ms"]["mode"] == "restore", sb
        assert node.sh(sb["id"], "echo ok") == "ok\n"


def test_failed_restore_falls_back_to_cold_boot(node):
    node.stop()
    os.environ["SPACE_FAULT"] = "create.restore:fail"
    try:
        node.start()
    finally:
        del os.environ["SPACE_FAULT"]
    wait_snapshot_ready(node)  # verified by this node process: a create restores from it
    with node_sandbox(node) as sb:
        assert sb["timings_ms"]["mode"] == "boot", sb
        assert node.sh(sb["id"], "echo ok") == "ok\n"
    assert "failed, cold booting" in open(node.log_path).read()
    # The failure made the node verify the snapshot again; it is sound, so it is ready again.
    wait_snapshot_ready(node)
    node.stop()
    node.start()
