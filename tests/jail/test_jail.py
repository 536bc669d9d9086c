"""The jail (src/node/jail.c, issue 13): a probe run in the VMM's jail cannot reach what a
compromised VMM must not, and a real sandbox's QEMU runs in it.

- test_probe_*: build/src/node/jail-run starts build/src/node/jail-probe with the VMM's spec
  (jail_vmm_spec_init(): namespaces, root, binds, rlimits, ids, capabilities, seccomp) in a
  netns this test makes, against a fake data dir laid out like the real one;
- test_vmm_in_jail: a real space-node boots a sandbox whose QEMU is in its own mount, pid, ipc,
  uts and cgroup namespaces and its sandbox's netns, sees a minimal root, still execs and is
  killed; the jail's setup time and the VMM's memory overhead are printed.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import uuid

import pytest

from lib.platform import BUILD, DATA_ROOT, ROOT, live_qemu_pids, node_sandbox, started_node

# The probe is never sanitized (see src/node/meson.build); the plain build always has it.
PLAIN = os.path.join(ROOT, "build")
JAIL_RUN = os.path.join(BUILD, "src/node/jail-run")
PROBE = os.path.join(PLAIN if os.path.exists(os.path.join(PLAIN, "src/node/jail-probe"))
                     else BUILD, "src/node/jail-probe")
UID = 900000 + 4095  # a slot uid no live sandbox of a test node takes (slots count up from 0)
SIGSYS = 31


@pytest.fixture(scope="module")
def world():
    """A fake data dir (store, two sandboxes, a template, the egress CA, secrets) and a netns."""
    data = tempfile.mkdtemp(prefix="test-jail-", dir=DATA_ROOT)
    os.chmod(data, 0o755)  # worst case: even traversable, the jail must not show it
    files = {}
    for rel in ("space.db", "store.key", "gw/ca.key", "gw/secrets.key", "instances/a/rootfs.ext4",
                "instances/b/rootfs.ext4", "instances/b/instance.json", "templates/base/vmlinux"):
        path = os.path.join(data, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("secret\n")
        os.chmod(path, 0o644)  # readable by anyone on the host: only the jail stands between
        os.chmod(os.path.dirname(path), 0o755)
        files[rel] = path
    netns = f"jailtest-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", netns], check=True)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    try:
        yield {"data": data, "files": files, "netns": f"/run/netns/{netns}",
               "port": listener.getsockname()[1]}
    finally:
        listener.close()
        subprocess.run(["ip", "netns", "delete", netns], check=False)
        shutil.rmtree(data, ignore_errors=True)


def run_probe(world, *attempts, limits=()):
    res = subprocess.run([JAIL_RUN, "--uid", str(UID), "--netns", world["netns"],
                          "--sandbox-dir", os.path.join(world["data"], "instances/a"),
                          "--template-file", world["files"]["templates/base/vmlinux"],
                          *limits, "--", PROBE, *attempts], capture_output=True, text=True,
                         timeout=120)
    lines = res.stdout.splitlines()
    setup = re.search(r"setup_us (\d+)", res.stderr)
    return res.returncode, [json.loads(line) for line in lines], res.stderr, setup


def test_probe_is_confined(world):
    rc, out, err, setup = run_probe(world, "list:/")
    assert rc == 0, err
    me = out[0]
    assert (me["uid"], me["gid"]) == (UID, UID)
    assert me["pid"] == 1  # its own pid namespace
    assert me["hostname"] == "sandbox"  # its own uts namespace
    for cap in ("CapEff", "CapPrm", "CapBnd", "CapAmb"):
        assert int(me[cap], 16) == 0, (cap, me[cap])
    assert me["NoNewPrivs"] == "1" and me["Seccomp"] == "2"
    # Only what the spec binds: programs and libraries, /dev, /proc, the two directories.
    top = {world["data"].split("/")[1], PROBE.split("/")[1]}
    assert set(me["root"]) <= {"usr", "lib", "lib64", "dev", "proc"} | top, me["root"]
    print(f"jail setup: {setup.group(1)} us")


def test_probe_cannot_reach_what_it_must_not(world):
    f = world["files"]
    denied = [
        f"read:{f['space.db']}", f"read:{f['store.key']}", f"read:{f['gw/ca.key']}",
        f"read:{f['gw/secrets.key']}", f"read:{f['instances/b/rootfs.ext4']}",
        f"read:{f['instances/b/instance.json']}", f"list:{os.path.dirname(f['instances/b/rootfs.ext4'])}",
        "read:/etc/shadow", "read:/etc/passwd", "read:/var/lib/space/gw/ca.key",
        "read:/var/lib/space/space.db", "list:/var/lib/space/instances", "list:/home", "list:/root",
        # The template is read-only, the root is read-only, /proc shows no host process.
        f"write:{os.path.dirname(f['templates/base/vmlinux'])}/x", "write:/x", "write:/usr/x",
        f"read:/proc/{os.getpid()}/status", f"read:/proc/{os.getppid()}/environ",
        # Signals: no host process is visible from its pid namespace.
        f"kill:{os.getpid()}", f"kill:{os.getppid()}",
        # Sockets: its netns has only a loopback that is down; host paths are not in its root.
        f"tcp:127.0.0.1:{world['port']}", "tcp:169.254.0.1:15001", "unix:/run/space/node.sock",
        "unix:/run/space/api.sock", "socket:netlink",
    ]
    allowed = [f"read:{f['templates/base/vmlinux']}", "read:/dev/urandom", "write:/dev/null",
               "read:/proc/self/status"]
    rc, out, err, _ = run_probe(world, *denied, *allowed)
    assert rc == 0, err
    results = out[0]["results"]
    for a in denied:
        assert results[a]["allowed"] is False, (a, results[a])
    for a in allowed:
        assert results[a]["allowed"] is True, (a, results[a])
    # On the host itself the fake files are world-readable: the jail, not modes, denies them.
    assert open(f["gw/ca.key"]).read() == "secret\n"


@pytest.mark.parametrize("name", ["ptrace", "mount", "unshare", "setns", "bpf", "userfaultfd",
                                  "keyctl", "process_vm_readv", "clone-newuser"])
def test_probe_forbidden_syscall_kills_it(world, name):
    rc, out, err, _ = run_probe(world, f"syscall:{name}")
    assert rc == 128 + SIGSYS, (rc, out, err)
    assert not any("survived" in o for o in out), out


def test_probe_fork_bomb_stops_at_the_pids_limit(world):
    # A VMM's cgroup (64 MiB "guest" + 32 MiB): pids.max 512, as RLIMIT_NPROC of its own uid.
    rc, out, err, _ = run_probe(world, "fork:2000", limits=("--memory-mib", "64"))
    assert rc == 0, err
    r = out[0]["results"]["fork:2000"]
    assert r["allowed"] is False and r["errno"] == "Resource temporarily unavailable", r
    assert 100 <= r["count"] < 512, r
    print(f"fork bomb: {r['count']} forks, then EAGAIN")


def test_probe_memory_hog_is_killed_at_its_limit(world):
    # 64 MiB + 32 MiB of overhead: 48 MiB fits, 400 MiB more is killed by the cgroup's OOM.
    rc, out, err, _ = run_probe(world, "hog:48", "hog:400", limits=("--memory-mib", "64"))
    assert rc == 128 + signal.SIGKILL, (rc, out, err)
    assert [o.get("survived") for o in out[1:]] == ["hog:48"], out
    assert re.search(r"cgroup v[12] ", err), err
    cg = re.search(r"cgroup v[12] (\S+)", err).group(1)
    assert not os.path.exists(cg)  # removed once the jail's process is gone


def vmm_cgroups(pid):
    """{controller: directory} of pid's cgroups that the node made (v1: per controller; v2: "")."""
    out = {}
    v2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
    for line in open(f"/proc/{pid}/cgroup").read().splitlines():
        _, ctrls, path = line.split(":", 2)
        if "/space/" not in path:
            continue
        for c in ctrls.split(",") if ctrls else [""]:
            if c in ("memory", "cpu", "pids") or (c == "" and v2):
                out[c] = f"/sys/fs/cgroup/{c}{path}" if c else f"/sys/fs/cgroup{path}"
    return out


