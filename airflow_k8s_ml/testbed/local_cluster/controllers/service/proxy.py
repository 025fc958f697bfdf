"""The API server's proxy subresources: ``services/{[scheme:]name[:port]}/proxy/...`` and the pod one.

A client outside the cluster (``kubectl get --raw``, the Python client's
``connect_get_namespaced_service_proxy_with_path``, an Airflow task) reaches a Service exactly as through a
real API server: the request's method, path, query, headers (minus ``Authorization``, which the
authentication filter strips) and body go to a ready endpoint at ``podIP:targetPort``. Endpoints are chosen
round-robin (upstream picks at random). Errors are the apiserver's: 503 ``no endpoints available for
service "x"``, 503 ``error trying to reach service: dial tcp ...: connect: connection refused``, 400
``address not allowed`` for a pod without an IP.

Every request that reaches a pod is counted for it (:mod:`..metrics.requests`): errors are 5xx answers and
connection errors. The custom metrics API serves these counts as ``http_requests_per_second``,
``http_requests_total`` and ``http_request_errors_total``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ... import errors, routing
from ...resources import lookup
from ..metrics.apis import MetricsAPIs

if TYPE_CHECKING:
    import aiohttp

    from ...services import ClusterServices

Obj = dict[str, Any]

SERVICES = lookup("", "v1", "services")
ENDPOINTS = lookup("", "v1", "endpoints")
PODS = lookup("", "v1", "pods")
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "authorization",
    }
)


@dataclass(frozen=True)
class Location:
    scheme: str
    host: str
    port: int | None
    pod: tuple[str, str, str] | None = None  # (namespace, name, uid) of the pod reached, to count for it


def split_scheme_name_port(ident: str) -> tuple[str, str, str]:
    """``utilnet.SplitSchemeNamePort``: ``name``, ``name:port`` or ``scheme:name:port``."""
    parts = ident.split(":")
    if len(parts) == 1:
        scheme, name, port = "", parts[0], ""
    elif len(parts) == 2:
        scheme, name, port = "", parts[0], parts[1]
    elif len(parts) == 3:
        scheme, name, port = parts
    else:
        raise errors.bad_request(f'invalid service request "{ident}"')
    if not name or scheme not in ("", "http", "https"):
        raise errors.bad_request(f'invalid service request "{ident}"')
    return scheme, name, port


def raw_subpath(raw_path: str) -> str:
    """What follows ``.../{name}/proxy`` in the request path, still percent-encoded (forwarded as sent)."""
    parts = raw_path.split("?", 1)[0].split("/")
    index = next(i for i in range(7, len(parts)) if parts[i] == "proxy")
    return "/" + "/".join(parts[index + 1 :])


class ProxyHandlers:
    """Holds the round-robin cursors and one client session (created on first use, closed on stop)."""

    def __init__(self, cluster: ClusterServices) -> None:
        self.cluster = cluster
        self._cursors: dict[tuple[str, str, str], itertools.count[int]] = {}
        self._session: aiohttp.ClientSession | None = None

    def register(self) -> None:
        assert SERVICES is not None and PODS is not None
        self.cluster.register_subresource(SERVICES, "proxy", self.service_proxy)
        self.cluster.register_subresource(PODS, "proxy", self.pod_proxy)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- resolving ---------------------------------------------------------------------------------
    def service_location(self, namespace: str, ident: str) -> Location:
        """``ResourceLocation`` of the service REST storage, with round-robin instead of random choice."""
        assert SERVICES is not None and ENDPOINTS is not None
        scheme, name, port = split_scheme_name_port(ident)
        service = self.cluster.store.get(SERVICES, namespace, name)
        if port.isdigit():
            match = next(
                (p for p in (service.get("spec") or {}).get("ports") or [] if p.get("port") == int(port)),
                None,
            )
            if match is None:
                raise errors.service_unavailable(f'no service port {port} found for service "{name}"')
            port = match.get("name") or ""
        endpoints = self.cluster.store.get(ENDPOINTS, namespace, name)
        subsets = endpoints.get("subsets") or []
        if not subsets:
            raise errors.service_unavailable(f'no endpoints available for service "{name}"')
        candidates = [
            (a["ip"], p["port"], a.get("targetRef") or {})
            for s in subsets
            for p in s.get("ports") or []
            if (p.get("name") or "") == port
            for a in s.get("addresses") or []
            if self._valid(namespace, a)
        ]
        if not candidates:
            raise errors.service_unavailable(f'no endpoints available for service "{ident}"')
        cursor = self._cursors.setdefault((namespace, name, port), itertools.count())
        host, number, ref = candidates[next(cursor) % len(candidates)]
        pod = (
            (ref.get("namespace") or namespace, ref.get("name", ""), ref.get("uid", ""))
            if ref.get("kind") == "Pod"
            else None
        )
        return Location(scheme or "http", host, int(number), pod)

    def _valid(self, namespace: str, address: Obj) -> bool:
        """``isValidAddress``: the address still belongs to the pod it names."""
        assert PODS is not None
        ref = address.get("targetRef") or {}
        if ref.get("kind") != "Pod":
            return True
        pod = self.cluster.store.find(PODS, ref.get("namespace") or namespace, ref.get("name", ""))
        return pod is not None and (pod.get("status") or {}).get("podIP") == address.get("ip")

    def pod_location(self, namespace: str, ident: str) -> Location:
        assert PODS is not None
        scheme, name, port = split_scheme_name_port(ident)
        pod = self.cluster.store.get(PODS, namespace, name)
        if not port:
            declared = [
                p for c in (pod.get("spec") or {}).get("containers") or [] for p in c.get("ports") or []
            ]
            port = str(declared[0]["containerPort"]) if declared else ""
        pod_ip = (pod.get("status") or {}).get("podIP")
        if not pod_ip:
            raise errors.bad_request("address not allowed")
        if port and not port.isdigit():
            raise errors.service_unavailable(
                f"error trying to reach service: dial tcp: lookup {pod_ip}:{port}: invalid port"
            )
        meta = pod["metadata"]
        return Location(
            scheme or "http", pod_ip, int(port) if port else None, (namespace, name, meta.get("uid", ""))
        )

    # -- handlers ----------------------------------------------------------------------------------
    async def service_proxy(self, request: web.Request, target: routing.Target) -> web.StreamResponse:
        return await self._proxy(request, target, self.service_location)

    async def pod_proxy(self, request: web.Request, target: routing.Target) -> web.StreamResponse:
        return await self._proxy(request, target, self.pod_location)

    async def _proxy(
        self, request: web.Request, target: routing.Target, resolve: Callable[[str, str], Location]
    ) -> web.StreamResponse:
        if not target.subpath and not request.path.endswith("/"):
            query = f"?{request.query_string}" if request.query_string else ""
            raise web.HTTPMovedPermanently(location=f"{request.path}/{query}")
        location = resolve(target.namespace or "", target.name or "")
        return await self._forward(request, location, raw_subpath(request.raw_path))

    async def _forward(self, request: web.Request, location: Location, path: str) -> web.StreamResponse:
        import aiohttp
        from yarl import URL

        url = URL.build(
            scheme=location.scheme,
            host=location.host,
            port=location.port,
            path=path,
            query_string=request.raw_path.partition("?")[2],
            encoded=True,
        )
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        forwarded = request.remote or ""
        headers["X-Forwarded-For"] = ", ".join(
            x for x in (request.headers.get("X-Forwarded-For"), forwarded) if x
        )
        body = await request.read() if request.can_read_body else None
        session = self._client()
        try:
            upstream = await session.request(
                request.method,
                url,
                headers=headers,
                data=body,
                allow_redirects=False,
                ssl=location.scheme != "https",  # like the apiserver: no verification of pod certificates
            )
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            self._count(location, error=True)
            raise errors.service_unavailable(
                f"error trying to reach service: dial tcp {location.host}:{location.port or 80}: connect: "
                f"{_reason(exc)}"
            ) from exc
        self._count(location, error=upstream.status >= 500)
        async with upstream:
            return await _relay(request, upstream)

    def _count(self, location: Location, error: bool) -> None:
        counts = self.cluster.running_controller(MetricsAPIs.name)
        if location.pod is not None and isinstance(counts, MetricsAPIs):
            namespace, name, uid = location.pod
            counts.requests.record((namespace, name), uid, self.cluster.settings.clock.now(), error)

    def _client(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None, sock_connect=5)
            )
        return self._session


def _reason(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "i/o timeout"
    text = str(exc).lower()
    return "connection refused" if "refused" in text or "connect" in text else str(exc)


async def _relay(request: web.Request, upstream: aiohttp.ClientResponse) -> web.StreamResponse:
    """Stream the pod's answer back with its status and headers (streamed bodies stay streamed)."""
    response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
    for key, value in upstream.headers.items():
        if key.lower() not in _HOP_BY_HOP:
            response.headers.add(key, value)
    length = upstream.headers.get("Content-Length")
    bodyless = request.method == "HEAD" or upstream.status in (204, 304)
    if length is not None and length.isdigit():
        response.content_length = int(length)
    elif not bodyless:
        response.enable_chunked_encoding()
    await response.prepare(request)
    async for chunk in upstream.content.iter_any():
        await response.write(chunk)
    await response.write_eof()
    return response
