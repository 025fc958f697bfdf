"""``pods/portforward`` over websockets, as the apiserver serves it to the Python clients
(``kubernetes.stream.portforward(connect_get_namespaced_pod_portforward, ...)``).

Upstream: kubelet ``pkg/kubelet/cri/streaming/portforward/websocket.go``: ``?ports=8080,9090``; for the
i-th port channel ``2i`` carries data both ways and ``2i+1`` errors from the server; each channel's first
message is the port (uint16 little-endian, :func:`.channels.port_prefix`). One websocket is one connection
per port, dialled to the pod's own address (its loopback IP here), as the kubelet dials inside the pod's
network namespace. A refused dial is reported on the error channel with upstream's wording.

kubectl's ``port-forward`` is not served: it speaks SPDY, directly or tunnelled through a websocket
(``SPDY/3.1+portforward.k8s.io``, kubectl 1.31+); such requests get 400 naming what is served.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from .. import errors, routing
from . import channels

if TYPE_CHECKING:
    from .worker import PodWorker

Handler = Callable[[web.Request, routing.Target], Awaitable[web.StreamResponse]]
WorkerOf = Callable[[str, str], "PodWorker | None"]
_READ = 65536


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
        offered = request.headers.get("Sec-WebSocket-Protocol", "")
        if request.headers.get("Upgrade", "").lower() != "websocket" or "SPDY" in offered:
            raise errors.bad_request(
                "Upgrade request required: the local cluster serves pods/portforward over websockets with "
                f"the channel protocols ({', '.join(channels.PORTFORWARD_PROTOCOLS)}), not SPDY"
            )
        ports = parse_ports(request.query)
        worker = worker_of(namespace, name)
        if worker is None or not worker.pod_ip or not worker.running:
            phase = (pod.get("status") or {}).get("phase")
            raise errors.bad_request(
                f"unable to forward port because pod is not running. Current status={phase}"
            )
        ws = web.WebSocketResponse(protocols=channels.PORTFORWARD_PROTOCOLS)
        await ws.prepare(request)
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
            message = (
                f"error forwarding port {port} to pod {self.pod}, uid {self.uid}: "
                f"dial tcp4 {self.ip}:{port}: connect: {_reason(exc)}"
            )
            await self.send(2 * index + 1, message.encode())
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


def _reason(exc: OSError) -> str:
    """Go's wording of a failed dial (``connection refused``), from the errno when there is one."""
    return os.strerror(exc.errno).lower() if exc.errno else str(exc)
