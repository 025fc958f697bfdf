"""What makes the arguments of a Kubeflow Trainer v2 ``TrainJob`` valid, as plain functions.

Why apart from :mod:`~airflow_k8s_ml.manifests.trainjob`: the operator checks its static arguments on every
DAG parse, in a fresh fork of the dag processor; these rules import no dataclass (see
:mod:`~airflow_k8s_ml.manifests.pod_rules`). The spec applies the same functions in ``__post_init__``.

Why the pod rules here: a TrainJob is not a pod template. ``trainer.kubeflow.org/v1alpha1`` (Trainer v2.2+)
takes the trainer's ``image``/``command``/``args``/``env`` and ``resourcesPerNode`` in ``spec.trainer``, and
the rest of the pod only through ``spec.runtimePatches`` (``serviceAccountName``, ``volumes``,
``imagePullSecrets``, ``securityContext``, ``nodeSelector``, ``affinity``, ``tolerations``,
``terminationGracePeriodSeconds``, and per container ``volumeMounts``/``securityContext``). A pod argument
that neither can carry (``env_from``, ``scheduler_name``, ...) is refused with its name here, at parse time,
instead of being dropped on the way to the cluster.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from airflow_k8s_ml.manifests.formats import (
    validate_annotations,
    validate_dns1123_subdomain,
    validate_labels,
)
from airflow_k8s_ml.manifests.training_rules import check_queue
from airflow_k8s_ml.manifests.validation import (
    check_choice,
    check_env_name,
    check_mapping,
    check_optional_int,
    check_str_map,
    fail,
    with_defaults,
)

__all__ = [
    "DEFAULT_RUNTIME",
    "INITIALIZER_KEYS",
    "RUNTIME_KINDS",
    "TORCH_RESERVED_ENV",
    "TRAINJOB_DEFAULTS",
    "UNSUPPORTED_POD_FIELDS",
    "check_initializer",
    "check_resources_per_node",
    "check_trainjob_fields",
    "check_trainjob_pod",
]

#: The runtime upstream's manifests install and the Kubeflow SDK uses by default.
DEFAULT_RUNTIME = "torch-distributed"
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
#: torchrun's variables, which the torch plugin sets (upstream refuses them in ``spec.trainer.env`` with
#: "must not have reserved envs").
TORCH_RESERVED_ENV = (
    "PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT",
)
_INT32_MAX = 2**31 - 1
#: The ``storageUri`` rule of the CRD (``self == '' || self.matches(...)``) and its MaxLength.
_STORAGE_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://.+$")
_STORAGE_URI_MAX = 2048
#: An initializer argument's keys: ``storage_uri`` -> storageUri, ``env`` -> env, ``secret`` -> secretRef.
INITIALIZER_KEYS = ("storage_uri", "env", "secret")
#: ``spec.trainer.env`` and an initializer's env hold at most this many variables (the CRD's MaxItems).
_ENV_MAX = 128

#: PodTemplate fields a TrainJob cannot carry (neither ``spec.trainer`` nor ``runtimePatches`` has them), and
#: where to put them instead. Checked against their defaults.
UNSUPPORTED_POD_FIELDS: Mapping[str, str] = {
    "env_from_secrets": "spec.trainer has no envFrom; use secret_env (one secretKeyRef per variable)",
    "env_from_config_maps": "spec.trainer has no envFrom; set the variables in env",
    "working_dir": "spec.trainer has no workingDir; set it in the runtime or cd in the command",
    "image_pull_policy": "spec.trainer has no imagePullPolicy; set it in the runtime",
    "scheduler_name": "runtimePatches cannot set schedulerName; use the runtime's podGroupPolicy",
    "priority_class_name": "runtimePatches cannot set priorityClassName; set it in the runtime",
}
_EMPTY: tuple[Any, ...] = (None, (), [], {}, "")

#: The fields of :class:`~airflow_k8s_ml.manifests.trainjob.TrainJobSpec` but ``trainer``, with defaults.
TRAINJOB_DEFAULTS: Mapping[str, Any] = {
    "runtime": DEFAULT_RUNTIME,
    "runtime_kind": "ClusterTrainingRuntime",
    "num_nodes": None,
    "num_proc_per_node": None,
    "dataset_initializer": None,
    "model_initializer": None,
    "active_deadline_seconds": None,
    "queue_name": None,
    "suspend": None,
    "labels": {},
    "annotations": {},
}


def check_trainjob_pod(pod: Mapping[str, Any]) -> None:
    """The trainer pod's fields (PodTemplate names, as :func:`check_pod_fields` returns them) that a TrainJob
    cannot carry, and torchrun's reserved variables in the user's env."""
    for name, why in UNSUPPORTED_POD_FIELDS.items():
        if pod.get(name) not in _EMPTY:
            raise fail(name, f"cannot be set on a TrainJob: {why}")
    for source in ("env", "secret_env", "config_map_env", "field_env"):
        for var in pod.get(source) or {}:
            if var in TORCH_RESERVED_ENV:
                raise fail(
                    f"{source}[{var}]",
                    f"must not have reserved envs: the torch runtime sets {', '.join(TORCH_RESERVED_ENV)}",
                )


def check_initializer(value: Any, field: str) -> dict[str, Any] | None:
    """``{"storage_uri": "hf://...", "env": {...}, "secret": "<Secret name>"}``, normalised; None: none."""
    if value is None:
        return None
    given = dict(check_mapping(value, field))
    unknown = sorted(set(given) - set(INITIALIZER_KEYS))
    if unknown:
        raise fail(f"{field}[{unknown[0]}]", f"unknown key; known: {', '.join(INITIALIZER_KEYS)}")
    out: dict[str, Any] = {}
    uri = given.get("storage_uri")
    if uri is not None:
        if not isinstance(uri, str) or (uri and not _STORAGE_URI.match(uri)):
            message = f"may be empty, or it must be a valid URI (scheme://...), got {uri!r}"
            raise fail(f"{field}[storage_uri]", message)
        if len(uri) > _STORAGE_URI_MAX:
            raise fail(f"{field}[storage_uri]", f"must be no more than {_STORAGE_URI_MAX} characters")
        out["storage_uri"] = uri
    env = check_str_map(given.get("env") or {}, f"{field}[env]")
    for var in env:
        check_env_name(var, f"{field}[env][{var}]")
    if len(env) > _ENV_MAX:
        raise fail(f"{field}[env]", f"must have at most {_ENV_MAX} items")
    out["env"] = env
    if given.get("secret") is not None:
        out["secret"] = validate_dns1123_subdomain(given["secret"], f"{field}[secret]")
    return out


def check_resources_per_node(value: Any, pod: Mapping[str, Any]) -> dict[str, Any] | None:
    """``resources_per_node={"cpu": 4, "memory": "16Gi", "nvidia.com/gpu": 1}`` (the Kubeflow SDK's shape)
    is requests and limits at once; with ``requests``/``limits``/``gpus`` too, which wins would be a guess."""
    if value is None:
        return None
    resources = dict(check_mapping(value, "resources_per_node"))
    for name in ("requests", "limits", "gpus"):
        if pod.get(name) not in (*_EMPTY, 0):
            raise fail("resources_per_node", f"conflicts with {name}: pass one or the other")
    return resources


def check_trainjob_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """Check a TrainJob's arguments (any of :data:`TRAINJOB_DEFAULTS`); return all, normalised."""
    job = with_defaults(values, TRAINJOB_DEFAULTS)
    validate_dns1123_subdomain(job["runtime"], "runtime")
    check_choice(job["runtime_kind"], RUNTIME_KINDS, "runtime_kind")
    check_optional_int(job["num_nodes"], "num_nodes", minimum=1, maximum=_INT32_MAX)
    check_optional_int(job["num_proc_per_node"], "num_proc_per_node", minimum=1, maximum=_INT32_MAX)
    job["dataset_initializer"] = check_initializer(job["dataset_initializer"], "dataset_initializer")
    job["model_initializer"] = check_initializer(job["model_initializer"], "model_initializer")
    check_optional_int(job["active_deadline_seconds"], "active_deadline_seconds", minimum=1)
    check_queue(job["queue_name"], job["suspend"])
    job["labels"] = validate_labels(job["labels"], "labels")
    job["annotations"] = validate_annotations(job["annotations"], "annotations")
    return job
