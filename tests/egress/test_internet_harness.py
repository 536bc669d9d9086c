"""The simulated internet itself (tests/lib/internet.py), before anything is put in front of
it: from the uplink namespace, where space-gw will run, both vhosts of the shared address
answer over HTTP and HTTPS (test CA), dnsmasq answers and logs, the forbidden and metadata
addresses answer, and the flow log sees every attempt. Then teardown leaves nothing."""
import hashlib
import os

from lib.internet import (ALLOWED, DNS_IP, DOH_IP, FORBIDDEN, FORBIDDEN_IP, HOST_SERVICE_PORT,
                          METADATA_IP, WEB_IP, Internet, _netns_list)


def curl(net, *args):
    r = net.run_uplink(["curl", "-sS", "-m", "10", *args])
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_internet_harness():
    net = Internet(big_size=8 << 20)
    with net:
        assert os.path.isfile(net.ca) and net.upstream_dns == DNS_IP
        assert net.test_net == "198.18.0.0/15"

        # DNS: both names on one address, logged; an unknown name gets no address.
        for name, addr in ((ALLOWED, WEB_IP), (FORBIDDEN, WEB_IP), ("leak.test", FORBIDDEN_IP),
                           ("dns.test", DOH_IP)):
            r = net.run_uplink(["dig", "+short", "+time=2", f"@{DNS_IP}", name, "A"])
            assert r.stdout.split() == [addr], (name, r.stdout, r.stderr)
        r = net.run_uplink(["dig", "+short", "+time=2", f"@{DNS_IP}", "nowhere.example", "A"])
        assert r.stdout.strip() == ""
        r = net.run_uplink(["dig", "+time=2", f"@{DNS_IP}", ALLOWED, "TYPE65"])
        assert "TYPE65" in r.stdout and "ANSWER: 1" in r.stdout, r.stdout  # for the proxy to strip
        assert [ALLOWED, FORBIDDEN, "leak.test", "dns.test"] == net.dns_queries()[:4]
        assert "nowhere.example" in net.dns_queries()

        # HTTP and HTTPS on the shared address: the vhost that answered is in the body.
        for scheme in ("http", "https"):
            for name in (ALLOWED, FORBIDDEN):
                body = curl(net, "--cacert", net.ca, f"{scheme}://{name}/probe")
                assert body.startswith(f"vhost={name} host={name}"), body
        assert "vhost=default" in curl(net, "-H", "Host: other.test", f"http://{WEB_IP}/")
        # TLS 1.3, as the internet speaks it (nginx 1.22 needs telling).
        assert "vhost=" in curl(net, "--tlsv1.3", "--cacert", net.ca, f"https://{ALLOWED}/")
        # The test CA is what makes HTTPS verify: without it curl refuses.
        r = net.run_uplink(["curl", "-sS", "-m", "10", f"https://{ALLOWED}/"])
        assert r.returncode == 60, r

        # Keep-alive: two requests, one connection (nginx numbers the requests).
        curl(net, "--cacert", net.ca, f"https://{ALLOWED}/a", f"https://{ALLOWED}/b")
        reqs = [q for q in net.requests() if q["request"].startswith("GET /a ") or
                q["request"].startswith("GET /b ")]
        assert [q["reqs"] for q in reqs] == ["1", "2"] and reqs[0]["conn"] == reqs[1]["conn"]

        # The big file, by checksum.
        r = net.run_uplink(["sh", "-c", f"curl -sS --cacert {net.ca} "
                            f"https://{ALLOWED}/{net.big_name} | sha256sum"])
        assert r.stdout.split()[0] == net.big_sha256

        # Forbidden address, metadata, DoH/DoT and odd ports answer: a leak shows.
        assert "vhost=leak" in curl(net, f"http://{FORBIDDEN_IP}/")
        assert "vhost=leak" in curl(net, "--cacert", net.ca, f"https://{FORBIDDEN_IP}/")
        assert "vhost=metadata-leak" in curl(net, f"http://{METADATA_IP}/latest/meta-data/")
        assert "vhost=doh-leak" in curl(net, "--cacert", net.ca, f"https://{DOH_IP}/dns-query")
        assert "vhost=dot-leak" in curl(net, "--cacert", net.ca, f"https://{DOH_IP}:853/")
        assert "vhost=port-leak" in curl(net, f"http://{WEB_IP}:8080/")

        # The host service in uplink (what the host's API would be), by loopback and address.
        assert "host-leak" in curl(net, f"http://127.0.0.2:{HOST_SERVICE_PORT}/")
        assert "host-leak" in curl(net, f"http://198.18.0.1:{HOST_SERVICE_PORT}/")
        assert [h.split(" -> ")[1] for h in net.host_service_hits()] == ["127.0.0.2",
                                                                         "198.18.0.1"]

        flows = net.flows()
        for dst, port in ((FORBIDDEN_IP, 80), (METADATA_IP, 80), (DOH_IP, 853), (WEB_IP, 8080),
                          (WEB_IP, 443), (DNS_IP, 53)):
            assert any(f[2] == dst and f[3] == port for f in flows), (dst, port, flows)
        leaks = net.leaks()
        assert ("tcp", "198.18.0.1", FORBIDDEN_IP, 80) in leaks
        assert not any(f[2] == WEB_IP and f[3] == 443 for f in leaks)
        # reset_logs() forgets everything, for the next probe batch.
        net.reset_logs()
        assert net.flows() == [] and net.dns_queries() == [] and net.requests() == []
        assert net.host_service_hits() == []
        tmp = net.tmp
    assert net.uplink not in _netns_list() and net.inet not in _netns_list()
    assert not os.path.exists(tmp) and not os.path.exists(f"/etc/netns/{net.uplink}")
    # A second one in the same process gets fresh names.
    assert Internet().uplink != net.uplink
