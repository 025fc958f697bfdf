"""``BatchInferenceCronJobOperator``: keep a scheduled batch-prediction CronJob at its desired state, and
optionally run it now.

Why a CronJob and an Airflow task together: the schedule then lives in the cluster (it keeps firing when
Airflow is down), while the DAG owns *what* runs (model, input, output, image) and re-applies it whenever the
model changes. ``run_now=True`` creates a Job from the CronJob's template exactly like
``kubectl create job --from=cronjob/<name>`` and waits for it with the shared ``WorkloadTrigger`` and phased
deadlines, for a first run right after a deploy or a backfill of today's batch.

The run-now Job goes through the runner the training operators use (:class:`~airflow_k8s_ml.operators.
_runner._Runner`): the same run key, submit-or-adopt (``task_state_store`` first, the run labels as
fallback: a retry re-attaches to a Job of this task instance that is still running, returns the result of
one that succeeded, and launches a new attempt after a failed one), the same deadlines parsed once by
``Deadlines`` (templated, ``deadline`` also an absolute time), the same trigger and the same failure
(``raise_for_event``: diagnostics, the Job deleted on an expired deadline).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.manifests.cron import next_schedule_time, validate_schedule
from airflow_k8s_ml.manifests.formats import validate_name, validate_namespace
from airflow_k8s_ml.manifests.validation import check_bool, check_non_empty_str
from airflow_k8s_ml.operators import _defer_state
from airflow_k8s_ml.operators._args import PLACEHOLDER, seconds_or_zero
from airflow_k8s_ml.operators._runner import _Runner
from airflow_k8s_ml.operators._serving import (
    CronJobArgs,
    batch_spec,
    check_cronjob_args,
    neutral,
    object_labels,
)

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_k8s_ml.kube.sync_client import KubeClient
    from airflow_k8s_ml.manifests.naming import RunKey
    from airflow_k8s_ml.operators.record import WorkloadRecord
    from airflow_k8s_ml.operators.wait_settings import WaitSettings

__all__ = ["BatchInferenceCronJobOperator"]

_SCHEDULE_PLACEHOLDER = "0 0 * * *"


class BatchInferenceCronJobOperator(_Runner):
    """Apply a batch-inference CronJob idempotently; with ``run_now=True`` also run it once and wait.

    Returns (XCom) ``{"cronjob", "namespace", "action", "schedule", "time_zone", "suspend",
    "next_schedule_time", "manual_job"}``; ``manual_job`` is None without ``run_now``, else the Job's result
    (``name``, ``uid``, ``state``, ``reason``, ``started_at``, ``finished_at``, ``duration_seconds``,
    ``attempts``, ``output_uri``).

    :param name: CronJob name (at most 52 characters; its Jobs append a suffix), templated.
    :param schedule: five-field cron or ``@daily``-style; ``TZ=`` in it is refused as the API server does.
    :param time_zone: IANA zone for the schedule (``spec.timeZone``); None = the controller's (UTC).
    :param model_uri: checkpoint URI or the checkpoint gate's XCom (templated); env ``MODEL_URI``.
    :param input_uri, output_uri: batch input and output prefixes (templated); env ``INPUT_URI``,
        ``OUTPUT_URI``.
    :param image, command, args, env, secret_env, env_from, requests, limits, gpus, pod_options:
        the container, as for ``InferenceDeploymentOperator``.
    :param concurrency_policy: ``Forbid`` (default: two runs writing one output prefix race), ``Allow``,
        ``Replace``.
    :param starting_deadline_seconds, successful_jobs_history_limit, failed_jobs_history_limit, suspend:
        the CronJob fields of those names.
    :param backoff_limit, active_deadline_seconds, ttl_seconds_after_finished: the Jobs' fields.
    :param run_now: also create a Job from the CronJob now and wait for it.
    :param admission_timeout, startup_timeout, run_timeout: Airflow-side budgets of the run-now Job's
        phases (timedelta or seconds, templated); ``deadline``: its overall budget, or an absolute time
        (datetime or ISO 8601, templated), as on the training operators. On expiry the Job is deleted and
        the task fails naming the budget.
    :param defer_after: follow the run-now Job from the worker this long (timedelta or s; 0: defer at
        once) before deferring, as ``InferenceDeploymentOperator`` follows a rollout. A scoring run done
        sooner costs no hand-over to the triggerer and no second worker start (2-3 s on the HA stack,
        ``bench/dag_overhead.py``); its pods' lines are logged when it has ended. A longer one is deferred,
        and the trigger relays its lines from the first.
    """

    template_fields: Sequence[str] = (
        "name",
        "namespace",
        "schedule",
        "time_zone",
        "model_uri",
        "input_uri",
        "output_uri",
        "image",
        "command",
        "args",
        "env",
        "labels",
        "annotations",
        "admission_timeout",
        "startup_timeout",
        "run_timeout",
        "deadline",
    )
    ui_color = "#efe6f5"
    renamed_arguments = MappingProxyType({"env_from_secrets": "env_from"})
    # The arguments read by name, for type checkers (kept by ``_keep_arguments`` from the signature).
    name: str
    namespace: str | None
    schedule: str
    output_uri: str

    def __init__(
        self,
        *,
        name: str,
        schedule: str,
        model_uri: str | Mapping[str, Any],
        input_uri: str,
        output_uri: str,
        image: str,
        namespace: str | None = None,
        time_zone: str | None = None,
        command: Sequence[str] | None = None,
        args: Sequence[str] | None = None,
        env: Mapping[str, Any] | None = None,
        secret_env: Mapping[str, str] | None = None,
        env_from: Sequence[str] | None = None,
        requests: Mapping[str, Any] | None = None,
        limits: Mapping[str, Any] | None = None,
        gpus: int | None = None,
        pod_options: Mapping[str, Any] | None = None,
        concurrency_policy: str = "Forbid",
        starting_deadline_seconds: int | None = None,
        successful_jobs_history_limit: int = 3,
        failed_jobs_history_limit: int = 1,
        suspend: bool = False,
        backoff_limit: int = 2,
        active_deadline_seconds: int | None = None,
        ttl_seconds_after_finished: int | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        run_now: bool = False,
        admission_timeout: timedelta | float | str | None = None,
        startup_timeout: timedelta | float | str | None = None,
        run_timeout: timedelta | float | str | None = None,
        deadline: timedelta | datetime | str | None = None,
        stream_logs: bool = True,
        defer_after: timedelta | float = timedelta(seconds=30),
        kubernetes_conn_id: str = "kubernetes_default",
        env_from_secrets: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._keep_arguments(locals())
        self.run_now = check_bool(run_now, "run_now")
        self.defer_after = seconds_or_zero(defer_after, "defer_after")
        self.kubernetes_conn_id = check_non_empty_str(kubernetes_conn_id, "kubernetes_conn_id")
        self._check_literals(_parse_time_args(self._arguments()))  # a typo fails the DAG import
        self._wait_settings(templated_ok=True)  # the runner's parse, templated budgets left for execute

    def _arguments(self) -> CronJobArgs:
        """The arguments that shape or check the CronJob, read once into a frozen value (rendered in
        ``execute``; at parse time :func:`_parse_time_args` neutralises them)."""
        return CronJobArgs.read(self)

    @staticmethod
    def _check_first(args: CronJobArgs) -> None:
        """Schedule and time zone first (as documented), then the URIs by the rule of the Job form
        (``output_uri`` distinct from ``input_uri``)."""
        from airflow_k8s_ml.operators._batch_uris import check_batch_uris

        validate_schedule(args.schedule, args.time_zone)
        check_batch_uris(args._asdict())

    @classmethod
    def _check_literals(cls, args: CronJobArgs) -> None:
        """Parse time: the arguments by the rule functions, building nothing; ``labels`` (which may not take
        our keys) are judged against the rendered CronJob, so when given it is rendered here too."""
        cls._check_first(args)
        if args.namespace is not None:
            validate_namespace(args.namespace)
        validate_name("CronJob", args.name, "name")
        check_cronjob_args(args)
        if args.labels:
            from airflow_k8s_ml.operators._workload import parse_time_key

            cls._check(args, parse_time_key())

    @classmethod
    def _check(cls, args: CronJobArgs, key: RunKey, namespace: str | None = None) -> dict[str, Any]:
        """The CronJob, rendered and validated (pure): runs before any API call."""
        from airflow_k8s_ml.manifests.batch import build_cronjob

        cls._check_first(args)
        namespace = namespace or args.namespace or "default"
        validate_namespace(namespace)
        labels, annotations = object_labels(key)
        return build_cronjob(batch_spec(args), args.name, namespace, labels, annotations)

    # -- execute ----------------------------------------------------------------------------------------
    def execute(self, context: Context) -> Any:
        self._execute_started = time.time()
        args = self._arguments()
        validate_schedule(args.schedule, args.time_zone)  # before anything else, as documented
        key = self._run_key(context)
        if args.namespace is not None:
            validate_namespace(args.namespace)
        settings = self._wait_settings()
        client = self._client(args.namespace)
        namespace = args.namespace or client.namespace
        cronjob = self._check(args, key, namespace)  # before any API call
        from airflow_k8s_ml.kube.serving_ops import apply_object

        live, action = apply_object(client, cronjob)
        self.log.info("CronJob %s/%s %s (schedule %r)", namespace, self.name, action, self.schedule)
        result = self._cronjob_result(live, action)
        if not self.run_now:
            return result
        return self._run_now(context, client, key, namespace, result, settings)

    def _cronjob_result(self, live: Mapping[str, Any], action: str) -> dict[str, Any]:
        spec = live.get("spec") or {}
        suspended = bool(spec.get("suspend"))
        upcoming = None
        if not suspended:
            upcoming = next_schedule_time(spec["schedule"], spec.get("timeZone"), datetime.now(UTC))
        meta = live.get("metadata") or {}
        return {
            "cronjob": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "action": action,
            "schedule": spec.get("schedule"),
            "time_zone": spec.get("timeZone"),
            "suspend": suspended,
            "next_schedule_time": upcoming.isoformat() if upcoming is not None else None,
            "manual_job": None,
        }

    # -- run now ----------------------------------------------------------------------------------------
    def _run_now(
        self,
        context: Context,
        client: KubeClient,
        key: RunKey,
        namespace: str,
        result: dict[str, Any],
        settings: WaitSettings,
    ) -> Any:
        """Submit-or-adopt the run-now Job through the runner, then wait for it as every workload waits."""
        from airflow_k8s_ml.operators._adopt import Adopt, ReturnResult

        decision = self._decide(context, client, key, namespace, "batch/v1", "Job")
        if isinstance(decision, ReturnResult):
            if decision.cached is not None or decision.workload is None:
                self.log.info("run-now Job already succeeded for this task instance; returning its result")
                result["manual_job"] = dict(decision.cached or {})
                return result
            workload = decision.workload
            self.log.info("run-now Job %s already succeeded for this task instance", workload.name)
            result["manual_job"] = self._job_result(workload.obj, workload.state, workload.attempt)
            return result
        if isinstance(decision, Adopt):
            record = self._adopt(context, decision.workload, namespace, "batch/v1", "Job")
        else:
            record = self._create_run_now(client, key, namespace, decision.attempt)
        self._remember(context, record)
        kwargs = {"record": record.to_dict(), "result": result}
        _defer_state.stash(context, "execute_complete", kwargs)
        event = self._wait(context, client, record, settings, delete_on_kill=True, kwargs=kwargs)
        return self.execute_complete(context, event.to_payload(), **kwargs)

    def _create_run_now(
        self, client: KubeClient, key: RunKey, namespace: str, attempt: int
    ) -> WorkloadRecord:
        """``kubectl create job --from=cronjob/<name>``, labelled with the attempt; its record."""
        from dataclasses import replace

        from airflow_k8s_ml.kube.serving_ops import create_job_from_cronjob
        from airflow_k8s_ml.manifests.batch import job_from_cronjob
        from airflow_k8s_ml.manifests.naming import manual_job_name
        from airflow_k8s_ml.operators.record import WorkloadRecord

        attempt_key = replace(key, attempt=attempt)
        job_name = manual_job_name(self.name, attempt_key)
        submitted_at = time.time()
        job, how = create_job_from_cronjob(
            client,
            self.name,
            namespace,
            job_name,
            lambda cronjob: job_from_cronjob(
                cronjob, job_name, labels=attempt_key.labels(), annotations=attempt_key.annotations()
            ),
        )
        meta = job.get("metadata") or {}
        self.log.info("%s Job %s/%s from cronjob/%s", how, namespace, meta.get("name"), self.name)
        return WorkloadRecord(
            kind="Job",
            api_version="batch/v1",
            name=str(meta.get("name", job_name)),
            namespace=namespace,
            uid=str(meta.get("uid", "")),
            attempt=attempt,
            submitted_at=submitted_at,
        )

    def execute_complete(self, context: Context, event: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
        """The run-now Job finished (or a deadline expired): XCom on success; otherwise the runner's failure
        (diagnostics in the task log, the Job deleted on an expired deadline, the error naming the budget)."""
        from dataclasses import replace

        from airflow_k8s_ml.errors import K8sMLError
        from airflow_k8s_ml.operators.record import WorkloadRecord
        from airflow_k8s_ml.triggers.events import WorkloadEvent
        from airflow_k8s_ml.triggers.sync_wait import raise_for_event

        restored = _defer_state.restore(context, "execute_complete", kwargs)
        result: Mapping[str, Any] = restored.get("result") or {}
        record = WorkloadRecord.from_dict(restored.get("record")) or self._stored(context)
        if record is None:
            raise K8sMLError("resumed without the run-now Job's identity (no record in the event or store)")
        self._record = record
        outcome = WorkloadEvent.from_payload(event)
        if outcome.outcome != "succeeded":
            client = self._client(record.namespace)
            raise_for_event(
                client, record, outcome, self.log, delete=outcome.outcome == "deadline", lines=self.log_lines
            )
        out = dict(result)
        job = {"metadata": {"name": record.name, "namespace": record.namespace, "uid": record.uid}}
        out["manual_job"] = self._job_result(job, outcome.workload_state, record.attempt)
        self._remember(context, replace(record, result=out["manual_job"]))
        self._record = None  # succeeded: nothing for on_kill to delete
        self.log.info("run-now Job %s/%s succeeded", record.namespace, record.name)
        return out

    def _job_result(self, job: Mapping[str, Any], state: Any, attempts: int) -> dict[str, Any]:
        from airflow_k8s_ml.operators.outcome import result_payload

        meta = job.get("metadata") or {}
        identity = {
            "kind": "Job",
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
        }
        payload = result_payload(identity, state, attempts, None)
        payload["output_uri"] = self.output_uri
        return payload


def _parse_time_args(args: CronJobArgs) -> CronJobArgs:
    """Templated strings and XComArgs become placeholders
    (:func:`~airflow_k8s_ml.operators._serving.neutral`); a templated schedule a valid one."""
    out = neutral(args)
    if out.schedule == PLACEHOLDER:
        out = out._replace(schedule=_SCHEDULE_PLACEHOLDER)
    if out.time_zone == PLACEHOLDER:
        out = out._replace(time_zone=None)
    return out
