"""space-api's files are its own (issue 7 "holes"): the data dir is 0700 and the SQLite
store with its -wal/-shm files 0600, also when they existed before with looser modes. No
guest needed (the node has no template)."""
import functools
import os
import stat
from unittest import mock

import requests

import lib.platform as lp


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def store_files(data):
    return [os.path.join(data, f) for f in ("space.db", "space.db-wal", "space.db-shm")
            if os.path.exists(os.path.join(data, f))]


def test_data_dir_and_store_are_private():
    with mock.patch.object(lp, "Node", functools.partial(lp.Node, template=False)):
        p = lp.Platform("files")
    try:
        os.chmod(p.data, 0o755)  # as a data dir made by hand or by an older version
        p.start()
        r = requests.get(p.url + "/v2/sandboxes", headers={"X-API-Key": p.key}, timeout=30)
        assert r.status_code == 200
        files = store_files(p.data)
        assert os.path.join(p.data, "space.db") in files
        assert mode(p.data) == 0o700
        assert {f: mode(f) for f in files} == {f: 0o600 for f in files}
        assert mode(p.key_file) == 0o600 and mode(p.api_socket) & 0o077 == 0

        # Loosened while space-api was down: the next start restricts them again.
        p.stop_api()
        os.chmod(p.data, 0o755)
        for f in store_files(p.data):
            os.chmod(f, 0o644)
        p.start_api()
        r = requests.get(p.url + "/v2/sandboxes", headers={"X-API-Key": p.key}, timeout=30)
        assert r.status_code == 200
        files = store_files(p.data)
        assert mode(p.data) == 0o700
        assert {f: mode(f) for f in files} == {f: 0o600 for f in files}
    finally:
        p.destroy()
