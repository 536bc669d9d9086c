"""Secrets at the api (issue 10; docs/architecture.md "Credentials").

Against a real space-api and store (SQLite and, with SPACE_TEST_PG_URL, PostgreSQL), with
`--secrets-key` the public half of an X25519 keypair this test makes (as space-gw's
DATA/gw/secrets.pub would be):
- native /v1/secrets and E2B /secrets: create, list (paging), get, rotate, delete, in each
  API's shapes; values are write-only: no response carries one;
- bad input: invalid or reserved names 400 naming them, a value over the cap 413, CR/LF 400,
  duplicates 409, unknown secrets 404, unknown fields 400; without --secrets-key 503
  secrets_unavailable;
- the sealed value in the database is not the plaintext and does not contain it in any
  encoding (plain, base64, hex, URL-encoded), and opens, with the private key this test
  holds (as space-gw would), under the secret's name only;
- neither the api's log nor the database holds a value;
- policies (one real sandbox, SQLite only): inject rules naming a missing secret, a
  `secrets` map in user input, are 400 naming the entry; the node is handed the policy with
  the sealed values of the secrets its rules name; rotation and deletion re-send it; E2B
  network.rules literals become secrets of the sandbox, echoed by getInfo as placeholders.
"""
import base64
import json
import os
import subprocess
import sqlite3
import time
import urllib.parse
import uuid

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from lib.platform import STORES, Platform, e2b, store_platform

MAX_VALUE = 16384


class Keypair:
    """space-gw's secrets keypair, as sealed-secret.h describes it, made here."""

    def __init__(self, directory):
        self.priv = X25519PrivateKey.generate()
        self.pub_raw = self.priv.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.pub_path = os.path.join(directory, "secrets.pub")
        with open(self.pub_path, "wb") as f:
            f.write(self.priv.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))

    def open(self, sealed, aad):
        """sealed_secret_open(): s1.BASE64(eph_pub || nonce || ciphertext || tag)."""
        assert sealed.startswith("s1."), sealed
        raw = base64.b64decode(sealed[3:])
        eph, nonce, ct = raw[:32], raw[32:44], raw[44:]
        shared = self.priv.exchange(X25519PublicKey.from_public_bytes(eph))
        okm = HKDF(algorithm=hashes.SHA256(), length=44, salt=eph + self.pub_raw,
                   info=b"space-secret-v1").derive(shared)
        assert okm[32:] == nonce
        return AESGCM(okm[:32]).decrypt(nonce, ct, aad.encode())


def with_secrets_key(p):
    """store_platform's setup: the api seals secrets to a keypair this test holds (p.keys)."""
    p.keys = Keypair(p.data)
    p.api_args += ["--secrets-key", p.keys.pub_path]


def start_platform(name, store, api_args=(), share_node=None):
    p = Platform(name, store=store, api_args=api_args, share_node=share_node)
    p.start()
    return p


@pytest.fixture(scope="module", params=STORES)
def plat(request):
    with store_platform("secrets", request.param, with_secrets_key) as p:
        p.store_kind = request.param
        yield p


def uniq(prefix="s"):
    # The PostgreSQL store is shared by every module and run: names must not collide.
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def error(r, status, needle=None):
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert body["message"], body
    if needle:
        assert needle.lower() in body["message"].lower(), body
    return body


def db_rows(plat, sql, *args):
    """Rows of the platform's own store, read behind space-api's back."""
    if plat.store_kind == "sqlite":
        with sqlite3.connect(os.path.join(plat.data, "space.db")) as db:
            return db.execute(sql.replace("%s", "?"), args).fetchall()
    q = sql
    for a in args:
        q = q.replace("%s", "'" + str(a).replace("'", "''") + "'", 1)
    out = subprocess.run(["psql", "-XAtq", "-F", "\t", os.environ["SPACE_TEST_PG_URL"], "-c", q],
                         check=True, capture_output=True, text=True).stdout
    return [tuple(line.split("\t")) for line in out.splitlines() if line]


def encodings(value):
    b = value.encode()
    return [b, base64.b64encode(b), base64.urlsafe_b64encode(b), b.hex().encode(),
            b.hex().upper().encode(), urllib.parse.quote(value, safe="").encode()]


