"""envd's plain HTTP endpoints: /files, /init, /envs, /metrics and the access token (§5.1, §6.6)."""
import base64
import gzip
import hashlib
import os
import shlex
import time
import urllib.parse
from pathlib import PurePosixPath

import requests

from envd_client import Envd


def files_url(agent, **params):
    return agent.url + "/files?" + urllib.parse.urlencode(params)


def test_upload_single_and_download(agent, fs, tmp):
    target = tmp / "sub" / "dir" / "hello.txt"
    r = agent.http.post(files_url(agent, path=str(target)),
                      files={"file": ("ignored.txt", b"hello world\n")})
    assert r.status_code == 200, r.text
    assert r.json() == [{"name": "hello.txt", "path": str(target), "type": "file"}]
    assert fs.read(target) == b"hello world\n"
    r = agent.http.get(files_url(agent, path=str(target)), headers={"Accept-Encoding": "identity"})
    assert r.status_code == 200
    assert r.content == b"hello world\n"
    assert r.headers["Content-Type"].startswith("text/plain")
    assert r.headers["Content-Length"] == "12"
    assert 'filename="hello.txt"' in r.headers["Content-Disposition"]


def test_download_gzip_and_binary(agent, fs, tmp):
    data = os.urandom(300000) + b"\x00" * 300000
    fs.write(tmp / "blob.bin", data)
    r = agent.http.get(files_url(agent, path=str(tmp / "blob.bin")),
                     headers={"Accept-Encoding": "gzip, deflate"}, stream=True)
    assert r.status_code == 200
    assert r.headers["Content-Encoding"] == "gzip"
    assert r.headers["Vary"] == "Accept-Encoding"
    raw = r.raw.read(decode_content=False)
    assert gzip.decompress(raw) == data
    r = agent.http.get(files_url(agent, path=str(tmp / "blob.bin")),
                       headers={"Accept-Encoding": "identity"})
    assert r.content == data
    assert r.headers["Content-Type"] == "application/octet-stream"


def test_download_range_and_errors(agent, fs, tmp):
    http = agent.http
    fs.write(tmp / "r.txt", b"0123456789")
    url = files_url(agent, path=str(tmp / "r.txt"))
    r = http.get(url, headers={"Range": "bytes=2-5"})
    assert r.status_code == 206
    assert r.content == b"2345"
    assert r.headers["Content-Range"] == "bytes 2-5/10"
    r = http.get(url, headers={"Range": "bytes=-3"})
    assert r.content == b"789"
    r = http.get(url, headers={"Range": "bytes=20-"})
    assert r.status_code == 416
    r = http.get(files_url(agent, path=str(tmp / "missing")))
    assert r.status_code == 404
    assert r.headers["Content-Type"] == "application/json"
    assert r.json()["code"] == 404
    r = http.get(files_url(agent, path=str(tmp)))
    assert r.status_code == 400
    r = http.get(files_url(agent, path=str(tmp / "r.txt"), username="ghost-user-x"))
    assert r.status_code == 401
    r = http.get(url, headers={"Accept-Encoding": "br, identity;q=0"})
    assert r.status_code == 406


def test_upload_multiple_files_with_full_paths(agent, fs, tmp):
    http = agent.http
    files = [
        ("file", (str(tmp / "a" / "one.txt"), b"1")),
        ("file", (str(tmp / "b" / "c" / "two.bin"), b"\x00\x01")),
    ]
    r = http.post(agent.url + "/files", files=files)
    assert r.status_code == 200, r.text
    assert [e["path"] for e in r.json()] == [str(tmp / "a" / "one.txt"),
                                             str(tmp / "b" / "c" / "two.bin")]
    assert fs.read(tmp / "a" / "one.txt") == b"1"
    assert fs.read(tmp / "b" / "c" / "two.bin") == b"\x00\x01"
    # the same target twice in one request is refused
    files = [("file", (str(tmp / "d.txt"), b"1")), ("file", (str(tmp / "d.txt"), b"2"))]
    r = http.post(agent.url + "/files", files=files)
    assert r.status_code == 400
    # a directory target is refused
    r = http.post(files_url(agent, path=str(tmp / "a")), files={"file": ("x", b"1")})
    assert r.status_code == 400


