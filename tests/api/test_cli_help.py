"""`space ... --help` (or -h) is a request, not a usage error: the usage on stdout, exit 0, and
nothing done (no daemon needed, no key named "--help" made); a wrong invocation still prints
it on stderr with exit 2."""
import subprocess

import pytest

from lib.platform import SPACE

HELP = [
    "up", "down", "sandbox", "sandbox create", "sandbox ls", "sandbox get", "sandbox kill",
    "sandbox exec", "sandbox cp", "sandbox egress", "sandbox network", "template",
    "template build", "template ls", "keys", "keys create", "keys ls", "keys rm", "bench",
    "snapshot", "snapshot create", "snapshot ls", "snapshot rm", "snapshot branch",
    "snapshot policy", "snapshot policy set", "snapshot policy get", "snapshot policy rm",
    "ca", "ca status", "ca rotate",
]


@pytest.fixture
def space(tmp_path):
    # Every path the CLI uses points into an empty directory: a command that went on to act
    # (start or stop daemons, call the api) would find nothing, not disturb the host's.
    env = {"PATH": "/usr/bin:/bin", "SPACE_RUN_DIR": str(tmp_path / "run"),
           "SPACE_NODE_SOCKET": str(tmp_path / "node.sock"),
           "SPACE_TUNNEL_SOCKET": str(tmp_path / "tunnel.sock"),
           "SPACE_SOCKET": str(tmp_path / "api.sock"), "SPACE_DATA_DIR": str(tmp_path / "data"),
           "SPACE_CACHE_DIR": str(tmp_path / "cache")}

    def run(*args):
        return subprocess.run([SPACE, *args], capture_output=True, text=True, timeout=60,
                              env=env)
    return run


@pytest.mark.parametrize("cmd", HELP)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_is_usage_on_stdout(space, cmd, flag):
    r = space(*cmd.split(), flag)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert r.stdout.startswith("usage: space " + cmd.split()[0]), r.stdout
    assert r.stderr == "", r.stderr


@pytest.mark.parametrize("args", [["up", "--bogus"], ["down", "--bogus"], ["sandbox"],
                                  ["sandbox", "create", "--bogus"], ["sandbox", "exec"],
                                  ["sandbox", "get"], ["keys"], ["template", "bogus"],
                                  ["snapshot"], ["snapshot", "create"],
                                  ["snapshot", "create", "not-an-id"], ["snapshot", "ls", "x"],
                                  ["snapshot", "branch"], ["snapshot", "branch", "not-an-id"],
                                  ["snapshot", "branch", "-n", "x", "aaaaaaaaaaaaaaaaaaaa"],
                                  ["snapshot", "policy"], ["snapshot", "policy", "bogus"],
                                  ["snapshot", "policy", "get"],
                                  ["snapshot", "policy", "set", "not-an-id"],
                                  ["snapshot", "policy", "set", "--tier", "x",
                                   "aaaaaaaaaaaaaaaaaaaa"],
                                  ["snapshot", "policy", "rm", "--disk-every", "60",
                                   "aaaaaaaaaaaaaaaaaaaa"],
                                  ["ca"], ["ca", "bogus"], ["ca", "rotate"],
                                  ["ca", "rotate", "rollback"], ["ca", "status", "x"]])
def test_wrong_usage_is_stderr_and_2(space, args):
    r = space(*args)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "usage: space" in r.stderr and r.stdout == "", r.stderr
