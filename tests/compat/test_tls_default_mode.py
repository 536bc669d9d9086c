"""The real `e2b` npm SDK in its default, header-free mode against the TLS ingress (issue 8
point 8): no E2B_SANDBOX_URL, envd at https://49983-{id}.space.test, signed file URLs fetched by
plain fetch(), getHost() reaching a server in the sandbox.

The SDK puts no port in https://{port}-{id}.{domain}, so the TLS ingress must be on 443, and
*.space.test must resolve to it. Both happen in a network namespace this test creates, so the
host's resolver, ports and routes are untouched:

  - space-api runs inside the namespace (`ip netns exec`), with its API on 127.0.0.1:PORT and
    the TLS ingress on 127.0.0.1:443 there; it reaches space-node, in the host namespace,
    through its Unix sockets, which cross namespaces;
  - dnsmasq in the namespace answers *.space.test with 127.0.0.1 and nothing else
    (--no-resolv: no upstream);
  - /etc/netns/<ns>/resolv.conf and hosts, which `ip netns exec` bind-mounts over /etc, point
    node's getaddrinfo at that dnsmasq;
  - node runs in the namespace, trusting the deployment CA via NODE_EXTRA_CA_CERTS.

No veth, no addresses outside the namespace's loopback. The namespace, the /etc/netns files,
dnsmasq and the daemons go in the finally block.
"""
import contextlib
import os
import shutil
import subprocess
import tempfile
import time

import lib.platform as platform
from lib.platform import Platform

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_BIN = os.environ.get("SPACE_NODEJS", shutil.which("node") or "node")
DOMAIN = "space.test"


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


@contextlib.contextmanager
def api_in_netns(ns):
    """Platform starts space-api through a wrapper that execs it inside ns (same pid)."""
    real = platform.API
    fd, wrapper = tempfile.mkstemp(prefix="space-api-netns-", suffix=".sh")
    with os.fdopen(fd, "w") as f:
        f.write(f'#!/bin/sh\nexec ip netns exec {ns} {real} "$@"\n')
    os.chmod(wrapper, 0o755)
    platform.API = wrapper
    try:
        yield
    finally:
        platform.API = real
        os.unlink(wrapper)


def wait_dns(ns, name, timeout=10):
    """dnsmasq answers name (getent through the namespace's resolv.conf)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = sh("ip", "netns", "exec", ns, "getent", "hosts", name, check=False)
        if r.returncode == 0 and "127.0.0.1" in r.stdout:
            return
        time.sleep(0.1)
    raise AssertionError(f"dnsmasq in {ns} does not answer {name}")


def test_e2b_sdk_default_mode_over_tls():
    assert os.path.isdir(os.path.join(HERE, "node_modules", "e2b")), \
        "run tools/install-deps.sh (npm ci in tests/compat)"
    assert shutil.which("dnsmasq"), "run tools/install-deps.sh (dnsmasq-base)"
    ns = f"sptls{os.getpid() % 100000}"
    etc = f"/etc/netns/{ns}"
    pidfile = f"/tmp/{ns}-dnsmasq.pid"
    dnsmasq = None
    p = None
    try:
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        os.makedirs(etc, exist_ok=True)
        with open(f"{etc}/resolv.conf", "w") as f:
            f.write("nameserver 127.0.0.1\noptions timeout:1 attempts:2\n")
        with open(f"{etc}/hosts", "w") as f:
            f.write("127.0.0.1 localhost\n::1 localhost\n")
        dnsmasq = subprocess.Popen(
            ["ip", "netns", "exec", ns, "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null",
             "--no-resolv", "--no-hosts", "--no-poll", "--bind-interfaces",
             "--listen-address=127.0.0.1", "--port=53", "--user=root", f"--pid-file={pidfile}",
             f"--address=/{DOMAIN}/127.0.0.1", "--log-facility=-"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        wait_dns(ns, f"49983-abc.{DOMAIN}")

        p = Platform("tlsdefault", api_args=["--ingress-tls", "127.0.0.1:443"])
        with api_in_netns(ns):
            p.start()
        assert "ingress TLS on 127.0.0.1:443" in p.api_log_full()
        ca = os.path.join(p.data, "ca.crt")
        assert os.stat(ca).st_mode & 0o777 == 0o644
        assert os.stat(os.path.join(p.data, "ca.key")).st_mode & 0o777 == 0o600

        env = {k: v for k, v in os.environ.items() if not k.startswith("E2B_")}
        env.update(E2B_API_URL=f"http://127.0.0.1:{p.port}", E2B_DOMAIN=DOMAIN,
                   E2B_API_KEY=p.key, NODE_EXTRA_CA_CERTS=ca)
        res = subprocess.run(["ip", "netns", "exec", ns, NODE_BIN,
                              os.path.join(HERE, "tls_default_mode.mjs")],
                             cwd=HERE, env=env, capture_output=True, text=True, timeout=600)
        print(res.stdout)
        assert res.returncode == 0, res.stdout + res.stderr + p.api_log()
        assert "tls default mode passed" in res.stdout

        # Without the CA the same default-mode client refuses the ingress' certificate.
        env.pop("NODE_EXTRA_CA_CERTS")
        probe = ("fetch('https://49983-abcdefghijklmnopqrst.space.test/health')"
                 ".then(() => process.exit(3), (e) => { console.log(e.cause?.code); })")
        res = subprocess.run(["ip", "netns", "exec", ns, NODE_BIN, "-e", probe], env=env,
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 0 and "UNABLE_TO_VERIFY_LEAF_SIGNATURE" in res.stdout, \
            res.stdout + res.stderr
    finally:
        if p:
            p.destroy()
        if dnsmasq:
            dnsmasq.kill()
            dnsmasq.wait(timeout=10)
        sh("ip", "netns", "del", ns, check=False)
        shutil.rmtree(etc, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(pidfile)
    assert ns not in sh("ip", "netns", "list").stdout
    assert not os.path.exists(etc)