def test_upload_owned_by_user(agent, fs, tmp):
    fs.chmod(tmp, 0o755)
    target = tmp / "u1" / "u2" / "f.txt"
    r = agent.http.post(files_url(agent, path=str(target), username="nobody"),
                        files={"file": ("f.txt", b"x")})
    assert r.status_code == 200, r.text
    uid = fs.user_uid("nobody")
    assert fs.uid(target) == uid
    assert fs.uid(tmp / "u1") == uid
    assert fs.uid(tmp / "u1" / "u2") == uid
    r = agent.http.post(files_url(agent, path=str(target), username="ghost-user-x"),
                        files={"file": ("f.txt", b"x")})
    assert r.status_code == 401


def test_upload_octet_stream_gzip(agent, fs, tmp):
    http = agent.http
    data = b"compressible " * 10000
    target = tmp / "gz" / "data.txt"
    r = http.post(files_url(agent, path=str(target)), data=gzip.compress(data),
                  headers={"Content-Type": "application/octet-stream",
                           "Content-Encoding": "gzip"})
    assert r.status_code == 200, r.text
    assert fs.read(target) == data
    r = http.post(files_url(agent, path=str(target)), data=b"not gzip",
                  headers={"Content-Type": "application/octet-stream",
                           "Content-Encoding": "gzip"})
    assert r.status_code == 400
    r = http.post(agent.url + "/files", data=b"x",
                  headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 400
    r = http.post(files_url(agent, path=str(target)), data=b"x",
                  headers={"Content-Type": "text/plain"})
    assert r.status_code == 400
    r = http.post(files_url(agent, path=str(target)), data=b"--x\r\nbroken",
                  headers={"Content-Type": "multipart/form-data; boundary=x"})
    assert r.status_code == 400


def test_upload_large_binary_roundtrip(agent, tmp):
    data = os.urandom(8 * 1024 * 1024)
    target = tmp / "big.bin"
    r = agent.http.post(files_url(agent, path=str(target)), files={"file": ("big.bin", data)})
    assert r.status_code == 200
    r = agent.http.get(files_url(agent, path=str(target)))
    assert hashlib.sha256(r.content).digest() == hashlib.sha256(data).digest()


def sign(path, op, user, token, exp=None):
    raw = f"{path}:{op}:{user}:{token}" + (f":{exp}" if exp is not None else "")
    return "v1_" + base64.b64encode(hashlib.sha256(raw.encode()).digest()).decode().rstrip("=")


def test_access_token(fresh_agent):
    agent = fresh_agent
    http = agent.bare  # no token of its own: this test sends exactly the tokens it means
    fs, tmp = agent.fs, agent.tmp
    # A guest's agent got a token from the platform's /init at create; a host one has none.
    first = {"X-Access-Token": agent.token} if agent.token else {}
    fs.chmod(tmp, 0o755)
    fs.write(tmp / "s.txt", "signed")  # before the token changes under the guest's fs
    r = http.post(agent.url + "/init", json={"accessToken": "secret-1"}, headers=first)
    assert r.status_code == 204
    assert r.headers["X-Envd-Version"] == "0.6.4"
    plain = Envd(agent.url, headers=agent.route)
    code, body = plain.unary("process.Process/List", {})
    assert code == 401 and body["code"] == 401
    assert "unauthorized access" in body["message"]
    authed = Envd(agent.url, token="secret-1", headers=agent.route)
    code, _ = authed.unary("process.Process/List", {})
    assert code == 200
    assert authed.sh("echo ok").stdout == b"ok\n"
    assert http.get(agent.url + "/health").status_code == 204
    assert http.get(agent.url + "/envs").status_code == 401

    p = str(tmp / "s.txt")
    assert http.get(files_url(agent, path=p)).status_code == 401
    r = http.get(files_url(agent, path=p), headers={"X-Access-Token": "secret-1"})
    assert r.status_code == 200
    r = http.get(files_url(agent, path=p), headers={"X-Access-Token": "wrong"})
    assert r.status_code == 401
    r = http.get(files_url(agent, path=p, signature=sign(p, "read", "", "secret-1")))
    assert r.status_code == 200 and r.content == b"signed"
    r = http.get(files_url(agent, path=p, username="root",
                           signature=sign(p, "read", "root", "secret-1")))
    assert r.status_code == 200
    r = http.get(files_url(agent, path=p, signature=sign(p, "write", "", "secret-1")))
    assert r.status_code == 401
    exp = int(time.time()) + 60
    r = http.get(files_url(agent, path=p, signature=sign(p, "read", "", "secret-1", exp),
                           signature_expiration=exp))
    assert r.status_code == 200
    exp = int(time.time()) - 60
    r = http.get(files_url(agent, path=p, signature=sign(p, "read", "", "secret-1", exp),
                           signature_expiration=exp))
    assert r.status_code == 401
    up = str(tmp / "up.txt")
    r = http.post(files_url(agent, path=up, signature=sign(up, "write", "", "secret-1")),
                  files={"file": ("up.txt", b"u")})
    assert r.status_code == 200

    # the token cannot be changed without proving the old one
    r = http.post(agent.url + "/init", json={"accessToken": "secret-2"})
    assert r.status_code == 401
    r = http.post(agent.url + "/init", json={"accessToken": "secret-1"})
    assert r.status_code == 204
    r = http.post(agent.url + "/init", json={"accessToken": "secret-2"},
                  headers={"X-Access-Token": "secret-1"})
    assert r.status_code == 204
    code, _ = Envd(agent.url, token="secret-2", headers=agent.route).unary(
        "process.Process/List", {})
    assert code == 200


# Every route but /health, each (method, path, body) as a process in the sandbox could send it.
ROUTES_WITHOUT_TOKEN = [
    ("POST", "/init", '{"defaultUser":"root","envVars":{"LD_PRELOAD":"/tmp/evil.so"}}'),
    ("POST", "/init", '{"accessToken":"mine","defaultUser":"root"}'),
    ("POST", "/init", ""),
    ("GET", "/envs", None),
    ("GET", "/metrics", None),
    ("GET", "/files?path=/etc/hostname", None),
    ("POST", "/files?path=/tmp/x", ""),
    ("POST", "/files/compose", '{"source_paths":["/etc/hostname"],"destination":"/tmp/y"}'),
    ("GET", "/nope", None),
] + [("POST", "/process.Process/" + m, "{}") for m in
     ("Start", "Connect", "List", "SendInput", "SendSignal", "CloseStdin", "Update", "StreamInput")
     ] + [("POST", "/filesystem.Filesystem/" + m, "{}") for m in
          ("Stat", "ListDir", "MakeDir", "Move", "Remove", "WatchDir", "CreateWatcher",
           "GetWatcherEvents", "RemoveWatcher")]


def statuses_from_inside(agent, envd, routes):
    """HTTP statuses of routes sent to the agent from its own machine, without a token: in a
    guest by curl as `user` (any process there reaches the agent; envd starts it), on the
    host directly."""
    if agent.kind == "host":
        out = []
        for method, path, body in routes:
            h = {"Content-Type": "application/json"} if body is not None else {}
            r = requests.request(method, agent.url + path, data=body, headers=h, timeout=30)
            out.append(r.status_code)
        return out
    script = []
    for method, path, body in routes:
        data = f"-H 'Content-Type: application/json' --data-binary {shlex.quote(body)} " \
            if body is not None else ""
        script.append(f"curl -s -o /dev/null -w '%{{http_code}}\\n' -X {method} {data}"
                      f"{shlex.quote('http://127.0.0.1:49983' + path)}")
    res = envd.sh("; ".join(script), user="user")
    return [int(x) for x in res.stdout.split()]


def test_init_and_every_route_refused_without_the_token(fresh_agent):
    """Issue 7: once the platform set a token, no process in the sandbox can post /init (to
    make root the default user, or poison every later command's env) or use any route."""
    agent = fresh_agent
    first = {"X-Access-Token": agent.token} if agent.token else {}
    r = agent.bare.post(agent.url + "/init", json={"accessToken": "secret-1"}, headers=first)
    assert r.status_code == 204
    envd = Envd(agent.url, token="secret-1", headers=agent.route)
    user_before = envd.sh("id -un").stdout
    got = statuses_from_inside(agent, envd, ROUTES_WITHOUT_TOKEN)
    assert got == [401] * len(ROUTES_WITHOUT_TOKEN), list(zip(ROUTES_WITHOUT_TOKEN, got))
    assert statuses_from_inside(agent, envd, [("GET", "/health", None)]) == [204]
    # nothing changed: same default user, no LD_PRELOAD, the token still the platform's
    res = envd.sh("id -un; echo \"[$LD_PRELOAD]\"")
    assert res.stdout == user_before + b"[]\n"
    r = agent.bare.post(agent.url + "/init", json={"accessToken": "secret-1"})
    assert r.status_code == 204  # the host re-sending /init with the token is idempotent
    r = agent.bare.post(agent.url + "/init", json={"accessToken": "wrong", "envVars": {"A": "1"}})
    assert r.status_code == 401 and r.json()["message"] == "access token validation failed"
    r = agent.bare.post(agent.url + "/init", json={"envVars": {"A": "1"}})
    assert r.status_code == 401 and r.json()["message"] == "access token reset not authorized"
    assert envd.unary("process.Process/List", {})[0] == 200


def test_init_env_user_workdir(fresh_agent):
    agent = fresh_agent
    http, fs, envd = agent.http, agent.fs, agent.envd()
    workdir = fs.mkdtemp()
    fs.chmod(workdir, 0o755)
    r = http.post(agent.url + "/init", json={
        "envVars": {"SANDBOX_VAR": "sv", "OVERRIDE": "sandbox"},
        "defaultUser": "nobody",
        "defaultWorkdir": str(workdir),
        "timestamp": "2024-01-01T00:00:00.5Z",
    })
    assert r.status_code == 204
    res = envd.sh("echo $SANDBOX_VAR $OVERRIDE $E2B_SANDBOX; id -un; pwd",
                  envs={"OVERRIDE": "request"})
    assert res.stream_end == {}
    assert res.stdout.decode().splitlines() == ["sv request true", "nobody", str(workdir)]
    res = envd.sh("id -un", user="root")
    assert res.stdout == b"root\n"
    fs.rmdir(workdir)
    # a default workdir that is gone is a missing cwd
    assert envd.sh("true").stream_end["error"]["code"] == "invalid_argument"
    r = http.get(agent.url + "/envs")
    assert r.status_code == 200
    assert r.json()["SANDBOX_VAR"] == "sv"
    if agent.kind == "host":
        # the host clock is left alone outside the guest
        assert time.time() > 1704067200 + 30 * 86400
    else:
        # a guest's clock follows the timestamp (a restored snapshot's clock is stale)
        assert 1704067200 <= fs.now() < 1704067200 + 600
    assert http.post(agent.url + "/init", data=b"{nope").status_code == 400
    assert http.post(agent.url + "/init", json={"envVars": {"A": 1}}).status_code == 400
    assert http.post(agent.url + "/init", json={"timestamp": "yesterday"}).status_code == 400
    assert http.post(agent.url + "/init").status_code == 204
    assert http.get(agent.url + "/init").status_code == 405


def test_init_writes_e2b_files(fresh_agent):
    a = fresh_agent
    r = a.http.post(a.url + "/init", json={"envVars": {"E2B_SANDBOX_ID": "abc123",
                                                        "E2B_TEMPLATE_ID": "base",
                                                        "OTHER": "x"}})
    assert r.status_code == 204
    e2b = PurePosixPath(a.e2b_dir)
    assert a.fs.read(e2b / ".E2B_SANDBOX_ID") == b"abc123"
    assert a.fs.read(e2b / ".E2B_TEMPLATE_ID") == b"base"
    assert not a.fs.exists(e2b / ".OTHER")


def test_metrics(agent, fs):
    r = agent.http.get(agent.url + "/metrics")
    assert r.status_code == 200
    m = r.json()
    for key in ("ts", "cpu_count", "cpu_used_pct", "mem_total", "mem_used", "mem_cache",
                "mem_total_mib", "mem_used_mib", "disk_used", "disk_total"):
        assert key in m, key
    assert m["cpu_count"] >= 1
    assert m["mem_total"] > m["mem_used"] > 0
    assert m["mem_total_mib"] == m["mem_total"] >> 20
    assert abs(m["ts"] - fs.now()) < 5


def test_unknown_paths(agent):
    r = agent.http.get(agent.url + "/nope")
    assert r.status_code == 404 and r.json()["code"] == 404
    r = agent.http.post(agent.url + "/filesystem.Filesystem/Nope", json={})
    assert r.status_code == 404 and r.json()["code"] == "unimplemented"
    r = agent.http.put(agent.url + "/files")
    assert r.status_code == 405


def test_upload_metadata(agent, envd, fs, tmp):
    """envd: metadata in user.e2b.<key> xattrs; each upload replaces the whole set."""
    http = agent.http
    target = tmp / "m.txt"
    r = http.post(files_url(agent, path=str(target)), files={"file": ("m.txt", b"x")},
                  headers={"X-Metadata-Team": "ai", "X-Metadata-Run-ID": "42"})
    assert r.status_code == 200, r.text
    assert r.json()[0]["metadata"] == {"team": "ai", "run-id": "42"}
    assert fs.getxattr(target, "user.e2b.team") == b"ai"
    assert fs.listxattr(target) == ["user.e2b.run-id", "user.e2b.team"]
    code, body = envd.unary("filesystem.Filesystem/Stat", {"path": str(target)})
    assert body["entry"]["metadata"] == {"team": "ai", "run-id": "42"}
    # new headers replace all existing metadata
    r = http.post(files_url(agent, path=str(target)), files={"file": ("m.txt", b"y")},
                  headers={"X-Metadata-Other": "1"})
    assert r.json()[0]["metadata"] == {"other": "1"}
    code, body = envd.unary("filesystem.Filesystem/Stat", {"path": str(target)})
    assert body["entry"]["metadata"] == {"other": "1"}
    # other tools' user.* attributes are neither reported nor cleared
    fs.setxattr(target, "user.tool", b"keep")
    code, body = envd.unary("filesystem.Filesystem/Stat", {"path": str(target)})
    assert body["entry"]["metadata"] == {"other": "1"}
    # an overwrite without metadata headers clears the old metadata (raw body too)
    r = http.post(files_url(agent, path=str(target)), data=b"z",
                  headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 200, r.text
    assert "metadata" not in r.json()[0]
    code, body = envd.unary("filesystem.Filesystem/Stat", {"path": str(target)})
    assert "metadata" not in body["entry"]
    assert fs.listxattr(target) == ["user.tool"]
    # without metadata headers the entry has no metadata field
    r = http.post(files_url(agent, path=str(tmp / "plain")), files={"file": ("p", b"")})
    assert "metadata" not in r.json()[0]


def test_metadata_follows_the_file(agent, envd, fs, tmp):
    """Move keeps it (the inode's xattrs), ListDir and symlinks report it; a value set by
    hand that is not UTF-8 is skipped, as envd does."""
    http = agent.http
    r = http.post(files_url(agent, path=str(tmp / "a.txt")), files={"file": ("a", b"1")},
                  headers={"X-Metadata-K": "v"})
    assert r.status_code == 200, r.text
    code, body = envd.unary("filesystem.Filesystem/Move", {"source": str(tmp / "a.txt"),
                                                           "destination": str(tmp / "b.txt")})
    assert code == 200, body
    assert body["entry"]["metadata"] == {"k": "v"}
    fs.symlink(tmp / "b.txt", tmp / "link")
    fs.setxattr(tmp / "b.txt", "user.e2b.bin", b"\xff\xfe")
    code, body = envd.unary("filesystem.Filesystem/ListDir", {"path": str(tmp)})
    got = {e["name"]: e.get("metadata") for e in body["entries"]}
    assert got == {"b.txt": {"k": "v"}, "link": {"k": "v"}}


def test_invalid_metadata_refused(agent, fs, tmp):
    """envd's ValidateMetadata: 400 with its message, nothing written."""
    http = agent.http
    target = tmp / "bad.txt"
    cases = [
        ({"X-Metadata-" + "k" * 247: "v"}, f'metadata key "{"k" * 247}" exceeds 246 bytes'),
        ({"X-Metadata-K": "v" * 4087}, "total metadata size 4097 exceeds 4096 bytes"),
    ]
    if agent.kind == "host":  # the ingress refuses control bytes in a header before the agent
        cases.append(({"X-Metadata-K": "a\x7fb"},
                      'metadata value for key "k" contains non-printable-ASCII byte 0x7f at '
                      'offset 1'))
    for headers, message in cases:
        r = http.post(files_url(agent, path=str(target)), files={"file": ("b", b"x")},
                      headers=headers)
        assert r.status_code == 400, r.text
        assert r.json() == {"code": 400, "message": "invalid metadata: " + message}
    assert not fs.exists(target)
    # within the budget: stored (ext4's per-entry overhead makes the last bytes a 507, as on envd)
    r = http.post(files_url(agent, path=str(target)), files={"file": ("b", b"x")},
                  headers={"X-Metadata-K": "v" * 3000})
    assert r.status_code == 200, r.text
    assert r.json()[0]["metadata"] == {"k": "v" * 3000}


def test_files_compose(agent, fs, tmp):
    http = agent.http
    for i in range(3):
        fs.write(tmp / f"part{i}", bytes([65 + i]) * 1000)
    dest = tmp / "out" / "joined.bin"
    r = http.post(agent.url + "/files/compose", json={
        "source_paths": [str(tmp / f"part{i}") for i in range(3)],
        "destination": str(dest)})
    assert r.status_code == 200, r.text
    assert r.json() == {"name": "joined.bin", "path": str(dest), "type": "file"}
    assert fs.read(dest) == b"A" * 1000 + b"B" * 1000 + b"C" * 1000
    assert not fs.exists(tmp / "part0")
    r = http.post(agent.url + "/files/compose", json={
        "source_paths": [str(tmp / "missing")], "destination": str(dest)})
    assert r.status_code == 404
    r = http.post(agent.url + "/files/compose", json={"source_paths": [],
                                                       "destination": str(dest)})
    assert r.status_code == 400
    r = http.post(agent.url + "/files/compose", json={"source_paths": [str(dest)],
                                                       "destination": str(dest)})
    assert r.status_code == 400
    assert fs.exists(dest)


def test_large_body_needs_a_token_in_the_head(fresh_agent):
    """Issue 7: the agent must not buffer a large body for a request whose head proves
    nothing: past 256 KiB such a body is refused (413) before it is read; the token header or
    a /files signature in the head lifts the limit to --max-upload."""
    agent = fresh_agent
    first = {"X-Access-Token": agent.token} if agent.token else {}
    r = agent.bare.post(agent.url + "/init", json={"accessToken": "secret-1"}, headers=first)
    assert r.status_code == 204
    envd = Envd(agent.url, token="secret-1", headers=agent.route)
    big = b"x" * (2 * 1024 * 1024)
    path = str(agent.tmp / "big.bin")
    if agent.kind == "guest":
        # from inside, as any process can: the ingress is not in front of 127.0.0.1:49983
        res = envd.sh("head -c 2097152 /dev/zero | curl -s -o /dev/null -w '%{http_code}' "
                      "-H 'Content-Type: application/octet-stream' --data-binary @- "
                      f"'http://127.0.0.1:49983/files?path=/tmp/big-unauth'; echo; "
                      "test -e /tmp/big-unauth && echo created || echo absent", user="user")
        assert res.stdout.split() == [b"413", b"absent"], res.stdout
    else:
        s = requests.Session()  # one keep-alive connection for all of it
        raw = {"Content-Type": "application/octet-stream"}
        assert s.get(agent.url + "/health").status_code == 204
        r = s.post(files_url(agent, path=path), data=big, headers=dict(raw, **{
            "X-Access-Token": "secret-1"}))
        assert r.status_code == 200, r.text  # the head of the second request decided
        try:
            r = s.post(files_url(agent, path=path + ".2"), data=big, headers=raw)
            assert r.status_code == 413
        except requests.ConnectionError:
            pass  # refused before the body: the client may see the close first
        assert not agent.fs.exists(agent.tmp / "big.bin.2")
        sig = sign(path + ".3", "write", "", "secret-1")
        r = requests.post(files_url(agent, path=path + ".3", signature=sig), data=big,
                          headers=raw)
        assert r.status_code == 200, r.text
        r = requests.post(agent.url + "/init", data=b" " * (300 * 1024) + b"{}",
                          headers={"Content-Type": "application/json"})
        assert r.status_code == 413
        # small unauthenticated bodies still reach the agent, which answers 401
        r = requests.post(files_url(agent, path=path + ".4"), data=b"small", headers=raw)
        assert r.status_code == 401
    # the agent is still there and takes a large upload with the token
    r = agent.bare.post(files_url(agent, path=path), data=big,
                        headers={"Content-Type": "application/octet-stream",
                                 "X-Access-Token": "secret-1"})
    assert r.status_code == 200, r.text
    assert envd.unary("process.Process/List", {})[0] == 200
