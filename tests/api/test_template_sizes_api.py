"""Sizes through space-api (issue 11 item 5; docs/architecture.md "Sizes"), on SQLite and,
with SPACE_TEST_PG_URL, PostgreSQL.

The node has base (1 vCPU, 512 MiB) and `sized` (the base recipe with a size file of 2 vCPUs,
768 MiB: tests/lib/platform.py build_sized_template()).
- E2B GET /templates and GET /templates/{templateID}: read-only, each template with its
  cpuCount and memoryMB (the default size), templateID, buildID (a UUID), public, aliases,
  names, createdAt, builds; an unknown or invalid id is 404, a query parameter 400, no key 401;
- a create that gives no size (E2B, native) gets the template's: the node's answer is what
  the row records (existing columns, no migration), E2B cpuCount/memoryMB show it, and the
  guest has it; a size given wins over the template's.
"""
import re

import pytest

from lib.platform import STORES, build_sized_template, e2b, store_platform
from test_secrets_api import db_rows, error


@pytest.fixture(scope="module", params=STORES)
def plat(request):
    with store_platform("sizes", request.param,
                        lambda p: build_sized_template(p.node, "sized", 2, 768)) as p:
        p.store_kind = request.param
        yield p


def row_size(plat, sid):
    (row,) = db_rows(plat, "SELECT vcpus, memory_mb FROM sandboxes WHERE id = %s", sid)
    return int(row[0]), int(row[1])


def guest_nproc(plat, sid):
    return int(plat.sh(sid, "nproc").strip())


UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def test_e2b_template_routes(plat):
    r = e2b(plat, "GET", "/templates")
    assert r.status_code == 200, r.text
    by_id = {t["templateID"]: t for t in r.json()}
    assert {"base", "sized"} <= set(by_id), by_id
    for tid, (cpu, mem) in (("base", (1, 512)), ("sized", (2, 768))):
        t = by_id[tid]
        assert (t["cpuCount"], t["memoryMB"]) == (cpu, mem), t
        assert t["aliases"] == [tid] and t["names"] == [tid] and t["public"] is True, t
        assert UUID.match(t["buildID"]), t
        assert t["buildStatus"] == "ready" and t["buildCount"] == 1, t
        for field in ("createdAt", "updatedAt", "diskSizeMB", "envdVersion", "spawnCount"):
            assert field in t, field
    assert by_id["base"]["buildID"] != "00000000-0000-0000-0000-000000000000"

    r = e2b(plat, "GET", "/templates/sized")
    assert r.status_code == 200, r.text
    t = r.json()
    assert t["templateID"] == "sized" and (t["cpuCount"], t["memoryMB"]) == (2, 768), t
    (b,) = t["builds"]
    assert b["buildID"] == by_id["sized"]["buildID"] and b["status"] == "ready", b
    assert (b["cpuCount"], b["memoryMB"]) == (2, 768), b

    error(e2b(plat, "GET", "/templates/nosuchtemplate"), 404, "nosuchtemplate")
    error(e2b(plat, "GET", "/templates/Bad.Name"), 404)
    error(e2b(plat, "GET", "/templates?teamID=x"), 400)
    error(e2b(plat, "GET", "/templates", key="space_" + "0" * 40), 401)
    error(e2b(plat, "GET", "/templates/base", key="space_" + "0" * 40), 401)
    # Still read-only: building and changing templates through the E2B API stay 501.
    assert e2b(plat, "POST", "/templates/base", json={}).status_code == 501
    # The native listing carries the sizes too.
    status, body = plat.admin("GET", "/v1/templates")
    assert status == 200, body
    sized = {t["name"]: t for t in body["templates"]}["sized"]
    assert (sized["vcpus"], sized["memory_mb"]) == (2, 768), sized
    assert isinstance(sized["snapshots"], list), sized


def test_e2b_create_without_size_gets_the_templates(plat):
    r = e2b(plat, "POST", "/sandboxes", json={"templateID": "sized", "timeout": 120})
    assert r.status_code == 201, r.text
    sid = r.json()["sandboxID"]
    try:
        d = e2b(plat, "GET", f"/sandboxes/{sid}").json()
        assert (d["cpuCount"], d["memoryMB"]) == (2, 768), d
        assert row_size(plat, sid) == (2, 768)
        assert guest_nproc(plat, sid) == 2
    finally:
        assert e2b(plat, "DELETE", f"/sandboxes/{sid}").status_code == 204


def test_native_create_default_and_given_size(plat):
    r = e2b(plat, "POST", "/v1/sandboxes?wait=true", json={"template": "sized"})
    assert r.status_code == 201, r.text
    sb = r.json()
    try:
        assert (sb["vcpus"], sb["memory_mb"]) == (2, 768), sb
        assert row_size(plat, sb["id"]) == (2, 768)
    finally:
        assert e2b(plat, "DELETE", f"/v1/sandboxes/{sb['id']}?wait=true").status_code in (
            200, 202, 204)
    # A size given wins over the template's; base without one is 1/512.
    r = e2b(plat, "POST", "/v1/sandboxes?wait=true",
            json={"template": "sized", "vcpus": 1, "memory_mb": 512})
    assert r.status_code == 201, r.text
    sb = r.json()
    try:
        assert (sb["vcpus"], sb["memory_mb"]) == (1, 512), sb
        assert row_size(plat, sb["id"]) == (1, 512)
        assert guest_nproc(plat, sb["id"]) == 1
    finally:
        assert e2b(plat, "DELETE", f"/v1/sandboxes/{sb['id']}?wait=true").status_code in (
            200, 202, 204)
    r = e2b(plat, "POST", "/v1/sandboxes", json={"template": "sized", "vcpus": 0})
    error(r, 400, "vcpus")
