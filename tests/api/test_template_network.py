"""A template's default egress policy (issue 10 "per template as a default";
docs/architecture.md "Credentials").

Against a real space-api and store (SQLite and, with SPACE_TEST_PG_URL, PostgreSQL):
- PUT/GET/DELETE /v1/templates/{name}/network: set (the canonical native form back),
  replace, read, remove; stored in template_network (migration 10);
- bad input, by the same parser as a sandbox's network: a bad entry, an unknown field, a
  `secrets` map, a rule naming a missing secret or a sandbox's literal, CR/LF in a value, a
  bad header name are 400 naming it; a bad template name 400; none set 404;
- at create: a request without a network policy gets the template's (native and E2B); one
  with a policy gets its own, whole (nothing merged); another template is untouched; the
  node is handed the template's inject rule with the sealed value; a secret rotated later
  reaches that sandbox too;
- the CLI: space template network set|get|rm.
"""
import json
import subprocess
import uuid

import pytest

from lib.platform import SPACE, STORES, e2b, store_platform
from test_secrets_api import db_rows, error, node_policy, uniq, wait_node_policy, with_secrets_key


@pytest.fixture(scope="module", params=STORES)
def plat(request):
    with store_platform("tplnet", request.param, with_secrets_key) as p:
        p.store_kind = request.param
        yield p


def secret(plat, prefix="tok"):
    name, value = uniq(prefix), f"{prefix}-" + uuid.uuid4().hex
    assert e2b(plat, "POST", "/v1/secrets", json={"name": name, "value": value}).status_code == 201
    return name, value


def rule_for(name, host="api.example.test"):
    return {"host": host, "header": "Authorization", "value": f"Bearer {{{{secret:{name}}}}}"}


def test_routes(plat):
    tpl = uniq("tpl")
    name, value = secret(plat)
    error(e2b(plat, "GET", f"/v1/templates/{tpl}/network"), 404, tpl)
    error(e2b(plat, "DELETE", f"/v1/templates/{tpl}/network"), 404, tpl)

    pol = {"allow": ["API.Example.Test.", "198.18.0.0/15:443"], "inject": [rule_for(name)]}
    r = e2b(plat, "PUT", f"/v1/templates/{tpl}/network", json=pol)
    assert r.status_code == 200, r.text
    shown = r.json()
    assert shown["template"] == tpl
    assert shown["network"]["allow"] == ["api.example.test", "198.18.0.0/15:443"], shown
    assert shown["network"]["internet"] is False
    assert shown["network"]["inject"][0]["header"] == "Authorization"
    assert "secrets" not in shown["network"] and value not in r.text
    r = e2b(plat, "GET", f"/v1/templates/{tpl}/network")
    assert r.status_code == 200 and r.json() == shown, r.text
    (stored,), = db_rows(plat, "SELECT network FROM template_network WHERE template = %s", tpl)
    assert json.loads(stored)["native"] == shown["network"] and value not in stored

    # Replaced whole.
    r = e2b(plat, "PUT", f"/v1/templates/{tpl}/network", json={"internet": True})
    assert r.status_code == 200 and r.json()["network"]["internet"] is True, r.text
    assert not r.json()["network"].get("inject"), r.text
    assert e2b(plat, "DELETE", f"/v1/templates/{tpl}/network").status_code == 204
    error(e2b(plat, "GET", f"/v1/templates/{tpl}/network"), 404)
    assert db_rows(plat, "SELECT network FROM template_network WHERE template = %s", tpl) == []


def test_bad_input(plat):
    tpl = uniq("tpl")
    name, _ = secret(plat)
    path = f"/v1/templates/{tpl}/network"
    rule = rule_for(name)
    missing, allow = uniq("missing"), ["api.example.test"]
    literal = "_" + "a" * 20 + "_00000000"
    for body, needle in [
        ({"allow": ["a..b"]}, "a..b"),
        ({"allow": ["x.test"], "colour": 1}, "colour"),
        ({"allow": allow, "inject": [rule], "secrets": {name: "s1.x"}}, "secrets"),
        ({"allow": allow, "inject": [dict(rule, value=f"{{{{secret:{missing}}}}}")]}, missing),
        ({"allow": allow, "inject": [dict(rule, value=f"{{{{secret:{literal}}}}}")]}, literal),
        ({"allow": allow, "inject": [dict(rule, value="a\r\nb")]}, "inject"),
        ({"allow": allow, "inject": [dict(rule, header="Bad Name")]}, "inject"),
        ({"inject": [rule]}, "not allowed"),
        ([1], None),
    ]:
        error(e2b(plat, "PUT", path, json=body), 400, needle)
    error(e2b(plat, "PUT", path, data="{"), 400)
    # The router's answer for any bad {name} segment (as for /build).
    error(e2b(plat, "PUT", "/v1/templates/bad.name/network", json={}), 404, "template name")
    error(e2b(plat, "GET", "/v1/templates/bad.name/network"), 404, "template name")
    error(e2b(plat, "PUT", path, json={}, key="space_" + "0" * 40), 401)
    error(e2b(plat, "GET", path), 404)


