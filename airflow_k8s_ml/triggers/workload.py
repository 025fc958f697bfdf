"""``WorkloadTrigger``: wait in the triggerer for a Job, PyTorchJob (or Deployment rollout) to finish.

How it waits (the cncf ``KubernetesJobTrigger`` polls every 10 s over a new TLS connection each time):

- the workload and its pods come from two *shared* watches of the triggerer process (:mod:`.kube.watch`):
  one on the workload's resource in its namespace, one on pods carrying the workload-name label; a change
  wakes this trigger, which re-reads the latest objects (or the tombstone of a deleted one) and hands them
  to the one wait decision, :func:`airflow_k8s_ml.status.decide` - the same the worker's sync wait uses;
- phased deadlines (:class:`~airflow_k8s_ml.deadlines.Deadlines`, parsed once by the operator) are checked on
  every change and on a timer set to the next expiry, so an expiry is noticed within milliseconds;
- while pods run, their logs are relayed into the trigger's log, prefixed by replica (:mod:`.logs`), and
  the relay's cursor is persisted on the workload (:mod:`.log_cursor`), so a trigger restarted after a
  triggerer crash resumes after the last relayed line instead of replaying or skipping lines;
- an API server that stays unreachable for ``[airflow_k8s_ml] api_unreachable_timeout`` (15 min) ends the
  wait with an error naming the endpoint and the last error (the retry adopts the workload if it runs);
- exactly one :class:`~.events.WorkloadEvent` is yielded: succeeded, failed (with the failed pods, first
  failure first), deadline (the phase, the budget, the reason), or error.

``on_kill`` (the user marked the task failed/success or cleared it) deletes the workload with Foreground
propagation; ``cleanup`` (every exit, including a triggerer restart) never does. Only the connection id is
serialised, never kubeconfig contents. The wait itself (:mod:`._waiter`) and the heavy clients
(:func:`~airflow_k8s_ml.kube.async_client.load_clients`) are imported inside ``run``, in worker threads, so
neither importing this module (the triggerer does it on its event loop) nor starting the first trigger of a
triggerer blocks that loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_k8s_ml.deadlines import Deadlines
from airflow_k8s_ml.kube.resources import Resource, resource_for
from airflow_k8s_ml.status.wait import Target

if TYPE_CHECKING:
    from airflow_k8s_ml.triggers._waiter import LogState, WaitSpec

__all__ = ["WorkloadTrigger"]

CLASSPATH = "airflow_k8s_ml.triggers.workload.WorkloadTrigger"
KILL_TIMEOUT = 20.0
#: Seconds added to ``[workers] min_heartbeat_interval`` for the hold after a deferral: two loops of the
#: scheduler, to drain the deferring process's late exit before the resumed try is queued.
SCHEDULER_LOOPS = 2.0
#: The module that waits: status classifiers, diagnostics, watches, clients. Imported in a worker thread on
#: the first run (tens of milliseconds of imports would otherwise stall the triggerer's loop).
WAIT_MODULE = "airflow_k8s_ml.triggers._waiter"


async def _wait_module() -> Any:
    import sys

    module = sys.modules.get(WAIT_MODULE)
    if module is not None and getattr(module, "READY", False):
        return module
    import importlib

    return await asyncio.to_thread(importlib.import_module, WAIT_MODULE)


def min_deferral_seconds() -> float:
    """``[airflow_k8s_ml] min_deferral_seconds``; unset (or unreadable): ``[workers]
    min_heartbeat_interval`` (how late the deferring process's exit may reach the scheduler) plus
    :data:`SCHEDULER_LOOPS` seconds."""
    from airflow_k8s_ml.config import get

    given = get("min_deferral_seconds").strip()
    if given:
        with contextlib.suppress(ValueError):
            return max(float(given), 0.0)
    return _heartbeat_interval() + SCHEDULER_LOOPS


def _heartbeat_interval() -> float:
    from airflow.configuration import conf

    try:
        return float(conf.getfloat("workers", "min_heartbeat_interval", fallback=5.0))
    except (TypeError, ValueError):
        return 5.0


class WorkloadTrigger(BaseTrigger):
    """Wait for ``kind`` ``namespace/name`` (``uid``) to finish, with phased deadlines and live logs.

    :param kind: Job | PyTorchJob | Deployment (rollout) | CronJob (deadlines only); ``api_version``
        defaults per kind (batch/v1, kubeflow.org/v1, apps/v1).
    :param uid: the instance waited for; "" accepts whatever object has the name (sensors).
    :param deadlines: the budgets: the operator's :class:`~airflow_k8s_ml.deadlines.Deadlines` as parsed
        from its arguments, or its :meth:`~airflow_k8s_ml.deadlines.Deadlines.to_payload` (the kwargs the
        triggerer stores).
    :param task_started_at: epoch seconds the task started (the overall budget counts from it).
    :param log_cursor: per replica, the last line already relayed (a resumed relay starts after it).
    :param try_number: the Airflow try waiting; set, the relay's cursor is persisted on the workload for this
        try and read back when a trigger of the same try (re)starts (None: kept in memory only, e.g. a
        sensor watching somebody else's workload).
    :param poll_interval: LIST period if the cluster refuses watches (the only time we poll).
    :param delete_on_kill: delete the workload (Foreground) when the user kills the task.
    :param deferred_at: epoch seconds the task deferred; the event is held back until
        ``[airflow_k8s_ml] min_deferral_seconds`` after it (:meth:`_hold_after_deferral`). Not given: the
        time this trigger is built, which for every deferring operator and sensor is the deferral (they
        build it in the ``defer`` call); the triggerer rebuilds it from the serialised value.
    """

    def __init__(
        self,
        *,
        kind: str,
        name: str,
        namespace: str,
        uid: str,
        kubernetes_conn_id: str = "kubernetes_default",
        deadlines: Deadlines | dict[str, Any] | None = None,
        task_started_at: float,
        stream_logs: bool = True,
        log_cursor: dict[str, Any] | None = None,
        poll_interval: float = 30.0,
        delete_on_kill: bool = True,
        api_version: str | None = None,
        try_number: int | None = None,
        deferred_at: float | None = None,
    ) -> None:
        super().__init__()
        self.kind = kind
        self.name = name
        self.namespace = namespace
        self.uid = uid
        self.kubernetes_conn_id = kubernetes_conn_id
        self.deadlines = deadlines if isinstance(deadlines, Deadlines) else Deadlines.from_payload(deadlines)
        self.task_started_at = float(task_started_at)
        self.stream_logs = stream_logs
        self.log_cursor = log_cursor
        self.poll_interval = float(poll_interval)
        self.delete_on_kill = delete_on_kill
        self.api_version = api_version
        self.try_number = int(try_number) if try_number is not None else None
        self.deferred_at = time.time() if deferred_at is None else float(deferred_at)
        self.resource: Resource = resource_for(api_version, kind)
        self._logs: LogState | None = None  # the wait's relay and seen uid, shared with the exits

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            CLASSPATH,
            {
                "kind": self.kind,
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "kubernetes_conn_id": self.kubernetes_conn_id,
                "deadlines": self.deadlines.to_payload(),
                "task_started_at": self.task_started_at,
                "stream_logs": self.stream_logs,
                "log_cursor": self.log_cursor,
                "poll_interval": self.poll_interval,
                "delete_on_kill": self.delete_on_kill,
                "api_version": self.api_version,
                "try_number": self.try_number,
                "deferred_at": self.deferred_at,
            },
        )

    # -- run --------------------------------------------------------------------------------------------
    def _target(self) -> Target:
        return Target(self.kind, self.name, self.namespace, self.uid, self.task_started_at)

    def _spec(self, waiting: Any) -> WaitSpec:
        """What the wait needs, handed in explicitly (the wait never reads this trigger's state)."""
        spec: WaitSpec = waiting.WaitSpec(
            target=self._target(),
            resource=self.resource,
            kubernetes_conn_id=self.kubernetes_conn_id,
            deadlines=self.deadlines,
            stream_logs=self.stream_logs,
            log_cursor=self.log_cursor,
            try_number=self.try_number,
            poll_interval=self.poll_interval,
            task_instance=getattr(self, "task_instance", None),
        )
        return spec

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            waiting = await _wait_module()
            self._logs = waiting.LogState(seen_uid=self.uid, initial_cursor=self.log_cursor)
            event = await waiting.wait(self._spec(waiting), self._logs, self.log)
        except Exception as exc:  # the wait broke (not the workload): say so instead of a bare traceback
            from airflow_k8s_ml.triggers.events import WorkloadEvent

            self.log.exception("waiting for %s %s/%s failed", self.kind, self.namespace, self.name)
            message = f"waiting for {self.kind} {self.namespace}/{self.name} failed: {exc}"
            logs = self._logs
            uid, cursor = (logs.seen_uid, logs.cursor()) if logs is not None else (self.uid, self.log_cursor)
            event = WorkloadEvent.error(self._target(), message, uid=uid, log_cursor=cursor)
        await self._hold_after_deferral()
        yield TriggerEvent(event.to_payload())

    async def _hold_after_deferral(self) -> None:
        """Fire no sooner than ``min_deferral_seconds`` after the task deferred.

        Airflow 3.3's scheduler can fail a task whose trigger fires within seconds of its deferral: the
        deferring process's exit ("success") reaches it up to ``[workers] min_heartbeat_interval`` late,
        and drained after the resumed try was queued it reads as a task killed externally
        (apache/airflow#71580, #72716; a retry then adopts the finished workload, but only after
        ``retry_delay``, and a task without retries fails). Only a workload that ends within these seconds
        of the deferral waits, at most that long (docs/waiting.md)."""
        hold = self.deferred_at + min_deferral_seconds() - time.time()
        if hold > 0:
            await asyncio.sleep(hold)

    # -- exits ------------------------------------------------------------------------------------------
    async def on_kill(self) -> None:
        """The user killed the task: delete the workload (Foreground), this uid only."""
        if not self.delete_on_kill:
            return
        from airflow_k8s_ml.kube.async_client import get_kube

        kube = await get_kube(self.kubernetes_conn_id)
        seen_uid = self._logs.seen_uid if self._logs is not None else self.uid
        what = (self.resource.api_version, self.kind, self.name, self.namespace)
        deletion = kube.delete(*what, propagation="Foreground", uid=seen_uid)
        deleted = await asyncio.wait_for(deletion, KILL_TIMEOUT)
        if deleted:
            self.log.info("on_kill: deleting %s %s/%s (Foreground)", self.kind, self.namespace, self.name)

    async def cleanup(self) -> None:
        """Every exit, including a triggerer restart: release local resources, never the workload."""
        if self._logs is not None:
            await self._logs.close()
