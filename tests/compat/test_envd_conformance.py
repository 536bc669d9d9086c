"""Issue 8 points 4 (command timeout), 6 (file metadata) and 7 (`python`) with the real `e2b`
npm package against a real space-api + space-node, configured only by the E2B_* environment
that `space up --detach` prints (envd_conformance.mjs)."""

from lib.platform import Platform
from lib.sdk import run_sdk_script


def test_envd_conformance_with_the_sdk():
    p = Platform("envd-conf")
    try:
        p.start()
        run_sdk_script(p, "envd_conformance.mjs", expect="envd conformance passed")
    finally:
        p.destroy()
