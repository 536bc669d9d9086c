"""Sizes (issue 11 item 5; docs/architecture.md "Sizes"): a template's default size and one
memory snapshot per size a create used.

One node with --snapshots on and two templates: base (1 vCPU, 512 MiB) and `sized`, the base
recipe with templates/sized/size = 2 vCPUs, 768 MiB.
- GET /v1/templates and `space template ls` show each template's default size;
- a create of `sized` that gives no size gets 2/768, and the guest agrees (nproc, MemTotal);
- a create of base at 2/768: the first cold-boots (no snapshot of that size yet) and starts
  that size's snapshot; once the listing shows it ready, the next create at that size restores
  from it (timings_ms.mode), its guest at 2/768 too; base's own size keeps its snapshot;
- at most 4 sizes per template: a fifth evicts the least recently used (off the disk too);
- stale snapshot directories are removed at node start;
- a bad size in a recipe fails the build naming the line.
"""
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from lib.platform import (DATA_ROOT, ROOT, SPACE, build_sized_template, node_sandbox,
                          started_node)

SIZE = {"vcpus": 2, "memory_mb": 768}


@pytest.fixture(scope="module")
def node():
    with started_node("sizes", extra_args=["--snapshots", "on"]) as n:
        n.stop()
        build_sized_template(n, "sized", 2, 768)
        n.start()
        yield n


def templates(node):
    status, body = node.call("GET", "/v1/templates")
    assert status == 200, body
    return {t["name"]: t for t in body["templates"]}


def snapshot_status(node, name, vcpus, memory_mb):
    for s in templates(node)[name]["snapshots"]:
        if (s["vcpus"], s["memory_mb"]) == (vcpus, memory_mb):
            return s["status"]
    return "none"


def wait_snapshot(node, name, vcpus, memory_mb, timeout=900):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = snapshot_status(node, name, vcpus, memory_mb)
        if status == "ready":
            return
        assert status in ("building", "none"), (status, node.log())
        time.sleep(1)
    raise AssertionError(f"snapshot of {name} at {vcpus}/{memory_mb} not ready: {node.log()}")


def guest_size(node, sid):
    """(nproc, MemTotal in MiB) as the guest sees them."""
    out = node.sh(sid, "nproc; awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo").split()
    return int(out[0]), int(out[1])


def assert_guest_is(node, sb, vcpus, memory_mb):
    assert (sb["vcpus"], sb["memory_mb"]) == (vcpus, memory_mb), sb
    nproc, mem = guest_size(node, sb["id"])
    assert nproc == vcpus, (nproc, sb)
    # MemTotal is the RAM less what the kernel keeps for itself (a few tens of MiB here).
    assert memory_mb - 96 <= mem <= memory_mb, (mem, sb)


def test_listing_shows_default_sizes(node):
    t = templates(node)
    assert (t["base"]["vcpus"], t["base"]["memory_mb"]) == (1, 512), t["base"]
    assert (t["sized"]["vcpus"], t["sized"]["memory_mb"]) == (2, 768), t["sized"]
    out = node.cli("template", "ls", check=True).stdout.decode()
    lines = {line.split("\t")[0]: line.split("\t") for line in out.splitlines()[1:]}
    assert lines["sized"][1:3] == ["2", "768"], out
    assert lines["base"][1:3] == ["1", "512"], out


def test_create_without_size_gets_the_templates(node):
    with node_sandbox(node, template="sized") as sb:
        assert_guest_is(node, sb, 2, 768)
    # The listing started the snapshot of sized's default size: creates restore from it.
    wait_snapshot(node, "sized", 2, 768)
    with node_sandbox(node, template="sized") as sb:
        assert sb["timings_ms"]["mode"] == "restore", sb
        assert_guest_is(node, sb, 2, 768)


