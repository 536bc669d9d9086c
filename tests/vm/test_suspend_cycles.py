"""Ten suspend/restore cycles in a row at the node (issue 12, E2B#884), one sandbox.

Before each suspend a file is written and never fsync'd (only the guest's page cache has
it) and another is written and synced; after each restore every file of every earlier
cycle reads back, the counting process is the same pid and its count went on from where it
was. (tests/vm/test_pause.py runs three cycles with a node crash; this is the long run.)
"""
import time

import pytest

from lib.platform import COUNTER, started_node

CYCLES = 10


@pytest.fixture(scope="module")
def node():
    with started_node("suspendcycles") as n:
        yield n


def verb(node, sid, name, want):
    status, body = node.call("POST", f"/v1/sandboxes/{sid}/{name}")
    assert status == 200 and body["state"] == want, (name, status, body)
    return body


def test_ten_cycles_keep_memory_and_unsynced_files(node):
    sid = node.create()["id"]
    try:
        node.sh(sid, f"nohup sh -c '{COUNTER}' >/dev/null 2>&1 & echo $! > /dev/shm/pid")
        time.sleep(1)
        pid = node.sh(sid, "cat /dev/shm/pid").strip()
        last = 0
        for cycle in range(1, CYCLES + 1):
            node.sh(sid, f"echo u{cycle} > /root/unsynced-{cycle}; "
                          f"echo s{cycle} > /root/synced-{cycle} && sync /root/synced-{cycle}")
            count = int(node.sh(sid, "cat /dev/shm/count"))
            assert count >= last, (cycle, count, last)
            verb(node, sid, "suspend", "suspended")
            verb(node, sid, "restore", "running")
            after = int(node.sh(sid, "cat /dev/shm/count"))
            assert after >= count, (cycle, after, count)
            assert node.sh(sid, f"kill -0 {pid} && echo alive").strip() == "alive", cycle
            for k in range(1, cycle + 1):
                got = node.sh(sid, f"cat /root/unsynced-{k} /root/synced-{k}").split()
                assert got == [f"u{k}", f"s{k}"], (cycle, k, got)
            last = after
        time.sleep(0.5)
        assert int(node.sh(sid, "cat /dev/shm/count")) > last, "the counter still counts"
    finally:
        node.kill(sid)
