"""Snapshot and restore in the qemu runtime on a real VM (issue 11; runtime.h snapshot/restore).

The runtime-probe driver (src/node/runtime-probe.c) cold-boots a sandbox, writes a file to its
disk and starts a process that counts in RAM (/dev/shm), pauses, snapshots, stops the VMM,
restores into a fresh VMM that it then forgets and re-attaches by pid and start time (what a
restarted node does), resumes, and reads both back.
"""
import json
import os
import subprocess

import pytest

from lib.platform import BUILD, Node, live_qemu_pids, netns_names

PROBE = os.path.join(BUILD, "src/node/runtime-probe")


@pytest.fixture(scope="module")
def node():
    n = Node("snaprt")  # only its data dir and template: the probe drives the runtime itself
    yield n
    n.destroy()


def test_suspend_restore_keeps_memory_and_disk(node):
    res = subprocess.run([PROBE, "suspend-restore", node.data, "base"], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    pid_before, count_before = map(int, out["before"].split())
    file_line, counter_line = out["after"].splitlines()
    pid_after, count_after = map(int, counter_line.split())
    pid_later, count_later = map(int, out["later"].split())
    assert file_line == "on-disk"
    # The same process, its counter (in guest RAM only) carried over and still counting.
    assert pid_after == pid_before == pid_later
    assert count_after >= count_before
    assert count_later > count_after
    # The full RAM went into the state file (anonymous memory): far more than device state.
    assert out["vmstate_bytes"] > 1 << 20
    # A snapshot of a running VM is refused; a paused VM resumes after its snapshot.
    assert out["resume_after_snapshot"] == 0
    assert out["snapshot_running"] == os.strerror(16)  # EBUSY
    # A restore whose memory mode does not match the snapshot never starts a guest.
    assert out["restore_wrong_memory"] == os.strerror(22)  # EINVAL
    # Nothing left behind: no VMM, no instance directory, no netns.
    assert not live_qemu_pids(node.data)
    assert node.instances() == []
    assert f"space-{out['iid']}" not in netns_names()
