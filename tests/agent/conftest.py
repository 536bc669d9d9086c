"""Fixtures: every agent test runs twice, against space-agent on the host and in a real guest.

  [host]   a space-agent in host test mode on loopback, one per test (the sanitized build
           under tools/test.sh);
  [guest]  the agent as PID 1 of a real sandbox: one GuestLab (space-node + space-api) and
           one shared sandbox per run, reached through the api's ingress, plus a fresh
           sandbox per test for the few tests that call /init or kill the server
           (fresh_agent, reached through the node's tunnel; targets.py).

SPACE_AGENT_TARGET=host (or guest) runs one of the two; the default is both. A test that
can only run on the host carries @pytest.mark.host_only("why") and is skipped, with that
reason, against the guest (none today: tests use fs/tmp and agent.* instead of host paths).
"""
import os
import sys
import time
from pathlib import PurePosixPath

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from targets import ROOT, AgentProcess, GuestLab, Unavailable  # noqa: E402,F401 (ROOT: tests)
from targets import agent_binary as _agent_binary  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TARGETS = [t for t in os.environ.get("SPACE_AGENT_TARGET", "host,guest").split(",") if t]

_labs = []  # the GuestLab, once booted; released after the last test of this directory


def agent_binary():
    try:
        return _agent_binary()
    except Unavailable as e:
        pytest.skip(str(e))


def pytest_configure(config):
    config.addinivalue_line("markers",
                            "host_only(reason): runs only against the agent on the host")


def pytest_generate_tests(metafunc):
    if "target" in metafunc.fixturenames:
        metafunc.parametrize("target", TARGETS, indirect=True)


@pytest.fixture(autouse=True)
def target(request):
    """host or guest; skips host-only tests on the guest."""
    if request.param == "guest":
        m = request.node.get_closest_marker("host_only")
        if m:
            pytest.skip("host only: " + m.args[0])
    return request.param


@pytest.fixture(scope="session")
def guest_lab():
    try:
        lab = GuestLab()
    except Unavailable as e:
        pytest.skip(str(e))
    _labs.append(lab)
    yield lab
    release_labs()


def release_labs():
    while _labs:
        _labs.pop().destroy()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    # Other suites start their own platforms: do not keep a VM running through them.
    if nextitem is None or not str(nextitem.path).startswith(HERE + os.sep):
        release_labs()


def host_agent(**kw):
    try:
        return AgentProcess(**kw)
    except Unavailable as e:
        pytest.skip(str(e))


def stop_host_agent(a):
    err = a.stop()
    if a.proc.returncode not in (0, -15):
        print(err)
    assert a.proc.returncode in (0, -15), f"agent crashed: {a.proc.returncode}"


def check_guest_agent(a):
    """A crash of the guest's server shows only as a restart by PID 1: compare its pid."""
    pid = a.server_pid()
    if pid != a.server:
        a.server = pid
        raise AssertionError(f"the agent's server in the guest restarted (crashed?); "
                             f"console:\n{a.console()}")


@pytest.fixture
def agent(target, request):
    if target == "host":
        a = host_agent()
        yield a
        stop_host_agent(a)
    else:
        a = request.getfixturevalue("guest_lab").shared()
        yield a
        check_guest_agent(a)


@pytest.fixture
def fresh_agent(target, request, tmp_path):
    """An agent nobody has called /init on but the platform: a host agent of its own (with
    an --e2b-dir), or a new sandbox reached around the ingress. .tmp: a fresh directory there."""
    if target == "host":
        a = host_agent(e2b_dir=str(tmp_path / "e2b"))
        a.tmp = PurePosixPath(tmp_path)
        yield a
        stop_host_agent(a)
    else:
        lab = request.getfixturevalue("guest_lab")
        a = lab.fresh()
        a.tmp = a.fs.mkdtemp()
        yield a
        lab.discard(a)


@pytest.fixture
def envd(agent):
    return agent.envd()


@pytest.fixture
def fs(agent):
    """File operations on the machine the agent runs on."""
    return agent.fs


@pytest.fixture
def tmp(target, agent, tmp_path):
    """A fresh directory (mode 0700, owned by root) on the agent's machine, as a pure path."""
    if target == "host":
        yield PurePosixPath(tmp_path)
    else:
        d = agent.fs.mkdtemp()
        yield d
        agent.fs.rmtree(d)


def wait_for(pred, timeout=10.0, interval=0.05):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError("condition not met in time")
