"""The default scheduler for a one-node cluster: bind pods that fit, explain the ones that do not.

A pod fits when the node's capacity (settings) minus the requests of bound, non-terminal pods covers its
own requests. One that does not stays Pending with ``PodScheduled=False reason=Unschedulable`` and the
upstream FitError message, plus a ``FailedScheduling`` event; it is retried whenever a pod releases
resources (and on the periodic resync). Pods naming another ``schedulerName`` are left alone, as a real
default-scheduler would.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from ..controllers.base import Controller, ObjKey
from ..meta import rfc3339
from ..resources import lookup
from ..store import Change, Obj
from . import fit
from .node import node_labels
from .taint_eviction import tolerates

PODS = lookup("", "v1", "pods")
CLAIMS = lookup("", "v1", "persistentvolumeclaims")
COMPONENT = "default-scheduler"


def wants_scheduling(pod: Obj) -> bool:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    return (
        not spec.get("nodeName")
        and not pod["metadata"].get("deletionTimestamp")
        and (spec.get("schedulerName") or COMPONENT) == COMPONENT
        and status.get("phase", "Pending") == "Pending"
    )


def _released(change: Change) -> bool:
    """Did this change free node resources (a bound pod went away or finished)?"""
    if change.old is None or not fit.holds_resources(
        change.old, (change.old.get("spec") or {}).get("nodeName", "")
    ):
        return False
    return change.type == "DELETED" or not fit.holds_resources(
        change.obj, change.obj["spec"].get("nodeName", "")
    )


class Scheduler(Controller):
    name = COMPONENT

    def keys_for(self, change: Change) -> Iterable[ObjKey]:
        if change.storage_key == ("", "persistentvolumeclaims") and change.type == "ADDED":
            return self.all_keys()
        if change.storage_key == ("", "nodes"):  # a taint removed lets pending pods be placed
            return self.all_keys()
        if change.storage_key != ("", "pods"):
            return ()
        if _released(change):
            return self.all_keys()
        if change.type != "DELETED" and wants_scheduling(change.obj):
            return [(change.namespace, change.obj["metadata"]["name"])]
        return ()

    def all_keys(self) -> Iterable[ObjKey]:
        assert PODS is not None
        pending = [p for p in self.store.iter(PODS) if wants_scheduling(p)]
        pending.sort(
            key=lambda p: (
                -int((p.get("spec") or {}).get("priority") or 0),
                p["metadata"].get("creationTimestamp", ""),
            )
        )
        return [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pending]

    async def reconcile(self, key: ObjKey) -> None:
        assert PODS is not None
        pod = self.store.find(PODS, *key)
        if pod is None or not wants_scheduling(pod):
            return
        message = self._why_not(pod)
        if message is None:
            self._bind(pod)
        else:
            self._unschedulable(pod, message)

    def _why_not(self, pod: Obj) -> str | None:
        """The FitError message, or None when the pod fits."""
        assert PODS is not None and CLAIMS is not None
        namespace = pod["metadata"]["namespace"]
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim and self.store.find(CLAIMS, namespace, claim) is None:
                return fit.unschedulable_message([], f'persistentvolumeclaim "{claim}" not found')
        if fit.selector_mismatch(pod, node_labels(self.settings)):
            return fit.unschedulable_message(["node(s) didn't match Pod's node affinity/selector"])
        untolerated = self._untolerated_taint(pod)
        if untolerated is not None:  # the TaintToleration filter: NoSchedule and NoExecute taints
            key, value = untolerated.get("key", ""), untolerated.get("value", "")
            return fit.unschedulable_message([f"node(s) had untolerated taint {{{key}: {value}}}"])
        used = fit.used_resources(self.store.iter(PODS), self.settings.node_name, pod["metadata"]["uid"])
        reasons = fit.insufficient(fit.pod_requests(pod), used, fit.node_capacity(self.settings.capacity))
        return fit.unschedulable_message(reasons) if reasons else None

    def _untolerated_taint(self, pod: Obj) -> Obj | None:
        nodes = lookup("", "v1", "nodes")
        assert nodes is not None
        node = self.store.find(nodes, "", self.settings.node_name) or {}
        tolerations = (pod.get("spec") or {}).get("tolerations") or []
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("effect") not in ("NoSchedule", "NoExecute"):
                continue
            if not any(tolerates(t, taint) for t in tolerations):
                return dict(taint)
        return None

    def _bind(self, pod: Obj) -> None:
        assert PODS is not None
        node, now = self.settings.node_name, rfc3339(time.time())

        def bind(p: Obj) -> None:
            p["spec"]["nodeName"] = node
            conditions = [
                c
                for c in (p.setdefault("status", {}).get("conditions") or [])
                if c.get("type") != "PodScheduled"
            ]
            conditions.append(
                {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
            )
            p["status"]["conditions"] = conditions

        bound = self.store.mutate(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"], bind)
        if bound is not None:
            self.cluster.events.record(
                bound,
                "Normal",
                "Scheduled",
                f"Successfully assigned {pod['metadata']['namespace']}/{pod['metadata']['name']} to {node}",
                COMPONENT,
            )

    def _unschedulable(self, pod: Obj, message: str) -> None:
        assert PODS is not None
        current = next(
            (c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"),
            None,
        )
        if current is not None and current.get("status") == "False" and current.get("message") == message:
            return  # already reported; a real scheduler re-reports only on its (minutes long) back-off
        now = rfc3339(time.time())

        def mark(p: Obj) -> None:
            status = p.setdefault("status", {})
            status["phase"] = "Pending"
            conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conditions.append(
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastProbeTime": None,
                    "lastTransitionTime": now,
                }
            )
            status["conditions"] = conditions

        marked = self.store.mutate(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"], mark)
        if marked is not None:
            self.cluster.events.record(marked, "Warning", "FailedScheduling", message, COMPONENT)
