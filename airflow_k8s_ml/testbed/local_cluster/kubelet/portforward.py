"""``pods/portforward`` over websockets, as the apiserver serves it to the Python clients
(``kubernetes.stream.portforward(connect_get_namespaced_pod_portforward, ...)``).

Upstream: kubelet ``pkg/kubelet/cri/streaming/portforward/websocket.go``: ``?ports=8080,9090``; for the
i-th port channel ``2i`` carries data both ways and ``2i+1`` errors from the server; each channel's first
message is the port (uint16 little-endian, :func:`.channels.port_prefix`). One websocket is one connection
per port, dialled to the pod's own address (its loopback IP here), as the kubelet dials inside the pod's
network namespace. A refused dial is reported on the error channel with upstream's wording.

kubectl's ``port-forward`` (1.31+) tunnels SPDY through the websocket (subprotocol
``SPDY/3.1+portforward.k8s.io``, client-go ``tools/portforward/tunneling_dialer.go``): each local
connection opens a pair of SPDY streams (headers ``streamType`` error|data, ``port``, ``requestID``), which
the kubelet's ``portforward/httpstream.go`` pairs by request ID, dials, and copies; a dial error is written
on the error stream. :mod:`.spdy` reads and writes the frames. A direct SPDY upgrade (kubectl < 1.31,
or its fallback) is not served: 400 naming what is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from .. import errors, routing
from . import channels, spdy

if TYPE_CHECKING:
    from .worker import PodWorker

Handler = Callable[[web.Request, routing.Target], Awaitable[web.StreamResponse]]
WorkerOf = Callable[[str, str], "PodWorker | None"]
_READ = 65536
log = logging.getLogger(__name__)
#: kubectl's SPDY-in-websocket subprotocol (k8s.io/apimachinery ``util/portforward/constants.go``).
TUNNEL = "SPDY/3.1+portforward.k8s.io"
PROTOCOLS = (TUNNEL, *channels.PORTFORWARD_PROTOCOLS)


def parse_ports(query: Any) -> list[int]:
    """``ports`` (comma-separated or repeated), each 1-65535, as upstream's ``parsePortForwardOptions``."""
    ports: list[int] = []
    for value in query.getall("ports", []):
        for item in str(value).split(","):
            try:
                port = int(item.strip())
            except ValueError:
                raise errors.bad_request(f"unable to parse {item!r} as a port: invalid syntax") from None
            if not 0 < port < 65536:
                raise errors.bad_request(f"port {port} must be > 0 and < 65536")
            ports.append(port)
    if not ports:
        raise errors.bad_request("at least 1 port must be specified")
    return ports


def portforward_handler(pods_rt: Any, store: Any, worker_of: WorkerOf) -> Handler:
    async def handle(request: web.Request, target: routing.Target) -> web.StreamResponse:
        namespace, name = target.namespace or "", target.name or ""
        pod = store.get(pods_rt, namespace, name)
        offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        if request.headers.get("Upgrade", "").lower() != "websocket":
            raise errors.bad_request(
                "Upgrade request required: the local cluster serves pods/portforward over websockets "
                f"({', '.join(PROTOCOLS)}), not a direct SPDY upgrade"
            )
        ports = [] if TUNNEL in offered else parse_ports(request.query)
        worker = worker_of(namespace, name)
        if worker is None or not worker.pod_ip or not worker.running:
            phase = (pod.get("status") or {}).get("phase")
            raise errors.bad_request(
                f"unable to forward port because pod is not running. Current status={phase}"
            )
        ws = web.WebSocketResponse(protocols=PROTOCOLS)
        await ws.prepare(request)
        if ws.ws_protocol == TUNNEL:
            await _SpdyForward(ws, worker.pod_ip, pod["metadata"]["uid"], name).run()
            return ws
        protocol = channels.Protocol(ws.ws_protocol or channels.V1)
        await _Forward(ws, protocol, worker.pod_ip, ports, pod["metadata"]["uid"], name).run()
        return ws

    return handle


