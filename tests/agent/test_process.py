"""process.Process over the Connect protocol, as the E2B SDKs use it (§6.2, §6.3)."""
import json
import os
import struct
import time

import requests

from conftest import wait_for
from envd_client import b64, collect, envelope


def test_health(agent):
    r = requests.get(agent.url + "/health")
    assert r.status_code == 204
    assert r.content == b""


def test_start_stream_shape(envd):
    s = envd.start("/bin/bash", ["-l", "-c", "echo hi"], envs={"A": "1"}, cwd="/tmp")
    msgs = list(s)
    assert set(msgs[0]["event"]) == {"start"}
    assert msgs[0]["event"]["start"]["pid"] > 0
    assert msgs[1] == {"event": {"data": {"stdout": b64(b"hi\n")}}}
    # a clean exit omits exitCode and error (proto3 defaults)
    assert msgs[-1] == {"event": {"end": {"exited": True, "status": "exit status 0"}}}
    assert s.end == {}


def test_exit_code_and_stderr(envd):
    res = envd.sh("echo out; echo err >&2; exit 3")
    assert res.stdout == b"out\n"
    assert res.stderr == b"err\n"
    assert res.end == {"exitCode": 3, "exited": True, "status": "exit status 3",
                       "error": "exit status 3"}


def test_binary_output_exact(envd):
    res = envd.run("/usr/bin/printf", ["\\000\\001\\377\\376abc"])
    assert res.stdout == b"\x00\x01\xff\xfeabc"


def test_large_output_exact(envd):
    res = envd.sh("f=$(mktemp); head -c 1048576 /dev/urandom >$f; cat $f; sha256sum $f >&2; rm $f")
    import hashlib
    assert len(res.stdout) == 1048576
    digest = res.stderr.split()[0].decode()
    assert hashlib.sha256(res.stdout).hexdigest() == digest
    for ev in res.events:
        if "data" in ev and "stdout" in ev["data"]:
            assert len(ev["data"]["stdout"]) <= (32 * 1024 + 2) // 3 * 4


def test_env_order_and_cwd(envd):
    res = envd.sh("echo $A; echo $HOME; echo $USER; pwd; echo $PATH",
                  envs={"A": "x y", "HOME": "/override"}, cwd="/tmp")
    lines = res.stdout.decode().splitlines()
    assert lines[0] == "x y"
    assert lines[1] == "/override"
    assert lines[2] == "root"
    assert lines[3] == "/tmp"
    assert lines[4]


def test_default_cwd_is_home(envd):
    res = envd.run("/bin/pwd")
    assert res.stdout == b"/root\n"


def test_relative_cwd(envd):
    os.makedirs("/root/.space-agent-test-dir", exist_ok=True)
    try:
        res = envd.run("/bin/pwd", cwd=".space-agent-test-dir")
        assert res.stdout == b"/root/.space-agent-test-dir\n"
    finally:
        os.rmdir("/root/.space-agent-test-dir")


def test_missing_cwd(envd):
    s = envd.start("/bin/true", cwd="/nonexistent/dir")
    msgs = list(s)
    assert msgs == []
    assert s.error() == ("invalid_argument", "cwd '/nonexistent/dir' does not exist")


def test_missing_command(envd):
    res = envd.run("/no/such/binary")
    assert res.pid > 0
    assert res.end["exitCode"] == 127
    assert res.end["exited"] is True
    assert res.end["error"] == "exit status 127"
    assert b"not found" in res.stderr
    res = envd.run("no-such-command-in-path")
    assert res.end["exitCode"] == 127


def test_command_from_path(envd):
    res = envd.run("echo", ["a", "b"])
    assert res.stdout == b"a b\n"


def test_user_selection(envd):
    res = envd.run("/usr/bin/id", ["-un"], user="nobody", cwd="/")
    assert res.stdout == b"nobody\n"
    res = envd.run("/usr/bin/id", ["-un"], user="root")
    assert res.stdout == b"root\n"


def test_unknown_user(envd):
    s = envd.start("/bin/true", user="no-such-user-x")
    assert list(s) == []
    assert s.error()[0] == "unauthenticated"


def test_stdin_disabled_reads_dev_null(envd):
    res = envd.sh("cat; echo done", stdin=False)
    assert res.stdout == b"done\n"


def test_timeout_kills_process(envd):
    t = time.time()
    res = envd.run("/bin/sleep", ["30"], timeout_ms=500)
    assert time.time() - t < 10
    assert res.end == {"exitCode": -1, "status": "signal: killed", "error": "signal: killed"}


def test_malformed_requests(agent, envd):
    url = agent.url + "/process.Process/Start"
    h = {"Content-Type": "application/connect+json"}
    # truncated envelope
    r = requests.post(url, data=b"\x00\x00\x00\x00\x10{}", headers=h)
    assert r.status_code == 200
    assert b"invalid_argument" in r.content
    # declared length far too large
    r = requests.post(url, data=b"\x00\xff\xff\xff\xff", headers=h)
    assert r.status_code == 200 and b"resource_exhausted" in r.content
    # compressed flag
    r = requests.post(url, data=envelope({}, flags=1), headers=h)
    assert r.status_code == 200 and b"invalid_argument" in r.content
    # not JSON
    r = requests.post(url, data=envelope(b"{nope"), headers=h)
    assert r.status_code == 200 and b"invalid_argument" in r.content
    # JSON but not an object / missing cmd
    r = requests.post(url, data=envelope(b"[1]"), headers=h)
    assert b"invalid_argument" in r.content
    r = requests.post(url, data=envelope({"process": {"cmd": 5}}), headers=h)
    assert b"invalid_argument" in r.content
    # wrong content type
    r = requests.post(url, data=b"{}", headers={"Content-Type": "text/plain"})
    assert r.status_code == 415
    # GET on an RPC
    r = requests.get(url)
    assert r.status_code == 405
    # unknown method
    r = requests.post(agent.url + "/process.Process/Nope", data=b"{}",
                      headers={"Content-Type": "application/json"})
    assert r.status_code == 404 and r.json()["code"] == "unimplemented"
    # invalid UTF-8 in JSON
    r = requests.post(url, data=envelope(b'{"process":{"cmd":"\xff"}}'), headers=h)
    assert b"invalid_argument" in r.content
    # the agent still works
    assert envd.run("/bin/true").end["exited"] is True
    assert agent.alive()
