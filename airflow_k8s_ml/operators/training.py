"""``FineTuneJobOperator`` (batch/v1 Job) and ``PyTorchJobOperator`` (kubeflow.org/v1 PyTorchJob).

Thin on purpose: each is the one runner (:class:`~airflow_k8s_ml.operators._workload._WorkloadOperator`:
submit-or-adopt, resume, deferral, deadlines, the finish) plus a
:class:`~airflow_k8s_ml.operators._kind.WorkloadKind` value (:data:`FINETUNE_JOB`, :data:`PYTORCHJOB`) that
turns the frozen arguments into a typed spec (:class:`~airflow_k8s_ml.manifests.training.FineTuneJobSpec` /
:class:`~airflow_k8s_ml.manifests.training.PyTorchJobSpec`), which validates itself and renders to a dict.
The pod helpers here (:func:`pod_arguments`, :func:`check_pod`, :func:`pod_template`) serve every pod-based
kind, the batch-inference Job too.

Both are validated at DAG parse time (static values; a typo fails the import with the field's name) and again
in ``execute`` after templating, before any API call. ``__init__`` does no I/O. The parse-time check applies
the specs' rules functions (``manifests/pod_rules.py``, ``manifests/training_rules.py``) to the arguments;
the specs themselves are imported only when ``execute`` renders, since every DAG parse pays for its imports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.k8s.record import Record
from airflow_k8s_ml.manifests.pod_fields import option_fields
from airflow_k8s_ml.manifests.pod_rules import check_injected_env, check_pod_fields
from airflow_k8s_ml.manifests.training_rules import check_finetune_job_fields, check_pytorchjob_fields
from airflow_k8s_ml.manifests.validation import checked_options
from airflow_k8s_ml.operators._args import PLACEHOLDER, POD_ARGUMENTS, argument_names, substitute_resume
from airflow_k8s_ml.operators._kind import Placement, WorkloadArgs, WorkloadKind
from airflow_k8s_ml.operators._workload import _WorkloadOperator, parse_time_key

if TYPE_CHECKING:
    from datetime import datetime, timedelta

    from airflow_k8s_ml.manifests.pod import PodTemplate

__all__ = ["FINETUNE_JOB", "PYTORCHJOB", "FineTuneJobOperator", "PyTorchJobOperator"]

#: What ``pod_options`` may set: the pod fields no top-level argument sets.
_OPTION_FIELDS = frozenset(option_fields(POD_ARGUMENTS))


def pod_arguments(
    args: WorkloadArgs[Any], injected_env: Mapping[str, str], resume_uri: str | None
) -> dict[str, Any]:
    """The pod of one attempt as PodTemplate arguments: the user's pod arguments, our injected env,
    ``{{ resume_from }}`` replaced."""
    pod = args.pod
    if pod["image"] is None:
        raise ValidationError("image", "is required (or pass manifest=)")
    kwargs = {target: pod[name] for name, target in POD_ARGUMENTS.items() if pod[name] is not None}
    kwargs["args"] = substitute_resume(pod["args"], resume_uri)
    kwargs.update(checked_options(pod["pod_options"], _OPTION_FIELDS, "pod_options", arguments=POD_ARGUMENTS))
    check_injected_env(kwargs, injected_env)  # a variable we set may not be the user's too
    return {**kwargs, "env": {**injected_env, **dict(kwargs.get("env") or {})}}


def pod_template(args: WorkloadArgs[Any], placement: Placement) -> PodTemplate:
    """The pod of one attempt, typed (execute time: this imports the spec modules)."""
    from airflow_k8s_ml.manifests.pod import PodTemplate

    with argument_names():
        return PodTemplate(**pod_arguments(args, placement.env, placement.resume_uri))


def check_pod(args: WorkloadArgs[Any], injected_env: Mapping[str, str]) -> None:
    """The pod arguments and the workload's labels checked as the render would check them (parse time).

    The workload's and the pod's labels may not take our keys: they drive adoption."""
    with argument_names():
        pod = check_pod_fields(pod_arguments(args, injected_env, resume_uri=None))
    given = [labels for labels in (args.labels, pod["labels"]) if labels]
    if given:
        from airflow_k8s_ml.manifests.naming import merge_labels

        ours = parse_time_key().labels()
        for user_labels in given:
            merge_labels(ours, user_labels, "labels")


class JobArguments(Record):
    """The fine-tune Job's own arguments (besides the pod and the workload arguments every kind takes), as
    its operator's signature declares them."""

    backoff_limit: int = 0
    restart_policy: str = "Never"


