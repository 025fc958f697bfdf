"""PodDisruptionBudget status (pkg/controller/disruption): expectedPods, currentHealthy, desiredHealthy,
disruptionsAllowed and the ``DisruptionAllowed`` condition, so ``kubectl get pdb`` shows real numbers.

The Eviction API enforces these numbers (``kubelet/eviction_budget.py``, as upstream's eviction REST);
the kubelet's node-pressure eviction (the ``evict`` fault injection) ignores budgets, as a real one does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from airflow_k8s_ml.k8s.selectors import SelectorError, label_selector_from_match

from ..errors import LocalClusterError
from ..meta import controller_ref, rfc3339
from ..resources import ResourceType, lookup
from ..store import Change, Obj
from .base import Controller, ObjKey
from .deployment.replicas import spec_replicas
from .deployment.replicaset_pods import is_ready


def _rt(group: str, version: str, plural: str) -> ResourceType:
    rt = lookup(group, version, plural)
    assert rt is not None
    return rt


PDBS = _rt("policy", "v1", "poddisruptionbudgets")
PODS = _rt("", "v1", "pods")
DEPLOYMENTS = _rt("apps", "v1", "deployments")
REPLICASETS = _rt("apps", "v1", "replicasets")


class ExpectationError(LocalClusterError):
    pass


def _scaled(value: Any, total: int) -> int:
    if isinstance(value, int):
        return value
    text = str(value)
    if not text.endswith("%") or not text[:-1].isdigit():
        raise ExpectationError(f"invalid value for IntOrString: invalid value {text!r}")
    return math.ceil(int(text[:-1]) * total / 100)


def budget_numbers(pdb: Obj, pods: list[Obj], scale_of: Any) -> tuple[int, int]:
    """``getExpectedPodCount``: (expectedPods, desiredHealthy). ``scale_of(pods)`` sums controller scales."""
    spec = pdb.get("spec") or {}
    if spec.get("maxUnavailable") is not None:
        expected = scale_of(pods)
        return expected, max(expected - _scaled(spec["maxUnavailable"], expected), 0)
    minimum = spec.get("minAvailable")
    if isinstance(minimum, int):
        return len(pods), minimum
    if minimum is not None:
        expected = scale_of(pods)
        return expected, _scaled(minimum, expected)
    return 0, 0


class DisruptionController(Controller):
    name = "disruption-controller"

    def keys_for(self, change: Change) -> Iterable[ObjKey]:
        if change.storage_key == PDBS.storage_key:
            if change.type != "MODIFIED" or change.obj.get("spec") != (change.old or {}).get("spec"):
                yield (change.namespace, change.obj["metadata"]["name"])
        elif change.storage_key in (PODS.storage_key, DEPLOYMENTS.storage_key, REPLICASETS.storage_key):
            for pdb in self.store.iter(PDBS, change.namespace):
                yield (change.namespace, pdb["metadata"]["name"])

    def all_keys(self) -> Iterable[ObjKey]:
        return [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in self.store.iter(PDBS)]

    async def reconcile(self, key: ObjKey) -> None:
        pdb = self.store.find(PDBS, key[0], key[1])
        if pdb is None:
            return
        try:
            selector = label_selector_from_match((pdb.get("spec") or {}).get("selector"))
            pods = [
                p
                for p in self.store.iter(PODS, key[0])
                if selector.matches(p["metadata"].get("labels") or {})
            ]
            expected, desired = budget_numbers(pdb, pods, self._scale_of)
        except (ExpectationError, SelectorError) as exc:
            self._write(pdb, 0, 0, 0, ("False", "SyncFailed", str(exc)))
            return
        healthy = sum(1 for p in pods if not p["metadata"].get("deletionTimestamp") and is_ready(p))
        self._write(pdb, healthy, desired, expected, None)

    def _scale_of(self, pods: list[Obj]) -> int:
        """``getExpectedScale``: the summed scale of the pods' controllers (Deployment over ReplicaSet)."""
        scales: dict[str, int] = {}
        for pod in pods:
            ref = controller_ref(pod)
            if ref is None:
                continue
            owner = self.store.by_uid(ref.get("uid", ""))
            if owner is None or owner.get("kind") != "ReplicaSet":
                raise ExpectationError(f'found no controllers for pod "{pod["metadata"]["name"]}"')
            parent_ref = controller_ref(owner)
            parent = self.store.by_uid(parent_ref.get("uid", "")) if parent_ref else None
            scaled = parent if parent is not None and parent.get("kind") == "Deployment" else owner
            scales[scaled["metadata"]["uid"]] = spec_replicas(scaled)
        return sum(scales.values())

    def _write(
        self, pdb: Obj, healthy: int, desired: int, expected: int, failure: tuple[str, str, str] | None
    ) -> None:
        allowed = healthy - desired if expected > 0 and healthy - desired > 0 else 0
        generation = int(pdb["metadata"].get("generation") or 0)
        status_value, reason, message = failure or (
            ("True", "SufficientPods", "") if allowed > 0 else ("False", "InsufficientPods", "")
        )
        old = (pdb.get("status") or {}).get("conditions") or []
        previous = next((c for c in old if c.get("type") == "DisruptionAllowed"), None)
        since = (
            previous["lastTransitionTime"]
            if previous and previous.get("status") == status_value
            else rfc3339(self.settings.clock.now())
        )
        status: Obj = {
            "observedGeneration": generation,
            "disruptionsAllowed": allowed,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "conditions": [
                {
                    "type": "DisruptionAllowed",
                    "status": status_value,
                    "observedGeneration": generation,
                    "lastTransitionTime": since,
                    "reason": reason,
                    "message": message,
                }
            ],
        }

        def put(obj: Obj) -> None:
            if obj["metadata"].get("uid") == pdb["metadata"]["uid"]:
                obj["status"] = status

        self.store.mutate(PDBS, pdb["metadata"]["namespace"], pdb["metadata"]["name"], put)
