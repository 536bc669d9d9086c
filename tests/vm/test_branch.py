"""Branching (issue 12): new sandboxes created from a full snapshot of a sandbox, end to end
through space-api (native "snapshot" on create) onto real VMs.

The source has a file on disk and a process whose state lives only in memory (a counter in
/dev/shm, tmpfs: RAM). Two sandboxes created from its snapshot both see the file and the
counter going on from where it was (memory restored, not rebooted), each under its own
identity (hostname = its id, a fresh machine-id and boot-time RNG reseed, its own token) and
network slot; a write in one is invisible to the other and to the source (copy-on-write
disks). The source killed, a third create from the snapshot still works; the snapshot deleted,
a create from it is 404. One platform for the module.
"""
import base64
import time

import pytest

from lib.platform import COUNTER, store_platform

# Written by the agent's /init where it may (identity.c); absent otherwise.
MACHINE_ID = "cat /etc/machine-id 2>/dev/null; true"


@pytest.fixture(scope="module")
def plat():
    with store_platform("branch", "sqlite") as p:
        yield p


def create(plat, **body):
    status, res = plat.admin("POST", "/v1/sandboxes?wait=true", body)
    assert status == 201, res
    return res


def kill(plat, sid):
    assert plat.admin("DELETE", f"/v1/sandboxes/{sid}?wait=true")[0] in (204, 404)


def counter(plat, sid):
    return int(plat.sh(sid, "cat /dev/shm/count").strip())


def test_two_branches_are_independent_and_outlive_the_source(plat):
    src = create(plat, template="base")["id"]
    created = []
    try:
        plat.sh(src, "echo from-source > /root/file; "
                      f"nohup sh -c '{COUNTER}' >/dev/null 2>&1 & echo $! > /dev/shm/pid")
        deadline = time.monotonic() + 60
        while counter_or_zero(plat, src) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        status, snap = plat.admin("POST", f"/v1/sandboxes/{src}/snapshots?wait=true",
                                  {"name": "branch-base"})
        assert status == 201 and snap["kind"] == "full", snap
        at_snapshot = counter(plat, src)
        src_machine = plat.sh(src, MACHINE_ID)

        t0 = time.monotonic()
        a = create(plat, snapshot=snap["id"])
        t1 = time.monotonic()
        b = create(plat, snapshot=snap["id"])
        print(f"api create from a snapshot (wait): {(t1 - t0) * 1000:.0f} ms, "
              f"{(time.monotonic() - t1) * 1000:.0f} ms")
        for sb in (a, b):
            print("node timings_ms:", plat.node.call("GET", f"/v1/sandboxes/{sb['id']}")[1]
                  .get("timings_ms"))
        created += [a["id"], b["id"]]
        assert a["template"] == snap["id"], a
        for sb in (a, b):
            assert sb["state"] == "running", sb
            sid = sb["id"]
            assert plat.sh(sid, "cat /root/file") == "from-source\n"
            # Memory came back: the counter process runs on from the snapshot's count (a boot
            # would have no /dev/shm/count and no process).
            pid = plat.sh(sid, "cat /dev/shm/pid").strip()
            assert plat.sh(sid, f"kill -0 {pid} && echo alive") == "alive\n"
            first = counter(plat, sid)
            assert first >= at_snapshot - 1, (first, at_snapshot)
            time.sleep(1)
            assert counter(plat, sid) > first
            # Its own identity.
            assert plat.sh(sid, "hostname").strip() == sid
            assert not src_machine or plat.sh(sid, MACHINE_ID) != src_machine
        assert not src_machine or plat.sh(a["id"], MACHINE_ID) != plat.sh(b["id"], MACHINE_ID)

        # Copy-on-write: a write in one is seen by nobody else.
        plat.sh(a["id"], "echo only-a > /root/file; echo a > /root/new; sync")
        assert plat.sh(b["id"], "cat /root/file") == "from-source\n"
        assert plat.sh(b["id"], "test -e /root/new || echo absent") == "absent\n"
        assert plat.sh(src, "cat /root/file") == "from-source\n"
        assert plat.sh(a["id"], "cat /root/file") == "only-a\n"

        # A branch is a sandbox like any: its own snapshot branches again, from the template
        # the first came from.
        status, snap_a = plat.admin("POST", f"/v1/sandboxes/{a['id']}/snapshots?wait=true", {})
        assert status == 201 and snap_a["template"] == "base", snap_a
        aa = create(plat, snapshot=snap_a["id"])
        created.append(aa["id"])
        assert plat.sh(aa["id"], "cat /root/file /root/new") == "only-a\na\n"
        assert plat.admin("DELETE", f"/v1/snapshots/{snap_a['id']}")[0] == 204

        # The source gone, the snapshot still creates.
        kill(plat, src)
        c = create(plat, snapshot=snap["id"])
        created.append(c["id"])
        assert plat.sh(c["id"], "cat /root/file") == "from-source\n"
        assert plat.sh(c["id"], "hostname").strip() == c["id"]

        assert plat.admin("DELETE", f"/v1/snapshots/{snap['id']}")[0] == 204
        status, res = plat.admin("POST", "/v1/sandboxes", {"snapshot": snap["id"]})
        assert status == 404, res
        # Sandboxes made from it live on without it.
        assert plat.sh(c["id"], "cat /root/file") == "from-source\n"
    finally:
        for sid in [src] + created:
            kill(plat, sid)


