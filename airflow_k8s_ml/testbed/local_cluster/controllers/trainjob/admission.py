"""Admission of TrainJobs: the CRD's field types, defaults and CEL rules (422 Invalid), the mutating
webhook, then Kubeflow Trainer's validating webhook (403, ``admission webhook "..." denied``). Runtime
patches are checked in :mod:`.runtime_patches`, the runtimes themselves in :mod:`.runtime_admission`.

The TrainJob webhook needs the referenced runtime (it must exist before the TrainJob), so its admission is
built with a lookup: :func:`trainjob_admission` returns the hook the controller registers.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from airflow_k8s_ml.k8s.names import is_dns1035_label

from ... import errors
from ..crd_types import check_fields, check_type
from ..webhook import FieldError, denial, invalid, plain, render_value
from .api import (
    CLUSTER_TRAINING_RUNTIME,
    DATASET_INITIALIZER,
    GROUP,
    INITIALIZER_VOLUME,
    KIND,
    MANAGER,
    MODEL_INITIALIZER,
    MULTIKUEUE_MANAGER,
    TORCH_RESERVED_ENVS,
    WEBHOOK_TRAINJOB,
    Obj,
    job_containers,
    registry_key,
    supported,
)
from .runtime_patches import patch_errors, patches_changed_errors, stamp_runtime_patches

RuntimeLookup = Callable[[str, str, str], Obj | None]  # (kind, namespace, name) -> runtime or None
JobSetLookup = Callable[[str, str], Obj | None]  # (namespace, name) -> the TrainJob's JobSet or None
Clock = Callable[[], float]
_IMMUTABLE = (
    ("runtimeRef", "object"),
    ("initializer", "object"),
    ("trainer", "object"),
    ("activeDeadlineSeconds", "integer"),
    ("managedBy", "string"),
)


# -- TrainJob: CRD defaults and CEL rules ---------------------------------------------------------------
def set_defaults(tj: Obj) -> None:
    spec = tj.setdefault("spec", {})
    ref = spec.setdefault("runtimeRef", {})
    ref.setdefault("apiGroup", GROUP)
    ref.setdefault("kind", CLUSTER_TRAINING_RUNTIME)
    spec.setdefault("suspend", False)
    spec.setdefault("managedBy", MANAGER)


def type_errors(tj: Obj) -> list[FieldError]:
    """The CRD schema's types for the fields the controller reads."""
    spec = tj.get("spec", {})
    problems = check_type("spec", spec, "object")
    if problems:
        return problems
    problems += check_fields(
        spec,
        "spec",
        {
            "runtimeRef": "object",
            "trainer": "object",
            "initializer": "object",
            "suspend": "boolean",
            "activeDeadlineSeconds": "integer",
            "managedBy": "string",
            "runtimePatches": "array",
        },
    )
    problems += check_fields(
        spec.get("runtimeRef"), "spec.runtimeRef", {"name": "string", "apiGroup": "string", "kind": "string"}
    )
    problems += check_fields(
        spec.get("trainer"),
        "spec.trainer",
        {
            "image": "string",
            "command": "array",
            "args": "array",
            "env": "array",
            "numNodes": "integer",
            "numProcPerNode": "integer",
            "resourcesPerNode": "object",
        },
    )
    initializer = spec.get("initializer")
    for key in ("dataset", "model"):
        step = initializer.get(key) if isinstance(initializer, dict) else None
        problems += check_type(f"spec.initializer.{key}", step, "object")
        problems += check_fields(
            step, f"spec.initializer.{key}", {"storageUri": "string", "env": "array", "secretRef": "object"}
        )
    return problems


def crd_errors(tj: Obj, old: Obj | None) -> list[FieldError]:
    """The CRD's x-kubernetes-validations and minimums, as the apiserver reports them."""
    problems: list[FieldError] = []
    name = (tj.get("metadata") or {}).get("name", "")
    if name and not is_dns1035_label(name):
        problems.append(invalid("<nil>", '"object"', "metadata.name must match RFC 1035 DNS label format"))
    spec = tj.get("spec") or {}
    if not (spec.get("runtimeRef") or {}).get("name"):
        problems.append(("spec.runtimeRef.name", "FieldValueRequired", "Required value"))
    manager = spec.get("managedBy")
    if manager is not None and manager not in (MANAGER, MULTIKUEUE_MANAGER):
        problems.append(
            invalid(
                "spec.managedBy",
                '"string"',
                f"ManagedBy must be {MANAGER} or {MULTIKUEUE_MANAGER} if set",
            )
        )
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and int(deadline) < 1:
        problems.append(
            invalid(
                "spec.activeDeadlineSeconds",
                str(deadline),
                "spec.activeDeadlineSeconds in body should be greater than or equal to 1",
            )
        )
    trainer = spec.get("trainer") or {}
    if trainer.get("numNodes") is not None and int(trainer["numNodes"]) < 0:
        problems.append(
            invalid(
                "spec.trainer.numNodes",
                str(trainer["numNodes"]),
                "spec.trainer.numNodes in body should be greater than or equal to 0",
            )
        )
    if trainer.get("numProcPerNode") is not None and int(trainer["numProcPerNode"]) < 1:
        problems.append(
            invalid(
                "spec.trainer.numProcPerNode",
                '"integer"',
                "numProcPerNode must be greater than or equal to 1",
            )
        )
    if old is not None:
        old_spec = old.get("spec") or {}
        for key, type_ in _IMMUTABLE:
            if key in old_spec and spec.get(key) != old_spec.get(key):
                problems.append(invalid(f"spec.{key}", f'"{type_}"', "field is immutable"))
    return problems


