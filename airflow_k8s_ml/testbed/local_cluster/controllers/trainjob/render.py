"""A TrainJob plus its runtime rendered into a JobSet, as Kubeflow Trainer's runtime framework does (pure).

Follows pkg/runtime/core/trainingruntime.go (``newRuntimeInfo``: pod counts, ``resourcesPerNode`` merged
into the trainer's ``node`` container), the torch plugin (``EnforceMLPolicy``: ``PET_*`` environment,
trainer port), the plainml plugin (node count and env without an ML framework), and the jobset plugin
(``syncParallelCount``, ``Build``: initializer and trainer overrides, suspend, controller ownerReference).
"""

from __future__ import annotations

import copy
import math

from airflow_k8s_ml.k8s import quantities

from ...meta import owner_reference
from ...patch import strategic_merge_patch
from .api import (
    ANCESTOR_LABEL,
    ANCESTOR_TRAINER,
    COMPLETION_INDEX_FIELD,
    DATASET_INITIALIZER,
    MODEL_INITIALIZER,
    NODE,
    PET_MASTER_ADDR,
    PET_MASTER_PORT,
    PET_NNODES,
    PET_NODE_RANK,
    PET_NPROC_PER_NODE,
    STORAGE_URI_ENV,
    TRAINER_PORT,
    Obj,
    master_addr,
)

JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"


def upsert_env(env: list[Obj], *new: Obj) -> None:
    """``apply.UpsertEnvVars``: replace a variable of the same name in place, else append."""
    for var in new:
        for i, current in enumerate(env):
            if current.get("name") == var.get("name"):
                env[i] = copy.deepcopy(var)
                break
        else:
            env.append(copy.deepcopy(var))


def _upsert_port(ports: list[Obj], port: int) -> None:
    if not any(p.get("containerPort") == port for p in ports):
        ports.append({"containerPort": port})


def _ancestor(rjob: Obj) -> str | None:
    return ((rjob.get("template") or {}).get("metadata") or {}).get("labels", {}).get(ANCESTOR_LABEL)


def _containers(rjob: Obj) -> list[Obj]:
    pod = rjob.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
    return list(pod.setdefault("spec", {}).setdefault("containers", []))


def _node_container(rjob: Obj) -> Obj | None:
    return next((c for c in _containers(rjob) if c.get("name") == NODE), None)


def merge_resources(base: Obj, override: Obj) -> Obj:
    """``MergeResourceRequirements``: a strategic merge, resource by resource within limits and requests."""
    merged = copy.deepcopy(base)
    for key in ("limits", "requests", "claims"):
        if key not in override:
            continue
        if key == "claims":
            merged[key] = copy.deepcopy(override[key])
        else:
            merged[key] = {**(merged.get(key) or {}), **(override[key] or {})}
    return merged


def _gpus(resources: Obj) -> int:
    """``GetNumGPUPerNode``: the first resource whose name contains "gpu", requests before limits."""

    def count(values: Obj | None) -> int:
        for name, value in (values or {}).items():
            if "gpu" in name.lower():
                return math.ceil(quantities.parse(value))
        return 0

    return count(resources.get("requests")) or count(resources.get("limits"))


def _cpus(resources: Obj) -> int:
    """``getNumCPUPerNode``: the CPU request rounded up (``Quantity.Value``), else the limit, else 0."""
    request = (resources.get("requests") or {}).get("cpu")
    if request is not None and quantities.parse(request) != 0:
        return math.ceil(quantities.parse(request))
    limit = (resources.get("limits") or {}).get("cpu")
    return math.ceil(quantities.parse(limit)) if limit is not None else 0


def nproc_per_node(trainer: Obj, runtime_resources: Obj) -> str:
    """Torch's ``numProcPerNode``: the TrainJob's integer, else "auto", which becomes the node's CPU count
    (at least 1) when the node has no GPU (torchrun's "auto" would count host CPUs instead)."""
    if trainer.get("numProcPerNode") is not None:
        return str(int(trainer["numProcPerNode"]))
    resources = (
        trainer.get("resourcesPerNode") if trainer.get("resourcesPerNode") is not None else runtime_resources
    )
    if _gpus(resources or {}) == 0:
        return str(max(1, _cpus(resources or {})))
    return "auto"


def _runtime_node_resources(rjobs: list[Obj]) -> Obj:
    """``ExtractResourcePerNodeFromRuntime``: the ``node`` container of the trainer (or ``node``) job."""
    for rjob in rjobs:
        if rjob.get("name") == NODE or _ancestor(rjob) == ANCESTOR_TRAINER:
            for container in _containers(rjob):
                if container.get("name") == NODE and container.get("resources") is not None:
                    return dict(container["resources"])
    return {}


