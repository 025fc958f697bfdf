"""``BatchInferenceJobOperator``: the batch-inference Job, run once per DAG run (Airflow owns the schedule).

Why the same runner as :class:`~airflow_k8s_ml.operators.training.FineTuneJobOperator`: a batch-prediction
run is a one-pod batch/v1 Job like a fine-tune, and everything around it - submit-or-adopt, phased deadlines,
live logs, diagnostics on failure, the result cached for retries - is the same. Its
:data:`BATCH_INFERENCE_JOB` kind renders the fine-tune's Job and only adds the three URIs: it validates them
(``s3://`` or ``file://``), injects them as ``MODEL_URI``/``INPUT_URI``/``OUTPUT_URI`` (the env
``workloads.batch_predict`` and the CronJob form read), and adds ``output_uri`` to the XCom so downstream
tasks find the predictions of *this* run. The operator defaults the command to the reference workload.

The CronJob form (:class:`~airflow_k8s_ml.operators.batch_inference.BatchInferenceCronJobOperator`) renders
the same container; ``docs/serving.md`` ("CronJob or Airflow-scheduled Job?") says when to pick which.

Import-light like the other operators: nothing here imports the Kubernetes client or boto3.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.k8s.record import Record
from airflow_k8s_ml.operators._args import PLACEHOLDER
from airflow_k8s_ml.operators._batch_uris import (
    URI_ENV,
    check_batch_uri,
    check_batch_uris,
    check_static_scheme,
    uri_text,
)
from airflow_k8s_ml.operators._kind import WorkloadArgs, WorkloadKind
from airflow_k8s_ml.operators._workload import _WorkloadOperator
from airflow_k8s_ml.operators.training import JOB_REFUSES_BUDGET, check_job, render_job

if TYPE_CHECKING:  # the signature's annotations are text; these are for type checkers
    from datetime import datetime, timedelta

__all__ = [
    "BATCH_INFERENCE_JOB",
    "DEFAULT_COMMAND",
    "URI_ENV",
    "BatchInferenceJobOperator",
    "check_batch_uri",
    "check_batch_uris",
]

#: The reference batch workload; it reads its URIs from the injected env when no flags are given.
DEFAULT_COMMAND = ("python", "-m", "airflow_k8s_ml.workloads.batch_predict")


class BatchJobArguments(Record):
    """The batch-inference Job's own arguments, as its operator's signature declares them: the three URIs
    and the fine-tune Job's."""

    model_uri: str | Mapping[str, Any]
    input_uri: str
    output_uri: str
    backoff_limit: int = 0
    restart_policy: str = "Never"


def check_uris(args: WorkloadArgs[BatchJobArguments]) -> None:
    """The URIs, at parse time (placeholders skipped) and in ``execute`` before the first API call; with a
    raw ``manifest=`` too (its containers get them)."""
    check_batch_uris(args.own._asdict())


def uri_env(args: WorkloadArgs[BatchJobArguments]) -> dict[str, str]:
    """``MODEL_URI``/``INPUT_URI``/``OUTPUT_URI`` (a user env setting one of them is refused, naming it; a raw
    ``manifest=`` gets them in every container)."""
    return {var: uri_text(getattr(args.own, field), field) or PLACEHOLDER for field, var in URI_ENV.items()}


def with_output(args: WorkloadArgs[BatchJobArguments], result: dict[str, Any]) -> dict[str, Any]:
    """The Job's result plus ``output_uri``, so downstream tasks find this run's predictions."""
    return {**result, "output_uri": uri_text(args.own.output_uri, "output_uri")}


BATCH_INFERENCE_JOB: WorkloadKind[BatchJobArguments] = WorkloadKind(
    kind="Job",
    api_version="batch/v1",
    arguments=BatchJobArguments,
    check_spec=check_job,
    render=render_job,
    check=check_uris,
    env=uri_env,
    result=with_output,
    refused=JOB_REFUSES_BUDGET,
)


