"""process.Process over the Connect protocol, as the E2B SDKs use it (§6.2, §6.3)."""
import time

import pytest

from conftest import wait_for
from envd_client import b64, collect, envelope


def test_health(agent):
    r = agent.http.get(agent.url + "/health")
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


def test_env_order_and_cwd(agent, envd):
    res = envd.sh("echo $A; echo $HOME; echo $USER; pwd; echo $PATH",
                  envs={"A": "x y", "HOME": "/override"}, cwd="/tmp")
    lines = res.stdout.decode().splitlines()
    assert lines[0] == "x y"
    assert lines[1] == "/override"
    assert lines[2] == agent.default_user
    assert lines[3] == "/tmp"
    assert lines[4]


def test_default_cwd_is_home(agent, envd):
    res = envd.run("/bin/pwd")
    assert res.stdout == f"{agent.home}\n".encode()


def test_relative_cwd(agent, envd, fs):
    d = f"{agent.home}/.space-agent-test-dir"
    fs.makedirs(d)
    try:
        res = envd.run("/bin/pwd", cwd=".space-agent-test-dir")
        assert res.stdout == f"{d}\n".encode()
    finally:
        fs.rmdir(d)


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


def test_timeout_ends_start_with_deadline_exceeded(envd):
    """envd: Start's Connect-Timeout-Ms ends the Start stream with deadline_exceeded (the
    SDKs raise a timeout) and kills the process; a Connect attached to it sees the kill."""
    t = time.time()
    s = envd.start("/bin/sh", ["-c", "echo up; exec sleep 30"], timeout_ms=1500)
    pid = next(s)["event"]["start"]["pid"]
    c = envd.stream("process.Process/Connect", {"process": {"pid": pid}})
    assert next(c)["event"] == {"start": {"pid": pid}}
    res = collect(s)
    assert time.time() - t < 10
    assert res.stdout == b"up\n"
    assert res.end is None  # no end event: the stream ends with the error instead
    assert res.stream_end == {"error": {"code": "deadline_exceeded",
                                        "message": "context deadline exceeded"}}
    other = collect(c)
    assert other.end == {"exitCode": -1, "status": "signal: killed", "error": "signal: killed"}
    assert other.stream_end == {}
    _, body = envd.unary("process.Process/List", {})
    assert pid not in [p["pid"] for p in body.get("processes", [])]


def test_connect_timeout_ends_only_that_stream(envd):
    s = envd.start("/bin/sleep", ["30"])
    pid = next(s)["event"]["start"]["pid"]
    c = envd.stream("process.Process/Connect", {"process": {"pid": pid}},
                    headers={"Connect-Timeout-Ms": "300"})
    res = collect(c)
    assert res.stream_end["error"]["code"] == "deadline_exceeded"
    _, body = envd.unary("process.Process/List", {})
    assert pid in [p["pid"] for p in body["processes"]]
    envd.unary("process.Process/SendSignal", {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})
    assert collect(s).end["status"] == "signal: killed"


def test_malformed_requests(agent, envd):
    http = agent.http
    url = agent.url + "/process.Process/Start"
    h = {"Content-Type": "application/connect+json"}
    # truncated envelope
    r = http.post(url, data=b"\x00\x00\x00\x00\x10{}", headers=h)
    assert r.status_code == 200
    assert b"invalid_argument" in r.content
    # declared length far too large
    r = http.post(url, data=b"\x00\xff\xff\xff\xff", headers=h)
    assert r.status_code == 200 and b"resource_exhausted" in r.content
    # compressed flag
    r = http.post(url, data=envelope({}, flags=1), headers=h)
    assert r.status_code == 200 and b"invalid_argument" in r.content
    # not JSON
    r = http.post(url, data=envelope(b"{nope"), headers=h)
    assert r.status_code == 200 and b"invalid_argument" in r.content
    # JSON but not an object / missing cmd
    r = http.post(url, data=envelope(b"[1]"), headers=h)
    assert b"invalid_argument" in r.content
    r = http.post(url, data=envelope({"process": {"cmd": 5}}), headers=h)
    assert b"invalid_argument" in r.content
    # wrong content type
    r = http.post(url, data=b"{}", headers={"Content-Type": "text/plain"})
    assert r.status_code == 415
    # GET on an RPC
    r = http.get(url)
    assert r.status_code == 405
    # unknown method
    r = http.post(agent.url + "/process.Process/Nope", data=b"{}",
                      headers={"Content-Type": "application/json"})
    assert r.status_code == 404 and r.json()["code"] == "unimplemented"
    # invalid UTF-8 in JSON
    r = http.post(url, data=envelope(b'{"process":{"cmd":"\xff"}}'), headers=h)
    assert b"invalid_argument" in r.content
    # the agent still works
    assert envd.run("/bin/true").end["exited"] is True
    assert agent.alive()


