"""The real `e2b` npm SDK (installed in tests/compat/node_modules by tools/install-deps.sh)
driven against a Platform: one place for the environment the SDK reads, for how a script is
run and judged, and for the leak check a compat test ends with."""
import os
import shutil
import subprocess

COMPAT_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "compat")
NODE_BIN = os.environ.get("SPACE_NODEJS", shutil.which("node") or "node")


def require_sdk():
    assert os.path.isdir(os.path.join(COMPAT_DIR, "node_modules", "e2b")), \
        "run tools/install-deps.sh (npm ci in tests/compat)"


def sdk_env(plat, **extra):
    """What an unmodified E2B program needs to reach plat: its api, its ingress, a key."""
    return dict(os.environ, E2B_API_URL=plat.url, E2B_SANDBOX_URL=plat.ingress_url,
                E2B_DOMAIN="space.test", E2B_API_KEY=plat.key, **extra)


def run_sdk_script(plat, script, *args, expect="ok all", timeout=600, env=None):
    """Runs tests/compat/<script> (ESM resolves `e2b` from there) with plat's environment;
    asserts it exited 0 and printed `expect`; returns the finished process."""
    require_sdk()
    res = subprocess.run([NODE_BIN, os.path.join(COMPAT_DIR, script), *args], cwd=COMPAT_DIR,
                         env=env or sdk_env(plat), capture_output=True, text=True,
                         timeout=timeout)
    print(res.stdout)
    assert res.returncode == 0, res.stdout + res.stderr + plat.api_log()
    if expect:
        assert expect in res.stdout, res.stdout
    return res


def stop_and_leftovers(plat):
    """Stops the api and the node (sandboxes killed by the script must be gone by then) and
    returns what the node left behind: nothing, when all is well."""
    plat.stop_api()
    plat.node.stop()
    return plat.node.leftovers()