class BatchInferenceJobOperator(_WorkloadOperator):
    """Score ``input_uri`` with the model at ``model_uri`` into ``output_uri`` as one batch/v1 Job per DAG
    run, and wait for it (deferrable), adopting instead of duplicating.

    :param model_uri: checkpoint folder URI, or the checkpoint gate's XCom ``{"uri", "step", ...}``
        (templated); env ``MODEL_URI``.
    :param input_uri: prefix whose direct children are the batch files (templated); env ``INPUT_URI``.
    :param output_uri: prefix to write the predictions and ``_SUMMARY.json`` to (templated); env
        ``OUTPUT_URI``. Make it per run, e.g. ``s3://b/predictions/{{ ds_nodash }}/``: a backfill of date X
        then writes X's folder, and a rerun overwrites only its own. It must differ from ``input_uri``
        (predictions written among the inputs would be scored by the next run).
    :param image: the workload image (templated).
    :param command: default ``["python", "-m", "airflow_k8s_ml.workloads.batch_predict"]``, which reads the
        three URIs from the env; ``args`` (templated) are appended as for any container.

    All URIs are ``s3://`` or ``file://``. Static values are checked when the DAG file is parsed, templated
    ones after rendering and before any API call; a bad one raises ``ValidationError`` naming the field.

    Everything else is as for :class:`~airflow_k8s_ml.operators.training.FineTuneJobOperator`:

    - the pod arguments ``env`` (which may not set the three variables above), ``secret_env``, ``env_from``,
      ``requests``, ``limits``, ``gpus``, ``gpu_resource``, ``node_selector``, ``tolerations``,
      ``image_pull_secrets``, ``volumes``, ``service_account``, ``scheduler_name``, ``pod_security_context``
      / ``container_security_context`` (None: the restrictive default), ``shm_size``, ``pod_options``;
    - the Job arguments ``backoff_limit`` (default 0: Airflow's retries retry, each try a new Job),
      ``restart_policy``, ``active_deadline_seconds``, ``ttl_seconds_after_finished``, ``queue_name``
      (Kueue), ``labels``, and ``manifest`` (raw escape hatch; the URIs are injected into its containers);
    - ``namespace``, ``kubernetes_conn_id``, the Airflow-side deadlines (``admission_timeout``,
      ``startup_timeout``, ``run_timeout``, ``deadline``), ``on_finish``, ``deferrable``, ``poll_interval``,
      ``stream_logs``, ``log_lines``.

    Returns (XCom) the training result ``{kind, name, namespace, uid, state, reason, started_at,
    finished_at, duration_seconds, attempts, resumed_from}`` plus ``output_uri``. A retry of a task instance
    whose Job already succeeded returns that result without running a second Job.
    """

    workload = BATCH_INFERENCE_JOB
    template_fields: Sequence[str] = (*_WorkloadOperator.template_fields, *URI_ENV)
    ui_color = "#efe6f5"

    def __init__(
        self,
        *,
        model_uri: str | Mapping[str, Any],
        input_uri: str,
        output_uri: str,
        backoff_limit: int = 0,
        restart_policy: str = "Never",
        image: str | None = None,
        command: Sequence[str] | None = None,
        args: Sequence[str] | None = None,
        env: Mapping[str, str | int | float] | None = None,
        secret_env: Mapping[str, str] | None = None,
        env_from: Sequence[str] | None = None,
        requests: Mapping[str, str | int | float] | None = None,
        limits: Mapping[str, str | int | float] | None = None,
        gpus: int | None = None,
        gpu_resource: str | None = None,
        node_selector: Mapping[str, str] | None = None,
        tolerations: Sequence[Mapping[str, Any]] | None = None,
        image_pull_secrets: Sequence[str] | None = None,
        volumes: Sequence[Mapping[str, Any]] | None = None,
        shm_size: str | None = None,
        service_account: str | None = None,
        scheduler_name: str | None = None,
        pod_security_context: Mapping[str, Any] | None = None,
        container_security_context: Mapping[str, Any] | None = None,
        pod_options: Mapping[str, Any] | None = None,
        queue_name: str | None = None,
        labels: Mapping[str, str] | None = None,
        active_deadline_seconds: int | None = None,
        ttl_seconds_after_finished: int | None = None,
        gang_scheduler: str | None = None,
        manifest: Mapping[str, Any] | str | None = None,
        namespace: str | None = None,
        kubernetes_conn_id: str = "kubernetes_default",
        resume_from: str | None = None,
        checkpoint_uri: str | None = None,
        aws_conn_id: str | None = "aws_default",
        admission_timeout: timedelta | float | str | None = None,
        startup_timeout: timedelta | float | str | None = None,
        run_timeout: timedelta | float | str | None = None,
        deadline: timedelta | datetime | str | None = None,
        on_finish: str = "keep",
        deferrable: bool = True,
        poll_interval: float = 30.0,
        stream_logs: bool = True,
        log_lines: int = 50,
        max_disruptions: int | None = 5,
        **kwargs: Any,
    ) -> None:
        if command is None and manifest is None:
            command = list(DEFAULT_COMMAND)
        super().__init__(**kwargs)
        self._take_arguments(locals())
        for field in URI_ENV:
            check_static_scheme(getattr(self, field), field)
        self._validate_at_parse_time()
