"""``CanaryTrigger``: judge a canary over its analysis window in the triggerer.

Every ``poll_interval`` seconds it reads the canary pods' request and error counters from the custom metrics
API (:mod:`airflow_k8s_ml.kube.custom_metrics`) and hands them, with the counters read when the window opened,
to the one verdict (:func:`airflow_k8s_ml.status.canary.judge`) the worker uses for a short window; it yields
one event with the verdict (``promote`` / ``rollback``, reason, counts) as soon as it is not ``wait``.
Counts are polled, not watched: the metrics API has no watch. The window's start travels as an absolute time,
so a restarted triggerer resumes the same window. Metrics unreadable
:data:`~airflow_k8s_ml.status.canary.MAX_READ_FAILURES` times in a row end the wait as a rollback naming the
error: a canary that cannot be judged is not promoted.

``on_kill`` (the user killed the task) deletes the canary Deployment (this uid only), never the stable one;
``cleanup`` (every exit) deletes nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_k8s_ml.status.canary import (
    MAX_READ_FAILURES,
    CanarySettings,
    Counts,
    Verdict,
    judge,
    window_counts,
)

__all__ = ["CanaryTrigger"]

CLASSPATH = "airflow_k8s_ml.triggers.canary.CanaryTrigger"
KILL_TIMEOUT = 20.0


class CanaryTrigger(BaseTrigger):
    """Judge the canary ``namespace/name`` (pods ``selector``) from ``started_at`` against ``baseline``.

    :param canary: :meth:`CanarySettings.to_dict`.
    :param baseline: the counters when the window opened (``{"requests": {pod: v}, "errors": {...}}``).
    :param started_at: epoch seconds the window opened.
    :param uid: the canary Deployment's uid (``on_kill`` deletes that object only).
    """

    def __init__(
        self,
        *,
        name: str,
        namespace: str,
        uid: str,
        selector: Mapping[str, str],
        canary: Mapping[str, Any],
        baseline: Mapping[str, Mapping[str, float]],
        started_at: float,
        kubernetes_conn_id: str = "kubernetes_default",
        poll_interval: float = 5.0,
    ) -> None:
        super().__init__()
        self.name = name
        self.namespace = namespace
        self.uid = uid
        self.selector = dict(selector)
        self.canary = dict(canary)
        self.baseline = {key: dict(values) for key, values in baseline.items()}
        self.started_at = float(started_at)
        self.kubernetes_conn_id = kubernetes_conn_id
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            CLASSPATH,
            {
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "selector": self.selector,
                "canary": self.canary,
                "baseline": self.baseline,
                "started_at": self.started_at,
                "kubernetes_conn_id": self.kubernetes_conn_id,
                "poll_interval": self.poll_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from airflow_k8s_ml.kube.async_client import get_kube
        from airflow_k8s_ml.kube.custom_metrics import counters

        settings = CanarySettings(**self.canary)
        failures = 0
        last = Verdict("wait", "", Counts(0, 0, 0))
        while True:
            elapsed = time.time() - self.started_at
            wait = min(self.poll_interval, max(settings.analysis_seconds - elapsed, 0.0))
            await asyncio.sleep(wait)
            elapsed = time.time() - self.started_at
            try:
                kube = await get_kube(self.kubernetes_conn_id)
                now = await kube.run(counters(self.namespace, self.selector))
            except Exception as exc:  # the API may be briefly away; a canary never judged is not promoted
                failures += 1
                self.log.warning("canary %s: reading its metrics failed (%s)", self.name, exc)
                if failures >= MAX_READ_FAILURES:
                    reason = f"could not read the canary's metrics {failures} times in a row: {exc}"
                    yield TriggerEvent(Verdict("rollback", reason, last.counts).to_dict())
                    return
                continue
            failures = 0
            last = judge(settings, window_counts(self.baseline, now), elapsed)
            self.log.info("canary %s: %s", self.name, last.reason)
            if last.action != "wait":
                yield TriggerEvent(last.to_dict())
                return

    async def on_kill(self) -> None:
        """The user killed the task: remove the canary (this uid), leave the stable Deployment serving."""
        from airflow_k8s_ml.kube.async_client import get_kube

        kube = await get_kube(self.kubernetes_conn_id)
        deletion = kube.delete("apps/v1", "Deployment", self.name, self.namespace, uid=self.uid)
        if await asyncio.wait_for(deletion, KILL_TIMEOUT):
            self.log.info("on_kill: deleted canary Deployment %s/%s", self.namespace, self.name)