def read_until(stream, pred):
    """Reads events until pred(event) is true; returns the events read."""
    seen = []
    for msg in stream:
        seen.append(msg["event"])
        if pred(msg["event"]):
            return seen
    raise AssertionError(f"stream ended before the expected event: {seen}")


def stdout_of(events):
    out = b""
    for ev in events:
        if "data" in ev:
            from envd_client import unb64
            out += unb64(ev["data"].get("stdout", "") or ev["data"].get("pty", ""))
    return out


def test_list_tag_and_kill(envd):
    s = envd.start("/bin/sleep", ["30"], tag="sleeper")
    pid = next(s)["event"]["start"]["pid"]
    code, body = envd.unary("process.Process/List", {})
    assert code == 200
    mine = [p for p in body["processes"] if p["pid"] == pid]
    assert mine == [{"config": {"cmd": "/bin/sleep", "args": ["30"]}, "pid": pid, "tag": "sleeper"}]
    code, body = envd.unary("process.Process/SendSignal",
                            {"process": {"tag": "sleeper"}, "signal": "SIGNAL_SIGKILL"})
    assert (code, body) == (200, {})
    rest = list(s)
    assert rest[-1]["event"]["end"] == {"exitCode": -1, "status": "signal: killed",
                                        "error": "signal: killed"}
    assert s.end == {}
    code, body = envd.unary("process.Process/List", {})
    assert pid not in [p["pid"] for p in body["processes"]]


def test_signal_errors(envd):
    code, body = envd.unary("process.Process/SendSignal",
                            {"process": {"pid": 999999}, "signal": "SIGNAL_SIGKILL"})
    assert code == 404 and body["code"] == "not_found"
    s = envd.start("/bin/sleep", ["30"])
    pid = next(s)["event"]["start"]["pid"]
    for sig in ("SIGNAL_UNSPECIFIED", 2):
        code, body = envd.unary("process.Process/SendSignal",
                                {"process": {"pid": pid}, "signal": sig})
        assert code == 501 and body["code"] == "unimplemented", body
    code, body = envd.unary("process.Process/SendSignal",
                            {"process": {"pid": pid}, "signal": "SIGNAL_SIGTERM"})
    assert code == 200
    res = collect(s)
    assert res.end["status"] == "signal: terminated"
    code, body = envd.unary("process.Process/SendSignal", {"process": {}, "signal": 9})
    assert code == 501


def test_connect_second_client_and_stdin(envd):
    s1 = envd.start("/bin/cat", stdin=True)
    pid = next(s1)["event"]["start"]["pid"]
    s2 = envd.stream("process.Process/Connect", {"process": {"pid": pid}})
    assert next(s2)["event"] == {"start": {"pid": pid}}
    code, _ = envd.unary("process.Process/SendInput",
                         {"process": {"pid": pid}, "input": {"stdin": b64(b"hello\n")}})
    assert code == 200
    for s in (s1, s2):
        got = read_until(s, lambda ev: "data" in ev)
        assert stdout_of(got) == b"hello\n"
    code, _ = envd.unary("process.Process/CloseStdin", {"process": {"pid": pid}})
    assert code == 200
    for s in (s1, s2):
        res = collect(s)
        assert res.end == {"exited": True, "status": "exit status 0"}


def test_connect_by_tag_and_unknown(envd):
    s = envd.start("/bin/sleep", ["30"], tag="t1")
    pid = next(s)["event"]["start"]["pid"]
    c = envd.stream("process.Process/Connect", {"process": {"tag": "t1"}})
    assert next(c)["event"] == {"start": {"pid": pid}}
    c.close()
    c = envd.stream("process.Process/Connect", {"process": {"pid": 999999}})
    assert list(c) == []
    assert c.error() == ("not_found", "process with pid 999999 not found")
    envd.unary("process.Process/SendSignal", {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})
    collect(s)


