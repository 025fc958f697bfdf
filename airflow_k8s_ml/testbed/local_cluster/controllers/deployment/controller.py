"""The apps/v1 Deployment controller: admission, the ``/scale`` subresource, and a reconcile loop that runs
:class:`~.sync.DeploymentSync` over the store (kube-controller-manager's deployment controller).

The controller owns its ReplicaSets through controller ownerReferences (adopting matching orphans) and
implements :class:`~.sync.DeploymentOps`: every ReplicaSet is created through admission like
an API client's would be, scaled by rewriting ``spec.replicas`` (which bumps its generation), and the
Deployment's status and revision annotation are written together, as upstream's UpdateStatus does.
The periodic resync re-checks the progress deadline and minReadySeconds.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable

from airflow_k8s_ml.k8s.selectors import SelectorError, label_selector_from_match

from ... import errors
from ...resources import ResourceType, lookup
from ...store import Change, Obj
from ..base import Controller, ObjKey
from ..ownership import claim, controlled_by
from .admission import admit_deployment
from .scale import register_scale
from .sync import DeploymentSync

COMPONENT = "deployment-controller"


def _rt(group: str, version: str, plural: str) -> ResourceType:
    rt = lookup(group, version, plural)
    assert rt is not None
    return rt


DEPLOYMENTS = _rt("apps", "v1", "deployments")
REPLICASETS = _rt("apps", "v1", "replicasets")
PODS = _rt("", "v1", "pods")


def selector_matcher(obj: Obj) -> Callable[[dict[str, str]], bool]:
    """``matches(labels)`` for the object's ``spec.selector``; an unparsable selector matches nothing."""
    try:
        selector = label_selector_from_match((obj.get("spec") or {}).get("selector"))
    except SelectorError:
        return lambda labels: False
    return selector.matches


class DeploymentController(Controller):
    name = "deployment-controller"

    def attach(self) -> None:
        self.cluster.register_admission(DEPLOYMENTS, admit_deployment)
        register_scale(self.cluster, DEPLOYMENTS)

    # -- what to reconcile -------------------------------------------------------------------------------
    def keys_for(self, change: Change) -> Iterable[ObjKey]:
        if change.storage_key == DEPLOYMENTS.storage_key:
            yield (change.namespace, change.obj["metadata"]["name"])
        elif change.storage_key == REPLICASETS.storage_key:
            yield from self._keys_for_rs(change)
        elif change.storage_key == PODS.storage_key:
            yield from self._keys_for_pod(change)

    def _keys_for_rs(self, change: Change) -> Iterable[ObjKey]:
        for obj in (change.obj, change.old):
            if obj is None:
                continue
            ref = controlled_by(obj, "Deployment")
            if ref is not None:
                yield (change.namespace, ref.get("name", ""))
        if change.type != "DELETED" and controlled_by(change.obj, "Deployment") is None:
            labels = change.obj["metadata"].get("labels") or {}
            for d in self.store.iter(DEPLOYMENTS, change.namespace):
                if selector_matcher(d)(labels):
                    yield (change.namespace, d["metadata"]["name"])

    def _keys_for_pod(self, change: Change) -> Iterable[ObjKey]:
        """Recreate waits for old pods to be gone, so a pod going away wakes its Deployment up."""
        phase = (change.obj.get("status") or {}).get("phase")
        if change.type != "DELETED" and phase not in ("Succeeded", "Failed"):
            return
        ref = controlled_by(change.obj, "ReplicaSet")
        rs = self.store.by_uid(ref.get("uid", "")) if ref is not None else None
        owner = controlled_by(rs, "Deployment") if rs is not None else None
        if owner is not None:
            yield (change.namespace, owner.get("name", ""))

    def all_keys(self) -> Iterable[ObjKey]:
        return [(d["metadata"]["namespace"], d["metadata"]["name"]) for d in self.store.iter(DEPLOYMENTS)]

    async def reconcile(self, key: ObjKey) -> None:
        deployment = self.store.find(DEPLOYMENTS, key[0], key[1])
        if deployment is None:
            return
        DeploymentSync(self, deployment, self._replicasets_of(deployment)).run()

    def _replicasets_of(self, deployment: Obj) -> list[Obj]:
        candidates, _ = self.store.list(REPLICASETS, deployment["metadata"]["namespace"])
        return claim(self.store, REPLICASETS, deployment, candidates, selector_matcher(deployment))

    # -- DeploymentOps ---------------------------------------------------------------------------------
    def now(self) -> float:
        return self.settings.clock.now()

    def create_rs(self, rs: Obj) -> Obj:
        admitted = self.cluster.admit(REPLICASETS, rs, None)
        return self.store.create(REPLICASETS, admitted)

    def find_rs(self, namespace: str, name: str) -> Obj | None:
        return self.store.find(REPLICASETS, namespace, name)

    def update_rs(self, rs: Obj) -> Obj:
        meta = rs["metadata"]

        def put(obj: Obj) -> None:
            if obj["metadata"].get("uid") != meta.get("uid"):
                raise errors.conflict("apps", "replicasets", meta["name"])
            obj["spec"] = copy.deepcopy(rs["spec"])
            _set_annotations(obj, meta.get("annotations"))

        updated = self.store.mutate(REPLICASETS, meta["namespace"], meta["name"], put)
        if updated is None:
            raise errors.not_found("apps", "replicasets", meta["name"])
        return copy.deepcopy(updated)

    def delete_rs(self, rs: Obj) -> None:
        try:
            self.store.delete(
                REPLICASETS,
                rs["metadata"]["namespace"],
                rs["metadata"]["name"],
                precondition_uid=rs["metadata"]["uid"],
            )
        except errors.StatusError as exc:
            if exc.code not in (404, 409):
                raise

    def write_deployment(self, deployment: Obj) -> None:
        meta = deployment["metadata"]

        def put(obj: Obj) -> None:
            if obj["metadata"].get("uid") != meta.get("uid"):
                return
            obj["status"] = copy.deepcopy(deployment.get("status") or {})
            _set_annotations(obj, meta.get("annotations"))

        self.store.mutate(DEPLOYMENTS, meta["namespace"], meta["name"], put)

    def pods_by_rs(self, deployment: Obj, replicasets: list[Obj]) -> dict[str, list[Obj]]:
        uids = {rs["metadata"]["uid"] for rs in replicasets}
        matches = selector_matcher(deployment)
        grouped: dict[str, list[Obj]] = {uid: [] for uid in uids}
        for pod in self.store.iter(PODS, deployment["metadata"]["namespace"]):
            ref = controlled_by(pod, "ReplicaSet")
            if ref is not None and ref.get("uid") in uids and matches(pod["metadata"].get("labels") or {}):
                grouped[ref["uid"]].append(pod)
        return grouped

    def event(self, deployment: Obj, type_: str, reason: str, message: str) -> None:
        self.cluster.events.record(deployment, type_, reason, message, COMPONENT)


def _set_annotations(obj: Obj, annotations: dict[str, str] | None) -> None:
    if annotations:
        obj["metadata"]["annotations"] = copy.deepcopy(annotations)
    else:
        obj["metadata"].pop("annotations", None)