def ns_of(pid, kind):
    return os.readlink(f"/proc/{pid}/ns/{kind}")


@pytest.fixture(scope="module")
def node():
    with started_node("jail") as n:
        yield n


def test_vmm_in_jail(node):
    with node_sandbox(node) as sb:
        pids = live_qemu_pids(node.instance_dir(sb))
        assert len(pids) == 1, pids
        pid, me = pids[0], os.getpid()
        for kind in ("mnt", "pid", "ipc", "uts", "cgroup", "net"):
            assert ns_of(pid, kind) != ns_of(me, kind), kind
        netns = os.stat(f"/run/netns/space-{sb['instance_id']}")
        assert os.stat(f"/proc/{pid}/ns/net").st_ino == netns.st_ino
        with open(f"/proc/{pid}/status") as f:
            status = dict(line.split(":\t", 1) for line in f.read().splitlines() if ":\t" in line)
        assert status["NSpid"].split()[-1] == "1"  # pid 1 of its own namespace
        root = set(os.listdir(f"/proc/{pid}/root"))
        assert root <= {"usr", "lib", "lib64", "dev", "proc", node.data.split("/")[1]}, root
        assert not os.path.exists(f"/proc/{pid}/root/etc")
        assert node.exec(sb["id"], "python3", "-c", "print(6 * 7)")["stdout"] == b"42\n"
        # Its cgroup: named by its instance, limits from the create (RAM + 256 MiB overhead).
        cgdirs = vmm_cgroups(pid)
        assert set(cgdirs) >= {"memory", "pids"} or set(cgdirs) == {""}, cgdirs
        for ctrl, d in cgdirs.items():
            assert d.endswith(f"/space/{sb['instance_id']}"), (ctrl, d)
            assert str(pid) in open(os.path.join(d, "cgroup.procs")).read().split()
        mem = cgdirs.get("memory", cgdirs.get(""))
        limit_file = "memory.limit_in_bytes" if "memory" in cgdirs else "memory.max"
        limit = int(open(os.path.join(mem, limit_file)).read())
        assert limit == (sb["memory_mb"] + 256) << 20, (limit, sb["memory_mb"])
        pids = cgdirs.get("pids", cgdirs.get(""))
        assert open(os.path.join(pids, "pids.max")).read().strip() == "512"
        rss_kib = int(status["VmRSS"].split()[0])
        usage = int(open(os.path.join(mem, "memory.usage_in_bytes" if "memory" in cgdirs
                                      else "memory.current")).read())
        setups = [int(x) for x in re.findall(r"confined in (\d+) us", open(node.log_path).read())]
        assert setups, node.log()
        print(f"jail setup {setups} us; QEMU VmRSS {rss_kib} KiB, cgroup memory "
              f"{usage >> 10} KiB for a {sb['memory_mb']} MiB guest, idle after one exec")
    assert not live_qemu_pids(node.instance_dir(sb))
    for d in cgdirs.values():
        assert not os.path.exists(d), d  # removed with the VMM
