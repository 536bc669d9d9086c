"""space-api refuses what it does not do, in E2B's error shape (issue 7 "no silent drops",
issue 8 point 1). Raw HTTP against a real space-api + space-node; no sandbox is ever
created (every request here is answered before a VM would start), so no guest image is
needed: the node runs without a template.
"""
import functools
from unittest import mock

import pytest
import requests

import lib.platform as lp

WELL_FORMED_MISSING = "a" * 20  # a valid sandbox id that names nothing


@pytest.fixture(scope="module")
def plat():
    with mock.patch.object(lp, "Node", functools.partial(lp.Node, template=False)):
        p = lp.Platform("conformance")
    try:
        p.start()
        yield p
    finally:
        p.destroy()


def call(plat, method, path, **kw):
    return requests.request(method, plat.url + path, headers={"X-API-Key": plat.key},
                            timeout=60, **kw)


def error(r, status):
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert body["code"] == status and body["message"], body
    return body["message"]


SANDBOX_ROUTES = [
    ("GET", "/sandboxes/{}"), ("DELETE", "/sandboxes/{}"), ("POST", "/sandboxes/{}/timeout"),
    ("POST", "/sandboxes/{}/refreshes"), ("POST", "/sandboxes/{}/connect"),
    ("POST", "/v2/sandboxes/{}/connect"), ("POST", "/sandboxes/{}/resume"),
    ("GET", "/sandboxes/{}/metrics"), ("GET", "/sandboxes/{}/logs"),
    ("GET", "/v2/sandboxes/{}/logs"), ("POST", "/sandboxes/{}/pause"),
    ("POST", "/sandboxes/{}/fork"), ("POST", "/sandboxes/{}/snapshots"),
    ("PUT", "/sandboxes/{}/network"),
    ("GET", "/v1/sandboxes/{}"), ("DELETE", "/v1/sandboxes/{}"),
    ("POST", "/v1/sandboxes/{}/timeout"), ("POST", "/v1/sandboxes/{}/exec"),
]


@pytest.mark.parametrize("sid", ["nonexistingsandbox", WELL_FORMED_MISSING, "NOT-AN-ID",
                                 "x" * 300])
@pytest.mark.parametrize("method,route", SANDBOX_ROUTES)
def test_missing_sandbox_is_404_everywhere(plat, method, route, sid):
    body = {"timeout": 10} if route.endswith("timeout") and "/v1/" not in route else None
    if route.endswith("timeout") and "/v1/" in route:
        body = {"timeout_s": 10}
    if route.endswith("exec"):
        body = {"cmd": "/bin/true"}
    error(call(plat, method, route.format(sid), json=body), 404)


def test_admin_socket_agrees(plat):
    assert plat.admin("DELETE", "/sandboxes/nonexistingsandbox")[0] == 404
    assert plat.admin("GET", "/v1/operations/xyz")[0] == 404


@pytest.mark.parametrize("method,path,feature", [
    ("POST", "/v3/templates", "template"),
    ("GET", "/v2/templates", "template"),
    ("GET", "/templates/aliases/mytpl", "alias"),
    ("GET", "/templates/tpl/files/0123abcd", "template"),
    ("POST", "/v2/templates/tpl/builds/b1", "template"),
    ("GET", "/templates/tpl/builds/b1/status?logsOffset=0", "template"),
    ("POST", "/templates/tags", "tags"),
    ("GET", "/templates/tpl/tags", "tags"),
    ("GET", "/volumes", "volume"), ("POST", "/volumes", "volume"),
    ("GET", "/volumes/v1", "volume"), ("DELETE", "/volumes/v1", "volume"),
    ("GET", "/volumecontent/v1/dir?path=/", "volume"),
    ("PUT", "/volumecontent/v1/file?path=/a", "volume"),
    ("GET", "/sandboxes/metrics?sandbox_ids=a", "metrics"),
    ("GET", "/teams", "team"),
])
def test_sdk_routes_not_implemented_are_501(plat, method, path, feature):
    msg = error(call(plat, method, path, json={} if method in ("POST", "PUT") else None), 501)
    assert feature in msg.lower(), msg


def test_unknown_route_is_still_404(plat):
    error(call(plat, "GET", "/nope"), 404)


def test_snapshot_routes_answer(plat):
    # Served since issue 12 (tests/api/test_snapshots_api.py): an unknown snapshot id is a
    # 404 (deleteSnapshot() reads false), the list is empty.
    error(call(plat, "DELETE", "/templates/snap123"), 404)
    # Read-only template routes, served since issue 11 item 5 (test_template_sizes_api.py);
    # this node has no template.
    r = call(plat, "GET", "/templates")
    assert r.status_code == 200 and r.json() == [], r.text
    error(call(plat, "GET", "/templates/tpl"), 404)
    r = call(plat, "GET", "/snapshots")
    assert r.status_code == 200 and r.json() == [], r.text


