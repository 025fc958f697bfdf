"""The websocket channel protocols of ``pods/exec`` and ``pods/portforward``, as pure functions.

Upstream: k8s.io/apimachinery ``pkg/util/remotecommand/constants.go`` and k8s.io/streaming ``wsstream``
(formerly apimachinery ``pkg/util/httpstream/wsstream/conn.go``). Every websocket message carries one
channel: binary protocols prefix the payload with the channel byte; the ``base64.`` protocols send text
messages whose first character is the channel digit, the rest base64. Exec channels: 0 stdin, 1 stdout,
2 stderr, 3 error (v4+: a ``metav1.Status`` as JSON, with the exit code as a cause), 4 terminal resize
(JSON ``{"Width", "Height"}``), and in v5 255 CLOSE (``[255, channel]``: the client closed its stdin).
Port-forward (``v4.channel.k8s.io`` and older on ``pods/portforward``) uses channel ``2i`` for the data of
the i-th port and ``2i+1`` for its errors; the first message on each is the port, two bytes little-endian.
"""

from __future__ import annotations

import base64
import json
import struct
from dataclasses import dataclass
from typing import Any

STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255

V5, V4, V3, V2, V1 = (
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
)
_BINARY = (V5, V4, V3, V2, V1)
_BASE64 = tuple(f"{p.removesuffix('channel.k8s.io')}base64.channel.k8s.io" for p in (V4, V3, V2, V1))
#: What the server accepts, in its order of preference (aiohttp picks the client's first that is listed).
EXEC_PROTOCOLS: tuple[str, ...] = (*_BINARY, *_BASE64)
#: ``pods/portforward`` over websockets, as the apiserver serves it (``v4.channel.k8s.io`` and older).
PORTFORWARD_PROTOCOLS: tuple[str, ...] = (V4, V3, V2, V1, *_BASE64)


@dataclass(frozen=True)
class Protocol:
    """What a negotiated subprotocol means for framing and the error channel."""

    name: str

    @property
    def base64(self) -> bool:
        return "base64" in self.name

    @property
    def version(self) -> int:
        head = self.name.split(".", 1)[0]
        return int(head[1:]) if head.startswith("v") and head[1:].isdigit() else 1

    @property
    def status_json(self) -> bool:
        """v4 and later write a Status on the error channel; earlier versions a plain message."""
        return self.version >= 4

    @property
    def can_close(self) -> bool:
        return self.name == V5


def encode(protocol: Protocol, channel: int, data: bytes) -> bytes | str:
    """One message on ``channel``: bytes for binary protocols, text for the base64 ones."""
    if protocol.base64:
        return chr(ord("0") + channel) + base64.b64encode(data).decode()
    return bytes([channel]) + data


def decode(protocol: Protocol, message: bytes | str) -> tuple[int, bytes] | None:
    """(channel, payload) of a client message; None for an empty one."""
    if isinstance(message, str):
        if not message:
            return None
        if protocol.base64:
            return ord(message[0]) - ord("0"), base64.b64decode(message[1:])
        # A binary protocol over a text message (the Python client sends str stdin so): the channel is
        # the first character's code, the rest the payload.
        return ord(message[0]), message[1:].encode()
    if not message:
        return None
    return message[0], bytes(message[1:])


def exit_status(protocol: Protocol, code: int, argv: list[str]) -> bytes | None:
    """What the error channel says when the command ended (None: nothing, for v1-v3 on success).

    Upstream (kubelet ``remotecommand`` ``writeStatus``): success is ``{"metadata":{},"status":"Success"}``;
    a non-zero exit is a Failure with reason NonZeroExitCode and one ``ExitCode`` cause carrying the code,
    which kubectl turns into its own exit code and the Python client into ``returncode``."""
    if code == 0:
        return _json({"metadata": {}, "status": "Success"}) if protocol.status_json else None
    message = (
        f"command terminated with non-zero exit code: error executing command {_go_list(argv)}, "
        f"exit code {code}"
    )
    if not protocol.status_json:
        return message.encode()
    return _json(
        {
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
        }
    )


def error_status(protocol: Protocol, message: str) -> bytes:
    """An error that is not an exit code (the command could not start): InternalError, as upstream."""
    if not protocol.status_json:
        return message.encode()
    return _json(
        {"metadata": {}, "status": "Failure", "message": message, "reason": "InternalError", "code": 500}
    )


def resize(payload: bytes) -> tuple[int, int] | None:
    """(columns, rows) of a resize message, or None if it is not one."""
    try:
        size: Any = json.loads(payload)
        return int(size["Width"]), int(size["Height"])
    except (ValueError, KeyError, TypeError):
        return None


def port_prefix(port: int) -> bytes:
    """The first message of a port-forward channel: the port, uint16 little-endian."""
    return struct.pack("<H", port)


def _go_list(argv: list[str]) -> str:
    return "[" + " ".join(argv) + "]"


def _json(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()
