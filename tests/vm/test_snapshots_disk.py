"""Disk and full snapshots and rollback on the node (issue 12, snapshots item 1).

One node and one sandbox for the module. A disk snapshot holds files the guest wrote and never
fsync'd (the node syncs the guest first), is committed under <data>/snapshots/<id>/ with
meta.json (CONTRACTS "Artifact layout"), listed and deletable; a rollback restarts the sandbox
on it (a reboot: files back as they were, later edits gone, the same identity). A full
snapshot also holds memory: a rollback onto it brings back what only lived in RAM. A `.new`
left by a crash mid-snapshot is never listed and is removed at the next start. Bad input is
400/404/409 with {code, message}.
"""
import json
import os

import pytest

from lib.platform import node_sandbox, started_node


@pytest.fixture(scope="module")
def node():
    with started_node("snapdisk") as n:
        yield n


@pytest.fixture(scope="module")
def sb(node):
    with node_sandbox(node) as sb:
        yield sb


def snapshot(node, sid, **kw):
    status, body = node.call("POST", f"/v1/sandboxes/{sid}/snapshots", kw)
    assert status == 201, (status, body)
    return body


def rollback(node, sid, snap_id):
    status, body = node.call("POST", f"/v1/sandboxes/{sid}/rollback", {"snapshot": snap_id})
    assert status == 200, (status, body)
    assert body["state"] == "running"
    return body


def test_disk_snapshot_and_rollback(node, sb):
    sid = sb["id"]
    node.sh(sid, "echo kept > /root/synced; sync; echo never-synced > /root/unsynced")
    snap = snapshot(node, sid)
    assert snap["kind"] == "disk" and snap["sandbox_id"] == sid and snap["quiesced"] is True
    assert snap["template"] == "base" and snap["bytes"] > 0
    d = os.path.join(node.data, "snapshots", snap["id"])
    assert sorted(os.listdir(d)) == ["meta.json", "rootfs.ext4"]
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    assert meta["files"]["rootfs.ext4"]["size"] == os.path.getsize(os.path.join(d, "rootfs.ext4"))
    assert len(meta["files"]["rootfs.ext4"]["sha256"]) == 64
    assert not [n for n in os.listdir(os.path.dirname(d)) if n.endswith(".new")]

    # Listed, on its own and with its sandbox's.
    status, body = node.call("GET", "/v1/snapshots")
    assert status == 200 and [s["id"] for s in body["snapshots"]] == [snap["id"]]
    status, body = node.call("GET", f"/v1/sandboxes/{sid}/snapshots")
    assert status == 200 and [s["id"] for s in body["snapshots"]] == [snap["id"]]
    status, body = node.call("GET", f"/v1/snapshots/{snap['id']}")
    assert status == 200 and body["id"] == snap["id"]
    # Idempotent under the same id (the api re-runs an operation).
    status, again = node.call("POST", f"/v1/sandboxes/{sid}/snapshots", {"id": snap["id"]})
    assert status == 200 and again["id"] == snap["id"]

    # The guest goes on: its later edits are on its disk, not in the snapshot.
    node.sh(sid, "echo edited > /root/unsynced; rm /root/synced; echo later > /root/later; "
                  "echo running-process > /dev/shm/marker")
    before = node.sh(sid, "cat /proc/sys/kernel/random/boot_id").strip()

    rollback(node, sid, snap["id"])
    # A reboot on the snapshot's disk: files as they were, the later ones gone, same identity.
    assert node.sh(sid, "cat /root/synced /root/unsynced") == "kept\nnever-synced\n"
    assert node.sh(sid, "ls /root/later /dev/shm/marker 2>&1 || true").count("No such file") == 2
    assert node.sh(sid, "hostname").strip() == sid
    assert node.sh(sid, "cat /proc/sys/kernel/random/boot_id").strip() != before
    # The snapshot is still there (a rollback does not consume it), and rolls back again.
    node.sh(sid, "echo again > /root/unsynced")
    rollback(node, sid, snap["id"])
    assert node.sh(sid, "cat /root/unsynced") == "never-synced\n"

    status, _ = node.call("DELETE", f"/v1/snapshots/{snap['id']}")
    assert status == 204
    assert not os.path.exists(d)
    status, body = node.call("DELETE", f"/v1/snapshots/{snap['id']}")
    assert status == 404 and body["code"] == 404
    status, body = node.call("GET", "/v1/snapshots")
    assert body["snapshots"] == []


def test_full_snapshot_rollback_brings_back_memory(node, sb):
    sid = sb["id"]
    node.sh(sid, "echo in-ram-1 > /dev/shm/state; echo on-disk-1 > /root/state")
    snap = snapshot(node, sid, kind="full")
    assert snap["kind"] == "full"
    d = os.path.join(node.data, "snapshots", snap["id"])
    assert sorted(os.listdir(d)) == ["meta.json", "rootfs.ext4", "vmstate"]
    # The parent kept running through it.
    node.sh(sid, "echo in-ram-2 > /dev/shm/state; echo on-disk-2 > /root/state")
    body = rollback(node, sid, snap["id"])
    assert body["timings_ms"]["mode"] == "restore"
    assert node.sh(sid, "cat /dev/shm/state /root/state") == "in-ram-1\non-disk-1\n"
    assert node.sh(sid, "hostname").strip() == sid
    status, _ = node.call("DELETE", f"/v1/snapshots/{snap['id']}")
    assert status == 204


def test_bad_requests(node, sb):
    sid = sb["id"]
    cases = [
        ("POST", f"/v1/sandboxes/{sid}/snapshots", {"kind": "memory"}, 400),
        ("POST", f"/v1/sandboxes/{sid}/snapshots", {"id": "NOT-AN-ID"}, 400),
        ("POST", f"/v1/sandboxes/{sid}/snapshots", {"name": "x"}, 400),
        ("POST", f"/v1/sandboxes/{sid}/rollback", {}, 400),
        ("POST", f"/v1/sandboxes/{sid}/rollback", {"snapshot": "a" * 20}, 404),
        ("GET", "/v1/snapshots/" + "b" * 20, None, 404),
        ("GET", "/v1/snapshots?sandbox=x", None, 400),
    ]
    for method, path, body, want in cases:
        status, reply = node.call(method, path, body)
        assert status == want, (path, body, status, reply)
        assert reply["code"] == want and reply["message"], reply


def test_crash_leftovers_are_never_listed_and_are_swept(node, sb):
    sid = sb["id"]
    root = os.path.join(node.data, "snapshots")
    os.makedirs(os.path.join(root, "c" * 20 + ".new"))
    with open(os.path.join(root, "c" * 20 + ".new", "rootfs.ext4"), "w") as f:
        f.write("half")
    status, body = node.call("GET", "/v1/snapshots")
    assert status == 200 and body["snapshots"] == []
    status, _ = node.call("GET", "/v1/snapshots/" + "c" * 20)
    assert status == 404
    node.crash()
    node.start()
    assert not os.path.exists(os.path.join(root, "c" * 20 + ".new"))
    # The sandbox was re-attached and snapshots again.
    snap = snapshot(node, sid)
    assert node.call("DELETE", f"/v1/snapshots/{snap['id']}")[0] == 204
