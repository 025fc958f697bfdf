"""The pod fields, declared once: each field of the pod, its default, and the operator argument that sets it.

Why one declaration: the same list used to be written out five times (the typed
:class:`~airflow_k8s_ml.manifests.pod.PodTemplate`, the parse-time rules' defaults, the operators' argument
map, and the training and serving operators' own lists), and the copies drifted. Now:

- :data:`~airflow_k8s_ml.manifests.pod_rules.POD_DEFAULTS` (what the parse-time rules accept) is derived
  from :data:`POD_FIELDS`;
- the operators' argument maps (``operators._args.POD_ARGUMENTS`` for the workload operators,
  ``operators._serving.POD_ARGUMENTS`` for the serving ones) are derived from it;
- ``PodTemplate``'s dataclass fields, each operator's ``__init__`` signature and each operator's docstring
  are checked against it by ``tests/unit/test_pod_fields.py`` (a typed dataclass and explicit signatures
  stay readable for users and type checkers, so they are checked rather than generated).

Pure and import-light (imported on every DAG parse through the rules): a Record, no dataclass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_k8s_ml.k8s.record import Record
from airflow_k8s_ml.manifests.quantities import GPU_RESOURCE

__all__ = [
    "POD_FIELDS",
    "PodField",
    "operator_arguments",
    "option_fields",
    "pod_defaults",
    "pod_spec_keys",
]


class PodField(Record):
    """One field of the pod.

    :param name: the :class:`~airflow_k8s_ml.manifests.pod.PodTemplate` field (and rules key).
    :param default: its default (``image`` has none: :data:`REQUIRED`).
    :param argument: the top-level operator argument that sets it (its name may differ:
        ``env_from`` -> ``env_from_secrets``); None: only through ``pod_options``.
    :param serving: the serving operators (Deployment, batch CronJob) take it at the top level too; the
        workload operators (Job, PyTorchJob, batch Job) take every field with an ``argument``.
    :param pod_spec_key: the PodSpec key it renders to, for a pod-level scalar a raw ``manifest=`` is
        checked by the same rule (``manifests/raw.py``); None: not checked that way.
    """

    name: str
    default: Any
    argument: str | None = None
    serving: bool = False
    pod_spec_key: str | None = None


#: The default of a field that has none (``image``).
REQUIRED: Any = None

#: Every pod field, in :class:`~airflow_k8s_ml.manifests.pod.PodTemplate` order.
POD_FIELDS: tuple[PodField, ...] = (
    PodField("image", REQUIRED, "image", serving=True),
    PodField("command", None, "command", serving=True),
    PodField("args", None, "args", serving=True),
    PodField("working_dir", None),
    PodField("env", {}, "env", serving=True),
    PodField("secret_env", {}, "secret_env", serving=True),
    PodField("config_map_env", {}),
    PodField("field_env", {}),
    PodField("env_from_secrets", (), "env_from", serving=True),
    PodField("env_from_config_maps", ()),
    PodField("requests", {}, "requests", serving=True),
    PodField("limits", {}, "limits", serving=True),
    PodField("gpus", 0, "gpus", serving=True),
    PodField("gpu_resource", GPU_RESOURCE, "gpu_resource"),
    PodField("node_selector", {}, "node_selector"),
    PodField("tolerations", (), "tolerations"),
    PodField("affinity", None),
    PodField("image_pull_policy", None),
    PodField("image_pull_secrets", (), "image_pull_secrets"),
    PodField("volumes", (), "volumes"),
    PodField("shm_size", None, "shm_size"),
    PodField("service_account", None, "service_account", pod_spec_key="serviceAccountName"),
    PodField("scheduler_name", None, "scheduler_name", pod_spec_key="schedulerName"),
    PodField("priority_class_name", None, pod_spec_key="priorityClassName"),
    PodField("termination_grace_period_seconds", None, pod_spec_key="terminationGracePeriodSeconds"),
    PodField("pod_security_context", None, "pod_security_context"),
    PodField("container_security_context", None, "container_security_context"),
    PodField("labels", {}),
    PodField("annotations", {}),
)


def pod_defaults() -> dict[str, Any]:
    """Every field but ``image`` (required) with its default: what the rules fill in."""
    return {f.name: f.default for f in POD_FIELDS if f.name != "image"}


def operator_arguments(*, serving: bool = False) -> Mapping[str, str]:
    """Operator argument -> pod field, for the workload operators (all fields with an argument) or the
    serving ones (``serving=True``: the fields marked so). The other fields go in ``pod_options``."""
    return {f.argument: f.name for f in POD_FIELDS if f.argument and (f.serving or not serving)}


def option_fields(arguments: Mapping[str, str]) -> tuple[str, ...]:
    """The fields an operator taking ``arguments`` (argument -> field) reaches through ``pod_options``:
    every field that none of its top-level arguments sets."""
    taken = set(arguments.values())
    return tuple(f.name for f in POD_FIELDS if f.name not in taken)


def pod_spec_keys() -> dict[str, str]:
    """Field -> PodSpec key, for the pod-level fields a raw manifest's pod spec is checked on."""
    return {f.name: f.pod_spec_key for f in POD_FIELDS if f.pod_spec_key}
