"""``FineTuneJobOperator`` (batch/v1 Job) and ``PyTorchJobOperator`` (kubeflow.org/v1 PyTorchJob).

Thin on purpose: each declares its arguments and turns them into a typed spec
(:class:`~airflow_k8s_ml.manifests.training.FineTuneJobSpec` /
:class:`~airflow_k8s_ml.manifests.training.PyTorchJobSpec`), which validates itself and renders to a dict.
Submit-or-adopt, resume, deferral, deadlines and the finish live in
:class:`~airflow_k8s_ml.operators._workload._WorkloadOperator`.

Both are validated at DAG parse time (static values; a typo fails the import with the field's name) and again
in ``execute`` after templating, before any API call. ``__init__`` does no I/O. The parse-time check applies
the specs' rules functions (``manifests/pod_rules.py``, ``manifests/training_rules.py``) to the arguments;
the specs themselves are imported only when ``execute`` renders, since every DAG parse pays for its imports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.manifests.pod_rules import POD_DEFAULTS, check_pod_fields
from airflow_k8s_ml.manifests.training_rules import check_finetune_job_fields, check_pytorchjob_fields
from airflow_k8s_ml.operators._args import PLACEHOLDER, POD_ARGUMENTS, argument_names, substitute_resume
from airflow_k8s_ml.operators._workload import Placement, _WorkloadOperator, inject_env, parse_time_key
from airflow_k8s_ml.operators.links import ClusterDashboardLink

if TYPE_CHECKING:
    from airflow_k8s_ml.manifests.pod import PodTemplate

__all__ = ["FineTuneJobOperator", "PyTorchJobOperator"]

_POD_TEMPLATE_FIELDS = frozenset({"image", *POD_DEFAULTS})


def pod_arguments(
    values: Mapping[str, Any], injected_env: Mapping[str, str], resume_uri: str | None
) -> dict[str, Any]:
    """The pod of one attempt as PodTemplate arguments: the user's pod arguments, our injected env,
    ``{{ resume_from }}`` replaced."""
    if values["image"] is None:
        raise ValidationError("image", "is required (or pass manifest=)")
    kwargs = {target: values[name] for name, target in POD_ARGUMENTS.items() if values[name] is not None}
    kwargs["args"] = substitute_resume(values["args"], resume_uri)
    kwargs["env"] = inject_env(values["env"], injected_env)
    options = values["pod_options"] or {}
    if not isinstance(options, Mapping):
        raise ValidationError("pod_options", f"must be a mapping, got {type(options).__name__}")
    for key, value in options.items():
        if key not in _POD_TEMPLATE_FIELDS or key in kwargs or key in POD_ARGUMENTS.values():
            raise ValidationError(
                f"pod_options[{key}]", "unknown, or settable by its own argument; see PodTemplate's fields"
            )
        kwargs[key] = value
    return kwargs


def pod_template(values: Mapping[str, Any], placement: Placement) -> PodTemplate:
    """The pod of one attempt, typed (execute time: this imports the spec modules)."""
    from airflow_k8s_ml.manifests.pod import PodTemplate

    with argument_names():
        return PodTemplate(**pod_arguments(values, placement.env, placement.resume_uri))


class _TrainingOperator(_WorkloadOperator):
    """The pod arguments shared by both training operators (see the subclasses for the full list)."""

    pod_fields = (*POD_ARGUMENTS, "pod_options")
    template_fields: Sequence[str] = (*_WorkloadOperator.template_fields, "image", "command", "args", "env")
    operator_extra_links = (ClusterDashboardLink(),)

    def __init__(
        self,
        *,
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
        service_account: str | None = None,
        scheduler_name: str | None = None,
        pod_security_context: Mapping[str, Any] | None = None,
        container_security_context: Mapping[str, Any] | None = None,
        shm_size: str | None = None,
        pod_options: Mapping[str, Any] | None = None,
        queue_name: str | None = None,
        labels: Mapping[str, str] | None = None,
        active_deadline_seconds: int | None = None,
        ttl_seconds_after_finished: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.image = image
        self.command = command
        self.args = args
        self.env = env
        self.secret_env = secret_env
        self.env_from = env_from
        self.requests = requests
        self.limits = limits
        self.gpus = gpus
        self.gpu_resource = gpu_resource
        self.node_selector = node_selector
        self.tolerations = tolerations
        self.image_pull_secrets = image_pull_secrets
        self.volumes = volumes
        self.service_account = service_account
        self.scheduler_name = scheduler_name
        self.pod_security_context = pod_security_context
        self.container_security_context = container_security_context
        self.shm_size = shm_size
        self.pod_options = pod_options
        self.queue_name = queue_name
        self.labels = labels
        self.active_deadline_seconds = active_deadline_seconds
        self.ttl_seconds_after_finished = ttl_seconds_after_finished

    def spec_fields(self) -> tuple[str, ...]:
        common = ("queue_name", "labels", "active_deadline_seconds", "ttl_seconds_after_finished")
        return (*self.pod_fields, *common, *self.workload_fields)

    workload_fields: tuple[str, ...] = ()

    def _check_spec(self, values: Mapping[str, Any], injected_env: Mapping[str, str]) -> None:
        with argument_names():
            pod = check_pod_fields(pod_arguments(values, injected_env, resume_uri=None))
        self._check_workload(values)
        # The workload's and the pod's labels may not take our keys: they drive adoption.
        given = [labels for labels in (values["labels"], pod["labels"]) if labels]
        if given:
            from airflow_k8s_ml.manifests.naming import merge_labels

            ours = parse_time_key().labels()
            for user_labels in given:
                merge_labels(ours, user_labels, "labels")

    def _check_workload(self, values: Mapping[str, Any]) -> None:
        """Check the kind's own arguments (what its spec's ``__post_init__`` checks besides the pod)."""
        raise NotImplementedError


class FineTuneJobOperator(_TrainingOperator):
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

    kind = "Job"
    api_version = "batch/v1"
    workload_fields = ("backoff_limit", "restart_policy")

    def __init__(self, *, backoff_limit: int = 0, restart_policy: str = "Never", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.backoff_limit = backoff_limit
        self.restart_policy = restart_policy
        self._validate_at_parse_time()

    def _check_workload(self, values: Mapping[str, Any]) -> None:
        check_finetune_job_fields(_job_arguments(values))

    def _render_spec(self, values: Mapping[str, Any], placement: Placement) -> dict[str, Any]:
        from airflow_k8s_ml.manifests.training import FineTuneJobSpec, build_job

        spec = FineTuneJobSpec(pod=pod_template(values, placement), **_job_arguments(values))
        return build_job(spec, placement.name, placement.namespace, placement.labels, placement.annotations)


class PyTorchJobOperator(_TrainingOperator):
    """Run distributed training as a kubeflow.org/v1 PyTorchJob (one Master + ``workers`` Workers, all with
    the same pod) and wait for it, adopting instead of duplicating.

    The pod arguments, the deadlines, resume and cleanup are those of :class:`FineTuneJobOperator`. Specific:
    ``workers`` (default 1), ``nproc_per_node`` (int, ``auto``, ``cpu`` or ``gpu``), ``restart_policy``
    (OnFailure | Always | Never | ExitCode), ``backoff_limit`` (None: the training operator's default),
    ``clean_pod_policy`` (None | Running | All; what happens to pods still running when the job ends),
    ``active_deadline_seconds``, ``ttl_seconds_after_finished``, ``queue_name`` (Kueue), ``labels``. A failure
    names the replica that failed first (the others usually fail because of it).
    """

    kind = "PyTorchJob"
    api_version = "kubeflow.org/v1"
    workload_fields = ("workers", "nproc_per_node", "restart_policy", "backoff_limit", "clean_pod_policy")
    # ``workers`` may come from a Param ("{{ params.workers }}"): rendered to text, converted in the render.
    template_fields: Sequence[str] = (*_TrainingOperator.template_fields, "workers")

    def __init__(
        self,
        *,
        workers: int = 1,
        nproc_per_node: int | str | None = None,
        restart_policy: str = "OnFailure",
        backoff_limit: int | None = None,
        clean_pod_policy: str = "None",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.workers = workers
        self.nproc_per_node = nproc_per_node
        self.restart_policy = restart_policy
        self.backoff_limit = backoff_limit
        self.clean_pod_policy = clean_pod_policy
        self._validate_at_parse_time()

    def _check_workload(self, values: Mapping[str, Any]) -> None:
        check_pytorchjob_fields(_pytorchjob_arguments(values))

    def _render_spec(self, values: Mapping[str, Any], placement: Placement) -> dict[str, Any]:
        from airflow_k8s_ml.manifests.training import PyTorchJobSpec, build_pytorchjob

        spec = PyTorchJobSpec(master=pod_template(values, placement), **_pytorchjob_arguments(values))
        return build_pytorchjob(
            spec, placement.name, placement.namespace, placement.labels, placement.annotations
        )


def _job_arguments(values: Mapping[str, Any]) -> dict[str, Any]:
    """FineTuneJobSpec's arguments but the pod, from the operator's values."""
    return {
        "backoff_limit": values["backoff_limit"],
        "restart_policy": values["restart_policy"],
        "active_deadline_seconds": values["active_deadline_seconds"],
        "ttl_seconds_after_finished": values["ttl_seconds_after_finished"],
        "queue_name": values["queue_name"],
        "labels": values["labels"] or {},
    }


def _pytorchjob_arguments(values: Mapping[str, Any]) -> dict[str, Any]:
    """PyTorchJobSpec's arguments but the pods, from the operator's values."""
    return {
        "workers": _rendered_int(values["workers"], "workers"),
        "nproc_per_node": values["nproc_per_node"],
        "restart_policy": values["restart_policy"],
        "backoff_limit": values["backoff_limit"],
        "active_deadline_seconds": values["active_deadline_seconds"],
        "ttl_seconds_after_finished": values["ttl_seconds_after_finished"],
        "clean_pod_policy": values["clean_pod_policy"],
        "queue_name": values["queue_name"],
        "labels": values["labels"] or {},
    }


def _rendered_int(value: Any, field: str) -> Any:
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
