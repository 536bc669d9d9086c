"""space-agent's command line (host only: in a guest the kernel starts it)."""
import socket
import subprocess

import pytest

from conftest import agent_binary


def run_agent(*args, timeout=10):
    return subprocess.run([agent_binary(), *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.host_only("starts its own agent processes")
@pytest.mark.parametrize("bad", ["nope", "127.0.0.1", "127.0.0.1:", ":80", "127.0.0.1:65536",
                                 "127.0.0.1:x"])
def test_listen_refuses_bad_addresses(target, bad):
    p = run_agent("--listen", bad)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert f"invalid --listen '{bad}', expected ADDR:PORT" in p.stderr


@pytest.mark.host_only("starts its own agent processes")
@pytest.mark.parametrize("listen,shown", [("127.0.0.1:0", "127.0.0.1"), ("[::1]:0", "[::1]")])
def test_listen_v4_and_bracketed_v6(target, listen, shown):
    if ":" in shown:
        try:
            socket.socket(socket.AF_INET6).bind(("::1", 0))
        except OSError:
            pytest.skip("no IPv6 loopback here")
    p = subprocess.Popen([agent_binary(), "--listen", listen], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith(f"listening on {shown}:"), line
        assert int(line.rsplit(":", 1)[1]) > 0
    finally:
        p.terminate()
        p.wait(timeout=10)
