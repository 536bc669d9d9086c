"""Node capacity (issue 13 item 3): GET /v1/capacity on the node and through the api, and the
capacity error a create beyond a budget gets (node 503 error_code capacity; native API 503; E2B
API 429 with Retry-After, which the SDK retries). A refused create leaves nothing behind.
"""
import json
import os
import subprocess

from lib.platform import SPACE, Platform, e2b, netns_names, node_sandbox, started_node


def capacity(node):
    status, body = node.call("GET", "/v1/capacity")
    assert status == 200, (status, body)
    return body


def assert_refused(node, body, expect):
    status, res = node.call("POST", "/v1/sandboxes", body)
    assert status == 503, (status, res)
    assert res["code"] == 503 and res["error_code"] == "capacity", res
    assert expect in res["message"], res


def test_node_capacity_moves_with_create_and_kill():
    with started_node("cap-node", extra_args=("--memory-budget-mib", "1100",
                                              "--vcpu-budget", "2")) as n:
        c = capacity(n)
        assert c["memory_mib"] == {"budget": 1100, "sandboxes": 0, "pool": 0, "free": 1100}, c
        assert c["vcpus"] == {"budget": 2, "sandboxes": 0, "pool": 0, "free": 2}, c
        assert c["sandboxes"] == {"count": 0, "pool_members": 0, "max": 64}, c
        assert 0 < c["disk"]["free_bytes"] <= c["disk"]["total_bytes"], c
        overhead = c["vmm_overhead_mib"]
        with node_sandbox(n, vcpus=1, memory_mb=256):
            c = capacity(n)
            assert c["memory_mib"]["sandboxes"] == 256 + overhead, c
            assert c["memory_mib"]["free"] == 1100 - 256 - overhead, c
            assert c["vcpus"]["sandboxes"] == 1 and c["vcpus"]["free"] == 1, c
            assert c["sandboxes"]["count"] == 1, c
            before = (n.instances(), netns_names())
            # One vCPU left: two are refused; memory beyond the budget is refused too.
            assert_refused(n, {"vcpus": 2, "memory_mb": 128}, "vCPU budget 2, 1 committed")
            assert_refused(n, {"memory_mb": 512}, "memory budget 1100 MiB")
            # Nothing of the refused creates is left: no instance, no namespace, no count.
            assert (n.instances(), netns_names()) == before
            assert capacity(n)["sandboxes"]["count"] == 1
            res = n.cli("capacity", check=True)
            out = res.stdout.decode()
            print(out)
            assert "vCPUs       budget 2, sandboxes 1, warm pool 0, free 1" in out, out
            res = n.cli("capacity", "--json", check=True)
            assert json.loads(res.stdout)["vcpus"]["free"] == 1
        c = capacity(n)
        assert c["memory_mib"]["free"] == 1100 and c["vcpus"]["free"] == 2, c
        assert c["sandboxes"]["count"] == 0, c
        # Freed with the sandbox: the same create fits now.
        with node_sandbox(n, vcpus=2, memory_mb=128):
            assert capacity(n)["vcpus"]["free"] == 0


def test_api_capacity_and_the_capacity_error():
    # 700 MiB: no 512 MiB guest (+ its VMM overhead) fits; nothing needs to boot.
    p = Platform("cap-api", node_args=["--memory-budget-mib", "700", "--vcpu-budget", "4"])
    try:
        p.start()
        r = e2b(p, "GET", "/v1/capacity")
        assert r.status_code == 200, r.text
        c = r.json()
        assert [x["node"] for x in c["nodes"]] == ["local"], c
        node = c["nodes"][0]
        assert node["reachable"] and "path" not in node["disk"], node
        assert node["memory_mib"]["budget"] == 700 and node["vcpus"]["budget"] == 4, node
        assert c["total"]["memory_mib"] == node["memory_mib"], c
        assert c["total"]["vcpus"]["free"] == 4, c
        assert c["api"] == {"sandboxes": 0, "max_sandboxes": 64}, c

        r = e2b(p, "POST", "/v1/sandboxes?wait=true", json={"template": "base", "memory_mb": 512})
        assert r.status_code == 503, r.text
        assert r.json()["error_code"] == "capacity" and "memory budget 700" in r.json()["message"]
        assert r.headers.get("Retry-After") == "5"
        # E2B maps no capacity to 429 + Retry-After (e2b-compat.md 11): the SDK retries.
        r = e2b(p, "POST", "/sandboxes", json={"templateID": "base"})
        assert r.status_code == 429, r.text
        assert r.json()["code"] == 429 and r.json()["error_code"] == "capacity", r.text
        assert r.headers.get("Retry-After") == "5"

        # Nothing is left: no instance on the node, nothing live in the api.
        assert p.node.instances() == []
        c = e2b(p, "GET", "/v1/capacity").json()
        assert c["api"]["sandboxes"] == 0 and c["total"]["sandboxes"]["count"] == 0, c
        out = subprocess.run([SPACE, "capacity"], env=p.env, capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        print(out.stdout)
        assert out.stdout.startswith("local:\n") and "api: 0 of 64 sandboxes" in out.stdout
        assert "memory MiB  budget 700, sandboxes 0" in out.stdout, out.stdout
    finally:
        p.stop_api()
        p.node.stop()
        left = p.node.leftovers()
        p.destroy()
    assert not left, left
    assert not os.path.exists(p.data)
