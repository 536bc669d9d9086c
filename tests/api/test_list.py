"""Sandbox listing end to end (issue 8 points 2-3): order, pagination, filters.

E2B lists newest first by default, honours `order` (asc/desc), paginates with
`limit`/`nextToken` in that same order (stable under equal start times: the
key is (startedAt, sandboxID)), and filters by `startedAfter` (at or after),
`startedBefore` (space: strictly before), `template`, `state` and `metadata`.
A bad value, an unknown parameter or a repeated one is a 400, never ignored.
Runs on SQLite and, with SPACE_TEST_PG_URL, on PostgreSQL.
"""
import os
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from lib.platform import STORES, store_platform, e2b
from lib.sdk import run_sdk_script

@pytest.fixture(scope="module", params=STORES)
def plat(request):
    with store_platform("list", request.param) as p:
        yield p



@pytest.fixture(scope="module")
def three(plat):
    """Three sandboxes created one after another (oldest first), tagged with a unique label."""
    tag = uuid.uuid4().hex
    ids = []
    try:
        for _ in range(3):
            r = e2b(plat, "POST", "/v2/sandboxes",
                    json={"templateID": "base", "metadata": {"suite": tag}})
            assert r.status_code == 201, r.text
            ids.append(r.json()["sandboxID"])
        yield tag, ids
    finally:
        for sid in ids:
            e2b(plat, "DELETE", f"/sandboxes/{sid}")


def listed(plat, tag, path="/v2/sandboxes", **params):
    r = e2b(plat, "GET", path, params={"metadata": f"suite={tag}", **params})
    assert r.status_code == 200, r.text
    return r


def ids_of(r):
    return [s["sandboxID"] for s in r.json()]


def pages(plat, tag, limit, **params):
    seen, token, n = [], None, 0
    while True:
        extra = {"nextToken": token} if token else {}
        r = listed(plat, tag, limit=limit, **params, **extra)
        page = ids_of(r)
        assert len(page) <= limit
        seen += page
        n += 1
        token = r.headers.get("X-Next-Token")
        if not token:
            return seen, n
        assert n < 10


def test_newest_first_and_order(plat, three):
    tag, ids = three
    newest_first = list(reversed(ids))
    assert ids_of(listed(plat, tag)) == newest_first
    assert ids_of(listed(plat, tag, order="desc")) == newest_first
    assert ids_of(listed(plat, tag, order="asc")) == ids
    # v1 lists newest first too
    assert ids_of(listed(plat, tag, path="/sandboxes")) == newest_first
    # startedAt really is monotonic in the listing
    started = [s["startedAt"] for s in listed(plat, tag).json()]
    assert started == sorted(started, reverse=True)


def test_pagination_follows_order(plat, three):
    tag, ids = three
    for limit in (1, 2, 3):
        seen, n = pages(plat, tag, limit)
        assert seen == list(reversed(ids)), (limit, seen)
        assert n == (3 + limit - 1) // limit
        seen, _ = pages(plat, tag, limit, order="asc")
        assert seen == ids, (limit, seen)


def test_time_filters(plat, three):
    tag, ids = three
    detail = {s["sandboxID"]: s for s in listed(plat, tag).json()}
    middle = detail[ids[1]]["startedAt"]
    # at or after: the middle one and the newest
    assert ids_of(listed(plat, tag, startedAfter=middle, order="asc")) == ids[1:]
    # strictly before: only the oldest
    assert ids_of(listed(plat, tag, startedBefore=middle)) == ids[:1]
    future = (datetime.now(timezone.utc) + timedelta(days=1)).isoformat()
    past = (datetime.now(timezone.utc) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    assert ids_of(listed(plat, tag, startedAfter=future)) == []
    assert ids_of(listed(plat, tag, startedAfter=past)) == list(reversed(ids))
    assert ids_of(listed(plat, tag, startedBefore=past)) == []
    # the filter composes with the cursor
    seen, _ = pages(plat, tag, 1, startedAfter=middle)
    assert seen == [ids[2], ids[1]]


def test_template_and_state_filters(plat, three):
    tag, ids = three
    assert ids_of(listed(plat, tag, template="base")) == list(reversed(ids))
    assert ids_of(listed(plat, tag, template="no-such-template")) == []
    assert ids_of(listed(plat, tag, state="paused")) == []
    assert ids_of(listed(plat, tag, state="running,paused")) == list(reversed(ids))


@pytest.mark.parametrize("params", [
    {"order": "newest"}, {"order": ""}, {"startedAfter": "yesterday"},
    {"startedAfter": "2026-13-01T00:00:00Z"}, {"startedBefore": "1700000000"},
    {"template": "../x"}, {"limit": "0"}, {"limit": "101"}, {"state": "killed"},
    {"nextToken": "not a token"}, {"nextToken": "aaaaaaaaaaaaaaaaaaaa"},
    {"sort": "asc"}, {"startedafter": "2026-01-01T00:00:00Z"},
])
def test_bad_list_queries_are_400(plat, params):
    r = e2b(plat, "GET", "/v2/sandboxes", params=params)
    assert r.status_code == 400, (params, r.status_code, r.text)
    body = r.json()
    assert body["code"] == 400 and body["message"]


def test_repeated_and_v1_unknown_parameters_are_400(plat):
    r = e2b(plat, "GET", "/v2/sandboxes?order=asc&order=desc")
    assert r.status_code == 400 and "order" in r.json()["message"]
    r = e2b(plat, "GET", "/sandboxes", params={"order": "asc"})
    assert r.status_code == 400 and "order" in r.json()["message"]


def test_native_list_order(plat, three):
    tag, ids = three
    status, res = plat.admin("GET", f"/v1/sandboxes?metadata=suite={tag}&order=desc")
    assert status == 200, res
    assert [s["id"] for s in res["sandboxes"]] == list(reversed(ids))
    status, res = plat.admin("GET", f"/v1/sandboxes?metadata=suite={tag}&order=asc&limit=2")
    assert status == 200, res
    assert [s["id"] for s in res["sandboxes"]] == ids[:2] and res["next"] == ids[1]
    status, res = plat.admin("GET", f"/v1/sandboxes?metadata=suite={tag}&order=up")
    assert status == 400, res


def test_the_e2b_sdk_lists_the_same(plat, three):
    """Sandbox.list() of the real e2b npm SDK (tests/compat/node_modules) sees the same."""
    tag, ids = three
    run_sdk_script(plat, os.path.join(os.path.dirname(os.path.abspath(__file__)), "sdk_list.mjs"),
                   tag, *ids, expect="ok template", timeout=300)
