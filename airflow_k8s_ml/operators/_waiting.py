"""Waiting for a workload and acting on the outcome: shared by the training operators and the sensor.

Why shared: both wait with the same trigger and phased deadlines, and both must fail the same way (the
trigger's message, the failed pods and Warning events in the task log). The non-deferrable mode polls in
the worker with the same pure pieces the trigger uses (``status.classify``, ``deadline_phase``,
:func:`~airflow_k8s_ml.triggers.deadlines.check_deadlines`, the trigger's diagnostics), so both modes
produce the same :class:`~airflow_k8s_ml.triggers.events.WorkloadEvent`.

Only imported at execute time (parse-time validation uses :func:`~._args.check_wait_args`); the trigger,
the clients and the classifiers are still imported inside the functions that need them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from airflow_k8s_ml.operators._args import PLACEHOLDER, parse_deadline, to_timedelta

if TYPE_CHECKING:
    from airflow_k8s_ml.kube.sync_client import KubeClient
    from airflow_k8s_ml.operators._adopt import WorkloadRecord
    from airflow_k8s_ml.status import WorkloadState
    from airflow_k8s_ml.triggers.deadlines import Deadlines
    from airflow_k8s_ml.triggers.events import WorkloadEvent
    from airflow_k8s_ml.triggers.workload import WorkloadTrigger

__all__ = [
    "WaitSettings",
    "delete_and_wait",
    "evaluate_once",
    "poll_until_done",
    "raise_for_event",
    "settled_state",
    "with_diagnostics",
]

_log = logging.getLogger(__name__)

#: Reads (and the pause before each) waiting for a succeeded workload's completionTime (settled_state).
SETTLE_READS = 10
SETTLE_PAUSE = 0.1
#: How long a deadline expiry waits for the Foreground deletion to finish (pods gone) before failing anyway.
DELETE_WAIT_SECONDS = 60.0


@dataclass(frozen=True)
class WaitSettings:
    """The validated waiting arguments of an operator or sensor (budgets as timedeltas)."""

    kubernetes_conn_id: str
    admission: timedelta | None = None
    startup: timedelta | None = None
    run: timedelta | None = None
    overall: timedelta | None = None
    overall_at: datetime | None = None
    poll_interval: float = 30.0
    stream_logs: bool = True
    log_lines: int = 50

    @classmethod
    def build(
        cls,
        *,
        kubernetes_conn_id: str,
        admission_timeout: Any,
        startup_timeout: Any,
        run_timeout: Any,
        deadline: Any,
        poll_interval: Any,
        stream_logs: bool,
        log_lines: Any,
    ) -> WaitSettings:
        """Validate the raw arguments; a templated ``deadline`` (parse-time placeholder) counts as none."""
        from airflow_k8s_ml.manifests.validation import check_int

        overall, overall_at = parse_deadline(None if deadline == PLACEHOLDER else deadline)
        interval = to_timedelta(poll_interval, "poll_interval")
        return cls(
            kubernetes_conn_id=kubernetes_conn_id,
            admission=to_timedelta(admission_timeout, "admission_timeout"),
            startup=to_timedelta(startup_timeout, "startup_timeout"),
            run=to_timedelta(run_timeout, "run_timeout"),
            overall=overall,
            overall_at=overall_at,
            poll_interval=interval.total_seconds() if interval is not None else 30.0,
            stream_logs=bool(stream_logs),
            log_lines=check_int(log_lines, "log_lines", minimum=0),
        )

    def deadlines(self) -> Deadlines:
        from airflow_k8s_ml.triggers.deadlines import Deadlines

        return Deadlines(self.admission, self.startup, self.run, self.overall, self.overall_at)

    def trigger(
        self, record: WorkloadRecord, *, delete_on_kill: bool, try_number: int | None = None
    ) -> WorkloadTrigger:
        """The deferral target. Deadlines count from the attempt's submission, so an adopting retry keeps
        the budget the crashed worker started instead of getting a fresh one. No log cursor is passed:
        a first deferral and an adopting retry both relay the workload's log from its start (into this
        try's log); a restarted trigger of the same ``try_number`` resumes after the cursor it persisted
        on the workload."""
        from airflow_k8s_ml.triggers.workload import WorkloadTrigger

        return WorkloadTrigger(
            kind=record.kind,
            api_version=record.api_version,
            name=record.name,
            namespace=record.namespace,
            uid=record.uid,
            kubernetes_conn_id=self.kubernetes_conn_id,
            deadlines=self.deadlines().to_payload(),
            task_started_at=record.submitted_at,
            stream_logs=self.stream_logs,
            log_cursor=None,
            poll_interval=self.poll_interval,
            delete_on_kill=delete_on_kill,
            try_number=try_number,
        )


# -- synchronous wait (deferrable=False) -------------------------------------------------------------------


def _uid(obj: Mapping[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("uid") or "")


def _event(
    record: WorkloadRecord, outcome: str, state: WorkloadState, message: str, **extra: Any
) -> WorkloadEvent:
    from airflow_k8s_ml.triggers.events import WorkloadEvent

    return WorkloadEvent(
        outcome=outcome,
        kind=record.kind,
        name=record.name,
        namespace=record.namespace,
        uid=record.uid,
        state=state.to_payload(),
        message=message,
        **extra,
    )


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


def evaluate_once(
    client: KubeClient, record: WorkloadRecord, settings: WaitSettings, clock: Any
) -> WorkloadEvent | None:
    """One look at the workload: an event if it finished, vanished or ran out of time, else None."""
    from airflow_k8s_ml.status import WorkloadState, classify, deadline_phase
    from airflow_k8s_ml.status.pod import owned_by
    from airflow_k8s_ml.triggers.deadlines import check_deadlines, phase_hints, phase_reason
    from airflow_k8s_ml.triggers.diagnostics import failure_message

    what = f"{record.kind} {record.namespace}/{record.name}"
    obj = client.get(record.api_version, record.kind, record.name, record.namespace)
    if obj is None:
        return _event(record, "error", WorkloadState("pending"), f"{what} was deleted while waiting")
    if record.uid and _uid(obj) != record.uid:
        message = f"{what} was replaced (uid {_uid(obj)}, waited for {record.uid})"
        return _event(record, "error", classify(obj, record.kind), message)
    state = classify(obj, record.kind)
    pods = [p for p in client.pods_of(record.kind, record.name, record.namespace) if owned_by(p, _uid(obj))]
    if state.succeeded:
        return _event(record, "succeeded", state, f"{what} {state.summary()}")
    if state.failed:
        reports, warnings = _diagnose(client, obj, pods, settings.log_lines, every_pod=False)
        message = failure_message(record.kind, record.namespace, record.name, state, reports)
        return _event(record, "failed", state, message, pods=reports, warnings=warnings)
    now = time.time()
    phase = deadline_phase(state, pods)
    hint_since, hint_running = phase_hints(phase, obj, pods)
    clock.observe(phase, now, hint_since=hint_since, hint_running=hint_running)
    expiry = check_deadlines(
        settings.deadlines(),
        now=now,
        task_started_at=record.submitted_at,
        phase=phase,
        phase_since=clock.since,
        running_since=clock.running_since,
        reason=phase_reason(phase, state, pods),
    )
    if expiry is None:
        return None
    reports, warnings = _diagnose(client, obj, pods, settings.log_lines, every_pod=True)
    return _event(
        record,
        "deadline",
        state,
        expiry.message,
        deadline_phase=expiry.phase,
        pods=reports,
        warnings=warnings,
    )


def poll_until_done(
    client: KubeClient, record: WorkloadRecord, settings: WaitSettings, log: Any
) -> WorkloadEvent:
    """Block in the worker until :func:`evaluate_once` yields an event; sleeps at most ``poll_interval``, and
    no longer than the next deadline expiry."""
    from airflow_k8s_ml.triggers.deadlines import PhaseClock, next_expiry_at

    clock = PhaseClock()
    deadlines = settings.deadlines()
    last: str | None = None
    while True:
        event = evaluate_once(client, record, settings, clock)
        if event is not None:
            return event
        if clock.phase != last:
            log.info("%s %s/%s is in phase %s", record.kind, record.namespace, record.name, clock.phase)
            last = clock.phase
        expires = next_expiry_at(
            deadlines,
            task_started_at=record.submitted_at,
            phase=clock.phase or "admission",
            phase_since=clock.since,
            running_since=clock.running_since,
        )
        now = time.time()
        time.sleep(max(0.05, min(settings.poll_interval, (expires - now + 0.01) if expires else 1e9)))


# -- finishing ------------------------------------------------------------------------------------------


def settled_state(client: KubeClient, record: WorkloadRecord, state: WorkloadState) -> WorkloadState:
    """The final success state with the controller's completion time.

    Why: a Job is already succeeded at ``SuccessCriteriaMet``, a moment before the controller writes
    ``Complete`` and ``completionTime``, and the trigger may report in between. A few quick reads settle it.
    """
    from airflow_k8s_ml.status import classify

    for _ in range(SETTLE_READS):
        if state.details.get("completionTime"):
            return state
        time.sleep(SETTLE_PAUSE)
        obj = client.get(record.api_version, record.kind, record.name, record.namespace)
        if obj is None or _uid(obj) != record.uid:
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

    from airflow_k8s_ml.status.pod import owned_by
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
        pods = [
            p for p in client.pods_of(record.kind, record.name, record.namespace) if owned_by(p, _uid(obj))
        ]
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
    from airflow_k8s_ml.operators._outcome import event_report

    what = f"{record.kind} {record.namespace}/{record.name}"
    event = with_diagnostics(client, record, event, lines)
    if event.outcome in ("failed", "deadline"):
        log.error("%s", event_report(what, event.workload_state, event.pods, event.warnings))
    if delete:
        delete_and_wait(client, record, log)
    if event.outcome == "deadline":
        raise DeadlineExceeded(event.deadline_phase or "overall", event.message)
    if event.outcome == "failed":
        raise WorkloadFailed(event.message)
    raise K8sMLError(event.message or f"waiting for {what} failed")
