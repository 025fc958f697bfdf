"""``TFJobOperator``: distributed TensorFlow training as a kubeflow.org/v1 ``TFJob``.

Thin on purpose, like the other workload operators: the one runner
(:class:`~airflow_k8s_ml.operators._workload._WorkloadOperator`: deterministic names, submit-or-adopt,
resume, deferral with phased deadlines, live logs with replica prefixes, diagnostics, cleanup) plus the
:data:`TFJOB` kind value, which turns the frozen arguments into a
:class:`~airflow_k8s_ml.manifests.tfjob.TFJobSpec`.

Parse-time checks apply the rules modules (``manifests/pod_rules.py``, ``manifests/tfjob_rules.py``); the
spec module is imported only when ``execute`` renders.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.k8s.record import Record
from airflow_k8s_ml.manifests.tfjob_rules import check_tfjob_fields
from airflow_k8s_ml.operators._kind import Placement, WorkloadArgs, WorkloadKind
from airflow_k8s_ml.operators._workload import _WorkloadOperator
from airflow_k8s_ml.operators.training import check_pod, pod_template, rendered_int, workload_arguments

if TYPE_CHECKING:  # the signature's annotations are text; these are for type checkers
    from datetime import datetime, timedelta

__all__ = ["TFJOB", "TFJobArguments", "TFJobOperator"]


class TFJobArguments(Record):
    """The TFJob's own arguments, as its operator's signature declares them; ``workers`` may be templated
    (``{{ params.workers }}``), so rendered text, converted in the render."""

    workers: int | str = 1
    ps: int = 0
    chief: bool = True
    evaluator: bool = False
    success_policy: str = ""
    restart_policy: str = "Never"
    backoff_limit: int | None = None
    clean_pod_policy: str = "Running"


def _tfjob_arguments(args: WorkloadArgs[TFJobArguments]) -> dict[str, Any]:
    """TFJobSpec's arguments but the pod."""
    own = args.own
    return {**own._asdict(), "workers": rendered_int(own.workers, "workers"), **workload_arguments(args)}


def _check_tfjob(args: WorkloadArgs[TFJobArguments], injected_env: Mapping[str, str]) -> None:
    check_pod(args, injected_env)
    check_tfjob_fields(_tfjob_arguments(args))


def _render_tfjob(args: WorkloadArgs[TFJobArguments], placement: Placement) -> dict[str, Any]:
    from airflow_k8s_ml.manifests.tfjob import TFJobSpec, build_tfjob

    spec = TFJobSpec(pod=pod_template(args, placement), **_tfjob_arguments(args))
    return build_tfjob(spec, placement.name, placement.namespace, placement.labels, placement.annotations)


TFJOB: WorkloadKind[TFJobArguments] = WorkloadKind(
    kind="TFJob",
    api_version="kubeflow.org/v1",
    arguments=TFJobArguments,
    check_spec=_check_tfjob,
    render=_render_tfjob,
    refused={
        "gang_scheduler": (
            "gang scheduling is not rendered for a TFJob: set scheduler_name and run the training operator "
            "with --gang-scheduler-name"
        ),
    },
)


class TFJobOperator(_WorkloadOperator):
    """Run distributed TensorFlow training as a kubeflow.org/v1 TFJob (training-operator 1.9) and wait for it
    (deferrable), adopting instead of duplicating.

    TFJob: ``workers`` (templated; default 1), ``ps`` (parameter servers, default 0), ``chief`` (default
    True: a Chief replica coordinates and the job succeeds when it does; False: Worker 0 coordinates),
    ``evaluator`` (one Evaluator replica), ``success_policy`` (``""``: with a Chief, the Chief's success;
    without, Worker 0's; ``AllWorkers``: every Worker's, only without a Chief), ``restart_policy`` (Never |
    OnFailure | Always | ExitCode; default Never: Airflow's retries own retrying), ``backoff_limit``,
    ``clean_pod_policy`` (default Running: parameter servers serve until stopped, so they are stopped when
    the job ends; None | Running | All), ``active_deadline_seconds``, ``ttl_seconds_after_finished``,
    ``queue_name`` (Kueue), ``labels``. The training operator gives each replica ``TF_CONFIG`` (the cluster
    spec and its task), which ``tf.distribute`` reads; ``airflow_k8s_ml.workloads.tf_topology`` is a
    reference entrypoint that proves it without TensorFlow.

    The pod (every replica gets the same; the container is named ``tensorflow``): ``image``,
    ``command``/``args`` (templated; ``{{ resume_from }}``), ``env`` (templated), ``secret_env``,
    ``env_from``, ``requests``/``limits``, ``gpus`` with ``gpu_resource`` (per replica), ``node_selector``,
    ``tolerations``, ``image_pull_secrets``, ``volumes``, ``shm_size``, ``service_account``,
    ``scheduler_name``, ``pod_security_context``/``container_security_context`` and ``pod_options``.

    Not an argument of a TFJob (a TypeError says why; ``TFJOB.refused``): ``gang_scheduler``.

    A failure names the replica that failed first (``[worker-1]``) with its last line; live logs are
    prefixed per replica (``[chief-0]``, ``[worker-1]``, ``[ps-0]``).

    Plus everything of :class:`~airflow_k8s_ml.operators._workload._WorkloadOperator`: ``manifest`` (a raw
    TFJob), ``namespace``, ``kubernetes_conn_id``, ``resume_from``, ``checkpoint_uri``, ``aws_conn_id``,
    the deadlines (``admission_timeout``, ``startup_timeout``, ``run_timeout``, ``deadline``),
    ``on_finish``, ``deferrable``, ``poll_interval``, ``stream_logs``, ``log_lines``.

    Returns (XCom) ``{kind, name, namespace, uid, state, reason, started_at, finished_at, duration_seconds,
    attempts, resumed_from}``.
    """

    workload = TFJOB
    # ``workers`` may come from a Param ("{{ params.workers }}"): rendered to text, converted in the render.
    template_fields: Sequence[str] = (*_WorkloadOperator.template_fields, "workers")

    def __init__(
        self,
        *,
        workers: int | str = 1,
        ps: int = 0,
        chief: bool = True,
        evaluator: bool = False,
        success_policy: str = "",
        restart_policy: str = "Never",
        backoff_limit: int | None = None,
        clean_pod_policy: str = "Running",
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
        disruption_budget: bool = False,
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
        super().__init__(**kwargs)
        self._take_arguments(locals())
        self._validate_at_parse_time()