class _Forward:
    def __init__(
        self,
        ws: web.WebSocketResponse,
        protocol: channels.Protocol,
        ip: str,
        ports: list[int],
        uid: str,
        pod: str,
    ) -> None:
        self.ws, self.protocol, self.ip, self.ports, self.uid, self.pod = ws, protocol, ip, ports, uid, pod
        self.writers: dict[int, asyncio.StreamWriter] = {}
        self._lock = asyncio.Lock()

    async def send(self, channel: int, data: bytes) -> None:
        message = channels.encode(self.protocol, channel, data)
        async with self._lock:
            with contextlib.suppress(ConnectionResetError, RuntimeError):
                if isinstance(message, str):
                    await self.ws.send_str(message)
                else:
                    await self.ws.send_bytes(message)

    async def run(self) -> None:
        for i, port in enumerate(self.ports):
            await self.send(2 * i, channels.port_prefix(port))
            await self.send(2 * i + 1, channels.port_prefix(port))
        readers = [await self._connect(i, port) for i, port in enumerate(self.ports)]
        pumps = [asyncio.ensure_future(self._pump(i, r)) for i, r in enumerate(readers) if r is not None]
        inbound = asyncio.ensure_future(self._from_client())
        await asyncio.wait([inbound, *pumps], return_when=asyncio.FIRST_COMPLETED)
        if not inbound.done() and pumps:
            await asyncio.wait(pumps)  # every connection ended: nothing more to forward
        inbound.cancel()
        for task in pumps:
            task.cancel()
        for writer in self.writers.values():
            writer.close()
        await self.ws.close()

    async def _connect(self, index: int, port: int) -> asyncio.StreamReader | None:
        try:
            reader, writer = await asyncio.open_connection(self.ip, port)
        except OSError as exc:
            await self.send(2 * index + 1, _dial_error(port, self.pod, self.uid, self.ip, exc).encode())
            return None
        self.writers[index] = writer
        return reader

    async def _pump(self, index: int, reader: asyncio.StreamReader) -> None:
        while data := await reader.read(_READ):
            await self.send(2 * index, data)

    async def _from_client(self) -> None:
        async for message in self.ws:
            if message.type not in (WSMsgType.BINARY, WSMsgType.TEXT):
                break
            decoded = channels.decode(self.protocol, message.data)
            if decoded is None or decoded[0] % 2:
                continue
            writer = self.writers.get(decoded[0] // 2)
            if writer is not None and decoded[1]:
                writer.write(decoded[1])
                await writer.drain()


def _dial_error(port: int, pod: str, uid: str, ip: str, exc: OSError) -> str:
    """The kubelet's words for a failed dial (``portforward.go``: "error forwarding port ...")."""
    dial = f"dial tcp4 {ip}:{port}: connect: {_reason(exc)}"
    return f"error forwarding port {port} to pod {pod}, uid {uid}: {dial}"


def _reason(exc: OSError) -> str:
    """Go's wording of a failed dial (``connection refused``), from the errno when there is one."""
    return os.strerror(exc.errno).lower() if exc.errno else str(exc)


@dataclass
class _Pair:
    """One forwarded connection: its SPDY error and data streams and, once dialled, the pod's socket."""

    port: int = 0
    error: int = 0
    data: int = 0
    writer: asyncio.StreamWriter | None = None
    pending: bytearray = field(default_factory=bytearray)
    client_done: bool = False


class _SpdyForward:
    """kubectl's port-forward: SPDY streams tunnelled in the websocket's binary messages."""

    def __init__(self, ws: web.WebSocketResponse, ip: str, uid: str, pod: str) -> None:
        self.ws, self.ip, self.uid, self.pod = ws, ip, uid, pod
        self.codec = spdy.Codec()
        self.pairs: dict[str, _Pair] = {}
        self.by_stream: dict[int, _Pair] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()

    async def send(self, data: bytes) -> None:
        async with self._lock:
            with contextlib.suppress(ConnectionResetError, RuntimeError):
                await self.ws.send_bytes(data)

    async def run(self) -> None:
        try:
            async for message in self.ws:
                if message.type != WSMsgType.BINARY:
                    break
                for frame in self.codec.feed(message.data):
                    if not await self._on(frame):
                        return
        except spdy.SpdyError as exc:
            log.warning("port-forward to %s: %s", self.pod, exc)
        finally:
            for task in self.tasks:
                task.cancel()
            for pair in self.pairs.values():
                if pair.writer is not None:
                    pair.writer.close()
            await self.ws.close()

    async def _on(self, frame: spdy.Frame) -> bool:
        """Act on one frame; False ends the session (GOAWAY)."""
        if frame.kind == spdy.SYN_STREAM:
            await self._open(frame)
        elif frame.kind == 0:
            await self._client_data(frame)
        elif frame.kind == spdy.PING:
            await self.send(spdy.ping(frame.value))
        elif frame.kind == spdy.RST_STREAM:
            pair = self.by_stream.get(frame.stream)
            if pair is not None and pair.writer is not None:
                pair.writer.close()
        elif frame.kind == spdy.GOAWAY:
            return False
        return True

    async def _open(self, frame: spdy.Frame) -> None:
        """Accept the stream (SYN_REPLY) and pair it; a complete pair is dialled."""
        await self.send(self.codec.syn_reply(frame.stream))
        headers = frame.headers
        key = headers.get("requestid") or headers.get("port", "")
        pair = self.pairs.setdefault(key, _Pair())
        pair.port = int(headers.get("port") or 0)
        if headers.get("streamtype") == "error":
            pair.error = frame.stream
        else:
            pair.data = frame.stream
        self.by_stream[frame.stream] = pair
        if pair.error and pair.data:
            task = asyncio.ensure_future(self._forward(pair))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _client_data(self, frame: spdy.Frame) -> None:
        pair = self.by_stream.get(frame.stream)
        if pair is None or frame.stream != pair.data:
            return  # the error stream only carries the server's words
        if pair.writer is None:
            pair.pending += frame.data
        elif frame.data:
            pair.writer.write(frame.data)
            await pair.writer.drain()
        if frame.fin:
            pair.client_done = True
            if pair.writer is not None and pair.writer.can_write_eof():
                pair.writer.write_eof()

    async def _forward(self, pair: _Pair) -> None:
        try:
            reader, writer = await asyncio.open_connection(self.ip, pair.port)
        except OSError as exc:
            message = _dial_error(pair.port, self.pod, self.uid, self.ip, exc)
            await self.send(self.codec.data(pair.error, message.encode(), fin=True))
            await self.send(self.codec.data(pair.data, b"", fin=True))
            return
        pair.writer = writer
        if pair.pending:
            writer.write(bytes(pair.pending))
            pair.pending.clear()
        if pair.client_done and writer.can_write_eof():
            writer.write_eof()
        try:
            while data := await reader.read(_READ):
                await self.send(self.codec.data(pair.data, data))
        except OSError:
            pass
        finally:
            writer.close()
        await self.send(self.codec.data(pair.data, b"", fin=True))
        await self.send(self.codec.data(pair.error, b"", fin=True))
