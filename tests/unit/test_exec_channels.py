"""The websocket channel framing of pods/exec and pods/portforward (kubelet/channels.py)."""

from __future__ import annotations

import json

from airflow_k8s_ml.testbed.local_cluster.kubelet import channels

V5, V4, V1 = channels.Protocol(channels.V5), channels.Protocol(channels.V4), channels.Protocol(channels.V1)
B64 = channels.Protocol("v4.base64.channel.k8s.io")


def test_binary_and_base64_framing() -> None:
    assert channels.encode(V5, channels.STDOUT, b"hi") == b"\x01hi"
    assert channels.encode(B64, channels.STDERR, b"hi") == "2aGk="
    assert channels.decode(V5, b"\x00ls\n") == (0, b"ls\n")
    assert channels.decode(B64, "0bHMK") == (0, b"ls\n")
    # The Python client sends str stdin as a text message: its first character's code is the channel.
    assert channels.decode(V4, "\x00echo\n") == (0, b"echo\n")
    assert channels.decode(V5, b"\xff\x00") == (channels.CLOSE, b"\x00")
    assert channels.decode(V5, b"") is None
    assert V5.can_close and not V4.can_close and B64.base64 and B64.version == 4


def test_exit_status_per_protocol_version() -> None:
    assert json.loads(channels.exit_status(V4, 0, ["true"]) or b"") == {"metadata": {}, "status": "Success"}
    failure = json.loads(channels.exit_status(V5, 3, ["sh", "-c", "exit 3"]) or b"")
    assert failure["reason"] == "NonZeroExitCode"
    assert failure["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]
    assert failure["message"].endswith("error executing command [sh -c exit 3], exit code 3")
    assert channels.exit_status(V1, 0, ["true"]) is None  # v1-v3: plain text, nothing on success
    assert channels.exit_status(V1, 2, ["false"]) == (
        b"command terminated with non-zero exit code: error executing command [false], exit code 2"
    )


def test_resize_and_port_prefix() -> None:
    assert channels.resize(b'{"Width": 120, "Height": 40}') == (120, 40)
    assert channels.resize(b"nonsense") is None
    assert channels.port_prefix(8080) == b"\x90\x1f"


def test_spdy_frames_round_trip_through_a_peer_codec() -> None:
    """What one side writes (header blocks share one zlib stream per direction) the other side reads."""
    from airflow_k8s_ml.testbed.local_cluster.kubelet import spdy

    server, client = spdy.Codec(), spdy.Codec()
    wire = (
        server.syn_reply(1, {"StreamType": "error", "port": "8080"})
        + server.syn_reply(3, {"streamtype": "data", "port": "8080"})  # the second block reuses the stream
        + server.data(3, b"x" * 70_000)
        + server.data(3, b"", fin=True)
        + spdy.ping(7)
    )
    frames = client.feed(wire[:5]) + client.feed(wire[5:])  # a frame split across messages waits
    assert [(f.kind, f.stream) for f in frames] == [(2, 1), (2, 3), (0, 3), (0, 3), (spdy.PING, 0)]
    assert frames[0].headers == {"streamtype": "error", "port": "8080"}
    assert frames[1].headers == {"streamtype": "data", "port": "8080"}
    assert frames[2].data == b"x" * 70_000 and not frames[2].fin
    assert frames[3].fin and frames[4].value == 7
