"""``TrainJobOperator``: distributed training as a Kubeflow Trainer v2 ``TrainJob`` (v1alpha1).

Thin on purpose, like the other workload operators: the one runner
(:class:`~airflow_k8s_ml.operators._workload._WorkloadOperator`: deterministic names, submit-or-adopt,
resume, deferral with phased deadlines, live logs, diagnostics, cleanup) plus the :data:`TRAINJOB` kind
value, which turns the frozen arguments into a :class:`~airflow_k8s_ml.manifests.trainjob.TrainJobSpec`.

Parse-time checks apply the rules modules (``manifests/pod_rules.py``, ``manifests/trainjob_rules.py``);
the spec module is imported only when ``execute`` renders.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.k8s.record import Record
from airflow_k8s_ml.manifests.trainjob_rules import (
    DEFAULT_RUNTIME,
    check_resources_per_node,
    check_trainjob_fields,
    check_trainjob_pod,
)
from airflow_k8s_ml.operators._args import argument_names
from airflow_k8s_ml.operators._kind import Placement, WorkloadArgs, WorkloadKind
from airflow_k8s_ml.operators._workload import _WorkloadOperator
from airflow_k8s_ml.operators.training import check_pod, pod_arguments, pod_template, rendered_int

if TYPE_CHECKING:  # the signature's annotations are text; these are for type checkers
    from datetime import datetime, timedelta

__all__ = ["TRAINJOB", "TrainJobArguments", "TrainJobOperator"]


class TrainJobArguments(Record):
    """The TrainJob's own arguments, as its operator's signature declares them; ``num_nodes`` may be
    templated (``{{ params.workers }}``), so rendered text, converted in the render."""

    runtime: str = DEFAULT_RUNTIME
    runtime_kind: str = "ClusterTrainingRuntime"
    num_nodes: int | str | None = None
    num_proc_per_node: int | None = None
    resources_per_node: Mapping[str, Any] | None = None
    dataset_initializer: Mapping[str, Any] | None = None
    model_initializer: Mapping[str, Any] | None = None
    suspend: bool | None = None


def _with_resources(args: WorkloadArgs[TrainJobArguments]) -> WorkloadArgs[TrainJobArguments]:
    """``resources_per_node`` as the pod's requests and limits (the node's resources are the pod's)."""
    resources = check_resources_per_node(args.own.resources_per_node, args.pod)
    if resources is None:
        return args
    pod = {**args.pod, "requests": resources, "limits": resources}
    return args._replace(pod=pod)  # type: ignore[no-any-return]


def _trainjob_arguments(args: WorkloadArgs[TrainJobArguments]) -> dict[str, Any]:
    """TrainJobSpec's arguments but the trainer pod."""
    own = args.own
    return {
        "runtime": own.runtime,
        "runtime_kind": own.runtime_kind,
        "num_nodes": rendered_int(own.num_nodes, "num_nodes"),
        "num_proc_per_node": own.num_proc_per_node,
        "dataset_initializer": own.dataset_initializer,
        "model_initializer": own.model_initializer,
        "suspend": own.suspend,
        "active_deadline_seconds": args.active_deadline_seconds,
        "queue_name": args.queue_name,
        "labels": args.labels or {},
    }


def _check_trainjob(args: WorkloadArgs[TrainJobArguments], injected_env: Mapping[str, str]) -> None:
    args = _with_resources(args)
    check_pod(args, injected_env)
    with argument_names():
        check_trainjob_pod(pod_arguments(args, injected_env, resume_uri=None))
    check_trainjob_fields(_trainjob_arguments(args))


def _render_trainjob(args: WorkloadArgs[TrainJobArguments], placement: Placement) -> dict[str, Any]:
    from airflow_k8s_ml.manifests.trainjob import TrainJobSpec, build_trainjob

    args = _with_resources(args)
    with argument_names():
        spec = TrainJobSpec(trainer=pod_template(args, placement), **_trainjob_arguments(args))
    return build_trainjob(spec, placement.name, placement.namespace, placement.labels, placement.annotations)


TRAINJOB: WorkloadKind[TrainJobArguments] = WorkloadKind(
    kind="TrainJob",
    api_version="trainer.kubeflow.org/v1alpha1",
    arguments=TrainJobArguments,
    check_spec=_check_trainjob,
    render=_render_trainjob,
    refused={
        "env_from": "a TrainJob's trainer has no envFrom; pass the Secret's keys with secret_env",
        "scheduler_name": (
            "a TrainJob's runtimePatches cannot set schedulerName; use the runtime's podGroupPolicy"
        ),
        "ttl_seconds_after_finished": (
            "a TrainJob has no ttlSecondsAfterFinished (set it in the runtime's JobSet template); "
            "on_finish='delete' deletes the TrainJob when the task ends"
        ),
        "gang_scheduler": (
            "gang scheduling is not supported on a TrainJob: set schedulerName in its runtime's pod "
            "templates (podGroupPolicy)"
        ),
    },
)