class PyTorchJobArguments(Record):
    """The PyTorchJob's own arguments, as its operator's signature declares them; ``workers`` may be
    templated (``{{ params.workers }}``), so rendered text, converted in the render."""

    workers: int | str = 1
    nproc_per_node: int | str | None = None
    restart_policy: str = "OnFailure"
    backoff_limit: int | None = None
    clean_pod_policy: str = "None"


def workload_arguments(args: WorkloadArgs[Any]) -> dict[str, Any]:
    """The spec arguments every kind takes from the operator's workload arguments."""
    return {
        "active_deadline_seconds": args.active_deadline_seconds,
        "ttl_seconds_after_finished": args.ttl_seconds_after_finished,
        "queue_name": args.queue_name,
        "labels": args.labels or {},
    }


def job_arguments(args: WorkloadArgs[Any]) -> dict[str, Any]:
    """FineTuneJobSpec's arguments but the pod (the kind's own value: ``backoff_limit``,
    ``restart_policy``; the batch-inference kind's value adds its URIs, which are not spec fields)."""
    own = args.own
    kind_own = {"backoff_limit": own.backoff_limit, "restart_policy": own.restart_policy}
    return {**kind_own, **workload_arguments(args)}


def check_job(args: WorkloadArgs[Any], injected_env: Mapping[str, str]) -> None:
    check_pod(args, injected_env)
    check_finetune_job_fields(job_arguments(args))


def render_job(args: WorkloadArgs[Any], placement: Placement) -> dict[str, Any]:
    from airflow_k8s_ml.manifests.training import FineTuneJobSpec, build_job

    spec = FineTuneJobSpec(pod=pod_template(args, placement), **job_arguments(args))
    return build_job(spec, placement.name, placement.namespace, placement.labels, placement.annotations)


def _pytorchjob_arguments(args: WorkloadArgs[PyTorchJobArguments]) -> dict[str, Any]:
    """PyTorchJobSpec's arguments but the pods."""
    own = args.own
    return {**own._asdict(), "workers": rendered_int(own.workers, "workers"), **workload_arguments(args)}


def _check_pytorchjob(args: WorkloadArgs[PyTorchJobArguments], injected_env: Mapping[str, str]) -> None:
    check_pod(args, injected_env)
    check_pytorchjob_fields(_pytorchjob_arguments(args))


def _render_pytorchjob(args: WorkloadArgs[PyTorchJobArguments], placement: Placement) -> dict[str, Any]:
    from airflow_k8s_ml.manifests.training import PyTorchJobSpec, build_pytorchjob

    spec = PyTorchJobSpec(master=pod_template(args, placement), **_pytorchjob_arguments(args))
    return build_pytorchjob(
        spec, placement.name, placement.namespace, placement.labels, placement.annotations
    )


#: Why a single-pod Job takes no PodDisruptionBudget (the fine-tune and batch-inference Jobs).
JOB_REFUSES_BUDGET = {
    "disruption_budget": (
        "a Job's single pod is better evicted and replaced (it resumes from its newest checkpoint) than "
        "kept from a drain; disruption_budget protects distributed runs"
    ),
}
FINETUNE_JOB: WorkloadKind[JobArguments] = WorkloadKind(
    kind="Job",
    api_version="batch/v1",
    arguments=JobArguments,
    check_spec=check_job,
    render=render_job,
    refused=JOB_REFUSES_BUDGET,
)
PYTORCHJOB: WorkloadKind[PyTorchJobArguments] = WorkloadKind(
    kind="PyTorchJob",
    api_version="kubeflow.org/v1",
    arguments=PyTorchJobArguments,
    check_spec=_check_pytorchjob,
    render=_render_pytorchjob,
)