def _pet_env(name: str, nodes: int, nproc: str) -> list[Obj]:
    return [
        {"name": PET_NNODES, "value": str(nodes)},
        {"name": PET_NPROC_PER_NODE, "value": nproc},
        {"name": PET_NODE_RANK, "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_FIELD}}},
        {"name": PET_MASTER_ADDR, "value": master_addr(name)},
        {"name": PET_MASTER_PORT, "value": str(TRAINER_PORT)},
    ]


def _apply_trainer(rjob: Obj, tj: Obj, ml_policy: Obj | None, runtime_resources: Obj) -> None:
    """The trainer job: its pod count, resources, image/command/args, env, and torch's PET_* and port."""
    trainer = (tj.get("spec") or {}).get("trainer")
    job_spec = rjob["template"].setdefault("spec", {})
    count = int(job_spec.get("parallelism") or 1)
    if ml_policy is not None:
        count = int(ml_policy.get("numNodes") or 1)
        if trainer is not None and trainer.get("numNodes") is not None:
            count = int(trainer["numNodes"])
    job_spec["parallelism"] = job_spec["completions"] = count
    rjob["replicas"] = 1
    container = _node_container(rjob)
    if container is None:
        return
    if trainer is not None and trainer.get("resourcesPerNode") is not None and ml_policy is not None:
        container["resources"] = merge_resources(
            container.get("resources") or {}, trainer["resourcesPerNode"]
        )
    env: list[Obj] = container.setdefault("env", [])
    if trainer is not None:
        upsert_env(env, *(trainer.get("env") or []))
    if ml_policy is not None and ml_policy.get("torch") is not None and trainer is not None:
        nproc = nproc_per_node(trainer, runtime_resources)
        upsert_env(env, *_pet_env(tj["metadata"]["name"], count, nproc))
        _upsert_port(container.setdefault("ports", []), TRAINER_PORT)
    if trainer is not None:
        for key in ("image", "command", "args"):
            if trainer.get(key) is not None:
                container[key] = copy.deepcopy(trainer[key])
    if not env:
        container.pop("env")


def _apply_initializer(rjob: Obj, tj: Obj, step: str) -> None:
    """``Builder.Initializer``: one replica; STORAGE_URI, env and the credentials Secret on its container."""
    rjob["replicas"] = 1
    initializer = ((tj.get("spec") or {}).get("initializer") or {}).get(
        "dataset" if step == DATASET_INITIALIZER else "model"
    )
    for container in _containers(rjob):
        if container.get("name") != step or initializer is None:
            continue
        env: list[Obj] = container.setdefault("env", [])
        if initializer.get("storageUri") is not None:
            upsert_env(env, {"name": STORAGE_URI_ENV, "value": initializer["storageUri"]})
        upsert_env(env, *(initializer.get("env") or []))
        if initializer.get("secretRef") is not None:
            container.setdefault("envFrom", []).append(
                {"secretRef": {"name": initializer["secretRef"]["name"]}}
            )


def apply_runtime_patches(tj: Obj, template: Obj) -> Obj:
    """``mergeRuntimePatches`` and the propagated metadata of ``newRuntimeInfo``: each patch's JobSet spec is
    strategically merged into the template's in order (replicated jobs keep the runtime's order), and its
    template labels and annotations are added to the JobSet's."""
    merged = copy.deepcopy(template)
    spec: Obj = merged.setdefault("spec", {})
    order = {r.get("name"): i for i, r in enumerate(spec.get("replicatedJobs") or [])}
    meta: Obj = merged.setdefault("metadata", {})
    for patch in (tj.get("spec") or {}).get("runtimePatches") or []:
        patched = ((patch.get("trainingRuntimeSpec") or {}).get("template")) or {}
        for key in ("labels", "annotations"):
            if (patched.get("metadata") or {}).get(key):
                meta[key] = {**(meta.get(key) or {}), **patched["metadata"][key]}
        if patched.get("spec") is not None:
            spec = strategic_merge_patch(spec, patched["spec"], "JobSetSpec")
    spec["replicatedJobs"] = sorted(
        spec.get("replicatedJobs") or [], key=lambda r: order.get(r.get("name"), len(order))
    )
    merged["spec"] = spec
    return merged


def render_jobset(tj: Obj, runtime: Obj) -> Obj:
    """The JobSet for ``tj`` from ``runtime`` (a TrainingRuntime or ClusterTrainingRuntime)."""
    rspec = runtime.get("spec") or {}
    template = apply_runtime_patches(tj, rspec.get("template") or {})
    tmeta = template.get("metadata") or {}
    spec: Obj = template.get("spec") or {}
    ml_policy = rspec.get("mlPolicy")
    rjobs: list[Obj] = spec.setdefault("replicatedJobs", [])
    runtime_resources = _runtime_node_resources(rjobs)
    for rjob in rjobs:
        step = _ancestor(rjob)
        job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
        job_spec["parallelism"] = job_spec["completions"] = int(job_spec.get("parallelism") or 1)
        if step == ANCESTOR_TRAINER:
            _apply_trainer(rjob, tj, ml_policy, runtime_resources)
        elif step in (DATASET_INITIALIZER, MODEL_INITIALIZER):
            _apply_initializer(rjob, tj, step)
    suspend = (tj.get("spec") or {}).get("suspend")
    if suspend is not None:
        spec["suspend"] = bool(suspend)
    meta: Obj = {
        "name": tj["metadata"]["name"],
        "namespace": tj["metadata"]["namespace"],
        "ownerReferences": [owner_reference(tj)],
    }
    if tmeta.get("labels"):
        meta["labels"] = dict(tmeta["labels"])
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    return {"apiVersion": JOBSET_API_VERSION, "kind": "JobSet", "metadata": meta, "spec": spec}
