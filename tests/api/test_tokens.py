"""Envd access tokens at rest (issue 7 item 6, docs/security.md "Tokens at rest").

After a real create, the token's bytes appear nowhere in the store: not in
space.db, its -wal or -shm (SQLite; read as files), not in any row of any
table (PostgreSQL; read as text), not in the api log. Yet the token still
works: create and connect hand it back, the node's agent got it at /init,
and the ingress admits it and refuses a wrong one. A restart of space-api
(same key) still opens it; a space-api given another key refuses to start
rather than serve with tokens it cannot open. Runs on SQLite and, with
SPACE_TEST_PG_URL, PostgreSQL.
"""
import http.client
import json
import os
import stat
import subprocess

import pytest

from lib.platform import STORES, store_platform, e2b

@pytest.fixture(scope="module", params=STORES)
def plat(request):
    with store_platform("tokens", request.param) as p:
        yield p



def ingress(plat, sid, path, token=None):
    conn = http.client.HTTPConnection("127.0.0.1", plat.ingress_port, timeout=60)
    try:
        h = {"Host": f"49983-{sid}.space.test"}
        if token is not None:
            h["X-Access-Token"] = token
        conn.request("GET", path, headers=h)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def store_text(plat):
    """Everything the store holds, as bytes: the SQLite files, or every PostgreSQL row."""
    if not plat.store:
        out = b""
        for suffix in ("", "-wal", "-shm"):
            path = os.path.join(plat.data, "space.db" + suffix)
            if os.path.exists(path):
                with open(path, "rb") as f:
                    out += f.read()
        assert out
        return out
    sql = ("SELECT t::text FROM sandboxes t UNION ALL SELECT t::text FROM operations t "
           "UNION ALL SELECT t::text FROM api_keys t")
    res = subprocess.run(["psql", plat.store, "-XAtc", sql], capture_output=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout
    return res.stdout


@pytest.fixture(scope="module")
def sandbox(plat):
    r = e2b(plat, "POST", "/sandboxes", json={"templateID": "base", "timeout": 600})
    assert r.status_code == 201, r.text
    sb = r.json()
    yield sb
    # The native API waits for the kill to finish, so nothing is left when the platform stops.
    status, _ = plat.admin("DELETE", f"/v1/sandboxes/{sb['sandboxID']}?wait=true")
    assert status == 204


def test_key_file(plat):
    path = os.path.join(plat.data, "store.key")
    if plat.store:
        path = plat.api_args[plat.api_args.index("--store-key") + 1]
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_size == 32


def test_token_not_at_rest(plat, sandbox):
    token = sandbox["envdAccessToken"]
    assert len(token) == 32
    text = store_text(plat)
    assert sandbox["sandboxID"].encode() in text  # we are looking at the right store
    assert token.encode() not in text
    assert token.encode() not in plat.api_log_full().encode()


def test_token_still_works(plat, sandbox):
    sid, token = sandbox["sandboxID"], sandbox["envdAccessToken"]
    r = e2b(plat, "POST", f"/sandboxes/{sid}/connect", json={"timeout": 600})
    assert r.status_code == 200, r.text
    assert r.json()["envdAccessToken"] == token
    # The agent got it at /init: the ingress forwards it and envd accepts it.
    status, body = ingress(plat, sid, "/envs", token)
    assert status == 200, body
    for wrong in (None, "wrong", token[:-1], token + "x", token.upper()):
        status, body = ingress(plat, sid, "/envs", wrong)
        assert status == 401, (wrong, body)
        assert json.loads(body)["code"] == 401
    assert token.encode() not in store_text(plat)


def test_restart_and_other_key(plat, sandbox):
    sid, token = sandbox["sandboxID"], sandbox["envdAccessToken"]
    plat.stop_api()
    # Another key: space-api refuses to start, and says why.
    other = os.path.join(plat.data, "other.key")
    with open(os.open(other, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
        f.write(os.urandom(32))
    saved = plat.api_args
    plat.api_args = [*saved, "--store-key", other]
    with pytest.raises(AssertionError, match="sealed with key"):
        plat.start_api(timeout=30)
    plat.api = None
    plat.api_args = saved
    # The right key again: the token opens, the ingress admits it.
    plat.start_api()
    r = e2b(plat, "POST", f"/sandboxes/{sid}/connect", json={"timeout": 600})
    assert r.status_code == 200 and r.json()["envdAccessToken"] == token
    assert ingress(plat, sid, "/envs", token)[0] == 200
    assert ingress(plat, sid, "/envs", "wrong")[0] == 401


def test_node_record_private(plat, sandbox):
    """The node keeps the token too (to call the agent after a re-attach): root-only files."""
    token = sandbox["envdAccessToken"]
    base = os.path.join(plat.node.data, "instances")
    assert stat.S_IMODE(os.stat(base).st_mode) == 0o700
    found = 0
    for iid in os.listdir(base):
        path = os.path.join(base, iid, "instance.json")
        if not os.path.exists(path):
            continue
        with open(path, "rb") as f:
            if token.encode() not in f.read():
                continue
        found += 1
        for p in (path, os.path.dirname(path)):
            st = os.stat(p)
            assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) & 0o077 == 0, (p, oct(st.st_mode))
    assert found == 1
