"""Waiting for a workload in the worker, and acting on the outcome: shared by the operators and the sensors.

Why shared (and public): the training operators and the sensor (:mod:`airflow_k8s_ml.sensors.training`)
wait with the same trigger and deadlines, and must fail the same way (the trigger's message, the failed pods
and Warning events in the task log). The non-deferrable wait and the sensor's poke look with GETs
(:class:`WorkloadLooker`) and decide with the trigger's pure decision (:func:`airflow_k8s_ml.status.decide`),
so both modes produce the same :class:`~airflow_k8s_ml.triggers.events.WorkloadEvent`.

The waiting arguments are parsed once, after templating, into :class:`WaitSettings` (whose
:class:`~airflow_k8s_ml.deadlines.Deadlines` travels to the trigger as it is); :func:`check_wait_args` runs
the same parse at DAG parse time with templated values left out. Both live in
:mod:`~airflow_k8s_ml.operators.wait_settings` (re-exported here), so that parse-time check does not import
this module; the clients, the trigger and the diagnostics are imported inside the functions that need them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn

from airflow_k8s_ml.operators.wait_settings import WaitSettings, check_wait_args

if TYPE_CHECKING:
    from airflow_k8s_ml.kube.sync_client import KubeClient
    from airflow_k8s_ml.operators.record import WorkloadRecord
    from airflow_k8s_ml.status import WorkloadState
    from airflow_k8s_ml.status.clock import PhaseClock
    from airflow_k8s_ml.status.kueue import PositionAsked, QueueState
    from airflow_k8s_ml.status.wait import Decision
    from airflow_k8s_ml.triggers.events import WorkloadEvent

__all__ = [
    "WaitSettings",
    "WorkloadLooker",
    "as_deleted",
    "check_wait_args",
    "delete_and_wait",
    "poll_until_done",
    "raise_for_event",
    "settled_state",
    "with_diagnostics",
]

_log = logging.getLogger(__name__)

#: Reads (and the pause before each) waiting for a succeeded workload's completionTime (settled_state).
SETTLE_READS = 10
SETTLE_PAUSE = 0.1
#: How long an expired deadline waits for the Foreground deletion to finish (pods gone) before failing anyway.
DELETE_WAIT_SECONDS = 60.0


# -- synchronous wait (deferrable=False, sensor pokes) -----------------------------------------------------


def _diagnose(
    client: KubeClient, obj: Mapping[str, Any], pods: list[dict[str, Any]], lines: int, *, every_pod: bool
) -> tuple[list[dict[str, Any]], list[str]]:
    """The trigger's diagnostics, read synchronously: failed pods (``every_pod``: all pods, failed first -
    on a deadline the healthy ones' last lines show how far the work got) with last lines, Warning events."""
    from airflow_k8s_ml.triggers.diagnostics import MAX_PODS, failed_pods, pod_report

    namespace = str((obj.get("metadata") or {}).get("namespace"))
    chosen = failed_pods(pods)
    if every_pod:
        chosen += [p for p in pods if all(p is not c for c in chosen)]
    reports = []
    for pod in chosen[:MAX_PODS]:
        name = str((pod.get("metadata") or {}).get("name"))
        started = bool((pod.get("status") or {}).get("containerStatuses"))
        tail = client.log_tail(name, namespace, lines=min(lines, 20)) if started else ""
        reports.append(pod_report(pod, tail.splitlines()))
    return reports, client.warning_events(obj)


