"""The wait in the worker, and acting on its outcome: shared by the operators and the sensors.

Why here (public, beside the trigger): a non-deferrable operator and :class:`~airflow_k8s_ml.sensors.
TrainingJobSensor`'s pokes wait with the trigger's deadlines and must fail the same way (the trigger's
message, the failed pods and Warning events in the task log). They look with GETs (:class:`WorkloadLooker`)
and have the look reported by the same pure function as the trigger
(:func:`airflow_k8s_ml.status.wait_report.report`): this module only fetches what the report asks for and
sends what it says, so both modes produce the same :class:`~airflow_k8s_ml.triggers.events.WorkloadEvent`.

What is waited for and how are read through two small protocols (:class:`Waited`, :class:`WaitArgs`), which
the operators' :class:`~airflow_k8s_ml.operators.record.WorkloadRecord` and
:class:`~airflow_k8s_ml.operators.wait_settings.WaitSettings` satisfy, so nothing here imports the Airflow
surface. The clients and the status classifiers are imported inside the functions that need them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from airflow_k8s_ml.config import WaitTimings

if TYPE_CHECKING:
    from airflow_k8s_ml.deadlines import Deadlines
    from airflow_k8s_ml.kube.sync_client import KubeClient
    from airflow_k8s_ml.status import WorkloadState
    from airflow_k8s_ml.status.wait import Target
    from airflow_k8s_ml.status.wait_report import Diagnose, Look
    from airflow_k8s_ml.triggers.events import WorkloadEvent

__all__ = [
    "WaitArgs",
    "Waited",
    "WorkloadLooker",
    "as_deleted",
    "delete_and_wait",
    "follow",
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
#: How long the replay of a vanished workload's last changes may take (the watch's ``timeoutSeconds``).
REPLAY_SECONDS = 1


class Waited(Protocol):
    """The workload waited for (an operator's or a sensor's ``WorkloadRecord``)."""

    @property
    def kind(self) -> str: ...
    @property
    def api_version(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def uid(self) -> str: ...
    def target(self) -> Target: ...


class WaitArgs(Protocol):
    """How to wait (an operator's or a sensor's ``WaitSettings``, parsed once)."""

    @property
    def deadlines(self) -> Deadlines: ...
    @property
    def poll_interval(self) -> float: ...
    @property
    def log_lines(self) -> int: ...


# -- fetching what a report asks for ---------------------------------------------------------------------


def _owned_pods(client: KubeClient, record: Waited, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    from airflow_k8s_ml.status.pod import owned_by
    from airflow_k8s_ml.status.wait import uid_of

    pods = client.pods_of(record.kind, record.name, record.namespace)
    return [p for p in pods if owned_by(p, uid_of(obj))]


def _gather(client: KubeClient, namespace: str, diagnose: Diagnose) -> tuple[list[dict[str, Any]], list[str]]:
    """The diagnostics a report asks for, read synchronously: the chosen pods with their last lines, and the
    Warning events of the workload and its pods."""
    from airflow_k8s_ml.triggers.diagnostics import log_source, pod_report, pods_to_read

    reports = []
    for pod in pods_to_read(diagnose):
        source = log_source(pod)
        lines: list[str] = []
        if source is not None and diagnose.lines:
            try:
                lines = client.log_tail(source[0], namespace, source[1], diagnose.lines).splitlines()
            except Exception as exc:  # diagnostics must never hide the outcome
                lines = [f"(no logs: {exc})"]
        reports.append(pod_report(pod, lines))
    return reports, client.warning_events(diagnose.obj, diagnose.pods, limit=diagnose.warnings)


def as_deleted(client: KubeClient, record: Waited, last_seen: Mapping[str, Any]) -> Mapping[str, Any]:
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


# -- the synchronous wait (deferrable=False, sensor pokes) -------------------------------------------------


class WorkloadLooker:
    """Looks at one workload with GETs; each look is reported by
    :func:`~airflow_k8s_ml.status.wait_report.report`, as the trigger's are.

    Keeps what the report needs between looks (:class:`~airflow_k8s_ml.status.wait_report.Said`) and the
    last object seen: a look that finds the workload gone replays its changes since then
    (:func:`as_deleted`) for its tombstone, so a Job deleted right after it succeeded stays a success.
    ``seen`` is an object already read for this wait (the sensor's first read).
    """

    def __init__(
        self,
        client: KubeClient,
        record: Waited,
        settings: WaitArgs,
        seen: Mapping[str, Any] | None = None,
        log: Any = None,
        timings: WaitTimings | None = None,
    ) -> None:
        from airflow_k8s_ml.status.wait_report import Said

        self.client = client
        self.record = record
        self.settings = settings
        self.timings = timings or WaitTimings.configured()
        self.said = Said()
        self.last_seen = seen
        self.next_look_at: float | None = None
        self.log = log or _log
        self.kueue_absent = False  # the Workload LIST answered 404/403: wait as without a queue
        self.pace = self.timings.pace()

    @property
    def phase(self) -> str | None:
        """The deadline phase of the last look."""
        return self.said.clock.phase

    def _workloads(self, obj: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        """A queued job's Kueue Workloads (LIST by upstream's ``kueue.x-k8s.io/job-uid`` label); None when
        it is not queued, or Kueue is not installed (silently) or did not answer."""
        from airflow_k8s_ml.errors import ApiError
        from airflow_k8s_ml.status.kueue import JOB_UID_LABEL, queued_job_uid

        uid = queued_job_uid(obj)
        if uid is None or self.kueue_absent:
            return None
        try:
            return self.client.list(
                self.client.kueue_api_version(),
                "Workload",
                self.record.namespace,
                label_selector=f"{JOB_UID_LABEL}={uid}",
            )
        except ApiError as exc:
            self.kueue_absent = exc.status in (403, 404)
            return None

    def _look(self, seen: Mapping[str, Any] | None = None) -> Look:
        from airflow_k8s_ml.status.wait_report import Look

        record = self.record
        obj = (
            seen
            if seen is not None
            else self.client.get(record.api_version, record.kind, record.name, record.namespace)
        )
        if obj is None:
            last = self.last_seen
            return Look(None, tombstone=as_deleted(self.client, record, last) if last is not None else None)
        self.last_seen = obj
        return Look(obj, _owned_pods(self.client, record, obj), workloads=self._workloads(obj))

    def _pending(self, queue: str) -> dict[str, Any] | None:
        """The LocalQueue's pending workloads from Kueue's visibility API; any failure: no position."""
        try:
            return self.client.pending_workloads(queue, self.record.namespace)
        except Exception as exc:  # an optional nicety: any failure means "no position"
            _log.debug("no queue position for %s: %s", self.record.name, exc)
            return None

    def _pod_warnings(self, pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The pods' Warning events the report asked for; a failure reads as none (asked again later)."""
        try:
            return self.client.pod_warnings(pods, self.record.namespace)
        except Exception as exc:  # an optional nicety: the wait goes on without the events
            _log.debug("no Warning events for the pods of %s: %s", self.record.name, exc)
            return []

    def _tail(self, pod: str, container: str) -> list[str]:
        """A crash-looping container's last lines (its last instance's: the one that failed)."""
        from airflow_k8s_ml.status.wait_report import STUCK_TAIL_LINES

        namespace = self.record.namespace
        try:
            text = self.client.log_tail(pod, namespace, container, STUCK_TAIL_LINES)
            if not text.strip():
                text = self.client.log_tail(pod, namespace, container, STUCK_TAIL_LINES, previous=True)
        except Exception as exc:
            return [f"(no logs: {exc})"]
        return text.splitlines()[-STUCK_TAIL_LINES:]

    def look(self, seen: Mapping[str, Any] | None = None) -> WorkloadEvent | None:
        """One look: an event if the workload finished, vanished, was replaced or ran out of time.
        ``seen``: the object as someone already read it (a watch's version), instead of a GET."""
        from dataclasses import replace

        from airflow_k8s_ml.status.wait_report import events_ask, position_ask, report
        from airflow_k8s_ml.triggers.diagnostics import final_event

        target, look, now = self.record.target(), self._look(seen), time.time()
        ask = position_ask(target, look, self.said, now=now, every=self.timings.position_refresh)
        if ask is not None:
            self.said = self.said.answered(ask, self._pending(ask.queue))
        if events_ask(look, self.said, now=now, every=self.pace.events_every):
            look = replace(look, events=self._pod_warnings(look.pods or ()))
        told = report(
            target,
            look,
            self.said,
            now=now,
            deadlines=self.settings.deadlines,
            lines=self.settings.log_lines,
            pace=self.pace,
        )
        self.said, self.next_look_at = told.said, told.next_look_at
        for line in told.lines:
            getattr(self.log, line.level)("%s", line.text)
            if line.tail is not None:
                for text in self._tail(*line.tail):
                    self.log.info("  %s", text)
        if not told.decision.done:
            return None
        reports, warnings = (
            _gather(self.client, target.namespace, told.diagnose) if told.diagnose else ([], [])
        )
        return final_event(told, target, reports, warnings)


