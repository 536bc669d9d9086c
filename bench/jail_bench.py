#!/usr/bin/env python3
"""The jail's numbers (issue 13): setup time per sandbox, and a VMM's memory overhead.

  sudo /usr/bin/python3 bench/jail_bench.py [--runs 30] [--no-vm]

1. Setup: build/src/node/jail-run starts build/src/node/jail-probe (no attempts) in the VMM's
   jail `--runs` times, once without cgroups and once with a VMM's cgroup; jail_spawn()'s
   own clock (fork to exec) is printed as min / median / p90. For scale, the same probe started
   with a plain fork+exec (Python's subprocess) from this script.
2. Unless --no-vm: a real space-node (tests/lib/platform.py) boots one 256 MiB sandbox; its
   log's "confined in N us" is the jail's setup inside the node, and its VMM's cgroup shows
   what the VMM uses: idle after boot, and at its peak after the guest filled its RAM, less
   the guest RAM it touched (the guest's MemTotal - MemAvailable at each point) = the overhead.
Prints numbers and asserts nothing. Needs root.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests/jail"))

BUILD = os.path.abspath(os.environ.get("SPACE_BUILD_DIR", os.path.join(ROOT, "build")))
JAIL_RUN = os.path.join(BUILD, "src/node/jail-run")
PROBE = os.path.join(ROOT, "build/src/node/jail-probe")


def stats(xs):
    xs = sorted(xs)
    return (f"min {xs[0] / 1000:.1f} ms, median {statistics.median(xs) / 1000:.1f} ms, "
            f"p90 {xs[int(len(xs) * 0.9) - 1] / 1000:.1f} ms (n={len(xs)})")


def setup_times(netns, runs, cgroup):
    out = []
    for _ in range(runs):
        res = subprocess.run([JAIL_RUN, "--uid", str(900000 + 4093), "--netns", netns,
                              *(["--memory-mib", "256"] if cgroup else []), "--", PROBE],
                             capture_output=True, text=True, check=True)
        out.append(int(re.search(r"setup_us (\d+)", res.stderr).group(1)))
    return out


def plain_times(runs):
    out = []
    for _ in range(runs):
        t = time.monotonic()
        subprocess.run([PROBE], capture_output=True, check=True)
        out.append((time.monotonic() - t) * 1e6)
    return out


def guest_used_mib(node, sid):
    info = node.exec(sid, "cat", "/proc/meminfo")["stdout"].decode()
    kib = {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in info.splitlines())}
    return (kib["MemTotal"] - kib["MemAvailable"]) >> 10


def vm_numbers():
    from lib.platform import live_qemu_pids, node_sandbox, started_node
    from test_jail import vmm_cgroups

    with started_node("jailbench") as node:
        with node_sandbox(node, vcpus=1, memory_mb=256) as sb:
            pid = live_qemu_pids(node.instance_dir(sb))[0]
            cg = vmm_cgroups(pid)
            mem = cg.get("memory", cg.get(""))
            v1 = "memory" in cg
            usage = lambda: int(open(os.path.join(mem, "memory.usage_in_bytes" if v1 else
                                                  "memory.current")).read()) >> 20
            idle, idle_guest = usage(), guest_used_mib(node, sb["id"])
            node.exec(sb["id"], "python3", "-c",
                      "a = []\nwhile len(a) < 1000:\n    a.append(bytearray(1 << 20))\n",
                      user="root")
            peak = int(open(os.path.join(mem, "memory.max_usage_in_bytes" if v1 else
                                         "memory.peak")).read()) >> 20
            setups = re.findall(r"confined in (\d+) us", open(node.log_path).read())
            print(f"jail setup inside space-node: {', '.join(s + ' us' for s in setups)}")
            print(f"VMM cgroup memory, 256 MiB guest: idle {idle} MiB (guest uses {idle_guest} "
                  f"MiB: overhead ~{idle - idle_guest} MiB); peak after the guest filled its "
                  f"RAM {peak} MiB (overhead ~{peak - 256} MiB of the 256 MiB allowed)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--no-vm", action="store_true")
    args = ap.parse_args()
    netns = f"jailbench-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", netns], check=True)
    try:
        print(f"load average: {open('/proc/loadavg').read().split()[:3]}")
        print(f"jail setup, no cgroup:   {stats(setup_times(f'/run/netns/{netns}', args.runs, False))}")
        print(f"jail setup, with cgroup: {stats(setup_times(f'/run/netns/{netns}', args.runs, True))}")
        print(f"plain fork+exec+exit of the probe: {stats(plain_times(args.runs))}")
    finally:
        subprocess.run(["ip", "netns", "delete", netns], check=False)
    if not args.no_vm:
        vm_numbers()


if __name__ == "__main__":
    main()