def assert_nowhere(blob, value):
    for form in encodings(value):
        assert form not in blob, form


# ---- the routes ----

def test_native_lifecycle_and_write_only(plat):
    name, value = uniq("gh"), "ghp_" + uuid.uuid4().hex
    r = e2b(plat, "POST", "/v1/secrets",
            json={"name": name, "value": value, "metadata": {"team": "a"}})
    assert r.status_code == 201, r.text
    sec = r.json()
    assert sec["name"] == name and sec["version"] == 1 and sec["metadata"] == {"team": "a"}
    assert len(sec["id"]) == 32 and sec["created_at"] and sec["updated_at"]
    assert "value" not in sec and value not in r.text

    r = e2b(plat, "GET", f"/v1/secrets/{name}")
    assert r.status_code == 200 and r.json()["id"] == sec["id"], r.text
    assert value not in r.text

    new = "ghp_" + uuid.uuid4().hex
    r = e2b(plat, "PUT", f"/v1/secrets/{name}", json={"value": new})
    assert r.status_code == 200, r.text
    assert r.json()["version"] == 2 and r.json()["metadata"] == {"team": "a"}
    assert new not in r.text
    r = e2b(plat, "PUT", f"/v1/secrets/{name}", json={"value": new + "x", "metadata": {}})
    assert r.json()["version"] == 3 and r.json()["metadata"] == {}

    # At rest: sealed to space-gw's key, under the name; not the value in any encoding.
    (sealed,), = db_rows(plat, "SELECT sealed FROM secrets WHERE name = %s", name)
    assert_nowhere(sealed.encode(), new + "x")
    assert plat.keys.open(sealed, name) == (new + "x").encode()
    with pytest.raises(Exception):
        plat.keys.open(sealed, name + "-other")

    r = e2b(plat, "DELETE", f"/v1/secrets/{name}")
    assert r.status_code == 204, r.text
    error(e2b(plat, "GET", f"/v1/secrets/{name}"), 404, name)
    error(e2b(plat, "DELETE", f"/v1/secrets/{name}"), 404)
    assert db_rows(plat, "SELECT id FROM secrets WHERE name = %s", name) == []
    for v in (value, new, new + "x"):
        assert_nowhere(plat.api_log_full().encode(), v)


def test_bad_input(plat):
    name = uniq("bad")
    ok = {"name": name, "value": "v"}
    for bad in ["", "a b", "a/b", "x" * 65, "_reserved", "a.b", "é"]:
        error(e2b(plat, "POST", "/v1/secrets", json=dict(ok, name=bad)), 400, "name")
    error(e2b(plat, "POST", "/v1/secrets", json={"value": "v"}), 400, "name")
    error(e2b(plat, "POST", "/v1/secrets", json={"name": name}), 400, "value")
    error(e2b(plat, "POST", "/v1/secrets", json=dict(ok, value=5)), 400, "value")
    error(e2b(plat, "POST", "/v1/secrets", json=dict(ok, value="")), 400, "empty")
    for v in ["a\r\nX-Evil: 1", "a\nb", "a\rb"]:
        error(e2b(plat, "POST", "/v1/secrets", json=dict(ok, value=v)), 400, "CR")
    error(e2b(plat, "POST", "/v1/secrets", json=dict(ok, value="x" * (MAX_VALUE + 1))), 413,
          str(MAX_VALUE))
    error(e2b(plat, "POST", "/v1/secrets", json=dict(ok, metadata={"k": 1})), 400, "metadata")
    error(e2b(plat, "POST", "/v1/secrets", json=dict(ok, metadata=[])), 400, "metadata")
    error(e2b(plat, "POST", "/v1/secrets", json=dict(ok, scope="x")), 400, "scope")
    error(e2b(plat, "POST", "/v1/secrets", data="[1]"), 400)

    r = e2b(plat, "POST", "/v1/secrets", json=dict(ok, value="x" * MAX_VALUE))
    assert r.status_code == 201, r.text
    error(e2b(plat, "POST", "/v1/secrets", json=dict(ok, value="other")), 409, name)
    error(e2b(plat, "PUT", f"/v1/secrets/{name}", json={"value": "v", "name": "n"}), 400, "name")
    error(e2b(plat, "PUT", f"/v1/secrets/{name}", json={}), 400, "value")
    error(e2b(plat, "PUT", f"/v1/secrets/{name}", json={"value": "x" * (MAX_VALUE + 1)}), 413)
    missing = uniq("missing")
    error(e2b(plat, "PUT", f"/v1/secrets/{missing}", json={"value": "v"}), 404, missing)
    error(e2b(plat, "GET", f"/v1/secrets/{missing}"), 404, missing)
    error(e2b(plat, "GET", "/v1/secrets/bad.name"), 400, "bad.name")
    error(e2b(plat, "GET", "/v1/secrets?limit=0"), 400, "limit")
    error(e2b(plat, "GET", "/v1/secrets?limit=1001"), 400, "limit")
    error(e2b(plat, "GET", "/v1/secrets?after=a.b"), 400, "after")
    error(e2b(plat, "GET", "/v1/secrets?nextToken=x"), 400, "nextToken")
    error(e2b(plat, "GET", "/v1/secrets", key="space_" + "0" * 40), 401)
    assert e2b(plat, "DELETE", f"/v1/secrets/{name}").status_code == 204


