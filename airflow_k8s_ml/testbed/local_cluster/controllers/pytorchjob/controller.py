"""The kubeflow.org/v1 PyTorchJob controller (kubeflow/training-operator release-1.9), served natively.

Wiring and I/O only: admission is :mod:`.admission`, a reconcile is
:func:`.sync.sync_pytorchjob`, which calls back into this class through the ``Ops`` protocol
(create/delete pods and Services with upstream's events, write status, delete the job for TTL).

Reconciles follow changes (the job, its pods and Services), as the operator's watches do. The periodic
resync only matters for time-based rules (active deadline, TTL): a job whose inputs did not change since
its last reconcile is skipped unless such a rule is due, so events are not re-recorded every resync.

The Master's pod IP is reserved before its pod exists (the kubelet's ``IpAllocator.allocate`` is keyed by
pod uid and idempotent, and the store keeps a uid given at create), so ``MASTER_ADDR`` can be put into
every replica's environment at creation, as the real operator does with the Master Service name.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ... import errors
from ...meta import controller_ref
from ...resources import ResourceType, lookup
from ...store import Change, Obj
from ..base import Controller, ObjKey
from .admission import admit_pytorchjob
from .api import API_VERSION, CONTROLLER_NAME
from .sync import PYTORCH_FLAVOR, Flavor, sync_job, time_rule_due

if TYPE_CHECKING:
    from ...services import ClusterServices

log = logging.getLogger(__name__)


def _rt(group: str, version: str, plural: str) -> ResourceType:
    rt = lookup(group, version, plural)
    assert rt is not None
    return rt


PYTORCHJOBS = _rt("kubeflow.org", "v1", "pytorchjobs")
PODS = _rt("", "v1", "pods")
SERVICES = _rt("", "v1", "services")
HOST_IP = "127.0.0.1"  # what a hostNetwork pod gets as its IP on this node


def _owning_job(obj: Obj, kind: str) -> str | None:
    """Name of the ``kind`` job controlling a pod or Service (None for anything else)."""
    ref = controller_ref(obj)
    if ref is None or ref.get("kind") != kind or ref.get("apiVersion") != API_VERSION:
        return None
    return str(ref.get("name", "")) or None


class PyTorchJobController(Controller):
    """The common job controller for one v1 kind; a subclass for another kind (TFJob) sets the class
    attributes: its resource, admission and :class:`~.sync.Flavor`."""

    name = CONTROLLER_NAME
    resource: ResourceType = PYTORCHJOBS
    flavor: Flavor = PYTORCH_FLAVOR
    admit = staticmethod(admit_pytorchjob)

    def __init__(self, cluster: ClusterServices) -> None:
        super().__init__(cluster)
        self._seen: dict[ObjKey, tuple[Any, ...]] = {}  # inputs of each job's last reconcile
        self._reserved: set[str] = set()  # pod uids holding an IP reserved before their pod ran

    # -- wiring ------------------------------------------------------------------------------------
    def attach(self) -> None:
        self.cluster.register_admission(self.resource, self.admit)

    def keys_for(self, change: Change) -> Iterable[ObjKey]:
        if change.storage_key == self.resource.storage_key:
            return [(change.namespace, change.obj["metadata"]["name"])]
        if change.storage_key not in (PODS.storage_key, SERVICES.storage_key):
            return []
        if change.type == "DELETED" and change.storage_key == PODS.storage_key:
            self._forget_reservation(change.obj["metadata"].get("uid", ""))
        job_name = _owning_job(change.obj, self.flavor.fw.kind)
        return [(change.namespace, job_name)] if job_name else []

    def all_keys(self) -> Iterable[ObjKey]:
        return [(j["metadata"]["namespace"], j["metadata"]["name"]) for j in self.store.iter(self.resource)]

    async def reconcile(self, key: ObjKey) -> None:
        job = self.store.find(self.resource, *key)
        if job is None:
            self._seen.pop(key, None)
            return
        inputs = self._inputs(job)
        if inputs == self._seen.get(key) and not time_rule_due(job, self.now()):
            return
        sync_job(self, job, self.flavor)
        self._seen[key] = inputs

    def _inputs(self, job: Obj) -> tuple[Any, ...]:
        """Versions of everything a reconcile reads: the job and the pods and Services it controls."""
        uid, namespace = job["metadata"]["uid"], job["metadata"]["namespace"]
        owned = [
            (o["metadata"]["uid"], o["metadata"].get("resourceVersion"))
            for rt in (PODS, SERVICES)
            for o in self.store.iter(rt, namespace)
            if (controller_ref(o) or {}).get("uid") == uid
        ]
        return (uid, job["metadata"].get("resourceVersion"), tuple(owned))

    # -- Ops: reading --------------------------------------------------------------------------------
    def now(self) -> float:
        return self.settings.clock.now()

    def _owned(self, rt: ResourceType, job: Obj) -> list[Obj]:
        uid = job["metadata"]["uid"]
        live = self.store.iter(rt, job["metadata"]["namespace"])
        return [copy.deepcopy(o) for o in live if (controller_ref(o) or {}).get("uid") == uid]

    def pods_of(self, job: Obj) -> list[Obj]:
        return self._owned(PODS, job)

    def services_of(self, job: Obj) -> list[Obj]:
        return self._owned(SERVICES, job)

    # -- Ops: pods and Services with upstream's events ---------------------------------------------------
    def create_pod(self, job: Obj, pod: Obj) -> bool:
        uid = pod["metadata"].get("uid")
        created = self._create(PODS, job, pod, uid, "FailedCreatePod")
        if created is not None:
            self.event(job, "Normal", "SuccessfulCreatePod", f"Created pod: {created['metadata']['name']}")
        return created is not None

    def create_service(self, job: Obj, service: Obj) -> bool:
        created = self._create(SERVICES, job, service, None, "FailedCreateService")
        if created is not None:
            self.event(
                job, "Normal", "SuccessfulCreateService", f"Created service: {created['metadata']['name']}"
            )
        return created is not None

    def _create(self, rt: ResourceType, job: Obj, obj: Obj, uid: str | None, failure: str) -> Obj | None:
        try:
            admitted = self.cluster.admit(rt, obj, None)
            if uid:  # admission assigns a fresh uid; the reserved IP is keyed by ours
                admitted["metadata"]["uid"] = uid
            return self.store.create(rt, admitted)
        except errors.StatusError as exc:
            if "being terminated" not in exc.message:
                self.event(job, "Warning", failure, f"Error creating: {exc.message}")
            return None

    def delete_pod(self, job: Obj, pod: Obj) -> None:
        meta = pod["metadata"]
        if self._delete(PODS, job, meta["namespace"], meta["name"], "FailedDeletePod"):
            self.event(job, "Normal", "SuccessfulDeletePod", f"Deleted pod: {meta['name']}")

    def delete_service(self, job: Obj, namespace: str, name: str) -> None:
        if self._delete(SERVICES, job, namespace, name, "FailedDeleteService"):
            self.event(job, "Normal", "SuccessfulDeleteService", f"Deleted service: {name}")

    def _delete(self, rt: ResourceType, job: Obj, namespace: str, name: str, failure: str) -> bool:
        """Delete unless gone or already terminating (both are no-ops upstream, without an event)."""
        current = self.store.find(rt, namespace, name)
        if current is None or current["metadata"].get("deletionTimestamp"):
            return False
        try:
            self.store.delete(rt, namespace, name)
        except errors.StatusError as exc:
            if exc.code == 404:
                return False
            self.event(job, "Warning", failure, f"Error deleting: {exc.message}")
            return False
        return True

    # -- Ops: the Master's address -------------------------------------------------------------------
    def reserve_pod_ip(self, pod_uid: str, host_network: bool) -> str | None:
        """The IP the pod will get: reserved now in the kubelet's allocator under the pod's uid."""
        if host_network:
            return HOST_IP
        allocator = self._ip_allocator()
        if allocator is None:
            return None
        self._reserved.add(pod_uid)
        return str(allocator.allocate(pod_uid))

    def release_pod_ip(self, pod_uid: str) -> None:
        self._reserved.discard(pod_uid)
        allocator = self._ip_allocator()
        if allocator is not None:
            allocator.release(pod_uid)

    def _forget_reservation(self, pod_uid: str) -> None:
        """A pod that never got a kubelet worker would keep its reserved IP forever: give it back."""
        if pod_uid not in self._reserved:
            return
        self._reserved.discard(pod_uid)
        kubelet = self._kubelet()
        workers = getattr(kubelet, "workers", {}) if kubelet is not None else {}
        if not any(getattr(w, "uid", None) == pod_uid for w in workers.values()):
            self.release_pod_ip(pod_uid)

    def _kubelet(self) -> object | None:
        return self.cluster.running_controller("kubelet")

    def _ip_allocator(self) -> Any:
        return getattr(self._kubelet(), "ips", None)

    # -- Ops: status, events, the job itself ---------------------------------------------------------
    def event(self, job: Obj, type_: str, reason: str, message: str) -> None:
        self.cluster.events.record(job, type_, reason, message, self.name)

    def write_status(self, job: Obj, status: Obj) -> None:
        def put(obj: Obj) -> None:
            if obj["metadata"].get("uid") == job["metadata"]["uid"]:
                obj["status"] = status

        self.store.mutate(self.resource, job["metadata"]["namespace"], job["metadata"]["name"], put)

    def delete_job(self, job: Obj) -> None:
        """TTL expiry: delete with the default (Background) propagation; the collector removes the rest."""
        meta = job["metadata"]
        try:
            self.store.delete(self.resource, meta["namespace"], meta["name"], precondition_uid=meta["uid"])
        except errors.StatusError as exc:
            if exc.code != 404:
                self.event(job, "Warning", "FailedDeletePod", f"Error deleting: {exc.message}")
            return
        self.event(job, "Normal", "SuccessfulDeletePod", f"Deleted job: {meta['name']}")


__all__ = ["PyTorchJobController"]