@pytest.mark.parametrize("body,status,needle", [
    # autoPause works (issue 12; tests/compat/test_pause_compat.py), with autoPauseMemory:
    # false too (tests/api/test_pause_api.py); true without autoPause asks for nothing.
    ({"autoPause": False, "autoPauseMemory": True}, 400, "autopause"),
    ({"autoPause": True, "autoPauseMemory": "no"}, 400, "autopausememory"),
    ({"autoPause": True, "autoPauseMemory": False, "autoResume": {"enabled": True}}, 400,
     "autoresume"),
    # autoResume works with autoPause (tests/ingress/test_auto_resume.py), not without it.
    ({"autoResume": {"enabled": True}}, 400, "autopause"),
    ({"autoResume": {"enabled": "yes"}}, 400, "enabled"),
    ({"autoResume": {"enabled": False, "x": 1}}, 400, "'x'"),
    # The egress policy (issue 9; tests/api/test_egress_api.py): a bad entry is named.
    ({"network": {"allowOut": ["a..b"]}}, 400, "allowout[0]"),
    ({"network": {"denyOut": ["example.com"]}}, 400, "denyout[0]"),
    ({"network": {"rules": {"api.example.com": [{"x": 1}]}}}, 400, "rules"),
    ({"network": {"egressProxy": {"address": "p:1080"}}}, 501, "egressproxy"),
    ({"network": {"allowPublicTraffic": "no"}}, 400, "allowpublictraffic"),
    ({"network": {"bogus": 1}}, 400, "bogus"),
    ({"network": []}, 400, "network"),
    ({"mcp": {"github": {}}}, 501, "mcp"),
    ({"iam": {"tokens": {"t": {"audience": "a", "tokenType": "JWT-SVID"}}}}, 501, "iam"),
    ({"volumeMounts": [{"name": "v", "path": "/data"}]}, 501, "volume"),
    ({"volumeMounts": {}}, 400, "volumemounts"),
    ({"allow_internet_access": "yes"}, 400, "allow_internet_access"),
    ({"secure": 1}, 400, "secure"),
    ({"cpuCount": 4}, 400, "cpucount"),
    ({"allowInternetAccess": True}, 400, "allowinternetaccess"),
])
@pytest.mark.parametrize("route", ["/sandboxes", "/v2/sandboxes"])
def test_create_fields_are_honoured_or_refused(plat, route, body, status, needle):
    msg = error(call(plat, "POST", route, json=dict(templateID="base", **body)), status)
    assert needle in msg.lower(), msg


@pytest.mark.parametrize("body", [
    {}, {"secure": True, "allow_internet_access": True, "autoPause": False, "metadata": {},
         "envVars": {}, "timeout": 300},
    {"allow_internet_access": False, "network": {"allowPublicTraffic": True}, "mcp": None,
     "iam": None, "volumeMounts": [], "autoResume": {"enabled": False}},
    # the Python SDK's defaults (2.45): auto_resume is always sent
    {"secure": True, "allow_internet_access": True, "autoPause": False,
     "autoResume": {"enabled": None}, "autoPauseMemory": False, "metadata": {}, "envVars": {},
     "timeout": 300},
    {"autoPause": True, "autoPauseMemory": False}, {"autoPause": None, "autoPauseMemory": None},
    {"autoPause": True, "autoPauseMemory": True}, {"autoPauseMemory": False},
])
def test_accepted_create_bodies_pass_validation(plat, body):
    # The node has no template: passing validation shows as "template not found".
    r = call(plat, "POST", "/v2/sandboxes", json=dict(templateID="nosuchtemplate", **body))
    msg = error(r, 404)
    assert "template" in msg, msg


@pytest.mark.parametrize("method,path,body,needle", [
    ("POST", f"/sandboxes/{WELL_FORMED_MISSING}/timeout", {"timeout": 1, "x": 1}, "'x'"),
    ("POST", f"/sandboxes/{WELL_FORMED_MISSING}/refreshes", {"duration": 1, "y": 1}, "'y'"),
    ("POST", f"/v2/sandboxes/{WELL_FORMED_MISSING}/connect", {"memory": "no"}, "memory"),
    ("POST", f"/sandboxes/{WELL_FORMED_MISSING}/resume", {"z": 1}, "'z'"),
    ("POST", "/v1/sandboxes", {"templat": "base"}, "'templat'"),
    ("POST", f"/v1/sandboxes/{WELL_FORMED_MISSING}/timeout", {"timeout": 1}, "'timeout'"),
    ("POST", "/v1/keys", {"name": "ci", "scope": "all"}, "'scope'"),
    ("POST", "/v1/templates/base/build", {"force": True}, "'force'"),
])
def test_unknown_body_fields_are_400(plat, method, path, body, needle):
    msg = error(call(plat, method, path, json=body), 400)
    assert needle in msg, msg


@pytest.mark.parametrize("path", [
    "/v2/sandboxes?foo=1",
    "/sandboxes?state=running", "/v1/sandboxes?sort=asc",
    f"/sandboxes/{WELL_FORMED_MISSING}?x=1", "/v2/sandboxes?bad",
])
def test_unknown_query_parameters_are_400(plat, path):
    error(call(plat, "GET", path), 400)


def test_known_list_filters_pass(plat):
    r = call(plat, "GET", "/v2/sandboxes", params={
        "metadata": "a=b", "state": "running,paused", "limit": 10, "order": "desc",
        "startedAfter": "2020-01-01T00:00:00Z", "template": "base"})
    assert r.status_code == 200, r.text
    assert r.json() == []
    r = call(plat, "GET", f"/sandboxes/{WELL_FORMED_MISSING}/metrics", params={"start": 1,
                                                                              "end": 2})
    error(r, 404)