def all_pages(plat, path, limit, e2b_api):
    names, cursor, pages = [], None, 0
    while True:
        q = f"?limit={limit}"
        if cursor:
            q += ("&nextToken=" if e2b_api else "&after=") + cursor
        r = e2b(plat, "GET", path + q)
        assert r.status_code == 200, r.text
        pages += 1
        if e2b_api:
            items, cursor = r.json(), r.headers.get("x-next-token")
        else:
            items, cursor = r.json()["secrets"], r.json().get("next")
        assert len(items) <= limit
        names += [s["name"] for s in items]
        if not cursor:
            return names, pages


def test_paging(plat):
    prefix = uniq("page")
    made = sorted(f"{prefix}-{i}" for i in range(7))
    for n in made:
        assert e2b(plat, "POST", "/v1/secrets", json={"name": n, "value": n}).status_code == 201
    for e2b_api, path in ((False, "/v1/secrets"), (True, "/secrets")):
        names, pages = all_pages(plat, path, 3, e2b_api)
        assert names == sorted(names)
        assert [n for n in names if n.startswith(prefix)] == made
        assert pages >= 3
    for n in made:
        assert e2b(plat, "DELETE", f"/v1/secrets/{n}").status_code == 204


def test_e2b_shapes(plat):
    name, value = uniq("openai"), "sk-" + uuid.uuid4().hex
    r = e2b(plat, "POST", "/secrets", json={"name": name, "value": value, "metadata": {"a": "b"}})
    assert r.status_code in (200, 201), r.text
    sec = r.json()
    assert set(sec) == {"secretID", "name", "currentVersion", "metadata", "createdAt",
                        "updatedAt"}, sec
    assert sec["currentVersion"] == 1 and sec["name"] == name and value not in r.text
    for key in (sec["secretID"], name):
        r = e2b(plat, "GET", f"/secrets/{key}")
        assert r.status_code == 200 and r.json()["secretID"] == sec["secretID"], r.text
    r = e2b(plat, "POST", f"/secrets/{sec['secretID']}", json={"value": value + "2"})
    assert r.status_code == 200 and r.json()["currentVersion"] == 2, r.text
    error(e2b(plat, "POST", f"/secrets/{uuid.uuid4().hex}", json={"value": "v"}), 404)
    error(e2b(plat, "GET", "/secrets/not%20a%20name"), 404)
    error(e2b(plat, "POST", "/secrets", json={"name": name, "value": "v"}), 409)
    error(e2b(plat, "POST", "/secrets", json={"name": "a{b}", "value": "v"}), 400, "name")
    assert e2b(plat, "DELETE", f"/secrets/{name}").status_code == 204
    assert e2b(plat, "DELETE", f"/secrets/{sec['secretID']}").status_code == 404


def test_unavailable_without_key(plat):
    """A second space-api on the same node, without --secrets-key: nothing to seal to."""
    other = start_platform(f"secrets-nokey-{plat.store_kind}", None, share_node=plat)
    try:
        r = e2b(other, "POST", "/v1/secrets", json={"name": "x", "value": "v"})
        assert r.status_code == 503 and r.json()["code"] == "secrets_unavailable", r.text
        r = e2b(other, "GET", "/v1/secrets")
        assert r.status_code == 503 and r.json()["code"] == "secrets_unavailable", r.text
        r = e2b(other, "POST", "/secrets", json={"name": "x", "value": "v"})
        assert r.status_code == 503 and "secrets_unavailable" in r.json()["message"], r.text
    finally:
        other.destroy()


