"""The waiting arguments of an operator or sensor, parsed once: :class:`WaitSettings`, and
:func:`check_wait_args`, the same parse at DAG parse time with templated values left out.

Why a module of its own: every workload operator and the sensor run this check when a DAG file is parsed,
in each dag-processor fork; the waiting itself (:mod:`airflow_k8s_ml.triggers.sync_wait` in the worker,
:class:`~airflow_k8s_ml.triggers.workload.WorkloadTrigger` deferred) is only needed in ``execute``, so its
code is not imported on every parse. The provider's waiting *options* (``[airflow_k8s_ml]``) are parsed
once for both waits by :meth:`airflow_k8s_ml.config.WaitTimings.configured`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.deadlines import Deadlines, to_timedelta
from airflow_k8s_ml.k8s.record import Record
from airflow_k8s_ml.operators.templating import PLACEHOLDER, is_templated

if TYPE_CHECKING:
    from airflow_k8s_ml.operators.record import WorkloadRecord
    from airflow_k8s_ml.triggers.workload import WorkloadTrigger

__all__ = ["WaitSettings", "check_wait_args"]


def _given(value: Any, templated_ok: bool) -> Any:
    """The value to parse: None for a template not rendered yet (parse time) or its placeholder."""
    if templated_ok and (is_templated(value) or value == PLACEHOLDER):
        return None
    return value


class WaitSettings(Record):
    """The waiting arguments of an operator or sensor, parsed once (after templating). A named tuple: this
    module is imported at DAG parse time (:func:`check_wait_args`)."""

    kubernetes_conn_id: str
    deadlines: Deadlines = Deadlines()
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
        max_disruptions: Any = None,
        templated_ok: bool = False,
    ) -> WaitSettings:
        """Parse the raw arguments; errors name the argument. ``templated_ok`` (parse time): templated
        values are left out, to be parsed once rendered; otherwise (run time) an ``admission_timeout`` or
        ``startup_timeout`` not set gets the provider's default budget (:func:`~airflow_k8s_ml.config.
        default_budgets`)."""
        from airflow_k8s_ml.manifests.validation import check_int

        deadlines = Deadlines.parse(
            admission_timeout=_given(admission_timeout, templated_ok),
            startup_timeout=_given(startup_timeout, templated_ok),
            run_timeout=_given(run_timeout, templated_ok),
            deadline=_given(deadline, templated_ok),
            max_disruptions=_given(max_disruptions, templated_ok),
        )
        if not templated_ok:  # at run time: the default budgets for the ones not set (never endless)
            from airflow_k8s_ml.config import default_budgets

            deadlines = deadlines.with_defaults(**default_budgets())
        interval = to_timedelta(_given(poll_interval, templated_ok), "poll_interval")
        return cls(
            kubernetes_conn_id=kubernetes_conn_id,
            deadlines=deadlines,
            poll_interval=interval.total_seconds() if interval is not None else 30.0,
            stream_logs=bool(stream_logs),
            log_lines=check_int(log_lines, "log_lines", minimum=0),
        )

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
            deadlines=self.deadlines,
            task_started_at=record.submitted_at,
            stream_logs=self.stream_logs,
            log_cursor=None,
            poll_interval=self.poll_interval,
            delete_on_kill=delete_on_kill,
            try_number=try_number,
        )


def check_wait_args(
    *,
    admission_timeout: Any,
    startup_timeout: Any,
    run_timeout: Any,
    deadline: Any,
    poll_interval: Any,
    log_lines: Any,
) -> None:
    """The waiting arguments checked at DAG parse time, by the same parse (templated ones left out)."""
    WaitSettings.build(
        kubernetes_conn_id="",
        admission_timeout=admission_timeout,
        startup_timeout=startup_timeout,
        run_timeout=run_timeout,
        deadline=deadline,
        poll_interval=poll_interval,
        stream_logs=True,
        log_lines=log_lines,
        templated_ok=True,
    )
