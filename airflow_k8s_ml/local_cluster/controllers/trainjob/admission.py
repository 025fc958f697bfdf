"""Admission of TrainJobs, TrainingRuntimes and ClusterTrainingRuntimes: the CRDs' defaults and CEL rules
(422 Invalid), then Kubeflow Trainer's validating webhooks (403, ``admission webhook "..." denied``).

The TrainJob webhook needs the referenced runtime (it must exist before the TrainJob), so its admission is
built with a lookup: :func:`trainjob_admission` returns the hook the controller registers.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from airflow_k8s_ml.k8s.names import dns1123_subdomain_errors, is_dns1035_label

from ... import errors
from ...meta import rfc3339
from ..crd_types import check_fields, check_type
from ..jobset.admission import spec_type_errors
from ..webhook import FieldError, denial, invalid, plain
from .api import (
    ANCESTOR_LABEL,
    ANCESTOR_TRAINER,
    CLUSTER_TRAINING_RUNTIME,
    DATASET_INITIALIZER,
    GROUP,
    INITIALIZER_VOLUME,
    KIND,
    MANAGER,
    MODEL_INITIALIZER,
    MULTIKUEUE_MANAGER,
    NODE,
    TORCH_RESERVED_ENVS,
    TRAINING_RUNTIME,
    WEBHOOK_CLUSTER_TRAINING_RUNTIME,
    WEBHOOK_TRAINING_RUNTIME,
    WEBHOOK_TRAINJOB,
    Obj,
    registry_key,
    supported,
    suspended,
)

RuntimeLookup = Callable[[str, str, str], Obj | None]  # (kind, namespace, name) -> runtime or None
Clock = Callable[[], float]
_IMMUTABLE = (
    ("runtimeRef", "object"),
    ("initializer", "object"),
    ("trainer", "object"),
    ("activeDeadlineSeconds", "integer"),
    ("managedBy", "string"),
)
_EXPECTED_CONTAINER = {
    ANCESTOR_TRAINER: NODE,
    DATASET_INITIALIZER: DATASET_INITIALIZER,
    MODEL_INITIALIZER: MODEL_INITIALIZER,
}


def _go_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


# -- TrainJob: CRD defaults and CEL rules ---------------------------------------------------------------
def stamp_runtime_patches(tj: Obj, old: Obj | None, now: float) -> None:
    """The mutating webhook (``defaulter.trainjob.trainer.kubeflow.org``): a runtime patch gets ``time`` when
    it is new or changed; an unchanged one keeps its old time."""
    before = {p.get("manager"): p for p in ((old or {}).get("spec") or {}).get("runtimePatches") or []}
    for patch in (tj.get("spec") or {}).get("runtimePatches") or []:
        previous = before.get(patch.get("manager"))
        if previous is not None:
            same = {**previous, "time": None} == {**patch, "time": None}
            patch["time"] = previous.get("time") if same else rfc3339(now)
        elif patch.get("time") is None:
            patch["time"] = rfc3339(now)


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
def _job_containers(runtime: Obj) -> dict[str, set[str]]:
    rjobs = (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "replicatedJobs"
    ) or []
    out: dict[str, set[str]] = {}
    for rjob in rjobs:
        pod = ((rjob.get("template") or {}).get("spec") or {}).get("template") or {}
        names = {c.get("name") for c in (pod.get("spec") or {}).get("containers") or []}
        names |= {c.get("name") for c in (pod.get("spec") or {}).get("initContainers") or []}
        out[str(rjob.get("name"))] = {str(n) for n in names}
    return out


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
    ref = _go_json(spec.get("runtimeRef"))
    containers = _job_containers(runtime)
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


def _manager_errors(manager: str) -> list[FieldError]:
    """``IsDomainPrefixedPath`` of a runtime patch's manager."""
    path = "spec.runtimePatches.manager"
    if not manager:
        return [(path, "FieldValueRequired", "Required value")]
    host, sep, rest = manager.partition("/")
    if not sep or not rest:
        return [invalid(path, f'"{manager}"', 'must be a domain-prefixed path (such as "acme.io/foo")')]
    return [invalid(path, f'"{host}"', m) for m in dns1123_subdomain_errors(host)]


_PATCH_PATH = "spec.runtimePatches"
_ENV_OWNED = (
    DATASET_INITIALIZER,
    MODEL_INITIALIZER,
    NODE,
)  # their env comes from the Trainer/Initializer APIs


def _pod_patch_errors(job: str, pod: Obj, known: set[str], value: str) -> list[FieldError]:
    problems: list[FieldError] = []
    for field, what in (("initContainers", "initContainer"), ("containers", "container")):
        for c in pod.get(field) or []:
            if c.get("name") not in known:
                detail = f"must not have {what} that doesn't exist in the runtime job {job}"
                problems.append(invalid(_PATCH_PATH, value, detail))
            elif field == "containers" and c.get("env") and c.get("name") in _ENV_OWNED:
                detail = f"must not have envs for the {', '.join(_ENV_OWNED)} containers"
                problems.append(invalid(_PATCH_PATH, value, detail))
    return problems


