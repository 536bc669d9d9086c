"""filesystem.Filesystem over Connect JSON (e2b-compat.md §6.4)."""
import os
import time

import pytest

from conftest import wait_for


@pytest.fixture
def tree(fs, tmp):
    fs.write(tmp / "b.txt", b"hello")
    fs.mkdir(tmp / "a")
    fs.write(tmp / "a" / "inner.txt", b"x" * 10)
    fs.mkdir(tmp / "a" / "deep")
    fs.write(tmp / "a" / "deep" / "z", b"")
    fs.symlink("b.txt", tmp / "link")
    return tmp


def test_stat(envd, tree):
    code, body = envd.unary("filesystem.Filesystem/Stat", {"path": str(tree / "b.txt")})
    assert code == 200
    e = body["entry"]
    assert e["name"] == "b.txt"
    assert e["type"] == "FILE_TYPE_FILE"
    assert e["path"] == str(tree / "b.txt")
    assert e["size"] == "5"
    assert e["permissions"] == "-rw-r--r--"
    assert e["mode"] == 0o644
    assert e["owner"] == "root" and e["group"] == "root"
    assert e["modifiedTime"].endswith("Z")
    code, body = envd.unary("filesystem.Filesystem/Stat", {"path": str(tree / "link")})
    assert body["entry"]["type"] == "FILE_TYPE_FILE"
    assert body["entry"]["symlinkTarget"] == str(tree / "b.txt")
    assert body["entry"]["permissions"].startswith("L")
    code, body = envd.unary("filesystem.Filesystem/Stat", {"path": str(tree / "a")})
    assert body["entry"]["type"] == "FILE_TYPE_DIRECTORY"


def test_stat_missing_is_not_found(envd, tree):
    code, body = envd.unary("filesystem.Filesystem/Stat", {"path": str(tree / "nope")})
    assert code == 404
    assert body["code"] == "not_found"


def test_relative_path_resolves_to_home(agent, envd):
    code, body = envd.unary("filesystem.Filesystem/Stat", {"path": ""})
    assert code == 200 and body["entry"]["path"] == agent.home
    code, body = envd.unary("filesystem.Filesystem/Stat", {"path": "~"})
    assert body["entry"]["path"] == agent.home


def test_list_dir(envd, tree):
    code, body = envd.unary("filesystem.Filesystem/ListDir", {"path": str(tree), "depth": 1})
    assert code == 200
    names = [e["name"] for e in body["entries"]]
    assert names == ["a", "b.txt", "link"]
    assert all(e["path"].startswith(str(tree) + "/") for e in body["entries"])
    code, body = envd.unary("filesystem.Filesystem/ListDir", {"path": str(tree), "depth": 2})
    paths = [os.path.relpath(e["path"], tree) for e in body["entries"]]
    assert paths == ["a", "a/deep", "a/inner.txt", "b.txt", "link"]
    code, body = envd.unary("filesystem.Filesystem/ListDir", {"path": str(tree), "depth": 0})
    assert len(body["entries"]) == 3
    code, body = envd.unary("filesystem.Filesystem/ListDir", {"path": str(tree / "b.txt")})
    assert code == 400 and body["code"] == "invalid_argument"
    code, body = envd.unary("filesystem.Filesystem/ListDir", {"path": str(tree / "missing")})
    assert code == 404 and body["code"] == "not_found"


def test_make_dir(envd, fs, tmp):
    target = tmp / "x" / "y"
    code, body = envd.unary("filesystem.Filesystem/MakeDir", {"path": str(target)})
    assert code == 200
    assert body["entry"] == {"name": "y", "type": "FILE_TYPE_DIRECTORY", "path": str(target)}
    assert fs.is_dir(target)
    code, body = envd.unary("filesystem.Filesystem/MakeDir", {"path": str(target)})
    assert code == 409 and body["code"] == "already_exists"
    fs.write(tmp / "f", "")
    code, body = envd.unary("filesystem.Filesystem/MakeDir", {"path": str(tmp / "f")})
    assert code == 400 and body["code"] == "invalid_argument"


def test_make_dir_owned_by_user(envd, fs, tmp):
    fs.chmod(tmp, 0o755)
    target = tmp / "n1" / "n2"
    code, _ = envd.unary("filesystem.Filesystem/MakeDir", {"path": str(target)}, user="nobody")
    assert code == 200
    nobody = fs.user_uid("nobody")
    assert fs.uid(target) == nobody
    assert fs.uid(tmp / "n1") == nobody
    assert fs.uid(tmp) == 0
    code, body = envd.unary("filesystem.Filesystem/MakeDir", {"path": "x"}, user="ghost-user-x")
    assert code == 401 and body["code"] == "unauthenticated"


def test_move(envd, fs, tree):
    dst = tree / "new" / "dir" / "moved.txt"
    code, body = envd.unary("filesystem.Filesystem/Move",
                            {"source": str(tree / "b.txt"), "destination": str(dst)})
    assert code == 200
    assert body["entry"]["path"] == str(dst)
    assert fs.read(dst) == b"hello"
    code, body = envd.unary("filesystem.Filesystem/Move",
                            {"source": str(tree / "b.txt"), "destination": str(dst)})
    assert code == 404 and body["code"] == "not_found"


