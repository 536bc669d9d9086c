"""The egress CA reaches sandboxes made before space-gw was up, and an /init the agent
refuses says why (src/node/manager.c egress_push_ca, src/node/vm.c vm_agent_error_text).

A sandbox created while no gateway listens gets an /init without caBundle. When a gateway
session starts (its hello reply carries the CA), the node sends that sandbox's agent an
/init with its access token and the CA, once: the instance record remembers which CA it
was given, so a node restart does not send it again. A new CA (a gateway with another data
dir) is sent again; one the agent refuses (a PEM block that is no certificate: the node
checks only the PEM shape, the guest checks the DER) is logged with the agent's message, and
a create whose /init it refuses fails with that message instead of "Protocol error".

space-gw is played by a stand-in for its side of the control socket (tests/lib/gwstub.py).
"""
import base64
import json
import os
import subprocess
import tempfile
import time

from lib.gwstub import GwStub, make_ca
from lib.platform import Node

CRT = "/usr/local/share/ca-certificates/space-egress.crt"
# A valid PEM block (markers, base64) that is not a DER certificate.
NOT_A_CERT = ("-----BEGIN CERTIFICATE-----\n" +
              base64.b64encode(b"this is not a certificate at all, only text " * 2).decode() +
              "\n-----END CERTIFICATE-----\n")


def guest_ca(n, sid):
    res = n.exec(sid, "cat", CRT, timeout_ms=10000)
    return res["stdout"].decode() if res["exit_code"] == 0 else None


def wait_log(n, text, timeout=120):
    deadline = time.monotonic() + timeout
    while text not in n.log():
        assert time.monotonic() < deadline, f"no '{text}' in the node's log: {n.log()}"
        time.sleep(0.1)


def test_late_gateway_gets_its_ca_to_running_sandboxes():
    gw_path = tempfile.mktemp(prefix="gw-late-", suffix=".sock", dir="/run/space")
    n = Node("lateca", extra_args=["--gw-socket", gw_path])
    gw = None
    try:
        n.start()
        # No gateway yet: the sandbox is made without the CA. It has an access token, which
        # the later /init must prove.
        sb = n.create(init={"accessToken": "late-ca-token-1234567890"})
        sid = sb["id"]
        assert guest_ca(n, sid) is None
        record = os.path.join(n.instance_dir(sb), "instance.json")
        with open(record) as f:
            assert "ca_given" not in json.load(f)

        # The gateway comes up: its CA arrives in the guest's trust store on its own.
        ca = make_ca("space late CA test")
        gw = GwStub(gw_path, ca).start()
        t0 = time.monotonic()
        gw.expect("hello")
        gw.expect("attach", instance=sb["instance_id"])
        while True:
            got = guest_ca(n, sid)
            if got is not None:
                break
            assert time.monotonic() - t0 < 120, f"the CA never reached the guest: {n.log()}"
            time.sleep(0.2)
        print(f"CA in the guest {time.monotonic() - t0:.2f} s after the gateway came up")
        assert got.strip() == ca.strip()
        # The guest's system bundle has it too, between the agent's markers.
        res = n.exec(sid, "cat", "/etc/ssl/certs/ca-certificates.crt")
        assert ca.strip().splitlines()[1] in res["stdout"].decode(), res
        wait_log(n, "sent the egress CA")
        with open(record) as f:
            given = json.load(f)["ca_given"]
        assert len(given) == 16

        # A node restart does not send it again: the record says the agent has it.
        n.stop()
        n.start()
        gw.expect("hello")
        # The node decides whether to send the CA when it attaches the sandbox (its ticks
        # after that decide the same from the same record): once the stub has the attach,
        # the decision is made and logged before the node answers the exec below.
        gw.expect("attach", instance=sb["instance_id"])
        assert guest_ca(n, sid).strip() == ca.strip()
        assert n.log().count("sending the egress CA") == 1, n.log()

        # The agent's message is the guest's text: the node keeps it printable and bounded.
        ts = "bad\x01\n" + "x" * 300
        status, body = n.call("POST", "/v1/sandboxes", {"init": {"timestamp": ts}})
        assert status == 500, (status, body)
        said = f"invalid timestamp '{ts}'"
        clean = "".join(c if 0x20 <= ord(c) < 0x7f else "?" for c in said[:200]) + "..."
        assert body["message"].splitlines()[0] == ("cannot create sandbox: initialise agent "
                                                   "failed: agent answered 400: " + clean), body

        # A gateway with a CA the agent refuses: logged with the agent's own message, and the
        # guest keeps the CA it had (the agent checks the whole bundle before it applies it).
        # A new session on the same listener (closing the listener itself races the node's
        # immediate reconnect into its backlog): the next hello carries the refused CA.
        hellos = gw.hellos
        gw.ca = NOT_A_CERT
        gw.end_session()
        gw.wait_hello(hellos + 1)
        wait_log(n, "agent answered 400: caBundle: a block is not a DER certificate")
        assert guest_ca(n, sid).strip() == ca.strip()

        # A create whose /init the agent refuses fails with the agent's answer.
        status, body = n.call("POST", "/v1/sandboxes", {})
        assert status == 500, (status, body)
        first = body["message"].splitlines()[0]
        print("refused create:", first)
        assert first == ("cannot create sandbox: initialise agent failed: agent answered 400: "
                         "caBundle: a block is not a DER certificate"), body
        assert "Protocol error" not in body["message"]

        n.kill(sid)
        assert not n.leftovers(), n.leftovers()
    finally:
        n.destroy()
        if gw:
            gw.stop()
