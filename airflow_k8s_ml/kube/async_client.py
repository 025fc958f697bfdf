"""One long-lived ``kubernetes_asyncio`` client per connection id per event loop, and a thin async facade.

Why: the stock async hook opens a new ``ApiClient`` (a new TCP + TLS handshake) for every poll of every
trigger. Here every trigger of a triggerer process that names the same connection shares one client and its
keep-alive pool: watches, log streams and the rare GET/DELETE all reuse it. The configuration comes from
the Airflow connection through the cncf ``AsyncKubernetesHook`` (``kube_config_path``, ``kube_config``,
``in_cluster``, ``cluster_context``), so triggers carry only the connection id, never kubeconfig contents.
Short-lived exec-plugin tokens (EKS, GKE) are refreshed by reloading the connection on a 401.

The registry is keyed by event loop (weakly) then connection id, because an aiohttp session belongs to the
loop that created it; a triggerer has one loop, tests have one per test.

Nothing here may block the triggerer's event loop (its watchdog warns above 0.1 s, and a stall delays every
deferred task of that triggerer): the heavy imports (``aiohttp`` builds an SSL context with the system CAs
at import, ``kubernetes_asyncio``, the cncf hooks module importing the sync ``kubernetes``) run once per
process in a worker thread (:func:`load_clients`); the connection and kubeconfig are loaded in a worker
thread too (the hook's ``_load_config`` on a private loop there; the triggerer bridges its connection
look-up back to the main loop); large LISTs come in pages of :data:`PAGE_SIZE` as client-go's reflector
reads them, so no single JSON decode holds the loop long.
"""

from __future__ import annotations

import asyncio
import json
import sys
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from airflow_k8s_ml.kube.errors import ApiError, api_error
from airflow_k8s_ml.kube.events import format_warnings, select_warnings
from airflow_k8s_ml.kube.resources import Resource, call_api_arguments, resource_for
from airflow_k8s_ml.kube.retry import RetryPolicy

__all__ = ["AsyncKube", "ClientSettings", "close_all", "get_kube", "load_clients"]

T = TypeVar("T")
Query = list[tuple[str, str]]
Items = list[dict[str, Any]]  # aliases: inside the classes, ``list`` names the method
Lines = list[str]

#: Items per LIST page (client-go's reflector default); an API server that ignores ``limit`` answers whole.
PAGE_SIZE = 500
#: Modules too heavy to import on the event loop (seconds on a cold start, SSL context creation included).
HEAVY_MODULES = (
    "aiohttp",
    "kubernetes_asyncio.client",
    "kubernetes_asyncio.config",
    "airflow.providers.cncf.kubernetes.hooks.kubernetes",
)


@dataclass(frozen=True)
class ClientSettings:
    """``pool_maxsize``: concurrent connections (watches and log follows each hold one while open)."""

    pool_maxsize: int = 1000
    request_timeout: float = 60.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)