def test_late_connect_gets_exit_code(envd):
    res = envd.sh("exit 5")
    c = envd.stream("process.Process/Connect", {"process": {"pid": res.pid}})
    msgs = list(c)
    assert msgs[0]["event"] == {"start": {"pid": res.pid}}
    assert msgs[-1]["event"]["end"]["exitCode"] == 5
    assert c.end == {}


def test_stdin_errors(envd):
    s = envd.start("/bin/sleep", ["30"], stdin=False)
    pid = next(s)["event"]["start"]["pid"]
    code, body = envd.unary("process.Process/SendInput",
                            {"process": {"pid": pid}, "input": {"stdin": b64(b"x")}})
    assert code == 500 and "stdin" in body["message"]
    code, body = envd.unary("process.Process/SendInput",
                            {"process": {"pid": pid}, "input": {"pty": b64(b"x")}})
    assert code == 500
    code, body = envd.unary("process.Process/SendInput",
                            {"process": {"pid": pid}, "input": {"stdin": "!!notbase64"}})
    assert code == 400
    code, body = envd.unary("process.Process/Update",
                            {"process": {"pid": pid}, "pty": {"size": {"cols": 10, "rows": 10}}})
    assert code == 500
    envd.unary("process.Process/SendSignal", {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})
    collect(s)


def test_stdin_absent_means_enabled(envd):
    s = envd.start("/bin/cat", stdin=None)
    pid = next(s)["event"]["start"]["pid"]
    code, _ = envd.unary("process.Process/SendInput",
                         {"process": {"pid": pid}, "input": {"stdin": b64(b"x\n")}})
    assert code == 200
    envd.unary("process.Process/CloseStdin", {"process": {"pid": pid}})
    res = collect(s)
    assert res.stdout == b"x\n"


def test_pty(envd):
    script = "stty size; tty; read x; stty size; echo got:$x"
    s = envd.start("/bin/bash", ["-c", script], pty=(80, 24),
                   envs={"TERM": "xterm-256color"})
    pid = next(s)["event"]["start"]["pid"]
    got = read_until(s, lambda ev: b"/dev/pts/" in stdout_of([ev]) or False)
    out = stdout_of(got)
    assert b"24 80" in out
    code, _ = envd.unary("process.Process/Update",
                         {"process": {"pid": pid}, "pty": {"size": {"cols": 100, "rows": 30}}})
    assert code == 200
    code, body = envd.unary("process.Process/CloseStdin", {"process": {"pid": pid}})
    assert code == 500 and body["code"] == "unknown"
    code, _ = envd.unary("process.Process/SendInput",
                         {"process": {"pid": pid}, "input": {"pty": b64(b"abc\n")}})
    assert code == 200
    res = collect(s)
    out += res.pty
    assert b"30 100" in out
    assert b"got:abc" in out
    assert all("stdout" not in ev.get("data", {}) for ev in res.events)
    assert res.end["exited"] is True


def test_keepalive_while_idle(envd):
    s = envd.start("/bin/sleep", ["2.5"], keepalive=1)
    res = collect(s)
    assert sum(1 for ev in res.events if "keepalive" in ev) >= 2
    assert {"keepalive": {}} in res.events


def test_process_survives_client_disconnect(envd, fs, tmp):
    fs.chmod(tmp, 0o777)  # the default user writes the marker (in a guest it is not root)
    marker = tmp / "marker"
    s = envd.start("/bin/bash", ["-c", f"sleep 1; echo done > {marker}"])
    pid = next(s)["event"]["start"]["pid"]
    s.close()
    wait_for(lambda: fs.exists(marker))
    # its exit is retained for a late Connect
    c = envd.stream("process.Process/Connect", {"process": {"pid": pid}})
    wait_for(lambda: True)
    msgs = list(c)
    assert msgs[-1]["event"]["end"]["exited"] is True


def still_running(envd, pid):
    return envd.sh(f"kill -0 {pid} && echo alive").stdout == b"alive\n"


def test_exit_with_grandchild_holding_pipes(envd):
    # The grandchild keeps the stdout and stderr pipes open far longer than the stream's
    # read timeout (60 s): the stream ends only if the agent reports the exit without
    # waiting for the pipes to close, and the grandchild is shown to be still there.
    res = envd.sh("sleep 600 & echo hi $!")
    word, grandchild = res.stdout.split()
    try:
        assert word == b"hi" and res.end["exited"] is True, res.stdout
        assert still_running(envd, int(grandchild))
    finally:
        envd.sh(f"kill {int(grandchild)}")


