"""Disk I/O and disk size (issue 13 item 2), as root inside a guest: a dd flood is throttled
by QEMU's block layer to about the node's --disk-bps / --disk-iops, a guest that fills its disk
gets ENOSPC in its own filesystem while the host file never grows past the image size, and a
quiet sandbox keeps answering exec while a neighbour floods its disk (the latency ratio is
printed, not asserted tightly: VMs run under TCG on a shared host).
"""
import os
import re
import time

import pytest

from lib.platform import live_qemu_pids, node_sandbox, started_node

from test_limits import exec_latency

BPS = 4 << 20  # the throttled node's --disk-bps
IOPS = 100     # and --disk-iops


def sh(node, sid, script, timeout_ms=600000):
    return node.exec(sid, "sh", "-c", script, user="root", timeout_ms=timeout_ms)


def dd_rate(node, sid, args):
    """Runs dd as root in the guest; (bytes, seconds) from its own summary line."""
    res = sh(node, sid, f"dd if=/dev/zero of=/root/flood oflag=direct {args} 2>&1; "
                        f"rm -f /root/flood")
    out = res["stdout"].decode()
    m = re.search(r"(\d+) bytes .* copied, ([0-9.e+-]+) s", out)
    assert res["exit_code"] == 0 and m, out
    return int(m.group(1)), float(m.group(2))


@pytest.fixture(scope="module")
def throttled():
    with started_node("io-throttled", extra_args=("--disk-bps", str(BPS),
                                                  "--disk-iops", str(IOPS))) as n:
        yield n


def test_dd_flood_is_throttled(throttled):
    with node_sandbox(throttled, memory_mb=256) as sb:
        cmd = " ".join(open(f"/proc/{live_qemu_pids(throttled.instance_dir(sb))[0]}/cmdline")
                       .read().split("\0"))
        assert f"throttling.bps-total={BPS}" in cmd and f"throttling.iops-total={IOPS}" in cmd
        size, secs = dd_rate(throttled, sb["id"], "bs=1M count=24")
        bps = size / secs
        n, secs4k = dd_rate(throttled, sb["id"], "bs=4k count=300")
        iops = n / 4096 / secs4k
        print(f"guest dd oflag=direct: bs=1M {bps / (1 << 20):.2f} MiB/s (limit "
              f"{BPS / (1 << 20):.0f}), bs=4k {iops:.0f} writes/s (limit {IOPS})")
        assert bps < 3 * BPS, bps
        assert iops < 3 * IOPS, iops


@pytest.fixture(scope="module")
def node():
    with started_node("io-default") as n:  # the default limits (100 MiB/s, 5000 IOPS)
        yield n


def test_disk_fill_gives_enospc_in_the_guest(node):
    with node_sandbox(node, memory_mb=256) as sb:
        disk = os.path.join(node.instance_dir(sb), "rootfs.ext4")
        size = os.stat(disk).st_size
        t = time.monotonic()
        res = sh(node, sb["id"], "dd if=/dev/zero of=/fill bs=1M 2>&1; echo rc=$?; sync; "
                                 "df -k / | tail -1")
        out = res["stdout"].decode()
        st = os.stat(disk)
        print(f"guest filled its {size >> 20} MiB disk in {time.monotonic() - t:.0f} s; host "
              f"file {st.st_size >> 20} MiB, {st.st_blocks * 512 >> 20} MiB allocated: "
              f"{out.splitlines()[-1]}")
        assert "No space left on device" in out and "rc=1" in out, out
        assert st.st_size == size and st.st_blocks * 512 <= size + (1 << 20), (st, size)
        # The sandbox still works, and gets its space back.
        assert sh(node, sb["id"], "rm /fill && echo ok")["stdout"] == b"ok\n"
        assert node.exec(sb["id"], "python3", "-c", "print(6 * 7)")["stdout"] == b"42\n"
        assert os.stat(disk).st_size == size


FLOOD = ("end=$(($(date +%s) + 60)); while [ $(date +%s) -lt $end ]; do "
         "dd if=/dev/zero of=/root/flood bs=1M count=64 oflag=direct 2>/dev/null; "
         "rm -f /root/flood; done")


def test_quiet_sandbox_answers_during_a_neighbours_io_flood(node):
    with node_sandbox(node, memory_mb=256) as quiet, node_sandbox(node, memory_mb=256) as noisy:
        base = exec_latency(node, quiet["id"])
        res = node.exec(noisy["id"], "sh", "-c", "setsid sh -c \"$FLOOD\" </dev/null "
                        ">/dev/null 2>&1 &", env={"FLOOD": FLOOD}, user="root")
        assert res["exit_code"] == 0, res
        time.sleep(5)
        loaded = exec_latency(node, quiet["id"])
        print(f"quiet sandbox exec latency: idle {base * 1000:.0f} ms, neighbour flooding its "
              f"disk {loaded * 1000:.0f} ms ({loaded / base:.1f}x)")
        assert loaded < 20 * base + 10, (base, loaded)
        assert node.exec(quiet["id"], "python3", "-c", "print(6 * 7)")["stdout"] == b"42\n"


def test_a_create_asks_its_own_disk_limits(node):
    """A create's disk_bps / disk_iops within the node's maxima throttle that sandbox alone
    (its VMM's command line, dd as root); beyond them, or not integers, 400."""
    with node_sandbox(node, memory_mb=256, disk_bps=BPS, disk_iops=IOPS) as sb:
        assert sb["disk_bps"] == BPS and sb["disk_iops"] == IOPS, sb
        cmd = " ".join(open(f"/proc/{live_qemu_pids(node.instance_dir(sb))[0]}/cmdline")
                       .read().split("\0"))
        assert f"throttling.bps-total={BPS}" in cmd and f"throttling.iops-total={IOPS}" in cmd
        size, secs = dd_rate(node, sb["id"], "bs=1M count=16")
        print(f"a create's disk_bps {BPS >> 20} MiB/s: guest dd {size / secs / (1 << 20):.2f} "
              f"MiB/s")
        assert size / secs < 3 * BPS, size / secs
    for key, bad, words in (("disk_bps", (100 << 20) + 1, "between 4096 and 104857600"),
                            ("disk_bps", 100, "between"), ("disk_iops", 5001, "--disk-iops"),
                            ("disk_iops", "many", "integer")):
        status, body = node.call("POST", "/v1/sandboxes", {key: bad})
        assert status == 400 and words in body["message"], (key, bad, status, body)
    assert node.instances() == []