def counter_or_zero(plat, sid):
    status, res = plat.admin("POST", f"/v1/sandboxes/{sid}/exec",
                             {"cmd": "sh", "args": ["-c", "cat /dev/shm/count 2>/dev/null"],
                              "user": "root"})
    out = base64.b64decode(res.get("stdout_b64", "")).decode().strip() if status == 200 else ""
    return int(out) if out.isdigit() else 0


RANDOM = "head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'"


def test_branch_a_running_sandbox_into_three(plat):
    """POST /v1/sandboxes/{id}/branch {count: 3}: one capture of the running parent (memory and
    disk at one instant; it runs on), three sandboxes restored from it, each its own."""
    src = create(plat, template="base", env={"FROM": "parent"})["id"]
    made = []
    try:
        # A file synced to disk, one only in the page cache (never fsync'd: only the memory
        # capture has it), and the counter, which lives in RAM only.
        plat.sh(src, "echo synced > /root/synced; sync; echo cached > /root/cached; "
                      f"nohup sh -c '{COUNTER}' >/dev/null 2>&1 & echo $! > /dev/shm/pid")
        deadline = time.monotonic() + 60
        while counter_or_zero(plat, src) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        before = counter(plat, src)
        t0 = time.monotonic()
        status, res = plat.admin("POST", f"/v1/sandboxes/{src}/branch", {"count": 3})
        print(f"branch into 3: {(time.monotonic() - t0) * 1000:.0f} ms")
        assert status == 201, res
        assert all(set(i) == {"sandbox"} for i in res["sandboxes"]), res
        made = [i["sandbox"]["id"] for i in res["sandboxes"]]
        assert len(set(made)) == 3 and src not in made, made
        # The intermediate snapshot is gone: the branches need nothing of it (branch.h).
        assert plat.admin("GET", "/v1/snapshots")[1]["snapshots"] == []

        pid = plat.sh(src, "cat /dev/shm/pid").strip()
        firsts = {}
        for sid in made:
            sb = plat.admin("GET", f"/v1/sandboxes/{sid}")[1]
            assert sb["state"] == "running" and sb["template"] == "base", sb
            assert plat.sh(sid, "cat /root/synced /root/cached") == "synced\ncached\n"
            assert plat.sh(sid, f"kill -0 {pid} && echo alive") == "alive\n"
            firsts[sid] = counter(plat, sid)
            assert firsts[sid] >= before, (firsts, before)
            assert plat.sh(sid, "hostname").strip() == sid
            assert plat.sh(sid, 'echo "$E2B_SANDBOX_ID $FROM"') == f"{sid} parent\n"
        time.sleep(1)
        for sid in made:
            assert counter(plat, sid) > firsts[sid]  # each counter runs on, in its own VM
        # The parent ran on through it all.
        assert counter(plat, src) > before
        assert plat.sh(src, "hostname").strip() == src

        # Each has its own RNG state: no two read the same bytes, nor the parent's.
        rand = [plat.sh(sid, RANDOM) for sid in [src] + made]
        assert len(set(rand)) == 4 and all(len(r) == 32 for r in rand), rand
        machines = [plat.sh(sid, MACHINE_ID) for sid in [src] + made]
        assert not machines[0] or len(set(machines)) == 4, machines

        # They diverge: a write or a kill in one is seen by nobody else.
        for i, sid in enumerate(made):
            plat.sh(sid, f"echo branch-{i} > /root/cached")
        plat.sh(made[0], f"kill {pid}")
        for i, sid in enumerate(made):
            assert plat.sh(sid, "cat /root/cached") == f"branch-{i}\n"
        assert plat.sh(src, "cat /root/cached") == "cached\n"
        assert plat.sh(made[1], f"kill -0 {pid} && echo alive") == "alive\n"
        assert plat.sh(src, f"kill -0 {pid} && echo alive") == "alive\n"
    finally:
        for sid in [src] + made:
            kill(plat, sid)