class AsyncKube:
    """Async REST over one shared ``ApiClient``: JSON requests with retries, and raw streams."""

    def __init__(self, conn_id: str, hook: Any, api_client: Any, settings: ClientSettings) -> None:
        self.conn_id = conn_id
        self.hook = hook
        self.api_client = api_client
        self.settings = settings
        self._refresh_lock = asyncio.Lock()
        self.requests = 0  # for tests and benchmarks: HTTP requests sent through this client

    @property
    def endpoint(self) -> str:
        """The API server's URL (for messages; never credentials)."""
        return str(getattr(getattr(self.api_client, "configuration", None), "host", "") or "?")

    async def _refresh_credentials(self) -> None:
        """Reload the connection's config into the shared Configuration (exec plugins mint a new token)."""
        async with self._refresh_lock:
            await _off_loop_config(self.hook)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: Any = None,
    ) -> Any:
        """One exchange; returns the aiohttp response (2xx, unread) or raises :class:`ApiError`."""
        import aiohttp

        self.requests += 1
        try:
            response = await self.api_client.call_api(
                **call_api_arguments(
                    path,
                    method,
                    query=query,
                    body=body,
                    content_type=content_type,
                    timeout=timeout or self.settings.request_timeout,
                )
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ApiError(0, type(exc).__name__, str(exc) or type(exc).__name__) from exc
        if 200 <= response.status < 300:
            return response
        try:
            data = await response.read()
        except (aiohttp.ClientError, TimeoutError, OSError):
            data = b""
        finally:
            response.release()
        raise api_error(response.status, data, response.headers)

    async def _retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        attempt, refreshed = 0, False
        while True:
            try:
                return await call()
            except ApiError as exc:
                if exc.status == 401 and not refreshed:
                    refreshed = True
                    await self._refresh_credentials()
                    continue
                delay = self.settings.retry.delay(exc, attempt)
                if delay is None:
                    raise
            await asyncio.sleep(delay)
            attempt += 1

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        """JSON in, JSON out, retried per the client's :class:`RetryPolicy`."""

        async def call() -> Any:
            response = await self._send(method, path, query=query, body=body, content_type=content_type)
            try:
                data = await response.read()
            finally:
                response.release()
            return json.loads(data) if data else None

        return await self._retrying(call)

    async def stream(self, path: str, query: Query, *, read_timeout: float | None) -> Any:
        """Open a streaming GET (watch, log follow); the caller reads ``response.content`` and releases it.

        ``read_timeout`` is the inactivity timeout: no byte for that long fails the read.
        """
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=read_timeout)

        async def call() -> Any:
            return await self._send("GET", path, query=query, timeout=timeout)

        try:
            return await call()
        except ApiError as exc:
            if exc.status != 401:
                raise
            await self._refresh_credentials()
            return await call()

    # -- helpers ----------------------------------------------------------------------------------------
    async def list(
        self, res: Resource, namespace: str | None, *, label_selector: str = "", fields: str = ""
    ) -> tuple[Items, str]:
        """(items with apiVersion/kind filled in, the list's resourceVersion), read in pages of
        :data:`PAGE_SIZE` (one consistent snapshot; an expired continue token re-lists whole)."""
        query: Query = []
        if label_selector:
            query.append(("labelSelector", label_selector))
        if fields:
            query.append(("fieldSelector", fields))
        path = res.collection_path(namespace)
        items: Items = []
        token, paged = "", True
        while True:
            page = [*query, ("limit", str(PAGE_SIZE))] if paged else list(query)
            if token:
                page.append(("continue", token))
            try:
                body = await self.request("GET", path, query=page) or {}
            except ApiError as exc:
                if not (token and exc.gone):
                    raise
                items, token, paged = [], "", False  # the snapshot expired: one whole list instead
                continue
            items.extend(body.get("items") or [])
            meta = body.get("metadata") or {}
            token = str(meta.get("continue") or "") if paged else ""
            if not token:
                break
        for item in items:
            item.setdefault("apiVersion", res.api_version)
            item.setdefault("kind", res.kind)
        return items, str(meta.get("resourceVersion") or "")

    async def get(self, res: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = await self.request("GET", res.object_path(namespace, name))
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        return result

    async def delete(
        self, res: Resource, namespace: str, name: str, *, propagation: str = "Foreground", uid: str = ""
    ) -> bool:
        """True if this call deleted (or began deleting) the object; False if gone or another uid."""
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            await self.request("DELETE", res.object_path(namespace, name), body=body)
        except ApiError as exc:
            if exc.not_found or (uid and exc.conflict):
                return False
            raise
        return True

    async def log_tail(self, namespace: str, pod: str, container: str | None, lines: int) -> str:
        """Last ``lines`` of a container's log; "" when it has none (not started, pod gone)."""
        query: Query = [("tailLines", str(lines))]
        if container:
            query.append(("container", container))
        path = resource_for("v1", "Pod").object_path(namespace, pod, "log")

        async def call() -> str:
            response = await self._send("GET", path, query=query)
            try:
                data: bytes = await response.read()
            finally:
                response.release()
            return data.decode("utf-8", "replace")

        try:
            return await self._retrying(call)
        except ApiError as exc:
            if exc.status in (400, 404):
                return ""
            raise

    async def warning_events(self, namespace: str, uids: set[str], limit: int = 10) -> Lines:
        """Warning events of the given objects (workload and pods), formatted, oldest first."""
        events, _ = await self.list(resource_for("v1", "Event"), namespace, fields="type=Warning")
        return format_warnings(select_warnings(events, uids), limit=limit)

    async def close(self) -> None:
        await self.api_client.close()


# -- the per-process registry ------------------------------------------------------------------------
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, AsyncKube]] = (
    weakref.WeakKeyDictionary()
)
_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()
_import_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
    weakref.WeakKeyDictionary()
)


