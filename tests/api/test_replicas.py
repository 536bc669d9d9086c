"""Two space-api replicas on one PostgreSQL, one space-node (issue 7 item 3).

Both replicas claim operations from the shared store on every tick and after
every request. The claim (store_operation_claim(): a lease, FOR UPDATE SKIP
LOCKED) must make each operation run exactly once: counted in both replicas'
logs (one "running operation <id>" line per claim) and in the store
(operations.attempts). A replica killed -9 in the middle of a create loses
its lease; the other takes the operation over once the lease lapses and the
sandbox comes up. Needs SPACE_TEST_PG_URL (tools/pg-test.sh start).
"""
import concurrent.futures
import os
import re
import subprocess
import time
import uuid

import pytest

from lib.platform import e2b, replica_pair

PG_URL = os.environ.get("SPACE_TEST_PG_URL")
pytestmark = pytest.mark.skipif(not PG_URL, reason="needs SPACE_TEST_PG_URL")

RUN_LINE = re.compile(r"running operation (\S+) ([0-9a-f]{32}) \(attempt (\d+)\)")


@pytest.fixture(scope="module")
def pair():
    with replica_pair("rep", PG_URL) as (a, b):
        yield a, b


def psql(sql):
    res = subprocess.run(["psql", PG_URL, "-XAtc", sql], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    return [line.split("|") for line in res.stdout.splitlines() if line]


def runs(*plats):
    """op id -> number of times any of the replicas started it."""
    counts = {}
    for p in plats:
        for m in RUN_LINE.finditer(p.api_log_full()):
            counts[m.group(2)] = counts.get(m.group(2), 0) + 1
    return counts


def operations_of(ids):
    quoted = ",".join(f"'{i}'" for i in ids)
    return psql(f"SELECT id, kind, state, attempts FROM operations "
                f"WHERE sandbox_id IN ({quoted}) ORDER BY created_at")


def test_each_operation_runs_once(pair):
    a, b = pair
    tag = uuid.uuid4().hex
    n = 4
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        futs = [pool.submit(e2b, (a, b)[i % 2], "POST", "/v2/sandboxes",
                            json={"templateID": "base", "metadata": {"suite": tag}})
                for i in range(n)]
        created = [f.result() for f in futs]
    assert all(r.status_code == 201 for r in created), [r.text for r in created]
    ids = [r.json()["sandboxID"] for r in created]
    # both replicas see every sandbox
    for p in (a, b):
        r = e2b(p, "GET", "/v2/sandboxes", params={"metadata": f"suite={tag}"})
        assert sorted(s["sandboxID"] for s in r.json()) == sorted(ids)
    # kill each through the replica that did not create it, all at once
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        kills = list(pool.map(lambda i: e2b((b, a)[i % 2], "DELETE", f"/sandboxes/{ids[i]}"),
                              range(n)))
    assert all(r.status_code == 204 for r in kills), [r.text for r in kills]

    ops = operations_of(ids)
    assert len(ops) == 2 * n, ops
    for op_id, kind, state, attempts in ops:
        assert state == "succeeded", (op_id, kind, state)
        assert attempts == "1", (op_id, kind, attempts)
    counts = runs(a, b)
    for op_id, *_ in ops:
        assert counts.get(op_id) == 1, (op_id, counts.get(op_id))
    # the work really was shared (each replica's own requests kick its own controller)
    by_a, by_b = runs(a), runs(b)
    assert any(op[0] in by_a for op in ops) and any(op[0] in by_b for op in ops)
    status, res = a.node.call("GET", "/v1/sandboxes")
    assert [s["id"] for s in res["sandboxes"] if s["id"] in ids] == []


def test_lease_lapses_and_the_other_replica_takes_over(pair):
    a, b = pair
    tag = uuid.uuid4().hex
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(e2b, a, "POST", "/v2/sandboxes",
                              json={"templateID": "base", "metadata": {"suite": tag}})
        # wait until a has claimed the create, then kill it -9 mid-create
        deadline = time.monotonic() + 60
        op = None
        while time.monotonic() < deadline and not op:
            rows = psql("SELECT o.id, o.sandbox_id, o.lease_owner FROM operations o "
                        "JOIN sandboxes s ON s.id = o.sandbox_id "
                        f"WHERE s.metadata LIKE '%{tag}%' AND o.state = 'running'")
            op = rows[0] if rows else None
            time.sleep(0.1)
        assert op, "the create was never claimed"
        a.crash_api()
        with pytest.raises(Exception):
            pending.result()
    op_id, sid, _ = op
    # b takes it over once the lease (15 s) lapses; the sandbox comes up
    deadline = time.monotonic() + 180
    state = None
    while time.monotonic() < deadline:
        rows = psql(f"SELECT state, attempts, lease_owner FROM operations WHERE id = '{op_id}'")
        state, attempts, owner = rows[0]
        if state in ("succeeded", "failed"):
            break
        time.sleep(0.5)
    assert state == "succeeded", rows
    assert attempts == "2", rows
    r = e2b(b, "GET", f"/sandboxes/{sid}")
    assert r.status_code == 200 and r.json()["state"] == "running", r.text
    assert e2b(b, "DELETE", f"/sandboxes/{sid}").status_code == 204
    a.start_api()
