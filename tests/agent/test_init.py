"""space-agent as PID 1: on the host inside throwaway mount/UTS/PID namespaces (unshare); in
a guest as what it is there, the guest's init (a sandbox of its own per test, reached around
the ingress, since a test kills its server)."""
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import agent_binary
from envd_client import Envd


def has_cap_sys_resource():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) & (1 << 24))
    return False


class InitAgent:
    kind = "host"
    route = {}

    def __init__(self):
        self.proc = subprocess.Popen(
            # --kill-child: the namespace's PID 1 gets SIGKILL when unshare dies (stop()),
            # and takes the whole namespace with it; without it every run leaked both agents
            ["unshare", "--mount", "--uts", "--pid", "--fork", "--kill-child",
             "--propagation", "private",
             agent_binary(), "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.url = self.wait_listening()

    def wait_listening(self):
        for _ in range(20):
            line = self.proc.stdout.readline()
            m = re.match(r"listening on 127\.0\.0\.1:(\d+)", line)
            if m:
                return f"http://127.0.0.1:{m.group(1)}"
        raise RuntimeError("agent did not start as PID 1")

    def envd(self):
        return Envd(self.url)

    def ready_line(self):
        return self.proc.stdout.readline().strip()

    def wait_restarted(self):
        return self.wait_listening()

    def stop(self):
        self.proc.kill()  # kills unshare; the namespace's PID 1 dies with it (--kill-child)
        self.proc.wait()


@pytest.fixture
def init_agent(target, request):
    if target == "guest":
        yield request.getfixturevalue("fresh_agent")
        return
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare")
    a = InitAgent()
    yield a
    a.stop()


def test_pid1_setup(init_agent):
    # the ready line for the serial console follows the listening line
    assert init_agent.ready_line() == "space-agent: ready"
    envd = init_agent.envd()
    res = envd.sh("echo $$ $PPID; hostname; cat /proc/1/comm; "
                  "stat -f -c %T /tmp; stat -f -c %T /run; stat -f -c %T /dev/pts; "
                  "stat -c %a /tmp; test -c /dev/ptmx && echo ptmx; ls -d /run/e2b; echo $PATH",
                  user="root")
    lines = res.stdout.decode().splitlines()
    assert lines[0].split()[1] != "1"    # our parent is the server, not init
    # a guest is named after its sandbox (the node's /init re-identifies every create)
    assert lines[1] == (init_agent.sid if init_agent.kind == "guest" else "sandbox")
    assert lines[2] == "space-agent"
    assert lines[3:6] == ["tmpfs", "tmpfs", "devpts"]
    assert lines[6] == "1777"
    assert lines[7] == "ptmx"
    assert lines[8] == "/run/e2b"
    assert "/usr/bin" in lines[9]
    # the server is shielded from the OOM killer, user processes are not
    res = envd.sh("cat /proc/$PPID/oom_score_adj /proc/self/oom_score_adj")
    server, child = res.stdout.split()
    assert child == b"100"
    if init_agent.kind == "guest" or has_cap_sys_resource():  # containers often drop it
        assert server == b"-1000"
    # PTYs come from the fresh devpts instance
    res = envd.run("/usr/bin/tty", pty=(80, 24))
    assert res.pty.strip().startswith(b"/dev/pts/")
    assert res.end["exited"] is True


def test_pid1_reaps_orphans_and_restarts_server(init_agent):
    envd = init_agent.envd()
    # an orphan re-parented to PID 1 must be reaped, not left a zombie
    envd.sh("(sleep 0.2 &) ; true")
    time.sleep(0.6)
    res = envd.sh("ps -eo stat= | grep -c '^Z' || true")
    assert res.stdout.strip() == b"0"
    # what /init set must survive the restart (else a crashed server comes back open)
    import requests
    token = getattr(init_agent, "token", None) or "kept-token"
    headers = dict(init_agent.route, **{"X-Access-Token": token})
    r = requests.post(init_agent.url + "/init", headers=headers, timeout=30,
                      json={"accessToken": token, "defaultUser": "nobody", "defaultWorkdir": "/tmp",
                            "envVars": {"KEPT": "yes"}})
    assert r.status_code == 204, r.text
    envd = Envd(init_agent.url, headers=headers)
    # the server dies; init starts a new one, which prints a new listening line
    s = envd.start("/bin/sh", ["-c", "sleep 0.2; kill -9 $PPID"], user="root")
    next(s)
    url = init_agent.wait_restarted()
    s.close()
    res = Envd(url, headers=headers).sh("echo back $KEPT; id -un")
    assert res.stdout == b"back yes\nnobody\n"
    no_token = {k: v for k, v in headers.items() if k != "X-Access-Token"}
    r = requests.get(url + "/envs", headers=no_token, timeout=30)
    assert r.status_code == 401