_imported = False


def _import_heavy() -> None:
    """Import the clients with the cyclic GC paused, then freeze what exists (``gc.freeze``, as Airflow's
    dag-processor and LocalExecutor do).

    Why: importing ~800 model classes crosses the GC's full-collection threshold, and a full collection of
    a triggerer's heap (all of Airflow) holds the GIL for 0.3-0.4 s - from whichever thread allocates, so
    a worker thread does not help. Frozen, the import-time objects (modules, classes: alive for the life of
    the process anyway) are never scanned again, so later full collections stay short as well. The price:
    cyclic garbage existing at this moment is never collected (a one-time, start-up-sized amount).
    """
    import gc
    import importlib

    enabled = gc.isenabled()
    gc.disable()
    try:
        for name in HEAVY_MODULES:
            importlib.import_module(name)
        gc.freeze()
    finally:
        if enabled:
            gc.enable()


async def load_clients() -> None:
    """Import :data:`HEAVY_MODULES` in a worker thread, once per process; concurrent callers wait without
    blocking the loop. (A module another thread is still initialising is not used before this returns:
    importing it here would wait on its import lock, on the loop.)"""
    global _imported
    if _imported:
        return
    lock = _import_locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())
    async with lock:
        if not _imported and not all(name in sys.modules for name in HEAVY_MODULES):
            await asyncio.to_thread(_import_heavy)
        _imported = True


async def _off_loop_config(hook: Any) -> None:
    """``hook._load_config()`` on a private loop in a worker thread: reading the connection, the kubeconfig
    (YAML) and running an exec plugin (a subprocess, seconds for ``aws eks get-token``) stay off our loop."""
    await asyncio.to_thread(asyncio.run, hook._load_config())


def _new_hook(conn_id: str) -> Any:
    from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook

    return AsyncKubernetesHook(conn_id=conn_id)


async def _connect(conn_id: str, settings: ClientSettings) -> AsyncKube:
    await load_clients()
    from kubernetes_asyncio import client as async_client

    hook = await asyncio.to_thread(_new_hook, conn_id)
    await _off_loop_config(hook)
    configuration = hook.client_configuration
    assert configuration is not None  # _load_config creates it
    configuration.connection_pool_maxsize = settings.pool_maxsize
    return AsyncKube(conn_id, hook, async_client.ApiClient(configuration=configuration), settings)


async def get_kube(conn_id: str = "kubernetes_default", settings: ClientSettings | None = None) -> AsyncKube:
    """The shared client of ``conn_id`` on the running loop, created on first use."""
    loop = asyncio.get_running_loop()
    clients = _clients.setdefault(loop, {})
    kube = clients.get(conn_id)
    if kube is not None:
        return kube
    lock = _locks.setdefault(loop, asyncio.Lock())
    async with lock:
        kube = clients.get(conn_id)
        if kube is None:
            kube = await _connect(conn_id, settings or ClientSettings())
            clients[conn_id] = kube
    return kube


def registered(conn_id: str) -> AsyncKube | None:
    """The client already shared for ``conn_id`` on the running loop, if any (no creation)."""
    return _clients.get(asyncio.get_running_loop(), {}).get(conn_id)


async def close_all() -> None:
    """Close the running loop's clients (tests, shutdown hooks); the next ``get_kube`` reconnects."""
    clients = _clients.pop(asyncio.get_running_loop(), {})
    for kube in clients.values():
        await kube.close()