def create(plat, body, wait=True):
    r = e2b(plat, "POST", "/v1/sandboxes" + ("?wait=true" if wait else ""), json=body)
    assert r.status_code == (201 if wait else 202), r.text
    return r.json() if wait else r.json()["sandbox"]


def kill(plat, sid):
    assert e2b(plat, "DELETE", f"/v1/sandboxes/{sid}?wait=true").status_code in (200, 202, 204)


def test_default_at_create(plat):
    name, value = secret(plat)
    pol = {"allow": ["api.example.test"], "inject": [rule_for(name)]}
    assert e2b(plat, "PUT", "/v1/templates/base/network", json=pol).status_code == 200
    sids = []
    try:
        # No policy in the request: the template's.
        sb = create(plat, {"template": "base"})
        sids.append(sb["id"])
        assert sb["network"]["allow"] == ["api.example.test"], sb
        assert sb["network"]["inject"][0]["value"] == f"Bearer {{{{secret:{name}}}}}", sb
        # A policy in the request replaces the template's whole (nothing merged).
        sb2 = create(plat, {"template": "base", "network": {"allow": ["other.test"]}})
        sids.append(sb2["id"])
        assert sb2["network"]["allow"] == ["other.test"] and not sb2["network"].get("inject")
        # An explicit deny-everything is a policy too.
        sb3 = create(plat, {"template": "base", "network": {}})
        sids.append(sb3["id"])
        assert sb3["network"]["allow"] == [] and not sb3["network"].get("inject"), sb3

        if plat.store_kind == "sqlite":
            # The node got the rule with the sealed value; a later rotation reaches it.
            sid = sb["id"]
            on_node = node_policy(plat, sid)
            assert on_node.get("inject"), on_node
            assert plat.keys.open(on_node["secrets"][name], name) == value.encode()
            new = "tok-" + uuid.uuid4().hex
            assert e2b(plat, "PUT", f"/v1/secrets/{name}", json={"value": new}).status_code == 200
            on_node = wait_node_policy(
                plat, sid, lambda p: plat.keys.open(p["secrets"][name], name) == new.encode())
            assert plat.keys.open(on_node["secrets"][name], name) == new.encode()

            # E2B: no egress field -> the template's; allow_internet_access -> its own.
            r = e2b(plat, "POST", "/sandboxes", json={"templateID": "base"})
            assert r.status_code == 201, r.text
            sids.append(r.json()["sandboxID"])
            info = e2b(plat, "GET", f"/sandboxes/{sids[-1]}").json()
            assert info["network"].get("allowOut") == ["api.example.test"], info
            r = e2b(plat, "GET", f"/v1/sandboxes/{sids[-1]}")
            assert r.json()["network"]["inject"], r.text
            r = e2b(plat, "POST", "/sandboxes",
                    json={"templateID": "base", "allow_internet_access": False,
                          "network": {"allowPublicTraffic": True}})
            assert r.status_code == 201, r.text
            sids.append(r.json()["sandboxID"])
            r = e2b(plat, "GET", f"/v1/sandboxes/{sids[-1]}")
            assert not r.json()["network"].get("inject"), r.text
    finally:
        for sid in sids:
            kill(plat, sid)
        assert e2b(plat, "DELETE", "/v1/templates/base/network").status_code == 204
    # Removed: back to the native default.
    sb = create(plat, {"template": "base"})
    kill(plat, sb["id"])
    assert sb["network"]["allow"] == [] and not sb["network"].get("inject"), sb


def test_cli(plat):
    tpl = uniq("tpl")
    name, value = secret(plat)

    def space(*args):
        return subprocess.run([SPACE, "template", "network", *args], env=plat.env,
                              capture_output=True, text=True, timeout=60)

    r = space("set", tpl, "--allow", "api.example.test", "--inject", json.dumps(rule_for(name)))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["inject"][0]["header"] == "Authorization", r.stdout
    r = space("get", tpl)
    assert r.returncode == 0 and json.loads(r.stdout)["allow"] == ["api.example.test"], r.stderr
    assert value not in r.stdout
    r = space("set", tpl, "--inject", "[1]")
    assert r.returncode == 2 and "--inject" in r.stderr, r.stderr
    r = space("set", tpl, "--inject", json.dumps(rule_for(uniq("missing"))))
    assert r.returncode == 1 and "HTTP 400" in r.stderr, r.stderr
    r = space("set", "bad.name")
    assert r.returncode == 2 and "bad.name" in r.stderr, r.stderr
    r = space("--help")
    assert r.returncode == 0 and "network set NAME" in r.stdout, r.stderr
    r = space("rm", tpl)
    assert r.returncode == 0, r.stderr
    r = space("get", tpl)
    assert r.returncode == 1 and "HTTP 404" in r.stderr, r.stderr
