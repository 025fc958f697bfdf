"""SPDY/3.1 framing, as much as ``kubectl port-forward`` uses (a pure codec: bytes in, frames out).

kubectl (1.31+) tunnels SPDY through a websocket for port-forward (subprotocol
``SPDY/3.1+portforward.k8s.io``; client-go ``tools/portforward/tunneling_connection.go``: the SPDY byte
stream rides in binary messages, no prefix). The frames follow moby/spdystream ``spdy/`` (Go's SPDY/3
framer): control frames ``0x8003 type | flags length24``; data frames ``stream31 | flags length24``;
header blocks are a count and length-prefixed names and values, zlib-compressed with SPDY's dictionary in
one stream per direction for the whole connection. spdystream has no flow control (no WINDOW_UPDATE
needed). The dictionary is spdystream's ``spdy/dictionary.go``.
"""

from __future__ import annotations

import base64
import struct
import zlib
from dataclasses import dataclass, field

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
MAX_DATA = 0xFFFFFF
RST_CANCEL = 5

_DICTIONARY = base64.b64decode(
    "AAAAB29wdGlvbnMAAAAEaGVhZAAAAARwb3N0AAAAA3B1dAAAAAZkZWxldGUAAAAFdHJhY2UAAAAGYWNjZXB0AAAADmFjY2VwdC1j"
    "aGFyc2V0AAAAD2FjY2VwdC1lbmNvZGluZwAAAA9hY2NlcHQtbGFuZ3VhZ2UAAAANYWNjZXB0LXJhbmdlcwAAAANhZ2UAAAAFYWxs"
    "b3cAAAANYXV0aG9yaXphdGlvbgAAAA1jYWNoZS1jb250cm9sAAAACmNvbm5lY3Rpb24AAAAMY29udGVudC1iYXNlAAAAEGNvbnRl"
    "bnQtZW5jb2RpbmcAAAAQY29udGVudC1sYW5ndWFnZQAAAA5jb250ZW50LWxlbmd0aAAAABBjb250ZW50LWxvY2F0aW9uAAAAC2Nv"
    "bnRlbnQtbWQ1AAAADWNvbnRlbnQtcmFuZ2UAAAAMY29udGVudC10eXBlAAAABGRhdGUAAAAEZXRhZwAAAAZleHBlY3QAAAAHZXhw"
    "aXJlcwAAAARmcm9tAAAABGhvc3QAAAAIaWYtbWF0Y2gAAAARaWYtbW9kaWZpZWQtc2luY2UAAAANaWYtbm9uZS1tYXRjaAAAAAhp"
    "Zi1yYW5nZQAAABNpZi11bm1vZGlmaWVkLXNpbmNlAAAADWxhc3QtbW9kaWZpZWQAAAAIbG9jYXRpb24AAAAMbWF4LWZvcndhcmRz"
    "AAAABnByYWdtYQAAABJwcm94eS1hdXRoZW50aWNhdGUAAAATcHJveHktYXV0aG9yaXphdGlvbgAAAAVyYW5nZQAAAAdyZWZlcmVy"
    "AAAAC3JldHJ5LWFmdGVyAAAABnNlcnZlcgAAAAJ0ZQAAAAd0cmFpbGVyAAAAEXRyYW5zZmVyLWVuY29kaW5nAAAAB3VwZ3JhZGUA"
    "AAAKdXNlci1hZ2VudAAAAAR2YXJ5AAAAA3ZpYQAAAAd3YXJuaW5nAAAAEHd3dy1hdXRoZW50aWNhdGUAAAAGbWV0aG9kAAAAA2dl"
    "dAAAAAZzdGF0dXMAAAAGMjAwIE9LAAAAB3ZlcnNpb24AAAAISFRUUC8xLjEAAAADdXJsAAAABnB1YmxpYwAAAApzZXQtY29va2ll"
    "AAAACmtlZXAtYWxpdmUAAAAGb3JpZ2luMTAwMTAxMjAxMjAyMjA1MjA2MzAwMzAyMzAzMzA0MzA1MzA2MzA3NDAyNDA1NDA2NDA3"
    "NDA4NDA5NDEwNDExNDEyNDEzNDE0NDE1NDE2NDE3NTAyNTA0NTA1MjAzIE5vbi1BdXRob3JpdGF0aXZlIEluZm9ybWF0aW9uMjA0"
    "IE5vIENvbnRlbnQzMDEgTW92ZWQgUGVybWFuZW50bHk0MDAgQmFkIFJlcXVlc3Q0MDEgVW5hdXRob3JpemVkNDAzIEZvcmJpZGRl"
    "bjQwNCBOb3QgRm91bmQ1MDAgSW50ZXJuYWwgU2VydmVyIEVycm9yNTAxIE5vdCBJbXBsZW1lbnRlZDUwMyBTZXJ2aWNlIFVuYXZh"
    "aWxhYmxlSmFuIEZlYiBNYXIgQXByIE1heSBKdW4gSnVsIEF1ZyBTZXB0IE9jdCBOb3YgRGVjIDAwOjAwOjAwIE1vbiwgVHVlLCBX"
    "ZWQsIFRodSwgRnJpLCBTYXQsIFN1biwgR01UY2h1bmtlZCx0ZXh0L2h0bWwsaW1hZ2UvcG5nLGltYWdlL2pwZyxpbWFnZS9naWYs"
    "YXBwbGljYXRpb24veG1sLGFwcGxpY2F0aW9uL3hodG1sK3htbCx0ZXh0L3BsYWluLHRleHQvamF2YXNjcmlwdCxwdWJsaWNwcml2"
    "YXRlbWF4LWFnZT1nemlwLGRlZmxhdGUsc2RjaGNoYXJzZXQ9dXRmLThjaGFyc2V0PWlzby04ODU5LTEsdXRmLSwqLGVucT0wLg=="
)


