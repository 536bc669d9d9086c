"""Fixtures: a space-agent in host test mode on loopback, one per test."""
import os
import re
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from envd_client import Envd  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def agent_binary():
    build = os.environ.get("SPACE_BUILD_DIR", "build")
    if not os.path.isabs(build):
        build = os.path.join(ROOT, build)
    path = os.path.join(build, "src", "agent", "space-agent")
    if not os.path.exists(path):
        pytest.skip(f"{path} not built")
    return path


class AgentProcess:
    def __init__(self, extra_args=()):
        self.proc = subprocess.Popen(
            [agent_binary(), "--listen", "127.0.0.1:0", "--log-level", "debug", *extra_args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.match(r"listening on 127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"agent did not start: {line!r} {self.proc.stderr.read()}")
        self.port = int(m.group(1))
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.stderr.read()

    def alive(self):
        return self.proc.poll() is None


@pytest.fixture
def agent():
    a = AgentProcess()
    yield a
    err = a.stop()
    if a.proc.returncode not in (0, -15):
        print(err)
    assert a.proc.returncode in (0, -15), f"agent crashed: {a.proc.returncode}"


@pytest.fixture
def envd(agent):
    return Envd(agent.url)


@pytest.fixture
def make_agent():
    """Starts agents with extra command-line arguments; stops them all at teardown."""
    started = []

    def make(*args):
        a = AgentProcess(args)
        started.append(a)
        return a
    yield make
    for a in started:
        a.stop()
        assert a.proc.returncode in (0, -15), f"agent crashed: {a.proc.returncode}"


def wait_for(pred, timeout=10.0, interval=0.05):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError("condition not met in time")
