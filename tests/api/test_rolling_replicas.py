"""Rolling snapshots with two space-api replicas on one PostgreSQL (issue 12 item 5): a turn
is taken by the replica whose compare-and-set moved its due time a period forward
(store_snapshot_policy_advance()), so each rolling snapshot is at least a period after the one
before; two replicas both taking one turn would leave two within one tick. Its own module: no
other space-api may be on the database meanwhile (it would run operations against its own
node).
"""
import datetime
import os
import time

import pytest

from lib.platform import replica_pair
from test_rolling_api import delete_all, snapshots, wait_for

PG_URL = os.environ.get("SPACE_TEST_PG_URL")
pytestmark = pytest.mark.skipif(not PG_URL, reason="needs SPACE_TEST_PG_URL")


def stamp(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def test_two_replicas_take_each_turn_once():
    with replica_pair("rollrep", PG_URL,
                      api_args=["--rolling-min-period", "1"]) as (a, b):
        status, sb = a.admin("POST", "/v1/sandboxes?wait=true", {"template": "base"})
        assert status == 201, sb
        try:
            status, res = b.admin("PUT", f"/v1/sandboxes/{sb['id']}/snapshot-policy",
                                  {"disk_every_s": 2, "tiers": [{"keep_all_s": 600}]})
            assert status == 200, res

            def four():
                done = [s for s in snapshots(a, sb["id"], "rolling") if s["state"] == "complete"]
                return done if len(done) >= 4 else None
            wait_for("four rolling snapshots", four)
            assert a.admin("DELETE", f"/v1/sandboxes/{sb['id']}/snapshot-policy")[0] == 204
            time.sleep(3)
            times = sorted(stamp(s["created_at"]) for s in snapshots(a, sb["id"], "rolling"))
            gaps = [t1 - t0 for t0, t1 in zip(times, times[1:])]
            assert gaps and min(gaps) >= 1.99, (times, gaps)
            delete_all(a, sb["id"])
        finally:
            a.admin("DELETE", f"/v1/sandboxes/{sb['id']}?wait=true")
