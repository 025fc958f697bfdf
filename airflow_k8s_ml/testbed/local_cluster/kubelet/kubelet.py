"""The kubelet of the one node: runs every pod bound to it as local processes, one worker per pod.

Reconciling is cheap and never waits: it starts a :class:`~.worker.PodWorker` for a newly bound pod,
hands newer versions of the pod to its worker (graceful deletion), and stops workers whose pod vanished
(namespace deletion, force delete). The worker does the long-running part. ``attach`` registers what
the API server needs from the kubelet: pod admission, ``pods/log``, ``pods/eviction``, and the ``evict``
admin action (node-pressure eviction, for fault injection).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import errors
from ..controllers.base import Controller, ObjKey
from ..resources import ResourceType, lookup
from ..store import Change, Obj
from .admission import pod_admission
from .containment import Containment, detect
from .deletion import POD_DELETE_RULE
from .devices import GpuAllocator
from .eviction import DEFAULT_PRESSURE_MESSAGE, add_condition, disruption_condition, eviction_handler
from .fit import TERMINAL_PHASES
from .hostpath import deny_host_path
from .lifecycle import StopRequest
from .logs import LogRegistry, log_handler
from .network import HOST_IP, IpAllocator, loopback_range_usable
from .node import node_object, node_status
from .unsupported import UNSUPPORTED, unsupported_handler
from .usage import UsageMeter
from .volumes import pod_dir
from .worker import PodWorker

if TYPE_CHECKING:
    from ..services import ClusterServices

_REMOVED_GRACE = 1.0  # a pod already gone from the API gets a short grace, as upstream's minimum
_SHUTDOWN_GRACE = 1.0  # cluster stop: SIGTERM, this long, then SIGKILL


def _rt(plural: str) -> ResourceType:
    rt = lookup("", "v1", plural)
    assert rt is not None
    return rt


class Kubelet(Controller):
    name = "kubelet"

    def __init__(self, cluster: ClusterServices) -> None:
        super().__init__(cluster)
        self.pods_rt = _rt("pods")
        self.ips = IpAllocator(loopback_range_usable(), self.settings.pod_ip_block)
        self.gpus = GpuAllocator(self.settings.capacity.gpus)
        self.logs = LogRegistry()
        self.workers: dict[ObjKey, PodWorker] = {}
        self._detached: set[PodWorker] = set()  # stopping workers whose pod is gone or replaced
        self._deleted: dict[ObjKey, Obj] = {}
        self._containment: Containment | None = None
        self._usage: UsageMeter | None = None
        self._sampler: asyncio.Task[None] | None = None
        self._cleanups: set[asyncio.Future[None]] = set()

    @property
    def containment(self) -> Containment:
        """How container processes are contained (chosen once, at start: see :mod:`.containment`)."""
        if self._containment is None:
            self._containment = detect(self.settings.containment)
        return self._containment

    @property
    def usage(self) -> UsageMeter:
        """What each container uses, from its cgroup (see :mod:`.usage`); metrics-server reads it."""
        if self._usage is None:
            self._usage = UsageMeter(self.containment.root)
        return self._usage

    # -- wiring ------------------------------------------------------------------------------------
    def attach(self) -> None:
        self.store.delete_rules.register(self.pods_rt.storage_key, POD_DELETE_RULE)
        if self.settings.deny_host_path:
            self.cluster.register_admission(self.pods_rt, deny_host_path())
        self.cluster.register_admission(self.pods_rt, pod_admission(self.settings.default_grace_period))
        self.cluster.register_subresource(
            self.pods_rt, "log", log_handler(self.store, self.logs, self.settings.state_dir)
        )
        self.cluster.register_subresource(
            self.pods_rt, "eviction", eviction_handler(self.store, self.pods_rt)
        )
        for name in UNSUPPORTED:
            self.cluster.register_subresource(self.pods_rt, name, unsupported_handler(name))
        self.cluster.register_admin_action("evict", self.evict)

    async def start(self) -> None:
        self._register_node()
        _ = self.containment  # chosen now: it also sweeps what a kill -9'd kubelet left behind
        await super().start()
        self._sampler = asyncio.create_task(self._sample_usage(), name="kubelet-usage")

    async def _sample_usage(self) -> None:
        """Read every container's cgroup each ``metrics_resolution`` seconds, off the loop."""
        while True:
            await asyncio.to_thread(self.usage.sample, time.time())
            await asyncio.sleep(self.settings.metrics_resolution)

    def _register_node(self) -> None:
        nodes, now = _rt("nodes"), time.time()
        if self.store.find(nodes, "", self.settings.node_name) is None:
            self.store.create(nodes, node_object(self.settings, now))
        else:

            def refresh(node: Obj) -> None:
                node["status"] = node_status(self.settings, now)

            self.store.mutate(nodes, "", self.settings.node_name, refresh)

    def pod_ip_of(self, namespace: str) -> Callable[[str, str], str | None]:
        """A resolver of ``<hostname>.<subdomain>`` in ``namespace`` to the live pod's IP (see
        :mod:`.pod_dns`); the IP is allocated now by the pod's uid if its sandbox does not exist yet."""

        def resolve(hostname: str, subdomain: str) -> str | None:
            for pod in self.store.iter(self.pods_rt, namespace):
                spec = pod.get("spec") or {}
                if spec.get("hostname") != hostname or spec.get("subdomain") != subdomain:
                    continue
                if (
                    pod["metadata"].get("deletionTimestamp")
                    or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES
                ):
                    continue
                return HOST_IP if spec.get("hostNetwork") else str(self.ips.allocate(pod["metadata"]["uid"]))
            return None

        return resolve

    def lookup(self, plural: str, namespace: str, name: str) -> Obj | None:
        """A Secret or ConfigMap of the pod's namespace (for env and volumes)."""
        return self.store.find(_rt(plural), namespace, name)

    # -- controller --------------------------------------------------------------------------------
    def keys_for(self, change: Change) -> Iterable[ObjKey]:
        if change.storage_key != ("", "pods"):
            return ()
        key = (change.namespace, change.obj["metadata"]["name"])
        if change.type == "DELETED":
            self._deleted[key] = change.obj
        return (key,)

    def all_keys(self) -> Iterable[ObjKey]:
        keys = set(self.workers)
        for pod in self.store.iter(self.pods_rt):
            if self._mine(pod) and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES:
                keys.add((pod["metadata"]["namespace"], pod["metadata"]["name"]))
        return sorted(keys)

    def _mine(self, pod: Obj) -> bool:
        return (pod.get("spec") or {}).get("nodeName") == self.settings.node_name

    async def reconcile(self, key: ObjKey) -> None:
        pod = self.store.find(self.pods_rt, *key)
        uid = pod["metadata"]["uid"] if pod is not None else None
        worker = self.workers.get(key)
        if worker is not None and worker.uid != uid:
            self._detach(worker, key)
            worker = None
        deleted = self._deleted.pop(key, None)
        if deleted is not None and deleted["metadata"]["uid"] != uid:
            self._forget(deleted)
        if pod is None or not self._mine(pod):
            return
        if worker is not None:
            worker.observe(pod)
            return
        if pod["metadata"].get("deletionTimestamp"):
            # Nothing runs (finished, or never started): confirm the deletion at once.
            with contextlib.suppress(errors.StatusError):
                self.store.delete(self.pods_rt, key[0], key[1], grace_period=0, precondition_uid=uid)
            return
        if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            return
        self._start_worker(key, pod)

    def _start_worker(self, key: ObjKey, pod: Obj) -> None:
        worker = PodWorker(self, pod)
        self.workers[key] = worker
        worker.task = asyncio.ensure_future(worker.run())

    def _detach(self, worker: PodWorker, key: ObjKey) -> None:
        worker.request_stop(StopRequest("removed", min(_REMOVED_GRACE, float(worker.grace_period()))))
        del self.workers[key]
        self._detached.add(worker)

    def _forget(self, pod: Obj) -> None:
        """A pod without a worker left the API: drop its files (logs, emptyDirs, rendered volumes)."""
        uid = pod["metadata"]["uid"]
        if any(w.uid == uid for w in [*self.workers.values(), *self._detached]):
            return
        self.ips.release(uid)  # an IP handed out early by ``pod_ip_of`` for a pod that never ran
        self.logs.forget_pod(uid)
        self._remove_dir(pod_dir(self.settings.state_dir, pod))

    def worker_done(self, worker: PodWorker) -> None:
        """Called by a worker when it has stopped everything: release what the pod held."""
        self.ips.release(worker.uid)
        self.gpus.release(worker.uid)
        key = (worker.namespace, worker.name)
        if self.workers.get(key) is worker:
            del self.workers[key]
        self._detached.discard(worker)
        current = self.store.find(self.pods_rt, *key)
        if current is None or current["metadata"]["uid"] != worker.uid:
            self.logs.forget_pod(worker.uid)
            self._remove_dir(worker.root)

    def _remove_dir(self, path: Path) -> None:
        """Delete a pod's files in a worker thread: a pod's logs and volumes can be large."""
        task = asyncio.ensure_future(asyncio.to_thread(shutil.rmtree, path, ignore_errors=True))
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)

    async def on_stop(self) -> None:
        """Nothing may keep running when the cluster stops: SIGTERM, a short grace, then SIGKILL."""
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._sampler
        workers = [*self.workers.values(), *self._detached]
        for worker in workers:
            worker.request_stop(StopRequest("shutdown", _SHUTDOWN_GRACE))
        tasks = [w.task for w in workers if w.task is not None]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=_SHUTDOWN_GRACE + 10)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)
        if self._cleanups:
            await asyncio.wait(list(self._cleanups), timeout=10)
        if self._containment is not None:
            self._containment.close()

    # -- node-pressure eviction (admin action) -----------------------------------------------------
    async def evict(self, body: dict[str, Any]) -> Obj:
        namespace, name = str(body.get("namespace") or "default"), str(body.get("name") or "")
        message = str(body.get("message") or DEFAULT_PRESSURE_MESSAGE)
        pod = self.store.get(self.pods_rt, namespace, name)
        worker = self.workers.get((namespace, name))
        self.cluster.events.record(pod, "Warning", "Evicted", message, "kubelet")
        if worker is not None and worker.uid == pod["metadata"]["uid"]:
            worker.request_stop(StopRequest("evict", 0, "Evicted", message))
            if worker.task is not None:
                await asyncio.wait([worker.task], timeout=10)
        elif (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES:

            def fail(p: Obj) -> None:
                status = p.setdefault("status", {})
                status.update(phase="Failed", reason="Evicted", message=message)
                add_condition(p, disruption_condition("TerminationByKubelet", message))

            self.store.mutate(self.pods_rt, namespace, name, fail)
        return self.store.get(self.pods_rt, namespace, name)
