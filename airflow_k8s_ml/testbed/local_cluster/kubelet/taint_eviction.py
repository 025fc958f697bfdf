"""The taint eviction controller (pkg/controller/tainteviction, ``taint-eviction-controller``): a pod on a
node with a ``NoExecute`` taint it does not tolerate is deleted - at once, or when the shortest
``tolerationSeconds`` of the tolerations that let it stay runs out.

As upstream, before the deletion the pod gets ``DisruptionTarget=True`` with reason ``DeletionByTaintManager``
and message ``Taint manager: deleting due to NoExecute taint``, and a ``TaintManagerEviction`` event
``Marking for deletion Pod <ns>/<name>``: whoever waits on the pod (a Job's pod failure policy, our wait)
reads it as a disruption, not a failure. ``kubectl taint nodes <node> key=value:NoExecute`` starts it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from typing import Any

from ..controllers.base import Controller, ObjKey
from ..resources import lookup
from ..store import Change, Obj
from .eviction import add_condition, disruption_condition
from .fit import TERMINAL_PHASES

PODS = lookup("", "v1", "pods")
NODES = lookup("", "v1", "nodes")
COMPONENT = "taint-eviction-controller"
REASON = "DeletionByTaintManager"
MESSAGE = "Taint manager: deleting due to NoExecute taint"


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """``Toleration.ToleratesTaint``: same effect (or none given), and the key and value by the operator
    (``Exists`` with no key tolerates every taint)."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return bool(key) and (toleration.get("value") or "") == (taint.get("value") or "")


def stay_seconds(pod: Obj, taints: Iterable[Mapping[str, Any]]) -> float | None:
    """How long the pod may stay on a node with these taints: None for ever (every NoExecute taint
    tolerated without ``tolerationSeconds``), 0 (one not tolerated), else the shortest ``tolerationSeconds``
    of the tolerations used (``getMinTolerationTime``)."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    shortest: float | None = None
    for taint in taints:
        if taint.get("effect") != "NoExecute":
            continue
        used = [t for t in tolerations if tolerates(t, taint)]
        if not used:
            return 0.0
        for toleration in used:
            seconds = toleration.get("tolerationSeconds")
            if seconds is not None:
                seconds = max(float(seconds), 0.0)
                shortest = seconds if shortest is None else min(shortest, seconds)
    return shortest


class TaintEviction(Controller):
    name = COMPONENT

    def __init__(self, cluster: Any) -> None:
        super().__init__(cluster)
        #: pod uid -> when the node's taints first applied to it (tolerationSeconds count from then)
        self._since: dict[str, float] = {}

    def _taints(self) -> list[Mapping[str, Any]]:
        assert NODES is not None
        node = self.store.find(NODES, "", self.settings.node_name)
        return list(((node or {}).get("spec") or {}).get("taints") or [])

    def keys_for(self, change: Change) -> Iterable[ObjKey]:
        if change.storage_key == ("", "nodes"):
            return self.all_keys()
        if change.storage_key == ("", "pods") and change.type != "DELETED":
            if (change.obj.get("spec") or {}).get("nodeName"):
                return [(change.namespace, change.obj["metadata"]["name"])]
        return ()

    def all_keys(self) -> Iterable[ObjKey]:
        if not any(t.get("effect") == "NoExecute" for t in self._taints()):
            self._since.clear()
            return ()
        assert PODS is not None
        node = self.settings.node_name
        return [
            (p["metadata"]["namespace"], p["metadata"]["name"])
            for p in self.store.iter(PODS)
            if (p.get("spec") or {}).get("nodeName") == node
        ]

    async def reconcile(self, key: ObjKey) -> None:
        assert PODS is not None
        pod = self.store.find(PODS, *key)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return
        if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            return
        uid = str(pod["metadata"].get("uid"))
        stay = stay_seconds(pod, self._taints())
        if stay is None:
            self._since.pop(uid, None)
            return
        now = time.monotonic()
        since = self._since.setdefault(uid, now)
        left = since + stay - now
        if left > 0:
            asyncio.get_running_loop().call_later(left, self.enqueue, key)
            return
        self._since.pop(uid, None)
        self._evict(pod)

    def _evict(self, pod: Obj) -> None:
        assert PODS is not None
        meta = pod["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        self.cluster.events.record(
            pod, "Normal", "TaintManagerEviction", f"Marking for deletion Pod {namespace}/{name}", COMPONENT
        )
        self.store.mutate(
            PODS, namespace, name, lambda p: add_condition(p, disruption_condition(REASON, MESSAGE))
        )
        self.store.delete(PODS, namespace, name)
