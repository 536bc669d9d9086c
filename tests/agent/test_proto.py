"""The binary protobuf codecs (application/proto, application/connect+proto)."""
import struct

from envd_client import envelope
import pbwire as pb

PROTO = {"Content-Type": "application/proto", "Connect-Protocol-Version": "1"}
CPROTO = {"Content-Type": "application/connect+proto", "Connect-Protocol-Version": "1"}


def frames(data):
    i = 0
    while i < len(data):
        flags = data[i]
        (n,) = struct.unpack(">I", data[i + 1:i + 5])
        yield flags, data[i + 5:i + 5 + n]
        i += 5 + n


def test_start_stream_binary(agent):
    process = pb.blob(1, "/bin/sh") + pb.blob(2, "-c") + pb.blob(2, "echo hi; exit 3")
    req = pb.blob(1, process) + pb.uint(4, 0)  # stdin = false, explicitly
    r = agent.http.post(agent.url + "/process.Process/Start", data=envelope(req), headers=CPROTO)
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/connect+proto"
    got = list(frames(r.content))
    assert got[-1] == (2, b"{}")  # the end-stream frame is JSON in every codec
    events = [pb.decode(pb.decode(body)[1][0]) for flags, body in got[:-1]]
    assert pb.decode(events[0][1][0])[1][0] > 0            # start.pid
    assert pb.decode(events[1][2][0])[1][0] == b"hi\n"     # data.stdout
    end = pb.decode(events[-1][3][0])
    assert pb.zigzag_decode(end[1][0]) == 3                # end.exit_code (sint32)
    assert end[2][0] == 1                                  # end.exited
    assert end[3][0] == b"exit status 3"


def test_unary_binary_and_errors(agent, fs, tmp):
    http = agent.http
    fs.write(tmp / "f", b"12345")
    r = http.post(agent.url + "/filesystem.Filesystem/Stat",
                  data=pb.blob(1, str(tmp / "f")), headers=PROTO)
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/proto"
    entry = pb.decode(pb.decode(r.content)[1][0])
    assert entry[1][0] == b"f"
    assert entry[2][0] == 1            # FILE_TYPE_FILE
    assert entry[4][0] == 5            # size
    assert entry[5][0] == 0o644
    assert 1 in pb.decode(entry[9][0])  # modified_time.seconds
    # errors stay JSON, as in the Connect protocol
    r = http.post(agent.url + "/filesystem.Filesystem/Stat",
                  data=pb.blob(1, str(tmp / "missing")), headers=PROTO)
    assert r.status_code == 404
    assert r.json()["code"] == "not_found"
    # garbage is invalid_argument, not a crash
    r = http.post(agent.url + "/filesystem.Filesystem/Stat", data=b"\x0a\xff\xff\xff\xff\x0f",
                  headers=PROTO)
    assert r.status_code == 400
    r = http.post(agent.url + "/process.Process/List", data=b"", headers=PROTO)
    assert r.status_code == 200 and r.content == b""
