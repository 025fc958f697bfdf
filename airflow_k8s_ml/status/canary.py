"""A canary's judgement, once: its settings, its replica count, the request and error counts it is judged on
and the verdict. Pure; the worker (a short window) and the trigger (a deferred one) both call :func:`judge`
on counts they fetched, so the two cannot decide differently.

Why counters and their delta: the custom metrics API (a Prometheus adapter on a real cluster, the local
cluster's service proxy here) serves ``http_requests_total`` and ``http_request_errors_total`` per pod as
counters since the pod started. The window's traffic is each pod's value now minus its value when the window
opened; a pod that restarted (its counter went down) or appeared since counts from zero, as Prometheus'
``increase()`` treats a counter reset. A rate alone could not say how many requests the verdict rests on.

Why ``min_requests``: an error rate over a handful of requests says nothing. A window that saw fewer requests
than asked is a rollback ("not enough traffic to judge"), never a promotion: promoting an untested model is
what the canary is there to prevent (Flagger and Argo Rollouts likewise fail an analysis with no data).
Why an early rollback: once ``min_requests`` were seen and their error rate is over the limit, the canary has
failed a check on enough traffic (Flagger checks at every interval too); every further second of the window
would send users to a bad model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from airflow_k8s_ml.k8s.quantities import QuantityError, parse

__all__ = [
    "ERRORS_METRIC",
    "MAX_READ_FAILURES",
    "REQUESTS_METRIC",
    "CanarySettings",
    "Counts",
    "Verdict",
    "canary_replicas",
    "judge",
    "metric_values",
    "window_counts",
]

#: The pods metrics the canary is judged on (counters since pod start, the Prometheus adapter's names).
REQUESTS_METRIC = "http_requests_total"
ERRORS_METRIC = "http_request_errors_total"
#: Reads of the counters that may fail in a row before the canary is rolled back, in worker and trigger alike:
#: a canary that cannot be judged is not promoted.
MAX_READ_FAILURES = 5


@dataclass(frozen=True, slots=True)
class CanarySettings:
    """``canary={...}`` once checked (``manifests.serving_rules.check_canary_fields``, the argument's rules,
    which DAG parsing runs too): share of pods, window, the error rate allowed, the traffic needed."""

    percent: int
    analysis_seconds: float
    max_error_rate: float
    min_requests: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "percent": self.percent,
            "analysis_seconds": self.analysis_seconds,
            "max_error_rate": self.max_error_rate,
            "min_requests": self.min_requests,
        }


def canary_replicas(stable_replicas: int, percent: int) -> int:
    """Canary pods so that they are about ``percent`` of all ready pods behind the Service (which spreads
    requests over ready endpoints): ``c / (stable + c) ~ percent``, at least 1."""
    share = percent / 100
    return max(1, round(stable_replicas * share / (1 - share)))


def metric_values(body: Mapping[str, Any]) -> dict[str, float]:
    """A ``MetricValueList`` (custom.metrics.k8s.io/v1beta2) as pod name -> value (a Quantity: "12",
    "1500m")."""
    out: dict[str, float] = {}
    for item in body.get("items") or []:
        name = ((item or {}).get("describedObject") or {}).get("name")
        if not name:
            continue
        try:
            out[str(name)] = float(parse(item.get("value", "0")))
        except (QuantityError, ArithmeticError):
            continue
    return out


@dataclass(frozen=True, slots=True)
class Counts:
    """Requests and errors the canary served in the window (so far), and over how many pods."""

    requests: int
    errors: int
    pods: int

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "errors": self.errors,
            "error_rate": round(self.error_rate, 4),
            "pods": self.pods,
        }


def _increase(before: Mapping[str, float], now: Mapping[str, float]) -> Decimal:
    total = Decimal(0)
    for pod, value in now.items():
        start = before.get(pod, 0.0)
        total += Decimal(repr(value if value < start else value - start))  # a reset counts from zero
    return total


def window_counts(
    baseline: Mapping[str, Mapping[str, float]], now: Mapping[str, Mapping[str, float]]
) -> Counts:
    """The window's counts from two reads of both counters (``{"requests": {pod: v}, "errors": {...}}``).

    The two counters are read one after the other, so errors made between the reads at the window's start
    can be in the errors' increase but not the requests'; the errors are capped at the requests (found on a
    loaded machine: "3 errors in 2 requests")."""
    requests = _increase(baseline.get("requests") or {}, now.get("requests") or {})
    errors = _increase(baseline.get("errors") or {}, now.get("errors") or {})
    return Counts(int(requests), int(min(errors, requests)), len(now.get("requests") or {}))


@dataclass(frozen=True, slots=True)
class Verdict:
    """``wait`` (the window is open and undecided), ``promote`` or ``rollback``, and why, in words.

    ``rejected``: rolled back on the model's own error rate, judged on live traffic. Not so for too little
    traffic or unreadable metrics, which say nothing of the model: only a rejection is final (a retry would
    send users to the same model again to learn the same thing)."""

    action: Literal["wait", "promote", "rollback"]
    reason: str
    counts: Counts
    rejected: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "decision": self.action,
            "reason": self.reason,
            "rejected": self.rejected,
            **self.counts.to_dict(),
        }


def judge(settings: CanarySettings, counts: Counts, elapsed: float) -> Verdict:
    """The canary's verdict after ``elapsed`` seconds of the window on ``counts`` (see the module's why)."""
    limit = settings.max_error_rate
    seen = f"{counts.errors} errors in {counts.requests} requests (error rate {counts.error_rate:.2%})"
    if counts.requests >= settings.min_requests and counts.error_rate > limit:
        return Verdict("rollback", f"{seen} over max_error_rate {limit:.2%}", counts, rejected=True)
    if elapsed < settings.analysis_seconds:
        return Verdict("wait", f"{seen} after {elapsed:.0f}s of {settings.analysis_seconds:g}s", counts)
    if counts.requests < settings.min_requests:
        return Verdict(
            "rollback",
            f"not enough traffic to judge: {counts.requests} requests in {settings.analysis_seconds:g}s, "
            f"min_requests {settings.min_requests}",
            counts,
        )
    return Verdict("promote", f"{seen} within max_error_rate {limit:.2%}", counts)