def test_one_snapshot_per_size_made_on_demand(node):
    wait_snapshot(node, "base", 1, 512)
    assert snapshot_status(node, "base", 2, 768) == "none"
    with node_sandbox(node, template="base", **SIZE) as sb:
        # No snapshot of this size yet: a cold boot, which starts that size's snapshot.
        assert sb["timings_ms"]["mode"] == "boot", sb
        assert_guest_is(node, sb, 2, 768)
    wait_snapshot(node, "base", 2, 768)
    t0 = time.monotonic()
    with node_sandbox(node, template="base", **SIZE) as sb:
        took = time.monotonic() - t0
        assert sb["timings_ms"]["mode"] == "restore", sb
        assert_guest_is(node, sb, 2, 768)
    # Both sizes listed, each ready, the most recently used first; base's default is kept.
    snaps = templates(node)["base"]["snapshots"]
    assert {(s["vcpus"], s["memory_mb"], s["status"]) for s in snaps} >= {
        (1, 512, "ready"), (2, 768, "ready")}, snaps
    assert templates(node)["base"]["snapshot"] == "ready"
    out = node.cli("template", "ls", check=True).stdout.decode()
    assert "2x768:ready" in out and "1x512:ready" in out, out
    with node_sandbox(node, template="base") as sb:
        assert sb["timings_ms"]["mode"] == "restore", sb
        assert_guest_is(node, sb, 1, 512)
    print(f"restore at 2/768 took {took:.1f} s")


def test_sizes_are_bounded_least_recently_used_evicted(node):
    # base has 1/512 (its default: every listing uses it) and 2/768 (the test above); three
    # more sizes make five, past SNAPSHOT_SIZES_MAX 4: 2/768, used least recently, goes.
    wait_snapshot(node, "base", 2, 768)
    for mem in (256, 384, 640):
        with node_sandbox(node, template="base", vcpus=1, memory_mb=mem) as sb:
            assert sb["timings_ms"]["mode"] == "boot", sb
        wait_snapshot(node, "base", 1, mem)
    snaps = templates(node)["base"]["snapshots"]
    assert {(s["vcpus"], s["memory_mb"]) for s in snaps} == {
        (1, 512), (1, 256), (1, 384), (1, 640)}, snaps
    assert len(os.listdir(os.path.join(node.data, "templates/base/snapshots"))) == 4
    assert "takes the place of 2 vcpus, 768 MiB" in open(node.log_path).read()
    # Asked again, 2/768 is made again (and another goes): a cold boot first.
    with node_sandbox(node, template="base", **SIZE) as sb:
        assert sb["timings_ms"]["mode"] == "boot", sb
    wait_snapshot(node, "base", 2, 768)
    assert len(os.listdir(os.path.join(node.data, "templates/base/snapshots"))) == 4


def test_stale_snapshot_dirs_removed_at_start(node):
    base = os.path.join(node.data, "templates/base/snapshots")
    kept = sorted(os.listdir(base))
    os.makedirs(os.path.join(base, "0" * 64 + ".tmp"))
    os.makedirs(os.path.join(base, "f" * 64))
    node.stop()
    node.start()
    assert sorted(os.listdir(base)) == kept
    assert "stale (no current key)" in open(node.log_path).read()


@pytest.mark.parametrize("size,needle", [
    ("vcpus=0\n", "positive integer"),
    ("vcpus=17\n", "1..16"),
    ("memory_mb=64\n", "128..65536"),
    ("vcpus=2\nvcpus=2\n", "given twice"),
    ("cpus=2\n", "unknown key"),
    ("vcpus 2\n", "key=value"),
])
def test_bad_size_file_fails_the_build(node, size, needle):
    share = tempfile.mkdtemp(prefix="test-share-", dir=DATA_ROOT)
    try:
        os.symlink(os.path.join(ROOT, "tools"), os.path.join(share, "tools"))
        recipe = os.path.join(share, "templates", "badsize")
        os.makedirs(recipe)
        for f in ("packages", "setup.sh"):
            os.symlink(os.path.join(ROOT, "templates/base", f), os.path.join(recipe, f))
        with open(os.path.join(recipe, "size"), "w") as f:
            f.write(size)
        res = subprocess.run([SPACE, "template", "build", "badsize"], timeout=120,
                             env=dict(node.env, SPACE_SHARE_DIR=share), capture_output=True,
                             text=True)
        assert res.returncode != 0, res.stderr
        assert needle in res.stderr and "size:" in res.stderr, res.stderr
        assert not os.path.exists(os.path.join(node.data, "templates/badsize"))
    finally:
        shutil.rmtree(share)
