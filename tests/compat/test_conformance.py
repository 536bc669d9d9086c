"""The real `e2b` npm SDK runs conformance.mjs (issue 8 point 1, issue 7 "no silent drops"):
ids that do not exist are "not found" (kill returns false), features space lacks are
errors the SDK raises. The first test needs no guest (the node has no template); the
second also creates a sandbox with the SDK's default options."""
import functools
from unittest import mock

import lib.platform as lp
from lib.sdk import run_sdk_script, sdk_env


def run(vm):
    if vm:
        p = lp.Platform("conformance-vm")
    else:
        with mock.patch.object(lp, "Node", functools.partial(lp.Node, template=False)):
            p = lp.Platform("conformance")
    try:
        p.start()
        run_sdk_script(p, "conformance.mjs",
                       env=sdk_env(p, SPACE_CONFORMANCE_VM="1" if vm else "0"))
    finally:
        p.destroy()


def test_sdk_sees_not_found_and_not_implemented():
    run(vm=False)


def test_sdk_default_create_is_accepted():
    run(vm=True)
