"""Wire the local cluster together: store, API server, controllers, credentials; run it in a thread.

``LocalCluster`` is the asyncio object (everything runs on one loop). ``ClusterThread`` runs it in a
background thread for tests and embedding; ``python -m airflow_k8s_ml.testbed.local_cluster serve`` runs it in
the foreground for ``airflow-k8s-ml local up``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from . import errors, schema
from .controllers.base import Controller
from .events import EventRecorder
from .faults import Faults
from .identity import StateDirLock, load_identity
from .journal import Journal
from .meta import new_uid
from .metrics import Metrics
from .node_reboot import reboot_node
from .resources import NAMESPACES, ResourceType, lookup, unserved_versions
from .responses import json_response
from .security import ensure_loopback, ensure_tls, kubeconfig, server_ssl_context, write_kubeconfig
from .server import ApiServer
from .services import AdminAction, Admission, Converter, SubresourceHandler
from .settings import ClusterSettings
from .store import Obj, Store

log = logging.getLogger(__name__)


class LocalCluster:
    """The cluster: builds the store, the API server and the controllers, and gives the controllers the
    :class:`~.services.ClusterServices` they are written against."""

    def __init__(self, settings: ClusterSettings | None = None) -> None:
        self.settings = settings or ClusterSettings()
        ensure_loopback(self.settings.host)
        # Durable state (objects, watch history, identity) lives in the state dir: see journal.py.
        self.settings.state_dir.mkdir(parents=True, exist_ok=True)
        self._lock = StateDirLock(self.settings.state_dir)
        journal = Journal(self.settings.state_dir / "cluster.db")
        self.identity = load_identity(self.settings.state_dir, journal, self.settings.token)
        self.token = self.identity.token
        if self.settings.pod_ip_block is None:
            self.settings.pod_ip_block = self.identity.pod_ip_block
        self.store = Store(
            self.settings.watch_history,
            clock=self.settings.clock.now,
            journal=journal,
            history_bytes=self.settings.watch_history_bytes,
            watch_buffer=self.settings.watch_buffer,
        )
        self._journal = journal
        self.metrics = Metrics(lambda: self.store.open_watches)
        self.faults = Faults()
        self.events = EventRecorder(self.store, self.settings.clock.now, self.settings.node_name)
        self.admissions: dict[tuple[str, str], list[Admission]] = {}
        self.converters: dict[tuple[str, str], Converter] = {}
        self.subresources: dict[tuple[tuple[str, str], str], SubresourceHandler] = {}
        self.readers: dict[tuple[str, str], SubresourceHandler] = {}
        self.admin_actions: dict[str, AdminAction] = {}
        self.unserved = unserved_versions(self.settings.kueue_v1beta2)
        self.controllers: list[Controller] = []
        self.url = ""
        self.kubeconfig_path = self.settings.state_dir / "kubeconfig"
        self._runner: web.AppRunner | None = None
        self._ca_path: Path | None = None
        self._install_controllers()

    # -- extension points used by controllers ------------------------------------------------------
    def register_admission(self, rt: ResourceType, fn: Admission) -> None:
        self.admissions.setdefault(rt.storage_key, []).append(fn)

    def register_converter(self, rt: ResourceType, fn: Converter) -> None:
        self.converters[rt.storage_key] = fn

    def register_subresource(self, rt: ResourceType, name: str, handler: SubresourceHandler) -> None:
        self.subresources[(rt.storage_key, name)] = handler

    def register_reader(self, rt: ResourceType, handler: SubresourceHandler) -> None:
        self.readers[rt.storage_key] = handler

    def register_admin_action(self, name: str, action: AdminAction) -> None:
        self.admin_actions[name] = action

    def admit(self, rt: ResourceType, obj: Obj, old: Obj | None) -> Obj:
        obj = self.to_storage(rt, obj)
        _validate_name(rt, obj)
        if old is None:  # like FillObjectMetaSystemFields before PrepareForCreate: admission may use the uid
            obj.setdefault("metadata", {})["uid"] = new_uid()
        for fn in self.admissions.get(rt.storage_key, []):
            obj = fn(obj, old)
        return obj

    def to_storage(self, rt: ResourceType, obj: Obj) -> Obj:
        if rt.storage_version and rt.storage_key in self.converters:
            storage_rt = lookup(rt.group, rt.storage_version, rt.plural)
            assert storage_rt is not None
            return self.converters[rt.storage_key](obj, storage_rt)
        return obj

    def present(self, rt: ResourceType, obj: Obj) -> Obj:
        """Convert a stored object to the version the request asked for."""
        if obj.get("apiVersion") != rt.api_version and rt.storage_key in self.converters:
            return self.converters[rt.storage_key](obj, rt)
        return obj

    def _install_controllers(self) -> None:
        from .controllers import registry

        for factory in registry.controllers():
            controller = factory(self)
            controller.attach()
            self.controllers.append(controller)

    def running_controller(self, name: str) -> Controller | None:
        return next((c for c in self.controllers if c.name == name), None)

    def controller(self, name: str) -> Controller:
        """The controller of that name, which must be running (tests reach a controller's state)."""
        running = self.running_controller(name)
        if running is None:
            raise LookupError(f"no controller {name!r}")
        return running

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        state = self.settings.state_dir
        reboot_node(self.store, self.settings.node_name, self._pod_event)
        self._seed()
        schema.warm()
        ssl_ctx = None
        if self.settings.tls:
            self._ca_path, cert, key = ensure_tls(state, self.settings.host)
            ssl_ctx = server_ssl_context(cert, key)
        # handler_cancellation: a client that closes a watch must release it at once, not at its next write.
        self._runner = web.AppRunner(
            ApiServer(self).app(), access_log=None, shutdown_timeout=1.0, handler_cancellation=True
        )
        await self._runner.setup()
        port = await self._listen(ssl_ctx)
        self._journal.put("port", str(port))
        scheme = "https" if ssl_ctx else "http"
        host = f"[{self.settings.host}]" if ":" in self.settings.host else self.settings.host
        self.url = f"{scheme}://{host}:{port}"
        write_kubeconfig(self.kubeconfig_path, kubeconfig(self.url, self.token, self._ca_path))
        for controller in self.controllers:
            await controller.start()
        log.info("local cluster serving at %s (kubeconfig %s)", self.url, self.kubeconfig_path)

    async def _listen(self, ssl_ctx: Any) -> int:
        """Serve on the configured port, else on the one served last time if it is free (clients keep
        their kubeconfig), else on any free port."""
        assert self._runner is not None
        wanted = self.settings.port or self.identity.port
        try:
            site = web.TCPSite(
                self._runner, self.settings.host, wanted, ssl_context=ssl_ctx, reuse_address=True
            )
            await site.start()
        except OSError:
            if self.settings.port or not wanted:
                raise
            log.warning("port %d of the previous run is taken; serving on another one", wanted)
            site = web.TCPSite(self._runner, self.settings.host, 0, ssl_context=ssl_ctx, reuse_address=True)
            await site.start()
        return int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    def _pod_event(self, pod: Obj, type_: str, reason: str, message: str) -> None:
        self.events.record(pod, type_, reason, message, "kubelet")

    async def stop(self) -> None:
        for controller in reversed(self.controllers):
            await controller.stop()
        self.store.close_all_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self.store.close()
        self._lock.release()

    def _seed(self) -> None:
        for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
            if self.store.find(NAMESPACES, "", name) is None:
                self.store.create(
                    NAMESPACES,
                    {
                        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
                        "spec": {"finalizers": ["kubernetes"]},
                        "status": {"phase": "Active"},
                    },
                )

    # -- admin (fault injection and operations) -----------------------------------------------------
    async def admin(self, request: web.Request, action: str) -> web.StreamResponse:
        body: dict[str, Any] = {}
        if request.can_read_body:
            raw = await request.read()
            body = json.loads(raw) if raw.strip() else {}
        if action == "faults":
            if request.method == "DELETE":
                self.faults.clear()
            elif request.method in ("POST", "PUT"):
                self.faults.configure(body)
            return json_response(self.faults.describe())
        if action == "expire-history" and request.method == "POST":
            self.store.expire_history()
            return json_response({"oldestResourceVersion": str(self.store.oldest_resource_version)})
        if action == "close-watches" and request.method == "POST":
            self.store.close_all_watches()
            return json_response({"closed": True})
        handler = self.admin_actions.get(action)
        if handler is None or request.method != "POST":
            raise errors.StatusError(404, "NotFound", f"no admin action {action!r}")
        result = handler(body)
        if asyncio.iscoroutine(result):
            result = await result
        return json_response(result if result is not None else {"ok": True})


def _validate_name(rt: ResourceType, obj: Obj) -> None:
    from .naming import validate_object_name

    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if name:
        problem = validate_object_name(rt, name)
        if problem:
            raise errors.invalid(
                rt.kind,
                rt.group,
                rt.plural,
                name,
                [("metadata.name", "FieldValueInvalid", f'Invalid value: "{name}": {problem}')],
            )


class ClusterThread:
    """Run a :class:`LocalCluster` on its own event loop in a daemon thread (tests, embedding)."""

    def __init__(self, settings: ClusterSettings | None = None) -> None:
        self.cluster = LocalCluster(settings)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="local-cluster", daemon=True)
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self.cluster.start())
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()

    def start(self) -> ClusterThread:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        return self

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the cluster's loop and return its result (store access from another thread)."""

        async def wrapper() -> Any:
            result = fn()
            if asyncio.iscoroutine(result):
                result = await result
            return result

        return asyncio.run_coroutine_threadsafe(wrapper(), self._loop).result(30)

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self.cluster.stop(), self._loop).result(60)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return self.cluster.url

    @property
    def token(self) -> str:
        return self.cluster.token

    @property
    def kubeconfig_path(self) -> Path:
        return self.cluster.kubeconfig_path

    def __enter__(self) -> ClusterThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