def _owned_pods(client: KubeClient, record: WorkloadRecord, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    from airflow_k8s_ml.status.pod import owned_by
    from airflow_k8s_ml.status.wait import uid_of

    pods = client.pods_of(record.kind, record.name, record.namespace)
    return [p for p in pods if owned_by(p, uid_of(obj))]


#: How long the replay of a vanished workload's last changes may take (the watch's ``timeoutSeconds``).
REPLAY_SECONDS = 1


def as_deleted(client: KubeClient, record: WorkloadRecord, last_seen: Mapping[str, Any]) -> Mapping[str, Any]:
    """The workload's last state before its deletion began: the changes after ``last_seen`` replayed from
    the API server's watch history, so a Job that succeeded and was deleted between two looks (a TTL of 0)
    reads as succeeded. A state written while it was being deleted does not count: a Job failed *by* its
    deletion (its pods killed) was deleted while waiting. Falls back to ``last_seen`` when the history no
    longer reaches back (410) or the replay fails."""
    import json

    from airflow_k8s_ml.kube.resources import resource_for

    version = str((last_seen.get("metadata") or {}).get("resourceVersion") or "")
    if not version:
        return last_seen
    path = resource_for(record.api_version, record.kind).collection_path(record.namespace)
    query = [
        ("watch", "true"),
        ("fieldSelector", f"metadata.name={record.name}"),
        ("resourceVersion", version),
        ("timeoutSeconds", str(REPLAY_SECONDS)),
    ]
    try:
        lines = client.get_raw(path, query).splitlines()
        events = [json.loads(line) for line in lines if line.strip()]
    except Exception as exc:  # a best effort: the last state seen still decides
        _log.warning("could not replay the last changes of %s %s: %s", record.kind, record.name, exc)
        return last_seen
    alive = last_seen
    for event in events:
        obj = event.get("object")
        if event.get("type") in ("MODIFIED", "DELETED") and isinstance(obj, Mapping):
            if not (obj.get("metadata") or {}).get("deletionTimestamp"):
                alive = obj
    return alive


class WorkloadLooker:
    """Looks at one workload with GETs and decides with :func:`airflow_k8s_ml.status.decide`.

    Keeps what a decision needs between looks: the phase clock, and the last object seen. A look that finds
    the workload gone replays its changes since then (:func:`as_deleted`) for its tombstone, so a Job
    deleted right after it succeeded stays a success. ``seen`` is an object already read for this wait (the
    sensor's first read).
    """

    def __init__(
        self,
        client: KubeClient,
        record: WorkloadRecord,
        settings: WaitSettings,
        seen: Mapping[str, Any] | None = None,
        log: Any = None,
    ) -> None:
        self.client = client
        self.record = record
        from airflow_k8s_ml.status.clock import PhaseClock

        self.settings = settings
        self.clock: PhaseClock = PhaseClock()
        self.last_seen = seen
        self.next_look_at: float | None = None
        self.log = log or _log
        self.queue: QueueState | None = None  # a queued job's Kueue Workload, last read
        self.kueue_absent = False  # the Workload LIST answered 404/403: wait as without a queue
        self.position_asked: PositionAsked | None = None  # the visibility API's last ask ...
        self.pending: dict[str, Any] | None = None  # ... and its answer (None: no position known)

    def _queue(self, obj: Mapping[str, Any]) -> QueueState | None:
        """A queued job's Kueue Workload (LIST by upstream's ``kueue.x-k8s.io/job-uid`` label), its changes
        logged once each, as the trigger does; silently None when Kueue is not installed."""
        from airflow_k8s_ml.errors import ApiError
        from airflow_k8s_ml.status.kueue import (
            JOB_UID_LABEL,
            KUEUE_API_VERSION,
            follow,
            queued_job_uid,
            workload_for,
        )

        uid = queued_job_uid(obj)
        if uid is None or self.kueue_absent:
            return None
        record = self.record
        try:
            items = self.client.list(
                KUEUE_API_VERSION, "Workload", record.namespace, label_selector=f"{JOB_UID_LABEL}={uid}"
            )
        except ApiError as exc:
            self.kueue_absent = exc.status in (403, 404)
            return self.queue
        self._ask_position(workload_for(items, uid))
        self.queue, line = follow(self.queue, items, uid, record.target().what, self.pending)
        if line is not None:
            self.log.info("%s", line)
        return self.queue

    def _ask_position(self, found: Mapping[str, Any] | None) -> None:
        """The LocalQueue's pending workloads from Kueue's visibility API, by the trigger's rule
        (:func:`~airflow_k8s_ml.status.kueue.next_position_ask`); any failure: no position, silently."""
        from airflow_k8s_ml.config import get_float
        from airflow_k8s_ml.status.kueue import POSITION_REFRESH, next_position_ask

        try:
            every = get_float("kueue_position_seconds")
        except ValueError:
            every = POSITION_REFRESH
        ask = next_position_ask(found, self.position_asked, time.time(), every)
        if ask is None:
            return
        self.position_asked = ask
        try:
            self.pending = self.client.pending_workloads(ask.queue, self.record.namespace)
        except Exception as exc:  # an optional nicety: any failure means "no position"
            _log.debug("no queue position for %s: %s", self.record.name, exc)
            self.pending = None

    def look(self) -> WorkloadEvent | None:
        """One look: an event if the workload finished, vanished, was replaced or ran out of time."""
        from airflow_k8s_ml.status.wait import Observation, decide

        record = self.record
        obj = self.client.get(record.api_version, record.kind, record.name, record.namespace)
        pods = _owned_pods(self.client, record, obj) if obj is not None else []
        tombstone = None
        if obj is None and self.last_seen is not None:
            tombstone = as_deleted(self.client, record, self.last_seen)
        queue = self._queue(obj) if obj is not None else None
        observed = Observation(obj, pods, tombstone=tombstone, queue=queue)
        decision = decide(
            record.target(), observed, now=time.time(), deadlines=self.settings.deadlines, clock=self.clock
        )
        self.clock, self.next_look_at = decision.clock, decision.next_look_at
        self.last_seen = obj if obj is not None else self.last_seen
        if not decision.done:
            return None
        event = self._event(decision, obj, pods)
        admitted_at = self.queue.admitted_at if self.queue is not None else None
        return replace(event, admitted_at=admitted_at) if admitted_at else event

    def _event(
        self, decision: Decision, obj: Mapping[str, Any] | None, pods: list[dict[str, Any]]
    ) -> WorkloadEvent:
        """The decision as the trigger would report it, diagnosed the trigger's way."""
        from airflow_k8s_ml.triggers.diagnostics import failure_message
        from airflow_k8s_ml.triggers.events import WorkloadEvent

        record = self.record
        if obj is None or decision.verdict not in ("failed", "deadline"):
            return WorkloadEvent.decided(decision, record.target())
        every_pod = decision.verdict == "deadline"
        reports, warnings = _diagnose(self.client, obj, pods, self.settings.log_lines, every_pod=every_pod)
        message = decision.message
        if decision.verdict == "failed":
            message = failure_message(record.kind, record.namespace, record.name, decision.state, reports)
        return WorkloadEvent.decided(
            decision, record.target(), message=message, pods=reports, warnings=warnings
        )


def poll_until_done(
    client: KubeClient, record: WorkloadRecord, settings: WaitSettings, log: Any
) -> WorkloadEvent:
    """Block in the worker until a look yields an event; sleeps at most ``poll_interval``, and no longer
    than the next deadline expiry."""
    looker = WorkloadLooker(client, record, settings, log=log)
    last: str | None = None
    while True:
        event = looker.look()
        if event is not None:
            return event
        if looker.clock.phase != last:
            log.info(
                "%s %s/%s is in phase %s", record.kind, record.namespace, record.name, looker.clock.phase
            )
            last = looker.clock.phase
        expires = looker.next_look_at
        now = time.time()
        time.sleep(max(0.05, min(settings.poll_interval, (expires - now + 0.01) if expires else 1e9)))


# -- finishing ------------------------------------------------------------------------------------------


def settled_state(client: KubeClient, record: WorkloadRecord, state: WorkloadState) -> WorkloadState:
    """The final success state with the controller's completion time.

    Why: a Job is already succeeded at ``SuccessCriteriaMet``, a moment before the controller writes
    ``Complete`` and ``completionTime``, and the trigger may report in between. A few quick reads settle it.
    """
    from airflow_k8s_ml.status import classify
    from airflow_k8s_ml.status.wait import uid_of

    for _ in range(SETTLE_READS):
        if state.details.get("completionTime"):
            return state
        time.sleep(SETTLE_PAUSE)
        obj = client.get(record.api_version, record.kind, record.name, record.namespace)
        if obj is None or uid_of(obj) != record.uid:
            return state
        fresh = classify(obj, record.kind)
        state = fresh if fresh.succeeded else state
    return state


# -- acting on a failure ----------------------------------------------------------------------------------


def delete_and_wait(client: KubeClient, record: WorkloadRecord, log: Any) -> None:
    """Foreground delete (the object stays until its pods are gone), then wait for it: when the task fails,
    nothing of the workload still holds a GPU."""
    if client.delete(record.api_version, record.kind, record.name, record.namespace, uid=record.uid):
        log.info("deleting %s %s/%s (Foreground)", record.kind, record.namespace, record.name)
    if not client.wait_gone(
        record.api_version, record.kind, record.name, record.namespace, DELETE_WAIT_SECONDS
    ):
        log.warning(
            "%s %s/%s still exists after %.0f s",
            record.kind,
            record.namespace,
            record.name,
            DELETE_WAIT_SECONDS,
        )


def with_diagnostics(
    client: KubeClient, record: WorkloadRecord, event: WorkloadEvent, lines: int
) -> WorkloadEvent:
    """The event, with the failed pods read again if it carries none with an exit code or log lines.

    Why: the trigger diagnoses from its pod watch, which can lag the workload watch by a few milliseconds -
    a Job already Failed while its pod still looks Running. By the time the worker resumes the pods have
    settled, so one synchronous read recovers the exit code and last lines the message should name.
    """
    from dataclasses import replace

    from airflow_k8s_ml.triggers.diagnostics import failure_message

    informative = any(
        report.get("exit_code") is not None or report.get("last_lines") for report in event.pods
    )
    if informative or event.outcome not in ("failed", "deadline"):
        return event
    try:
        obj = client.get(record.api_version, record.kind, record.name, record.namespace)
        if obj is None:
            return event
        pods = _owned_pods(client, record, obj)
        reports, warnings = _diagnose(client, obj, pods, lines, every_pod=event.outcome == "deadline")
    except Exception as exc:  # diagnostics must never hide the real error
        _log.warning(
            "could not read diagnostics of %s %s/%s: %s", record.kind, record.namespace, record.name, exc
        )
        return event
    if not reports:
        return replace(event, warnings=warnings or event.warnings)
    relayed = {key.split("/")[0] for key in event.log_cursor or {}}  # replica or replica/container
    for report in reports:  # lines the trigger relayed are in the task log already
        if {str(report.get("replica")), str(report.get("pod"))} & relayed:
            report["relayed"] = True
    message = event.message
    if event.outcome == "failed":
        message = failure_message(record.kind, record.namespace, record.name, event.workload_state, reports)
    return replace(event, pods=reports, warnings=warnings or event.warnings, message=message)


def raise_for_event(
    client: KubeClient,
    record: WorkloadRecord,
    event: WorkloadEvent,
    log: Any,
    *,
    delete: bool,
    lines: int = 20,
) -> NoReturn:
    """Log the diagnostics, clean up as asked (``delete``), then raise the error the outcome calls for.

    deadline -> :class:`DeadlineExceeded` (phase and reason in the message); failed -> :class:`WorkloadFailed`
    (the trigger's message: reason, first failed pod, its last line); error -> :class:`K8sMLError`.
    """
    from airflow_k8s_ml.errors import DeadlineExceeded, K8sMLError, WorkloadFailed
    from airflow_k8s_ml.operators.outcome import event_report

    what = f"{record.kind} {record.namespace}/{record.name}"
    event = with_diagnostics(client, record, event, lines)
    if event.outcome in ("failed", "deadline"):
        log.error("%s", event_report(what, event.workload_state, event.pods, event.warnings))
    if delete:
        delete_and_wait(client, record, log)
    if event.outcome == "deadline":
        raise DeadlineExceeded(event.expired_deadline or "deadline", event.message)
    if event.outcome == "failed":
        raise WorkloadFailed(event.message)
    raise K8sMLError(event.message or f"waiting for {what} failed")