class TrainJobOperator(_WorkloadOperator):
    """Run distributed training as a Kubeflow Trainer v2 TrainJob (``trainer.kubeflow.org/v1alpha1``) on a
    training runtime, and wait for it (deferrable), adopting instead of duplicating.

    TrainJob: ``runtime`` (default ``torch-distributed``) and ``runtime_kind`` (ClusterTrainingRuntime |
    TrainingRuntime, the latter in the task's namespace), ``num_nodes`` (templated; None: the runtime's),
    ``num_proc_per_node`` (None: the runtime's, ``auto`` for torch), ``resources_per_node`` (the Kubeflow
    SDK's ``{"cpu": 4, "memory": "16Gi", "nvidia.com/gpu": 1}``: requests and limits of every node; or use
    ``requests``/``limits``/``gpus``), ``dataset_initializer``/``model_initializer``
    (``{"storage_uri": "hf://...", "env": {...}, "secret": "<Secret>"}``; the runtime must have those steps),
    ``suspend``, ``queue_name`` (Kueue: label + created suspended), ``active_deadline_seconds`` (the
    TrainJob's own, Trainer v2.2+), ``labels`` (on the TrainJob; the run labels reach its JobSet, Job and pods
    through ``spec.runtimePatches``). ``spec.managedBy`` is left to its default.

    The trainer pod (every node gets the same): ``image``, ``command``/``args`` (templated;
    ``{{ resume_from }}``), ``env`` (templated), ``secret_env``, ``requests``/``limits``, ``gpus`` with
    ``gpu_resource`` (per node; they become ``resourcesPerNode``), and through ``runtimePatches``
    ``node_selector``, ``tolerations``, ``image_pull_secrets``, ``volumes``, ``service_account``,
    ``pod_security_context``/``container_security_context`` (None: our restrictive defaults), ``shm_size``
    and ``pod_options``. The ``pod_options`` ``working_dir``, ``image_pull_policy`` and
    ``priority_class_name`` and the torch runtime's ``PET_*`` variables in ``env`` are refused with their
    names (``ValidationError``).

    Not arguments of a TrainJob (a TypeError says why and what to use; ``TRAINJOB.refused``): ``env_from``
    (the trainer has no envFrom: use ``secret_env``), ``scheduler_name`` (runtimePatches cannot set it: use
    the runtime's podGroupPolicy), ``ttl_seconds_after_finished`` (a TrainJob has none: ``on_finish``) and
    ``gang_scheduler``.

    A failure names the node that failed first (``[node-1]``); live logs are prefixed per node.

    Plus everything of :class:`~airflow_k8s_ml.operators._workload._WorkloadOperator`: ``manifest`` (a raw
    TrainJob), ``namespace``, ``kubernetes_conn_id``, ``resume_from``, ``checkpoint_uri``, ``aws_conn_id``,
    the deadlines (``admission_timeout``, ``startup_timeout``, ``run_timeout``, ``deadline``),
    ``on_finish``, ``deferrable``, ``poll_interval``, ``stream_logs``, ``log_lines``.

    Returns (XCom) ``{kind, name, namespace, uid, state, reason, started_at, finished_at, duration_seconds,
    attempts, resumed_from}``.
    """

    workload = TRAINJOB
    # ``num_nodes`` may come from a Param ("{{ params.workers }}"): rendered to text, converted in the render.
    template_fields: Sequence[str] = (*_WorkloadOperator.template_fields, "num_nodes")

    def __init__(
        self,
        *,
        runtime: str = DEFAULT_RUNTIME,
        runtime_kind: str = "ClusterTrainingRuntime",
        num_nodes: int | str | None = None,
        num_proc_per_node: int | None = None,
        resources_per_node: Mapping[str, Any] | None = None,
        dataset_initializer: Mapping[str, Any] | None = None,
        model_initializer: Mapping[str, Any] | None = None,
        suspend: bool | None = None,
        image: str | None = None,
        command: Sequence[str] | None = None,
        args: Sequence[str] | None = None,
        env: Mapping[str, str | int | float] | None = None,
        secret_env: Mapping[str, str] | None = None,
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
        pod_security_context: Mapping[str, Any] | None = None,
        container_security_context: Mapping[str, Any] | None = None,
        pod_options: Mapping[str, Any] | None = None,
        queue_name: str | None = None,
        labels: Mapping[str, str] | None = None,
        active_deadline_seconds: int | None = None,
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
