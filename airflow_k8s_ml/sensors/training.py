"""``TrainingJobSensor``: wait for an existing Job, PyTorchJob or TrainJob (by name) with the operators'
trigger and phased deadlines.

Why a sensor next to the operators: a workload launched elsewhere (another DAG, a CI system, ``kubectl``)
still deserves the deferrable wait, the live logs, the deadlines and the failure message of our operators.
Unlike them it does not own the workload: it never deletes it - not on a deadline, not on kill.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue

from airflow_k8s_ml.errors import K8sMLError, ValidationError
from airflow_k8s_ml.k8s.kinds import WORKLOAD_KINDS
from airflow_k8s_ml.manifests.formats import validate_name, validate_namespace
from airflow_k8s_ml.operators.templating import is_templated
from airflow_k8s_ml.operators.wait_settings import WaitSettings, check_wait_args

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_k8s_ml.kube.sync_client import KubeClient
    from airflow_k8s_ml.operators.record import WorkloadRecord
    from airflow_k8s_ml.triggers.events import WorkloadEvent
    from airflow_k8s_ml.triggers.sync_wait import WorkloadLooker

__all__ = ["TrainingJobSensor"]

#: kind -> apiVersion of the workloads this sensor understands: the training kinds.
KINDS = {k.kind: k.api_version for k in WORKLOAD_KINDS if k.training}


class TrainingJobSensor(BaseSensorOperator):
    """Succeed when the Job/PyTorchJob/TrainJob ``namespace/name`` succeeds; fail with the trigger's diagnosis
    when it fails or when an Airflow-side deadline expires (the workload is left alone).

    Returns (XCom) the same dict as the training operators (``attempts`` from the run label, 1 if absent).

    :param name: the workload's name (templated).
    :param kind: ``Job`` (default), ``PyTorchJob`` or ``TrainJob``.
    :param namespace: its namespace (templated); None: the connection's namespace.
    :param admission_timeout: / ``startup_timeout`` / ``run_timeout``: phase budgets (timedelta or seconds),
        phases timed from the objects' own timestamps, so a workload already stuck for an hour is late now.
    :param deadline: overall budget from the sensor's first try (timedelta) or an absolute time (templated).
    :param deferrable: wait in the triggerer (default); otherwise poke every ``poll_interval`` seconds.
    """

    template_fields: Sequence[str] = ("name", "namespace", "deadline")
    ui_color = "#dbe9f6"

    def __init__(
        self,
        *,
        name: str,
        kind: str = "Job",
        namespace: str | None = None,
        kubernetes_conn_id: str = "kubernetes_default",
        admission_timeout: Any = None,
        startup_timeout: Any = None,
        run_timeout: Any = None,
        deadline: Any = None,
        deferrable: bool = True,
        poll_interval: float = 30.0,
        stream_logs: bool = True,
        log_lines: int = 50,
        **kwargs: Any,
    ) -> None:
        check_wait_args(  # before the base class reads poll_interval: an error names the argument written
            admission_timeout=admission_timeout,
            startup_timeout=startup_timeout,
            run_timeout=run_timeout,
            deadline=deadline,
            poll_interval=poll_interval,
            log_lines=log_lines,
        )
        super().__init__(poke_interval=poll_interval, **kwargs)
        if kind not in KINDS:
            raise ValidationError("kind", f"must be one of {', '.join(KINDS)}; got {kind!r}")
        self.name = name
        self.kind = kind
        self.namespace = namespace
        self.kubernetes_conn_id = kubernetes_conn_id
        self.admission_timeout = admission_timeout
        self.startup_timeout = startup_timeout
        self.run_timeout = run_timeout
        self.deadline = deadline
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.stream_logs = stream_logs
        self.log_lines = log_lines
        self._record: WorkloadRecord | None = None
        self._looker: WorkloadLooker | None = None
        self._first_seen: dict[str, Any] | None = None
        self._wait_settings: WaitSettings | None = None
        self._validate(templated_ok=True)

    def _validate(self, *, templated_ok: bool) -> None:
        """Static names at parse time (templated ones skipped), again once rendered (with the deadlines,
        by :meth:`_settings`)."""
        if not (templated_ok and is_templated(self.name)):
            validate_name(self.kind, self.name, "name")
        if self.namespace is not None and not (templated_ok and is_templated(self.namespace)):
            validate_namespace(self.namespace)

    def _settings(self) -> WaitSettings:
        """The waiting arguments, parsed once rendered (execute time), then kept."""
        if self._wait_settings is None:
            self._validate(templated_ok=False)
            self._wait_settings = self._parse_settings()
        return self._wait_settings

    def _parse_settings(self) -> WaitSettings:
        return WaitSettings.build(
            kubernetes_conn_id=self.kubernetes_conn_id,
            admission_timeout=self.admission_timeout,
            startup_timeout=self.startup_timeout,
            run_timeout=self.run_timeout,
            deadline=self.deadline,
            poll_interval=self.poll_interval,
            stream_logs=self.stream_logs,
            log_lines=self.log_lines,
        )

    # -- Airflow entry points -------------------------------------------------------------------------------
    def execute(self, context: Context) -> Any:
        settings = self._settings()
        if not self.deferrable:
            return super().execute(context)
        found = self.poke(context)
        if found:
            return found.xcom_value if isinstance(found, PokeReturnValue) else None
        record = self._target(context)
        self.log.info("waiting in the triggerer for %s %s/%s", record.kind, record.namespace, record.name)
        self.defer(
            trigger=settings.trigger(record, delete_on_kill=False),
            method_name="execute_complete",
            kwargs={"record": record.to_dict()},
            timeout=timedelta(seconds=self.timeout),  # the sensor's own timeout stays a backstop
        )

    def poke(self, context: Context) -> bool | PokeReturnValue:
        """One look, decided as the trigger decides (``status.decide``: state, tombstone, deadlines)."""
        from airflow_k8s_ml.triggers.sync_wait import WorkloadLooker

        record = self._target(context)
        if self._looker is None:
            self._looker = WorkloadLooker(self._client(), record, self._settings(), seen=self._first_seen)
        event = self._looker.look()
        if event is None:
            return False
        return PokeReturnValue(is_done=True, xcom_value=self._finish(record, event))

    def execute_complete(
        self, context: Context, event: Mapping[str, Any], record: Mapping[str, Any] | None = None
    ) -> Any:
        from airflow_k8s_ml.operators.record import WorkloadRecord
        from airflow_k8s_ml.triggers.events import WorkloadEvent

        target = WorkloadRecord.from_dict(record) or self._target(context)
        return self._finish(target, WorkloadEvent.from_payload(event))

    # -- helpers --------------------------------------------------------------------------------------------
    def _client(self) -> KubeClient:
        from airflow_k8s_ml.kube.sync_client import KubeClient

        return KubeClient(self.kubernetes_conn_id, self.namespace)

    def _target(self, context: Context) -> WorkloadRecord:
        """The workload as first seen (its uid pins the wait: a same-name replacement is an error)."""
        if self._record is not None:
            return self._record
        from airflow_k8s_ml.manifests.naming import ATTEMPT_LABEL
        from airflow_k8s_ml.operators.annotations import RESUMED_FROM_ANNOTATION
        from airflow_k8s_ml.operators.record import WorkloadRecord

        client = self._client()
        namespace = self.namespace or client.namespace
        obj = client.get(KINDS[self.kind], self.kind, self.name, namespace)
        if obj is None:
            raise K8sMLError(f"{self.kind} {namespace}/{self.name} not found")
        self._first_seen = obj  # its tombstone if it is deleted before the first look
        meta = obj.get("metadata") or {}
        attempt = str((meta.get("labels") or {}).get(ATTEMPT_LABEL, "1"))
        self._record = WorkloadRecord(
            kind=self.kind,
            api_version=KINDS[self.kind],
            name=self.name,
            namespace=namespace,
            uid=str(meta.get("uid", "")),
            attempt=int(attempt) if attempt.isdigit() else 1,
            submitted_at=self._started_at(context),
            resumed_from=(meta.get("annotations") or {}).get(RESUMED_FROM_ANNOTATION),
        )
        return self._record

    def _started_at(self, context: Context) -> float:
        """When the wait began (the overall deadline's base): a rescheduled sensor's first try, else now."""
        if self.reschedule:
            ti = context.get("ti")
            first = ti.get_first_reschedule_date(context) if ti is not None else None
            if first is not None:
                return float(first.timestamp())
        return time.time()

    def _finish(self, record: WorkloadRecord, event: WorkloadEvent) -> dict[str, Any]:
        from airflow_k8s_ml.operators.outcome import result_payload
        from airflow_k8s_ml.triggers.sync_wait import raise_for_event, settled_state

        client = self._client()
        if event.outcome != "succeeded":
            raise_for_event(client, record, event, self.log, delete=False, lines=self.log_lines)
        self.log.info("%s %s/%s succeeded", record.kind, record.namespace, record.name)
        state = settled_state(client, record, event.workload_state)
        return result_payload(record.identity(), state, record.attempt, record.resumed_from)