class FineTuneJobOperator(_WorkloadOperator):
    """Run a fine-tune as a batch/v1 Job and wait for it (deferrable), adopting instead of duplicating.

    Pod: ``image``, ``command``/``args`` (templated; ``{{ resume_from }}`` in an argument becomes the resolved
    checkpoint), ``env`` (templated), ``secret_env`` (``{"HF_TOKEN": "hf-secret:token"}``), ``env_from``
    (Secret names), ``requests``/``limits`` (``{"cpu": "4", "memory": "16Gi"}``), ``gpus`` with
    ``gpu_resource`` (``nvidia.com/gpu`` or a MIG name such as ``nvidia.com/mig-1g.5gb``), ``node_selector``,
    ``tolerations``, ``image_pull_secrets``, ``volumes`` (``{"name", "mount_path", "pvc"|"empty_dir"|...}``),
    ``service_account``, ``scheduler_name`` (e.g. Volcano), ``pod_security_context`` /
    ``container_security_context`` (None: restrictive default; a mapping replaces it), ``shm_size``, and
    ``pod_options`` for any other :class:`~airflow_k8s_ml.manifests.pod.PodTemplate` field.

    Job: ``backoff_limit`` (default 0: Airflow's retries own retrying, each resuming from the newest
    checkpoint), ``restart_policy`` (Never | OnFailure), ``active_deadline_seconds`` (Kubernetes side),
    ``ttl_seconds_after_finished``, ``queue_name`` (Kueue: label + created suspended), ``labels``.

    Plus everything of :class:`~airflow_k8s_ml.operators._workload._WorkloadOperator`: ``manifest``,
    ``namespace``, ``kubernetes_conn_id``, ``resume_from``, ``checkpoint_uri``, ``aws_conn_id``, the deadlines
    (``admission_timeout``, ``startup_timeout``, ``run_timeout``, ``deadline``), ``on_finish``,
    ``deferrable``, ``poll_interval``, ``stream_logs``, ``log_lines``.

    Returns (XCom) ``{kind, name, namespace, uid, state, reason, started_at, finished_at, duration_seconds,
    attempts, resumed_from}``.
    """

    workload = FINETUNE_JOB

    def __init__(
        self,
        *,
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
        super().__init__(**kwargs)
        self._take_arguments(locals())
        self._validate_at_parse_time()


class PyTorchJobOperator(_WorkloadOperator):
    """Run distributed training as a kubeflow.org/v1 PyTorchJob (one Master + ``workers`` Workers, all with
    the same pod) and wait for it, adopting instead of duplicating.

    The pod arguments (every replica gets the same pod), the deadlines, resume and cleanup are those of
    :class:`FineTuneJobOperator`: ``image``, ``command``/``args``, ``env``, ``secret_env``, ``env_from``,
    ``requests``/``limits``, ``gpus`` with ``gpu_resource`` (per replica), ``node_selector``,
    ``tolerations``, ``image_pull_secrets``, ``volumes``, ``service_account``, ``scheduler_name``,
    ``pod_security_context``/``container_security_context``, ``shm_size`` (NCCL needs a large
    ``/dev/shm``) and ``pod_options``. Specific:
    ``workers`` (default 1), ``nproc_per_node`` (int, ``auto``, ``cpu`` or ``gpu``), ``restart_policy``
    (OnFailure | Always | Never | ExitCode), ``backoff_limit`` (None: the training operator's default),
    ``clean_pod_policy`` (None | Running | All; what happens to pods still running when the job ends),
    ``active_deadline_seconds``, ``ttl_seconds_after_finished``, ``queue_name`` (Kueue), ``labels``. A failure
    names the replica that failed first (the others usually fail because of it).
    """

    workload = PYTORCHJOB
    # ``workers`` may come from a Param ("{{ params.workers }}"): rendered to text, converted in the render.
    template_fields: Sequence[str] = (*_WorkloadOperator.template_fields, "workers")

    def __init__(
        self,
        *,
        workers: int | str = 1,
        nproc_per_node: int | str | None = None,
        restart_policy: str = "OnFailure",
        backoff_limit: int | None = None,
        clean_pod_policy: str = "None",
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


def rendered_int(value: Any, field: str) -> Any:
    """An integer argument that may be templated: a placeholder at parse time validates as 1 (the real
    value is checked once rendered); rendered text is converted; anything else is left to the spec."""
    if value == PLACEHOLDER:
        return 1
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            raise ValidationError(field, f"must be an integer, got {value!r}") from None
    return value