def _patch_errors(tj: Obj, runtime: Obj) -> list[FieldError]:
    """The jobset plugin's checks of ``runtimePatches``: a domain-prefixed manager, replicated jobs and
    containers that exist in the runtime, and no env for the node and initializer containers."""
    patches = (tj.get("spec") or {}).get("runtimePatches") or []
    value = _go_json(patches)
    containers = _job_containers(runtime)
    problems: list[FieldError] = []
    for patch in patches:
        problems += _manager_errors(str(patch.get("manager") or ""))
        spec = (((patch.get("trainingRuntimeSpec") or {}).get("template")) or {}).get("spec") or {}
        for rjob in spec.get("replicatedJobs") or []:
            name = str(rjob.get("name"))
            if name not in containers:
                detail = "must not have replicated job that doesn't exist in the runtime job template"
                problems.append(invalid(_PATCH_PATH, value, detail))
                continue
            pod = ((((rjob.get("template") or {}).get("spec") or {}).get("template")) or {}).get("spec") or {}
            problems += _pod_patch_errors(name, pod, containers[name], value)
    return problems


def _patches_changed_errors(tj: Obj, old: Obj | None) -> list[FieldError]:
    """``checkRuntimePatchesImmutability``: patches change only while the TrainJob is (or becomes)
    suspended."""
    if old is None:
        return []
    strip = lambda ps: [{**p, "time": None} for p in ps or []]  # noqa: E731 - the webhook's own stamp aside
    before = strip((old.get("spec") or {}).get("runtimePatches"))
    after = strip((tj.get("spec") or {}).get("runtimePatches"))
    if before == after or suspended(old) or suspended(tj):
        return []
    detail = "RuntimePatches can only be modified when the TrainJob is suspended before or after the update"
    return [(_PATCH_PATH, "FieldValueForbidden", f"Forbidden: {detail}")]


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
            _go_json(env),
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
                _go_json(ref),
                f'{plural}.{GROUP} "{name}" not found: specified {what} must be created before the '
                "TrainJob is created",
            )
        ]
    return _initializer_errors(tj, runtime) + _patch_errors(tj, runtime) + _torch_errors(tj, runtime)


def trainjob_admission(lookup: RuntimeLookup, clock: Clock) -> Callable[[Obj, Obj | None], Obj]:
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
        denied = webhook_errors(tj, lookup) + _patches_changed_errors(tj, old)
        if denied:
            raise denial(WEBHOOK_TRAINJOB, GROUP, "trainjobs", name, denied)
        return tj

    return admit


# -- TrainingRuntime / ClusterTrainingRuntime: the validating webhooks -------------------------------------
def runtime_errors(runtime: Obj) -> list[FieldError]:
    """``validateReplicatedJobs``: initializer and trainer jobs have one replica and their container."""
    base = "spec.template.spec.replicatedJobs"
    rjobs = (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "replicatedJobs"
    ) or []
    problems: list[FieldError] = []
    for index, rjob in enumerate(rjobs):
        labels = ((rjob.get("template") or {}).get("metadata") or {}).get("labels")
        step = (labels or {}).get(ANCESTOR_LABEL)
        if step not in _EXPECTED_CONTAINER:
            continue
        replicas = rjob.get("replicas", 1)
        if replicas != 1:
            problems.append(invalid(f"{base}[{index}].replicas", str(replicas), "always must be 1"))
        pod = ((rjob.get("template") or {}).get("spec") or {}).get("template") or {}
        containers = (pod.get("spec") or {}).get("containers") or []
        if not any(c.get("name") == _EXPECTED_CONTAINER[step] for c in containers):
            problems.append(
                invalid(
                    f"{base}[{index}].template.spec.template.spec.containers",
                    _go_json(containers),
                    f"must contain the required container for the ancestor: {step}",
                )
            )
    return problems


def runtime_admission(kind: str) -> Callable[[Obj, Obj | None], Obj]:
    webhook = (
        WEBHOOK_CLUSTER_TRAINING_RUNTIME if kind == CLUSTER_TRAINING_RUNTIME else WEBHOOK_TRAINING_RUNTIME
    )
    plural = kind.lower() + "s"

    def admit(obj: Obj, old: Obj | None) -> Obj:
        name = (obj.get("metadata") or {}).get("name", "")
        spec = obj.get("spec", {})
        typed = check_type("spec", spec, "object")
        if not typed:
            typed = check_fields(spec, "spec", {"mlPolicy": "object", "template": "object"})
            typed += check_fields(
                spec.get("mlPolicy"), "spec.mlPolicy", {"numNodes": "integer", "torch": "object"}
            )
            template = spec.get("template")
            if isinstance(template, dict) and "spec" in template:
                typed += spec_type_errors(template["spec"], "spec.template.spec")
        if typed:
            raise errors.invalid(kind, GROUP, plural, name, typed)
        if old is not None:  # ValidateUpdate accepts everything
            return obj
        problems = runtime_errors(obj)
        if problems:
            raise denial(webhook, GROUP, plural, name, problems)
        return obj

    return admit


__all__ = ["TRAINING_RUNTIME", "runtime_admission", "runtime_errors", "trainjob_admission", "webhook_errors"]
