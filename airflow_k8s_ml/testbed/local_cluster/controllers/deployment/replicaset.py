"""The apps/v1 ReplicaSet controller: keep ``spec.replicas`` active pods, report their counts.

Pods are created from the template through the cluster's pod admission (as an API client's would be),
with ``generateName: <rs>-`` and a controller ownerReference; surplus pods are chosen by
:func:`.replicaset_pods.pods_to_delete` and deleted gracefully. The store is read synchronously on the
cluster's loop, so upstream's "expectations" (a guard against a lagging informer cache) are not needed. The
periodic resync turns Ready pods into available ones once minReadySeconds passed.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from ... import errors
from ...resources import ResourceType, lookup
from ...store import Change, Obj
from ..base import Controller, ObjKey
from ..ownership import claim, controlled_by
from .admission import admit_replicaset
from .controller import selector_matcher
from .replicaset_pods import is_active, pod_from_template, pods_to_delete, replicaset_status
from .scale import register_scale

COMPONENT = "replicaset-controller"
BURST_REPLICAS = 500


def _rt(group: str, version: str, plural: str) -> ResourceType:
    rt = lookup(group, version, plural)
    assert rt is not None
    return rt


REPLICASETS = _rt("apps", "v1", "replicasets")
PODS = _rt("", "v1", "pods")


class ReplicaSetController(Controller):
    name = "replicaset-controller"

    def attach(self) -> None:
        self.cluster.register_admission(REPLICASETS, admit_replicaset)
        register_scale(self.cluster, REPLICASETS)

    def keys_for(self, change: Change) -> Iterable[ObjKey]:
        if change.storage_key == REPLICASETS.storage_key:
            yield (change.namespace, change.obj["metadata"]["name"])
        elif change.storage_key == PODS.storage_key:
            yield from self._keys_for_pod(change)

    def _keys_for_pod(self, change: Change) -> Iterable[ObjKey]:
        owned = False
        for pod in (change.obj, change.old):
            ref = controlled_by(pod, "ReplicaSet") if pod is not None else None
            if ref is not None:
                owned = True
                yield (change.namespace, ref.get("name", ""))
        if not owned and change.type != "DELETED":
            labels = change.obj["metadata"].get("labels") or {}
            for rs in self.store.iter(REPLICASETS, change.namespace):
                if selector_matcher(rs)(labels):
                    yield (change.namespace, rs["metadata"]["name"])

    def all_keys(self) -> Iterable[ObjKey]:
        return [(rs["metadata"]["namespace"], rs["metadata"]["name"]) for rs in self.store.iter(REPLICASETS)]

    async def reconcile(self, key: ObjKey) -> None:
        rs = self.store.find(REPLICASETS, key[0], key[1])
        if rs is None:
            return
        candidates = [p for p in self.store.iter(PODS, key[0]) if is_active(p)]
        pods = claim(self.store, PODS, rs, [copy.deepcopy(p) for p in candidates], selector_matcher(rs))
        manage_error = None
        if not rs["metadata"].get("deletionTimestamp"):
            manage_error = self._manage(rs, pods)
        status = replicaset_status(rs, pods, self.settings.clock.now(), manage_error)
        generation = int(rs["metadata"].get("generation") or 0)
        if generation:
            status["observedGeneration"] = generation
        self._write_status(rs, status)

    # -- pods ------------------------------------------------------------------------------------------
    def _manage(self, rs: Obj, pods: list[Obj]) -> str | None:
        """``manageReplicas``: create or delete the difference; the first error stops the batch."""
        diff = len(pods) - int(rs["spec"].get("replicas") or 0)
        if diff < 0:
            for _ in range(min(-diff, BURST_REPLICAS)):
                error = self._create_pod(rs)
                if error is not None:
                    return error
        elif diff > 0:
            for pod in pods_to_delete(pods, min(diff, BURST_REPLICAS), self.settings.clock.now()):
                error = self._delete_pod(rs, pod)
                if error is not None:
                    return error
        return None

    def _create_pod(self, rs: Obj) -> str | None:
        try:
            pod = self.cluster.admit(PODS, pod_from_template(rs), None)
            created = self.store.create(PODS, pod)
        except errors.StatusError as exc:
            if "being terminated" not in exc.message:
                self._event(rs, "Warning", "FailedCreate", f"Error creating: {exc.message}")
            return exc.message
        self._event(rs, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}")
        return None

    def _delete_pod(self, rs: Obj, pod: Obj) -> str | None:
        name = pod["metadata"]["name"]
        try:
            self.store.delete(
                PODS, pod["metadata"]["namespace"], name, precondition_uid=pod["metadata"]["uid"]
            )
        except errors.StatusError as exc:
            if exc.code == 404:
                return None
            self._event(rs, "Warning", "FailedDelete", f"Error deleting: {exc.message}")
            return exc.message
        self._event(rs, "Normal", "SuccessfulDelete", f"Deleted pod: {name}")
        return None

    def _write_status(self, rs: Obj, status: Obj) -> None:
        def put(obj: Obj) -> None:
            if obj["metadata"].get("uid") == rs["metadata"]["uid"]:
                obj["status"] = status

        self.store.mutate(REPLICASETS, rs["metadata"]["namespace"], rs["metadata"]["name"], put)

    def _event(self, rs: Obj, type_: str, reason: str, message: str) -> None:
        self.cluster.events.record(rs, type_, reason, message, COMPONENT)
