"""The default scheduler for a one-node cluster: bind pods that fit, explain the ones that do not.

A pod fits when the node's capacity (settings) minus the requests of bound, non-terminal pods covers its
own requests. One that does not stays Pending with ``PodScheduled=False reason=Unschedulable`` and the
upstream FitError message, plus a ``FailedScheduling`` event; it is retried whenever a pod releases
resources (and on the periodic resync). Pods naming another ``schedulerName`` are left alone, as a real
default-scheduler would. A pod that does not fit for want of resources preempts lower-priority pods
(:meth:`Scheduler._preempt`, upstream's DefaultPreemption on one node); a node's ``NoSchedule`` and
``NoExecute`` taints keep pods that do not tolerate them off it (the TaintToleration filter).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from ..controllers.base import Controller, ObjKey
from ..meta import rfc3339
from ..resources import lookup
from ..store import Change, Obj
from . import fit
from .eviction import add_condition, disruption_condition
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
            return
        self._unschedulable(pod, message)
        if "Insufficient " in message or "Too many pods" in message:
            self._preempt(pod)

    def _preempt(self, pod: Obj) -> None:
        """DefaultPreemption on the one node: the fewest lower-priority pods whose removal lets ``pod`` fit
        (all lower ones out, then each put back, highest priority first, while the pod still fits). Each
        victim gets ``DisruptionTarget`` ``PreemptionByScheduler`` and a ``Preempted`` event, then is
        deleted gracefully; the preemptor is nominated to the node and bound when the victims are gone. Not
        while victims of an earlier preemption still terminate (``PodEligibleToPreemptOthers``)."""
        assert PODS is not None
        spec = pod.get("spec") or {}
        if spec.get("preemptionPolicy") == "Never":
            return
        node, priority = self.settings.node_name, int(spec.get("priority") or 0)
        bound = [p for p in self.store.iter(PODS) if fit.holds_resources(p, node)]
        lower = [p for p in bound if int((p.get("spec") or {}).get("priority") or 0) < priority]
        if any(p["metadata"].get("deletionTimestamp") for p in lower):
            return  # an earlier preemption's victims are still terminating: wait for them
        capacity, request = fit.node_capacity(self.settings.capacity), fit.pod_requests(pod)
        keep = [p for p in bound if p not in lower]

        def fits(staying: list[Obj]) -> bool:
            return not fit.insufficient(request, fit.used_resources(staying, node), capacity)

        if not lower or not fits(keep):
            return
        victims = sorted(lower, key=lambda p: -int((p.get("spec") or {}).get("priority") or 0))
        for candidate in list(victims):  # reprieve the most important first
            if fits([*keep, candidate]):
                keep.append(candidate)
                victims.remove(candidate)
        for victim in victims:
            self._evict_for(victim, pod, node)
        self.store.mutate(
            PODS,
            pod["metadata"]["namespace"],
            pod["metadata"]["name"],
            lambda p: p.setdefault("status", {}).__setitem__("nominatedNodeName", node),
        )

    def _evict_for(self, victim: Obj, preemptor: Obj, node: str) -> None:
        assert PODS is not None
        meta = victim["metadata"]
        condition = disruption_condition(
            "PreemptionByScheduler", f"{COMPONENT}: preempting to accommodate a higher priority pod"
        )
        self.store.mutate(PODS, meta["namespace"], meta["name"], lambda p: add_condition(p, condition))
        message = f"Preempted by pod {preemptor['metadata'].get('uid')} on node {node}"
        self.cluster.events.record(victim, "Normal", "Preempted", message, COMPONENT)
        self.store.delete(PODS, meta["namespace"], meta["name"])

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