def test_remove(envd, fs, tree):
    code, body = envd.unary("filesystem.Filesystem/Remove", {"path": str(tree / "a")})
    assert (code, body) == (200, {})
    assert not fs.exists(tree / "a")
    code, body = envd.unary("filesystem.Filesystem/Remove", {"path": str(tree / "a")})
    assert code == 200
    code, body = envd.unary("filesystem.Filesystem/Remove", {"path": str(tree / "link")})
    assert code == 200
    assert fs.exists(tree / "b.txt")


def test_bad_requests(envd):
    code, body = envd.unary("filesystem.Filesystem/Stat", {"path": 5})
    assert code == 400 and body["code"] == "invalid_argument"
    code, body = envd.unary("filesystem.Filesystem/ListDir", {"path": "/", "depth": "x"})
    assert code == 400


def fs_events(stream, n, timeout=10):
    events = []
    deadline = time.time() + timeout
    for msg in stream:
        if "filesystem" in msg:
            events.append(msg["filesystem"])
            if len(events) >= n:
                break
        assert time.time() < deadline
    return events


def test_watch_dir(envd, fs, tmp):
    s = envd.stream("filesystem.Filesystem/WatchDir", {"path": str(tmp)})
    assert next(s) == {"start": {}}
    fs.write(tmp / "new.txt", "data")
    evs = fs_events(s, 2)
    assert evs[0] == {"name": "new.txt", "type": "EVENT_TYPE_CREATE"}
    assert evs[1] == {"name": "new.txt", "type": "EVENT_TYPE_WRITE"}
    fs.unlink(tmp / "new.txt")
    evs = fs_events(s, 1)
    assert evs[0] == {"name": "new.txt", "type": "EVENT_TYPE_REMOVE"}
    fs.mkdir(tmp / "sub")
    assert fs_events(s, 1)[0] == {"name": "sub", "type": "EVENT_TYPE_CREATE"}
    fs.write(tmp / "sub" / "f", "x")   # not recursive: no event for it
    fs.rename(tmp / "sub", tmp / "sub2")
    evs = fs_events(s, 2)
    assert evs == [{"name": "sub", "type": "EVENT_TYPE_RENAME"},
                   {"name": "sub2", "type": "EVENT_TYPE_CREATE"}]
    s.close()


def test_watch_dir_recursive_with_entry(envd, fs, tmp):
    fs.mkdir(tmp / "pre")
    s = envd.stream("filesystem.Filesystem/WatchDir",
                    {"path": str(tmp), "recursive": True, "includeEntry": True})
    assert next(s) == {"start": {}}
    fs.write(tmp / "pre" / "a.txt", "1")
    evs = fs_events(s, 2)
    assert evs[0]["name"] == "pre/a.txt" and evs[0]["type"] == "EVENT_TYPE_CREATE"
    assert evs[0]["entry"]["path"] == str(tmp / "pre" / "a.txt")
    fs.mkdir(tmp / "later")
    fs_events(s, 1)
    time.sleep(0.2)
    fs.write(tmp / "later" / "b", "2")
    evs = fs_events(s, 2)
    assert [e["name"] for e in evs] == ["later/b", "later/b"]
    fs.chmod(tmp / "later" / "b", 0o600)
    evs = fs_events(s, 1)
    assert evs[0]["type"] == "EVENT_TYPE_CHMOD"
    assert evs[0]["entry"]["mode"] == 0o600
    s.close()


def test_watch_dir_errors(envd, fs, tmp):
    s = envd.stream("filesystem.Filesystem/WatchDir", {"path": str(tmp / "missing")})
    assert list(s) == []
    assert s.error()[0] == "not_found"
    fs.write(tmp / "f", "")
    s = envd.stream("filesystem.Filesystem/WatchDir", {"path": str(tmp / "f")})
    assert list(s) == []
    assert s.error()[0] == "invalid_argument"


def test_watch_dir_deadline(envd, tmp):
    s = envd.stream("filesystem.Filesystem/WatchDir", {"path": str(tmp)},
                    headers={"Connect-Timeout-Ms": "300"})
    msgs = list(s)
    assert msgs == [{"start": {}}]
    assert s.error()[0] == "deadline_exceeded"


def test_polled_watcher(envd, fs, tmp):
    code, body = envd.unary("filesystem.Filesystem/CreateWatcher",
                            {"path": str(tmp), "recursive": False})
    assert code == 200
    wid = body["watcherId"]
    assert wid.startswith("w")
    fs.write(tmp / "p.txt", "x")

    def got():
        code, body = envd.unary("filesystem.Filesystem/GetWatcherEvents", {"watcherId": wid})
        assert code == 200
        return body.get("events")
    evs = wait_for(got)
    assert evs[0] == {"name": "p.txt", "type": "EVENT_TYPE_CREATE"}
    code, body = envd.unary("filesystem.Filesystem/GetWatcherEvents", {"watcherId": wid})
    assert code == 200
    code, body = envd.unary("filesystem.Filesystem/RemoveWatcher", {"watcherId": wid})
    assert (code, body) == (200, {})
    code, body = envd.unary("filesystem.Filesystem/GetWatcherEvents", {"watcherId": wid})
    assert code == 404 and body["code"] == "not_found"
    code, body = envd.unary("filesystem.Filesystem/RemoveWatcher", {"watcherId": wid})
    assert code == 404