def test_kill_ends_stream_despite_grandchild(envd):
    s = envd.start("/bin/bash", ["-c", "sleep 600 & echo started $!; wait"])
    pid = next(s)["event"]["start"]["pid"]
    out = b""
    while not out.endswith(b"\n"):
        out += stdout_of(read_until(s, lambda ev: "data" in ev))
    grandchild = int(out.split()[1])
    try:
        envd.unary("process.Process/SendSignal",
                   {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})
        res = collect(s)  # a read timeout (60 s) if the stream waited for the grandchild
        assert res.end["status"] == "signal: killed"
    finally:
        envd.sh(f"kill {grandchild} 2>/dev/null; true")


def test_flow_control_bounds_memory(agent, envd):
    # In a guest the stream passes the node's tunnel and the ingress too: each must stop
    # reading when its reader does, or the agent would never see the back pressure.
    rss_kib = agent.rss_kib
    s = envd.start("/bin/cat", ["/dev/zero"])
    pid = next(s)["event"]["start"]["pid"]
    next(s)
    before = rss_kib()
    # The client reads nothing. Kernel socket buffers fill first (a few MiB), then the agent
    # must stop reading the pipe: memory goes flat instead of growing with the output.
    time.sleep(1)
    settled = rss_kib()
    time.sleep(2)
    after = rss_kib()
    assert after - settled < 4 * 1024, (before, settled, after)
    assert after - before < 64 * 1024, (before, settled, after)
    # a slow reader still gets data, and memory stays bounded
    n = 0
    for _ in range(200):
        msg = next(s)
        n += len(msg["event"]["data"]["stdout"])
    assert n > 0
    assert rss_kib() - before < 64 * 1024
    envd.unary("process.Process/SendSignal", {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})
    res = collect(s)
    assert res.end["status"] == "signal: killed"


def test_detached_process_is_not_blocked(envd):
    # With nobody attached, output is read and dropped: the process must finish.
    s = envd.start("/bin/bash", ["-c", "head -c 50000000 /dev/zero; echo end >&2"])
    pid = next(s)["event"]["start"]["pid"]
    s.close()

    def ended():
        code, body = envd.unary("process.Process/List", {})
        return pid not in [p["pid"] for p in body["processes"]]
    wait_for(ended, timeout=30)


def test_many_concurrent_processes(envd):
    streams = [envd.start("/bin/bash", ["-c", f"echo {i}"]) for i in range(20)]
    for i, s in enumerate(streams):
        res = collect(s)
        assert res.stdout == f"{i}\n".encode()


def test_no_fd_leaks(agent, envd, tmp):
    fds = agent.fd_count
    envd.sh("true")
    base = fds()
    for _ in range(10):
        envd.sh("echo x; echo y >&2")
        s = envd.start("/bin/cat", stdin=True)
        pid = next(s)["event"]["start"]["pid"]
        s.close()  # client goes away mid-stream
        envd.unary("process.Process/SendSignal", {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})
        envd.run("/bin/sh", ["-c", "tty"], pty=(80, 24))
        w = envd.stream("filesystem.Filesystem/WatchDir", {"path": str(tmp)})
        next(w)
        w.close()
        code, body = envd.unary("filesystem.Filesystem/CreateWatcher", {"path": str(tmp)})
        envd.unary("filesystem.Filesystem/RemoveWatcher", {"watcherId": body["watcherId"]})
    envd.session.close()
    wait_for(lambda: fds() <= base + 1, timeout=10)


def test_python_serves_http_in_the_base_template(target, envd):
    """E2B's templates have `python`: `python -m http.server` is many users' first server."""
    if target == "host":
        pytest.skip("a property of the base template's packages, not of the agent")
    res = envd.sh("cd /home/user && (python -m http.server 8123 --bind 127.0.0.1 "
                  ">/dev/null 2>&1 & echo $! >/tmp/hs.pid); "
                  "for i in $(seq 100); do curl -sf -o /dev/null http://127.0.0.1:8123/ "
                  "&& echo up && break; sleep 0.1; done; kill $(cat /tmp/hs.pid)")
    assert res.stdout == b"up\n", (res.stdout, res.stderr, res.end)
    assert envd.sh("python --version").stdout.startswith(b"Python 3.")
