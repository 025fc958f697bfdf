"""Run the smoke test through the API server's service proxy: readiness first (retried), then the sample.

Why retry only the readiness call: right after a rollout the Service's endpoints may lag by a sync or two
(503 "no endpoints available"), which says nothing about the model. The sample request is asked once: a
wrong answer from a ready server is the finding, not a hiccup. The judgement itself is in :mod:`._smoke`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.operators._smoke import SmokeOutcome, check_response

if TYPE_CHECKING:
    from airflow_k8s_ml.kube.sync_client import KubeClient

__all__ = ["SmokeReport", "SmokeSettings", "run_smoke"]

SERVICE_PORT_NAME = "http"  # build_service names the one port "http"


@dataclass(frozen=True)
class SmokeSettings:
    """What to call and what to expect (the operator's smoke arguments, rendered)."""

    readiness_path: str
    path: str | None = None
    request: Mapping[str, Any] | None = None
    expected_status: int = 200
    expected_response: Any = None
    timeout: float = 60.0
    backoffs: tuple[float, ...] = (0.2, 0.4, 0.8, 1.6, 2.0)


@dataclass(frozen=True)
class SmokeReport:
    """The smoke test's two steps; ``failure`` is the reason to roll back, empty when it passed."""

    readiness: SmokeOutcome | None = None
    request: SmokeOutcome | None = None
    failure: str = ""
    attempts: int = 0

    def to_xcom(self) -> dict[str, Any]:
        return {
            "ok": not self.failure,
            "readiness": self.readiness.to_xcom() if self.readiness else None,
            "request": self.request.to_xcom() if self.request else None,
            "failure": self.failure or None,
        }


def run_smoke(
    client: KubeClient,
    namespace: str,
    service: str,
    settings: SmokeSettings,
    log: logging.Logger | Any,
    sleep: Callable[[float], None] = time.sleep,
    *,
    pod_port: int | None = None,
) -> SmokeReport:
    """Readiness path until it answers 2xx or ``settings.timeout`` passes, then the sample request.

    ``pod_port``: ``service`` names a pod, called through the pod proxy on that port (a canary's pod,
    which the Service would only reach now and then)."""
    from airflow_k8s_ml.kube.errors import ApiError
    from airflow_k8s_ml.kube.serving_ops import proxy_request

    port: str | int = SERVICE_PORT_NAME if pod_port is None else pod_port
    resource = "services" if pod_port is None else "pods"
    deadline = time.monotonic() + settings.timeout
    attempts = 0
    readiness: SmokeOutcome | None = None
    while True:
        delay = settings.backoffs[min(attempts, len(settings.backoffs) - 1)]
        attempts += 1
        try:
            response = proxy_request(
                client, namespace, service, port, settings.readiness_path, resource=resource
            )
            readiness = check_response(settings.readiness_path, response.status, response.body)
            if readiness.ok:
                break
            last = "; ".join(readiness.problems)
        except ApiError as exc:
            last = f"no answer: {exc}"
        if time.monotonic() + delay > deadline:
            return SmokeReport(readiness, None, f"GET {settings.readiness_path}: {last}", attempts)
        sleep(delay)
    log.info("smoke: GET %s -> %d after %d attempt(s)", settings.readiness_path, readiness.status, attempts)
    if settings.path is None:
        return SmokeReport(readiness, None, "", attempts)
    method = "POST" if settings.request is not None else "GET"
    try:
        response = proxy_request(
            client, namespace, service, port, settings.path, body=settings.request, resource=resource
        )
    except ApiError as exc:
        return SmokeReport(readiness, None, f"{method} {settings.path}: no answer: {exc}", attempts)
    request = check_response(
        settings.path, response.status, response.body, settings.expected_status, settings.expected_response
    )
    log.info("smoke: %s %s -> %d %s", method, settings.path, request.status, request.to_xcom()["body"])
    failure = f"{method} {settings.path}: {'; '.join(request.problems)}" if request.problems else ""
    return SmokeReport(readiness, request, failure, attempts)
