"""Crash and fail a create at every step (basic/fault.h: SPACE_FAULT=name:action).

For each fault point in vm_create(), space-node is started with that point armed; the create
kills the node there (SIGKILL, as a kill -9 would) or fails the step. A restarted node must then
either have the sandbox running (the crash came after the record said so) or have removed
every trace of it: no instance directory, no QEMU, no netns.
"""
import os

import pytest

from lib.platform import Node, live_qemu_pids, netns_names

# In the order vm_create() passes them.
POINTS = ["create.record", "create.clone", "create.network", "create.vmm", "create.record-vmm",
          "create.ready", "create.init", "create.running"]


def space_netns(node, iids):
    return [f"space-{i}" for i in iids if f"space-{i}" in netns_names()]


@pytest.fixture(scope="module")
def node():
    n = Node("faults")
    yield n
    n.destroy()


@pytest.mark.parametrize("point", POINTS)
def test_crash_of_create_at_every_step(node, point):
    start_with_fault(node, f"{point}:crash")
    iids_before = set(node.instances())
    with pytest.raises(Exception):
        # init makes create.init reachable (the agent's POST /init).
        node.call("POST", "/v1/sandboxes", {"init": {"envVars": {"A": "1"}}}, timeout=300)
    node.proc.wait(timeout=30)
    node.proc = None
    made = set(node.instances()) - iids_before
    assert len(made) <= 1
    node.start()
    status, body = node.call("GET", "/v1/sandboxes")
    if point == "create.running":
        # The record said running before the crash: the sandbox survives, and works.
        assert len(body["sandboxes"]) == 1, body
        sb = body["sandboxes"][0]
        assert node.exec(sb["id"], "sh", "-c", "echo $A")["stdout"] == b"1\n"
        node.kill(sb["id"])
    else:
        assert body["sandboxes"] == [], body
    assert node.instances() == [], node.instances()
    assert not live_qemu_pids(node.data)
    assert not space_netns(node, made)
    node.stop()


@pytest.mark.parametrize("point", ["create.network", "create.ready", "create.running"])
def test_failed_step_cleans_up(node, point):
    start_with_fault(node, f"{point}:fail")
    status, body = node.call("POST", "/v1/sandboxes", {})
    assert status == 500 and "Input/output error" in body["message"], (status, body)
    assert node.call("GET", "/v1/sandboxes")[1]["sandboxes"] == []
    assert node.instances() == []
    assert not live_qemu_pids(node.data)
    node.stop()


def start_with_fault(node, spec):
    saved = dict(os.environ)
    os.environ["SPACE_FAULT"] = spec
    try:
        node.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
