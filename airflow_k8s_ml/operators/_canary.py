"""The cluster steps of a canary rollout, for ``InferenceDeploymentOperator``: start (or adopt) the canary
Deployment, smoke-test its pods, read its counters, remove it. The verdict is not here: it is
:func:`airflow_k8s_ml.status.canary.judge`, which the worker (:func:`judge_in_worker`) and the trigger
(:class:`~airflow_k8s_ml.triggers.canary.CanaryTrigger`) both call.

Adoption: the canary is applied like every serving object (created, or written only where it differs), so a
retry after a worker crash finds the same canary - same name, same template - and the apply writes nothing:
the retry follows that canary instead of starting another. Its analysis window, once open, is written on the
canary itself (the annotation :data:`WINDOW_ANNOTATION`: when it opened and the counters then), so a retry
that adopts the canary judges the same window instead of opening a new one: a crash never lengthens a canary
nor forgets the errors it already served. The annotation goes with the canary.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowFailException

from airflow_k8s_ml.errors import WorkloadFailed
from airflow_k8s_ml.status.canary import (
    MAX_READ_FAILURES,
    CanarySettings,
    Counts,
    Verdict,
    canary_replicas,
    judge,
    window_counts,
)

if TYPE_CHECKING:
    from airflow_k8s_ml.kube.sync_client import KubeClient
    from airflow_k8s_ml.operators._smoke_probe import SmokeSettings

__all__ = [
    "WINDOW_ANNOTATION",
    "CanaryRejected",
    "analysis_poll_seconds",
    "judge_in_worker",
    "open_window",
    "read_counters",
    "recorded_window",
    "remove",
    "smoke_pods",
    "start",
]

#: The canary's open analysis window: ``{"started_at": <epoch s>, "baseline": {"requests": {pod: v}, ...}}``.
WINDOW_ANNOTATION = "airflow-k8s-ml/canary-window"
#: A recorded window larger than this (pods x counters) is not ours to trust: the window opens again.
_MAX_WINDOW_CHARS = 64 * 1024

#: Longest pause between two reads of the counters during the analysis (shorter for a short window).
ANALYSIS_POLL_SECONDS = 5.0


class CanaryRejected(WorkloadFailed, AirflowFailException):
    """The canary was rolled back on its own error rate: the task fails without a retry, because a retry
    would deploy the same model as a canary again and send live traffic to it to learn the same thing."""


def analysis_poll_seconds(settings: CanarySettings) -> float:
    """A few reads per window, at most every :data:`ANALYSIS_POLL_SECONDS`, at least every second."""
    return max(1.0, min(ANALYSIS_POLL_SECONDS, settings.analysis_seconds / 6))


def stable_replicas(stable: Mapping[str, Any]) -> int:
    """The stable Deployment's pods now (its HPA may have scaled it): ready ones, else the spec's."""
    status, spec = stable.get("status") or {}, stable.get("spec") or {}
    return int(status.get("readyReplicas") or spec.get("replicas") or 1)


def start(
    client: KubeClient, new_deployment: Mapping[str, Any], stable: Mapping[str, Any], settings: CanarySettings
) -> tuple[dict[str, Any], str, int]:
    """Apply the canary beside ``stable``: (the live canary, created | configured | unchanged, its pods)."""
    from airflow_k8s_ml.kube.serving_ops import apply_object
    from airflow_k8s_ml.manifests.serving import build_canary

    replicas = canary_replicas(stable_replicas(stable), settings.percent)
    live, action = apply_object(client, build_canary(new_deployment, replicas))
    return live, action, replicas


def recorded_window(canary: Mapping[str, Any]) -> dict[str, Any] | None:
    """The analysis window an earlier try opened on this canary (:data:`WINDOW_ANNOTATION`), or None when
    there is none or it is not one we wrote (anything malformed, oversized or not finite is ignored: the
    window then opens again, which is safe, only longer)."""
    raw = ((canary.get("metadata") or {}).get("annotations") or {}).get(WINDOW_ANNOTATION)
    if not isinstance(raw, str) or len(raw) > _MAX_WINDOW_CHARS:
        return None
    try:
        window = json.loads(raw)
        started_at = float(window["started_at"])
        baseline = {
            counter: {str(pod): float(value) for pod, value in window["baseline"][counter].items()}
            for counter in ("requests", "errors")
        }
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    values = [started_at, *(v for counts in baseline.values() for v in counts.values())]
    if not all(math.isfinite(v) for v in values) or started_at > time.time():
        return None
    return {"started_at": started_at, "baseline": baseline}


def open_window(client: KubeClient, canary: Mapping[str, Any], log: logging.Logger | Any) -> dict[str, Any]:
    """Read the counters now and record the window on the canary; the window
    (``{"started_at", "baseline"}``). A failed record is said and the window still opens: only a crash
    after it would then open it again."""
    window = {"started_at": time.time(), "baseline": read_counters(client, canary)}
    body = {"metadata": {"annotations": {WINDOW_ANNOTATION: json.dumps(window, sort_keys=True)}}}
    try:
        client.patch("apps/v1", "Deployment", canary["name"], canary["namespace"], body)
    except Exception as exc:
        log.warning("canary %s: could not record its analysis window on it (%s)", canary["name"], exc)
    return window


def remove(client: KubeClient, canary: Mapping[str, Any], log: logging.Logger | Any) -> None:
    """Delete the canary Deployment (its uid only: a newer canary of the same name stays)."""
    name, namespace, uid = canary["name"], canary["namespace"], canary.get("uid") or None
    if client.delete("apps/v1", "Deployment", name, namespace, propagation="Background", uid=uid):
        log.info("canary Deployment %s/%s removed", namespace, name)


def smoke_pods(
    client: KubeClient,
    canary: Mapping[str, Any],
    port: int,
    settings: SmokeSettings,
    log: logging.Logger | Any,
) -> str:
    """Smoke-test each ready canary pod through the pod proxy; the first failure, or "" when all pass."""
    from airflow_k8s_ml.k8s.selectors import format_label_selector
    from airflow_k8s_ml.operators._smoke_probe import run_smoke

    selector = format_label_selector(canary["selector"])
    pods = [
        pod
        for pod in client.list("v1", "Pod", canary["namespace"], selector)
        if _ready(pod) and not (pod.get("metadata") or {}).get("deletionTimestamp")
    ]
    if not pods:
        return "no ready canary pod to smoke-test"
    for pod in pods:
        name = pod["metadata"]["name"]
        report = run_smoke(client, canary["namespace"], name, settings, log, pod_port=port)
        if report.failure:
            return f"pod {name}: {report.failure}"
    return ""


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def read_counters(client: KubeClient, canary: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """The canary pods' request and error counters from the custom metrics API."""
    from airflow_k8s_ml.kube.custom_metrics import counters

    return client.run(counters(canary["namespace"], canary["selector"]))


def judge_in_worker(
    client: KubeClient,
    canary: Mapping[str, Any],
    settings: CanarySettings,
    log: logging.Logger | Any,
    sleep: Callable[[float], None] = time.sleep,
) -> Verdict:
    """The analysis in the worker (a window shorter than ``defer_after``), by the trigger's rule."""
    poll = analysis_poll_seconds(settings)
    failures = 0
    last = Counts(0, 0, 0)
    while True:
        elapsed = time.time() - canary["started_at"]
        sleep(min(poll, max(settings.analysis_seconds - elapsed, 0.0)))
        elapsed = time.time() - canary["started_at"]
        try:
            now = read_counters(client, canary)
        except Exception as exc:  # as the trigger: a canary that cannot be judged is not promoted
            failures += 1
            log.warning("canary %s: reading its metrics failed (%s)", canary["name"], exc)
            if failures >= MAX_READ_FAILURES:
                reason = f"could not read the canary's metrics {failures} times in a row: {exc}"
                return Verdict("rollback", reason, last)
            continue
        failures = 0
        verdict = judge(settings, window_counts(canary["baseline"], now), elapsed)
        last = verdict.counts
        log.info("canary %s: %s", canary["name"], verdict.reason)
        if verdict.action != "wait":
            return verdict