class SpdyError(ValueError):
    """A frame this codec cannot read."""


@dataclass
class Frame:
    """One frame read: ``kind`` is the control type, or 0 for data."""

    kind: int
    flags: int
    stream: int = 0
    data: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    value: int = 0  # PING id, RST_STREAM status, GOAWAY last stream

    @property
    def fin(self) -> bool:
        return bool(self.flags & FLAG_FIN)


class Codec:
    """One connection's reader and writer (each direction has its own header compression stream)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._inflate = zlib.decompressobj(zdict=_DICTIONARY)
        self._deflate = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS, zdict=_DICTIONARY)

    def feed(self, data: bytes) -> list[Frame]:
        """The whole frames ``data`` completes (a partial frame waits for the next bytes)."""
        self._buffer += data
        frames = []
        while len(self._buffer) >= 8:
            length = int.from_bytes(self._buffer[5:8], "big")
            if len(self._buffer) < 8 + length:
                break
            head, body = bytes(self._buffer[:8]), bytes(self._buffer[8 : 8 + length])
            del self._buffer[: 8 + length]
            frames.append(self._frame(head, body))
        return frames

    def _frame(self, head: bytes, body: bytes) -> Frame:
        flags = head[4]
        if not head[0] & 0x80:
            return Frame(0, flags, int.from_bytes(head[:4], "big") & 0x7FFFFFFF, body)
        version, kind = struct.unpack(">HH", head[:4])
        if version & 0x7FFF != VERSION:
            raise SpdyError(f"unsupported SPDY version {version & 0x7FFF}")
        if kind == SYN_STREAM:
            return Frame(kind, flags, _id(body), headers=self._headers(body[10:]))
        if kind in (SYN_REPLY, HEADERS):
            return Frame(kind, flags, _id(body), headers=self._headers(body[4:]))
        if kind in (RST_STREAM, WINDOW_UPDATE):
            return Frame(kind, flags, _id(body), value=int.from_bytes(body[4:8], "big"))
        if kind == PING:
            return Frame(kind, flags, value=int.from_bytes(body[:4], "big"))
        if kind == GOAWAY:
            return Frame(kind, flags, value=_id(body))
        return Frame(kind, flags, data=body)  # SETTINGS and others: read, ignored

    def _headers(self, block: bytes) -> dict[str, str]:
        raw = self._inflate.decompress(block)
        count, pos, headers = int.from_bytes(raw[:4], "big"), 4, {}
        for _ in range(count):
            size = int.from_bytes(raw[pos : pos + 4], "big")
            name = raw[pos + 4 : pos + 4 + size].decode().lower()
            pos += 4 + size
            size = int.from_bytes(raw[pos : pos + 4], "big")
            headers[name] = raw[pos + 4 : pos + 4 + size].decode()
            pos += 4 + size
        return headers

    # -- writing -----------------------------------------------------------------------------------
    def syn_reply(self, stream: int, headers: dict[str, str] | None = None, fin: bool = False) -> bytes:
        block = self._header_block(headers or {})
        return _control(SYN_REPLY, FLAG_FIN if fin else 0, stream.to_bytes(4, "big") + block)

    def data(self, stream: int, payload: bytes, fin: bool = False) -> bytes:
        """Data frames for ``payload`` (split at the frame limit); an empty payload with ``fin`` closes."""
        chunks = [payload[i : i + MAX_DATA] for i in range(0, len(payload), MAX_DATA)] or [b""]
        out = b""
        for i, chunk in enumerate(chunks):
            flags = FLAG_FIN if fin and i == len(chunks) - 1 else 0
            out += stream.to_bytes(4, "big") + bytes([flags]) + len(chunk).to_bytes(3, "big") + chunk
        return out

    def _header_block(self, headers: dict[str, str]) -> bytes:
        raw = len(headers).to_bytes(4, "big")
        for name, value in headers.items():
            for part in (name.lower().encode(), value.encode()):
                raw += len(part).to_bytes(4, "big") + part
        return self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)


def ping(ping_id: int) -> bytes:
    return _control(PING, 0, ping_id.to_bytes(4, "big"))


def rst_stream(stream: int, status: int = RST_CANCEL) -> bytes:
    return _control(RST_STREAM, 0, stream.to_bytes(4, "big") + status.to_bytes(4, "big"))


def goaway(last_stream: int) -> bytes:
    return _control(GOAWAY, 0, last_stream.to_bytes(4, "big") + (0).to_bytes(4, "big"))


def _control(kind: int, flags: int, body: bytes) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, kind, flags << 24 | len(body)) + body


def _id(body: bytes) -> int:
    return int.from_bytes(body[:4], "big") & 0x7FFFFFFF