# -- TrainJob: the validating webhook --------------------------------------------------------------------
def _has_initializer_mount(runtime: Obj, step: str) -> bool:
    rjobs = (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "replicatedJobs"
    ) or []
    for rjob in rjobs:
        if rjob.get("name") != step:
            continue
        pod = ((rjob.get("template") or {}).get("spec") or {}).get("template") or {}
        for container in (pod.get("spec") or {}).get("containers") or []:
            if container.get("name") == step:
                return any(m.get("name") == INITIALIZER_VOLUME for m in container.get("volumeMounts") or [])
    return False


def _initializer_errors(tj: Obj, runtime: Obj) -> list[FieldError]:
    """The jobset plugin's ``Validate``: a configured initializer needs its job, container and mount."""
    spec = tj.get("spec") or {}
    ref = render_value(spec.get("runtimeRef"))
    containers = job_containers(runtime)
    problems: list[FieldError] = []
    for key, step, config in (
        ("dataset", DATASET_INITIALIZER, "datasetConfig"),
        ("model", MODEL_INITIALIZER, "modelConfig"),
    ):
        if ((spec.get("initializer") or {}).get(key)) is None:
            continue
        if step not in containers:
            problems.append(
                invalid(
                    "spec.runtimeRef",
                    ref,
                    f"must have {step} job when trainJob is configured with input {config}",
                )
            )
        elif step not in containers[step]:
            problems.append(
                invalid("spec.runtimeRef", ref, f"must have container with name - {step} in the {step} job")
            )
        elif not _has_initializer_mount(runtime, step):
            problems.append(
                invalid(
                    "spec.runtimeRef",
                    ref,
                    f"must have volumeMount with name - {INITIALIZER_VOLUME} in container {step} "
                    f"of the {step} job",
                )
            )
    return problems


def _torch_errors(tj: Obj, runtime: Obj) -> list[FieldError]:
    """The torch plugin's ``Validate``: the PET_* variables are the plugin's to set."""
    if ((runtime.get("spec") or {}).get("mlPolicy") or {}).get("torch") is None:
        return []
    env = ((tj.get("spec") or {}).get("trainer") or {}).get("env") or []
    reserved = sorted({str(v.get("name")) for v in env if v.get("name") in TORCH_RESERVED_ENVS})
    if not reserved:
        return []
    return [
        invalid(
            "spec.trainer.env",
            render_value(env),
            f"must not have reserved envs, invalid envs configured: [{' '.join(reserved)}]",
        )
    ]


def webhook_errors(tj: Obj, lookup: RuntimeLookup) -> list[FieldError]:
    if not supported(tj):
        return [plain(f"unsupported runtime: {registry_key(tj)}")]
    ref = (tj.get("spec") or {}).get("runtimeRef") or {}
    kind, name = str(ref.get("kind")), str(ref.get("name", ""))
    namespace = (tj.get("metadata") or {}).get("namespace", "")
    runtime = lookup(kind, namespace, name)
    if runtime is None:
        cluster = kind == CLUSTER_TRAINING_RUNTIME
        plural = "clustertrainingruntimes" if cluster else "trainingruntimes"
        path = "spec.RuntimeRef" if cluster else "spec.runtimeRef"
        what = "clusterTrainingRuntime" if cluster else "trainingRuntime"
        return [
            invalid(
                path,
                render_value(ref),
                f'{plural}.{GROUP} "{name}" not found: specified {what} must be created before the '
                "TrainJob is created",
            )
        ]
    return _initializer_errors(tj, runtime) + patch_errors(tj, runtime) + _torch_errors(tj, runtime)


def trainjob_admission(
    lookup: RuntimeLookup, clock: Clock, find_jobset: JobSetLookup = lambda _ns, _name: None
) -> Callable[[Obj, Obj | None], Obj]:
    def admit(obj: Obj, old: Obj | None) -> Obj:
        tj = copy.deepcopy(obj)
        name = (tj.get("metadata") or {}).get("name", "")
        typed = type_errors(tj)
        if typed:
            raise errors.invalid(KIND, GROUP, "trainjobs", name, typed)
        set_defaults(tj)
        stamp_runtime_patches(tj, old, clock())
        problems = crd_errors(tj, old)
        if problems:
            raise errors.invalid(KIND, GROUP, "trainjobs", name, problems)
        meta = tj.get("metadata") or {}
        jobset = find_jobset(meta.get("namespace", ""), meta.get("name", "")) if old is not None else None
        denied = webhook_errors(tj, lookup) + patches_changed_errors(tj, old, jobset)
        if denied:
            raise denial(WEBHOOK_TRAINJOB, GROUP, "trainjobs", name, denied)
        return tj

    return admit


__all__ = ["trainjob_admission", "webhook_errors"]
