"""A guest that dies (issue 13 item 4): a guest kernel panic, root in the guest rebooting,
powering off or halting it, a SIGKILL of the VMM from the host and an OOM kill of the VMM by
its cgroup each end with the sandbox reported failed with its
reason (node GET /v1/sandboxes "failed", GET /v1/sandboxes/{id} 404 naming it) and nothing of it
left: no VMM, instance dir (disk clone), netns (and the tap in it) or cgroup; the failed list
outlives a crash of the node. Through space-api
the sandbox ends killed with error "<reason>: <message>" and `reason` (native GET), and E2B's
getInfo answers 404 as for a killed one.
"""
import os
import signal
import subprocess
import time

import pytest

from lib.platform import e2b, live_qemu_pids, netns_names, started_node, store_platform

from test_jail import vmm_cgroups


@pytest.fixture(scope="module")
def node():
    with started_node("death") as n:
        yield n


def wait_failed(node, sid, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = node.call("GET", "/v1/sandboxes")
        assert status == 200, body
        for f in body["failed"]:
            if f["id"] == sid:
                assert all(s["id"] != sid for s in body["sandboxes"]), body
                return f
        time.sleep(0.5)
    raise AssertionError(f"sandbox {sid} never reported failed: {node.log()}")


def assert_freed(node, sb, cgroups):
    sid, iid = sb["id"], sb["instance_id"]
    status, body = node.call("GET", f"/v1/sandboxes/{sid}")
    assert status == 404, (status, body)
    assert f"sandbox '{sid}' failed: " in body["message"], body
    assert live_qemu_pids(node.instance_dir(sb)) == []
    assert not os.path.exists(node.instance_dir(sb))
    assert f"space-{iid}" not in netns_names()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert iid not in links, links
    for d in cgroups.values():
        assert not os.path.exists(d), d


def dying(node, **kw):
    sb = node.create(**kw)
    pid = live_qemu_pids(node.instance_dir(sb))[0]
    return sb, pid, vmm_cgroups(pid)


def test_guest_kernel_panic(node):
    sb, _, cg = dying(node, memory_mb=256)
    # Detached and delayed, so the exec returns before the guest goes away.
    res = node.exec(sb["id"], "sh", "-c",
                    "echo 1 > /proc/sys/kernel/sysrq && "
                    "(setsid sh -c 'sleep 1; echo c > /proc/sysrq-trigger' "
                    "</dev/null >/dev/null 2>&1 &)", user="root")
    assert res["exit_code"] == 0, res
    f = wait_failed(node, sb["id"])
    assert f["reason"] == "panic", f
    assert "Kernel panic" in f["message"] and "sysrq" in f["message"], f
    assert_freed(node, sb, cg)


# reboot(2) commands (linux/reboot.h), called by root in the guest as `reboot -f`,
# `poweroff -f` and `halt -f` do: no init system in between.
REBOOT_CMDS = {"restart": 0x01234567, "power_off": 0x4321FEDC, "halt": 0xCDEF0123}


@pytest.mark.parametrize("cmd", sorted(REBOOT_CMDS))
def test_guest_stops_itself(node, cmd):
    """Root in the guest rebooting, powering off or halting it: QEMU exits on the reset
    (-no-reboot); a halt or power-off (no power-off method with acpi=off) leaves QEMU
    alive with its vCPUs stopped for ever, which the node finds on the console and
    reaps all the same."""
    sb, _, cg = dying(node, memory_mb=256)
    call = f"import ctypes; ctypes.CDLL(None, use_errno=True).reboot({REBOOT_CMDS[cmd]})"
    res = node.exec(sb["id"], "sh", "-c",
                    "(setsid sh -c 'sleep 1; python3 -c \"$CALL\"' "
                    "</dev/null >/dev/null 2>&1 &)", user="root", env={"CALL": call})
    assert res["exit_code"] == 0, res
    f = wait_failed(node, sb["id"], timeout=120)
    assert f["reason"] == "shutdown", f
    assert ("halted" in f["message"]) == (cmd != "restart"), f
    assert_freed(node, sb, cg)


def test_vmm_sigkill(node):
    sb, pid, cg = dying(node, memory_mb=256)
    # SIGKILL: QEMU is its pid namespace's init, which ignores signals it has no handler for
    # (SIGSEGV from outside) but never SIGKILL.
    os.kill(pid, signal.SIGKILL)
    f = wait_failed(node, sb["id"])
    assert f["reason"] == "vmm_crashed", f
    assert "signal 9" in f["message"], f
    assert_freed(node, sb, cg)
    # The failed list outlives a crash of the node (<data>/failed.json): the api's next
    # sync still learns the reason.
    node.crash()
    node.start()
    assert wait_failed(node, sb["id"], timeout=5) == f
    assert_freed(node, sb, cg)


def test_vmm_oom_kill(node):
    sb, pid, cg = dying(node, memory_mb=256)
    mem = cg.get("memory", cg.get(""))
    v1 = "memory" in cg
    usage = int(open(os.path.join(mem, "memory.usage_in_bytes" if v1 else "memory.current"))
                .read())
    # A little room above what the VMM uses now: the guest touching 200 MiB more cannot fit.
    with open(os.path.join(mem, "memory.limit_in_bytes" if v1 else "memory.max"), "w") as f:
        f.write(str(usage + (32 << 20)))
    # Detached: the exec returns, then the guest writes every page of 200 MiB.
    res = node.exec(sb["id"], "sh", "-c",
                    "setsid python3 -c \"$HOG\" </dev/null >/dev/null 2>&1 &",
                    env={"HOG": "import time\nb = b'x' * (200 << 20)\ntime.sleep(600)"})
    assert res["exit_code"] == 0, res
    f = wait_failed(node, sb["id"])
    assert f["reason"] == "oom", f
    assert "OOM" in f["message"], f
    assert_freed(node, sb, cg)


def test_api_records_the_reason():
    with store_platform("deathapi", "sqlite") as plat:
        r = e2b(plat, "POST", "/sandboxes", json={"templateID": "base"})
        assert r.status_code == 201, r.text
        sid = r.json()["sandboxID"]
        status, sb = plat.node.call("GET", f"/v1/sandboxes/{sid}")
        assert status == 200, sb
        pid = live_qemu_pids(plat.node.instance_dir(sb))[0]
        cg = vmm_cgroups(pid)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            status, res = plat.admin("GET", f"/v1/sandboxes/{sid}")
            if status == 200 and res["state"] == "killed":
                break
            time.sleep(0.5)
        assert status == 200 and res["state"] == "killed", (status, res)
        assert res["reason"] == "vmm_crashed", res
        assert res["error"].startswith("vmm_crashed: the VMM was killed by signal 9"), res
        r = e2b(plat, "GET", f"/sandboxes/{sid}")
        assert r.status_code == 404 and r.json()["code"] == 404, r.text
        assert sid not in [s["sandboxID"] for s in e2b(plat, "GET", "/v2/sandboxes").json()]
        assert_freed(plat.node, sb, cg)