def poll_until_done(
    client: KubeClient, record: Waited, settings: WaitArgs, log: Any, stop: threading.Event | None = None
) -> WorkloadEvent:
    """Block in the worker until a look yields an event; sleeps at most ``poll_interval``, and no longer
    than the next deadline expiry. ``stop`` set (the task's ``on_kill``, from the SIGTERM handler) ends the
    wait at once with an ``error`` event: what the workload reads like after its owner deleted it is not
    news, and Airflow kills the task process a few seconds after SIGTERM."""
    from airflow_k8s_ml.triggers.events import WorkloadEvent

    looker = WorkloadLooker(client, record, settings, log=log)
    last: str | None = None
    while True:
        event = looker.look()
        if event is not None:
            return event
        if looker.phase != last:
            log.info("%s %s/%s is in phase %s", record.kind, record.namespace, record.name, looker.phase)
            last = looker.phase
        expires = looker.next_look_at
        now = time.time()
        pause = max(0.05, min(settings.poll_interval, (expires - now + 0.01) if expires else 1e9))
        if stop is None:
            time.sleep(pause)
        elif stop.wait(pause):
            return WorkloadEvent.error(record.target(), "the wait was stopped", uid=record.uid)


def follow(
    client: KubeClient, record: Waited, settings: WaitArgs, log: Any, versions: Iterable[Mapping[str, Any]]
) -> WorkloadEvent | None:
    """The looks of :func:`poll_until_done` over versions of the object read elsewhere (a short watch in
    the worker, before deferring): the event of the first version that ends the wait, or None when the
    versions run out first (the caller then defers, and the trigger goes on with the same report). What a
    serving operator does for ``defer_after``: its rollout is decided, and its progress logged, by the same
    pure functions in the worker as in the triggerer."""
    looker = WorkloadLooker(client, record, settings, log=log)
    for version in versions:
        event = looker.look(version)
        if event is not None:
            return event
    return None


# -- finishing ------------------------------------------------------------------------------------------


def settled_state(client: KubeClient, record: Waited, state: WorkloadState) -> WorkloadState:
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


def delete_and_wait(client: KubeClient, record: Waited, log: Any) -> None:
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


def with_diagnostics(client: KubeClient, record: Waited, event: WorkloadEvent, lines: int) -> WorkloadEvent:
    """The event, with its pods read again if it carries none with an exit code or log lines.

    Why: the trigger diagnoses from its pod watch, which can lag the workload watch by a few milliseconds -
    a Job already Failed while its pod still looks Running. By the time the worker resumes the pods have
    settled, so one synchronous read recovers the exit code and last lines the message should name (the
    pods chosen as the report chooses them, :class:`~airflow_k8s_ml.status.wait_report.Diagnose`).
    """
    from dataclasses import replace

    from airflow_k8s_ml.status.wait_report import Diagnose
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
        asked = Diagnose.of(event.outcome, obj, _owned_pods(client, record, obj), lines)
        reports, warnings = _gather(client, record.namespace, asked)
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
    record: Waited,
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
    from airflow_k8s_ml.triggers.diagnostics import event_report

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
