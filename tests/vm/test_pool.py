"""The warm pool (issue 11; src/node/pool.c): instances restored from the template snapshot,
warmed and paused ahead of any create; a create binds one (resume, re-identify) and the pool
refills in the background.

One node with --snapshots on --pool 2. Every pool-created sandbox is its own: fresh entropy,
hostname, machine-id and token, the host's clock, memory and disk of its own. A member whose
VMM died is replaced, never handed out; a node killed with a full pool leaves nothing behind
once it is started again.
"""
import os
import signal
import time

import pytest

from lib.platform import live_qemu_pids, netns_names, node_sandbox, started_node

TARGET = 2


@pytest.fixture(scope="module")
def node():
    with started_node("pool", extra_args=["--snapshots", "on", "--pool", str(TARGET)]) as n:
        yield n
        wait_pool_full(n)  # no refill in flight at the stop: it leaves nothing


def pool_level(node):
    status, body = node.call("GET", "/v1/pools")
    assert status == 200, body
    pools = [p for p in body["pools"] if p["template"] == "base"]
    return pools[0] if pools else None


def wait_pool_full(node, timeout=900):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = node.call("GET", "/v1/templates")  # listing starts snapshot and pool
        assert status == 200, body
        p = pool_level(node)
        if p and p["ready"] == TARGET and not p["filling"]:
            return p
        time.sleep(0.5)
    raise AssertionError(f"pool not full: {pool_level(node)} {node.log()}")


def sh(node, sid, script):
    res = node.exec(sid, "/bin/sh", "-c", script, user="root")
    assert res["exit_code"] == 0, res
    return res["stdout"].decode()


IDENTITY = ("hostname; cat /etc/machine-id; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'; "
            "echo; date +%s")

# From inside the guest: the agent answers /envs to its own token only.
TOKEN_CHECK = """python3 - <<'EOF'
import urllib.request, urllib.error
def status(tok):
    req = urllib.request.Request("http://127.0.0.1:49983/envs", headers={"X-Access-Token": tok})
    try:
        return urllib.request.urlopen(req, timeout=10).status
    except urllib.error.HTTPError as e:
        return e.code
print(status("%s"), status("%s"))
EOF"""


def test_pool_creates_are_distinct_sandboxes(node):
    wait_pool_full(node)
    tok_a, tok_b = "pool-token-a-0123456789", "pool-token-b-0123456789"
    with node_sandbox(node, init={"accessToken": tok_a}) as a, \
            node_sandbox(node, init={"accessToken": tok_b}) as b:
        assert a["timings_ms"]["mode"] == "pool", a
        assert b["timings_ms"]["mode"] == "pool", b
        ids = []
        for sb in (a, b):
            host, machine_id, urandom, clock = sh(node, sb["id"], IDENTITY).split()
            assert host == sb["id"]
            assert len(machine_id) == 32
            assert abs(int(clock) - time.time()) < 30, clock  # stepped at bind, not the snapshot's
            ids.append((machine_id, urandom))
        assert ids[0][0] != ids[1][0] and ids[0][1] != ids[1][1], ids
        # Each agent takes its own token and refuses the other's.
        assert sh(node, a["id"], TOKEN_CHECK % (tok_a, tok_b)).split() == ["200", "401"]
        assert sh(node, b["id"], TOKEN_CHECK % (tok_b, tok_a)).split() == ["200", "401"]
        # A write to one sandbox's memory (tmpfs) or disk is invisible to the other.
        sh(node, a["id"], "echo a > /dev/shm/only-a && echo a > /root/only-a && sync")
        assert sh(node, b["id"], "ls /dev/shm/only-a /root/only-a 2>/dev/null; true") == ""
        assert sh(node, a["id"], "cat /dev/shm/only-a /root/only-a") == "a\na\n"
        # Bound sandboxes are no longer members.
        members = {m["instance_id"] for m in pool_level(node)["members"]}
        assert a["instance_id"] not in members and b["instance_id"] not in members


def test_pool_refills_after_a_burst(node):
    wait_pool_full(node)
    sbs = [node.create() for _ in range(TARGET + 1)]
    try:
        modes = [sb["timings_ms"]["mode"] for sb in sbs]
        # The pool served what it held; the rest restored from the snapshot.
        assert modes.count("pool") == TARGET, modes
        assert modes.count("restore") == 1, modes
        for sb in sbs:
            assert sh(node, sb["id"], "echo ok") == "ok\n"
    finally:
        for sb in sbs:
            node.kill(sb["id"])
    p = wait_pool_full(node)
    assert p["refills"] >= 2 * TARGET, p


def test_dead_member_is_replaced_not_handed_out(node):
    p = wait_pool_full(node)
    victim = p["members"][0]
    os.kill(victim["pid"], signal.SIGKILL)
    # Whether the node's tick sees it first (it destroys and replaces it) or a create does
    # (its bind fails; that create restores instead), the dead one is never bound.
    sbs = [node.create() for _ in range(TARGET)]
    try:
        for sb in sbs:
            if sb["instance_id"] == victim["instance_id"]:
                assert sb["timings_ms"]["mode"] != "pool", sb
            assert sh(node, sb["id"], "echo ok") == "ok\n"
    finally:
        for sb in sbs:
            node.kill(sb["id"])
    p = wait_pool_full(node)
    assert victim["instance_id"] not in {m["instance_id"] for m in p["members"]}
    log = open(node.log_path).read()
    assert (f"warm pool: destroying member {victim['instance_id']}" in log
            or f"binding pool member {victim['instance_id']}" in log), log[-3000:]


def test_stale_member_is_replaced_not_handed_out(node):
    p = wait_pool_full(node)
    old = {m["instance_id"] for m in p["members"]}
    # template.json is part of the snapshot key: a change retires the snapshot and the
    # members restored from it.
    path = os.path.join(node.data, "templates/base/template.json")
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text.rstrip() + "\n\n")
    with node_sandbox(node) as sb:
        assert sb["instance_id"] not in old, sb
        assert sb["timings_ms"]["mode"] != "pool", sb
        assert sh(node, sb["id"], "echo ok") == "ok\n"
    p = wait_pool_full(node)
    assert not old & {m["instance_id"] for m in p["members"]}, p
    assert "the template's snapshot changed" in open(node.log_path).read()


def test_node_killed_with_full_pool_leaves_nothing(node):
    p = wait_pool_full(node)
    members = [m["instance_id"] for m in p["members"]]
    node.crash()  # kill -9: the members' VMMs live on
    node.extra_args = [a if a != str(TARGET) else "0" for a in node.extra_args]  # --pool 0
    node.start()
    try:
        # The restart destroyed every unbound instance: VMM, netns and disk clone.
        for iid in members:
            assert not os.path.exists(os.path.join(node.data, "instances", iid)), iid
            assert f"space-{iid}" not in netns_names(), iid
        assert live_qemu_pids(node.data) == [], live_qemu_pids(node.data)
        assert node.instances() == []
    finally:
        node.stop()
        node.extra_args = [a if a != "0" else str(TARGET) for a in node.extra_args]
        node.start()
