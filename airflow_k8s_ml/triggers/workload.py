"""``WorkloadTrigger``: wait in the triggerer for a Job, PyTorchJob (or Deployment rollout) to finish.

How it waits (the cncf ``KubernetesJobTrigger`` polls every 10 s over a new TLS connection each time):

- the workload and its pods come from two *shared* watches of the triggerer process (:mod:`.kube.watch`):
  one on the workload's resource in its namespace, one on pods carrying the workload-name label; a change
  wakes this trigger, which re-reads the latest objects and classifies them with ``status.classify``;
- phased deadlines are checked on every change and on a timer set to the next expiry, so an expiry is
  noticed within milliseconds (:mod:`.deadlines`);
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
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_k8s_ml.kube.resources import Resource, resource_for
from airflow_k8s_ml.triggers.deadlines import Deadlines

if TYPE_CHECKING:
    from airflow_k8s_ml.status import WorkloadState
    from airflow_k8s_ml.triggers.events import WorkloadEvent
    from airflow_k8s_ml.triggers.log_cursor import CursorWriter
    from airflow_k8s_ml.triggers.logs import LogRelay

__all__ = ["WorkloadTrigger"]

CLASSPATH = "airflow_k8s_ml.triggers.workload.WorkloadTrigger"
KILL_TIMEOUT = 20.0
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


class WorkloadTrigger(BaseTrigger):
    """Wait for ``kind`` ``namespace/name`` (``uid``) to finish, with phased deadlines and live logs.

    :param kind: Job | PyTorchJob | Deployment (rollout) | CronJob (deadlines only); ``api_version``
        defaults per kind (batch/v1, kubeflow.org/v1, apps/v1).
    :param uid: the instance waited for; "" accepts whatever object has the name (sensors).
    :param deadlines: :meth:`Deadlines.to_payload` of the budgets.
    :param task_started_at: epoch seconds the task started (the overall budget counts from it).
    :param log_cursor: per replica, the last line already relayed (a resumed relay starts after it).
    :param try_number: the Airflow try waiting; set, the relay's cursor is persisted on the workload for this
        try and read back when a trigger of the same try (re)starts (None: kept in memory only, e.g. a
        sensor watching somebody else's workload).
    :param poll_interval: LIST period if the cluster refuses watches (the only time we poll).
    :param delete_on_kill: delete the workload (Foreground) when the user kills the task.
    """

    def __init__(
        self,
        *,
        kind: str,
        name: str,
        namespace: str,
        uid: str,
        kubernetes_conn_id: str = "kubernetes_default",
        deadlines: dict[str, Any] | None = None,
        task_started_at: float,
        stream_logs: bool = True,
        log_cursor: dict[str, Any] | None = None,
        poll_interval: float = 30.0,
        delete_on_kill: bool = True,
        api_version: str | None = None,
        try_number: int | None = None,
    ) -> None:
        super().__init__()
        self.kind = kind
        self.name = name
        self.namespace = namespace
        self.uid = uid
        self.kubernetes_conn_id = kubernetes_conn_id
        self.deadlines = Deadlines.from_payload(deadlines).to_payload() if deadlines else None
        self.task_started_at = float(task_started_at)
        self.stream_logs = stream_logs
        self.log_cursor = log_cursor
        self.poll_interval = float(poll_interval)
        self.delete_on_kill = delete_on_kill
        self.api_version = api_version
        self.try_number = int(try_number) if try_number is not None else None
        self.resource: Resource = resource_for(api_version, kind)
        self._seen_uid = uid
        self._relay: LogRelay | None = None
        self._cursor_writer: CursorWriter | None = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            CLASSPATH,
            {
                "kind": self.kind,
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "kubernetes_conn_id": self.kubernetes_conn_id,
                "deadlines": self.deadlines,
                "task_started_at": self.task_started_at,
                "stream_logs": self.stream_logs,
                "log_cursor": self.log_cursor,
                "poll_interval": self.poll_interval,
                "delete_on_kill": self.delete_on_kill,
                "api_version": self.api_version,
                "try_number": self.try_number,
            },
        )

    # -- run --------------------------------------------------------------------------------------------
    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            waiting = await _wait_module()
            event = await waiting.wait(self)
        except Exception as exc:  # the wait broke (not the workload): say so instead of a bare traceback
            from airflow_k8s_ml.status import WorkloadState

            self.log.exception("waiting for %s %s/%s failed", self.kind, self.namespace, self.name)
            message = f"waiting for {self._what()} failed: {exc}"
            event = self._event("error", WorkloadState("pending"), message)
        yield TriggerEvent(event.to_payload())

    def _what(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    def _event(
        self,
        outcome: str,
        state: WorkloadState,
        message: str,
        *,
        deadline_phase: str | None = None,
        pods: list[dict[str, Any]] | None = None,
        warnings: list[str] | None = None,
    ) -> WorkloadEvent:
        from airflow_k8s_ml.triggers.events import WorkloadEvent

        cursor = dict(self._relay.cursor) if self._relay is not None else self.log_cursor
        return WorkloadEvent(
            outcome=outcome,
            kind=self.kind,
            name=self.name,
            namespace=self.namespace,
            uid=self._seen_uid,
            state=state.to_payload(),
            message=message,
            deadline_phase=deadline_phase,
            log_cursor=cursor or None,
            pods=pods or [],
            warnings=warnings or [],
        )

    async def _close_relay(self) -> None:
        """Stop the log streams, then persist the last cursor (a clean exit replays nothing)."""
        if self._relay is not None:
            await self._relay.close()
        if self._cursor_writer is not None:
            await self._cursor_writer.flush()
            await self._cursor_writer.close()

    # -- exits ------------------------------------------------------------------------------------------
    async def on_kill(self) -> None:
        """The user killed the task: delete the workload (Foreground), this uid only."""
        if not self.delete_on_kill:
            return
        from airflow_k8s_ml.kube.async_client import get_kube

        kube = await get_kube(self.kubernetes_conn_id)
        what = (self.api_version, self.kind, self.name, self.namespace)
        deletion = kube.delete(*what, propagation="Foreground", uid=self._seen_uid)
        deleted = await asyncio.wait_for(deletion, KILL_TIMEOUT)
        if deleted:
            self.log.info("on_kill: deleting %s (Foreground)", self._what())

    async def cleanup(self) -> None:
        """Every exit, including a triggerer restart: release local resources, never the workload."""
        await self._close_relay()


