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
look-up back to the main loop); large LISTs come in pages of :data:`~.operations.PAGE_SIZE` as
client-go's reflector reads them, so no single JSON decode holds the loop long.
"""

from __future__ import annotations

import asyncio
import sys
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from airflow_k8s_ml.errors import ApiError
from airflow_k8s_ml.kube import operations as ops
from airflow_k8s_ml.kube.conversation import Conversation
from airflow_k8s_ml.kube.requests import JSON, Reply, Request, create_request, patch_request
from airflow_k8s_ml.kube.resources import resource_for
from airflow_k8s_ml.kube.retry import RetryPolicy
from airflow_k8s_ml.status.kueue import KUEUE_GROUP

__all__ = ["AsyncKube", "ClientSettings", "close_all", "get_kube", "load_clients"]

T = TypeVar("T")
Query = list[tuple[str, str]]
Items = list[dict[str, Any]]  # aliases: inside the classes, ``list`` names the method
Lines = list[str]
Events = list[Mapping[str, Any]]

#: Modules too heavy to import on the event loop (seconds on a cold start, SSL context creation included).
HEAVY_MODULES = (
    "aiohttp",
    "kubernetes_asyncio.client",
    "kubernetes_asyncio.config",
    "airflow.providers.cncf.kubernetes.hooks.kubernetes",
)
#: Seconds to establish a stream's connection (its reads are bounded by ``Request.read_timeout``).
CONNECT_TIMEOUT = 30.0


@dataclass(frozen=True)
class ClientSettings:
    """``pool_maxsize``: concurrent connections (watches and log follows each hold one while open)."""

    pool_maxsize: int = 1000
    request_timeout: float = 60.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)


class AsyncKube:
    """Async REST over one shared ``ApiClient``: the same API as :class:`~.sync_client.KubeClient`.

    A thin shell: what to send and what an answer means are in :mod:`.operations` and :mod:`.requests`,
    retries in :mod:`.conversation`; this class only sends and sleeps, without blocking the loop.
    ``namespace`` is the connection's ``namespace`` extra, else ``default``.
    """

    def __init__(
        self, conn_id: str, hook: Any, api_client: Any, settings: ClientSettings, namespace: str = "default"
    ) -> None:
        self.conn_id = conn_id
        self.hook = hook
        self.api_client = api_client
        self.settings = settings
        self.namespace = namespace
        self._refresh_lock = asyncio.Lock()
        self.requests = 0  # for tests and benchmarks: HTTP requests sent through this client
        self._kueue_version: str | None = None

    @property
    def endpoint(self) -> str:
        """The API server's URL (for messages; never credentials)."""
        return str(getattr(getattr(self.api_client, "configuration", None), "host", "") or "?")

    async def close(self) -> None:
        await self.api_client.close()

    async def _refresh_credentials(self) -> None:
        """Reload the connection's config into the shared Configuration (exec plugins mint a new token)."""
        async with self._refresh_lock:
            await _off_loop_config(self.hook)

    async def send(self, request: Request) -> Reply:
        """One exchange, any status; raises :class:`ApiError` (status 0) only when nothing answered."""
        import aiohttp

        self.requests += 1
        stream = request.decode == "stream"
        if stream:
            timeout: Any = aiohttp.ClientTimeout(
                total=None, sock_connect=CONNECT_TIMEOUT, sock_read=request.read_timeout
            )
        else:
            timeout = request.timeout or self.settings.request_timeout
        try:
            response = await self.api_client.call_api(**request.call_api_arguments(timeout))
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ApiError(0, type(exc).__name__, str(exc) or type(exc).__name__) from exc
        ok = 200 <= response.status < 300
        if stream and ok:
            return Reply(response.status, dict(response.headers), stream=response)
        try:
            data = await response.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            if ok:  # the body was cut: no (complete) answer
                raise ApiError(0, type(exc).__name__, str(exc) or type(exc).__name__) from exc
            data = b""  # the status says enough
        finally:
            response.release()
        return Reply(response.status, dict(response.headers), data)

    async def run(self, plan: ops.Plan[T]) -> T:
        """Run a plan of :mod:`.operations`: send each request, retry and sleep as the conversation says."""
        talk: Conversation[T] = Conversation(plan, self.settings.retry)
        step = talk.start()
        while step is not None:
            if step.refresh:
                await self._refresh_credentials()
            if step.wait:
                await asyncio.sleep(step.wait)
            try:
                reply = await self.send(step.request)
            except ApiError as exc:
                step = talk.failed(exc)
                continue
            step = talk.answered(reply)
        return talk.result

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.namespace

    # -- the API (the same in KubeClient) ---------------------------------------------------------------
    async def stream(self, request: Request) -> Any:
        """Open a streaming GET (watch, log follow); the caller reads ``response.content`` and closes it.
        Not retried (a first 401 aside): the reader owns reconnection."""
        return await self.run(ops.one(request))

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str = JSON,
    ) -> Any:
        """JSON in, JSON out, with retries; the generic escape hatch under every helper."""
        return await self.run(ops.one(Request(method, path, tuple(query or ()), body, content_type)))

    async def get_raw(self, path: str, query: Query | None = None) -> bytes:
        """GET a non-JSON endpoint (``/metrics``, ``/healthz``, a log with options), with retries."""
        result: bytes = await self.run(ops.one(Request("GET", path, tuple(query or ()), decode="bytes")))
        return result

    async def create(self, obj: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """POST the object (its ``metadata.namespace``, else the client's namespace)."""
        return await self.run(ops.one(create_request(obj, self.namespace, dry_run=dry_run)))

    async def get(
        self, api_version: str | None, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        return await self.run(ops.get(resource_for(api_version, kind), self._ns(namespace), name))

    async def list(
        self,
        api_version: str | None,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        *,
        field_selector: str | None = None,
    ) -> Items:
        """Items with ``apiVersion``/``kind`` filled in (list items lack them), so ``classify`` reads them."""
        res, selectors = resource_for(api_version, kind), {"field_selector": field_selector}
        return await self.run(
            ops.list_items(res, self._ns(namespace), label_selector=label_selector, **selectors)
        )

    async def patch(
        self,
        api_version: str | None,
        kind: str,
        name: str,
        namespace: str | None,
        patch: Any,
        *,
        patch_type: str = "merge",
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """PATCH with ``patch_type`` merge | strategic | json | apply (server-side apply, forced)."""
        res, namespace = resource_for(api_version, kind), self._ns(namespace)
        request = patch_request(
            res, namespace, name, patch, patch_type=patch_type, subresource=subresource, dry_run=dry_run
        )
        return await self.run(ops.one(request))

    async def apply(self, obj: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
        """Create, or server-side apply: ``created`` | ``configured`` | ``unchanged``."""
        return await self.run(ops.apply(obj, self.namespace))

    async def delete(
        self,
        api_version: str | None,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str = "Foreground",
        uid: str | None = None,
    ) -> bool:
        """Delete with ``propagation``; True if this call deleted (or started deleting) the object."""
        res = resource_for(api_version, kind)
        return await self.run(ops.delete(res, self._ns(namespace), name, propagation=propagation, uid=uid))

    async def kueue_version(self) -> str:
        """The Kueue API version to speak here (v1beta2 where served, else v1beta1): asked once per
        connection (this client is shared per connection), then cached."""
        if self._kueue_version is None:
            self._kueue_version = await self.run(ops.kueue_version())
        return self._kueue_version

    async def kueue_api_version(self) -> str:
        """``kueue.x-k8s.io/<kueue_version()>``."""
        return f"{KUEUE_GROUP}/{await self.kueue_version()}"

    async def pending_workloads(self, local_queue: str, namespace: str | None = None) -> dict[str, Any]:
        """Kueue's ``PendingWorkloadsSummary`` of a LocalQueue; raises ``ApiError`` (404 without the API)."""
        version = await self.kueue_version()
        return await self.run(ops.pending_workloads(local_queue, self._ns(namespace), version))

    async def pods_of(self, kind: str, name: str, namespace: str | None = None) -> Items:
        return await self.run(ops.pods_of(kind, name, self._ns(namespace)))

    async def log_tail(
        self,
        pod: str,
        namespace: str | None = None,
        container: str | None = None,
        lines: int = 50,
        *,
        previous: bool = False,
        limit_bytes: int | None = None,
    ) -> str:
        return await self.run(
            ops.log_tail(
                pod, self._ns(namespace), container, lines, previous=previous, limit_bytes=limit_bytes
            )
        )

    async def warning_events(
        self, obj: Mapping[str, Any], pods: Sequence[Mapping[str, Any]] | None = None, limit: int = 20
    ) -> Lines:
        return await self.run(ops.warning_events(obj, self.namespace, pods, limit))

    async def pod_warnings(self, pods: Sequence[Mapping[str, Any]], namespace: str | None = None) -> Events:
        return await self.run(ops.pod_warnings(self._ns(namespace), pods))


# -- the per-process registry ------------------------------------------------------------------------
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, AsyncKube]] = (
    weakref.WeakKeyDictionary()
)
_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()
#: Per loop, the task that closes its clients when the loop shuts down (held: a loop keeps only weak
#: references to its tasks).
_closers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[None]] = (
    weakref.WeakKeyDictionary()
)
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
    namespace = await hook._get_field("namespace") or "default"  # extras read by _load_config: no I/O
    api_client = async_client.ApiClient(configuration=configuration)
    return AsyncKube(conn_id, hook, api_client, settings, str(namespace))


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
            if loop not in _closers:
                _closers[loop] = loop.create_task(_close_when_the_loop_ends(), name="airflow-k8s-ml closer")
    return kube


async def _close_when_the_loop_ends() -> None:
    """Close the loop's clients when the loop is shut down, not at interpreter exit.

    Why: a loop that ends with its clients open (``airflow dags test`` runs each trigger inline in its own
    ``asyncio.run``) leaves aiohttp sessions for the garbage collector, which logs ``Unclosed client
    session`` / ``Unclosed connector`` at exit, on every successful run. ``asyncio.run`` cancels the tasks
    still pending when its main coroutine returns, with the loop still running: this task waits for that
    cancellation and then closes. In the triggerer the loop lives as long as the process; the task waits."""
    loop = asyncio.get_running_loop()
    try:
        await asyncio.Event().wait()
    finally:
        _closers.pop(loop, None)
        await close_all()


def registered(conn_id: str) -> AsyncKube | None:
    """The client already shared for ``conn_id`` on the running loop, if any (no creation)."""
    return _clients.get(asyncio.get_running_loop(), {}).get(conn_id)


async def close_all() -> None:
    """Close the running loop's clients (tests, shutdown hooks); the next ``get_kube`` reconnects."""
    clients = _clients.pop(asyncio.get_running_loop(), {})
    for kube in clients.values():
        await kube.close()