# ---- policies (one real sandbox) ----

def node_policy(plat, sid):
    st, body = plat.node.call("GET", f"/v1/sandboxes/{sid}")
    assert st == 200, body
    return body.get("network") or {}


def wait_node_policy(plat, sid, pred, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        pol = node_policy(plat, sid)
        if pred(pol) or time.monotonic() > deadline:
            return pol
        time.sleep(0.5)


def test_policy_rules(plat):
    if plat.store_kind != "sqlite":
        pytest.skip("one sandbox is enough: the store side is the same on PostgreSQL")
    name, value = uniq("tok"), "tok-" + uuid.uuid4().hex
    assert e2b(plat, "POST", "/v1/secrets", json={"name": name, "value": value}).status_code == 201
    rule = {"host": "api.example.test", "header": "Authorization",
            "value": f"Bearer {{{{secret:{name}}}}}"}
    pol = {"allow": ["api.example.test"], "inject": [rule]}

    # Refused before any sandbox exists: a missing secret, a sealed map from a user.
    missing = uniq("nope")
    bad = dict(pol, inject=[dict(rule, value=f"{{{{secret:{missing}}}}}")])
    error(e2b(plat, "POST", "/v1/sandboxes", json={"template": "base", "network": bad}), 400,
          missing)
    error(e2b(plat, "POST", "/v1/sandboxes",
              json={"template": "base", "network": dict(pol, secrets={name: "s1.x"})}), 400,
          "secrets")
    error(e2b(plat, "POST", "/v1/sandboxes",
              json={"template": "base", "network": dict(pol, inject=[dict(rule, value="a\r\nb")])}),
          400, "inject")
    error(e2b(plat, "POST", "/v1/sandboxes",
              json={"template": "base", "network": dict(pol, inject=[dict(rule, header="Bad Name")])}),
          400, "inject")

    # Sealed values travel with the policy in one message to space-gw: too many big ones, 400.
    big = [uniq("big") for _ in range(4)]
    for b in big:
        assert e2b(plat, "POST", "/v1/secrets",
                   json={"name": b, "value": "b" * MAX_VALUE}).status_code == 201
    heavy = dict(pol, inject=[dict(rule, value=f"{{{{secret:{b}}}}}") for b in big])
    error(e2b(plat, "POST", "/v1/sandboxes", json={"template": "base", "network": heavy}), 400,
          "bytes sealed")
    for b in big:
        assert e2b(plat, "DELETE", f"/v1/secrets/{b}").status_code == 204

    r = e2b(plat, "POST", "/v1/sandboxes?wait=true", json={"template": "base", "network": pol})
    assert r.status_code == 201, r.text + plat.node.log()[-3000:] + plat.api_log()
    sid = r.json()["id"]
    try:
        shown = r.json()["network"]
        assert shown["inject"][0]["header"] == "Authorization" and "secrets" not in shown
        assert value not in r.text
        # The node got the sealed value (only space-gw could open it; this test holds its key).
        on_node = node_policy(plat, sid)
        assert on_node.get("inject"), on_node
        if "secrets" in on_node:
            assert plat.keys.open(on_node["secrets"][name], name) == value.encode()
        # PUT network: the same checks, and the sandbox's own literals only.
        error(e2b(plat, "PUT", f"/v1/sandboxes/{sid}/network", json=bad), 400, missing)
        other_lit = "_" + "a" * 20 + "_00000000"
        error(e2b(plat, "PUT", f"/v1/sandboxes/{sid}/network",
                  json=dict(pol, inject=[dict(rule, value=f"{{{{secret:{other_lit}}}}}")])), 400,
              "not this sandbox")

        # Rotation re-sends the policy with the new sealed value.
        new = "tok-" + uuid.uuid4().hex
        assert e2b(plat, "PUT", f"/v1/secrets/{name}", json={"value": new}).status_code == 200
        if "secrets" in on_node:
            on_node = wait_node_policy(
                plat, sid, lambda p: plat.keys.open(p["secrets"][name], name) == new.encode())
            assert plat.keys.open(on_node["secrets"][name], name) == new.encode()
        # Deletion: the rule stops applying (left out of what the node gets), stays stored.
        assert e2b(plat, "DELETE", f"/v1/secrets/{name}").status_code == 204
        on_node = wait_node_policy(plat, sid, lambda p: not p.get("inject"))
        assert not on_node.get("inject") and not on_node.get("secrets"), on_node
        r = e2b(plat, "GET", f"/v1/sandboxes/{sid}")
        assert r.json()["network"]["inject"], r.text

        # E2B network.rules: a literal becomes a secret of the sandbox, never shown.
        literal = "lit-" + uuid.uuid4().hex
        body = {"allowOut": ["api.example.test"],
                "rules": {"api.example.test": [{"transform": {"headers": {"X-Key": literal}}}]}}
        r = e2b(plat, "PUT", f"/sandboxes/{sid}/network", json=body)
        assert r.status_code == 204, r.text
        info = e2b(plat, "GET", f"/sandboxes/{sid}").json()
        assert literal not in json.dumps(info)
        shown = info["network"]["rules"]["api.example.test"][0]["transform"]["headers"]["X-Key"]
        assert shown.startswith("${e2b.secrets._" + sid + "_"), shown
        lit_name = shown[len("${e2b.secrets."):-1]
        (sealed, owner_sb), = db_rows(plat, "SELECT sealed, sandbox_id FROM secrets WHERE name = %s",
                                      lit_name)
        assert owner_sb == sid and plat.keys.open(sealed, lit_name) == literal.encode()
        # Not listed, not readable as the owner's.
        error(e2b(plat, "GET", f"/secrets/{lit_name}"), 404)
        assert lit_name not in json.dumps(all_pages(plat, "/v1/secrets", 1000, False)[0])
        error(e2b(plat, "PUT", f"/sandboxes/{sid}/network",
                  json={"rules": {"api.example.test": [{"transform": {"headers": {"X": "a\nb"}}}]}}),
              400, "X")
        error(e2b(plat, "PUT", f"/sandboxes/{sid}/network",
                  json={"rules": {"api.example.test": [{"other": {}}]}}), 400, "transform")

        # The audit's secret field (as the puller stores it): the API and the CLI show it.
        rec = {"sandbox": sid, "time": int(time.time() * 1e6), "proto": "http",
               "verdict": "allow", "reason": "allow-name", "host": "api.example.test",
               "method": "GET", "secret": f"{name},{lit_name}"}
        with sqlite3.connect(os.path.join(plat.data, "space.db"), timeout=30) as db:
            db.execute("INSERT INTO egress_audit (id, node_id, epoch, seq, sandbox_id, time_us, "
                       "proto, verdict, record, secret) SELECT COALESCE(MAX(id), 0) + 1, "
                       "'local', ?, 1, ?, ?, 'http', 'allow', ?, ? FROM egress_audit",
                       (uuid.uuid4().hex, sid, rec["time"], json.dumps(rec), rec["secret"]))
        r = e2b(plat, "GET", f"/v1/sandboxes/{sid}/egress")
        assert [x.get("secret") for x in r.json()["records"]][-1] == rec["secret"], r.text
        from lib.platform import SPACE
        out = subprocess.run([SPACE, "sandbox", "egress", sid], env=plat.env, text=True,
                             capture_output=True, timeout=60)
        assert f"secret={rec['secret']}" in out.stdout, (out.stdout, out.stderr)
    finally:
        assert e2b(plat, "DELETE", f"/v1/sandboxes/{sid}?wait=true").status_code in (200, 202, 204)
    # The sandbox's literals go with it (the controller's sweep, every few seconds).
    deadline = time.monotonic() + 30
    while db_rows(plat, "SELECT name FROM secrets WHERE sandbox_id = %s", sid):
        assert time.monotonic() < deadline, "the killed sandbox's literals are still stored"
        time.sleep(0.5)
    log = plat.api_log_full().encode()
    for v in (value, new, literal):
        assert_nowhere(log, v)


def test_cli(plat, tmp_path):
    """space secret create|list|rotate|delete over the admin socket; no value is printed."""
    from lib.platform import SPACE
    name, value = uniq("cli"), "cli-" + uuid.uuid4().hex

    def space(*args, input=None):
        return subprocess.run([SPACE, "secret", *args], env=plat.env, input=input,
                              capture_output=True, text=True, timeout=60)

    r = space("create", name, "--metadata", "team=a", input=value + "\n")
    assert r.returncode == 0 and "created" in r.stdout, r.stderr
    (sealed,), = db_rows(plat, "SELECT sealed FROM secrets WHERE name = %s", name)
    assert plat.keys.open(sealed, name) == value.encode()  # one trailing newline dropped
    r = space("list")
    assert r.returncode == 0 and name in r.stdout and '{"team":"a"}' in r.stdout, r.stderr
    r = space("list", "--json")
    assert any(s["name"] == name for s in json.loads(r.stdout))
    f = tmp_path / "v"
    f.write_text(value + "2")
    r = space("rotate", name, "--from-file", str(f))
    assert r.returncode == 0 and "version 2" in r.stdout, r.stderr
    r = space("create", name, input="x")
    assert r.returncode == 1 and "exists" in r.stderr, r.stderr
    r = space("create", "bad/name", input="x")
    assert r.returncode == 2 and "invalid secret name" in r.stderr
    r = space("create", uniq("big"), input="x" * (MAX_VALUE + 1))
    assert r.returncode == 1 and "413" in r.stderr, r.stderr
    r = space("delete", name)
    assert r.returncode == 0, r.stderr
    r = space("delete", name)
    assert r.returncode == 1 and "not found" in r.stderr
    for out in (r.stdout, r.stderr):
        assert value not in out


def test_rules_without_a_vm(plat):
    """The checks and the literals' life, on creates the node refuses (no such template)."""
    name = uniq("rk")
    assert e2b(plat, "POST", "/v1/secrets", json={"name": name, "value": "v1"}).status_code == 201
    host = "api.example.test"
    rule = {"host": host, "header": "Authorization", "value": f"Bearer {{{{secret:{name}}}}}"}
    # Native: a valid policy passes every check and reaches the node (404: no template).
    r = e2b(plat, "POST", "/v1/sandboxes?wait=true",
            json={"template": "nosuchtemplate", "network": {"allow": [host], "inject": [rule]}})
    assert r.status_code == 404, r.text
    for bad, needle in [(dict(rule, host="other.test"), "inject"),
                        (dict(rule, value="{{secret:}}"), "inject"),
                        (dict(rule, header="Host"), "inject")]:
        error(e2b(plat, "POST", "/v1/sandboxes", json={
            "template": "nosuchtemplate", "network": {"allow": [host], "inject": [bad]}}), 400,
            needle)
    # E2B: a placeholder and a literal; the literal is a secret of the sandbox, gone with it.
    literal = "lit-" + uuid.uuid4().hex
    body = {"templateID": "nosuchtemplate", "allow_internet_access": False,
            "network": {"allowOut": [host], "rules": {host: [
                {"transform": {"headers": {"Authorization": f"Bearer ${{e2b.secrets.{name}}}"}}},
                {"transform": {"headers": {"X-Key": literal}}}]}}}
    r = e2b(plat, "POST", "/v2/sandboxes", json=body)
    assert r.status_code == 404, r.text
    missing = uniq("gone")
    bad = json.loads(json.dumps(body).replace(name, missing))
    error(e2b(plat, "POST", "/v2/sandboxes", json=bad), 400, missing)
    error(e2b(plat, "POST", "/v2/sandboxes", json=dict(body, network=dict(
        body["network"], rules={host: [{"transform": {"headers": {"X": "${e2b.identity.tokens.t}"}}}]}))),
        501, "identity")
    deadline = time.monotonic() + 30
    while db_rows(plat, "SELECT name FROM secrets WHERE name LIKE %s AND sandbox_id IS NOT NULL",
                  "\\_%") and plat.store_kind == "sqlite":
        assert time.monotonic() < deadline, "the failed create's literals are still stored"
        time.sleep(0.5)
    assert_nowhere(plat.api_log_full().encode(), literal)
    assert e2b(plat, "DELETE", f"/v1/secrets/{name}").status_code == 204
