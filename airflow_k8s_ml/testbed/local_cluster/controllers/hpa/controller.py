"""The HorizontalPodAutoscaler controller (pkg/controller/podautoscaler), served at autoscaling/v2 and v1.

Each sync (every ``hpa_sync_period`` seconds, 15 like upstream's default, and at once when the HPA's spec
changes or a metric is set) reads the target's ``/scale`` view, reads each metric's per-pod figures from the
metrics-server controller (cpu and memory from metrics.k8s.io, ``Pods`` metrics from custom.metrics.k8s.io;
an admin-set value wins), asks :mod:`.metrics` for a proposal per metric,
normalizes it (:mod:`.scaling`) and writes the new size through the same scale path ``kubectl scale``
uses. Without a metric value the status says so exactly as a cluster without metrics-server does:
``ScalingActive=False``, reason ``FailedGetResourceMetric``.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.k8s.selectors import LabelSelector, SelectorError, parse_label_selector

from ... import errors
from ...meta import rfc3339
from ...resources import ResourceType, by_kind, lookup
from ...store import Change, Obj
from ..base import Controller, ObjKey
from ..deployment.replicaset_pods import is_active, is_ready
from ..deployment.scale import set_replicas, to_scale
from ..metrics.apis import MetricsAPIs
from .admission import admit_hpa
from .convert import convert
from .metrics import (
    MetricError,
    MetricsSource,
    PodCounts,
    PodSamples,
    group_pods,
    metric_name,
    propose,
    propose_from_samples,
)
from .scaling import History, normalize_legacy, normalize_with_behavior, record_scale_event, set_condition

if TYPE_CHECKING:
    from ...services import ClusterServices

COMPONENT = "horizontal-pod-autoscaler"


def _rt(group: str, version: str, plural: str) -> ResourceType:
    rt = lookup(group, version, plural)
    assert rt is not None
    return rt


HPAS = _rt("autoscaling", "v2", "horizontalpodautoscalers")
PODS = _rt("", "v1", "pods")


class MetricsFailed(errors.LocalClusterError):
    def __init__(self, message: str, statuses: list[Obj]) -> None:
        super().__init__(message)
        self.statuses = statuses


class HPAController(Controller):
    name = "horizontal-pod-autoscaler"

    def __init__(self, cluster: ClusterServices) -> None:
        super().__init__(cluster)
        self.metrics = MetricsSource()
        self._histories: dict[ObjKey, tuple[str, History]] = {}
        self._last_sync: dict[ObjKey, float] = {}

    def attach(self) -> None:
        self.cluster.register_admission(HPAS, admit_hpa)
        self.cluster.register_converter(HPAS, convert)
        self.cluster.register_admin_action("metrics", self.set_metrics)

    def set_metrics(self, body: dict[str, Any]) -> Obj:
        """Admin action ``metrics``: store the value, then sync the HPAs it concerns right away."""
        result = self.metrics.admin(body)
        for hpa in self.store.iter(HPAS, body.get("namespace") or None):
            names = {
                hpa["metadata"]["name"],
                ((hpa.get("spec") or {}).get("scaleTargetRef") or {}).get("name"),
            }
            if body.get("clear") or body.get("name") in names:
                self.enqueue((hpa["metadata"]["namespace"], hpa["metadata"]["name"]))
        return result

    # -- what to reconcile -------------------------------------------------------------------------------
    def keys_for(self, change: Change) -> Iterable[ObjKey]:
        """Spec changes only: our own status writes must not turn the 15 s period into a busy loop."""
        if change.storage_key != HPAS.storage_key:
            return
        old_generation = ((change.old or {}).get("metadata") or {}).get("generation")
        if change.type != "MODIFIED" or change.obj["metadata"].get("generation") != old_generation:
            yield (change.namespace, change.obj["metadata"]["name"])

    def all_keys(self) -> Iterable[ObjKey]:
        due = time.monotonic() - self.settings.hpa_sync_period
        return [
            key
            for hpa in self.store.iter(HPAS)
            if self._last_sync.get(key := (hpa["metadata"]["namespace"], hpa["metadata"]["name"]), 0.0) <= due
        ]

    async def reconcile(self, key: ObjKey) -> None:
        hpa = self.store.find(HPAS, key[0], key[1])
        if hpa is None:
            self._last_sync.pop(key, None)
            self._histories.pop(key, None)
            return
        self._last_sync[key] = time.monotonic()
        status = copy.deepcopy(hpa.get("status") or {})
        self._sync(hpa, status)
        self._write_status(hpa, status)

    # -- one sync --------------------------------------------------------------------------------------
    def _sync(self, hpa: Obj, status: Obj) -> None:
        now = self.settings.clock.now()
        conditions: list[Obj] = status.setdefault("conditions", [])
        spec = hpa.get("spec") or {}
        located = self._target(hpa, conditions, now)
        if located is None:
            return
        rt, target = located
        set_condition(
            conditions,
            "AbleToScale",
            "True",
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale",
            now,
        )
        scale = to_scale(target)
        current = int((scale.get("spec") or {}).get("replicas") or 0)
        history = self._history(hpa)
        if not history.recommendations:
            history.recommendations.append((current, now))
        minimum, maximum = int(spec.get("minReplicas") or 1), int(spec.get("maxReplicas") or 1)
        statuses: list[Obj] = []
        rescale, desired, reason = True, 0, ""
        if current == 0 and minimum != 0:
            rescale = False
            set_condition(
                conditions,
                "ScalingActive",
                "False",
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero",
                now,
            )
        elif current > maximum:
            desired, reason = maximum, "Current number of replicas above Spec.MaxReplicas"
        elif current < minimum:
            desired, reason = minimum, "Current number of replicas below Spec.MinReplicas"
        else:
            try:
                proposal, chosen, statuses = self._compute(hpa, target, scale, conditions, now)
            except MetricsFailed as failed:
                _set_replicas_status(status, current, status.get("desiredReplicas", 0), failed.statuses)
                self._event(hpa, "Warning", "FailedComputeMetricsReplicas", str(failed))
                return
            desired = proposal
            if desired > current:
                reason = f"{chosen} above target"
            elif desired < current:
                reason = "All metrics below target"
            behavior = spec.get("behavior")
            if behavior is None:
                desired = normalize_legacy(conditions, history, current, desired, minimum, maximum, now)
            else:
                desired = normalize_with_behavior(
                    conditions, history, behavior, current, desired, minimum, maximum, now
                )
            rescale = desired != current
        if rescale:
            if not self._rescale(hpa, rt, target, desired, reason, conditions, status, statuses, now):
                return
            record_scale_event(history, spec.get("behavior"), current, desired, now)
            status["lastScaleTime"] = rfc3339(now)
        else:
            desired = current
        _set_replicas_status(status, current, desired, statuses)

    def _history(self, hpa: Obj) -> History:
        """Upstream's in-memory recommendations and scale events, reset when the HPA is recreated."""
        key = (hpa["metadata"]["namespace"], hpa["metadata"]["name"])
        uid, history = self._histories.get(key, ("", History()))
        if uid != hpa["metadata"]["uid"]:
            history = History()
            self._histories[key] = (hpa["metadata"]["uid"], history)
        return history

    def _target(self, hpa: Obj, conditions: list[Obj], now: float) -> tuple[ResourceType, Obj] | None:
        ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
        rt = by_kind(ref.get("apiVersion") or "", ref.get("kind") or "")
        if rt is None or "scale" not in rt.subresources:
            group = (ref.get("apiVersion") or "").rpartition("/")[0]
            message = f'no matches for kind "{ref.get("kind")}" in group "{group}"'
        else:
            target = self.store.find(rt, hpa["metadata"]["namespace"], ref.get("name") or "")
            if target is not None:
                return rt, target
            message = errors.not_found(rt.group, rt.plural, ref.get("name") or "").message
        self._event(hpa, "Warning", "FailedGetScale", message)
        set_condition(
            conditions,
            "AbleToScale",
            "False",
            "FailedGetScale",
            f"the HPA controller was unable to get the target's current scale: {message}",
            now,
        )
        return None

    def _compute(
        self, hpa: Obj, target: Obj, scale: Obj, conditions: list[Obj], now: float
    ) -> tuple[int, str, list[Obj]]:
        """``computeReplicasForMetrics``: the highest proposal; fails when every metric failed (or some failed
        and the others would scale down)."""
        namespace = hpa["metadata"]["namespace"]
        selector, pods = self._pods(hpa, scale, conditions, now)
        counts = PodCounts(sum(1 for p in pods if is_ready(p)), sum(1 for p in pods if not is_ready(p)))
        spec_replicas = int((scale.get("spec") or {}).get("replicas") or 0)
        names = (hpa["metadata"]["name"], target["metadata"]["name"])
        metrics = (hpa.get("spec") or {}).get("metrics") or []
        replicas, chosen, statuses = 0, "", []
        failures: list[MetricError] = []
        for metric in metrics:
            value = self.metrics.get(namespace, names, metric_name(metric))
            try:
                if value is not None or metric.get("type") in ("Object", "External"):
                    proposal = propose(metric, value, spec_replicas, counts, namespace)
                else:
                    samples = self._samples(metric, namespace, selector, pods)
                    proposal = propose_from_samples(metric, samples, spec_replicas, namespace)
            except MetricError as exc:
                self._event(hpa, "Warning", exc.reason, exc.inner)
                failures.append(exc)
                statuses.append({"type": ""})
                continue
            statuses.append(proposal.status)
            if replicas == 0 or proposal.replicas > replicas:
                replicas, chosen = proposal.replicas, proposal.name
        if failures and (len(failures) >= len(metrics) or replicas < spec_replicas):
            first = failures[0]
            set_condition(
                conditions,
                "ScalingActive",
                "False",
                first.reason,
                f"the HPA was unable to compute the replica count: {first.inner}",
                now,
            )
            raise MetricsFailed(
                f"invalid metrics ({len(failures)} invalid out of {len(metrics)}), first error is: {first}",
                statuses,
            )
        set_condition(
            conditions,
            "ScalingActive",
            "True",
            "ValidMetricFound",
            f"the HPA was able to successfully calculate a replica count from {chosen}",
            now,
        )
        return replicas, chosen, statuses

    def _samples(
        self, metric: Obj, namespace: str, selector: LabelSelector, pods: list[Obj]
    ) -> PodSamples | None:
        """The metric's per-pod figures from the metrics APIs (None when they have none: no metrics-server,
        no cgroups, a metric they do not serve, or a ContainerResource metric, which we do not measure)."""
        server = self.cluster.running_controller(MetricsAPIs.name)
        kind, name = metric.get("type"), metric_name(metric)
        if not isinstance(server, MetricsAPIs) or kind not in ("Resource", "Pods"):
            return None
        values = server.pod_values(namespace, selector, name)
        if not values:
            return None
        spec = metric.get("resource" if kind == "Resource" else "pods") or {}
        utilization = (spec.get("target") or {}).get("averageUtilization") is not None
        return group_pods(pods, values, name if kind == "Resource" else "", utilization)

    def _pods(
        self, hpa: Obj, scale: Obj, conditions: list[Obj], now: float
    ) -> tuple[LabelSelector, list[Obj]]:
        """The target's active pods, found by its scale's selector; fails (and says so in
        ``ScalingActive``) when the scale has no valid selector."""
        selector_text = (scale.get("status") or {}).get("selector") or ""
        try:
            selector = parse_label_selector(selector_text) if selector_text else None
        except SelectorError:
            selector = None
        if selector is None:
            self._event(hpa, "Warning", "SelectorRequired", "selector is required")
            set_condition(
                conditions,
                "ScalingActive",
                "False",
                "InvalidSelector",
                "the HPA target's scale is missing a selector",
                now,
            )
            raise MetricsFailed("selector is required", [])
        pods = [
            p
            for p in self.store.iter(PODS, hpa["metadata"]["namespace"])
            if is_active(p) and selector.matches(p["metadata"].get("labels") or {})
        ]
        return selector, pods

    def _rescale(
        self,
        hpa: Obj,
        rt: ResourceType,
        target: Obj,
        desired: int,
        reason: str,
        conditions: list[Obj],
        status: Obj,
        statuses: list[Obj],
        now: float,
    ) -> bool:
        try:
            set_replicas(
                self.cluster, rt, target["metadata"]["namespace"], target["metadata"]["name"], desired
            )
        except errors.StatusError as exc:
            self._event(
                hpa,
                "Warning",
                "FailedRescale",
                f"New size: {desired}; reason: {reason}; error: {exc.message}",
            )
            set_condition(
                conditions,
                "AbleToScale",
                "False",
                "FailedUpdateScale",
                f"the HPA controller was unable to update the target scale: {exc.message}",
                now,
            )
            current = int((target.get("spec") or {}).get("replicas") or 0)
            _set_replicas_status(status, current, status.get("desiredReplicas", 0), statuses)
            return False
        set_condition(
            conditions,
            "AbleToScale",
            "True",
            "SucceededRescale",
            f"the HPA controller was able to update the target scale to {desired}",
            now,
        )
        self._event(hpa, "Normal", "SuccessfulRescale", f"New size: {desired}; reason: {reason}")
        return True

    def _write_status(self, hpa: Obj, status: Obj) -> None:
        if not status.get("conditions"):
            status.pop("conditions", None)
        status.setdefault("desiredReplicas", 0)

        def put(obj: Obj) -> None:
            if obj["metadata"].get("uid") == hpa["metadata"]["uid"]:
                obj["status"] = status

        self.store.mutate(HPAS, hpa["metadata"]["namespace"], hpa["metadata"]["name"], put)

    def _event(self, hpa: Obj, type_: str, reason: str, message: str) -> None:
        self.cluster.events.record(hpa, type_, reason, message, COMPONENT)


def _set_replicas_status(status: Obj, current: int, desired: int, statuses: list[Obj]) -> None:
    """``setStatus``: currentReplicas (omitted when 0), desiredReplicas (always), currentMetrics."""
    if current:
        status["currentReplicas"] = current
    else:
        status.pop("currentReplicas", None)
    status["desiredReplicas"] = desired
    if statuses:
        status["currentMetrics"] = statuses
    else:
        status.pop("currentMetrics", None)
    conditions = status.pop("conditions", None)
    if conditions:
        status["conditions"] = conditions  # keep Go's field order: conditions last
