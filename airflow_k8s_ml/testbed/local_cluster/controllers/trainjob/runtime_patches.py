"""Kubeflow Trainer v2.3 ``runtimePatches`` on TrainJobs: the mutating webhook's ``time`` stamp and the
validating webhook's checks (the jobset plugin's ``Validate`` and ``checkRuntimePatchesImmutability``).
Applying them is :func:`.render.apply_runtime_patches`.
"""

from __future__ import annotations

from airflow_k8s_ml.k8s.names import dns1123_subdomain_errors

from ...meta import rfc3339
from ..webhook import FieldError, invalid, render_value
from .api import DATASET_INITIALIZER, MODEL_INITIALIZER, NODE, Obj, job_containers, suspended


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


def patch_errors(tj: Obj, runtime: Obj) -> list[FieldError]:
    """The jobset plugin's checks of ``runtimePatches``: a domain-prefixed manager, replicated jobs and
    containers that exist in the runtime, and no env for the node and initializer containers."""
    patches = (tj.get("spec") or {}).get("runtimePatches") or []
    value = render_value(patches)
    containers = job_containers(runtime)
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


def patches_changed_errors(tj: Obj, old: Obj | None, jobset: Obj | None) -> list[FieldError]:
    """``checkRuntimePatchesImmutability``: patches change only while the TrainJob is (or becomes)
    suspended, and not while a replicated job of its JobSet still has active Jobs."""
    if old is None:
        return []
    strip = lambda ps: [{**p, "time": None} for p in ps or []]  # noqa: E731 - the webhook's own stamp aside
    before = strip((old.get("spec") or {}).get("runtimePatches"))
    after = strip((tj.get("spec") or {}).get("runtimePatches"))
    if before == after:
        return []
    if not (suspended(old) or suspended(tj)):
        detail = (
            "RuntimePatches can only be modified when the TrainJob is suspended before or after the update"
        )
        return [(_PATCH_PATH, "FieldValueForbidden", f"Forbidden: {detail}")]
    active = [
        s["name"]
        for s in ((jobset or {}).get("status") or {}).get("replicatedJobsStatus") or []
        if int(s.get("active") or 0) > 0
    ]
    return [
        (
            _PATCH_PATH,
            "FieldValueForbidden",
            f"Forbidden: RuntimePatches cannot be modified when the JobSet's ReplicatedJob {name} "
            "is still active",
        )
        for name in active
    ]
